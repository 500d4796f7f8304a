//! Regex kernels on RE2 semantics (see the parent module for the syntax
//! differences).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use regex::bytes::{Regex, RegexBuilder};
use tfdata_core::{Result, Tensor};

use super::{check_bytes, invalid, map_strings, numeric, scalar_string, strings};
use crate::attrs::NodeAttrs;
use crate::kernels::{Compute, expect_inputs};

/// RE2 syntax rewritten for the `regex` crate (see the module docs).
fn translate_re2(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        match e {
            'd' => out.push_str("[0-9]"),
            'D' => out.push_str("[^0-9]"),
            'w' => out.push_str("[0-9A-Za-z_]"),
            'W' => out.push_str("[^0-9A-Za-z_]"),
            's' => out.push_str(r"[\t\n\f\r ]"),
            'S' => out.push_str(r"[^\t\n\f\r ]"),
            'b' => out.push_str(r"(?-u:\b)"),
            'B' => out.push_str(r"(?-u:\B)"),
            'C' => out.push_str("(?s-u:.)"),
            'Q' => {
                let mut literal = String::new();
                while let Some(c) = chars.next() {
                    if c == '\\' && chars.peek() == Some(&'E') {
                        chars.next();
                        break;
                    }
                    literal.push(c);
                }
                out.push_str(&regex::escape(&literal));
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    out
}

/// RE2's default `max_mem`, which bounds its compiled programs.
const REGEX_SIZE_LIMIT: usize = 8 << 20;

fn compile(op: &str, pattern: &[u8], full: bool) -> Result<Regex> {
    let text = std::str::from_utf8(pattern)
        .map_err(|_| invalid(op, "Invalid pattern: the pattern is not valid UTF-8"))?;
    let mut translated = translate_re2(text);
    if full {
        translated = format!(r"\A(?:{translated})\z");
    }
    RegexBuilder::new(&translated)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| {
            let detail = re2_error(text).unwrap_or_else(|| e.to_string().replace('\n', " "));
            invalid(op, format!("Invalid pattern: {text}, error: {detail}"))
        })
}

/// RE2's words for the syntax errors users make (TensorFlow's message
/// carries them: "missing ]: [cd"), read off `regex-syntax`'s parse of the
/// pattern; `None` for the rest, which keep the `regex` crate's words.
fn re2_error(text: &str) -> Option<String> {
    use regex_syntax::ast::ErrorKind as K;
    let err = regex_syntax::ast::parse::Parser::new().parse(text).err()?;
    let span = err.span();
    let at = |a: usize, b: usize| text.get(a..b).unwrap_or(text).to_string();
    let (code, arg) = match err.kind() {
        K::ClassUnclosed => ("missing ]", at(span.start.offset, text.len())),
        K::GroupUnclosed => ("missing )", text.to_string()),
        K::GroupUnopened => ("unexpected )", text.to_string()),
        K::RepetitionMissing => (
            "no argument for repetition operator",
            at(span.start.offset, span.end.offset),
        ),
        K::RepetitionCountInvalid => (
            "invalid repetition size",
            at(span.start.offset, span.end.offset),
        ),
        K::ClassRangeInvalid => (
            "invalid character class range",
            at(span.start.offset, span.end.offset),
        ),
        K::EscapeUnrecognized => (
            "invalid escape sequence",
            at(span.start.offset, span.end.offset),
        ),
        K::EscapeUnexpectedEof => return Some("trailing \\".into()),
        _ => return None,
    };
    Some(format!("{code}: {arg}"))
}

/// The last dynamic pattern compiled, as TensorFlow's regex ops cache it:
/// a pipeline almost always passes the same pattern for every element.
#[derive(Default)]
struct RegexCache(Mutex<Option<(Bytes, Arc<Regex>)>>);

impl RegexCache {
    fn get(&self, op: &str, pattern: &Bytes, full: bool) -> Result<Arc<Regex>> {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((p, re)) = slot.as_ref()
            && p == pattern
        {
            return Ok(re.clone());
        }
        let re = Arc::new(compile(op, pattern, full)?);
        *slot = Some((pattern.clone(), re.clone()));
        Ok(re)
    }
}

/// An RE2 rewrite string: literals and `\0`..`\9` group references.
struct Rewrite {
    parts: Vec<RewritePart>,
    max_group: usize,
}

enum RewritePart {
    Literal(Vec<u8>),
    Group(usize),
}

impl Rewrite {
    /// RE2's `Rewrite` stops at a backslash not followed by a digit or a
    /// backslash (it logs an error and keeps what it wrote so far).
    fn parse(rewrite: &[u8]) -> Rewrite {
        let (mut parts, mut literal, mut max_group) = (Vec::new(), Vec::new(), 0);
        let mut i = 0;
        while i < rewrite.len() {
            let c = rewrite[i];
            i += 1;
            if c != b'\\' {
                literal.push(c);
                continue;
            }
            match rewrite.get(i) {
                Some(&d) if d.is_ascii_digit() => {
                    i += 1;
                    parts.push(RewritePart::Literal(std::mem::take(&mut literal)));
                    let g = usize::from(d - b'0');
                    max_group = max_group.max(g);
                    parts.push(RewritePart::Group(g));
                }
                Some(b'\\') => {
                    i += 1;
                    literal.push(b'\\');
                }
                _ => break,
            }
        }
        parts.push(RewritePart::Literal(literal));
        Rewrite { parts, max_group }
    }

    fn append(&self, out: &mut Vec<u8>, caps: &regex::bytes::Captures) {
        for part in &self.parts {
            match part {
                RewritePart::Literal(l) => out.extend_from_slice(l),
                RewritePart::Group(g) => {
                    if let Some(m) = caps.get(*g) {
                        out.extend_from_slice(m.as_bytes());
                    }
                }
            }
        }
    }
}

/// RE2's `GlobalReplace` (or `Replace` when not `global`), including how it
/// steps over an empty match right after the previous match.
fn replace(re: &Regex, rewrite: &Rewrite, global: bool, s: &Bytes) -> Result<Bytes> {
    // A rewrite naming a group the pattern lacks makes RE2 replace nothing.
    if rewrite.max_group >= re.captures_len() {
        return Ok(s.clone());
    }
    let mut out = Vec::new();
    let mut p = 0;
    let mut last_end: Option<usize> = None;
    let mut count = 0;
    while p <= s.len() {
        if !global && count == 1 {
            break;
        }
        let Some(caps) = re.captures_at(s, p) else {
            break;
        };
        let m = caps.get(0).expect("group 0 is the match");
        out.extend_from_slice(&s[p..m.start()]);
        if m.is_empty() && Some(m.start()) == last_end {
            let n = utf8_len(&s[p..]);
            out.extend_from_slice(&s[p..(p + n).min(s.len())]);
            p += n;
            continue;
        }
        rewrite.append(&mut out, &caps);
        check_bytes("RegexReplace", out.len())?;
        p = m.end();
        last_end = Some(p);
        count += 1;
    }
    if count == 0 {
        return Ok(s.clone());
    }
    if p < s.len() {
        out.extend_from_slice(&s[p..]);
    }
    Ok(Bytes::from(out))
}

/// Bytes of the valid UTF-8 character at the start of `s`, else 1.
fn utf8_len(s: &[u8]) -> usize {
    let n = match s.first() {
        Some(b) if *b < 0x80 => 1,
        Some(b) if b & 0xe0 == 0xc0 => 2,
        Some(b) if b & 0xf0 == 0xe0 => 3,
        Some(b) if b & 0xf8 == 0xf0 => 4,
        _ => 1,
    };
    if n > 1 && s.len() >= n && std::str::from_utf8(&s[..n]).is_ok() {
        n
    } else {
        1
    }
}

pub(super) fn static_regex_replace(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "StaticRegexReplace";
    let re = compile(OP, attrs.bytes("pattern")?, false)?;
    let rewrite = Rewrite::parse(attrs.bytes("rewrite")?);
    let global = attrs.bool_or("replace_global", true)?;
    Ok(map_strings(OP, move |s| replace(&re, &rewrite, global, s)))
}

pub(super) fn regex_replace(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "RegexReplace";
    let global = attrs.bool_or("replace_global", true)?;
    let cache = RegexCache::default();
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 3)?;
        let values = strings(OP, &inputs[0], "input")?;
        let pattern = scalar_string(OP, &inputs[1], "Pattern")?;
        let rewrite = Rewrite::parse(scalar_string(OP, &inputs[2], "Rewrite")?);
        let re = cache.get(OP, pattern, false)?;
        let out = values
            .iter()
            .map(|s| replace(&re, &rewrite, global, s))
            .collect::<Result<Vec<_>>>()?;
        Ok(vec![Tensor::strings(out, inputs[0].shape().to_vec())?])
    }))
}

fn full_match_tensor(re: &Regex, input: &Tensor, op: &str) -> Result<Tensor> {
    let values = strings(op, input, "input")?;
    let matched: Vec<bool> = values.iter().map(|s| re.is_match(s)).collect();
    numeric(&matched, input.shape().to_vec())
}

pub(super) fn static_full_match(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "StaticRegexFullMatch";
    let re = compile(OP, attrs.bytes("pattern")?, true)?;
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 1)?;
        Ok(vec![full_match_tensor(&re, &inputs[0], OP)?])
    }))
}

pub(super) fn full_match(_: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "RegexFullMatch";
    let cache = RegexCache::default();
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 2)?;
        let re = cache.get(OP, scalar_string(OP, &inputs[1], "Pattern")?, true)?;
        Ok(vec![full_match_tensor(&re, &inputs[0], OP)?])
    }))
}
