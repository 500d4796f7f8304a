//! What every record reader shares: one named, possibly compressed byte
//! stream read front to back, the offset of the next item, errors that name
//! the file and offset, and a fuse (after an error or the end, no more items).

use std::io::{BufRead, Read};

use tfdata_core::{Error, Result};

use super::compression::{
    CompressionType, DEFAULT_BUFFER_SIZE, decompressing_reader, is_corruption, location,
};
use super::fs::FileSystem;

pub(crate) struct ItemStream {
    pub(crate) name: String,
    pub(crate) compression: CompressionType,
    pub(crate) input: Box<dyn BufRead + Send>,
    /// Uncompressed offset of the next item.
    pub(crate) offset: u64,
    done: bool,
    /// What one item is called in errors ("line", "record").
    item: &'static str,
}

impl ItemStream {
    pub(crate) fn open_on(
        fs: &dyn FileSystem,
        path: &str,
        compression: CompressionType,
        item: &'static str,
    ) -> Result<Self> {
        Ok(Self::new(
            path,
            Box::new(fs.open(path)?),
            compression,
            DEFAULT_BUFFER_SIZE,
            item,
        ))
    }

    pub(crate) fn new(
        name: impl Into<String>,
        input: Box<dyn Read + Send>,
        compression: CompressionType,
        buffer_size: usize,
        item: &'static str,
    ) -> Self {
        ItemStream {
            name: name.into(),
            compression,
            input: decompressing_reader(input, compression, buffer_size),
            offset: 0,
            done: false,
            item,
        }
    }

    /// The next item as `read` parses it; after an error or the end, always
    /// `Ok(None)`.
    pub(crate) fn next_item<T>(
        &mut self,
        read: impl FnOnce(&mut Self) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        if self.done {
            return Ok(None);
        }
        let result = read(self);
        if !matches!(result, Ok(Some(_))) {
            self.done = true;
        }
        result
    }

    pub(crate) fn data_loss(&self, offset: u64, reason: String) -> Error {
        Error::DataLoss {
            location: location(&self.name, self.compression, offset),
            reason,
        }
    }

    /// A failed read of the item at `offset`: corruption if the decompressor
    /// rejected its input, an I/O error otherwise.
    pub(crate) fn read_error(&self, offset: u64, err: std::io::Error) -> Error {
        if is_corruption(self.compression, &err) {
            self.data_loss(
                offset,
                format!(
                    "{} stream is corrupt or truncated while reading the {} at offset \
                     {offset}: {err}",
                    self.compression, self.item
                ),
            )
        } else {
            Error::io(
                format!("reading {}", location(&self.name, self.compression, offset)),
                err,
            )
        }
    }

    pub(crate) fn debug(&self, f: &mut std::fmt::Formatter<'_>, kind: &str) -> std::fmt::Result {
        f.debug_struct(kind)
            .field("name", &self.name)
            .field("compression", &self.compression)
            .field("offset", &self.offset)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}
