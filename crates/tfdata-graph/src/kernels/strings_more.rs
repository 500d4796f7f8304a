//! Text-pipeline string kernels: `StringNGrams` (`tf.strings.ngrams`),
//! `StringSplit` (v1, `tf.compat.v1.string_split`) and `StringToHashBucket`
//! (the legacy bucketing, TensorFlow's own 64-bit Murmur-style `Hash64`).
//!
//! Their outputs are contracts with a model (bucket ids index embedding
//! rows; n-grams feed vocabularies), so each follows TensorFlow's
//! definition exactly: n-gram padding (`pad_width` -1 meaning `width - 1`,
//! never more than `width - 1`), `preserve_short_sequences` (one n-gram
//! of the whole padded row when no width fits), the ragged splits' checks;
//! v1 splitting on any byte of the delimiter (every byte when it is
//! empty), with `skip_empty`. `StringFormat` (`tf.strings.format`) prints
//! tensors as TensorFlow's `SummarizeValue` does: `summarize` elements at
//! each end of every dimension, floats in the shortest of C's `%.6g` and
//! `%.9g` (`%.15g`/`%.17g` for double) that reads back exactly, strings
//! quoted and C-escaped.

use bytes::Bytes;
use tfdata_core::{DType, Error, Result, Tensor};

use super::strings::{shape_string, strings};
use super::{Compute, KernelDef, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "StringNGrams",
        outputs: |_| Ok(vec![("ngrams", 1), ("ngrams_splits", 1)]),
        build: ngrams,
    },
    KernelDef {
        op: "StringSplit",
        outputs: |_| Ok(vec![("indices", 1), ("values", 1), ("shape", 1)]),
        build: split_v1,
    },
    KernelDef {
        op: "StringToHashBucket",
        outputs: super::one_output,
        build: hash_bucket,
    },
    KernelDef {
        op: "StringFormat",
        outputs: super::one_output,
        build: string_format,
    },
];

fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

/// The splits of a ragged input as i64, with their dtype.
fn splits_of(op: &str, t: &Tensor) -> Result<Vec<i64>> {
    match t.dtype() {
        DType::Int32 => Ok(t.to_vec::<i32>()?.into_iter().map(i64::from).collect()),
        DType::Int64 => t.to_vec(),
        d => Err(invalid(
            op,
            format!("splits must be int32 or int64, got {d}"),
        )),
    }
}

fn splits_tensor(dtype: DType, v: &[i64]) -> Result<Tensor> {
    if dtype == DType::Int32 {
        let v: Vec<i32> = v.iter().map(|&x| x as i32).collect();
        Ok(Tensor::vector(&v))
    } else {
        Ok(Tensor::vector(v))
    }
}

struct NGrams {
    separator: Vec<u8>,
    widths: Vec<i64>,
    left: Vec<u8>,
    right: Vec<u8>,
    pad: i64,
    preserve: bool,
}

impl NGrams {
    fn pad_for(&self, width: i64) -> i64 {
        let p = if self.pad < 0 { width - 1 } else { self.pad };
        p.min(width - 1)
    }

    fn count(&self, len: i64, width: i64) -> i64 {
        (len + 2 * self.pad_for(width) - width + 1).max(0)
    }

    /// Appends the `n` n-grams of `width` over `row` (padded as set).
    fn make(&self, row: &[Bytes], n: i64, width: i64, out: &mut Vec<Bytes>) {
        let pad = self.pad_for(width);
        for k in 0..n {
            let left = (pad - k).max(0);
            let right = (pad - (n - (k + 1))).max(0);
            let tokens = width - (left + right);
            let start = if left > 0 { 0 } else { k - pad };
            let mut s = Vec::new();
            let mut first = true;
            let mut add = |piece: &[u8], s: &mut Vec<u8>| {
                if !first {
                    s.extend_from_slice(&self.separator);
                }
                first = false;
                s.extend_from_slice(piece);
            };
            for _ in 0..left {
                add(&self.left, &mut s);
            }
            for t in 0..tokens.max(0) {
                add(&row[(start + t) as usize], &mut s);
            }
            for _ in 0..right {
                add(&self.right, &mut s);
            }
            out.push(Bytes::from(s));
        }
    }
}

fn ngrams(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "StringNGrams";
    let g = NGrams {
        separator: attrs.bytes("separator")?.to_vec(),
        widths: attrs.ints("ngram_widths")?.to_vec(),
        left: attrs.bytes("left_pad")?.to_vec(),
        right: attrs.bytes("right_pad")?.to_vec(),
        pad: attrs.int("pad_width")?,
        preserve: attrs.bool("preserve_short_sequences")?,
    };
    if g.widths.iter().any(|&w| w <= 0) {
        return Err(invalid(OP, "ngram_widths must contain positive values"));
    }
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 2)?;
        let (data_t, splits_t) = (&inputs[0], &inputs[1]);
        // TensorFlow reads both inputs flat, whatever their rank.
        let data = strings(OP, data_t, "data")?;
        let splits = splits_of(OP, splits_t)?;
        let n = data.len() as i64;
        let rows = splits.len().saturating_sub(1);
        // An empty splits vector is one row over all the data.
        let splits = if splits.is_empty() {
            vec![0, n]
        } else {
            if splits[0] != 0 {
                return Err(invalid(
                    OP,
                    format!("First split value must be 0, got {}", splits[0]),
                ));
            }
            for w in splits.windows(2) {
                if w[1] < w[0] || w[1] > n {
                    return Err(invalid(
                        OP,
                        format!("Invalid split value {}, must be in [{}, {}]", w[1], w[0], n),
                    ));
                }
            }
            if splits[splits.len() - 1] != n {
                return Err(invalid(
                    OP,
                    format!(
                        "Last split value must be data size. Expected {n}, got {}",
                        splits[splits.len() - 1]
                    ),
                ));
            }
            splits
        };
        let rows = if splits_t.num_elements() == 0 {
            0
        } else {
            rows
        };
        let mut out_splits = vec![0i64];
        let mut total: u64 = 0;
        for r in 0..rows {
            let len = splits[r + 1] - splits[r];
            let mut k: i64 = g.widths.iter().map(|&w| g.count(len, w)).sum();
            if g.preserve && len > 0 && k == 0 {
                k = 1;
            }
            total = total.saturating_add(k as u64);
            check_size(OP, DType::String, total)?;
            out_splits.push(out_splits[r] + k);
        }
        let mut out = Vec::with_capacity(total as usize);
        for r in 0..rows {
            let row = &data[splits[r] as usize..splits[r + 1] as usize];
            let before = out.len();
            for &w in &g.widths {
                let k = g.count(row.len() as i64, w);
                g.make(row, k, w, &mut out);
            }
            if g.preserve && out.len() == before && !row.is_empty() {
                let width = row.len() as i64 + 2 * g.pad.max(0);
                g.make(row, 1, width, &mut out);
            }
        }
        let len = out.len() as i64;
        // The output splits take the input splits' shape (TensorFlow
        // allocates them so).
        if splits_t.num_elements() == 0 {
            out_splits.clear();
        }
        let mut out_splits = splits_tensor(splits_t.dtype(), &out_splits)?;
        if out_splits.num_elements() == splits_t.num_elements() {
            let (dtype, _, data) = out_splits.into_parts();
            out_splits = Tensor::new(dtype, splits_t.shape().to_vec(), data)?;
        }
        Ok(vec![Tensor::strings(out, vec![len])?, out_splits])
    }))
}

fn split_v1(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "StringSplit";
    let skip_empty = attrs.bool_or("skip_empty", true)?;
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 2)?;
        let (input, delim) = (&inputs[0], &inputs[1]);
        if input.shape().len() != 1 {
            return Err(invalid(
                OP,
                format!(
                    "input must be a vector, got shape: {}",
                    shape_string(input.shape())
                ),
            ));
        }
        if !delim.shape().is_empty() {
            return Err(invalid(
                OP,
                format!(
                    "delimiter must be a scalar, got shape: {}",
                    shape_string(delim.shape())
                ),
            ));
        }
        let values = strings(OP, input, "input")?;
        let delim = &strings(OP, delim, "delimiter")?[0];
        let mut indices = Vec::new();
        let mut tokens = Vec::new();
        let mut widest = 0i64;
        for (i, s) in values.iter().enumerate() {
            // An empty string has no tokens, even kept empty ones.
            let parts: Vec<Bytes> = if s.is_empty() {
                Vec::new()
            } else if delim.is_empty() {
                (0..s.len()).map(|k| s.slice(k..k + 1)).collect()
            } else {
                let mut parts = Vec::new();
                let mut start = 0;
                for (k, b) in s.iter().enumerate() {
                    if delim.contains(b) {
                        parts.push(s.slice(start..k));
                        start = k + 1;
                    }
                }
                parts.push(s.slice(start..));
                parts
            };
            let mut j = 0i64;
            for p in parts {
                if skip_empty && p.is_empty() {
                    continue;
                }
                indices.extend([i as i64, j]);
                tokens.push(p);
                j += 1;
            }
            widest = widest.max(j);
            check_size(OP, DType::String, tokens.len() as u64)?;
        }
        let n = tokens.len() as i64;
        Ok(vec![
            Tensor::from_slice(&indices, vec![n, 2])?,
            Tensor::strings(tokens, vec![n])?,
            Tensor::vector(&[values.len() as i64, widest]),
        ])
    }))
}

/// TensorFlow's `Hash64` (a MurmurHash64A variant) with its default seed.
fn hash64(s: &[u8]) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    let mut h = 0x00DE_CAFC_AFFE_u64 ^ (s.len() as u64).wrapping_mul(M);
    let mut chunks = s.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
        k = k.wrapping_mul(M);
        k ^= k >> 47;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        for (i, &b) in rest.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 47;
    h = h.wrapping_mul(M);
    h ^= h >> 47;
    h
}

fn hash_bucket(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "StringToHashBucket";
    let buckets = attrs.int("num_buckets")?;
    if buckets < 1 {
        return Err(invalid(
            OP,
            format!("num_buckets must be >= 1, got {buckets}"),
        ));
    }
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 1)?;
        let values = strings(OP, &inputs[0], "string_tensor")?;
        let out: Vec<i64> = values
            .iter()
            .map(|s| (hash64(s) % buckets as u64) as i64)
            .collect();
        Ok(vec![Tensor::from_slice(&out, inputs[0].shape().to_vec())?])
    }))
}

/// C's `%.{precision}g`.
fn c_g(v: f64, precision: usize) -> String {
    if v.is_nan() {
        // glibc prints the sign of a NaN.
        return if v.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let p = precision.max(1);
    let e = format!("{:.*e}", p - 1, v);
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if x < -4 || x >= p as i32 {
        let sign = if x < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip(mantissa), x.abs())
    } else {
        strip(&format!("{:.*}", (p as i32 - 1 - x).max(0) as usize, v))
    }
}

/// TensorFlow's `StrCat` of a float: the shortest of 6 (15 for double)
/// or 9 (17) significant digits that reads back exactly.
pub(super) fn float_text(v: f64, double: bool) -> String {
    let (short, long) = if double { (15, 17) } else { (6, 9) };
    let s = c_g(v, short);
    let back_ok = if double {
        s.parse::<f64>().is_ok_and(|b| b == v)
    } else {
        s.parse::<f32>().is_ok_and(|b| f64::from(b) == v)
    };
    if back_ok || v.is_nan() || v.is_infinite() {
        s
    } else {
        c_g(v, long)
    }
}

/// C escapes as `absl::Utf8SafeCEscape`: named escapes, octal for other
/// ASCII non-printables, bytes from 0x80 as they are.
fn c_escape(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in s {
        match b {
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\'' => out.extend_from_slice(b"\\'"),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x20..=0x7E | 0x80..=0xFF => out.push(b),
            _ => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
        }
    }
    out
}

/// Each element of `t` as TensorFlow's `SummarizeValue` prints it.
fn element_texts(op: &str, t: &Tensor) -> Result<Vec<Vec<u8>>> {
    let f = |v: Vec<f64>, double: bool| {
        v.into_iter()
            .map(|x| float_text(x, double).into_bytes())
            .collect()
    };
    Ok(match t.dtype() {
        DType::String => t
            .string_values()?
            .iter()
            .map(|s| [b"\"".as_slice(), &c_escape(s), b"\""].concat())
            .collect(),
        DType::Bool => t
            .to_vec::<bool>()?
            .into_iter()
            .map(|b| if b { b"1".to_vec() } else { b"0".to_vec() })
            .collect(),
        DType::Float | DType::Half | DType::BFloat16 => {
            let c = tfdata_dataset::kernels::cast(t, DType::Float)?;
            f(
                c.to_vec::<f32>()?.into_iter().map(f64::from).collect(),
                false,
            )
        }
        DType::Double => f(t.to_vec::<f64>()?, true),
        DType::UInt64 => t
            .to_vec::<u64>()?
            .iter()
            .map(|x| x.to_string().into_bytes())
            .collect(),
        DType::Int8
        | DType::Int16
        | DType::Int32
        | DType::Int64
        | DType::UInt8
        | DType::UInt16
        | DType::UInt32 => tfdata_dataset::kernels::cast(t, DType::Int64)?
            .to_vec::<i64>()?
            .iter()
            .map(|x| x.to_string().into_bytes())
            .collect(),
        d => {
            return Err(Error::Unimplemented(format!(
                "{op}: formatting {d} tensors is not supported by tfdata"
            )));
        }
    })
}

/// TensorFlow's `PrintDimSpacing`.
fn dim_spacing(dim: usize, rank: usize, out: &mut Vec<u8>) {
    if dim + 1 == rank {
        out.push(b' ');
        return;
    }
    for _ in 0..rank - dim - 1 {
        out.push(b'\n');
    }
    for _ in 0..=dim {
        out.push(b' ');
    }
}

/// TensorFlow's `PrintOneDimV2`: `ends` elements at each end of every
/// dimension longer than twice that, `...` between.
fn print_dim(
    shape: &[usize],
    ends: usize,
    dim: usize,
    elems: &[Vec<u8>],
    at: usize,
    out: &mut Vec<u8>,
) {
    if dim == shape.len() {
        out.extend_from_slice(&elems[at]);
        return;
    }
    out.push(b'[');
    let count = shape[dim];
    let per: usize = shape[dim + 1..].iter().product();
    for i in 0..ends.min(count) {
        if i > 0 {
            dim_spacing(dim, shape.len(), out);
        }
        print_dim(shape, ends, dim + 1, elems, at + per * i, out);
    }
    if count > 2 * ends {
        dim_spacing(dim, shape.len(), out);
        out.extend_from_slice(b"...");
    }
    for i in ends.max(count.saturating_sub(ends))..count {
        dim_spacing(dim, shape.len(), out);
        print_dim(shape, ends, dim + 1, elems, at + per * i, out);
    }
    out.push(b']');
}

fn summarize(op: &str, t: &Tensor, max_entries: i64) -> Result<Vec<u8>> {
    let elems = element_texts(op, t)?;
    let n = elems.len();
    let limit = if max_entries < 0 {
        n
    } else {
        (max_entries as usize).min(n)
    };
    let shape: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect();
    let mut out = Vec::new();
    print_dim(&shape, limit, 0, &elems, 0, &mut out);
    Ok(out)
}

fn string_format(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "StringFormat";
    let template = attrs.bytes("template")?.to_vec();
    let placeholder = attrs.bytes("placeholder")?.to_vec();
    let max_entries = attrs.int_or("summarize", 3)?;
    // The template's pieces around each placeholder.
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    if placeholder.is_empty() {
        pieces.push(template.clone());
    } else {
        let mut rest = template.as_slice();
        while let Some(i) = rest
            .windows(placeholder.len())
            .position(|w| w == placeholder)
        {
            pieces.push(rest[..i].to_vec());
            rest = &rest[i + placeholder.len()..];
        }
        pieces.push(rest.to_vec());
    }
    Ok(Box::new(move |inputs| {
        if pieces.len() - 1 != inputs.len() {
            return Err(invalid(
                OP,
                format!(
                    "num placeholders in template and num inputs must match: {} vs. {}",
                    pieces.len() - 1,
                    inputs.len()
                ),
            ));
        }
        let mut out = pieces[0].clone();
        for (t, piece) in inputs.iter().zip(&pieces[1..]) {
            out.extend_from_slice(&summarize(OP, t, max_entries)?);
            check_size(OP, DType::UInt8, out.len() as u64)?;
            out.extend_from_slice(piece);
        }
        Ok(vec![Tensor::scalar_string(Bytes::from(out))])
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(pad: i64, preserve: bool) -> NGrams {
        NGrams {
            separator: b" ".to_vec(),
            widths: vec![],
            left: b"<".to_vec(),
            right: b">".to_vec(),
            pad,
            preserve,
        }
    }

    #[test]
    fn padded_ngrams() {
        let row: Vec<Bytes> = vec![Bytes::from_static(b"a")];
        let gr = g(-1, false);
        let n = gr.count(1, 3);
        assert_eq!(n, 3);
        let mut out = Vec::new();
        gr.make(&row, n, 3, &mut out);
        assert_eq!(out, ["< < a", "< a >", "a > >"]);
        assert_eq!(g(0, false).count(1, 3), 0);
    }

    #[test]
    fn hash64_is_deterministic_and_spreads() {
        assert_ne!(hash64(b"a"), hash64(b"b"));
        assert_ne!(hash64(b"abcdefgh"), hash64(b"abcdefgi"));
    }

    #[test]
    fn c_g_matches_printf() {
        assert_eq!(c_g(0.1, 6), "0.1");
        assert_eq!(c_g(1e20, 6), "1e+20");
        assert_eq!(c_g(123456789.0, 6), "1.23457e+08");
        assert_eq!(float_text(f64::from(1.0f32 / 3.0), false), "0.333333343");
        assert_eq!(c_g(1.5e-5, 6), "1.5e-05");
    }
}
