//! TensorFlow's Snappy block framing for chunk files (tsl's
//! `SnappyOutputBuffer` / `SnappyInputStream`), not the Snappy framing
//! format: blocks of `u32` big-endian compressed length followed by one raw
//! Snappy block, boundaries anywhere in the record stream. See the chunk
//! module's docs for what TensorFlow's writer and reader do with it.
//!
//! Memory is bounded: the writer holds one block, the reader one block;
//! a block's claimed lengths are checked against [`MAX_SNAPPY_BLOCK_BYTES`]
//! and Snappy's expansion before anything is allocated for them.

use std::io::{self, BufRead, Read, Write};

use bytes::Bytes;

use crate::io::compression::read_full;

/// The uncompressed bytes of one Snappy block [`super::ChunkWriter`] writes:
/// TensorFlow's `SnappyCompressionOptions::input_buffer_size` (256 KiB).
pub const SNAPPY_BLOCK_BYTES: usize = 256 << 10;

/// The most one Snappy block may decompress to: what TensorFlow's chunk
/// reader's output buffer holds (512 MiB). TensorFlow refuses larger blocks
/// with `ResourceExhausted`; so does [`super::ChunkReader`] (as corruption, since
/// no TensorFlow-readable chunk has one).
pub const MAX_SNAPPY_BLOCK_BYTES: usize = 512 << 20;

/// The largest block one large write becomes (well under what TensorFlow's
/// reader accepts, [`MAX_SNAPPY_BLOCK_BYTES`]); larger writes take several.
pub(super) const LARGE_WRITE_BLOCK_BYTES: usize = 64 << 20;

/// Snappy cannot expand its input more than this: its densest op is a
/// 3-byte copy of 64 bytes. A block claiming more is corrupt, and is refused
/// before its output is allocated.
const MAX_SNAPPY_EXPANSION: usize = 22;

/// The largest buffer reserved up front for a Snappy block's compressed
/// bytes; it grows with the bytes that actually arrive.
const MAX_INITIAL_RESERVE: usize = 1 << 20;

/// TensorFlow's Snappy block framing over a writer: `u32` big-endian
/// compressed length, then the raw Snappy block, per [`SNAPPY_BLOCK_BYTES`]
/// of input.
pub(super) struct SnappyBlockWriter<W> {
    out: W,
    block: Vec<u8>,
    compressed: Vec<u8>,
    encoder: snap::raw::Encoder,
}

impl<W: Write> SnappyBlockWriter<W> {
    pub(super) fn new(out: W) -> Self {
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

    /// The writer below, for the bytes it has counted.
    pub(super) fn get_ref(&self) -> &W {
        &self.out
    }

    pub(super) fn finish(mut self) -> io::Result<W> {
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

/// TensorFlow's Snappy block framing, decoded one block at a time. Errors
/// are `InvalidData` naming the block's offset in the file.
///
/// A decompressed block is kept as [`Bytes`] so that a large record lying
/// inside one block (TensorFlow's writer and ours give a large record a
/// block of its own) is handed out as a slice of it, not copied
/// ([`SnappyBlockReader::take_within_block`]).
pub(super) struct SnappyBlockReader<R> {
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
    pub(super) fn new(input: R) -> Self {
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
    pub(super) fn take_within_block(&mut self, len: usize) -> io::Result<Option<Bytes>> {
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
