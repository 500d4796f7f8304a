//! What every record reader shares: opening a file by path or URL (or
//! wrapping any byte stream), decompressing it through a buffer of a chosen
//! size, one named stream read front to back, the offset of the next item,
//! errors that name the file and offset, and a fuse (after an error or the
//! end, no more items). The readers' constructors are these, with the word
//! for their item.

use std::io::{BufRead, Read};

use tfdata_core::{Error, Result};

use super::compression::{
    CompressionType, DEFAULT_BUFFER_SIZE, decompressing_reader, is_corruption, location,
};
use super::fs::FileSystem;
use super::registry::file_system;

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
    /// Opens `path` (a local path or URL, see [`super::fs`]) with the
    /// default buffer; `item` is what one item is called in errors.
    pub(crate) fn open(
        path: &str,
        compression: CompressionType,
        item: &'static str,
    ) -> Result<Self> {
        Self::open_on(&*file_system(path)?, path, compression, item)
    }

    /// Opens `path` on a given file system, with the default buffer.
    pub(crate) fn open_on(
        fs: &dyn FileSystem,
        path: &str,
        compression: CompressionType,
        item: &'static str,
    ) -> Result<Self> {
        Ok(Self::new(
            path,
            fs.open(path)?,
            compression,
            DEFAULT_BUFFER_SIZE,
            item,
        ))
    }

    /// Reads any byte stream; `name` is what errors call it. `buffer_size`
    /// is TensorFlow's: the bytes read from `input` at a time (and, for
    /// compressed files, the size of the decompressor's buffers).
    pub(crate) fn new(
        name: impl Into<String>,
        input: impl Read + Send + 'static,
        compression: CompressionType,
        buffer_size: usize,
        item: &'static str,
    ) -> Self {
        ItemStream {
            name: name.into(),
            compression,
            input: decompressing_reader(Box::new(input), compression, buffer_size),
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
