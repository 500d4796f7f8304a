//! Number parsing, hash buckets, raw bytes and web-safe base64.

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Result, Tensor};

use super::{hash, invalid, lossy, map_strings, numeric, strings, trim_space};
use crate::attrs::NodeAttrs;
use crate::kernels::{Compute, check_size, expect_inputs};

/// `StringToNumberOp`'s float parsing (double-conversion with leading and
/// trailing spaces, hex, `inf`/`infinity`/`nan` in any case allowed).
pub(crate) fn parse_float(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(trim_space(s)).ok()?;
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        let v = parse_hex_float(hex)?;
        return Some(if neg { -v } else { v });
    }
    if body.starts_with(['+', '-']) {
        return None;
    }
    let v: f64 = body.parse().ok()?;
    Some(if neg { -v } else { v })
}

/// [`parse_float`] rounded once to float32, as double-conversion's
/// `StringToFloat` does (hex input, rare, is rounded through float64).
pub(crate) fn parse_f32(s: &[u8]) -> Option<f32> {
    let t = std::str::from_utf8(trim_space(s)).ok()?;
    if t.contains(['x', 'X']) {
        parse_float(s).map(|v| v as f32)
    } else {
        parse_float(s)?;
        t.trim_start_matches('+').parse::<f32>().ok()
    }
}

/// `safe_strto64`: an optionally signed decimal integer, spaces around.
pub(crate) fn parse_int(s: &[u8]) -> Option<i64> {
    std::str::from_utf8(trim_space(s)).ok()?.parse::<i64>().ok()
}

fn parse_hex_float(s: &str) -> Option<f64> {
    let (mantissa, exp) = match s.find(['p', 'P']) {
        Some(i) => (&s[..i], s[i + 1..].parse::<i32>().ok()?),
        None => (s, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for c in int.chars().chain(frac.chars()) {
        v = v * 16.0 + f64::from(c.to_digit(16)?);
    }
    Some(v * 2f64.powi(exp - 4 * frac.len() as i32))
}

pub(super) fn string_to_number(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "StringToNumber";
    let out_type = if attrs.has("out_type") {
        attrs.dtype("out_type")?
    } else {
        DType::Float
    };
    if !matches!(
        out_type,
        DType::Float | DType::Double | DType::Int32 | DType::Int64
    ) {
        return Err(invalid(
            OP,
            format!("out_type must be float, double, int32 or int64, got {out_type}"),
        ));
    }
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 1)?;
        let values = strings(OP, &inputs[0], "string_tensor")?;
        let shape = inputs[0].shape().to_vec();
        let fail = |s: &[u8]| {
            invalid(
                OP,
                format!(
                    "StringToNumberOp could not correctly convert string: {}",
                    lossy(s)
                ),
            )
        };
        Ok(vec![match out_type {
            DType::Float => {
                let v = values
                    .iter()
                    .map(|s| parse_f32(s).ok_or_else(|| fail(s)))
                    .collect::<Result<Vec<f32>>>()?;
                numeric(&v, shape)?
            }
            DType::Double => {
                let v = values
                    .iter()
                    .map(|s| parse_float(s).ok_or_else(|| fail(s)))
                    .collect::<Result<Vec<f64>>>()?;
                numeric(&v, shape)?
            }
            DType::Int32 => {
                let v = values
                    .iter()
                    .map(|s| {
                        parse_int(s)
                            .and_then(|v| i32::try_from(v).ok())
                            .ok_or_else(|| fail(s))
                    })
                    .collect::<Result<Vec<i32>>>()?;
                numeric(&v, shape)?
            }
            _ => {
                let v = values
                    .iter()
                    .map(|s| parse_int(s).ok_or_else(|| fail(s)))
                    .collect::<Result<Vec<i64>>>()?;
                numeric(&v, shape)?
            }
        }])
    }))
}

fn hash_bucket_kernel(
    op: &'static str,
    num_buckets: i64,
    hash: impl Fn(&[u8]) -> u64 + Send + Sync + 'static,
) -> Result<Compute> {
    if num_buckets < 1 {
        return Err(invalid(
            op,
            format!("num_buckets must be >= 1, got {num_buckets}"),
        ));
    }
    let buckets = num_buckets as u64;
    Ok(Box::new(move |inputs| {
        expect_inputs(op, &inputs, 1)?;
        let values = strings(op, &inputs[0], "input")?;
        let out: Vec<i64> = values.iter().map(|s| (hash(s) % buckets) as i64).collect();
        Ok(vec![numeric(&out, inputs[0].shape().to_vec())?])
    }))
}

pub(super) fn hash_bucket_fast(attrs: &NodeAttrs) -> Result<Compute> {
    hash_bucket_kernel(
        "StringToHashBucketFast",
        attrs.int("num_buckets")?,
        hash::fingerprint64,
    )
}

pub(super) fn hash_bucket_strong(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "StringToHashBucketStrong";
    let key = match attrs.ints("key")? {
        [a, b] => [*a as u64, *b as u64],
        other => {
            return Err(invalid(
                OP,
                format!("Key must have 2 elements, got {}", other.len()),
            ));
        }
    };
    hash_bucket_kernel(OP, attrs.int("num_buckets")?, move |s| {
        hash::siphash(key, s)
    })
}

pub(super) fn decode_raw(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "DecodeRaw";
    let out_type = attrs.dtype("out_type")?;
    let little_endian = attrs.bool_or("little_endian", true)?;
    let Some(size) = out_type.size() else {
        return Err(invalid(
            OP,
            "out_type must be a fixed-size type, not string",
        ));
    };
    // Complex numbers are two floats, each byte-swapped on its own.
    let swap_unit = match out_type {
        DType::Complex64 | DType::Complex128 => size / 2,
        _ => size,
    };
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 1)?;
        let values = strings(OP, &inputs[0], "bytes")?;
        let mut shape = inputs[0].shape().to_vec();
        let Some(first) = values.first() else {
            shape.push(0);
            return Ok(vec![Tensor::new(
                out_type,
                shape,
                TensorData::Buffer(Bytes::new()),
            )?]);
        };
        let width = first.len();
        if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| v.len() != width) {
            return Err(invalid(
                OP,
                format!(
                    "DecodeRaw requires input strings to all be the same size, but element {i} \
                     has size {width} != {}",
                    v.len()
                ),
            ));
        }
        if width % size != 0 {
            return Err(invalid(
                OP,
                format!(
                    "Input to DecodeRaw has length {width} that is not a multiple of {size}, the \
                     size of {}",
                    out_type
                        .name()
                        .replace("float32", "float")
                        .replace("float64", "double")
                ),
            ));
        }
        check_size(OP, out_type, (values.len() * (width / size)) as u64)?;
        let mut buf = Vec::with_capacity(values.len() * width);
        for v in values {
            buf.extend_from_slice(v);
        }
        if !little_endian && swap_unit > 1 {
            for c in buf.chunks_exact_mut(swap_unit) {
                c.reverse();
            }
        }
        if out_type == DType::Bool {
            for b in &mut buf {
                *b = u8::from(*b != 0);
            }
        }
        shape.push((width / size) as i64);
        Ok(vec![Tensor::new(
            out_type,
            shape,
            TensorData::Buffer(buf.into()),
        )?])
    }))
}

const BASE64_WEB: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

pub(super) fn encode_base64(attrs: &NodeAttrs) -> Result<Compute> {
    let pad = attrs.bool_or("pad", false)?;
    Ok(map_strings("EncodeBase64", move |s| {
        let mut out = Vec::with_capacity(s.len().div_ceil(3) * 4);
        for chunk in s.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            let chars = chunk.len() + 1;
            for k in 0..4 {
                if k < chars {
                    out.push(BASE64_WEB[((n >> (18 - 6 * k)) & 63) as usize]);
                } else if pad {
                    out.push(b'=');
                }
            }
        }
        Ok(Bytes::from(out))
    }))
}

pub(super) fn decode_base64(s: &Bytes) -> Result<Bytes> {
    const OP: &str = "DecodeBase64";
    let mut data: &[u8] = s;
    // Padding is accepted only on a whole number of 4-character groups.
    if data.len().is_multiple_of(4) {
        for _ in 0..2 {
            if let Some(rest) = data.strip_suffix(b"=") {
                data = rest;
            }
        }
    }
    if data.iter().any(|c| !BASE64_WEB.contains(c)) {
        return Err(invalid(OP, "Invalid character found in base64."));
    }
    if data.len() % 4 == 1 {
        return Err(invalid(OP, "Base64 string length cannot be 1 modulo 4."));
    }
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 2);
    for chunk in data.chunks(4) {
        let mut n = 0u32;
        for (k, &c) in chunk.iter().enumerate() {
            let v = BASE64_WEB
                .iter()
                .position(|&x| x == c)
                .ok_or_else(|| invalid(OP, "Invalid character found in base64."))?;
            n |= (v as u32) << (18 - 6 * k);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Ok(Bytes::from(out))
}
