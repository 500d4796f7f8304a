//! `DecodeCompressed` (`tf.io.decode_compressed`): each string of a tensor
//! inflated from the zlib (`ZLIB`) or gzip (`GZIP`) container, or copied
//! (`""`).
//!
//! The containers are read here and the deflate data between them by
//! flate2's raw inflater, so that each failure can be worded as zlib words
//! it through TensorFlow ("inflate() failed with error -3: incorrect header
//! check", "... incorrect data check"). TensorFlow 2.21's behaviour, which
//! this follows (observed):
//!
//! * a stream cut short is no error: the output is what the cut stream
//!   decodes to (nothing for a cut header; everything when only the trailer
//!   is cut, which is then not checked);
//! * `ZLIB` reads one stream and ignores any bytes after it;
//! * `GZIP` reads members one after another while bytes remain, so bytes
//!   after a member that are not a gzip header fail the header check.
//!
//! Corrupt deflate data (rather than a bad header or checksum) is refused
//! too, but zlib's exact reason ("invalid distance too far back", ...) is
//! not reproduced: ours says "invalid deflate data". `ZSTD`, which
//! TensorFlow 2.21 also accepts, is refused as unimplemented.

use flate2::{Crc, Decompress, FlushDecompress, Status};
use tfdata_core::{DType, Error, Result, Tensor};

use super::layout::{err, take};
use super::strings::strings;
use super::{Compute, KernelDef, check_size, one_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "DecodeCompressed",
    outputs: one_output,
    build: decode_compressed,
}];

const OP: &str = "DecodeCompressed";

#[derive(Clone, Copy)]
enum Container {
    None,
    Zlib,
    Gzip,
}

fn decode_compressed(attrs: &NodeAttrs) -> Result<Compute> {
    let container = match attrs.string_or("compression_type", "")? {
        "" => Container::None,
        "ZLIB" => Container::Zlib,
        "GZIP" => Container::Gzip,
        "ZSTD" => {
            return Err(Error::Unimplemented(format!(
                "{OP}: ZSTD decompression is not supported by tfdata"
            )));
        }
        _ => {
            return Err(err(
                OP,
                "Only ZLIB, ZSTD, GZIP or NONE are supported compressions",
            ));
        }
    };
    Ok(Box::new(move |inputs| {
        let [input] = take::<1>(OP, inputs)?;
        let values = strings(OP, &input, "bytes")?;
        let mut out = Vec::with_capacity(values.len());
        // The total output is bounded, not only each string's.
        let mut budget = crate::MAX_TENSOR_BYTES;
        for v in values {
            let decoded = match container {
                Container::None => v.clone(),
                Container::Zlib => zlib(v, budget)?.into(),
                Container::Gzip => gzip(v, budget)?.into(),
            };
            budget = budget.saturating_sub(decoded.len());
            out.push(decoded);
        }
        Ok(vec![Tensor::strings(out, input.shape().to_vec())?])
    }))
}

/// zlib's failure, as TensorFlow reports it (`Z_DATA_ERROR` is -3).
fn inflate_failed(reason: &str) -> Error {
    Error::DataLoss {
        location: OP.to_string(),
        reason: format!("inflate() failed with error -3: {reason}"),
    }
}

fn too_large(limit: usize) -> Error {
    match check_size(OP, DType::UInt8, limit as u64 + 1) {
        Err(e) => e,
        Ok(()) => Error::Internal(format!("{OP}: output limit")),
    }
}

/// Raw deflate data from the start of `data`, appended to `out`: the bytes
/// of `data` read, and whether the stream ended (false: `data` was cut
/// short, and `out` has what the cut stream decodes to).
fn inflate(data: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(usize, bool)> {
    const STEP: usize = 64 * 1024;
    let mut d = Decompress::new(false);
    // Each round reads input or writes output (or ends), and the output is
    // bounded, so the loop is too.
    loop {
        if out.capacity() - out.len() < STEP {
            out.reserve(STEP);
        }
        let (read, written) = (d.total_in(), d.total_out());
        let status = d
            .decompress_vec(&data[read as usize..], out, FlushDecompress::None)
            .map_err(|_| inflate_failed("invalid deflate data"))?;
        if out.len() > limit {
            return Err(too_large(limit));
        }
        if status == Status::StreamEnd {
            return Ok((d.total_in() as usize, true));
        }
        if d.total_in() == read && d.total_out() == written {
            return Ok((d.total_in() as usize, false));
        }
    }
}

/// Adler-32 (RFC 1950), the zlib container's checksum.
fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 bytes is the most that can be summed before `b` could overflow.
    for chunk in data.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// One zlib stream (RFC 1950); bytes after it are ignored.
fn zlib(data: &[u8], limit: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let [cmf, flg, ..] = *data else {
        return Ok(out);
    };
    if ((u32::from(cmf) << 8) | u32::from(flg)) % 31 != 0 {
        return Err(inflate_failed("incorrect header check"));
    }
    if cmf & 0x0f != 8 {
        return Err(inflate_failed("unknown compression method"));
    }
    if (cmf >> 4) + 8 > 15 {
        return Err(inflate_failed("invalid window size"));
    }
    if flg & 0x20 != 0 {
        // A preset dictionary, which DecodeCompressed cannot supply.
        return Err(Error::DataLoss {
            location: OP.to_string(),
            reason: "inflate() failed with error 2: a preset dictionary is needed".to_string(),
        });
    }
    let (read, ended) = inflate(&data[2..], &mut out, limit)?;
    if ended
        && let Some(check) = data.get(2 + read..2 + read + 4)
        && u32::from_be_bytes([check[0], check[1], check[2], check[3]]) != adler32(&out)
    {
        return Err(inflate_failed("incorrect data check"));
    }
    Ok(out)
}

/// The length of a gzip member's header (RFC 1952) at the start of `data`,
/// or `None` if `data` ends inside it.
fn gzip_header(data: &[u8]) -> Result<Option<usize>> {
    const FHCRC: u8 = 2;
    const FEXTRA: u8 = 4;
    const FNAME: u8 = 8;
    const FCOMMENT: u8 = 16;
    let Some(magic) = data.get(..2) else {
        return Ok(None);
    };
    if magic != [0x1f, 0x8b] {
        return Err(inflate_failed("incorrect header check"));
    }
    let Some(&[method, flags]) = data.get(2..4) else {
        return Ok(None);
    };
    if method != 8 {
        return Err(inflate_failed("unknown compression method"));
    }
    if flags & 0xe0 != 0 {
        return Err(inflate_failed("unknown header flags set"));
    }
    // Time, extra flags and OS.
    let mut at = 10;
    if flags & FEXTRA != 0 {
        let Some(&[lo, hi]) = data.get(at..at + 2) else {
            return Ok(None);
        };
        at += 2 + usize::from(u16::from_le_bytes([lo, hi]));
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            let Some(end) = data.get(at..).and_then(|r| r.iter().position(|&b| b == 0)) else {
                return Ok(None);
            };
            at += end + 1;
        }
    }
    if flags & FHCRC != 0 {
        let Some(&[lo, hi]) = data.get(at..at + 2) else {
            return Ok(None);
        };
        let mut crc = Crc::new();
        crc.update(&data[..at]);
        if u16::from_le_bytes([lo, hi]) != (crc.sum() & 0xffff) as u16 {
            return Err(inflate_failed("header crc mismatch"));
        }
        at += 2;
    }
    Ok((at <= data.len()).then_some(at))
}

/// gzip members one after another (RFC 1952) while bytes remain.
fn gzip(data: &[u8], limit: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = data;
    // Each member reads at least its 10-byte header, so this ends.
    while !rest.is_empty() {
        let Some(header) = gzip_header(rest)? else {
            break;
        };
        let start = out.len();
        let (read, ended) = inflate(&rest[header..], &mut out, limit)?;
        if !ended {
            break;
        }
        let trailer = header + read;
        let Some(crc) = rest.get(trailer..trailer + 4) else {
            break;
        };
        let mut sum = Crc::new();
        sum.update(&out[start..]);
        if u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]) != sum.sum() {
            return Err(inflate_failed("incorrect data check"));
        }
        let Some(size) = rest.get(trailer + 4..trailer + 8) else {
            break;
        };
        if u32::from_le_bytes([size[0], size[1], size[2], size[3]]) != (out.len() - start) as u32 {
            return Err(inflate_failed("incorrect length check"));
        }
        rest = &rest[trailer + 8..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adler32_matches_the_rfc_example() {
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(adler32(&[0xff; 100_000]), {
            let (mut a, mut b) = (1u64, 0u64);
            for _ in 0..100_000 {
                a = (a + 0xff) % 65521;
                b = (b + a) % 65521;
            }
            ((b << 16) | a) as u32
        });
    }

    #[test]
    fn round_trips_and_cut_streams() {
        use std::io::Write;
        let text = b"hello hello hello world".repeat(50);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&text).unwrap();
        let z = z.finish().unwrap();
        assert_eq!(zlib(&z, 1 << 20).unwrap(), text);
        // The trailer cut: everything, unchecked.
        assert_eq!(zlib(&z[..z.len() - 2], 1 << 20).unwrap(), text);
        let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        g.write_all(&text).unwrap();
        let g = g.finish().unwrap();
        let two = [g.clone(), g.clone()].concat();
        assert_eq!(
            gzip(&two, 1 << 20).unwrap(),
            [text.clone(), text.clone()].concat()
        );
        assert!(gzip(&[g.clone(), b"junk".to_vec()].concat(), 1 << 20).is_err());
        // An output past the limit is refused.
        assert!(zlib(&z, 100).is_err());
    }
}
