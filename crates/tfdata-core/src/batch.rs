//! The compact batch form of tfdata's own data plane (`tfdata.stream.ElementBatch`,
//! described in `proto/tfdata/stream.proto`): many elements per message, a
//! few header bytes per element instead of a protobuf `TensorProto` each,
//! and tensor buffers carried as `Bytes` from the pipeline to the transport
//! and from the transport to the reader without copies of large pieces.
//!
//! [`BatchEncoder`] builds a batch on the worker; [`Compressor`] decides per
//! chunk whether Snappy pays; [`decode_batch`] takes a batch apart on the
//! reader and rejects malformed input with an error, never a panic.

use bytes::{Bytes, BytesMut};
use tfdata_proto::tfdata::stream::{Chunk, ElementBatch};

use crate::lineage::{SplitName, SplitsNamed};
use crate::positions::{MAX_POSITION_DEPTH, Position};
use crate::tensor::{TensorData, num_elements};
use crate::{DType, Element, Error, Result, Tensor};

/// Pieces at least this large travel as chunks of their own, straight from
/// the tensor's buffer; smaller ones are copied into a shared chunk, which
/// costs less than a chunk's framing per piece.
pub const LARGE_PIECE_BYTES: usize = 32 << 10;
/// A shared chunk is closed once it holds this much, so compression and
/// decompression work on bounded blocks.
pub const PACKED_CHUNK_BYTES: usize = 256 << 10;
/// Chunks smaller than this are never compressed under `Auto`: the saving
/// cannot pay for the work.
pub const MIN_COMPRESS_BYTES: usize = 4 << 10;
/// Under `Auto`, a chunk larger than twice this is first judged on a sample
/// of this size, so incompressible megabytes cost a 64 KiB attempt.
pub const COMPRESS_SAMPLE_BYTES: usize = 64 << 10;
/// Under `Auto`, after a chunk that did not pay, the next 1, 2, 4, … up to
/// this many chunks are sent without trying.
pub const MAX_COMPRESS_BACKOFF: u32 = 64;
/// Largest chunk a reader decompresses (a bound on what a peer can make us
/// allocate; the worker never builds chunks near it).
pub const MAX_CHUNK_BYTES: u64 = 1 << 31;

const TAG_SAME: u8 = 0;
const TAG_NEW: u8 = 1;

/// Whether chunks are Snappy-compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkCompression {
    Never,
    Always,
    /// Only chunks that Snappy shrinks by at least an eighth.
    Auto,
}

/// The compression decision of one stream, kept across its batches (so an
/// incompressible stream stops paying for attempts).
#[derive(Debug)]
pub struct Compressor {
    mode: ChunkCompression,
    skip: u32,
    backoff: u32,
}

impl Compressor {
    /// Whether this stream may compress at all (so encoding can be CPU work).
    pub fn may_compress(&self) -> bool {
        self.mode != ChunkCompression::Never
    }

    pub fn new(mode: ChunkCompression) -> Self {
        Compressor {
            mode,
            skip: 0,
            backoff: 0,
        }
    }

    fn chunk(&mut self, data: Bytes) -> Result<Chunk> {
        let raw = |data| Chunk {
            data,
            snappy_uncompressed_size: 0,
        };
        match self.mode {
            ChunkCompression::Never => Ok(raw(data)),
            ChunkCompression::Always if data.is_empty() => Ok(raw(data)),
            ChunkCompression::Always => snappy(&data),
            ChunkCompression::Auto => {
                if data.len() < MIN_COMPRESS_BYTES {
                    return Ok(raw(data));
                }
                if self.skip > 0 {
                    self.skip -= 1;
                    return Ok(raw(data));
                }
                if data.len() > 2 * COMPRESS_SAMPLE_BYTES {
                    let sample = snappy(&data[..COMPRESS_SAMPLE_BYTES])?;
                    if !pays(sample.data.len(), COMPRESS_SAMPLE_BYTES) {
                        self.did_not_pay();
                        return Ok(raw(data));
                    }
                }
                let compressed = snappy(&data)?;
                if pays(compressed.data.len(), data.len()) {
                    self.backoff = 0;
                    Ok(compressed)
                } else {
                    self.did_not_pay();
                    Ok(raw(data))
                }
            }
        }
    }

    fn did_not_pay(&mut self) {
        self.backoff = (self.backoff * 2).clamp(1, MAX_COMPRESS_BACKOFF);
        self.skip = self.backoff;
    }
}

fn pays(compressed: usize, raw: usize) -> bool {
    compressed * 8 <= raw * 7
}

fn snappy(data: &[u8]) -> Result<Chunk> {
    let compressed = snap::raw::Encoder::new()
        .compress_vec(data)
        .map_err(|e| Error::Internal(format!("snappy compression failed: {e}")))?;
    Ok(Chunk {
        data: compressed.into(),
        snappy_uncompressed_size: data.len() as u64,
    })
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_name(out: &mut Vec<u8>, n: &SplitName) {
    for v in [n.provider, n.repetition, n.index] {
        put_varint(out, v as u64);
    }
}

/// Builds one [`ElementBatch`] from elements pushed in order.
#[derive(Default)]
pub struct BatchEncoder {
    headers: Vec<u8>,
    packed: BytesMut,
    /// Chunks in order, not yet compressed.
    chunks: Vec<Bytes>,
    previous: Vec<u8>,
    scratch: Vec<u8>,
    num_elements: u32,
    payload_bytes: u64,
    /// `ElementBatch.whole_splits`, begun at the first element naming one.
    whole_splits: Vec<u8>,
    /// `ElementBatch.split_pieces`, begun at the first element holding one.
    split_pieces: Vec<u8>,
    named: SplitsNamed,
}

impl BatchEncoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// An encoder holding `elements`, its shared chunk allocated once at
    /// the size their small pieces need (at most [`PACKED_CHUNK_BYTES`])
    /// rather than grown by doubling: a batch of 8 KiB tensors otherwise
    /// reallocates and copies its chunk six times.
    pub fn with_elements(elements: &[Element]) -> Self {
        let small_bytes: usize = elements
            .iter()
            .flat_map(|e| &e.components)
            .map(|t| match t.data() {
                TensorData::Buffer(b) if b.len() < LARGE_PIECE_BYTES => b.len(),
                TensorData::Buffer(_) => 0,
                TensorData::Strings(s) => s
                    .iter()
                    .map(Bytes::len)
                    .filter(|&n| n < LARGE_PIECE_BYTES)
                    .sum(),
            })
            .sum();
        let mut encoder = Self::default();
        encoder.packed.reserve(small_bytes.min(PACKED_CHUNK_BYTES));
        for e in elements {
            encoder.push(e);
        }
        encoder
    }

    pub fn num_elements(&self) -> u32 {
        self.num_elements
    }

    pub fn payload_bytes(&self) -> u64 {
        self.payload_bytes
    }

    pub fn push(&mut self, element: &Element) {
        self.scratch.clear();
        put_varint(&mut self.scratch, element.components.len() as u64);
        for t in &element.components {
            put_varint(&mut self.scratch, t.dtype().code() as u32 as u64);
            put_varint(&mut self.scratch, t.shape().len() as u64);
            for &d in t.shape() {
                // Tensor shapes are validated non-negative.
                put_varint(&mut self.scratch, d as u64);
            }
            match t.data() {
                TensorData::Buffer(b) => self.piece(b),
                TensorData::Strings(strings) => {
                    for s in strings {
                        put_varint(&mut self.scratch, s.len() as u64);
                        self.piece(s);
                    }
                }
            }
        }
        if self.num_elements > 0 && self.scratch == self.previous {
            self.headers.push(TAG_SAME);
        } else {
            self.headers.push(TAG_NEW);
            self.headers.extend_from_slice(&self.scratch);
            std::mem::swap(&mut self.previous, &mut self.scratch);
        }
        self.push_whole_splits(element);
        self.num_elements += 1;
        self.payload_bytes += element.byte_size() as u64;
    }

    /// Records the splits `element` holds whole, and its pieces of others
    /// (it is being sent).
    fn push_whole_splits(&mut self, element: &Element) {
        if element.lineage.is_empty() {
            if !self.whole_splits.is_empty() {
                self.whole_splits.push(0);
            }
            if !self.split_pieces.is_empty() {
                // No pieces, no ends.
                self.split_pieces.extend_from_slice(&[0, 0]);
            }
            return;
        }
        self.named.clear();
        let accounted = element.lineage.whole_splits(&mut self.named);
        let named = &self.named;
        if !named.whole.is_empty() || accounted || !self.whole_splits.is_empty() {
            if self.whole_splits.is_empty() {
                // The elements before named none.
                self.whole_splits.resize(self.num_elements as usize, 0);
            }
            put_varint(
                &mut self.whole_splits,
                (named.whole.len() as u64) << 1 | u64::from(accounted),
            );
            for n in &named.whole {
                put_name(&mut self.whole_splits, n);
            }
        }
        if !named.pieces.is_empty() || !named.ends.is_empty() || !self.split_pieces.is_empty() {
            if self.split_pieces.is_empty() {
                // The elements before held no piece: no pieces, no ends.
                self.split_pieces.resize(2 * self.num_elements as usize, 0);
            }
            put_varint(&mut self.split_pieces, named.pieces.len() as u64);
            for (n, position) in &named.pieces {
                put_name(&mut self.split_pieces, n);
                put_varint(&mut self.split_pieces, position.len() as u64);
                for &i in position {
                    put_varint(&mut self.split_pieces, i as u64);
                }
            }
            put_varint(&mut self.split_pieces, named.ends.len() as u64);
            for (n, total) in &named.ends {
                put_name(&mut self.split_pieces, n);
                put_varint(&mut self.split_pieces, *total);
            }
        }
    }

    fn piece(&mut self, bytes: &Bytes) {
        if bytes.len() >= LARGE_PIECE_BYTES {
            self.flush_packed();
            self.chunks.push(bytes.clone());
            return;
        }
        if self.packed.len() + bytes.len() > PACKED_CHUNK_BYTES {
            self.flush_packed();
        }
        self.packed.extend_from_slice(bytes);
    }

    fn flush_packed(&mut self) {
        if !self.packed.is_empty() {
            self.chunks.push(self.packed.split().freeze());
        }
    }

    /// The batch; the caller sets `first_element_index`, `end_of_sequence`
    /// and `released_splits`.
    pub fn finish(mut self, compressor: &mut Compressor) -> Result<ElementBatch> {
        self.flush_packed();
        let chunks = self
            .chunks
            .into_iter()
            .map(|c| compressor.chunk(c))
            .collect::<Result<_>>()?;
        Ok(ElementBatch {
            headers: self.headers.into(),
            chunks,
            num_elements: self.num_elements,
            payload_bytes: self.payload_bytes,
            first_element_index: 0,
            end_of_sequence: false,
            whole_splits: self.whole_splits.into(),
            split_pieces: self.split_pieces.into(),
            released_splits: Vec::new(),
        })
    }
}

/// The splits a batch's elements hold whole (`ElementBatch.whole_splits`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct BatchSplits {
    /// Every element's names, in order.
    pub names: Vec<SplitName>,
    /// Per element: where its names end in `names`, and whether it is
    /// complete (made from exactly those splits). Empty: no element named
    /// any split.
    pub elements: Vec<(u32, bool)>,
    /// Every element's pieces of splits not named whole, in order.
    pub pieces: Vec<(SplitName, Position)>,
    /// Per element: where its pieces end in `pieces`, and its ends in
    /// `ends`. Empty: no element held a piece.
    pub piece_ends: Vec<(u32, u32)>,
    /// Every element's ends of splits (the split and its total number of
    /// pieces, `SplitsNamed::ends`), in order.
    pub ends: Vec<(SplitName, u64)>,
}

impl BatchSplits {
    /// Element `i`'s names, and whether it is complete.
    pub fn of(&self, i: usize) -> (&[SplitName], bool) {
        let Some(&(end, complete)) = self.elements.get(i) else {
            return (&[], false);
        };
        let start = i
            .checked_sub(1)
            .and_then(|p| self.elements.get(p))
            .map_or(0, |&(e, _)| e as usize);
        (&self.names[start..end as usize], complete)
    }

    /// Element `i`'s pieces of splits it does not hold whole, and the
    /// splits it ends with their totals.
    #[allow(clippy::type_complexity)]
    pub fn pieces_of(&self, i: usize) -> (&[(SplitName, Position)], &[(SplitName, u64)]) {
        let Some(&(end, ends_end)) = self.piece_ends.get(i) else {
            return (&[], &[]);
        };
        let (start, ends_start) = i
            .checked_sub(1)
            .and_then(|p| self.piece_ends.get(p))
            .map_or((0, 0), |&(e, f)| (e as usize, f as usize));
        (
            &self.pieces[start..end as usize],
            &self.ends[ends_start..ends_end as usize],
        )
    }
}

/// The splits the elements of `batch` hold whole, and their pieces of
/// others. Malformed input is an error.
pub fn whole_splits(batch: &ElementBatch) -> Result<BatchSplits> {
    let mut out = BatchSplits::default();
    decode_whole(batch, &mut out)?;
    decode_pieces(batch, &mut out)?;
    Ok(out)
}

fn read_name(h: &mut Headers<'_>) -> Result<SplitName> {
    let mut v = [0i64; 3];
    for x in &mut v {
        *x = i64::try_from(h.varint()?).map_err(|_| malformed("bad split name"))?;
    }
    Ok(SplitName {
        provider: v[0],
        repetition: v[1],
        index: v[2],
    })
}

fn decode_pieces(batch: &ElementBatch, out: &mut BatchSplits) -> Result<()> {
    // Every element takes at least two bytes: no pieces, no ends.
    let Some(mut h) = Headers::section(&batch.split_pieces, batch.num_elements, 2, "split-piece")?
    else {
        return Ok(());
    };
    out.piece_ends.reserve(batch.num_elements as usize);
    for _ in 0..batch.num_elements {
        // Every piece takes at least four bytes.
        let count = h.count(4, "split pieces")?;
        for _ in 0..count {
            let name = read_name(&mut h)?;
            let depth = h.varint()?;
            if depth == 0 || depth > MAX_POSITION_DEPTH as u64 {
                return Err(malformed(format!("a position {depth} deep")));
            }
            let position = (0..depth)
                .map(|_| i64::try_from(h.varint()?).map_err(|_| malformed("bad position")))
                .collect::<Result<Position>>()?;
            out.pieces.push((name, position));
        }
        // Every end takes at least four bytes.
        let ends = h.count(4, "split ends")?;
        for _ in 0..ends {
            let name = read_name(&mut h)?;
            out.ends.push((name, h.varint()?));
        }
        let end = u32::try_from(out.pieces.len()).map_err(|_| malformed("too many pieces"))?;
        let ends_end = u32::try_from(out.ends.len()).map_err(|_| malformed("too many ends"))?;
        out.piece_ends.push((end, ends_end));
    }
    if h.remaining() != 0 {
        return Err(malformed("trailing split-piece bytes"));
    }
    Ok(())
}

fn decode_whole(batch: &ElementBatch, out: &mut BatchSplits) -> Result<()> {
    // Every element takes at least one byte.
    let Some(mut h) = Headers::section(&batch.whole_splits, batch.num_elements, 1, "whole-split")?
    else {
        return Ok(());
    };
    out.elements.reserve(batch.num_elements as usize);
    for _ in 0..batch.num_elements {
        let tag = h.varint()?;
        let (count, complete) = (tag >> 1, tag & 1 == 1);
        // Every name takes at least three bytes.
        if count > (h.remaining() / 3) as u64 {
            return Err(malformed(format!("{count} whole splits")));
        }
        for _ in 0..count {
            out.names.push(read_name(&mut h)?);
        }
        let end = u32::try_from(out.names.len()).map_err(|_| malformed("too many names"))?;
        out.elements.push((end, complete));
    }
    if h.remaining() != 0 {
        return Err(malformed("trailing whole-split bytes"));
    }
    Ok(())
}

fn malformed(reason: impl Into<String>) -> Error {
    Error::DataLoss {
        location: "element batch".into(),
        reason: reason.into(),
    }
}

struct Headers<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Headers<'a> {
    /// A per-element section of a batch of `elements` (`what` names it in
    /// errors), each element taking at least `min_bytes`; `None` when the
    /// batch has no such section. The bound keeps a hostile count from
    /// reserving memory the bytes cannot fill.
    fn section(
        bytes: &'a [u8],
        elements: u32,
        min_bytes: usize,
        what: &str,
    ) -> Result<Option<Headers<'a>>> {
        if bytes.is_empty() {
            return Ok(None);
        }
        if u64::from(elements).saturating_mul(min_bytes as u64) > bytes.len() as u64 {
            return Err(malformed(format!(
                "{elements} elements in {} {what} bytes",
                bytes.len()
            )));
        }
        Ok(Some(Headers { bytes, pos: 0 }))
    }

    /// A count of items that take at least `min_bytes` each, checked
    /// against the bytes left.
    fn count(&mut self, min_bytes: usize, what: &str) -> Result<u64> {
        let count = self.varint()?;
        if count > (self.remaining() / min_bytes) as u64 {
            return Err(malformed(format!("{count} {what}")));
        }
        Ok(count)
    }

    fn byte(&mut self) -> Result<u8> {
        let b = *self
            .bytes
            .get(self.pos)
            .ok_or_else(|| malformed("headers end early"))?;
        self.pos += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(malformed("varint too long"))
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }
}

struct Component {
    dtype: DType,
    shape: Vec<i64>,
    /// String lengths; `None` for fixed-size dtypes.
    strings: Option<Vec<usize>>,
    /// Byte length of a fixed-size tensor's buffer.
    len: usize,
}

fn parse_structure(h: &mut Headers<'_>) -> Result<Vec<Component>> {
    let n = h.varint()?;
    // Every component takes at least two header bytes: no allocation
    // larger than the message.
    if n > h.remaining() as u64 {
        return Err(malformed(format!("{n} components")));
    }
    let mut components = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let code = i32::try_from(h.varint()?).map_err(|_| malformed("bad dtype"))?;
        let dtype = DType::from_code(code)?;
        let rank = h.varint()?;
        if rank > h.remaining() as u64 {
            return Err(malformed(format!("rank {rank}")));
        }
        let mut shape = Vec::with_capacity(rank as usize);
        for _ in 0..rank {
            let d = i64::try_from(h.varint()?).map_err(|_| malformed("dimension too large"))?;
            shape.push(d);
        }
        let count = num_elements(&shape)?;
        let (strings, len) = match dtype.size() {
            None => {
                if count > h.remaining() as u64 {
                    return Err(malformed(format!("{count} strings")));
                }
                let mut lens = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    let len =
                        usize::try_from(h.varint()?).map_err(|_| malformed("string too long"))?;
                    lens.push(len);
                }
                (Some(lens), 0)
            }
            Some(size) => {
                let len = count
                    .checked_mul(size as u64)
                    .and_then(|l| usize::try_from(l).ok())
                    .ok_or_else(|| malformed(format!("tensor of shape {shape:?} too large")))?;
                (None, len)
            }
        };
        components.push(Component {
            dtype,
            shape,
            strings,
            len,
        });
    }
    Ok(components)
}

struct Pieces {
    chunks: Vec<Bytes>,
    index: usize,
    offset: usize,
}

impl Pieces {
    fn take(&mut self, len: usize) -> Result<Bytes> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        while self
            .chunks
            .get(self.index)
            .is_some_and(|c| self.offset == c.len())
        {
            self.index += 1;
            self.offset = 0;
        }
        let chunk = self
            .chunks
            .get(self.index)
            .ok_or_else(|| malformed("pieces run past the last chunk"))?;
        if chunk.len() - self.offset < len {
            return Err(malformed("a piece spans two chunks"));
        }
        let piece = chunk.slice(self.offset..self.offset + len);
        self.offset += len;
        Ok(piece)
    }

    fn all_used(&self) -> bool {
        self.chunks[self.index.min(self.chunks.len())..]
            .iter()
            .enumerate()
            .all(|(i, c)| c.len() == if i == 0 { self.offset } else { 0 })
    }
}

fn decompress(chunk: Chunk) -> Result<Bytes> {
    if chunk.snappy_uncompressed_size == 0 {
        return Ok(chunk.data);
    }
    if chunk.snappy_uncompressed_size > MAX_CHUNK_BYTES {
        return Err(malformed(format!(
            "chunk of {} bytes",
            chunk.snappy_uncompressed_size
        )));
    }
    let len = snap::raw::decompress_len(&chunk.data)
        .map_err(|e| malformed(format!("bad snappy header: {e}")))?;
    if len as u64 != chunk.snappy_uncompressed_size {
        return Err(malformed(format!(
            "snappy block holds {len} bytes, the chunk says {}",
            chunk.snappy_uncompressed_size
        )));
    }
    let mut out = BytesMut::zeroed(len);
    snap::raw::Decoder::new()
        .decompress(&chunk.data, &mut out)
        .map_err(|e| malformed(format!("snappy decompression failed: {e}")))?;
    Ok(out.freeze())
}

/// The elements of a batch, in order. Tensors share the message's buffers.
pub fn decode_batch(batch: ElementBatch) -> Result<Vec<Element>> {
    let num = batch.num_elements as usize;
    // Every element takes at least one header byte.
    if num > batch.headers.len() {
        return Err(malformed(format!(
            "{num} elements in {} header bytes",
            batch.headers.len()
        )));
    }
    let chunks = batch
        .chunks
        .into_iter()
        .map(decompress)
        .collect::<Result<Vec<_>>>()?;
    let mut pieces = Pieces {
        chunks,
        index: 0,
        offset: 0,
    };
    let mut h = Headers {
        bytes: &batch.headers,
        pos: 0,
    };
    let mut structure: Option<Vec<Component>> = None;
    let mut elements = Vec::with_capacity(num);
    for _ in 0..num {
        match h.byte()? {
            TAG_SAME => {}
            TAG_NEW => structure = Some(parse_structure(&mut h)?),
            tag => return Err(malformed(format!("unknown tag {tag}"))),
        }
        let Some(components) = &structure else {
            return Err(malformed("the first element repeats a missing structure"));
        };
        let mut tensors = Vec::with_capacity(components.len());
        for c in components {
            let data = match &c.strings {
                None => TensorData::Buffer(pieces.take(c.len)?),
                Some(lens) => TensorData::Strings(
                    lens.iter()
                        .map(|&l| pieces.take(l))
                        .collect::<Result<_>>()?,
                ),
            };
            tensors.push(Tensor::new(c.dtype, c.shape.clone(), data)?);
        }
        elements.push(Element::new(tensors));
    }
    if h.remaining() != 0 {
        return Err(malformed("trailing header bytes"));
    }
    if !pieces.all_used() {
        return Err(malformed("trailing chunk bytes"));
    }
    Ok(elements)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Element> {
        let big: Vec<f32> = (0..20_000).map(|i| i as f32).collect();
        vec![
            Element::single(Tensor::scalar(1i64)),
            Element::single(Tensor::scalar(2i64)),
            Element::new(vec![
                Tensor::strings(
                    vec![Bytes::from("ab"), Bytes::new(), Bytes::from("xyz")],
                    vec![3],
                )
                .unwrap(),
                Tensor::from_slice::<i32>(&[], vec![0, 4]).unwrap(),
                Tensor::from_slice(&big, vec![100, 200]).unwrap(),
            ]),
            Element::single(Tensor::scalar(3i64)),
            Element::new(vec![]),
        ]
    }

    fn round_trip(mode: ChunkCompression) {
        let mut encoder = BatchEncoder::new();
        for e in sample() {
            encoder.push(&e);
        }
        let batch = encoder.finish(&mut Compressor::new(mode)).unwrap();
        assert_eq!(batch.num_elements, 5);
        assert_eq!(
            batch.payload_bytes,
            sample().iter().map(|e| e.byte_size() as u64).sum::<u64>()
        );
        assert_eq!(decode_batch(batch).unwrap(), sample());
    }

    #[test]
    fn round_trips_in_every_compression_mode() {
        round_trip(ChunkCompression::Never);
        round_trip(ChunkCompression::Always);
        round_trip(ChunkCompression::Auto);
    }

    #[test]
    fn whole_splits_travel_with_their_batch_and_garbage_is_refused() {
        use crate::lineage::{Lineage, SplitLease};
        let name = |index| SplitName {
            provider: 1,
            repetition: 2,
            index,
        };
        let named = |index| {
            Element::single(Tensor::scalar(index))
                .with_lineage(Lineage::of(SplitLease::named(name(index), || {})))
        };
        let far = SplitName {
            provider: 0,
            repetition: 0,
            index: i64::MAX,
        };
        // Unnamed elements first, then two named, one unnamed, one of two
        // named splits, one of a named and an unnamed split (incomplete).
        let mut both = named(300);
        both.lineage
            .extend(Lineage::of(SplitLease::named(far, || {})));
        let mut partly = named(9);
        partly.lineage.extend(Lineage::of(SplitLease::new(|| {})));
        let elements = vec![
            Element::single(Tensor::scalar(0i64)),
            named(7),
            named(8),
            Element::single(Tensor::scalar(0i64)),
            both,
            partly,
        ];
        let batch = BatchEncoder::with_elements(&elements)
            .finish(&mut Compressor::new(ChunkCompression::Never))
            .unwrap();
        let splits = whole_splits(&batch).unwrap();
        let per_element: Vec<(Vec<SplitName>, bool)> = (0..6)
            .map(|i| {
                let (names, complete) = splits.of(i);
                (names.to_vec(), complete)
            })
            .collect();
        assert_eq!(
            per_element,
            vec![
                (vec![], false),
                (vec![name(7)], true),
                (vec![name(8)], true),
                (vec![], false),
                (vec![name(300), far], true),
                (vec![name(9)], false),
            ]
        );
        // No names, no bytes.
        let batch = BatchEncoder::with_elements(&sample())
            .finish(&mut Compressor::new(ChunkCompression::Never))
            .unwrap();
        assert!(batch.whole_splits.is_empty());
        assert_eq!(whole_splits(&batch).unwrap(), BatchSplits::default());
        // Hostile counts and truncations are errors, not allocations.
        for garbage in [
            vec![0xff, 0xff, 0xff, 0xff, 0x0f],
            vec![2, 1, 1],
            vec![0, 0, 0, 0, 0, 9],
            vec![0xff; 20],
            vec![0, 0],
        ] {
            let batch = ElementBatch {
                num_elements: 5,
                whole_splits: garbage.clone().into(),
                ..Default::default()
            };
            assert!(whole_splits(&batch).is_err(), "{garbage:?}");
        }
    }

    #[test]
    fn pieces_of_splits_travel_with_their_batch_and_garbage_is_refused() {
        use crate::lineage::{Lineage, SplitLease};
        let name = SplitName {
            provider: 0,
            repetition: 1,
            index: 5,
        };
        let file = Lineage::of(SplitLease::named(name, || {}));
        let records: Vec<Element> = (0..3)
            .map(|i| Element::single(Tensor::scalar(i)).with_lineage(file.child(i).unwrap()))
            .collect();
        let elements = vec![
            Element::single(Tensor::scalar(9i64)),
            records[0].clone(),
            Element::single(Tensor::scalar(1i64))
                .with_lineage(records[1].lineage.child(4).unwrap()),
            // Made from no split, after elements with pieces.
            Element::single(Tensor::scalar(7i64)),
        ];
        let batch = BatchEncoder::with_elements(&elements)
            .finish(&mut Compressor::new(ChunkCompression::Never))
            .unwrap();
        assert_eq!(
            batch.whole_splits.len(),
            4,
            "no split is held whole: only tags"
        );
        let splits = whole_splits(&batch).unwrap();
        assert_eq!(splits.pieces_of(0), (&[][..], &[][..]));
        assert_eq!(splits.pieces_of(1), (&[(name, vec![0])][..], &[][..]));
        assert_eq!(splits.pieces_of(2), (&[(name, vec![1, 4])][..], &[][..]));
        assert_eq!(splits.pieces_of(3), (&[][..], &[][..]));
        assert_eq!(splits.of(3), (&[][..], false));
        assert_eq!(splits.of(1), (&[][..], true), "accounted by position");
        // The element holding the last of the split ends it: 3 records sent.
        drop((file, elements));
        let last = records.into_iter().last().unwrap();
        let batch = BatchEncoder::with_elements(&[Element::single(Tensor::scalar(0i64)), last])
            .finish(&mut Compressor::new(ChunkCompression::Never))
            .unwrap();
        let splits = whole_splits(&batch).unwrap();
        assert_eq!(
            splits.pieces_of(1),
            (&[(name, vec![2])][..], &[(name, 3)][..])
        );
        for garbage in [
            vec![0, 0, 0, 0, 0xff, 0xff, 0xff, 0x0f],
            vec![0, 0, 0, 0, 1, 0, 0, 0, 0],
            vec![
                0, 0, 0, 0, 1, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ],
            vec![0, 0, 1, 0, 0, 0, 1, 0, 0],
            vec![0, 0, 0, 0, 0, 9],
            vec![0, 0, 0, 0, 0, 0xff, 0x0f],
        ] {
            let batch = ElementBatch {
                num_elements: 3,
                split_pieces: garbage.clone().into(),
                ..Default::default()
            };
            assert!(whole_splits(&batch).is_err(), "{garbage:?}");
        }
    }

    #[test]
    fn repeated_structures_cost_one_header_byte() {
        let mut encoder = BatchEncoder::new();
        for i in 0..100i64 {
            encoder.push(&Element::single(Tensor::scalar(i)));
        }
        let batch = encoder
            .finish(&mut Compressor::new(ChunkCompression::Never))
            .unwrap();
        assert_eq!(batch.headers.len(), 4 + 99);
        assert_eq!(batch.chunks.len(), 1);
        let values: Vec<i64> = decode_batch(batch)
            .unwrap()
            .iter()
            .map(|e| e.components[0].to_scalar().unwrap())
            .collect();
        assert_eq!(values, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn large_pieces_are_not_copied_and_incompressible_ones_not_compressed() {
        let mut state = 1u64;
        let noise: Vec<u8> = (0..(1 << 20))
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 56) as u8
            })
            .collect();
        let tensor = Tensor::from_slice(&noise, vec![1 << 20]).unwrap();
        let TensorData::Buffer(buffer) = tensor.data().clone() else {
            unreachable!()
        };
        let mut encoder = BatchEncoder::new();
        encoder.push(&Element::single(tensor.clone()));
        let batch = encoder
            .finish(&mut Compressor::new(ChunkCompression::Auto))
            .unwrap();
        assert_eq!(batch.chunks.len(), 1);
        assert_eq!(batch.chunks[0].snappy_uncompressed_size, 0);
        assert_eq!(batch.chunks[0].data.as_ptr(), buffer.as_ptr());
        // Compressible data of the same size is compressed.
        let zeros = Tensor::from_slice(&vec![0u8; 1 << 20], vec![1 << 20]).unwrap();
        let mut encoder = BatchEncoder::new();
        encoder.push(&Element::single(zeros.clone()));
        let batch = encoder
            .finish(&mut Compressor::new(ChunkCompression::Auto))
            .unwrap();
        assert!(batch.chunks[0].snappy_uncompressed_size > 0);
        assert_eq!(decode_batch(batch).unwrap(), vec![Element::single(zeros)]);
    }

    #[test]
    fn malformed_batches_are_errors() {
        let mut encoder = BatchEncoder::new();
        for e in sample() {
            encoder.push(&e);
        }
        let good = encoder
            .finish(&mut Compressor::new(ChunkCompression::Always))
            .unwrap();
        let mut bad = good.clone();
        bad.num_elements = 6;
        assert!(decode_batch(bad).is_err());
        let mut bad = good.clone();
        bad.headers = Bytes::from_static(&[0, 0, 0, 0, 0]);
        assert!(decode_batch(bad).is_err());
        let mut bad = good.clone();
        bad.chunks[0].snappy_uncompressed_size += 1;
        assert!(decode_batch(bad).is_err());
        let mut bad = good.clone();
        bad.chunks.pop();
        assert!(decode_batch(bad).is_err());
        let mut bad = good.clone();
        bad.headers = Bytes::from_static(&[1, 0xff, 0xff, 0xff, 0xff, 0xff]);
        bad.num_elements = 1;
        assert!(decode_batch(bad).is_err());
        // A huge claimed shape with no data behind it.
        let mut bad = good;
        bad.headers = Bytes::from_static(&[1, 1, 9, 2, 0xff, 0xff, 0x7f, 0xff, 0xff, 0x7f]);
        bad.num_elements = 1;
        assert!(decode_batch(bad).is_err());
        // Every truncation fails cleanly.
        let mut encoder = BatchEncoder::new();
        for e in sample() {
            encoder.push(&e);
        }
        let good = encoder
            .finish(&mut Compressor::new(ChunkCompression::Never))
            .unwrap();
        for cut in 0..good.headers.len() {
            let mut bad = good.clone();
            bad.headers = good.headers.slice(..cut);
            assert!(decode_batch(bad).is_err(), "cut at {cut}");
        }
    }
}
