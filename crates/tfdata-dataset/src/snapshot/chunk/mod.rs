//! Chunk files: the elements of a distributed snapshot, as TensorFlow 2.21's
//! `SnapshotStreamWriter` writes them and `SnapshotChunkDataset` (what
//! `tf.data.Dataset.load` reads each chunk with) reads them.
//!
//! A chunk is a TFRecord stream, **one record per component**: an element of
//! `m` components is `m` consecutive records, each a serialized
//! `TensorProto` in TensorFlow's `AsProtoTensorContent` form (`dtype`,
//! `tensor_shape`, `tensor_content`; strings too go in `tensor_content`, as
//! varint32 lengths followed by the bytes). The stream is compressed as the
//! snapshot's metadata says:
//!
//! * `""`: plain TFRecord;
//! * `"GZIP"` / `"ZLIB"`: one gzip / zlib stream (zlib's default level, as
//!   TensorFlow's `ZlibOutputBuffer`);
//! * `"SNAPPY"`: TensorFlow's block framing (tsl's `SnappyOutputBuffer`),
//!   not the Snappy framing format: blocks of `u32` big-endian compressed
//!   length followed by one raw Snappy block. Block boundaries fall anywhere
//!   in the record stream. TensorFlow's writer compresses its 256 KiB input
//!   buffer per block, or a record larger than that as a block of its own;
//!   its chunk reader (`SnappyInputStream` with a 512 MiB output buffer,
//!   `kTFRecordReaderOutputBufferSize`) accepts a block of any compressed
//!   size that decompresses to at most 512 MiB, and fails with
//!   `ResourceExhausted` beyond. [`ChunkWriter`] does as TensorFlow's
//!   writer: 256 KiB blocks, and a write larger than that (a large record's
//!   data) as a block of its own of at most 64 MiB; [`ChunkReader`] accepts
//!   what TensorFlow's chunk reader does, and hands a record that fills a
//!   block out as a slice of the decompressed block, without a copy.
//!
//! Memory is bounded: the writer holds one block (or the compressor's
//! window) plus the record being written, the reader one block plus the
//! record being read. Lengths read from disk are checked against limits
//! before anything is allocated for them ([`MAX_RECORD_BYTES`],
//! [`MAX_SNAPPY_BLOCK_BYTES`]), and the buffers grow only with bytes that
//! actually arrive.
//!
//! `snappy` holds TensorFlow's Snappy block framing, both ways; this
//! module the chunk's records (their TFRecord framing is
//! `tfdata_core::tfrecord`'s) and the compressions around them.

mod snappy;

use std::io::{self, BufRead, BufWriter, Read, Write};

use bytes::{Bytes, BytesMut};
use flate2::Compression;
use flate2::write::{GzEncoder, ZlibEncoder};
use prost::Message;
use tfdata_core::element::tensor_from_proto;
use tfdata_core::tensor::TensorData;
use tfdata_core::tfrecord::{self, FrameError, write_record};
use tfdata_core::{DType, Element, Error, Result, Tensor};
use tfdata_proto::tensorflow::TensorProto;

pub use self::snappy::{MAX_SNAPPY_BLOCK_BYTES, SNAPPY_BLOCK_BYTES};
use self::snappy::{SnappyBlockReader, SnappyBlockWriter};
use super::layout::SnapshotCompression;
use crate::io::compression::{CompressionType, DEFAULT_BUFFER_SIZE, decompressing_reader};
use crate::io::fs::FileSystem;
use crate::spec::Structure;

/// The most one record may hold: a `TensorProto` cannot be larger (2 GiB,
/// protobuf's limit on a message), so a longer record length is corruption.
pub const MAX_RECORD_BYTES: u64 = i32::MAX as u64;

/// The dtypes of `spec`'s components, in the order chunks store them.
pub fn component_dtypes(spec: &Structure) -> Vec<DType> {
    spec.flatten().iter().map(|s| s.dtype).collect()
}

// ---------------------------------------------------------------- writing

/// Counts the bytes handed to the writer below it.
struct Counting<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

type Out = Counting<BufWriter<Box<dyn Write + Send>>>;

enum Sink {
    None(Out),
    Gzip(GzEncoder<Out>),
    Zlib(ZlibEncoder<Out>),
    /// Boxed: Snappy's encoder keeps its 32 KiB hash table inline.
    Snappy(Box<SnappyBlockWriter<Out>>),
}

impl Sink {
    fn out(&self) -> &Out {
        match self {
            Sink::None(w) => w,
            Sink::Gzip(w) => w.get_ref(),
            Sink::Zlib(w) => w.get_ref(),
            Sink::Snappy(w) => w.get_ref(),
        }
    }

    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Sink::None(w) => w,
            Sink::Gzip(w) => w,
            Sink::Zlib(w) => w,
            Sink::Snappy(w) => &mut **w,
        }
    }

    fn finish(self) -> io::Result<Out> {
        match self {
            Sink::None(w) => Ok(w),
            Sink::Gzip(w) => w.finish(),
            Sink::Zlib(w) => w.finish(),
            Sink::Snappy(w) => w.finish(),
        }
    }
}

/// Writes elements into one chunk file in TensorFlow's format (see the
/// module docs), through the writer [`FileSystem::create`] gives.
///
/// Call [`ChunkWriter::finish`]: it ends the compressed stream and flushes
/// the output (object stores upload the object then); a writer dropped
/// unfinished leaves a truncated file, which readers report as corrupt.
pub struct ChunkWriter {
    name: String,
    sink: Sink,
    /// The serialized `TensorProto` being written, reused between records.
    record: Vec<u8>,
    num_elements: u64,
}

impl std::fmt::Debug for ChunkWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkWriter")
            .field("name", &self.name)
            .field("num_elements", &self.num_elements)
            .field("bytes_written", &self.bytes_written())
            .finish_non_exhaustive()
    }
}

impl ChunkWriter {
    /// Writes a chunk to `out`, compressed as `compression` says.
    pub fn new(out: Box<dyn Write + Send>, compression: SnapshotCompression) -> Self {
        Self::with_name("snapshot chunk", out, compression)
    }

    /// Like [`ChunkWriter::new`]; `name` (the file's path) is what errors
    /// call it.
    pub fn with_name(
        name: impl Into<String>,
        out: Box<dyn Write + Send>,
        compression: SnapshotCompression,
    ) -> Self {
        let out = Counting {
            inner: BufWriter::with_capacity(DEFAULT_BUFFER_SIZE, out),
            bytes: 0,
        };
        // Level 6, zlib's default, is what TensorFlow's ZlibOutputBuffer uses.
        let sink = match compression {
            SnapshotCompression::None => Sink::None(out),
            SnapshotCompression::Gzip => Sink::Gzip(GzEncoder::new(out, Compression::default())),
            SnapshotCompression::Zlib => Sink::Zlib(ZlibEncoder::new(out, Compression::default())),
            SnapshotCompression::Snappy => Sink::Snappy(Box::new(SnappyBlockWriter::new(out))),
        };
        ChunkWriter {
            name: name.into(),
            sink,
            record: Vec::new(),
            num_elements: 0,
        }
    }

    /// Creates (or truncates) `path` on `fs` and writes a chunk there.
    pub fn create(
        fs: &dyn FileSystem,
        path: &str,
        compression: SnapshotCompression,
    ) -> Result<Self> {
        Ok(Self::with_name(path, fs.create(path)?, compression))
    }

    /// Appends one element: one record per component.
    pub fn write(&mut self, element: &Element) -> Result<()> {
        for tensor in &element.components {
            self.record.clear();
            encode_tensor(tensor, &mut self.record);
            write_record(&mut self.sink.writer(), &self.record)
                .map_err(|e| Error::io(format!("writing {}", self.name), e))?;
        }
        self.num_elements += 1;
        Ok(())
    }

    /// The elements written so far: the `<num_elements>` of the chunk's
    /// committed name.
    pub fn num_elements(&self) -> u64 {
        self.num_elements
    }

    /// The (compressed) bytes the file holds so far, for chunk size limits
    /// and progress. Bytes still inside the compressor (at most one Snappy
    /// block, or zlib's window) are not counted until they come out.
    pub fn bytes_written(&self) -> u64 {
        self.sink.out().bytes
    }

    /// Ends the compressed stream and flushes everything to the output,
    /// reporting any error (an object store's upload happens here); returns
    /// the file's size in bytes.
    pub fn finish(self) -> Result<u64> {
        let name = self.name;
        let failed = |e| Error::io(format!("finishing {name}"), e);
        let mut out = self.sink.finish().map_err(failed)?;
        out.flush().map_err(failed)?;
        Ok(out.bytes)
    }
}

/// `tensor` as TensorFlow's `AsProtoTensorContent` serializes it.
fn encode_tensor(tensor: &Tensor, out: &mut Vec<u8>) {
    let tensor_content = match tensor.data() {
        TensorData::Buffer(b) => b.clone(),
        TensorData::Strings(strings) => encode_string_list(strings),
    };
    let proto = TensorProto {
        dtype: tensor.dtype().code(),
        tensor_shape: Some(tfdata_core::element::shape_proto(tensor.shape())),
        tensor_content,
        ..Default::default()
    };
    proto.encode(out).expect("a Vec grows to hold any message");
}

/// TensorFlow's `EncodeStringList`: every length as a varint32, then every
/// string's bytes.
fn encode_string_list(strings: &[Bytes]) -> Bytes {
    let total: usize = strings.iter().map(|s| s.len() + 5).sum();
    let mut out = BytesMut::with_capacity(total);
    for s in strings {
        let mut len = s.len() as u64;
        while len >= 0x80 {
            out.extend_from_slice(&[(len as u8) | 0x80]);
            len >>= 7;
        }
        out.extend_from_slice(&[len as u8]);
    }
    for s in strings {
        out.extend_from_slice(s);
    }
    out.freeze()
}

// ---------------------------------------------------------------- reading

/// Where a [`ChunkReader`]'s records come from: a byte stream, or Snappy
/// blocks that can hand out a large record without copying it.
enum ChunkInput {
    Stream(Box<dyn BufRead + Send>),
    Snappy(SnappyBlockReader<io::BufReader<Box<dyn Read + Send>>>),
}

impl ChunkInput {
    fn bytes(&mut self) -> &mut dyn BufRead {
        match self {
            ChunkInput::Stream(input) => input,
            ChunkInput::Snappy(input) => input,
        }
    }

    /// The next `len` bytes without a copy where the input allows it.
    fn take_within_block(&mut self, len: u64) -> io::Result<Option<Bytes>> {
        match (self, usize::try_from(len)) {
            (ChunkInput::Snappy(input), Ok(len)) => input.take_within_block(len),
            _ => Ok(None),
        }
    }
}

/// Reads the elements of one chunk file back, checking every record's CRCs
/// and every component's dtype against the element spec.
///
/// Yields `Ok(element)` per element, then ends; or yields one `Err` (after
/// the good elements before it) and ends. Errors are
/// [`Error::DataLoss`] naming the file and the offset of the damage (in the
/// uncompressed stream for compressed chunks; Snappy errors also give the
/// block's offset in the file).
pub struct ChunkReader {
    name: String,
    compression: SnapshotCompression,
    input: ChunkInput,
    dtypes: Vec<DType>,
    /// Uncompressed offset of the next record.
    offset: u64,
    records: u64,
    elements: u64,
    done: bool,
    /// Whether a component of another dtype than `dtypes` says is an error
    /// here (else the caller checks, with its own message).
    check_dtypes: bool,
}

impl std::fmt::Debug for ChunkReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkReader")
            .field("name", &self.name)
            .field("compression", &self.compression)
            .field("offset", &self.offset)
            .field("elements", &self.elements)
            .finish_non_exhaustive()
    }
}

impl ChunkReader {
    /// Opens the chunk `path` on `fs`; its elements have components of
    /// `dtypes` (see [`component_dtypes`]).
    pub fn open(
        fs: &dyn FileSystem,
        path: &str,
        compression: SnapshotCompression,
        dtypes: Vec<DType>,
    ) -> Result<Self> {
        Self::new(path, fs.open(path)?, compression, dtypes)
    }

    /// Reads a chunk from any byte stream; `name` is what errors call it.
    pub fn new(
        name: impl Into<String>,
        input: Box<dyn Read + Send>,
        compression: SnapshotCompression,
        dtypes: Vec<DType>,
    ) -> Result<Self> {
        let name = name.into();
        if dtypes.is_empty() {
            // Zero records per element: the element count could not be
            // told from the file.
            return Err(Error::InvalidArgument(format!(
                "cannot read snapshot chunk {name}: its element spec has no components"
            )));
        }
        let input = match compression {
            SnapshotCompression::None => ChunkInput::Stream(decompressing_reader(
                input,
                CompressionType::None,
                DEFAULT_BUFFER_SIZE,
            )),
            SnapshotCompression::Gzip => ChunkInput::Stream(decompressing_reader(
                input,
                CompressionType::Gzip,
                DEFAULT_BUFFER_SIZE,
            )),
            SnapshotCompression::Zlib => ChunkInput::Stream(decompressing_reader(
                input,
                CompressionType::Zlib,
                DEFAULT_BUFFER_SIZE,
            )),
            SnapshotCompression::Snappy => ChunkInput::Snappy(SnappyBlockReader::new(
                io::BufReader::with_capacity(DEFAULT_BUFFER_SIZE, input),
            )),
        };
        Ok(ChunkReader {
            name,
            compression,
            input,
            dtypes,
            offset: 0,
            records: 0,
            elements: 0,
            done: false,
            check_dtypes: true,
        })
    }

    /// The reader, reading `dtypes.len()` records per element whatever
    /// their dtypes: `Dataset.save`'s files are checked by their reader
    /// with TensorFlow's own messages ([`super::saved`]).
    pub fn without_dtype_check(mut self) -> Self {
        self.check_dtypes = false;
        self
    }

    /// The file's name as errors give it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The elements read so far.
    pub fn elements_read(&self) -> u64 {
        self.elements
    }

    /// The next element, `Ok(None)` at a clean end of file. After an error,
    /// always `Ok(None)`.
    pub fn read_element(&mut self) -> Result<Option<Element>> {
        if self.done {
            return Ok(None);
        }
        let result = self.read_components();
        if !matches!(result, Ok(Some(_))) {
            self.done = true;
        }
        result
    }

    fn read_components(&mut self) -> Result<Option<Element>> {
        let mut components = Vec::with_capacity(self.dtypes.len());
        for index in 0..self.dtypes.len() {
            let start = self.offset;
            let Some(record) = self.read_record()? else {
                if index == 0 {
                    return Ok(None);
                }
                return Err(self.data_loss(
                    start,
                    format!(
                        "the file ends after {} records, inside element {}: it has {index} of \
                         its {} components (a chunk holds one record per component)",
                        self.records,
                        self.elements,
                        self.dtypes.len()
                    ),
                ));
            };
            components.push(self.decode(start, index, record)?);
        }
        self.elements += 1;
        Ok(Some(Element::new(components)))
    }

    /// Decodes from the record's [`Bytes`], so the tensor's content is a
    /// slice of the record rather than a copy.
    fn decode(&self, start: u64, index: usize, record: Bytes) -> Result<Tensor> {
        let expected = self.dtypes[index];
        let bad = |reason: String| {
            self.data_loss(
                start,
                format!("component {index} of element {}: {reason}", self.elements),
            )
        };
        let proto = TensorProto::decode(record)
            .map_err(|e| bad(format!("the record is not a TensorProto: {e}")))?;
        if self.check_dtypes && proto.dtype != expected.code() {
            let found = DType::from_code(proto.dtype)
                .map(|d| d.name().to_string())
                .unwrap_or_else(|_| format!("dtype code {}", proto.dtype));
            return Err(bad(format!(
                "the tensor is {found}, but the element spec says {}",
                expected.name()
            )));
        }
        tensor_from_proto(&proto).map_err(|e| bad(format!("bad TensorProto: {e}")))
    }

    /// One record: the framing is core's reader; a record that fills a
    /// Snappy block is taken from it without a copy.
    fn read_record(&mut self) -> Result<Option<Bytes>> {
        let start = self.offset;
        let record = self.read_framed();
        match record {
            Ok(Some(data)) => {
                self.offset = start + tfrecord::framed_len(data.len() as u64);
                self.records += 1;
                Ok(Some(data))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(self.frame_error(start, e)),
        }
    }

    fn read_framed(&mut self) -> std::result::Result<Option<Bytes>, FrameError> {
        let Some(len) = tfrecord::read_header(self.input.bytes(), MAX_RECORD_BYTES)? else {
            return Ok(None);
        };
        let data = match self
            .input
            .take_within_block(len)
            .map_err(FrameError::Read)?
        {
            Some(data) => data,
            None => tfrecord::read_data(self.input.bytes(), len)?,
        };
        tfrecord::check_data(self.input.bytes(), &data)?;
        Ok(Some(data))
    }

    fn frame_error(&self, start: u64, e: FrameError) -> Error {
        match e {
            FrameError::Read(e) => self.read_error(start, e),
            FrameError::LengthCrc if start == 0 => self.data_loss(
                start,
                format!(
                    "{}; is this a snapshot chunk, with the compression its metadata names?",
                    e.reason(start)
                ),
            ),
            FrameError::TooLong { len, .. } => self.data_loss(
                start,
                format!(
                    "the record claims {len} bytes, more than a TensorProto can hold \
                     ({MAX_RECORD_BYTES})"
                ),
            ),
            e => self.data_loss(start, e.reason(start)),
        }
    }

    fn location(&self, offset: u64) -> String {
        match self.compression {
            SnapshotCompression::None => format!("{} at offset {offset}", self.name),
            c => format!(
                "{} at offset {offset} of the uncompressed {c} stream",
                self.name
            ),
        }
    }

    fn data_loss(&self, offset: u64, reason: String) -> Error {
        Error::DataLoss {
            location: self.location(offset),
            reason,
        }
    }

    /// A failed read: corruption if the decompressor rejected its input, an
    /// I/O error otherwise.
    fn read_error(&self, offset: u64, err: io::Error) -> Error {
        let corrupt = self.compression != SnapshotCompression::None
            && matches!(
                err.kind(),
                io::ErrorKind::InvalidInput
                    | io::ErrorKind::InvalidData
                    | io::ErrorKind::UnexpectedEof
            );
        if corrupt {
            self.data_loss(
                offset,
                format!(
                    "the {} stream is corrupt or truncated while reading the record at offset \
                     {offset}: {err}",
                    self.compression
                ),
            )
        } else {
            Error::io(format!("reading {}", self.location(offset)), err)
        }
    }
}

impl Iterator for ChunkReader {
    type Item = Result<Element>;

    fn next(&mut self) -> Option<Self::Item> {
        self.read_element().transpose()
    }
}

impl std::iter::FusedIterator for ChunkReader {}

#[cfg(test)]
pub(crate) mod tests;
