//! String kernels: `tf.strings.*`, regexes, hashing to buckets, number
//! parsing and formatting, `tf.io.decode_raw` and web-safe base64.
//!
//! Regexes: TensorFlow uses RE2, tfdata the `regex` crate, whose syntax is
//! nearly RE2's and which is also linear-time. Patterns are rewritten so
//! that the differences that change matches disappear: RE2's `\d`, `\s`,
//! `\w` and `\b` are ASCII-only (the crate's are Unicode), `\C` is any
//! byte, `\Q...\E` quotes a literal. Remaining differences: error messages
//! after "Invalid pattern: <pattern>, error: " are the crate's; RE2 refuses
//! counted repetitions above 1000 where the crate accepts them up to its
//! size limit (8 MiB of compiled program, RE2's `max_mem`); a few rare
//! constructs (`{,n}`, Perl classes inside negated POSIX classes) may parse
//! differently. Matching runs on bytes, so invalid UTF-8 is matched only by
//! byte-level constructs, as in RE2.

use std::fmt::Display;

use bytes::Bytes;
use tfdata_core::{DType, Error, NativeType, Result, Tensor};

use super::{Compute, KernelDef, check_size, expect_inputs, one_output};
use crate::attrs::NodeAttrs;

mod codec;
mod format;
pub(super) mod hash;
mod re;

pub(crate) use codec::{parse_f32, parse_float, parse_int};

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "StringLower",
        outputs: one_output,
        build: |a| case(a, false),
    },
    KernelDef {
        op: "StringUpper",
        outputs: one_output,
        build: |a| case(a, true),
    },
    KernelDef {
        op: "StringLength",
        outputs: one_output,
        build: string_length,
    },
    KernelDef {
        op: "StaticRegexReplace",
        outputs: one_output,
        build: re::static_regex_replace,
    },
    KernelDef {
        op: "RegexReplace",
        outputs: one_output,
        build: re::regex_replace,
    },
    KernelDef {
        op: "StaticRegexFullMatch",
        outputs: one_output,
        build: re::static_full_match,
    },
    KernelDef {
        op: "RegexFullMatch",
        outputs: one_output,
        build: re::full_match,
    },
    KernelDef {
        op: "StringSplitV2",
        outputs: |_| Ok(vec![("indices", 1), ("values", 1), ("shape", 1)]),
        build: split_v2,
    },
    KernelDef {
        op: "StringToNumber",
        outputs: one_output,
        build: codec::string_to_number,
    },
    KernelDef {
        op: "StringJoin",
        outputs: one_output,
        build: string_join,
    },
    KernelDef {
        op: "ReduceJoin",
        outputs: one_output,
        build: reduce_join,
    },
    KernelDef {
        op: "Substr",
        outputs: one_output,
        build: substr,
    },
    KernelDef {
        op: "StringStrip",
        outputs: one_output,
        build: |_| {
            Ok(map_strings("StringStrip", |s| {
                let t = trim_space(s);
                Ok(s.slice_ref(t))
            }))
        },
    },
    KernelDef {
        op: "StringToHashBucketFast",
        outputs: one_output,
        build: codec::hash_bucket_fast,
    },
    KernelDef {
        op: "StringToHashBucketStrong",
        outputs: one_output,
        build: codec::hash_bucket_strong,
    },
    KernelDef {
        op: "AsString",
        outputs: one_output,
        build: format::as_string,
    },
    KernelDef {
        op: "DecodeRaw",
        outputs: one_output,
        build: codec::decode_raw,
    },
    KernelDef {
        op: "EncodeBase64",
        outputs: one_output,
        build: codec::encode_base64,
    },
    KernelDef {
        op: "DecodeBase64",
        outputs: one_output,
        build: |_| Ok(map_strings("DecodeBase64", codec::decode_base64)),
    },
];

pub(super) fn invalid(op: &str, message: impl Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

/// TensorFlow's `TensorShape::DebugString`: `[2,3]`, `[]`.
pub(super) fn shape_string(shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
}

pub(super) fn strings<'a>(op: &str, t: &'a Tensor, what: &str) -> Result<&'a [Bytes]> {
    t.string_values().map_err(|_| {
        invalid(
            op,
            format!("`{what}` must be a string tensor, got {}", t.dtype()),
        )
    })
}

fn scalar_string<'a>(op: &str, t: &'a Tensor, what: &str) -> Result<&'a Bytes> {
    let s = strings(op, t, what)?;
    match (t.shape(), s) {
        ([], [v]) => Ok(v),
        _ => Err(invalid(
            op,
            format!(
                "{what} must be scalar, but received {}",
                shape_string(t.shape())
            ),
        )),
    }
}

/// Refuses string output of more than `bytes` payload bytes.
fn check_bytes(op: &str, bytes: usize) -> Result<()> {
    check_size(op, DType::UInt8, bytes as u64)
}

/// C's `isspace` in the C locale, which TensorFlow's string code uses.
pub(super) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

pub(super) fn trim_space(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| !is_space(b)).unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|&b| !is_space(b))
        .map_or(start, |e| e + 1);
    &s[start..end]
}

fn bytes_or_empty<'a>(attrs: &NodeAttrs<'a>, key: &str) -> Result<&'a [u8]> {
    if attrs.has(key) {
        attrs.bytes(key)
    } else {
        Ok(b"")
    }
}

fn lossy(s: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(s)
}

/// A one-input kernel applying `f` to every string.
fn map_strings(
    op: &'static str,
    f: impl Fn(&Bytes) -> Result<Bytes> + Send + Sync + 'static,
) -> Compute {
    Box::new(move |inputs| {
        expect_inputs(op, &inputs, 1)?;
        let values = strings(op, &inputs[0], "input")?;
        let mut total = 0usize;
        let mut out = Vec::with_capacity(values.len());
        for v in values {
            let r = f(v)?;
            total += r.len();
            check_bytes(op, total)?;
            out.push(r);
        }
        Ok(vec![Tensor::strings(out, inputs[0].shape().to_vec())?])
    })
}

fn numeric<T: NativeType>(values: &[T], shape: Vec<i64>) -> Result<Tensor> {
    Tensor::from_slice(values, shape)
}

fn case(attrs: &NodeAttrs, upper: bool) -> Result<Compute> {
    let op = if upper { "StringUpper" } else { "StringLower" };
    let encoding = attrs.string_or("encoding", "")?;
    let utf8 = match encoding {
        "" => false,
        "utf-8" => true,
        other => {
            return Err(invalid(
                op,
                format!("only utf-8 or '' (no encoding) is supported, received {other}"),
            ));
        }
    };
    Ok(map_strings(op, move |s| {
        // TensorFlow hands ICU the C string: with an encoding, a NUL ends it.
        let s = match s.iter().position(|&c| c == 0) {
            Some(nul) if utf8 => &s[..nul],
            _ => s,
        };
        Ok(Bytes::from(match (utf8, upper) {
            // ICU's full case mappings, which TensorFlow uses, are what the
            // standard library implements (`ß` to `SS`, final sigma, `İ`);
            // invalid bytes become U+FFFD as with ICU's converter.
            (true, true) => lossy(s).to_uppercase().into_bytes(),
            (true, false) => lossy(s).to_lowercase().into_bytes(),
            (false, true) => s.to_ascii_uppercase(),
            (false, false) => s.to_ascii_lowercase(),
        }))
    }))
}

/// Whether `unit` is `UTF8_CHAR` (else `BYTE`).
fn utf8_unit(op: &str, attrs: &NodeAttrs) -> Result<bool> {
    match attrs.string_or("unit", "BYTE")? {
        "BYTE" => Ok(false),
        "UTF8_CHAR" => Ok(true),
        other => Err(invalid(
            op,
            format!("unit must be one of BYTE, UTF8_CHAR, got {other:?}"),
        )),
    }
}

/// TensorFlow counts UTF-8 characters as bytes that are not continuation
/// bytes, so each invalid byte counts as one character.
fn is_char_start(b: u8) -> bool {
    b & 0xc0 != 0x80
}

fn string_length(attrs: &NodeAttrs) -> Result<Compute> {
    let utf8 = utf8_unit("StringLength", attrs)?;
    Ok(Box::new(move |inputs| {
        expect_inputs("StringLength", &inputs, 1)?;
        let values = strings("StringLength", &inputs[0], "input")?;
        let lengths: Vec<i32> = values
            .iter()
            .map(|s| {
                if utf8 {
                    s.iter().filter(|&&b| is_char_start(b)).count() as i32
                } else {
                    s.len() as i32
                }
            })
            .collect();
        Ok(vec![numeric(&lengths, inputs[0].shape().to_vec())?])
    }))
}

// ---------------------------------------------------------------------------
// Splitting and joining

/// TensorFlow's `SplitV2` (Python's `str.split`), as byte ranges of `s`;
/// `maxsplit < 0` means no limit.
fn split_ranges(s: &[u8], sep: &[u8], maxsplit: i64) -> Vec<(usize, usize)> {
    if maxsplit == 0 {
        return vec![(0, s.len())];
    }
    let mut out = Vec::new();
    let mut splits = 0;
    if sep.is_empty() {
        let skip = |mut i: usize| {
            while i < s.len() && is_space(s[i]) {
                i += 1;
            }
            i
        };
        let mut i = skip(0);
        while i < s.len() {
            let start = i;
            while i < s.len() && !is_space(s[i]) {
                i += 1;
            }
            out.push((start, i));
            i = skip(i);
            splits += 1;
            if maxsplit > 0 && splits == maxsplit {
                out.push((i, s.len()));
                return out;
            }
        }
        return out;
    }
    let mut start = 0;
    while let Some(found) = find(&s[start..], sep) {
        out.push((start, start + found));
        start += found + sep.len();
        splits += 1;
        if maxsplit > 0 && splits == maxsplit {
            break;
        }
    }
    out.push((start, s.len()));
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.len() > haystack.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn split_v2(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "StringSplitV2";
    let maxsplit = attrs.int_or("maxsplit", -1)?;
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 2)?;
        let input = &inputs[0];
        if input.shape().len() != 1 {
            return Err(invalid(
                OP,
                format!(
                    "input must be a vector, got shape: {}",
                    shape_string(input.shape())
                ),
            ));
        }
        let values = strings(OP, input, "input")?;
        let sep_t = &inputs[1];
        let sep = match (sep_t.shape(), strings(OP, sep_t, "sep")?) {
            ([], [s]) => s,
            _ => {
                return Err(invalid(
                    OP,
                    format!(
                        "sep must be a scalar, got shape: {}",
                        shape_string(sep_t.shape())
                    ),
                ));
            }
        };
        let mut indices: Vec<i64> = Vec::new();
        let mut tokens: Vec<Bytes> = Vec::new();
        let mut widest = 0usize;
        for (row, s) in values.iter().enumerate() {
            let ranges = split_ranges(s, sep, maxsplit);
            widest = widest.max(ranges.len());
            check_size(OP, DType::Int64, 2 * (tokens.len() + ranges.len()) as u64)?;
            for (col, (a, b)) in ranges.into_iter().enumerate() {
                indices.extend([row as i64, col as i64]);
                tokens.push(s.slice(a..b));
            }
        }
        let n = tokens.len() as i64;
        Ok(vec![
            numeric(&indices, vec![n, 2])?,
            Tensor::strings(tokens, vec![n])?,
            Tensor::vector(&[values.len() as i64, widest as i64]),
        ])
    }))
}

fn string_join(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "StringJoin";
    let n = attrs.count("N")?;
    let separator = Bytes::copy_from_slice(bytes_or_empty(attrs, "separator")?);
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, n)?;
        let mut shape: Option<&[i64]> = None;
        for t in &inputs {
            strings(OP, t, "inputs")?;
            if t.shape().is_empty() {
                continue;
            }
            match shape {
                None => shape = Some(t.shape()),
                Some(s) if s != t.shape() => {
                    return Err(invalid(
                        OP,
                        format!(
                            "Input shapes do not match: {} vs. {}",
                            shape_string(s),
                            shape_string(t.shape())
                        ),
                    ));
                }
                _ => {}
            }
        }
        let shape = shape.unwrap_or(&[]).to_vec();
        let count = tfdata_core::tensor::num_elements(&shape)? as usize;
        let columns: Vec<&[Bytes]> = inputs
            .iter()
            .map(|t| strings(OP, t, "inputs"))
            .collect::<Result<_>>()?;
        let pick = |c: &[Bytes], i: usize| if c.len() == 1 { 0 } else { i };
        let mut total = 0usize;
        for i in 0..count {
            total += columns.iter().map(|c| c[pick(c, i)].len()).sum::<usize>()
                + separator.len() * n.saturating_sub(1);
            check_bytes(OP, total)?;
        }
        let out = (0..count)
            .map(|i| {
                let mut s = Vec::new();
                for (k, c) in columns.iter().enumerate() {
                    if k > 0 {
                        s.extend_from_slice(&separator);
                    }
                    s.extend_from_slice(&c[pick(c, i)]);
                }
                Bytes::from(s)
            })
            .collect();
        Ok(vec![Tensor::strings(out, shape)?])
    }))
}

/// An integer tensor's values as i64 (int32 or int64).
pub(super) fn int_values(op: &str, t: &Tensor, what: &str) -> Result<Vec<i64>> {
    match t.dtype() {
        DType::Int32 => Ok(t.to_vec::<i32>()?.into_iter().map(i64::from).collect()),
        DType::Int64 => t.to_vec::<i64>(),
        other => Err(invalid(
            op,
            format!("`{what}` must be int32 or int64, got {other}"),
        )),
    }
}

fn reduce_join(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "ReduceJoin";
    let keep_dims = attrs.bool_or("keep_dims", false)?;
    let separator = Bytes::copy_from_slice(bytes_or_empty(attrs, "separator")?);
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 2)?;
        let input = &inputs[0];
        let values = strings(OP, input, "inputs")?;
        let rank = input.shape().len() as i64;
        let mut axes = Vec::new();
        for a in int_values(OP, &inputs[1], "reduction_indices")? {
            let d = if a < 0 { a + rank } else { a };
            if !(0..rank).contains(&d) {
                // TensorFlow's code: a TensorFlow 2 map reports it as
                // InvalidArgument, a TensorFlow 1 map ends there (map.rs).
                return Err(crate::queue::out_of_range(format!(
                    "{OP}: Invalid reduction dimension {a} for input with {rank} dimension(s)"
                )));
            }
            if axes.contains(&(d as usize)) {
                return Err(invalid(OP, format!("Duplicate reduction dimension {d}")));
            }
            axes.push(d as usize);
        }
        let dims: Vec<usize> = input.shape().iter().map(|&d| d as usize).collect();
        let mut strides = vec![1usize; dims.len()];
        for i in (0..dims.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * dims[i + 1];
        }
        let kept: Vec<usize> = (0..dims.len()).filter(|d| !axes.contains(d)).collect();
        let out_count: usize = kept.iter().map(|&d| dims[d]).product();
        // The first listed axis varies fastest, as in TensorFlow.
        let group: usize = axes.iter().map(|&d| dims[d]).product();
        check_bytes(
            OP,
            values.iter().map(Bytes::len).sum::<usize>().saturating_add(
                out_count
                    .saturating_mul(group)
                    .saturating_mul(separator.len()),
            ),
        )?;
        let mut out = Vec::with_capacity(out_count);
        for o in 0..out_count {
            let mut base = 0;
            let mut rem = o;
            for &d in kept.iter().rev() {
                base += (rem % dims[d]) * strides[d];
                rem /= dims[d];
            }
            let mut s = Vec::new();
            for g in 0..group {
                let mut offset = base;
                let mut rem = g;
                for &d in &axes {
                    offset += (rem % dims[d]) * strides[d];
                    rem /= dims[d];
                }
                if g > 0 {
                    s.extend_from_slice(&separator);
                }
                s.extend_from_slice(&values[offset]);
            }
            out.push(Bytes::from(s));
        }
        let shape: Vec<i64> = (0..dims.len())
            .filter_map(|d| match (axes.contains(&d), keep_dims) {
                (false, _) => Some(dims[d] as i64),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        Ok(vec![Tensor::strings(out, shape)?])
    }))
}

/// Numpy broadcasting of two shapes.
pub(super) fn broadcast_shape(a: &[i64], b: &[i64]) -> Option<Vec<i64>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for (i, o) in out.iter_mut().enumerate() {
        let x = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let y = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        *o = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

/// The flat index into a tensor of `shape` broadcast to `out`, for the
/// flat output index `i`.
pub(super) fn broadcast_index(shape: &[i64], out: &[i64], mut i: usize) -> usize {
    let (mut index, mut stride) = (0, 1);
    for k in (0..out.len()).rev() {
        let o = out[k] as usize;
        let pos = i % o.max(1);
        i /= o.max(1);
        if k + shape.len() >= out.len() {
            let d = shape[k + shape.len() - out.len()] as usize;
            if d != 1 {
                index += pos * stride;
            }
            stride *= d;
        }
    }
    index
}

fn substr(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "Substr";
    let utf8 = utf8_unit(OP, attrs)?;
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 3)?;
        let (input, pos_t, len_t) = (&inputs[0], &inputs[1], &inputs[2]);
        let values = strings(OP, input, "input")?;
        if pos_t.shape() != len_t.shape() {
            return Err(invalid(
                OP,
                format!(
                    "pos and len should have the same shape, got: {} vs. {}",
                    shape_string(pos_t.shape()),
                    shape_string(len_t.shape())
                ),
            ));
        }
        let pos = int_values(OP, pos_t, "pos")?;
        let len = int_values(OP, len_t, "len")?;
        let shape = broadcast_shape(input.shape(), pos_t.shape()).ok_or_else(|| {
            invalid(
                OP,
                format!(
                    "Incompatible shapes: {} vs. {}",
                    shape_string(input.shape()),
                    shape_string(pos_t.shape())
                ),
            )
        })?;
        let count = tfdata_core::tensor::num_elements(&shape)? as usize;
        check_size(OP, DType::String, count as u64)?;
        let mut out = Vec::with_capacity(count);
        for i in 0..count {
            let s = &values[broadcast_index(input.shape(), &shape, i)];
            let k = broadcast_index(pos_t.shape(), &shape, i);
            let (p, l) = (pos[k], len[k]);
            // Byte offsets of every character start, when counting chars.
            let starts: Vec<usize> = if utf8 {
                (0..s.len()).filter(|&j| is_char_start(s[j])).collect()
            } else {
                Vec::new()
            };
            let n = if utf8 { starts.len() } else { s.len() } as i64;
            if p > n || p < -n {
                let message = if utf8 {
                    format!("pos {p} out of range for string at index {i}")
                } else {
                    format!(
                        "pos {p} out of range for string b'{}' at index {i}",
                        lossy(s)
                    )
                };
                return Err(invalid(OP, message));
            }
            let start = if p < 0 { p + n } else { p };
            // A negative length: to the end in bytes (TensorFlow's
            // `string_view::substr` takes it as npos), nothing in characters
            // (its UTF-8 walk moves no character).
            let end = if l < 0 && utf8 {
                start
            } else if l < 0 {
                n
            } else {
                start.saturating_add(l).min(n)
            };
            let byte = |c: i64| {
                if utf8 {
                    starts.get(c as usize).copied().unwrap_or(s.len())
                } else {
                    c as usize
                }
            };
            out.push(s.slice(byte(start)..byte(end)));
        }
        Ok(vec![Tensor::strings(out, shape)?])
    }))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use tfdata_core::{DType, Tensor};

    use super::super::testing::{boolean, int, list, run, string, ty};
    use tfdata_proto::tensorflow::attr_value::ListValue;

    fn svec(values: &[&[u8]]) -> Tensor {
        let v: Vec<Bytes> = values.iter().map(|s| Bytes::copy_from_slice(s)).collect();
        let n = v.len() as i64;
        Tensor::strings(v, vec![n]).unwrap()
    }

    fn s(t: &Tensor) -> Vec<Vec<u8>> {
        t.string_values()
            .unwrap()
            .iter()
            .map(|b| b.to_vec())
            .collect()
    }

    fn err(r: tfdata_core::Result<Vec<Tensor>>) -> String {
        match r {
            Err(tfdata_core::Error::InvalidArgument(m)) => m,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    fn b(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    fn split(input: &[&[u8]], sep: &str, maxsplit: i64) -> (Vec<i64>, Vec<Vec<u8>>, Vec<i64>) {
        let out = run(
            "StringSplitV2",
            &[("maxsplit", int(maxsplit))],
            vec![svec(input), Tensor::scalar_string(sep.to_string())],
        )
        .unwrap();
        (
            out[0].to_vec().unwrap(),
            s(&out[1]),
            out[2].to_vec().unwrap(),
        )
    }

    #[test]
    fn split_v2_matches_tensorflow() {
        // tf.raw_ops.StringSplitV2 outputs from TensorFlow 2.21.
        let (i, v, sh) = split(&[b"  a b\t c  ", b"", b"   ", b"x"], "", -1);
        assert_eq!(i, [0, 0, 0, 1, 0, 2, 3, 0]);
        assert_eq!(v, b(&["a", "b", "c", "x"]));
        assert_eq!(sh, [4, 3]);
        let (i, v, sh) = split(&[b"a ", b"a  b c", b" x y "], "", 1);
        assert_eq!(i, [0, 0, 0, 1, 1, 0, 1, 1, 2, 0, 2, 1]);
        assert_eq!(v, b(&["a", "", "a", "b c", "x", "y "]));
        assert_eq!(sh, [3, 2]);
        let (i, v, sh) = split(&[b"1,,2", b"", b",", b"a<>b"], ",", -1);
        assert_eq!(i, [0, 0, 0, 1, 0, 2, 1, 0, 2, 0, 2, 1, 3, 0]);
        assert_eq!(v, b(&["1", "", "2", "", "", "", "a<>b"]));
        assert_eq!(sh, [4, 3]);
        let (_, v, sh) = split(&[b"a<>b<>c", b"<>"], "<>", 1);
        assert_eq!(v, b(&["a", "b<>c", "", ""]));
        assert_eq!(sh, [2, 2]);
        let (_, v, sh) = split(&[b"a b"], " ", 0);
        assert_eq!((v, sh), (b(&["a b"]), vec![1, 1]));
        let (i, v, sh) = split(&[], " ", -1);
        assert!(i.is_empty() && v.is_empty());
        assert_eq!(sh, [0, 0]);

        let e = err(run(
            "StringSplitV2",
            &[],
            vec![Tensor::scalar_string("a b"), Tensor::scalar_string(" ")],
        ));
        assert_eq!(e, "StringSplitV2: input must be a vector, got shape: []");
        let e = err(run(
            "StringSplitV2",
            &[],
            vec![svec(&[b"a"]), svec(&[b" "])],
        ));
        assert_eq!(e, "StringSplitV2: sep must be a scalar, got shape: [1]");
    }

    #[test]
    fn lower_upper_match_tensorflow() {
        let lower = |enc: &str, v: &[&[u8]]| {
            s(&run("StringLower", &[("encoding", string(enc))], vec![svec(v)]).unwrap()[0])
        };
        let upper = |enc: &str, v: &[&[u8]]| {
            s(&run("StringUpper", &[("encoding", string(enc))], vec![svec(v)]).unwrap()[0])
        };
        assert_eq!(lower("", &["HeLLo ÀÉ".as_bytes()]), b(&["hello ÀÉ"]));
        assert_eq!(
            lower("utf-8", &["HeLLo ÀÉ İ ẞ".as_bytes(), "ǅ".as_bytes()]),
            b(&["hello àé i\u{307} ß", "ǆ"])
        );
        assert_eq!(
            upper("utf-8", &["hello àé ß ﬁ ǆ".as_bytes(), "ı".as_bytes()]),
            b(&["HELLO ÀÉ SS FI Ǆ", "I"])
        );
        assert_eq!(upper("", &["hello àé".as_bytes()]), b(&["HELLO àé"]));
        assert_eq!(lower("utf-8", &[b"A\xffB"]), [b"a\xef\xbf\xbdb".to_vec()]);
        let e = err(run(
            "StringLower",
            &[("encoding", string("latin1"))],
            vec![svec(&[b"A"])],
        ));
        assert_eq!(
            e,
            "StringLower: only utf-8 or '' (no encoding) is supported, received latin1"
        );
    }

    #[test]
    fn length_matches_tensorflow() {
        let len = |unit: &str, v: &[&[u8]]| -> Vec<i32> {
            run("StringLength", &[("unit", string(unit))], vec![svec(v)]).unwrap()[0]
                .to_vec()
                .unwrap()
        };
        let input: &[&[u8]] = &["héllo".as_bytes(), b"", b"\xff\xfea", "😀".as_bytes()];
        assert_eq!(len("BYTE", input), [6, 0, 3, 4]);
        assert_eq!(len("UTF8_CHAR", input), [5, 0, 3, 1]);
    }

    fn replace(pattern: &str, rewrite: &str, global: bool, v: &[&[u8]]) -> Vec<Vec<u8>> {
        let attrs = [
            ("pattern", string(pattern)),
            ("rewrite", string(rewrite)),
            ("replace_global", boolean(global)),
        ];
        s(&run("StaticRegexReplace", &attrs, vec![svec(v)]).unwrap()[0])
    }

    #[test]
    fn static_regex_replace_matches_tensorflow() {
        assert_eq!(
            replace("a+", r"<\0>", true, &[b"aaa bbb", b"abab"]),
            b(&["<aaa> bbb", "<a>b<a>b"])
        );
        assert_eq!(
            replace("a", "x", false, &[b"aaa bbb aa", b"abab"]),
            b(&["xaa bbb aa", "xbab"])
        );
        assert_eq!(
            replace(r"(\w+) (\w+)", r"\2, \1", true, &[b"john smith"]),
            b(&["smith, john"])
        );
        assert_eq!(replace("", "-", true, &[b"abc"]), b(&["-a-b-c-"]));
        assert_eq!(
            replace("x*", "-", true, &[b"abc", b"xxaxx"]),
            b(&["-a-b-c-", "-a-"])
        );
        assert_eq!(replace("b", r"$1\\z", true, &[b"abc"]), b(&[r"a$1\zc"]));
        // A group the pattern lacks: RE2 replaces nothing.
        assert_eq!(replace("b", r"\1", true, &[b"abc"]), b(&["abc"]));
        // A bad escape: RE2 keeps the rewrite up to it.
        assert_eq!(replace("b", r"x\zy", true, &[b"abc"]), b(&["axc"]));
        assert_eq!(
            replace("[[:punct:]]", "", true, &[b"Hello, World! It's"]),
            b(&["Hello World Its"])
        );
        assert_eq!(replace("<br />", " ", true, &[b"a<br />b"]), b(&["a b"]));
        assert_eq!(replace("a", "b", true, &[b"a\xffa"]), [b"b\xffb".to_vec()]);
        assert_eq!(
            replace("a.b", "#", true, &[b"a\xffb"]),
            [b"a\xffb".to_vec()]
        );
        // RE2's ASCII-only Perl classes.
        assert_eq!(
            replace(r"\d", "#", true, &["a1٣b".as_bytes()]),
            b(&["a#٣b"])
        );
        assert_eq!(
            replace(r"\w", "#", true, &["aé_b".as_bytes()]),
            b(&["#é##"])
        );
        assert_eq!(
            replace(r"\s", "#", true, &["a\x0bb\u{a0}c d".as_bytes()]),
            b(&["a\x0bb\u{a0}c#d"])
        );
        assert_eq!(
            replace(r"\b", "|", true, &["éa b".as_bytes()]),
            b(&["é|a| |b|"])
        );
        assert_eq!(
            replace("(?i)é|k", "#", true, &["ÉéK\u{212a}".as_bytes()]),
            b(&["####"])
        );
        assert_eq!(replace(r"\Q.b*\E", "#", true, &[b"a.b*c"]), b(&["a#c"]));

        let attrs = [("pattern", string("(")), ("rewrite", string(""))];
        let e = err(run("StaticRegexReplace", &attrs, vec![svec(&[b"abc"])]));
        assert!(
            e.starts_with("StaticRegexReplace: Invalid pattern: (, error: "),
            "{e}"
        );
        // A pattern whose program is too large is refused, not compiled.
        let attrs = [
            ("pattern", string("((a{100}){100}){100}")),
            ("rewrite", string("")),
        ];
        assert!(
            err(run("StaticRegexReplace", &attrs, vec![svec(&[b"abc"])]))
                .contains("Invalid pattern")
        );
    }

    #[test]
    fn regex_replace_and_full_match() {
        let out = run(
            "RegexReplace",
            &[("replace_global", boolean(true))],
            vec![
                svec(&[b"aaa"]),
                Tensor::scalar_string("a"),
                Tensor::scalar_string("b"),
            ],
        )
        .unwrap();
        assert_eq!(s(&out[0]), b(&["bbb"]));
        let e = err(run(
            "RegexReplace",
            &[],
            vec![svec(&[b"aaa"]), svec(&[b"a"]), Tensor::scalar_string("b")],
        ));
        assert_eq!(e, "RegexReplace: Pattern must be scalar, but received [1]");

        let out = run(
            "StaticRegexFullMatch",
            &[("pattern", string("a.c"))],
            vec![svec(&[b"abc", b"abcd", b"", b"ABC"])],
        )
        .unwrap();
        assert_eq!(
            out[0].to_vec::<bool>().unwrap(),
            [true, false, false, false]
        );
        let out = run(
            "StaticRegexFullMatch",
            &[("pattern", string("(?i)ABC"))],
            vec![Tensor::scalar_string("abc")],
        )
        .unwrap();
        assert_eq!(out[0].to_vec::<bool>().unwrap(), [true]);
        assert!(out[0].shape().is_empty());
        let out = run(
            "RegexFullMatch",
            &[],
            vec![svec(&[b"abc", b"abcd"]), Tensor::scalar_string("a.c|abcd")],
        )
        .unwrap();
        assert_eq!(out[0].to_vec::<bool>().unwrap(), [true, true]);
        let e = err(run(
            "RegexFullMatch",
            &[],
            vec![svec(&[b"abc"]), Tensor::scalar_string("*")],
        ));
        assert!(
            e.starts_with("RegexFullMatch: Invalid pattern: *, error: "),
            "{e}"
        );
    }

    fn to_number(t: DType, v: &str) -> tfdata_core::Result<Vec<Tensor>> {
        run(
            "StringToNumber",
            &[("out_type", ty(t))],
            vec![svec(&[v.as_bytes()])],
        )
    }

    #[test]
    fn string_to_number_matches_tensorflow() {
        let f32s = |v: &str| {
            to_number(DType::Float, v).unwrap()[0]
                .to_vec::<f32>()
                .unwrap()[0]
        };
        let f64s = |v: &str| {
            to_number(DType::Double, v).unwrap()[0]
                .to_vec::<f64>()
                .unwrap()[0]
        };
        let i32s = |v: &str| {
            to_number(DType::Int32, v).unwrap()[0]
                .to_vec::<i32>()
                .unwrap()[0]
        };
        let i64s = |v: &str| {
            to_number(DType::Int64, v).unwrap()[0]
                .to_vec::<i64>()
                .unwrap()[0]
        };
        for (input, want) in [
            (" 2", 2.0),
            ("3 ", 3.0),
            ("+5", 5.0),
            ("1e40", f64::INFINITY),
            ("1e-50", 0.0),
            (".5", 0.5),
            ("5.", 5.0),
            ("0x10", 16.0),
            ("0x1p3", 8.0),
            ("INF", f64::INFINITY),
            ("infinity", f64::INFINITY),
            ("\x0b3", 3.0),
            ("99999999999", 99999997952.0),
            ("1.0e+2", 100.0),
        ] {
            assert_eq!(f64::from(f32s(input)), want, "{input:?}");
        }
        assert_eq!(f32s("1e-40").to_bits(), 1e-40f32.to_bits());
        assert!(f32s("-nan").is_nan() && f32s("NaN").is_nan());
        assert!(f32s("-0").is_sign_negative());
        assert_eq!(f64s("1e40"), 1e40);
        assert_eq!(f64s("1e309"), f64::INFINITY);
        assert_eq!(f64s("99999999999"), 99999999999.0);
        assert_eq!(f64s(&"1".repeat(400)), f64::INFINITY);
        assert_eq!(i32s("  7  "), 7);
        assert_eq!(i32s("010"), 10);
        assert_eq!(i32s("-2147483648"), i32::MIN);
        assert_eq!(i64s("-9223372036854775808"), i64::MIN);
        assert_eq!(i64s("-0"), 0);
        for (t, bad) in [
            (
                DType::Float,
                &["", "abc", "1_0", "1 2", "--1", "1e", "1.5f", "1,5"][..],
            ),
            (DType::Double, &["", "1e", "0x"]),
            (
                DType::Int32,
                &["1.5", "1e3", "0x10", "2147483648", "inf", "+"],
            ),
            (DType::Int64, &["9223372036854775808", "5.", "NaN"]),
        ] {
            for v in bad {
                assert_eq!(
                    err(to_number(t, v)),
                    format!(
                        "StringToNumber: StringToNumberOp could not correctly convert string: {v}"
                    ),
                    "{t} {v:?}"
                );
            }
        }
    }

    #[test]
    fn join_and_reduce_join_match_tensorflow() {
        let join = |inputs: Vec<Tensor>, sep: &str| {
            run(
                "StringJoin",
                &[("N", int(inputs.len() as i64)), ("separator", string(sep))],
                inputs,
            )
        };
        let out = join(
            vec![
                svec(&[b"a", b"b"]),
                Tensor::scalar_string("x"),
                svec(&[b"c", b"d"]),
            ],
            "-",
        )
        .unwrap();
        assert_eq!(s(&out[0]), b(&["a-x-c", "b-x-d"]));
        let out = join(
            vec![Tensor::scalar_string("a"), Tensor::scalar_string("b")],
            "",
        )
        .unwrap();
        assert_eq!((s(&out[0]), out[0].shape().len()), (b(&["ab"]), 0));
        let e = err(join(
            vec![svec(&[b"a", b"b"]), svec(&[b"c", b"d", b"e"])],
            "-",
        ));
        assert_eq!(e, "StringJoin: Input shapes do not match: [2] vs. [3]");

        let grid = || {
            Tensor::strings(
                b(&["a", "b", "c", "d"])
                    .into_iter()
                    .map(Bytes::from)
                    .collect(),
                vec![2, 2],
            )
            .unwrap()
        };
        let cube = || {
            Tensor::strings(
                b(&["a", "b", "c", "d", "e", "f", "g", "h"])
                    .into_iter()
                    .map(Bytes::from)
                    .collect(),
                vec![2, 2, 2],
            )
            .unwrap()
        };
        let rj = |t: Tensor, axes: &[i32], keep: bool, sep: &str| {
            run(
                "ReduceJoin",
                &[("keep_dims", boolean(keep)), ("separator", string(sep))],
                vec![t, Tensor::vector(axes)],
            )
        };
        let out = rj(grid(), &[0, 1], false, ",").unwrap();
        assert_eq!(
            (s(&out[0]), out[0].shape().to_vec()),
            (b(&["a,c,b,d"]), vec![])
        );
        let out = rj(grid(), &[0], false, ",").unwrap();
        assert_eq!(s(&out[0]), b(&["a,c", "b,d"]));
        let out = rj(grid(), &[1], true, ",").unwrap();
        assert_eq!(
            (s(&out[0]), out[0].shape().to_vec()),
            (b(&["a,b", "c,d"]), vec![2, 1])
        );
        assert_eq!(
            s(&rj(grid(), &[-1], false, "").unwrap()[0]),
            b(&["ab", "cd"])
        );
        let out = rj(grid(), &[], false, ",").unwrap();
        assert_eq!(
            (s(&out[0]), out[0].shape().to_vec()),
            (b(&["a", "b", "c", "d"]), vec![2, 2])
        );
        assert_eq!(
            s(&rj(cube(), &[0, 2], false, "").unwrap()[0]),
            b(&["aebf", "cgdh"])
        );
        assert_eq!(
            s(&rj(cube(), &[2, 0], false, "").unwrap()[0]),
            b(&["abef", "cdgh"])
        );
        let empty = Tensor::strings(vec![], vec![2, 0]).unwrap();
        assert_eq!(s(&rj(empty, &[1], false, ",").unwrap()[0]), b(&["", ""]));
        let out_of_range = rj(grid(), &[2], false, ",").unwrap_err();
        assert_eq!(out_of_range.code(), tfdata_core::Code::OutOfRange);
        assert!(
            out_of_range.to_string().contains(
                "ReduceJoin: Invalid reduction dimension 2 for input with 2 dimension(s)"
            ),
            "{out_of_range}"
        );
        assert_eq!(
            err(rj(grid(), &[1, 1], false, ",")),
            "ReduceJoin: Duplicate reduction dimension 1"
        );
    }

    #[test]
    fn substr_matches_tensorflow() {
        let sub = |unit: &str, input: Tensor, pos: Tensor, len: Tensor| {
            run("Substr", &[("unit", string(unit))], vec![input, pos, len])
        };
        let byte = |v: &[&[u8]], p: i32, l: i32| {
            sub("BYTE", svec(v), Tensor::scalar(p), Tensor::scalar(l)).map(|o| s(&o[0]))
        };
        assert_eq!(
            byte(&[b"hello", b"world"], 1, 3).unwrap(),
            b(&["ell", "orl"])
        );
        assert_eq!(
            byte(&[b"hello", b"world"], -3, 2).unwrap(),
            b(&["ll", "rl"])
        );
        assert_eq!(byte(&[b"hello"], 3, 10).unwrap(), b(&["lo"]));
        assert_eq!(byte(&[b"hello"], 5, 1).unwrap(), b(&[""]));
        assert_eq!(byte(&[b"hello"], 1, -1).unwrap(), b(&["ello"]));
        assert_eq!(
            err(byte(&[b"hello", b"hi"], 3, 1).map(|_| vec![])),
            "Substr: pos 3 out of range for string b'hi' at index 1"
        );
        assert_eq!(
            err(byte(&[b"hello"], -6, 1).map(|_| vec![])),
            "Substr: pos -6 out of range for string b'hello' at index 0"
        );
        let out = sub(
            "BYTE",
            svec(&[b"hello", b"world"]),
            Tensor::vector(&[0i32, 1]),
            Tensor::vector(&[1i32, 2]),
        )
        .unwrap();
        assert_eq!(s(&out[0]), b(&["h", "or"]));
        let grid = Tensor::strings(
            b(&["hello", "world", "abc", "defg"])
                .into_iter()
                .map(Bytes::from)
                .collect(),
            vec![2, 2],
        )
        .unwrap();
        let out = sub(
            "BYTE",
            grid,
            Tensor::vector(&[0i64, 1]),
            Tensor::vector(&[1i64, 2]),
        )
        .unwrap();
        assert_eq!(s(&out[0]), b(&["h", "or", "a", "ef"]));
        let out = sub(
            "UTF8_CHAR",
            svec(&["héllo😀x".as_bytes()]),
            Tensor::scalar(1i32),
            Tensor::scalar(5i32),
        )
        .unwrap();
        assert_eq!(s(&out[0]), b(&["éllo😀"]));
        let out = sub(
            "UTF8_CHAR",
            svec(&["héllo😀x".as_bytes()]),
            Tensor::scalar(-2i32),
            Tensor::scalar(1i32),
        )
        .unwrap();
        assert_eq!(s(&out[0]), b(&["😀"]));
        let e = err(sub(
            "UTF8_CHAR",
            svec(&["hé".as_bytes()]),
            Tensor::scalar(3i32),
            Tensor::scalar(1i32),
        ));
        assert_eq!(e, "Substr: pos 3 out of range for string at index 0");
        let e = err(sub(
            "BYTE",
            svec(&[b"hello"]),
            Tensor::vector(&[1i32, 2]),
            Tensor::scalar(1i32),
        ));
        assert_eq!(
            e,
            "Substr: pos and len should have the same shape, got: [2] vs. []"
        );
    }

    #[test]
    fn strip_and_hash_buckets_match_tensorflow() {
        let out = run(
            "StringStrip",
            &[],
            vec![svec(&[b" \t a b \n\x0b\x0c\r", b"", b"x"])],
        )
        .unwrap();
        assert_eq!(s(&out[0]), b(&["a b", "", "x"]));
        let a100 = "a".repeat(100);
        let words: &[&[u8]] = &[b"", b"hello", b"world", a100.as_bytes(), b"Hello, World!"];
        let out = run(
            "StringToHashBucketFast",
            &[("num_buckets", int(1000))],
            vec![svec(words)],
        )
        .unwrap();
        assert_eq!(out[0].to_vec::<i64>().unwrap(), [263, 296, 598, 618, 330]);
        let key = list(ListValue {
            i: vec![1, 2],
            ..Default::default()
        });
        let out = run(
            "StringToHashBucketStrong",
            &[("num_buckets", int(1000)), ("key", key)],
            vec![svec(words)],
        )
        .unwrap();
        assert_eq!(out[0].to_vec::<i64>().unwrap(), [435, 622, 990, 610, 889]);
        assert!(
            run(
                "StringToHashBucketFast",
                &[("num_buckets", int(0))],
                vec![svec(words)]
            )
            .is_err()
        );
    }

    #[test]
    fn decode_raw_matches_tensorflow() {
        let raw = |t: DType, le: bool, v: Tensor| {
            run(
                "DecodeRaw",
                &[("out_type", ty(t)), ("little_endian", boolean(le))],
                vec![v],
            )
        };
        let out = raw(
            DType::Int16,
            true,
            svec(&[b"\x01\x00\x02\x00", b"\x03\x00\x04\x01"]),
        )
        .unwrap();
        assert_eq!(
            (out[0].to_vec::<i16>().unwrap(), out[0].shape().to_vec()),
            (vec![1, 2, 3, 260], vec![2, 2])
        );
        let out = raw(DType::Int16, false, svec(&[b"\x01\x00\x02\x00"])).unwrap();
        assert_eq!(out[0].to_vec::<i16>().unwrap(), [256, 512]);
        let out = raw(
            DType::Float,
            true,
            Tensor::scalar_string(&b"\x00\x00\x80\x3f"[..]),
        )
        .unwrap();
        assert_eq!(
            (out[0].to_vec::<f32>().unwrap(), out[0].shape().to_vec()),
            (vec![1.0], vec![1])
        );
        let out = raw(DType::Int32, true, svec(&[b"", b""])).unwrap();
        assert_eq!(out[0].shape(), [2, 0]);
        let out = raw(DType::Int16, true, svec(&[])).unwrap();
        assert_eq!(out[0].shape(), [0, 0]);
        let out = raw(DType::Bool, true, svec(&[b"\x00\x02"])).unwrap();
        assert_eq!(out[0].to_vec::<bool>().unwrap(), [false, true]);
        assert_eq!(
            err(raw(
                DType::Int16,
                true,
                svec(&[b"\x01\x00\x02\x00", b"\x03\x00"])
            )),
            "DecodeRaw: DecodeRaw requires input strings to all be the same size, but element 1 has size 4 != 2"
        );
        assert_eq!(
            err(raw(DType::Int16, true, svec(&[b"\x01\x00\x02"]))),
            "DecodeRaw: Input to DecodeRaw has length 3 that is not a multiple of 2, the size of int16"
        );
    }

    #[test]
    fn base64_matches_tensorflow() {
        let input: &[&[u8]] = &[b"", b"f", b"fo", b"foo", b"\xff\xfe\xfd>?"];
        let enc = |pad: bool| {
            s(&run("EncodeBase64", &[("pad", boolean(pad))], vec![svec(input)]).unwrap()[0])
        };
        assert_eq!(enc(false), b(&["", "Zg", "Zm8", "Zm9v", "__79Pj8"]));
        assert_eq!(enc(true), b(&["", "Zg==", "Zm8=", "Zm9v", "__79Pj8="]));
        let dec = |v: &str| {
            run("DecodeBase64", &[], vec![svec(&[v.as_bytes()])]).map(|o| s(&o[0]).remove(0))
        };
        for (v, want) in [
            ("", &b""[..]),
            ("Zg", b"f"),
            ("Zg==", b"f"),
            ("Zm8=", b"fo"),
            ("Zm9vYg", b"foob"),
            ("Zm9vYg==", b"foob"),
            ("__79Pj8", b"\xff\xfe\xfd>?"),
            ("Zh", b"f"),
        ] {
            assert_eq!(dec(v).unwrap(), want, "{v}");
        }
        for v in [
            "Zg=", "Zm9vYg=", "Zm+v", "Zg=a", "Zm 9v", "Zg==Zg==", "Zg===",
        ] {
            assert_eq!(
                err(dec(v).map(|_| vec![])),
                "DecodeBase64: Invalid character found in base64.",
                "{v}"
            );
        }
        assert_eq!(
            err(dec("Z").map(|_| vec![])),
            "DecodeBase64: Base64 string length cannot be 1 modulo 4."
        );
    }

    fn as_string(
        t: Tensor,
        attrs: &[(&str, tfdata_proto::tensorflow::AttrValue)],
    ) -> tfdata_core::Result<Vec<Vec<u8>>> {
        let mut a = vec![("T", ty(t.dtype()))];
        a.extend(attrs.iter().cloned());
        run("AsString", &a, vec![t]).map(|o| s(&o[0]))
    }

    #[test]
    #[allow(clippy::approx_constant)] // TensorFlow's reference inputs
    fn as_string_matches_tensorflow() {
        let f = |v: &[f32]| Tensor::vector(v);
        let p = |n: i64| ("precision", int(n));
        let w = |n: i64| ("width", int(n));
        assert_eq!(
            as_string(
                f(&[
                    3.14159,
                    -0.0,
                    1e10,
                    1e-5,
                    f32::NAN,
                    f32::INFINITY,
                    123456789.0
                ]),
                &[]
            )
            .unwrap(),
            b(&[
                "3.141590",
                "-0.000000",
                "10000000000.000000",
                "0.000010",
                "nan",
                "inf",
                "123456792.000000"
            ])
        );
        assert_eq!(
            as_string(
                f(&[3.14159, 2.5, 0.125]),
                &[p(2), w(8), ("fill", string("0"))]
            )
            .unwrap(),
            b(&["00003.14", "00002.50", "00000.12"])
        );
        let sci = ("scientific", boolean(true));
        let short = ("shortest", boolean(true));
        assert_eq!(
            as_string(f(&[3.14159, 0.0, 1e30, 1e-5]), std::slice::from_ref(&sci)).unwrap(),
            b(&[
                "3.141590e+00",
                "0.000000e+00",
                "1.000000e+30",
                "1.000000e-05"
            ])
        );
        assert_eq!(
            as_string(
                f(&[3.14159, 0.0, 1e30, 1e-5, f32::INFINITY, -f32::NAN]),
                &[sci.clone(), p(2), w(12)]
            )
            .unwrap(),
            b(&[
                "    3.14e+00",
                "    0.00e+00",
                "    1.00e+30",
                "    1.00e-05",
                "         inf",
                "        -nan"
            ])
        );
        assert_eq!(
            as_string(
                f(&[3.14159, 0.0, 1e10, 1e-5, 100.0, 123456.0, 1234567.0, 0.0001]),
                std::slice::from_ref(&short)
            )
            .unwrap(),
            b(&[
                "3.14159",
                "0",
                "1e+10",
                "1e-05",
                "100",
                "123456",
                "1.23457e+06",
                "0.0001"
            ])
        );
        assert_eq!(
            as_string(f(&[3.14159, 1234.5]), &[short.clone(), p(3)]).unwrap(),
            b(&["3.14", "1.23e+03"])
        );
        assert_eq!(
            as_string(
                f(&[-0.5, 0.00001234, 1e16, f32::NEG_INFINITY]),
                std::slice::from_ref(&short)
            )
            .unwrap(),
            b(&["-0.5", "1.234e-05", "1e+16", "-inf"])
        );
        assert_eq!(
            as_string(f(&[2.5, 35.0]), &[short.clone(), p(0)]).unwrap(),
            b(&["2", "4e+01"])
        );
        assert_eq!(
            as_string(f(&[-2.5]), &[w(12), ("fill", string("0"))]).unwrap(),
            b(&["-0002.500000"])
        );
        assert_eq!(
            as_string(f(&[2.5, 3.5, -0.5]), &[p(0)]).unwrap(),
            b(&["2", "4", "-0"])
        );
        assert_eq!(
            as_string(Tensor::vector(&[3.14159f64]), &[]).unwrap(),
            b(&["3.141590"])
        );
        let ints = || Tensor::vector(&[1i32, -22, 333]);
        assert_eq!(
            as_string(ints(), &[w(5)]).unwrap(),
            b(&["    1", "  -22", "  333"])
        );
        assert_eq!(
            as_string(ints(), &[w(5), ("fill", string("0"))]).unwrap(),
            b(&["00001", "-0022", "00333"])
        );
        assert_eq!(
            as_string(Tensor::vector(&[i64::MIN]), &[]).unwrap(),
            b(&["-9223372036854775808"])
        );
        assert_eq!(
            as_string(Tensor::vector(&[200u8]), &[]).unwrap(),
            b(&["200"])
        );
        assert_eq!(
            as_string(Tensor::vector(&[true, false]), &[]).unwrap(),
            b(&["true", "false"])
        );
        assert_eq!(
            as_string(svec(&[b"ab"]), &[w(4), ("fill", string("0"))]).unwrap(),
            b(&["  ab"])
        );
        let e = err(as_string(ints(), &[("fill", string("x"))]).map(|_| vec![]));
        assert_eq!(e, "AsString: Fill argument not supported: \"x\"");
        let e = err(as_string(ints(), &[p(2)]).map(|_| vec![]));
        assert_eq!(e, "AsString: precision not supported for datatype int32");
        let e = err(as_string(f(&[1.0]), &[sci, short]).map(|_| vec![]));
        assert_eq!(
            e,
            "AsString: Cannot select both scientific and shortest notation"
        );
    }

    #[test]
    fn hostile_sizes_are_refused() {
        let out = run(
            "Substr",
            &[],
            vec![
                svec(&[b"hello"]),
                Tensor::scalar(1i64),
                Tensor::scalar(i64::MAX),
            ],
        )
        .unwrap();
        assert_eq!(s(&out[0]), b(&["ello"]));
        let wide = [("T", ty(DType::Int32)), ("width", int(1 << 20))];
        let many = Tensor::from_slice(&vec![1i32; 4096], vec![4096]).unwrap();
        assert!(err(run("AsString", &wide, vec![many])).contains("exceeds the limit"));
        // A rewrite that multiplies the input stops at the tensor limit.
        let big = vec![b'a'; 1 << 16];
        let rewrite = "x".repeat(1 << 15);
        let attrs = [("pattern", string("")), ("rewrite", string(&rewrite))];
        assert!(
            err(run("StaticRegexReplace", &attrs, vec![svec(&[&big])]))
                .contains("exceeds the limit")
        );
    }
}
