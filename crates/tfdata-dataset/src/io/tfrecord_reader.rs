//! Streaming TFRecord files, as `TFRecordDataset` reads and
//! `tf.io.TFRecordWriter` writes them.
//!
//! A record is `u64 length` · `u32 masked_crc32c(length)` · `data` ·
//! `u32 masked_crc32c(data)`, little-endian, in the (possibly compressed)
//! file. [`TfRecordReader`] reads one record at a time through a fixed-size
//! buffer, so memory stays constant whatever the file size (plus the record
//! being returned); `tfdata_core::tfrecord::read_records` is the in-memory
//! counterpart for small files. The framing itself is read by
//! `tfdata_core::tfrecord` (one reader for every TFRecord user); this module
//! adds files, decompression and TensorFlow's error messages.
//!
//! Corruption handling, checked against TensorFlow 2.21:
//!
//! * both CRCs are checked; a mismatch is [`Error::DataLoss`] naming the file
//!   and the byte offset of the record (TensorFlow says `corrupted record at
//!   N` with `N` the offset of the failing piece: the record for the length,
//!   the record + 12 for the data; the reason gives both);
//! * a file that ends inside a record's data is `DataLoss` `truncated record
//!   at offset N`, as in TensorFlow;
//! * a file that ends inside a record's 12-byte header is also `DataLoss`
//!   here, although TensorFlow treats it as the end of the file (its
//!   `ReadNBytes` returns OUT_OF_RANGE before the truncation check): a torn
//!   header is as much a lost record as torn data;
//! * for compressed files offsets are in the uncompressed stream, and the
//!   error says so.
//!
//! After an error the iterator is finished: TensorFlow too moves to the next
//! file, and a reader cannot resynchronise inside a corrupt stream.

use std::io::{Read, Write};

use bytes::Bytes;
use tfdata_core::tfrecord::{self, FrameError, write_record};
use tfdata_core::{Error, Result};

pub use super::compression::CompressionType;
use super::compression::{Compressor, DEFAULT_BUFFER_SIZE};
use super::fs::FileSystem;
use super::registry::file_system;
use super::stream::ItemStream;

/// What errors call one item.
const ITEM: &str = "record";

/// Reads the records of one TFRecord file in order.
///
/// Yields `Ok(record)` per record, then ends; or yields one `Err` (after the
/// good records before it) and ends. See the module docs for the errors.
pub struct TfRecordReader {
    stream: ItemStream,
}

impl TfRecordReader {
    /// Opens `path` (a local path or URL, see [`super::fs`]) with the default
    /// 256 KiB buffer.
    pub fn open(path: &str, compression: CompressionType) -> Result<Self> {
        let stream = ItemStream::open(path, compression, ITEM)?;
        Ok(Self { stream })
    }

    /// Opens `path` on a given file system.
    pub fn open_on(fs: &dyn FileSystem, path: &str, compression: CompressionType) -> Result<Self> {
        let stream = ItemStream::open_on(fs, path, compression, ITEM)?;
        Ok(Self { stream })
    }

    /// Reads records from any byte stream; `name` is what errors call it.
    pub fn new(
        name: impl Into<String>,
        input: impl Read + Send + 'static,
        compression: CompressionType,
    ) -> Self {
        Self::with_buffer_size(name, input, compression, DEFAULT_BUFFER_SIZE)
    }

    /// Like [`TfRecordReader::new`] with TensorFlow's `buffer_size`: the
    /// bytes read from the underlying stream at a time (and, for compressed
    /// files, the size of the decompressor's input and output buffers).
    pub fn with_buffer_size(
        name: impl Into<String>,
        input: impl Read + Send + 'static,
        compression: CompressionType,
        buffer_size: usize,
    ) -> Self {
        let stream = ItemStream::new(name, input, compression, buffer_size, ITEM);
        Self { stream }
    }

    /// The file's name as errors give it.
    pub fn name(&self) -> &str {
        &self.stream.name
    }

    /// The (uncompressed) byte offset of the next record, i.e. the number of
    /// record bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.stream.offset
    }

    /// Skips the next `n` bytes of the (uncompressed) stream, as
    /// `TFRecordDatasetV2`'s `byte_offsets` start a file: past the end is
    /// the end (no records), and an offset inside a record fails when that
    /// record is read, naming the offset.
    pub fn skip_bytes(&mut self, n: u64) -> Result<()> {
        let s = &mut self.stream;
        let start = s.offset;
        let skipped = std::io::copy(&mut (&mut *s.input).take(n), &mut std::io::sink())
            .map_err(|e| s.read_error(start, e))?;
        s.offset = start + skipped;
        Ok(())
    }

    /// The next record, `Ok(None)` at a clean end of file. After an error,
    /// always `Ok(None)`.
    pub fn read_record(&mut self) -> Result<Option<Bytes>> {
        self.stream.next_item(read_record)
    }
}

/// One record (no length bound: TensorFlow has none, and memory grows only
/// with the bytes that arrive), with TensorFlow's words in the errors.
fn read_record(s: &mut ItemStream) -> Result<Option<Bytes>> {
    let start = s.offset;
    match tfrecord::read_record(&mut *s.input, u64::MAX) {
        Ok(Some(data)) => {
            s.offset = start + tfrecord::framed_len(data.len() as u64);
            Ok(Some(data))
        }
        Ok(None) => Ok(None),
        Err(e) => Err(frame_error(s, start, e)),
    }
}

fn frame_error(s: &ItemStream, start: u64, e: FrameError) -> Error {
    match e {
        FrameError::Read(e) => s.read_error(start, e),
        FrameError::LengthCrc => {
            // At offset 0 the likeliest cause is not a TFRecord file, or a
            // wrong `compression_type`; TensorFlow hints at it too.
            let hint = if start == 0 {
                "; is this a TFRecord file, with the right compression_type?"
            } else {
                ""
            };
            s.data_loss(
                start,
                format!(
                    "the record's length fails its CRC \
                     (TensorFlow: \"corrupted record at {start}\"){hint}"
                ),
            )
        }
        FrameError::DataCrc { len } => {
            let data_start = start + tfrecord::HEADER_LEN as u64;
            s.data_loss(
                start,
                format!(
                    "the record's {len} data bytes (from offset {data_start}) fail their \
                     CRC (TensorFlow: \"corrupted record at {data_start}\")"
                ),
            )
        }
        e @ (FrameError::Truncated(_) | FrameError::TooLong { .. }) => {
            s.data_loss(start, e.reason(start))
        }
    }
}

impl std::fmt::Debug for TfRecordReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.stream.debug(f, "TfRecordReader")
    }
}

impl Iterator for TfRecordReader {
    type Item = Result<Bytes>;

    fn next(&mut self) -> Option<Self::Item> {
        self.read_record().transpose()
    }
}

impl std::iter::FusedIterator for TfRecordReader {}

/// Writes a TFRecord file as `tf.io.TFRecordWriter` does, optionally
/// compressed; what TensorFlow and [`TfRecordReader`] read back.
///
/// Call [`TfRecordWriter::finish`]: it writes the compressed stream's
/// trailer and reports errors that dropping the writer would swallow.
pub struct TfRecordWriter<W: Write = Box<dyn Write + Send>> {
    name: String,
    out: Compressor<std::io::BufWriter<W>>,
}

impl<W: Write> std::fmt::Debug for TfRecordWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TfRecordWriter")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl TfRecordWriter {
    /// Creates (or truncates) `path` on the file system its scheme names.
    pub fn create(path: &str, compression: CompressionType) -> Result<Self> {
        let out = file_system(path)?.create(path)?;
        Ok(Self::new(path, out, compression))
    }
}

impl<W: Write> TfRecordWriter<W> {
    /// Writes records to `out`; `name` is what errors call it.
    pub fn new(name: impl Into<String>, out: W, compression: CompressionType) -> Self {
        Self {
            name: name.into(),
            out: Compressor::new(
                std::io::BufWriter::with_capacity(DEFAULT_BUFFER_SIZE, out),
                compression,
            ),
        }
    }

    /// Appends one record.
    pub fn write(&mut self, record: &[u8]) -> Result<()> {
        write_record(&mut self.out, record)
            .map_err(|e| Error::io(format!("writing {}", self.name), e))
    }

    /// Finishes the compressed stream, flushes, and returns the output.
    ///
    /// The output itself is flushed too (`BufWriter::into_inner` alone does
    /// not): object-store writers upload the object then, and an upload
    /// error must surface here, not be lost when the writer is dropped.
    pub fn finish(self) -> Result<W> {
        let name = self.name;
        let buffered = self
            .out
            .finish()
            .map_err(|e| Error::io(format!("finishing {name}"), e))?;
        let mut out = buffered
            .into_inner()
            .map_err(|e| Error::io(format!("flushing {name}"), e.into_error()))?;
        out.flush()
            .map_err(|e| Error::io(format!("flushing {name}"), e))?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [CompressionType; 3] = [
        CompressionType::None,
        CompressionType::Gzip,
        CompressionType::Zlib,
    ];

    fn records() -> Vec<Vec<u8>> {
        vec![
            b"first".to_vec(),
            Vec::new(),
            (0..70_000u32).map(|i| (i % 251) as u8).collect(),
            b"last".to_vec(),
        ]
    }

    fn encode(records: &[Vec<u8>], c: CompressionType) -> Vec<u8> {
        let mut w = TfRecordWriter::new("mem", Vec::new(), c);
        for r in records {
            w.write(r).unwrap();
        }
        w.finish().unwrap()
    }

    fn read(bytes: Vec<u8>, c: CompressionType) -> (Vec<Bytes>, Option<Error>) {
        let mut ok = Vec::new();
        // A tiny buffer exercises reads that straddle buffer refills.
        for r in TfRecordReader::with_buffer_size("mem.tfrecord", std::io::Cursor::new(bytes), c, 5)
        {
            match r {
                Ok(r) => ok.push(r),
                Err(e) => return (ok, Some(e)),
            }
        }
        (ok, None)
    }

    #[test]
    fn round_trips_every_compression() {
        for c in ALL {
            let (got, err) = read(encode(&records(), c), c);
            assert!(err.is_none(), "{c}: {err:?}");
            assert_eq!(got, records(), "{c}");
        }
        // Plain output is exactly core's framing.
        let mut expected = Vec::new();
        for r in records() {
            write_record(&mut expected, &r).unwrap();
        }
        assert_eq!(encode(&records(), CompressionType::None), expected);
    }

    #[test]
    fn empty_file_has_no_records() {
        for c in ALL {
            let (got, err) = read(encode(&[], c), c);
            assert!(got.is_empty() && err.is_none(), "{c}");
        }
    }

    fn expect_data_loss(err: Option<Error>, needles: &[&str]) {
        let err = err.expect("an error");
        assert!(matches!(err, Error::DataLoss { .. }), "{err}");
        let msg = err.to_string();
        for n in needles {
            assert!(msg.contains(n), "{msg:?} lacks {n:?}");
        }
    }

    #[test]
    fn corruption_is_located() {
        let plain = encode(&records(), CompressionType::None);
        // Record 1 starts at 12 + 5 + 4 = 21, record 2 at 21 + 16 = 37.
        for (what, pos, good, needles) in [
            ("data", 14, 0, vec!["mem.tfrecord at offset 0", "offset 12"]),
            (
                "length",
                21 + 2,
                1,
                vec!["mem.tfrecord at offset 21", "length"],
            ),
            ("length crc", 21 + 9, 1, vec!["at offset 21"]),
            ("data crc", 37 + 12 + 70_000 + 1, 2, vec!["at offset 37"]),
        ] {
            let mut bad = plain.clone();
            bad[pos] ^= 0x40;
            let (got, err) = read(bad.clone(), CompressionType::None);
            assert_eq!(got.len(), good, "{what}");
            expect_data_loss(err, &needles);
            // Same place in a compressed stream: offsets are uncompressed.
            for c in [CompressionType::Gzip, CompressionType::Zlib] {
                let mut w = Compressor::new(Vec::new(), c);
                w.write_all(&bad).unwrap();
                let (got, err) = read(w.finish().unwrap(), c);
                assert_eq!(got.len(), good, "{what} {c}");
                let mut needles = needles.clone();
                needles.push("uncompressed");
                expect_data_loss(err, &needles);
            }
        }
    }

    #[test]
    fn truncation_is_data_loss_not_eof() {
        let plain = encode(&records(), CompressionType::None);
        let last = 37 + 12 + 70_000 + 4;
        for (cut, good) in [
            (1, 0),               // inside the first header
            (12, 0),              // after the first header
            (20, 0),              // inside the first data CRC
            (37 + 5, 2),          // inside a header
            (37 + 12 + 1_000, 2), // inside the data
            (plain.len() - 1, 3), // inside the last CRC
            (last + 11, 3),       // inside the last header
        ] {
            let (got, err) = read(plain[..cut].to_vec(), CompressionType::None);
            assert_eq!(got.len(), good, "cut at {cut}");
            let start = [0, 21, 37, last][good];
            expect_data_loss(err, &[&format!("truncated record at offset {start}")]);
        }
        for c in [CompressionType::Gzip, CompressionType::Zlib] {
            let full = encode(&records(), c);
            for cut in [full.len() / 2, full.len() - 2] {
                let (_, err) = read(full[..cut].to_vec(), c);
                expect_data_loss(err, &["mem.tfrecord", "uncompressed"]);
            }
        }
    }

    #[test]
    fn ends_after_an_error() {
        let mut bad = encode(&records(), CompressionType::None);
        bad[14] ^= 1;
        let mut reader = TfRecordReader::new("x", std::io::Cursor::new(bad), CompressionType::None);
        assert!(reader.next().expect("an item").is_err());
        assert!(reader.next().is_none());
        assert!(reader.read_record().unwrap().is_none());
    }

    #[test]
    fn huge_length_is_not_preallocated() {
        // A header claiming 2^62 bytes, with a valid length CRC.
        let len = (1u64 << 62).to_le_bytes();
        let mut bytes = len.to_vec();
        bytes.extend(tfrecord::masked_crc32c(&len).to_le_bytes());
        bytes.extend(b"short");
        let (got, err) = read(bytes, CompressionType::None);
        assert!(got.is_empty());
        expect_data_loss(err, &["truncated record at offset 0"]);
    }
}
