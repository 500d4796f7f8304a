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

use super::layout::SnapshotCompression;
use crate::io::compression::{
    CompressionType, DEFAULT_BUFFER_SIZE, decompressing_reader, read_full,
};
use crate::io::fs::FileSystem;
use crate::spec::Structure;

/// The uncompressed bytes of one Snappy block [`ChunkWriter`] writes:
/// TensorFlow's `SnappyCompressionOptions::input_buffer_size` (256 KiB).
pub const SNAPPY_BLOCK_BYTES: usize = 256 << 10;

/// The most one Snappy block may decompress to: what TensorFlow's chunk
/// reader's output buffer holds (512 MiB). TensorFlow refuses larger blocks
/// with `ResourceExhausted`; so does [`ChunkReader`] (as corruption, since
/// no TensorFlow-readable chunk has one).
pub const MAX_SNAPPY_BLOCK_BYTES: usize = 512 << 20;

/// The largest block one large write becomes (well under what TensorFlow's
/// reader accepts, [`MAX_SNAPPY_BLOCK_BYTES`]); larger writes take several.
const LARGE_WRITE_BLOCK_BYTES: usize = 64 << 20;

/// The most one record may hold: a `TensorProto` cannot be larger (2 GiB,
/// protobuf's limit on a message), so a longer record length is corruption.
pub const MAX_RECORD_BYTES: u64 = i32::MAX as u64;

/// Snappy cannot expand its input more than this: its densest op is a
/// 3-byte copy of 64 bytes. A block claiming more is corrupt, and is refused
/// before its output is allocated.
const MAX_SNAPPY_EXPANSION: usize = 22;

/// The largest buffer reserved up front for a Snappy block's compressed
/// bytes; it grows with the bytes that actually arrive.
const MAX_INITIAL_RESERVE: usize = 1 << 20;

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

/// TensorFlow's Snappy block framing over a writer: `u32` big-endian
/// compressed length, then the raw Snappy block, per [`SNAPPY_BLOCK_BYTES`]
/// of input.
struct SnappyBlockWriter<W> {
    out: W,
    block: Vec<u8>,
    compressed: Vec<u8>,
    encoder: snap::raw::Encoder,
}

impl<W: Write> SnappyBlockWriter<W> {
    fn new(out: W) -> Self {
        SnappyBlockWriter {
            out,
            block: Vec::with_capacity(SNAPPY_BLOCK_BYTES),
            compressed: Vec::new(),
            encoder: snap::raw::Encoder::new(),
        }
    }

    /// Compresses and writes the buffered input as one block (none if empty).
    fn write_block(&mut self) -> io::Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        let block = std::mem::take(&mut self.block);
        let written = self.compress_block(&block);
        self.block = block;
        self.block.clear();
        written
    }

    /// Writes `input` as one framed block.
    fn compress_block(&mut self, input: &[u8]) -> io::Result<()> {
        self.compressed
            .resize(snap::raw::max_compress_len(input.len()), 0);
        let n = self
            .encoder
            .compress(input, &mut self.compressed)
            .map_err(io::Error::other)?;
        let len = u32::try_from(n).map_err(io::Error::other)?;
        self.out.write_all(&len.to_be_bytes())?;
        self.out.write_all(&self.compressed[..n])?;
        Ok(())
    }

    fn finish(mut self) -> io::Result<W> {
        self.write_block()?;
        Ok(self.out)
    }
}

impl<W: Write> Write for SnappyBlockWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // A write that does not fit the buffer (a large record) becomes a
        // block of its own, as TensorFlow's `SnappyOutputBuffer` makes it:
        // readers then decompress it in one piece instead of joining
        // blocks, and it is not copied into the buffer first.
        if buf.len() > SNAPPY_BLOCK_BYTES - self.block.len() && buf.len() >= SNAPPY_BLOCK_BYTES {
            self.write_block()?;
            let n = buf.len().min(LARGE_WRITE_BLOCK_BYTES);
            self.compress_block(&buf[..n])?;
            return Ok(n);
        }
        let room = SNAPPY_BLOCK_BYTES - self.block.len();
        let n = buf.len().min(room);
        self.block.extend_from_slice(&buf[..n]);
        if self.block.len() == SNAPPY_BLOCK_BYTES {
            self.write_block()?;
        }
        Ok(n)
    }

    /// Writes the buffered input as a (short) block, as TensorFlow's
    /// `SnappyOutputBuffer::Flush` does; readers accept blocks of any size.
    fn flush(&mut self) -> io::Result<()> {
        self.write_block()?;
        self.out.flush()
    }
}

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
            Sink::Snappy(w) => &w.out,
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

/// TensorFlow's Snappy block framing, decoded one block at a time. Errors
/// are `InvalidData` naming the block's offset in the file.
///
/// A decompressed block is kept as [`Bytes`] so that a large record lying
/// inside one block (TensorFlow's writer and ours give a large record a
/// block of its own) is handed out as a slice of it, not copied
/// ([`SnappyBlockReader::take_within_block`]).
struct SnappyBlockReader<R> {
    input: R,
    /// The file offset of the next block.
    file_offset: u64,
    compressed: Vec<u8>,
    block: Bytes,
    pos: usize,
    decoder: snap::raw::Decoder,
}

fn corrupt(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

impl<R: Read> SnappyBlockReader<R> {
    fn new(input: R) -> Self {
        SnappyBlockReader {
            input,
            file_offset: 0,
            compressed: Vec::new(),
            block: Bytes::new(),
            pos: 0,
            decoder: snap::raw::Decoder::new(),
        }
    }

    /// Decodes the next block; false at a clean end of file.
    fn next_block(&mut self) -> io::Result<bool> {
        let at = self.file_offset;
        let mut len = [0u8; 4];
        let got = read_full(&mut self.input, &mut len)?;
        if got == 0 {
            return Ok(false);
        }
        if got < len.len() {
            return Err(corrupt(format!(
                "the file ends inside the length of the Snappy block at file offset {at}"
            )));
        }
        let len = u32::from_be_bytes(len) as usize;
        let max_compressed = snap::raw::max_compress_len(MAX_SNAPPY_BLOCK_BYTES);
        if len > max_compressed {
            return Err(corrupt(format!(
                "the Snappy block at file offset {at} claims {len} compressed bytes, more than \
                 a block of at most {MAX_SNAPPY_BLOCK_BYTES} bytes can take"
            )));
        }
        self.compressed.clear();
        // Grows with the bytes that arrive, not with the claimed length.
        self.compressed.reserve(len.min(MAX_INITIAL_RESERVE));
        let got = (&mut self.input)
            .take(len as u64)
            .read_to_end(&mut self.compressed)?;
        if got < len {
            return Err(corrupt(format!(
                "the file ends inside the Snappy block at file offset {at} ({got} of its \
                 {len} bytes are there)"
            )));
        }
        let size = snap::raw::decompress_len(&self.compressed).map_err(|e| {
            corrupt(format!(
                "the Snappy block at file offset {at} is corrupt: {e}"
            ))
        })?;
        if size > MAX_SNAPPY_BLOCK_BYTES {
            return Err(corrupt(format!(
                "the Snappy block at file offset {at} decompresses to {size} bytes, more than \
                 TensorFlow's chunk reader accepts ({MAX_SNAPPY_BLOCK_BYTES})"
            )));
        }
        if size > len.saturating_mul(MAX_SNAPPY_EXPANSION) {
            return Err(corrupt(format!(
                "the Snappy block at file offset {at} claims to decompress to {size} bytes, \
                 more than {len} compressed bytes can hold"
            )));
        }
        // The last block's buffer is reused unless a record still holds a
        // slice of it.
        let mut block = match std::mem::take(&mut self.block).try_into_mut() {
            Ok(reusable) => Vec::from(reusable),
            Err(_) => Vec::new(),
        };
        block.clear();
        block.resize(size, 0);
        let n = self
            .decoder
            .decompress(&self.compressed, &mut block)
            .map_err(|e| {
                corrupt(format!(
                    "the Snappy block at file offset {at} is corrupt: {e}"
                ))
            })?;
        block.truncate(n);
        self.block = Bytes::from(block);
        self.pos = 0;
        self.file_offset = at + 4 + len as u64;
        Ok(true)
    }
}

impl<R: Read> SnappyBlockReader<R> {
    /// The next `len` bytes as a slice of the current block, without a copy,
    /// when they lie inside it and fill at least half of it (a small record
    /// would otherwise keep a whole block alive); `None` leaves the reader
    /// where it was.
    fn take_within_block(&mut self, len: usize) -> io::Result<Option<Bytes>> {
        let available = self.fill_buf()?.len();
        if len > available || len.saturating_mul(2) < self.block.len() {
            return Ok(None);
        }
        let slice = self.block.slice(self.pos..self.pos + len);
        self.pos += len;
        Ok(Some(slice))
    }
}

impl<R: Read> Read for SnappyBlockReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> BufRead for SnappyBlockReader<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        // Bounded: every iteration consumes at least one block header from
        // the input, which is finite; empty blocks are skipped.
        while self.pos == self.block.len() {
            if !self.next_block()? {
                break;
            }
        }
        Ok(&self.block[self.pos..])
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.block.len());
    }
}

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
pub(crate) mod tests {
    use super::*;

    const ALL: [SnapshotCompression; 4] = [
        SnapshotCompression::None,
        SnapshotCompression::Gzip,
        SnapshotCompression::Zlib,
        SnapshotCompression::Snappy,
    ];

    /// A `Write` into shared memory, so a test can see what a boxed writer wrote.
    #[derive(Clone, Default)]
    struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn bytes(&self) -> Vec<u8> {
            self.0.lock().unwrap().clone()
        }
    }

    fn element(i: i64) -> Element {
        Element::new(vec![
            Tensor::scalar(i),
            Tensor::strings(vec![Bytes::from(format!("s{i}")), Bytes::new()], vec![2]).unwrap(),
            Tensor::from_slice(&[i as f32, 0.5], vec![1, 2]).unwrap(),
        ])
    }

    fn dtypes() -> Vec<DType> {
        vec![DType::Int64, DType::String, DType::Float]
    }

    fn write(elements: &[Element], c: SnapshotCompression) -> Vec<u8> {
        let out = Shared::default();
        let mut w = ChunkWriter::new(Box::new(out.clone()), c);
        for e in elements {
            w.write(e).unwrap();
        }
        assert_eq!(w.num_elements(), elements.len() as u64);
        let size = w.finish().unwrap();
        assert_eq!(size, out.bytes().len() as u64);
        out.bytes()
    }

    fn read(bytes: Vec<u8>, c: SnapshotCompression) -> (Vec<Element>, Option<Error>) {
        let reader =
            ChunkReader::new("chunk_0_0_3", Box::new(io::Cursor::new(bytes)), c, dtypes()).unwrap();
        let mut ok = Vec::new();
        for r in reader {
            match r {
                Ok(e) => ok.push(e),
                Err(e) => return (ok, Some(e)),
            }
        }
        (ok, None)
    }

    /// Records that fill a Snappy block are slices of the block, and the
    /// next block goes into a new buffer while they are held: every element
    /// read is still what was written, in every compression.
    #[test]
    fn large_records_read_back_while_earlier_ones_are_held() {
        let values = SNAPPY_BLOCK_BYTES / 4 + 1000;
        let elements: Vec<Element> = (0..4)
            .map(|i| {
                let v: Vec<f32> = (0..values)
                    .map(|j| ((j as i64 * (i + 3)) % 251) as f32)
                    .collect();
                Element::new(vec![
                    Tensor::scalar(i),
                    Tensor::strings(vec![Bytes::from(format!("s{i}"))], vec![1]).unwrap(),
                    Tensor::from_slice(&v, vec![values as i64]).unwrap(),
                ])
            })
            .collect();
        for c in ALL {
            let (read, err) = read(write(&elements, c), c);
            assert!(err.is_none(), "{c}: {err:?}");
            assert_eq!(read, elements, "{c}");
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
    fn round_trips_every_compression() {
        let elements: Vec<Element> = (0..50).map(element).collect();
        for c in ALL {
            let (got, err) = read(write(&elements, c), c);
            assert!(err.is_none(), "{c}: {err:?}");
            assert_eq!(got, elements, "{c}");
            let (got, err) = read(write(&[], c), c);
            assert!(got.is_empty() && err.is_none(), "{c}: empty chunk");
        }
    }

    #[test]
    fn records_are_tensorflows_tensor_protos() {
        // What TensorFlow 2.21 wrote for (1, "1") (the records of a
        // distributed_save of range(1000).map(lambda x: (x, as_string(x)))).
        let e = Element::new(vec![Tensor::scalar(1i64), Tensor::scalar_string("1")]);
        let bytes = write(&[e], SnapshotCompression::None);
        let mut expected = Vec::new();
        write_record(&mut expected, &hex("0809120022080100000000000000")).unwrap();
        write_record(&mut expected, &hex("0807120022020131")).unwrap();
        assert_eq!(bytes, expected);
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn snappy_blocks_are_tensorflows_framing() {
        // 1 MiB of barely compressible data in one component: the record's
        // header in a short block, its 1 MiB body in a block of its own (as
        // TensorFlow's writer makes a write larger than its buffer), the
        // CRC in a last one; each `u32` BE length + raw Snappy block.
        let mut state = 1u32;
        let data: Vec<u8> = (0..1 << 20)
            .map(|_| {
                state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (state >> 24) as u8
            })
            .collect();
        let e = Element::new(vec![
            Tensor::from_slice(&data, vec![data.len() as i64]).unwrap(),
        ]);
        let bytes = write(std::slice::from_ref(&e), SnapshotCompression::Snappy);
        let mut pos = 0;
        let mut uncompressed = Vec::new();
        let mut blocks = 0;
        while pos < bytes.len() {
            let len = u32::from_be_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
            let block = snap::raw::Decoder::new()
                .decompress_vec(&bytes[pos + 4..pos + 4 + len])
                .unwrap();
            assert!(block.len() <= LARGE_WRITE_BLOCK_BYTES);
            uncompressed.extend(block);
            pos += 4 + len;
            blocks += 1;
        }
        assert_eq!(blocks, 3);
        let mut plain = Vec::new();
        let mut record = Vec::new();
        encode_tensor(&e.components[0], &mut record);
        write_record(&mut plain, &record).unwrap();
        assert_eq!(uncompressed, plain);
        let reader = ChunkReader::new(
            "big",
            Box::new(io::Cursor::new(bytes)),
            SnapshotCompression::Snappy,
            vec![DType::UInt8],
        )
        .unwrap();
        let got: Vec<Element> = reader.map(|r| r.unwrap()).collect();
        assert_eq!(got, vec![e]);
    }

    /// `tests/fixtures/snapshots/<name>`, written by TensorFlow 2.21's
    /// distributed_save (see `generate.py` there).
    pub(crate) fn fixture(name: &str) -> String {
        format!(
            "{}/tests/fixtures/snapshots/{name}",
            env!("CARGO_MANIFEST_DIR")
        )
    }

    /// The elements TensorFlow's `load` read from a fixture, from its
    /// `expected.txt` (`<int> <string hex> <float>,<float>` per line).
    pub(crate) fn fixture_elements(name: &str) -> Vec<Element> {
        let text = std::fs::read_to_string(format!("{}/expected.txt", fixture(name))).unwrap();
        text.lines()
            .map(|line| {
                let parts: Vec<&str> = line.split(' ').collect();
                let floats: Vec<f32> = parts[2].split(',').map(|f| f.parse().unwrap()).collect();
                Element::new(vec![
                    Tensor::scalar(parts[0].parse::<i64>().unwrap()),
                    Tensor::scalar_string(hex(parts[1])),
                    Tensor::from_slice(&floats, vec![2]).unwrap(),
                ])
            })
            .collect()
    }

    pub(crate) fn sorted(mut elements: Vec<Element>) -> Vec<Element> {
        elements.sort_by_key(|e| e.components[0].to_scalar::<i64>().unwrap());
        elements
    }

    #[test]
    fn reads_tensorflows_chunks() {
        let fs = crate::io::LocalFileSystem;
        let dtypes = vec![DType::Int64, DType::String, DType::Float];
        for (name, c) in [
            ("none", SnapshotCompression::None),
            ("gzip", SnapshotCompression::Gzip),
            ("zlib", SnapshotCompression::Zlib),
            ("snappy", SnapshotCompression::Snappy),
        ] {
            let mut all = Vec::new();
            for chunk in ["chunk_0_0_20", "chunk_0_1_20"] {
                let path = format!("{}/chunks/{chunk}", fixture(name));
                let elements: Vec<Element> = ChunkReader::open(&fs, &path, c, dtypes.clone())
                    .unwrap()
                    .map(|r| r.unwrap())
                    .collect();
                assert_eq!(elements.len(), 20, "{path}");
                // Our records are TensorFlow's, byte for byte.
                let raw = std::fs::read(&path).unwrap();
                let plain = match c {
                    SnapshotCompression::None => raw.clone(),
                    SnapshotCompression::Gzip => {
                        let mut out = Vec::new();
                        flate2::read::GzDecoder::new(&raw[..])
                            .read_to_end(&mut out)
                            .unwrap();
                        out
                    }
                    SnapshotCompression::Zlib => {
                        let mut out = Vec::new();
                        flate2::read::ZlibDecoder::new(&raw[..])
                            .read_to_end(&mut out)
                            .unwrap();
                        out
                    }
                    SnapshotCompression::Snappy => {
                        let mut out = Vec::new();
                        SnappyBlockReader::new(&raw[..])
                            .read_to_end(&mut out)
                            .unwrap();
                        out
                    }
                };
                assert_eq!(write(&elements, SnapshotCompression::None), plain, "{path}");
                all.extend(elements);
            }
            assert_eq!(sorted(all), sorted(fixture_elements(name)), "{name}");
        }
    }

    #[test]
    fn bytes_written_counts_the_file() {
        for c in ALL {
            let out = Shared::default();
            let mut w = ChunkWriter::new(Box::new(out.clone()), c);
            let mut last = 0;
            let mut state = 7u32;
            for _ in 0..1000 {
                // 1 KiB of noise per element: compressors must emit output.
                let noise: Vec<u8> = (0..1024)
                    .map(|_| {
                        state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                        (state >> 24) as u8
                    })
                    .collect();
                let e = Element::new(vec![Tensor::from_slice(&noise, vec![1024]).unwrap()]);
                w.write(&e).unwrap();
                assert!(w.bytes_written() >= last);
                last = w.bytes_written();
            }
            // Well past the first 256 KiB block: the count has moved.
            assert!(last > 0, "{c}");
            let size = w.finish().unwrap();
            assert!(size >= last, "{c}");
            assert_eq!(size, out.bytes().len() as u64, "{c}");
        }
    }

    #[test]
    fn damage_is_located() {
        let elements: Vec<Element> = (0..3).map(element).collect();
        let plain = write(&elements, SnapshotCompression::None);
        // The first record (an int64 scalar) is 12 + 14 + 4 bytes.
        let mut bad = plain.clone();
        bad[12 + 3] ^= 0x40;
        let (got, err) = read(bad, SnapshotCompression::None);
        assert!(got.is_empty());
        expect_data_loss(err, &["chunk_0_0_3 at offset 0", "CRC"]);

        let mut bad = plain.clone();
        bad[30 + 2] ^= 0x01;
        let (_, err) = read(bad, SnapshotCompression::None);
        expect_data_loss(err, &["chunk_0_0_3 at offset 30", "length fails its CRC"]);

        // Cut inside a record, and cut between the records of an element.
        let (got, err) = read(plain[..plain.len() - 2].to_vec(), SnapshotCompression::None);
        assert_eq!(got.len(), 2);
        expect_data_loss(err, &["truncated record"]);
        let (got, err) = read(plain[..30].to_vec(), SnapshotCompression::None);
        assert!(got.is_empty());
        expect_data_loss(
            err,
            &[
                "chunk_0_0_3 at offset 30",
                "after 1 records",
                "1 of its 3 components",
            ],
        );

        // A record that is not a TensorProto, and one of the wrong dtype.
        let mut wrong = Vec::new();
        write_record(&mut wrong, b"\xff\xff\xff").unwrap();
        let (_, err) = read(wrong, SnapshotCompression::None);
        expect_data_loss(err, &["at offset 0", "not a TensorProto"]);
        let mut wrong = Vec::new();
        let mut record = Vec::new();
        encode_tensor(&Tensor::scalar(1.5f64), &mut record);
        write_record(&mut wrong, &record).unwrap();
        let (_, err) = read(wrong, SnapshotCompression::None);
        expect_data_loss(err, &["component 0 of element 0", "float64", "int64"]);
    }

    #[test]
    fn damaged_compressed_chunks_are_located() {
        let elements: Vec<Element> = (0..3).map(element).collect();
        for c in [
            SnapshotCompression::Gzip,
            SnapshotCompression::Zlib,
            SnapshotCompression::Snappy,
        ] {
            let full = write(&elements, c);
            for cut in [2, full.len() / 2, full.len() - 1] {
                let (_, err) = read(full[..cut].to_vec(), c);
                expect_data_loss(err, &["chunk_0_0_3", "uncompressed"]);
            }
        }
        // Snappy: a damaged block, a block length past any limit, and a
        // block claiming more output than its bytes can hold.
        let full = write(&elements, SnapshotCompression::Snappy);
        let mut bad = full.clone();
        bad[4] = 0xff; // the varint of the uncompressed length
        bad[5] = 0xff;
        bad[6] = 0xff;
        bad[7] = 0xff;
        bad[8] = 0x7f;
        let (_, err) = read(bad, SnapshotCompression::Snappy);
        expect_data_loss(err, &["Snappy block at file offset 0"]);
        let (_, err) = read(vec![0xff, 0xff, 0xff, 0xff, 0], SnapshotCompression::Snappy);
        expect_data_loss(err, &["claims 4294967295 compressed bytes"]);
        // Valid Snappy of 1000 zero bytes, with its length header raised.
        let mut block = snap::raw::Encoder::new().compress_vec(&[0; 1000]).unwrap();
        block.splice(0..2, [0x80, 0x80, 0x80, 0x80, 0x01]); // 2^28 bytes
        let mut framed = (block.len() as u32).to_be_bytes().to_vec();
        framed.extend(block);
        let (_, err) = read(framed, SnapshotCompression::Snappy);
        expect_data_loss(err, &["claims to decompress to 268435456 bytes"]);
    }

    #[test]
    fn huge_record_length_is_refused_before_allocating() {
        let len = (1u64 << 40).to_le_bytes();
        let mut bytes = len.to_vec();
        bytes.extend(tfrecord::masked_crc32c(&len).to_le_bytes());
        bytes.extend(b"short");
        let (_, err) = read(bytes, SnapshotCompression::None);
        expect_data_loss(err, &["claims 1099511627776 bytes"]);
    }

    #[test]
    fn no_components_is_refused() {
        let err = ChunkReader::new(
            "c",
            Box::new(io::empty()),
            SnapshotCompression::None,
            vec![],
        )
        .unwrap_err();
        assert!(err.to_string().contains("no components"), "{err}");
    }
}
