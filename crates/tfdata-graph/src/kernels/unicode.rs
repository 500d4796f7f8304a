//! Unicode kernels: `UnicodeDecode`, `UnicodeDecodeWithOffsets`,
//! `UnicodeEncode` and `UnicodeTranscode` (`tf.strings.unicode_decode`,
//! `unicode_split`, `unicode_encode`, `unicode_transcode`).
//!
//! TensorFlow decodes with ICU converters; these decoders reproduce what
//! ICU does with ill-formed input, which is what `errors` acts on: in
//! UTF-8 each maximal subpart of an ill-formed sequence (the longest prefix
//! of a well-formed sequence, or one byte) is one error, a truncated
//! sequence at the end included; in UTF-16-BE a lone surrogate is one
//! error, and a trailing odd byte joins the error before it; in UTF-32-BE
//! a surrogate or a value past U+10FFFF is one error of four bytes. Each
//! error is replaced by `replacement_char` ("replace"), dropped with its
//! offset ("ignore") or fails the op ("strict"). With
//! `replace_control_characters`, C0 controls are replaced (or dropped) too,
//! without failing a strict op. Encoders refuse, replace or drop code
//! points outside Unicode or in the surrogate range.
//!
//! `UnicodeScript` gives ICU's Script property in ICU4C's `UScriptCode`
//! numbering (ICU4X's data), -1 outside Unicode. ICU4X's data is a newer
//! Unicode than TensorFlow's ICU (Unicode 13 or older): some code points
//! assigned since (Unicode 14's Toto and Old Uyghur, 15's Kawi, and a few
//! letters added to old blocks) have their script here and Unknown (103) in
//! TensorFlow.
//!
//! Input encodings: UTF-8, UTF-16-BE, UTF-32-BE and ISO-8859-1 (ICU's
//! other converters are refused as unimplemented); output encodings are
//! TensorFlow's three.

use bytes::Bytes;
use tfdata_core::{DType, Error, Result, Tensor};

use super::strings::strings;
use super::{Compute, KernelDef, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "UnicodeDecode",
        outputs: |_| Ok(vec![("row_splits", 1), ("char_values", 1)]),
        build: |a| decode(a, false),
    },
    KernelDef {
        op: "UnicodeDecodeWithOffsets",
        outputs: |_| {
            Ok(vec![
                ("row_splits", 1),
                ("char_values", 1),
                ("char_to_byte_starts", 1),
            ])
        },
        build: |a| decode(a, true),
    },
    KernelDef {
        op: "UnicodeEncode",
        outputs: super::one_output,
        build: encode,
    },
    KernelDef {
        op: "UnicodeTranscode",
        outputs: super::one_output,
        build: transcode,
    },
    KernelDef {
        op: "UnicodeScript",
        outputs: super::one_output,
        build: |_| Ok(Box::new(script)),
    },
];

fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

#[derive(Clone, Copy, PartialEq)]
enum Encoding {
    Utf8,
    Utf16Be,
    Utf32Be,
    Latin1,
}

fn input_encoding(op: &str, name: &str) -> Result<Encoding> {
    let key: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_uppercase();
    match key.as_str() {
        "UTF8" => Ok(Encoding::Utf8),
        "UTF16BE" => Ok(Encoding::Utf16Be),
        "UTF32BE" => Ok(Encoding::Utf32Be),
        "ISO88591" | "LATIN1" => Ok(Encoding::Latin1),
        _ => Err(Error::Unimplemented(format!(
            "{op}: input encoding {name:?} is not supported by tfdata (UTF-8, UTF-16-BE, \
             UTF-32-BE, ISO-8859-1)"
        ))),
    }
}

fn output_encoding(attrs: &NodeAttrs) -> Result<Encoding> {
    match attrs.string("output_encoding")? {
        "UTF-8" => Ok(Encoding::Utf8),
        "UTF-16-BE" => Ok(Encoding::Utf16Be),
        "UTF-32-BE" => Ok(Encoding::Utf32Be),
        other => Err(attrs.error(format!("Invalid encoding \"{other}\""))),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Policy {
    Strict,
    Replace,
    Ignore,
}

#[derive(Clone, Copy)]
struct Errors {
    policy: Policy,
    subst: u32,
    controls: bool,
}

fn errors(attrs: &NodeAttrs) -> Result<Errors> {
    let policy = match attrs.string_or("errors", "replace")? {
        "replace" => Policy::Replace,
        "ignore" => Policy::Ignore,
        "strict" => Policy::Strict,
        _ => {
            return Err(
                attrs.error("errors policy must be one of 'strict', 'replace', or 'ignore'")
            );
        }
    };
    let subst = attrs.int_or("replacement_char", 0xFFFD)?;
    if !(0..=0x10FFFF).contains(&subst) {
        return Err(attrs.error("replacement_char out of unicode codepoint range"));
    }
    Ok(Errors {
        policy,
        subst: subst as u32,
        controls: attrs.bool_or("replace_control_characters", false)?,
    })
}

/// The length of a well-formed UTF-8 sequence starting at `s[0]`, or the
/// length of its maximal ill-formed subpart as `Err`.
fn utf8_step(s: &[u8]) -> std::result::Result<(u32, usize), usize> {
    let b0 = s[0];
    let (need, min_cont, max_cont, init) = match b0 {
        0x00..=0x7F => return Ok((u32::from(b0), 1)),
        0xC2..=0xDF => (1, 0x80, 0xBF, u32::from(b0 & 0x1F)),
        0xE0 => (2, 0xA0, 0xBF, 0),
        0xE1..=0xEC | 0xEE..=0xEF => (2, 0x80, 0xBF, u32::from(b0 & 0x0F)),
        0xED => (2, 0x80, 0x9F, 0x0D),
        0xF0 => (3, 0x90, 0xBF, 0),
        0xF1..=0xF3 => (3, 0x80, 0xBF, u32::from(b0 & 0x07)),
        0xF4 => (3, 0x80, 0x8F, 4),
        _ => return Err(1),
    };
    let mut cp = init;
    for i in 1..=need {
        let Some(&b) = s.get(i) else {
            return Err(i);
        };
        let (lo, hi) = if i == 1 {
            (min_cont, max_cont)
        } else {
            (0x80, 0xBF)
        };
        if !(lo..=hi).contains(&b) {
            return Err(i);
        }
        cp = (cp << 6) | u32::from(b & 0x3F);
    }
    Ok((cp, need + 1))
}

/// Decodes `s`: each item is a code point (or `None` for an ill-formed
/// sequence) and the bytes it took.
fn decode_units(enc: Encoding, s: &[u8]) -> Vec<(Option<u32>, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let rest = &s[i..];
        let (cp, n) = match enc {
            Encoding::Latin1 => (Some(u32::from(rest[0])), 1),
            Encoding::Utf8 => match utf8_step(rest) {
                Ok((cp, n)) => (Some(cp), n),
                Err(n) => (None, n),
            },
            Encoding::Utf16Be => {
                if rest.len() < 2 {
                    (None, rest.len())
                } else {
                    let u = u32::from(u16::from_be_bytes([rest[0], rest[1]]));
                    match u {
                        0xD800..=0xDBFF if rest.len() >= 4 => {
                            let v = u32::from(u16::from_be_bytes([rest[2], rest[3]]));
                            if (0xDC00..=0xDFFF).contains(&v) {
                                (Some(0x10000 + ((u - 0xD800) << 10) + (v - 0xDC00)), 4)
                            } else {
                                (None, 2)
                            }
                        }
                        // A lead surrogate and fewer than two bytes after it.
                        0xD800..=0xDBFF => (None, rest.len()),
                        0xDC00..=0xDFFF => (None, 2),
                        _ => (Some(u), 2),
                    }
                }
            }
            Encoding::Utf32Be => {
                if rest.len() < 4 {
                    (None, rest.len())
                } else {
                    let u = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
                    if u > 0x10FFFF || (0xD800..=0xDFFF).contains(&u) {
                        (None, 4)
                    } else {
                        (Some(u), 4)
                    }
                }
            }
        };
        out.push((cp, n));
        i += n;
    }
    out
}

/// Code points of `s` under the error policy, with their byte offsets.
fn decode_string(
    op: &str,
    enc: Encoding,
    e: Errors,
    s: &[u8],
    out: &mut Vec<(u32, i64)>,
) -> Result<()> {
    let mut offset = 0i64;
    for (cp, n) in decode_units(enc, s) {
        let at = offset;
        offset += n as i64;
        let value = match cp {
            None if e.policy == Policy::Strict => {
                return Err(invalid(op, "Invalid formatting on input string"));
            }
            None => None,
            Some(c) if e.controls && c <= 0x1F => None,
            Some(c) => Some(c),
        };
        match value {
            Some(c) => out.push((c, at)),
            None if e.policy == Policy::Ignore => {}
            None => out.push((e.subst, at)),
        }
    }
    Ok(())
}

fn decode(attrs: &NodeAttrs, offsets: bool) -> Result<Compute> {
    let op = if offsets {
        "UnicodeDecodeWithOffsets"
    } else {
        "UnicodeDecode"
    };
    let e = errors(attrs)?;
    let name = attrs.string("input_encoding")?;
    let enc = input_encoding(op, name)?;
    let splits_dtype = if attrs.has("Tsplits") {
        attrs.dtype("Tsplits")?
    } else {
        DType::Int64
    };
    Ok(Box::new(move |inputs| {
        expect_inputs(op, &inputs, 1)?;
        let values = strings(op, &inputs[0], "input")?;
        let mut splits = vec![0i64];
        let mut chars = Vec::new();
        for s in values {
            decode_string(op, enc, e, s, &mut chars)?;
            check_size(op, DType::Int32, chars.len() as u64)?;
            splits.push(chars.len() as i64);
        }
        let cps: Vec<i32> = chars.iter().map(|&(c, _)| c as i32).collect();
        let starts: Vec<i64> = chars.iter().map(|&(_, o)| o).collect();
        let ints = |v: &[i64]| -> Tensor {
            if splits_dtype == DType::Int32 {
                Tensor::vector(&v.iter().map(|&x| x as i32).collect::<Vec<_>>())
            } else {
                Tensor::vector(v)
            }
        };
        let mut out = vec![ints(&splits), Tensor::vector(&cps)];
        if offsets {
            out.push(ints(&starts));
        }
        Ok(out)
    }))
}

/// Appends `cp` (a valid scalar value) in `enc`.
fn push_encoded(enc: Encoding, cp: u32, out: &mut Vec<u8>) {
    match enc {
        Encoding::Utf8 | Encoding::Latin1 => {
            let c = char::from_u32(cp).unwrap_or('\u{FFFD}');
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
        Encoding::Utf16Be => {
            let c = char::from_u32(cp).unwrap_or('\u{FFFD}');
            let mut buf = [0u16; 2];
            for u in c.encode_utf16(&mut buf) {
                out.extend_from_slice(&u.to_be_bytes());
            }
        }
        Encoding::Utf32Be => out.extend_from_slice(&cp.to_be_bytes()),
    }
}

fn valid_scalar(cp: i64) -> bool {
    (0..=0x10FFFF).contains(&cp) && !(0xD800..=0xDFFF).contains(&cp)
}

fn encode(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "UnicodeEncode";
    let enc = output_encoding(attrs)?;
    let e = errors(attrs)?;
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 2)?;
        let (values_t, splits_t) = (&inputs[0], &inputs[1]);
        let cps = super::strings::int_values(OP, values_t, "input_values")?;
        let splits = super::strings::int_values(OP, splits_t, "input_splits")?;
        if splits.is_empty() {
            return Err(invalid(
                OP,
                format!(
                    "Input_splits should contain elements, but given input_values has {} elements",
                    splits.len()
                ),
            ));
        }
        if splits[0] != 0 {
            return Err(invalid(OP, "First value in input_splits must be zero."));
        }
        let n = cps.len() as i64;
        if splits[splits.len() - 1] != n {
            return Err(invalid(
                OP,
                "Last value in input_splits must be equal to length of input_tensor.",
            ));
        }
        if splits.windows(2).any(|w| w[1] < w[0]) {
            return Err(invalid(OP, "input_splits must be non-decreasing"));
        }
        let mut out = Vec::with_capacity(splits.len() - 1);
        for w in splits.windows(2) {
            let mut s = Vec::new();
            for &cp in &cps[w[0] as usize..w[1] as usize] {
                let cp = if valid_scalar(cp) {
                    cp as u32
                } else {
                    match e.policy {
                        Policy::Strict => {
                            return Err(invalid(
                                OP,
                                "Code point is out of range for Unicode, or is a surrogate.",
                            ));
                        }
                        Policy::Ignore => continue,
                        Policy::Replace => e.subst,
                    }
                };
                push_encoded(enc, cp, &mut s);
            }
            out.push(Bytes::from(s));
        }
        let len = out.len() as i64;
        Ok(vec![Tensor::strings(out, vec![len])?])
    }))
}

fn transcode(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "UnicodeTranscode";
    let e = errors(attrs)?;
    let out_enc = output_encoding(attrs)?;
    let in_enc = input_encoding(OP, attrs.string("input_encoding")?)?;
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 1)?;
        let values = strings(OP, &inputs[0], "input")?;
        let mut out = Vec::with_capacity(values.len());
        let mut failed = false;
        let strict = Errors {
            policy: Policy::Replace,
            ..e
        };
        for s in values {
            let mut chars = Vec::new();
            if e.policy == Policy::Strict {
                // TensorFlow transcodes every string, then fails.
                failed |= decode_units(in_enc, s).iter().any(|(c, _)| match c {
                    None => true,
                    Some(c) => e.controls && *c <= 0x1F,
                });
                decode_string(OP, in_enc, strict, s, &mut chars)?;
            } else {
                decode_string(OP, in_enc, e, s, &mut chars)?;
            }
            let mut b = Vec::with_capacity(s.len());
            for (c, _) in chars {
                push_encoded(out_enc, c, &mut b);
            }
            out.push(Bytes::from(b));
        }
        if failed {
            return Err(invalid(OP, "Invalid formatting on input string"));
        }
        Ok(vec![Tensor::strings(out, inputs[0].shape().to_vec())?])
    }))
}

fn script(inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    const OP: &str = "UnicodeScript";
    expect_inputs(OP, &inputs, 1)?;
    let x = &inputs[0];
    if x.dtype() != DType::Int32 {
        return Err(invalid(
            OP,
            format!("input must be int32, got {}", x.dtype()),
        ));
    }
    let map = icu_properties::CodePointMapData::<icu_properties::props::Script>::new();
    let out: Vec<i32> = x
        .to_vec::<i32>()?
        .into_iter()
        .map(|c| match u32::try_from(c) {
            // ICU4X keeps ICU4C's numbers; the accessor is deprecated only
            // for want of users.
            #[allow(deprecated)]
            Ok(c) if c <= 0x10FFFF => i32::from(map.get32(c).to_icu4c_value()),
            _ => -1,
        })
        .collect();
    Ok(vec![Tensor::from_slice(&out, x.shape().to_vec())?])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maximal_subparts() {
        let n = |s: &[u8]| -> Vec<(Option<u32>, usize)> { decode_units(Encoding::Utf8, s) };
        assert_eq!(n(b"\xf0\x9f\x98"), [(None, 3)]);
        assert_eq!(n(b"\xe2\x82x"), [(None, 2), (Some(120), 1)]);
        assert_eq!(n(b"\xed\xa0\x80").len(), 3);
        assert_eq!(n("é😀".as_bytes()), [(Some(0xE9), 2), (Some(0x1F600), 4)]);
    }
}
