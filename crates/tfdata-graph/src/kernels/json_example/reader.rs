//! A lenient JSON reader walking `tf.train.Example`'s schema and writing
//! its binary form as it goes (see the parent module for the leniencies).
//! The schema's depth is fixed and an unknown field is an error, so no
//! value is ever skipped and nesting is bounded by the schema.

/// A message's wording in TensorFlow's errors.
const EXAMPLE: &str = "type.googleapis.com/tensorflow.Example";

/// Where a value sits and what it is, for an error.
struct At<'p> {
    path: &'p str,
    what: &'p str,
}

struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
    /// The unquoted number tokens read so far (start, end): TensorFlow's
    /// reader does not advance its reported position over them, so the
    /// positions in its messages leave them out.
    numbers: Vec<(usize, usize)>,
}

type R<T> = std::result::Result<T, String>;

const EOF: &str = "unexpected EOF";

impl<'a> Lexer<'a> {
    fn ws(&mut self) {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> R<u8> {
        self.ws();
        self.s.get(self.pos).copied().ok_or_else(|| EOF.to_string())
    }

    /// TensorFlow's "invalid JSON in ... near L:C (offset O): reason",
    /// its position without the number tokens before it.
    fn fail(&self, at: Option<&At<'_>>, pos: usize, reason: impl std::fmt::Display) -> String {
        let before = &self.s[..pos.min(self.s.len())];
        let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let numbers_since = |from: usize| -> usize {
            self.numbers
                .iter()
                .filter(|&&(a, b)| a >= from && b <= pos)
                .map(|&(a, b)| b - a)
                .sum()
        };
        let col = 1 + (before.len() - line_start) - numbers_since(line_start);
        let pos = before.len() - numbers_since(0);
        let at = match at {
            Some(a) => format!(" @ {}: {},", a.path, a.what),
            None => ",".to_string(),
        };
        format!("invalid JSON in {EXAMPLE}{at} near {line}:{col} (offset {pos}): {reason}")
    }

    fn unexpected(&self, at: Option<&At<'_>>, want: &str) -> String {
        let c = self.s[self.pos] as char;
        self.fail(
            at,
            self.pos,
            format!("unexpected character: '{c}'; expected {want}"),
        )
    }

    fn expect(&mut self, c: u8, at: Option<&At<'_>>) -> R<()> {
        if self.peek()? != c {
            return Err(self.unexpected(at, &format!("'{}'", c as char)));
        }
        self.pos += 1;
        Ok(())
    }

    /// A quoted string (double or single quotes), unescaped to UTF-8.
    fn string(&mut self, at: Option<&At<'_>>) -> R<Vec<u8>> {
        let quote = self.peek()?;
        if quote != b'"' && quote != b'\'' {
            return Err(self.unexpected(at, "string"));
        }
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let c = *self.s.get(self.pos).ok_or_else(|| EOF.to_string())?;
            self.pos += 1;
            match c {
                _ if c == quote => return Ok(out),
                b'\\' => {
                    let e = *self.s.get(self.pos).ok_or_else(|| EOF.to_string())?;
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' | b'\'' => out.push(e),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let mut cp = self.hex4(at)?;
                            if (0xd800..0xdc00).contains(&cp)
                                && self.s.get(self.pos..self.pos + 2) == Some(b"\\u")
                            {
                                self.pos += 2;
                                let lo = self.hex4(at)?;
                                if (0xdc00..0xe000).contains(&lo) {
                                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                                }
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return Err(self.fail(at, self.pos - 2, "invalid escape")),
                    }
                }
                _ => out.push(c),
            }
        }
    }

    fn hex4(&mut self, at: Option<&At<'_>>) -> R<u32> {
        let digits = self
            .s
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| EOF.to_string())?;
        let text =
            std::str::from_utf8(digits).map_err(|_| self.fail(at, self.pos, "invalid escape"))?;
        let v =
            u32::from_str_radix(text, 16).map_err(|_| self.fail(at, self.pos, "invalid escape"))?;
        self.pos += 4;
        Ok(v)
    }

    /// A number's text.
    fn number(&mut self) -> &'a str {
        let start = self.pos;
        while self.pos < self.s.len()
            && matches!(
                self.s[self.pos],
                b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
            )
        {
            self.pos += 1;
        }
        self.numbers.push((start, self.pos));
        std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("")
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        if self.s[self.pos..].starts_with(word) {
            self.pos += word.len();
            return true;
        }
        false
    }

    /// The members of an object: `member(lexer, key, key_start)` for
    /// each, the lexer at the value; a trailing comma is accepted.
    fn object(
        &mut self,
        at: Option<&At<'_>>,
        mut member: impl FnMut(&mut Lexer<'a>, Vec<u8>, usize) -> R<()>,
    ) -> R<()> {
        self.expect(b'{', at)?;
        loop {
            if self.peek()? == b'}' {
                self.pos += 1;
                return Ok(());
            }
            let key_start = self.pos;
            let key = self.string(at)?;
            self.expect(b':', at)?;
            self.ws();
            member(self, key, key_start)?;
            match self.peek()? {
                b',' => self.pos += 1,
                b'}' => {}
                _ => return Err(self.unexpected(at, "',' or '}'")),
            }
        }
    }

    /// `null` (consumed)?
    fn null(&mut self) -> R<bool> {
        Ok(self.peek()? == b'n' && self.literal(b"null"))
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited field.
fn field(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
    out.push(tag);
    varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

/// One JSON `tf.train.Example` to its binary form.
pub(super) fn example(text: &[u8]) -> R<Vec<u8>> {
    let mut lx = Lexer {
        s: text,
        pos: 0,
        numbers: Vec::new(),
    };
    let mut out = Vec::new();
    if lx.peek()? != b'{' {
        return Err(lx.unexpected(None, "'{'"));
    }
    lx.object(None, |lx, key, _| {
        if key != b"features" {
            return Err(lx.fail(
                None,
                lx.pos,
                format!("no such field: '{}'", String::from_utf8_lossy(&key)),
            ));
        }
        if lx.null()? {
            return Ok(());
        }
        let body = features(lx)?;
        field(&mut out, 0x0a, &body);
        Ok(())
    })?;
    lx.ws();
    if lx.pos < text.len() {
        return Err("extraneous characters after end of JSON object".into());
    }
    Ok(out)
}

fn features(lx: &mut Lexer<'_>) -> R<Vec<u8>> {
    let at = At {
        path: "features",
        what: "message tensorflow.Features",
    };
    let mut out = Vec::new();
    lx.object(Some(&at), |lx, key, _| {
        if key != b"feature" {
            return Err(lx.fail(
                Some(&at),
                lx.pos,
                format!("no such field: '{}'", String::from_utf8_lossy(&key)),
            ));
        }
        if lx.null()? {
            return Ok(());
        }
        let mut seen: Vec<Vec<u8>> = Vec::new();
        lx.object(Some(&at), |lx, name, key_start| {
            let path = format!("features.feature[{}]", seen.len());
            let entry_at = At {
                path: &path,
                what: "message tensorflow.Features.FeatureEntry",
            };
            if seen.contains(&name) {
                return Err(lx.fail(
                    Some(&entry_at),
                    key_start,
                    format!(
                        "got unexpectedly-repeated repeated map key: '{}'",
                        String::from_utf8_lossy(&name)
                    ),
                ));
            }
            let mut entry = Vec::new();
            field(&mut entry, 0x0a, &name);
            if !lx.null()? {
                let body = feature(lx, &entry_at)?;
                field(&mut entry, 0x12, &body);
            }
            field(&mut out, 0x0a, &entry);
            seen.push(name);
            Ok(())
        })
    })?;
    Ok(out)
}

#[derive(Clone, Copy, PartialEq)]
enum List {
    Bytes,
    Float,
    Int64,
}

fn feature(lx: &mut Lexer<'_>, entry: &At<'_>) -> R<Vec<u8>> {
    let mut out = Vec::new();
    let mut set = false;
    lx.object(Some(entry), |lx, key, _| {
        let (kind, tag, message) = match &key[..] {
            b"bytesList" | b"bytes_list" => (List::Bytes, 0x0a, "tensorflow.BytesList"),
            b"floatList" | b"float_list" => (List::Float, 0x12, "tensorflow.FloatList"),
            b"int64List" | b"int64_list" => (List::Int64, 0x1a, "tensorflow.Int64List"),
            _ => {
                return Err(lx.fail(
                    Some(entry),
                    lx.pos,
                    format!("no such field: '{}'", String::from_utf8_lossy(&key)),
                ));
            }
        };
        let path = format!("{}.{}", entry.path, String::from_utf8_lossy(&key));
        let what = format!("message {message}");
        let at = At {
            path: &path,
            what: &what,
        };
        if set {
            return Err(lx.fail(
                Some(&at),
                lx.pos,
                format!(
                    "'{}' has already been set (either directly or as part of a oneof)",
                    String::from_utf8_lossy(&key)
                ),
            ));
        }
        if lx.null()? {
            return Ok(());
        }
        set = true;
        let body = list(lx, kind, &at)?;
        field(&mut out, tag, &body);
        Ok(())
    })?;
    Ok(out)
}

fn list(lx: &mut Lexer<'_>, kind: List, at: &At<'_>) -> R<Vec<u8>> {
    let mut out = Vec::new();
    lx.object(Some(at), |lx, key, _| {
        if key != b"value" {
            return Err(lx.fail(
                Some(at),
                lx.pos,
                format!("no such field: '{}'", String::from_utf8_lossy(&key)),
            ));
        }
        if lx.null()? {
            return Ok(());
        }
        if lx.peek()? != b'[' {
            let path = format!("{}.value", at.path);
            return element(lx, kind, &path, &mut out);
        }
        lx.pos += 1;
        let mut i = 0;
        loop {
            if lx.peek()? == b']' {
                lx.pos += 1;
                return Ok(());
            }
            let path = format!("{}.value[{i}]", at.path);
            element(lx, kind, &path, &mut out)?;
            i += 1;
            match lx.peek()? {
                b',' => lx.pos += 1,
                b']' => {}
                _ => return Err(lx.unexpected(Some(at), "',' or ']'")),
            }
        }
    })?;
    Ok(out)
}

/// One value of a list, written unpacked (`null` is the type's zero).
fn element(lx: &mut Lexer<'_>, kind: List, path: &str, out: &mut Vec<u8>) -> R<()> {
    let what = match kind {
        List::Bytes => "bytes",
        List::Float => "float",
        List::Int64 => "int64",
    };
    let at = At { path, what };
    let start = {
        lx.peek()?;
        lx.pos
    };
    if lx.null()? {
        match kind {
            List::Bytes => field(out, 0x0a, b""),
            List::Float => {
                out.push(0x0d);
                out.extend_from_slice(&0f32.to_le_bytes());
            }
            List::Int64 => {
                out.push(0x08);
                varint(out, 0);
            }
        }
        return Ok(());
    }
    let c = lx.peek()?;
    let token = if c == b'"' || c == b'\'' {
        Token::Str(lx.string(Some(&at))?)
    } else if c == b'-' || c.is_ascii_digit() {
        Token::Num(lx.number().to_string())
    } else {
        Token::Other
    };
    let fail = |reason: &str| lx.fail(Some(&at), start, reason);
    match kind {
        List::Bytes => {
            let Token::Str(s) = token else {
                return Err(fail("expected string"));
            };
            let bytes = base64(&s).ok_or_else(|| fail("corrupt base64"))?;
            field(out, 0x0a, &bytes);
        }
        List::Float => {
            let v = match token {
                Token::Num(t) => number_f32(&t).ok_or_else(|| fail("float out of range"))?,
                Token::Str(s) => {
                    let t = String::from_utf8_lossy(&s).into_owned();
                    match t.to_ascii_lowercase().as_str() {
                        "nan" => f32::NAN,
                        "infinity" => f32::INFINITY,
                        "-infinity" => f32::NEG_INFINITY,
                        _ => number_f32(&t).ok_or_else(|| fail("float out of range"))?,
                    }
                }
                Token::Other => return Err(fail("expected number or string")),
            };
            out.push(0x0d);
            out.extend_from_slice(&v.to_le_bytes());
        }
        List::Int64 => {
            let text = match token {
                Token::Num(t) => t,
                Token::Str(s) => String::from_utf8_lossy(&s).into_owned(),
                Token::Other => return Err(fail("expected number or string")),
            };
            let v = number_i64(&text).map_err(fail)?;
            out.push(0x08);
            varint(out, v as u64);
        }
    }
    Ok(())
}

enum Token {
    Str(Vec<u8>),
    Num(String),
    Other,
}

/// A float's text as an `f32` (through `f64`, as protobuf reads it);
/// `None` when it is out of `f32`'s range or no number. TensorFlow runs
/// kernels with denormals flushed to zero, so a value below `f32`'s
/// smallest normal becomes a zero of its sign.
fn number_f32(text: &str) -> Option<f32> {
    let x: f64 = text.parse().ok()?;
    if x.abs() < f64::from(f32::MIN_POSITIVE) {
        return Some(if x.is_sign_negative() { -0.0 } else { 0.0 });
    }
    let v = x as f32;
    (v.is_finite() || !x.is_finite()).then_some(v)
}

/// An integer's text: decimal, `0x` hexadecimal, or a float text with no
/// fraction within range.
fn number_i64(text: &str) -> std::result::Result<i64, &'static str> {
    const RANGE: &str = "JSON number out of range for int";
    if let Ok(v) = text.parse::<i64>() {
        return Ok(v);
    }
    if !text.contains(['.', 'e', 'E'])
        && text
            .trim_start_matches('-')
            .bytes()
            .all(|b| b.is_ascii_digit())
        && !text.is_empty()
    {
        return Err(RANGE);
    }
    if let Some(hex) = text.strip_prefix("0x") {
        return i64::from_str_radix(hex, 16).map_err(|_| RANGE);
    }
    let x: f64 = text.parse().map_err(|_| "invalid number")?;
    if x.fract() != 0.0 {
        return Err("expected integer, but JSON number had fractional part");
    }
    if !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&x) {
        return Err(RANGE);
    }
    Ok(x as i64)
}

/// Base64 in either alphabet, padding optional; `None` if corrupt.
fn base64(s: &[u8]) -> Option<Vec<u8>> {
    let body = match s.iter().position(|&c| c == b'=') {
        Some(p) => {
            // Padding: only `=` after it, at most two, to a multiple of 4.
            if s[p..].iter().any(|&c| c != b'=') || s.len() - p > 2 || !s.len().is_multiple_of(4) {
                return None;
            }
            &s[..p]
        }
        None => s,
    };
    if body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for &c in body {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}
