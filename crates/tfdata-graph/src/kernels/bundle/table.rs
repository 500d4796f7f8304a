//! The sorted key/value table a tensor bundle's `.index` file is:
//! TensorFlow's `tensorflow/core/lib/io/table` format, which is LevelDB's
//! SSTable without filters (reimplemented from the format's description).
//!
//! A file is data blocks, an (empty) meta-index block, an index block and
//! a 48-byte footer. A block holds entries `varint32 shared · varint32
//! non_shared · varint32 value_len · key suffix · value`, each key stored as
//! the bytes it shares with the previous key plus the rest; every 16th entry
//! (a "restart", 1 in the index block) shares nothing. The block ends in its
//! restart offsets (`u32` each) and their count, and is followed by a
//! trailer: a compression byte (0 none, 1 Snappy) and the masked CRC-32C of
//! the block and that byte. The index block maps a key at or past each data
//! block's last key to its `varint64 offset · varint64 size` handle; the
//! footer holds the meta-index and index handles, padded to 40 bytes, and
//! the magic number.
//!
//! The writer makes the bytes TensorFlow's `TableBuilder` makes (block size
//! 256 KiB, no compression, as `BundleWriter` asks), so a checkpoint we
//! write is byte-identical to TensorFlow's; the reader takes any valid
//! table, checks every CRC, and bounds every length by the file's size.

use tfdata_core::tfrecord::masked_crc32c;
use tfdata_core::{Error, Result};

/// The footer's last 8 bytes.
const MAGIC: u64 = 0xdb47_7524_8b80_fb57;
/// Two block handles at most 10 bytes each, padded, and the magic.
const FOOTER_LEN: usize = 48;
/// TensorFlow's `table::Options` defaults.
const BLOCK_SIZE: usize = 256 * 1024;
const RESTART_INTERVAL: usize = 16;
/// Bytes after each block: the compression type and the CRC.
const TRAILER_LEN: usize = 5;

fn corrupt(what: &str, detail: impl std::fmt::Display) -> Error {
    Error::DataLoss {
        location: what.to_string(),
        reason: format!("corrupted table: {detail}"),
    }
}

pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint64 at `*at`, moving past it.
pub(super) fn get_varint(buf: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// One block being filled (`BlockBuilder`).
struct Block {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    counter: usize,
    interval: usize,
    last_key: Vec<u8>,
}

impl Block {
    fn new(interval: usize) -> Block {
        Block {
            buf: Vec::new(),
            restarts: vec![0],
            counter: 0,
            interval,
            last_key: Vec::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    fn size_estimate(&self) -> usize {
        self.buf.len() + self.restarts.len() * 4 + 4
    }

    fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.counter < self.interval {
            key.iter()
                .zip(&self.last_key)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
            0
        };
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, (key.len() - shared) as u64);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key = key.to_vec();
        self.counter += 1;
    }

    /// The block's bytes, and the builder reset for the next block.
    fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for r in &self.restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        *self = Block::new(self.interval);
        out
    }
}

/// The shortest key `k` with `start <= k < limit` that is no longer than
/// `start` (LevelDB's bytewise `FindShortestSeparator`).
fn shortest_separator(start: &mut Vec<u8>, limit: &[u8]) {
    let common = start.iter().zip(limit).take_while(|(a, b)| a == b).count();
    if common >= start.len().min(limit.len()) {
        return; // one is a prefix of the other
    }
    let byte = start[common];
    if byte < 0xff && byte + 1 < limit[common] {
        start[common] += 1;
        start.truncate(common + 1);
    }
}

/// The shortest key at or after `key` (LevelDB's `FindShortSuccessor`).
fn short_successor(key: &mut Vec<u8>) {
    if let Some(i) = key.iter().position(|&b| b != 0xff) {
        key[i] += 1;
        key.truncate(i + 1);
    }
}

/// Builds a table from keys added in increasing order.
pub(super) struct TableWriter {
    out: Vec<u8>,
    data: Block,
    index: Block,
    last_key: Vec<u8>,
    /// The handle of the data block just written, whose index entry waits
    /// for the next key (to pick a short separator).
    pending: Option<(u64, u64)>,
}

impl TableWriter {
    pub(super) fn new() -> TableWriter {
        TableWriter {
            out: Vec::new(),
            data: Block::new(RESTART_INTERVAL),
            index: Block::new(1),
            last_key: Vec::new(),
            pending: None,
        }
    }

    /// Adds an entry; keys must come in strictly increasing byte order.
    pub(super) fn add(&mut self, key: &[u8], value: &[u8]) {
        if let Some((offset, size)) = self.pending.take() {
            let mut separator = self.last_key.clone();
            shortest_separator(&mut separator, key);
            self.add_index(&separator, offset, size);
        }
        self.last_key = key.to_vec();
        self.data.add(key, value);
        if self.data.size_estimate() >= BLOCK_SIZE {
            self.flush();
        }
    }

    fn add_index(&mut self, key: &[u8], offset: u64, size: u64) {
        let mut handle = Vec::new();
        put_varint(&mut handle, offset);
        put_varint(&mut handle, size);
        self.index.add(key, &handle);
    }

    fn flush(&mut self) {
        if self.data.is_empty() {
            return;
        }
        let block = self.data.finish();
        self.pending = Some(self.write_block(&block));
    }

    /// Writes a block and its trailer; returns its handle.
    fn write_block(&mut self, block: &[u8]) -> (u64, u64) {
        let offset = self.out.len() as u64;
        self.out.extend_from_slice(block);
        let mut checked = block.to_vec();
        checked.push(0); // no compression
        self.out.push(0);
        self.out
            .extend_from_slice(&masked_crc32c(&checked).to_le_bytes());
        (offset, block.len() as u64)
    }

    /// The whole file.
    pub(super) fn finish(mut self) -> Vec<u8> {
        self.flush();
        let meta = Block::new(RESTART_INTERVAL).finish();
        let meta_handle = self.write_block(&meta);
        if let Some((offset, size)) = self.pending.take() {
            let mut successor = self.last_key.clone();
            short_successor(&mut successor);
            self.add_index(&successor, offset, size);
        }
        let index = self.index.finish();
        let index_handle = self.write_block(&index);
        let mut footer = Vec::with_capacity(FOOTER_LEN);
        for (offset, size) in [meta_handle, index_handle] {
            put_varint(&mut footer, offset);
            put_varint(&mut footer, size);
        }
        footer.resize(FOOTER_LEN - 8, 0);
        footer.extend_from_slice(&MAGIC.to_le_bytes());
        self.out.extend_from_slice(&footer);
        self.out
    }
}

/// Every entry of the table in `file` (named `what` in errors), in order.
/// The index is small (a bundle's metadata), so it is read whole.
pub(super) fn read_table(what: &str, file: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    if file.len() < FOOTER_LEN {
        return Err(corrupt(what, "file is too short to be an sstable"));
    }
    let footer = &file[file.len() - FOOTER_LEN..];
    let magic = u64::from_le_bytes(footer[FOOTER_LEN - 8..].try_into().unwrap_or_default());
    if magic != MAGIC {
        return Err(corrupt(what, "not an sstable (bad magic number)"));
    }
    let mut at = 0;
    let handle = |at: &mut usize| -> Result<(u64, u64)> {
        match (get_varint(footer, at), get_varint(footer, at)) {
            (Some(o), Some(s)) => Ok((o, s)),
            _ => Err(corrupt(what, "bad block handle")),
        }
    };
    let _meta = handle(&mut at)?;
    let index_handle = handle(&mut at)?;
    let body = &file[..file.len() - FOOTER_LEN];
    let index = read_block(what, body, index_handle)?;
    let mut entries = Vec::new();
    for (_, handle) in block_entries(what, &index)? {
        let mut at = 0;
        let (Some(offset), Some(size)) =
            (get_varint(&handle, &mut at), get_varint(&handle, &mut at))
        else {
            return Err(corrupt(what, "bad block handle"));
        };
        let block = read_block(what, body, (offset, size))?;
        entries.extend(block_entries(what, &block)?);
    }
    if entries.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err(corrupt(what, "keys out of order"));
    }
    Ok(entries)
}

/// The contents of the block at `handle`, its CRC checked and decompressed.
fn read_block(what: &str, body: &[u8], (offset, size): (u64, u64)) -> Result<Vec<u8>> {
    let end = offset
        .checked_add(size)
        .and_then(|e| e.checked_add(TRAILER_LEN as u64))
        .filter(|&e| e <= body.len() as u64)
        .ok_or_else(|| corrupt(what, "block handle past the end of the file"))?;
    let (start, size) = (offset as usize, size as usize);
    let checked = &body[start..start + size + 1];
    let stored = u32::from_le_bytes(
        body[start + size + 1..end as usize]
            .try_into()
            .unwrap_or_default(),
    );
    if masked_crc32c(checked) != stored {
        return Err(corrupt(what, "block checksum mismatch"));
    }
    let contents = &checked[..size];
    match checked[size] {
        0 => Ok(contents.to_vec()),
        1 => {
            let n = snap::raw::decompress_len(contents)
                .map_err(|e| corrupt(what, format!("bad snappy block: {e}")))?;
            super::super::check_size(what, tfdata_core::DType::UInt8, n as u64)?;
            snap::raw::Decoder::new()
                .decompress_vec(contents)
                .map_err(|e| corrupt(what, format!("bad snappy block: {e}")))
        }
        other => Err(corrupt(what, format!("unknown block compression {other}"))),
    }
}

/// A block's entries, keys restored from their shared prefixes.
fn block_entries(what: &str, block: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    if block.len() < 4 {
        return Err(corrupt(what, "block too short"));
    }
    let restarts = u32::from_le_bytes(block[block.len() - 4..].try_into().unwrap_or_default());
    let data_end = (restarts as usize)
        .checked_mul(4)
        .and_then(|r| (block.len() - 4).checked_sub(r))
        .ok_or_else(|| corrupt(what, "bad restart count"))?;
    let data = &block[..data_end];
    let mut entries = Vec::new();
    let mut key: Vec<u8> = Vec::new();
    let mut at = 0;
    // Each entry takes at least 3 bytes: the loop ends.
    while at < data.len() {
        let (Some(shared), Some(own), Some(len)) = (
            get_varint(data, &mut at),
            get_varint(data, &mut at),
            get_varint(data, &mut at),
        ) else {
            return Err(corrupt(what, "bad entry header"));
        };
        let shared = usize::try_from(shared).unwrap_or(usize::MAX);
        if shared > key.len() {
            return Err(corrupt(what, "entry shares more than the previous key"));
        }
        let own_end = usize::try_from(own)
            .ok()
            .and_then(|o| at.checked_add(o))
            .filter(|&e| e <= data.len())
            .ok_or_else(|| corrupt(what, "entry past the end of its block"))?;
        let value_end = usize::try_from(len)
            .ok()
            .and_then(|l| own_end.checked_add(l))
            .filter(|&e| e <= data.len())
            .ok_or_else(|| corrupt(what, "entry past the end of its block"))?;
        key.truncate(shared);
        key.extend_from_slice(&data[at..own_end]);
        entries.push((key.clone(), data[own_end..value_end].to_vec()));
        at = value_end;
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_many_blocks() {
        let mut w = TableWriter::new();
        let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..3000u32)
            .map(|i| (format!("key{i:06}").into_bytes(), vec![i as u8; 200]))
            .collect();
        for (k, v) in &entries {
            w.add(k, v);
        }
        let file = w.finish();
        assert_eq!(read_table("t", &file).unwrap(), entries);
    }

    #[test]
    fn refuses_damage() {
        let mut w = TableWriter::new();
        w.add(b"", b"header");
        w.add(b"a", b"value");
        let mut file = w.finish();
        file[3] ^= 1;
        assert!(read_table("t", &file).is_err());
        assert!(read_table("t", &file[..10]).is_err());
    }

    #[test]
    fn separators() {
        let mut k = b"abcx".to_vec();
        shortest_separator(&mut k, b"abez");
        assert_eq!(k, b"abd");
        let mut k = b"ab".to_vec();
        shortest_separator(&mut k, b"abc");
        assert_eq!(k, b"ab");
        let mut k = b"s".to_vec();
        short_successor(&mut k);
        assert_eq!(k, b"t");
    }
}
