//! TensorFlow's `compression_type` for file sources and sinks, shared by the
//! TFRecord and text readers.
//!
//! Stream details, verified against TensorFlow 2.21:
//!
//! * `GZIP` is the gzip container; a file of several concatenated gzip
//!   members reads as their concatenation, and bytes after the last member
//!   that are not a gzip header are an error;
//! * `ZLIB` is the zlib container (RFC 1950, `78 9c ...`), one stream: bytes
//!   after its end are ignored.
//!
//! Where TensorFlow silently stops at a compressed stream that ends early (a
//! truncated `.gz`), tfdata reports [`tfdata_core::Error::DataLoss`]: a
//! truncated file is corruption, and silently dropping its tail would make a
//! training run see less data than it should without anyone noticing.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::str::FromStr;

use flate2::Compression;
use flate2::bufread::{MultiGzDecoder, ZlibDecoder};
use flate2::write::{GzEncoder, ZlibEncoder};
use tfdata_core::{Error, Result};

/// How a file's bytes are compressed, with TensorFlow's names: the
/// `compression_type` argument of `TFRecordDataset`, `TextLineDataset` and
/// `tf.io.TFRecordOptions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CompressionType {
    /// `""`: stored as is.
    #[default]
    None,
    /// `"GZIP"`.
    Gzip,
    /// `"ZLIB"`.
    Zlib,
}

impl CompressionType {
    /// Parses TensorFlow's spelling: `""`, `"GZIP"` or `"ZLIB"`, exactly.
    ///
    /// Anything else is [`Error::InvalidArgument`] listing the valid values.
    /// TensorFlow's `TFRecordDataset` op quietly reads an unknown value (even
    /// `"gzip"`) as uncompressed, which turns a typo into a "corrupted
    /// record" error far away; tfdata rejects it up front, as
    /// `tf.io.TFRecordOptions` and `TextLineDataset` do.
    pub fn parse(value: &str) -> Result<Self> {
        match value {
            "" => Ok(Self::None),
            "GZIP" => Ok(Self::Gzip),
            "ZLIB" => Ok(Self::Zlib),
            other => Err(Error::InvalidArgument(format!(
                "compression_type {other:?} is not supported; \
                 valid values are \"\" (none), \"GZIP\" and \"ZLIB\""
            ))),
        }
    }

    /// TensorFlow's spelling, the inverse of [`CompressionType::parse`].
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "",
            Self::Gzip => "GZIP",
            Self::Zlib => "ZLIB",
        }
    }
}

impl FromStr for CompressionType {
    type Err = Error;

    fn from_str(value: &str) -> Result<Self> {
        Self::parse(value)
    }
}

impl fmt::Display for CompressionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Default read buffer, TensorFlow's default `buffer_size` for
/// `TFRecordDataset` (256 KiB): large enough to amortise object-store
/// round trips later, small enough to hold one per open file.
pub const DEFAULT_BUFFER_SIZE: usize = 256 * 1024;

/// Wraps a raw file stream in buffering and, if needed, decompression,
/// giving the uncompressed bytes.
pub fn decompressing_reader(
    input: Box<dyn Read + Send>,
    compression: CompressionType,
    buffer_size: usize,
) -> Box<dyn BufRead + Send> {
    let buffer_size = buffer_size.max(1);
    match compression {
        CompressionType::None => Box::new(BufReader::with_capacity(buffer_size, input)),
        CompressionType::Gzip => Box::new(BufReader::with_capacity(
            buffer_size,
            MultiGzDecoder::new(BufReader::with_capacity(buffer_size, input)),
        )),
        CompressionType::Zlib => Box::new(BufReader::with_capacity(
            buffer_size,
            ZlibDecoder::new(BufReader::with_capacity(buffer_size, input)),
        )),
    }
}

/// Whether an I/O error coming out of a decompressor means the compressed
/// bytes are bad (corrupt or cut short) rather than that reading failed.
pub(crate) fn is_corruption(compression: CompressionType, err: &io::Error) -> bool {
    compression != CompressionType::None
        && matches!(
            err.kind(),
            io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
        )
}

/// Where an error at uncompressed `offset` of `name` is: the byte offset,
/// marked as an offset in the uncompressed stream for compressed files.
pub(crate) fn location(name: &str, compression: CompressionType, offset: u64) -> String {
    match compression {
        CompressionType::None => format!("{name} at offset {offset}"),
        c => format!("{name} at offset {offset} of the uncompressed {c} stream"),
    }
}

/// A writer that compresses what it is given; [`Compressor::finish`] writes
/// the compressed stream's trailer and returns the inner writer.
pub(crate) enum Compressor<W: Write> {
    None(W),
    Gzip(GzEncoder<W>),
    Zlib(ZlibEncoder<W>),
}

impl<W: Write> Compressor<W> {
    pub(crate) fn new(out: W, compression: CompressionType) -> Self {
        // Level 6 is zlib's default, which TensorFlow's writers use too.
        let level = Compression::default();
        match compression {
            CompressionType::None => Self::None(out),
            CompressionType::Gzip => Self::Gzip(GzEncoder::new(out, level)),
            CompressionType::Zlib => Self::Zlib(ZlibEncoder::new(out, level)),
        }
    }

    pub(crate) fn finish(self) -> io::Result<W> {
        match self {
            Self::None(w) => Ok(w),
            Self::Gzip(w) => w.finish(),
            Self::Zlib(w) => w.finish(),
        }
    }
}

impl<W: Write> Write for Compressor<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::None(w) => w.write(buf),
            Self::Gzip(w) => w.write(buf),
            Self::Zlib(w) => w.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Self::None(w) => w.write_all(buf),
            Self::Gzip(w) => w.write_all(buf),
            Self::Zlib(w) => w.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::None(w) => w.flush(),
            Self::Gzip(w) => w.flush(),
            Self::Zlib(w) => w.flush(),
        }
    }
}

/// Reads until a buffer is full or the input ends (core's one copy).
pub(crate) use tfdata_core::tfrecord::read_full;

#[cfg(test)]
mod tests {
    use super::*;

    fn compress(data: &[u8], c: CompressionType) -> Vec<u8> {
        let mut w = Compressor::new(Vec::new(), c);
        w.write_all(data).unwrap();
        w.finish().unwrap()
    }

    fn decompress(data: Vec<u8>, c: CompressionType) -> io::Result<Vec<u8>> {
        let mut r = decompressing_reader(Box::new(io::Cursor::new(data)), c, 7);
        let mut out = Vec::new();
        r.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn parse_accepts_tensorflow_spellings_only() {
        for c in [
            CompressionType::None,
            CompressionType::Gzip,
            CompressionType::Zlib,
        ] {
            assert_eq!(CompressionType::parse(c.as_str()).unwrap(), c);
            assert_eq!(c.to_string().parse::<CompressionType>().unwrap(), c);
        }
        for bad in ["gzip", "NONE", "BZ2", " GZIP"] {
            let err = CompressionType::parse(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)));
            let msg = err.to_string();
            assert!(msg.contains(bad) && msg.contains("\"GZIP\"") && msg.contains("\"ZLIB\""));
        }
    }

    #[test]
    fn stream_edges_match_tensorflow() {
        let data = b"some bytes to compress".repeat(100);
        for c in [CompressionType::Gzip, CompressionType::Zlib] {
            assert_eq!(decompress(compress(&data, c), c).unwrap(), data);
            // Cut short: corruption, not a short read.
            let full = compress(&data, c);
            let err = decompress(full[..full.len() - 3].to_vec(), c).unwrap_err();
            assert!(is_corruption(c, &err), "{c}: {err}");
            let err = decompress(full[..full.len() / 2].to_vec(), c).unwrap_err();
            assert!(is_corruption(c, &err), "{c}: {err}");
        }
        // Concatenated gzip members are one stream.
        let mut two = compress(b"ab", CompressionType::Gzip);
        two.extend(compress(b"cd", CompressionType::Gzip));
        assert_eq!(decompress(two, CompressionType::Gzip).unwrap(), b"abcd");
        // Garbage after a gzip member is an error; after a zlib stream it is
        // ignored.
        let mut g = compress(b"ab", CompressionType::Gzip);
        g.extend(b"garbage");
        let err = decompress(g, CompressionType::Gzip).unwrap_err();
        assert!(is_corruption(CompressionType::Gzip, &err), "{err}");
        let mut z = compress(b"ab", CompressionType::Zlib);
        z.extend(b"garbage");
        assert_eq!(decompress(z, CompressionType::Zlib).unwrap(), b"ab");
    }
}
