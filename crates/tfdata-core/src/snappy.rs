//! Snappy over a sequence of pieces, as if they were one buffer, without
//! concatenating them first.
//!
//! A Snappy block is a varint of the uncompressed length followed by
//! literals and back-references, and the encoder compresses its input in
//! independent 64 KiB fragments. The body of each piece's compressed form
//! is therefore valid in any position of a larger block, and the bodies of
//! consecutive pieces under one header of the total length decode to the
//! pieces' concatenation. Compressing a 40 MB batch this way saves copying
//! it into a fresh buffer first (TensorFlow's `CompressElement` compresses
//! from an I/O vector for the same reason). Small pieces (string tensors)
//! are gathered into fragments first, so they still compress together.

use crate::{Error, Result};

/// Pieces at least this large are compressed where they lie.
const DIRECT_PIECE_BYTES: usize = 64 << 10;

/// What one compression call covers.
enum Segment<'a> {
    /// One large piece, compressed in place.
    Direct(&'a [u8]),
    /// Consecutive small pieces, gathered into a scratch buffer first.
    Gathered(std::ops::Range<usize>, usize),
}

/// Snappy's raw block of the concatenation of `pieces`.
pub(crate) fn compress_pieces(pieces: &[&[u8]]) -> Result<Vec<u8>> {
    let total: usize = pieces.iter().map(|p| p.len()).sum();
    let segments = plan(pieces);
    let header = varint_len(total as u64);
    let bound = segments.iter().try_fold(header, |acc, s| {
        let len = match s {
            Segment::Direct(p) => p.len(),
            Segment::Gathered(_, len) => *len,
        };
        match snap::raw::max_compress_len(len) {
            0 => None,
            max => acc.checked_add(max),
        }
    });
    let bound = bound.ok_or_else(|| {
        Error::InvalidArgument(format!("{total} bytes are too many for one Snappy block"))
    })?;
    // Zeroed by the allocator lazily; only the pages written are touched.
    let mut out = vec![0u8; bound];
    let mut pos = write_varint(&mut out, total as u64);
    let mut encoder = snap::raw::Encoder::new();
    let mut scratch = Vec::new();
    for segment in &segments {
        let input = match segment {
            Segment::Direct(p) => *p,
            Segment::Gathered(range, len) => {
                scratch.clear();
                scratch.reserve(*len);
                for p in &pieces[range.clone()] {
                    scratch.extend_from_slice(p);
                }
                &scratch[..]
            }
        };
        if input.is_empty() {
            continue;
        }
        // The segment's own length header lands just before `pos`, over
        // bytes already written; they are put back once it is written.
        // `pos` is past the total's header, which is no shorter.
        let start = pos - varint_len(input.len() as u64);
        let mut saved = [0u8; 10];
        let kept = pos - start;
        saved[..kept].copy_from_slice(&out[start..pos]);
        let written = encoder
            .compress(input, &mut out[start..])
            .map_err(|e| Error::Internal(format!("snappy compression failed: {e}")))?;
        out[start..pos].copy_from_slice(&saved[..kept]);
        pos = start + written;
    }
    out.truncate(pos);
    Ok(out)
}

/// Large pieces alone, runs of small pieces gathered up to a fragment.
fn plan<'a>(pieces: &[&'a [u8]]) -> Vec<Segment<'a>> {
    let mut segments = Vec::new();
    let mut run_start = 0;
    let mut run_len = 0;
    for (i, p) in pieces.iter().enumerate() {
        if p.len() >= DIRECT_PIECE_BYTES {
            if run_len > 0 {
                segments.push(Segment::Gathered(run_start..i, run_len));
            }
            segments.push(Segment::Direct(p));
            run_start = i + 1;
            run_len = 0;
            continue;
        }
        run_len += p.len();
        if run_len >= DIRECT_PIECE_BYTES {
            segments.push(Segment::Gathered(run_start..i + 1, run_len));
            run_start = i + 1;
            run_len = 0;
        }
    }
    if run_len > 0 {
        segments.push(Segment::Gathered(run_start..pieces.len(), run_len));
    }
    segments
}

fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn write_varint(out: &mut [u8], mut v: u64) -> usize {
    let mut i = 0;
    while v >= 0x80 {
        out[i] = (v as u8) | 0x80;
        v >>= 7;
        i += 1;
    }
    out[i] = v as u8;
    i + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pieces: &[Vec<u8>]) {
        let refs: Vec<&[u8]> = pieces.iter().map(|p| &p[..]).collect();
        let compressed = compress_pieces(&refs).unwrap();
        let whole: Vec<u8> = pieces.concat();
        let back = snap::raw::Decoder::new()
            .decompress_vec(&compressed)
            .unwrap();
        assert_eq!(back, whole);
    }

    /// Deterministic bytes that compress partly.
    fn bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if i % 3 == 0 {
                    (x >> 24) as u8
                } else {
                    (i % 7) as u8
                }
            })
            .collect()
    }

    #[test]
    fn pieces_decode_to_their_concatenation() {
        check(&[]);
        check(&[vec![]]);
        check(&[vec![], bytes(10, 1), vec![]]);
        check(&[bytes(5, 1), bytes(70_000, 2), bytes(3, 3)]);
        // Large pieces whose lengths cross a varint width and a fragment edge.
        check(&[
            bytes(200_000, 4),
            bytes(65_536, 5),
            bytes(127, 6),
            bytes(128, 7),
        ]);
        // Many small strings gathered into several fragments.
        let strings: Vec<Vec<u8>> = (0..20_000).map(|i| bytes(i % 17, i as u64)).collect();
        check(&strings);
        // A header one byte wide followed by a piece whose header is as wide.
        check(&[bytes(100, 8)]);
    }

    #[test]
    fn large_pieces_compress_as_well_as_one_buffer() {
        let pieces = [bytes(1 << 20, 9), bytes(1 << 20, 10)];
        let refs: Vec<&[u8]> = pieces.iter().map(|p| &p[..]).collect();
        let ours = compress_pieces(&refs).unwrap().len();
        let whole = snap::raw::Encoder::new()
            .compress_vec(&pieces.concat())
            .unwrap()
            .len();
        assert!(ours <= whole + 64, "{ours} vs {whole}");
    }
}
