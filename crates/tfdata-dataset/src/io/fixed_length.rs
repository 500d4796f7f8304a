//! Fixed-length records, as `tf.data.FixedLengthRecordDataset` reads them.
//!
//! A file is `header_bytes` skipped, then records of exactly
//! `record_bytes`, then `footer_bytes` skipped. TensorFlow 2.21's behaviour,
//! checked with real TensorFlow (`tests/fixed_length_tensorflow.rs`):
//!
//! * the body (the file without its header and footer) must be a whole
//!   number of records. A trailing partial record is an error, not dropped:
//!   [`Error::InvalidArgument`] for an uncompressed file (found from its size
//!   before any record is read, as TensorFlow does), [`Error::DataLoss`] for
//!   a compressed one (found when the stream ends), both with TensorFlow's
//!   words (`Excluding the header (..) and footer (..), input file ".." has
//!   body length .. bytes, which is not an exact multiple of the record
//!   length (..)`);
//! * compressed files are read with a footer's worth of lookahead, so a
//!   record is only a record if a whole footer still follows it;
//! * `record_bytes` must be positive, `header_bytes` and `footer_bytes` not
//!   negative (TensorFlow's messages).
//!
//! Where tfdata differs on purpose:
//!
//! * a file shorter than its header and footer: for an uncompressed one the
//!   body length wraps around as TensorFlow's unsigned one does, giving its
//!   "body length 18446744073709551614 bytes" error or, when the header fits
//!   in the file, no records, as TensorFlow; where TensorFlow fails with an
//!   internal `OutOfRange` (the header does not fit, or the file is
//!   compressed) this is an error saying the file is too short;
//! * `record_bytes` and `footer_bytes` are at most [`MAX_RECORD_BYTES`]: a
//!   record and the footer lookahead are held in memory, and a crafted size
//!   must not turn into an allocation failure;
//! * a truncated compressed stream is `DataLoss`, as for the other readers
//!   (see [`super::compression`]).

use std::io::{Read, Write};

use bytes::Bytes;
use tfdata_core::{Error, Result};

use super::compression::{CompressionType, DEFAULT_BUFFER_SIZE};
use super::fs::FileSystem;
use super::registry::file_system;
use super::stream::ItemStream;

/// What errors call one item.
const ITEM: &str = "record";

/// The largest `record_bytes` (and `footer_bytes`) accepted: 1 GiB, the
/// size limit of one tensor elsewhere in tfdata.
pub const MAX_RECORD_BYTES: u64 = 1 << 30;

/// The most reserved before the bytes arrive (see [`State::fill`]).
const MAX_INITIAL_RESERVE: usize = 1 << 20;

/// The sizes a fixed-length file is read with, as TensorFlow's arguments
/// (signed, so that bad values from a graph or the wire are reported rather
/// than wrapped). [`FixedLengthSizes::check`] validates them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FixedLengthSizes {
    pub header_bytes: i64,
    pub record_bytes: i64,
    pub footer_bytes: i64,
}

/// Validated sizes, in the types the reader computes with.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    header: u64,
    record: usize,
    footer: usize,
}

impl FixedLengthSizes {
    /// TensorFlow's checks (and messages), plus the [`MAX_RECORD_BYTES`]
    /// bound on what is held in memory.
    pub fn check(&self) -> Result<()> {
        self.sizes().map(|_| ())
    }

    fn sizes(&self) -> Result<Sizes> {
        let bad = |msg: String| Err(Error::InvalidArgument(msg));
        if self.header_bytes < 0 {
            return bad("`header_bytes` must be >= 0".into());
        }
        if self.record_bytes <= 0 {
            return bad("`record_bytes` must be > 0".into());
        }
        if self.footer_bytes < 0 {
            return bad("`footer_bytes` must be >= 0".into());
        }
        for (what, v) in [
            ("record_bytes", self.record_bytes),
            ("footer_bytes", self.footer_bytes),
        ] {
            if v as u64 > MAX_RECORD_BYTES {
                return bad(format!(
                    "`{what}` = {v} is over tfdata's limit of {MAX_RECORD_BYTES} bytes (1 GiB): \
                     fixed-length records and footers are held in memory"
                ));
            }
        }
        // Bounded by MAX_RECORD_BYTES above, so they fit in usize.
        Ok(Sizes {
            header: self.header_bytes as u64,
            record: self.record_bytes as usize,
            footer: self.footer_bytes as usize,
        })
    }
}

/// Reads the records of one fixed-length record file in order.
///
/// Yields `Ok(record)` per record, then ends; or yields one `Err` (after the
/// good records before it) and ends.
pub struct FixedLengthReader {
    stream: ItemStream,
    state: State,
}

struct State {
    sizes: Sizes,
    /// Uncompressed bytes read but not yet returned: `buf[start..]`, the
    /// next record (or part of it) and the footer lookahead.
    buf: Vec<u8>,
    start: usize,
    /// Whether the header has been skipped and the footer's lookahead read.
    started: bool,
}

impl FixedLengthReader {
    /// Opens `path` (a local path or URL, see [`super::fs`]).
    pub fn open(path: &str, compression: CompressionType, sizes: FixedLengthSizes) -> Result<Self> {
        Self::open_on(&*file_system(path)?, path, compression, sizes)
    }

    /// Opens `path` on a given file system. An uncompressed file's size is
    /// checked first, so a file with a partial record fails before any of its
    /// records is read, as in TensorFlow.
    pub fn open_on(
        fs: &dyn FileSystem,
        path: &str,
        compression: CompressionType,
        sizes: FixedLengthSizes,
    ) -> Result<Self> {
        let checked = sizes.sizes()?;
        if compression == CompressionType::None {
            let len = fs.file_size(path)?;
            let fixed = checked.header + checked.footer as u64;
            // TensorFlow computes the body length unsigned: for a file shorter
            // than its header and footer it wraps around (2^64 - 2 for one
            // byte short of a 2-byte header and 1-byte footer), and the
            // multiple-of-records check reports that number.
            let body = len.wrapping_sub(fixed);
            if !body.is_multiple_of(checked.record as u64) {
                return Err(partial(path, compression, body, checked));
            }
            if len < fixed {
                // A wrapped body that happens to be a whole number of records:
                // when the header fits in the file, TensorFlow's read position
                // (after the header) is already at or past its limit (the size
                // less the footer, signed) and the file has no records.
                // Otherwise skipping the header fails with an internal
                // `OutOfRange` ("implementation error"); ours says why.
                if checked.header <= len {
                    let empty = ItemStream::new(
                        path,
                        std::io::empty(),
                        compression,
                        DEFAULT_BUFFER_SIZE,
                        ITEM,
                    );
                    let none = Sizes {
                        header: 0,
                        footer: 0,
                        ..checked
                    };
                    return Ok(Self::from_stream(empty, none));
                }
                return Err(too_short(path, compression, len, checked));
            }
        }
        let stream = ItemStream::open_on(fs, path, compression, ITEM)?;
        Ok(Self::from_stream(stream, checked))
    }

    /// Reads records from any byte stream; `name` is what errors call it.
    /// Without a file size up front, a partial record is found at the end.
    pub fn new(
        name: impl Into<String>,
        input: impl Read + Send + 'static,
        compression: CompressionType,
        sizes: FixedLengthSizes,
    ) -> Result<Self> {
        let checked = sizes.sizes()?;
        let stream = ItemStream::new(name, input, compression, DEFAULT_BUFFER_SIZE, ITEM);
        Ok(Self::from_stream(stream, checked))
    }

    fn from_stream(stream: ItemStream, sizes: Sizes) -> Self {
        Self {
            stream,
            state: State {
                sizes,
                buf: Vec::new(),
                start: 0,
                started: false,
            },
        }
    }

    /// The file's name as errors give it.
    pub fn name(&self) -> &str {
        &self.stream.name
    }

    /// The (uncompressed) byte offset of the next record.
    pub fn offset(&self) -> u64 {
        self.stream.offset
    }

    /// The next record, `Ok(None)` at the end of the file. After an error,
    /// always `Ok(None)`.
    pub fn read_record(&mut self) -> Result<Option<Bytes>> {
        let state = &mut self.state;
        self.stream.next_item(|s| state.read_record(s))
    }
}

impl State {
    fn available(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Reads until `want` bytes are available or the stream ends.
    fn fill(&mut self, s: &mut ItemStream, want: usize) -> Result<()> {
        if self.available() >= want {
            return Ok(());
        }
        // Move the unread bytes to the front only once at least as many have
        // been consumed, so each byte is moved O(1) times on average.
        if self.start > 0 && self.start >= self.available() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let missing = want - self.available();
        // A large record size is the pipeline's, but the file may be small:
        // reserve a bounded amount and let the buffer grow as data arrives.
        self.buf.reserve(missing.min(MAX_INITIAL_RESERVE));
        (&mut s.input)
            .take(missing as u64)
            .read_to_end(&mut self.buf)
            .map_err(|e| s.read_error(s.offset, e))?;
        Ok(())
    }

    fn read_record(&mut self, s: &mut ItemStream) -> Result<Option<Bytes>> {
        let Sizes {
            header,
            record,
            footer,
        } = self.sizes;
        if !self.started {
            self.started = true;
            let skipped = std::io::copy(&mut (&mut s.input).take(header), &mut std::io::sink())
                .map_err(|e| s.read_error(0, e))?;
            s.offset = skipped;
            if skipped < header {
                return Err(too_short(&s.name, s.compression, skipped, self.sizes));
            }
            self.fill(s, footer)?;
            if self.available() < footer {
                let len = header + self.available() as u64;
                return Err(too_short(&s.name, s.compression, len, self.sizes));
            }
        }
        self.fill(s, record + footer)?;
        let available = self.available();
        if available >= record + footer {
            let out = Bytes::copy_from_slice(&self.buf[self.start..self.start + record]);
            self.start += record;
            s.offset += record as u64;
            return Ok(Some(out));
        }
        if available == footer {
            // What is left is the footer: the file is done.
            return Ok(None);
        }
        let body = s.offset - header + (available - footer) as u64;
        Err(partial(&s.name, s.compression, body, self.sizes))
    }
}

/// TensorFlow's error for a body that is not a whole number of records
/// (`InvalidArgument` uncompressed, `DataLoss` compressed, as in TensorFlow).
fn partial(name: &str, compression: CompressionType, body: u64, sizes: Sizes) -> Error {
    let message = format!(
        "Excluding the header ({} bytes) and footer ({} bytes), input file \"{name}\" has body \
         length {body} bytes, which is not an exact multiple of the record length ({} bytes).",
        sizes.header, sizes.footer, sizes.record
    );
    error(name, compression, message)
}

fn too_short(name: &str, compression: CompressionType, len: u64, sizes: Sizes) -> Error {
    let message = format!(
        "input file \"{name}\" has {len} bytes, fewer than its header ({} bytes) and footer \
         ({} bytes)",
        sizes.header, sizes.footer
    );
    error(name, compression, message)
}

fn error(name: &str, compression: CompressionType, message: String) -> Error {
    match compression {
        CompressionType::None => Error::InvalidArgument(message),
        c => Error::DataLoss {
            location: format!("{name} ({c})"),
            reason: message,
        },
    }
}

/// Writes `records` as a fixed-length record file (for tests and tools):
/// `header`, the records, `footer`, compressed as asked.
pub fn write_fixed_length(
    out: impl Write,
    compression: CompressionType,
    header: &[u8],
    records: &[&[u8]],
    footer: &[u8],
) -> Result<()> {
    let mut w = super::compression::Compressor::new(out, compression);
    let io = |e| Error::io("writing a fixed-length record file", e);
    w.write_all(header).map_err(io)?;
    for r in records {
        w.write_all(r).map_err(io)?;
    }
    w.write_all(footer).map_err(io)?;
    w.finish().map_err(io)?;
    Ok(())
}

impl std::fmt::Debug for FixedLengthReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.stream.debug(f, "FixedLengthReader")
    }
}

impl Iterator for FixedLengthReader {
    type Item = Result<Bytes>;

    fn next(&mut self) -> Option<Self::Item> {
        self.read_record().transpose()
    }
}

impl std::iter::FusedIterator for FixedLengthReader {}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(h: i64, r: i64, f: i64) -> FixedLengthSizes {
        FixedLengthSizes {
            header_bytes: h,
            record_bytes: r,
            footer_bytes: f,
        }
    }

    fn read(data: &[u8], c: CompressionType, s: FixedLengthSizes) -> (Vec<Vec<u8>>, Option<Error>) {
        let mut compressed = Vec::new();
        write_fixed_length(&mut compressed, c, data, &[], &[]).unwrap();
        let reader = FixedLengthReader::new("f", std::io::Cursor::new(compressed), c, s).unwrap();
        let mut out = Vec::new();
        for r in reader {
            match r {
                Ok(r) => out.push(r.to_vec()),
                Err(e) => return (out, Some(e)),
            }
        }
        (out, None)
    }

    #[test]
    fn records_between_header_and_footer() {
        for c in [
            CompressionType::None,
            CompressionType::Gzip,
            CompressionType::Zlib,
        ] {
            let (got, err) = read(b"HHabcdefghiFFF", c, sizes(2, 3, 3));
            assert_eq!(got, vec![b"abc".to_vec(), b"def".to_vec(), b"ghi".to_vec()]);
            assert!(err.is_none(), "{c}");
            let (got, err) = read(b"HHabcdefghijFFF", c, sizes(2, 3, 3));
            assert_eq!(
                got.len(),
                3,
                "{c}: streaming finds the partial record at the end"
            );
            let msg = err.unwrap().to_string();
            assert!(msg.contains("has body length 10 bytes"), "{msg}");
            let (got, err) = read(b"HHF", c, sizes(2, 3, 3));
            assert!(got.is_empty());
            assert!(err.unwrap().to_string().contains("has 3 bytes, fewer"));
        }
    }

    #[test]
    fn large_footer_and_small_buffer_steps() {
        let body: Vec<u8> = (0..=255u8).cycle().take(7 * 1000).collect();
        let mut data = b"head".to_vec();
        data.extend_from_slice(&body);
        data.extend(std::iter::repeat_n(b'F', 5000));
        let (got, err) = read(&data, CompressionType::Gzip, sizes(4, 7, 5000));
        assert!(err.is_none());
        assert_eq!(got.concat(), body);
    }

    #[test]
    fn sizes_are_checked() {
        for (s, msg) in [
            (sizes(0, 0, 0), "`record_bytes` must be > 0"),
            (sizes(-1, 1, 0), "`header_bytes` must be >= 0"),
            (sizes(0, 1, -1), "`footer_bytes` must be >= 0"),
            (sizes(0, (1 << 30) + 1, 0), "over tfdata's limit"),
            (sizes(0, 1, (1 << 30) + 1), "over tfdata's limit"),
        ] {
            let err = s.check().unwrap_err();
            assert!(err.to_string().contains(msg), "{err}");
        }
        assert!(sizes(5, 1 << 30, 0).check().is_ok());
    }
}
