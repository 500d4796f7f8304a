//! ArrayRecord files from disk: `array_record_dataset` read whole, and by
//! its own splits (footer, postscript, block and chunk headers, simple
//! chunks, the four codecs). Every chunk is guarded by HighwayHashes, so
//! in one mode the target first rewrites the hashes of the chunks it finds
//! (walking them from the file's start, and the postscript's) for the
//! fuzzer to reach the decoders behind them. What reads whole must read
//! the same by splits.
//!
//! Input: a mode byte (bit 0: rewrite hashes; bit 1: the file as given,
//! else two 64 KiB blocks: a `u16`-length-prefixed part at offset 0, the
//! rest at the start of the last block, zeros between: an ArrayRecord
//! file's data and footer, then its postscript), then the file.
#![no_main]

use std::sync::Arc;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tfdata_core::Result;
use tfdata_dataset::array_record::riegeli::{self, BLOCK_HEADER_SIZE, BLOCK_SIZE};
use tfdata_dataset::{Dataset, IterContext};
use tfdata_fuzz::Input;

/// Records read at most (a chunk may hold up to a million empty records;
/// reading stops here, it is not a failure).
const MAX_RECORDS: usize = 1 << 16;

/// The file positions of `n` chunk bytes from the chunk beginning at
/// `begin`, block headers left out (fewer at the end of the file).
fn content(len: usize, begin: usize, n: usize) -> Vec<usize> {
    let mut out = Vec::with_capacity(n.min(len));
    let mut pos = begin;
    while out.len() < n && pos < len {
        if (pos as u64).is_multiple_of(BLOCK_SIZE) {
            pos += BLOCK_HEADER_SIZE as usize;
            continue;
        }
        out.push(pos);
        pos += 1;
    }
    out
}

/// Rewrites the hashes of the chunk at `begin`; where the next one begins
/// (the specification's formula), or `None` if it does not fit or is zeros.
fn rehash(file: &mut [u8], begin: usize) -> Option<usize> {
    let header = content(file.len(), begin, riegeli::CHUNK_HEADER_SIZE);
    if header.len() < riegeli::CHUNK_HEADER_SIZE || header.iter().all(|&p| file[p] == 0) {
        return None;
    }
    let mut bytes: Vec<u8> = header.iter().map(|&p| file[p]).collect();
    let word = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    let data_size = usize::try_from(word(&bytes, 8)).ok()?;
    let records = word(&bytes, 24) >> 8;
    let data_at = header[riegeli::CHUNK_HEADER_SIZE - 1] + 1;
    let data = content(file.len(), data_at, data_size);
    if data.len() < data_size {
        return None;
    }
    let data_bytes: Vec<u8> = data.iter().map(|&p| file[p]).collect();
    bytes[16..24].copy_from_slice(&riegeli::hash(&data_bytes).to_le_bytes());
    let header_hash = riegeli::hash(&bytes[8..]);
    bytes[..8].copy_from_slice(&header_hash.to_le_bytes());
    for (&p, &b) in header.iter().zip(&bytes) {
        file[p] = b;
    }
    let end = data.last().map_or(data_at, |&p| p + 1);
    // At least as many bytes as records, and never right after a block
    // header.
    let end = end.max(begin.saturating_add(usize::try_from(records).ok()?));
    let in_block = end as u64 % BLOCK_SIZE;
    Some(if in_block > 0 && in_block <= BLOCK_HEADER_SIZE {
        end - in_block as usize + BLOCK_HEADER_SIZE as usize + 1
    } else {
        end
    })
}

fn read(ds: &Dataset, ctx: &IterContext) -> Result<Vec<Bytes>> {
    let mut it = ds.iter_with(ctx)?;
    let mut out = Vec::new();
    while out.len() < MAX_RECORDS {
        let Some(e) = it.next_element()? else { break };
        out.push(e.components[0].string_values()?[0].clone());
    }
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mode = input.u8();
    let mut file = if mode & 2 != 0 {
        input.rest().to_vec()
    } else {
        let mut file = vec![0u8; 2 * BLOCK_SIZE as usize];
        let head = input.part();
        let tail = input.rest();
        let tail = &tail[..tail.len().min(BLOCK_SIZE as usize)];
        file[..head.len()].copy_from_slice(head);
        file[BLOCK_SIZE as usize..][..tail.len()].copy_from_slice(tail);
        file
    };
    if mode & 1 != 0 {
        // From the file signature on, then the postscript. Each chunk
        // takes at least its 40-byte header.
        let mut at = Some(0);
        while let Some(begin) = at.filter(|&b| b < file.len()) {
            at = rehash(&mut file, begin).filter(|&next| next > begin);
        }
        if file.len() >= BLOCK_SIZE as usize {
            let last = (file.len() - 1) / BLOCK_SIZE as usize * BLOCK_SIZE as usize;
            rehash(&mut file, last);
        }
    }
    let dir = tfdata_fuzz::temp_dir();
    let path = dir.path().join("fuzz.array_record");
    std::fs::write(&path, &file).expect("a temporary file");
    let ds = Dataset::array_record(&[path.to_str().expect("a UTF-8 path")]);
    let Ok(whole) = read(&ds, &IterContext::new()) else {
        return;
    };
    if whole.len() >= MAX_RECORDS {
        return;
    }
    let provider = ds
        .op()
        .split_provider()
        .expect("a split provider")
        .expect("splits of a file that reads");
    let mut ctx = IterContext::new();
    ctx.split_providers.insert(ds.op_key(), Arc::from(provider));
    let by_splits = read(&ds, &ctx).expect("a file that reads whole reads by splits");
    assert_eq!(by_splits, whole, "by splits, the same records");
});
