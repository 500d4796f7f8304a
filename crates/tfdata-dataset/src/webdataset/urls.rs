//! Shard URLs as webdataset writes them: `::`-separated lists, then bash
//! brace expansion exactly as the `braceexpand` package (0.1.7, what
//! webdataset 1.0 calls) does it, then glob wildcards.
//!
//! [`braceexpand`] is a port of `braceexpand.braceexpand(pattern)`:
//!
//! * integer ranges `{0..99}`, `{10..0}`, `{0..99..3}` (the step's sign is
//!   ignored, `0` is `1`), negative numbers; a number written with a
//!   leading zero (`{000000..000099}`, `{-05..5}`) pads every number to the
//!   width of the longer bound, sign included;
//! * letter ranges `{a..e}`, `{Z..A}`, `{a..z..2}` over `A..Za..z`;
//! * alternation `{a,b,}` (an empty alternative is the empty string),
//!   nested (up to [`MAX_BRACE_DEPTH`] deep);
//! * a braced text that is neither (`{a}`, `{}`) is kept with its braces,
//!   its inside still expanded;
//! * `\` escapes the next character (`\{`, `\,`, `\\`) and is removed from
//!   the results;
//! * unbalanced braces are an error, with braceexpand's quirk that a `}`
//!   before any `{` may be balanced by a later `{` (`a}b{c` is literal).
//!
//! Numbers are ASCII digits (Python's `\d` also takes other scripts'
//! digits) and must fit in 64 bits. The expansion is counted before it is
//! made: more than [`MAX_URLS`] strings or [`MAX_URL_BYTES`] bytes is an
//! error, so `{0..999999999999}` fails at once instead of filling memory.
//! webdataset's substitution of `WDS_` environment variables is not done.

use tfdata_core::{Error, Result};

/// Most URLs one op may expand to (about a million shards: LAION-5B has a
/// quarter of that).
pub const MAX_URLS: usize = 1 << 20;
/// Most bytes the expanded URLs of one op may take.
pub const MAX_URL_BYTES: usize = 256 << 20;
/// Deepest brace nesting a pattern may have.
pub const MAX_BRACE_DEPTH: usize = 32;

/// The URLs `urls` stand for, in order: each entry split at `::`, each piece
/// brace-expanded, and each result containing a glob wildcard (`*`, `?`,
/// `[`) replaced by the files it matches (sorted; none is an error).
pub fn expand_urls(op: &str, urls: &[String]) -> Result<Vec<String>> {
    let patterns = expand_patterns(op, urls)?;
    let mut out = Vec::with_capacity(patterns.len());
    for url in patterns {
        if is_glob(&url) {
            let matched = crate::io::glob(&url)?;
            if matched.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "{op}: no files match {url}"
                )));
            }
            out.extend(matched);
        } else {
            out.push(url);
        }
        if out.len() > MAX_URLS {
            return Err(Error::InvalidArgument(format!(
                "{op}: the urls name more than {MAX_URLS} shards"
            )));
        }
    }
    Ok(out)
}

/// The `::` splitting and brace expansion of [`expand_urls`], without the
/// globbing (no I/O): what validating the op checks.
pub fn expand_patterns(op: &str, urls: &[String]) -> Result<Vec<String>> {
    if urls.is_empty() {
        return Err(Error::InvalidArgument(format!("{op}: no urls given")));
    }
    let mut out = Vec::new();
    let mut bytes = 0usize;
    for (i, entry) in urls.iter().enumerate() {
        for piece in entry.split("::") {
            let expanded = braceexpand_limited(
                piece,
                MAX_URLS - out.len(),
                MAX_URL_BYTES.saturating_sub(bytes),
            )
            .map_err(|reason| {
                Error::InvalidArgument(format!("{op}: urls[{i}] {entry:?}: {reason}"))
            })?;
            for url in expanded {
                if url.is_empty() {
                    return Err(Error::InvalidArgument(format!(
                        "{op}: urls[{i}] {entry:?} names an empty URL"
                    )));
                }
                bytes += url.len();
                out.push(url);
            }
        }
    }
    Ok(out)
}

/// Whether a URL (after brace expansion) is a glob pattern.
pub fn is_glob(url: &str) -> bool {
    url.contains(['*', '?', '['])
}

/// `braceexpand.braceexpand(pattern)` (escapes on), limited to
/// [`MAX_URLS`] results and [`MAX_URL_BYTES`] bytes. The error is a
/// sentence saying what is wrong with the pattern.
pub fn braceexpand(pattern: &str) -> std::result::Result<Vec<String>, String> {
    braceexpand_limited(pattern, MAX_URLS, MAX_URL_BYTES)
}

/// [`braceexpand`] with other limits.
pub fn braceexpand_limited(
    pattern: &str,
    max_count: usize,
    max_bytes: usize,
) -> std::result::Result<Vec<String>, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let depth = brace_depth(&chars);
    if depth > MAX_BRACE_DEPTH {
        return Err(format!(
            "braces nested {depth} deep (at most {MAX_BRACE_DEPTH})"
        ));
    }
    let parsed = parse_pattern(&chars)?;
    let count = parsed.count();
    if count > max_count as u128 {
        return Err(format!("expands to {count} strings (at most {max_count})"));
    }
    let bytes = count.saturating_mul(parsed.max_len());
    if bytes > max_bytes as u128 {
        return Err(format!(
            "expands to up to {bytes} bytes (at most {max_bytes})"
        ));
    }
    let mut out = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    parsed.expand_into(String::new(), &mut |s| out.push(unescape(&s)));
    Ok(out)
}

/// The deepest brace nesting, escapes skipped (a `}` too many counts as
/// nothing here: parsing rejects or keeps it).
fn brace_depth(chars: &[char]) -> usize {
    let (mut depth, mut max, mut pos) = (0usize, 0usize, 0usize);
    while pos < chars.len() {
        match chars[pos] {
            '\\' => {
                pos += 2;
                continue;
            }
            '{' => {
                depth += 1;
                max = max.max(depth);
            }
            '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        pos += 1;
    }
    max
}

/// A parsed pattern: the product of its items (`itertools.product`).
#[derive(Debug)]
struct Pattern(Vec<Item>);

#[derive(Debug)]
enum Item {
    /// Text as written (escapes still in; removed from whole results).
    Literal(String),
    /// `{a..b..s}`: `count` numbers from `start` by `step` (negative going
    /// down), zero-padded to `width`.
    Ints {
        start: i128,
        step: i128,
        count: u128,
        width: usize,
    },
    /// `{a..e}`: letters.
    Chars(Vec<char>),
    /// `{x,y,...}`: the alternatives' expansions one after the other.
    Choice(Vec<Pattern>),
    /// The expansions of a pattern (what a braced non-expression holds).
    Nested(Pattern),
}

impl Pattern {
    fn count(&self) -> u128 {
        self.0
            .iter()
            .fold(1u128, |n, item| n.saturating_mul(item.count()))
    }

    /// The longest result's length, in bytes (at most).
    fn max_len(&self) -> u128 {
        self.0
            .iter()
            .fold(0u128, |n, item| n.saturating_add(item.max_len()))
    }

    fn expand_into(&self, prefix: String, out: &mut dyn FnMut(String)) {
        expand_items(&self.0, prefix, out);
    }
}

fn expand_items(items: &[Item], prefix: String, out: &mut dyn FnMut(String)) {
    let Some((first, rest)) = items.split_first() else {
        out(prefix);
        return;
    };
    first.each(&prefix, &mut |s| expand_items(rest, s, out));
}

impl Item {
    fn count(&self) -> u128 {
        match self {
            Item::Literal(_) => 1,
            Item::Ints { count, .. } => *count,
            Item::Chars(c) => c.len() as u128,
            Item::Choice(alternatives) => alternatives
                .iter()
                .fold(0u128, |n, p| n.saturating_add(p.count())),
            Item::Nested(p) => p.count(),
        }
    }

    fn max_len(&self) -> u128 {
        match self {
            Item::Literal(s) => s.len() as u128,
            // At most 19 digits and a sign for an i64.
            Item::Ints { width, .. } => (*width).max(20) as u128,
            Item::Chars(_) => 1,
            Item::Choice(alternatives) => {
                alternatives.iter().map(Pattern::max_len).max().unwrap_or(0)
            }
            Item::Nested(p) => p.max_len(),
        }
    }

    /// Calls `f` with `prefix` + each of the item's strings, in order.
    fn each(&self, prefix: &str, f: &mut dyn FnMut(String)) {
        match self {
            Item::Literal(s) => f(format!("{prefix}{s}")),
            Item::Ints {
                start,
                step,
                count,
                width,
            } => {
                // Two or more values only when the step is within the
                // span, so no value leaves the bounds' range.
                for i in 0..*count {
                    let value = start + step * i as i128;
                    f(format!("{prefix}{value:0width$}"));
                }
            }
            Item::Chars(chars) => {
                for c in chars {
                    f(format!("{prefix}{c}"));
                }
            }
            Item::Choice(alternatives) => {
                for p in alternatives {
                    p.expand_into(prefix.to_string(), f);
                }
            }
            Item::Nested(p) => p.expand_into(prefix.to_string(), f),
        }
    }
}

/// `parse_pattern`: literal runs and balanced `{...}` expressions.
fn parse_pattern(pattern: &[char]) -> std::result::Result<Pattern, String> {
    let (mut start, mut pos, mut depth) = (0usize, 0usize, 0i64);
    let mut items = Vec::new();
    while pos < pattern.len() {
        match pattern[pos] {
            '\\' => {
                pos += 2;
                continue;
            }
            '{' => {
                if depth == 0 && pos > start {
                    items.push(Item::Literal(pattern[start..pos].iter().collect()));
                    start = pos;
                }
                depth += 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    let expr = &pattern[start + 1..pos];
                    match parse_expression(expr)? {
                        Some(item) => items.push(item),
                        None => {
                            items.push(Item::Literal("{".into()));
                            items.push(Item::Nested(parse_pattern(expr)?));
                            items.push(Item::Literal("}".into()));
                        }
                    }
                    start = pos + 1;
                }
            }
            _ => {}
        }
        pos += 1;
    }
    if depth != 0 {
        let text: String = pattern.iter().collect();
        return Err(format!("unbalanced braces in {text:?}"));
    }
    if start < pattern.len() {
        items.push(Item::Literal(pattern[start..].iter().collect()));
    }
    Ok(Pattern(items))
}

/// `parse_expression`: a range, an alternation, or `None` (kept literally).
fn parse_expression(expr: &[char]) -> std::result::Result<Option<Item>, String> {
    // Python's `$` also matches before a final newline.
    let anchored = match expr.split_last() {
        Some(('\n', head)) => head,
        _ => expr,
    };
    if let Some(item) = int_range(anchored)? {
        return Ok(Some(item));
    }
    if let Some(item) = char_range(anchored) {
        return Ok(Some(item));
    }
    parse_sequence(expr)
}

/// `-?\d+` at the front of `s`: the text and the rest.
fn signed_digits(s: &[char]) -> Option<(&[char], &[char])> {
    let sign = usize::from(s.first() == Some(&'-'));
    let digits = s[sign..].iter().take_while(|c| c.is_ascii_digit()).count();
    (digits > 0).then(|| s.split_at(sign + digits))
}

/// `(?:\.\.-?(\d+))?$` after a range's bounds: `Some(None)` for no step,
/// `Some(Some(digits))`, or `None` if it does not match.
fn step_suffix(s: &[char]) -> Option<Option<&[char]>> {
    if s.is_empty() {
        return Some(None);
    }
    let rest = s.strip_prefix(&['.', '.'])?;
    let rest = rest.strip_prefix(&['-']).unwrap_or(rest);
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    (digits > 0 && digits == rest.len()).then_some(Some(rest))
}

/// The step of a range: `(int(step) or 1) if step else 1`.
fn step_value(step: Option<&[char]>) -> u128 {
    let Some(digits) = step else {
        return 1;
    };
    let mut v: u128 = 0;
    for c in digits {
        v = v
            .saturating_mul(10)
            .saturating_add(u128::from(*c as u8 - b'0'));
    }
    v.max(1)
}

/// `^(-?\d+)\.\.(-?\d+)(?:\.\.-?(\d+))?$` and `make_int_range`.
fn int_range(expr: &[char]) -> std::result::Result<Option<Item>, String> {
    let Some((a, rest)) = signed_digits(expr) else {
        return Ok(None);
    };
    let Some(rest) = rest.strip_prefix(&['.', '.']) else {
        return Ok(None);
    };
    let Some((b, rest)) = signed_digits(rest) else {
        return Ok(None);
    };
    let Some(step) = step_suffix(rest) else {
        return Ok(None);
    };
    let text = |s: &[char]| s.iter().collect::<String>();
    let (a, b) = (text(a), text(b));
    let number = |s: &str| {
        s.parse::<i64>()
            .map(i128::from)
            .map_err(|_| format!("the number {s} in a range does not fit in 64 bits"))
    };
    let (start, end) = (number(&a)?, number(&b)?);
    let padded = [&a, &b]
        .iter()
        .any(|s| *s != "0" && *s != "-0" && (s.starts_with('0') || s.starts_with("-0")));
    let width = if padded { a.len().max(b.len()) } else { 0 };
    let step = step_value(step);
    let span = (end - start).unsigned_abs();
    let count = span / step + 1;
    let step = i128::try_from(step).unwrap_or(i128::MAX);
    Ok(Some(Item::Ints {
        start,
        step: if start < end { step } else { -step },
        count,
        width,
    }))
}

/// `^([A-Za-z])\.\.([A-Za-z])(?:\.\.-?(\d+))?$` and `make_char_range`.
fn char_range(expr: &[char]) -> Option<Item> {
    const ALPHABET: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let [a, '.', '.', b, rest @ ..] = expr else {
        return None;
    };
    if !a.is_ascii_alphabetic() || !b.is_ascii_alphabetic() {
        return None;
    }
    let step = step_value(step_suffix(rest)?);
    let alphabet: Vec<char> = ALPHABET.chars().collect();
    let index = |c: &char| alphabet.iter().position(|x| x == c).unwrap_or(0);
    let (start, end) = (index(a), index(b));
    let step = usize::try_from(step).unwrap_or(usize::MAX);
    // Python's slices: `[start:end+1:step]` up, `[start:end-1:-step]` down
    // (with `end or -len`, so down to `A` too); both reach `end` inclusive.
    let chars = if start < end {
        (start..=end).step_by(step).map(|i| alphabet[i]).collect()
    } else {
        (end..=start)
            .rev()
            .step_by(step)
            .map(|i| alphabet[i])
            .collect()
    };
    Some(Item::Chars(chars))
}

/// `parse_sequence`: alternatives split at top-level commas; `None` when
/// there is no comma or the braces do not balance.
fn parse_sequence(seq: &[char]) -> std::result::Result<Option<Item>, String> {
    let (mut start, mut pos, mut depth) = (0usize, 0usize, 0i64);
    let mut parts: Vec<&[char]> = Vec::new();
    while pos < seq.len() {
        match seq[pos] {
            '\\' => {
                pos += 2;
                continue;
            }
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&seq[start..pos]);
                start = pos + 1;
            }
            _ => {}
        }
        pos += 1;
    }
    if depth != 0 || parts.is_empty() {
        return Ok(None);
    }
    parts.push(seq.get(start..).unwrap_or(&[]));
    let alternatives = parts
        .into_iter()
        .map(parse_pattern)
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(Some(Item::Choice(alternatives)))
}

/// `re.sub(r'\\(.)', r'\1', s)`: a backslash and the character after it
/// (not a newline) become that character.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&next) = chars.peek()
            && next != '\n'
        {
            out.push(next);
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(p: &str) -> Vec<String> {
        braceexpand(p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    #[test]
    fn ranges_pad_and_step_as_braceexpand() {
        assert_eq!(
            expand("shard-{000000..000003}.tar"),
            [
                "shard-000000.tar",
                "shard-000001.tar",
                "shard-000002.tar",
                "shard-000003.tar"
            ]
        );
        assert_eq!(expand("item{1..3}"), ["item1", "item2", "item3"]);
        assert_eq!(expand("{07..10}"), ["07", "08", "09", "10"]);
        assert_eq!(expand("{4..1}"), ["4", "3", "2", "1"]);
        assert_eq!(expand("{2..-1}"), ["2", "1", "0", "-1"]);
        assert_eq!(expand("{-05..-3}"), ["-05", "-04", "-03"]);
        assert_eq!(expand("{0..10..5}"), ["0", "5", "10"]);
        assert_eq!(expand("{10..0..-5}"), ["10", "5", "0"]);
        assert_eq!(expand("{1..3..0}"), ["1", "2", "3"]);
        assert_eq!(expand("{5..5}"), ["5"]);
        assert_eq!(expand("{a..g..2}"), ["a", "c", "e", "g"]);
        assert_eq!(expand("{c..a}"), ["c", "b", "a"]);
        assert_eq!(expand("{B..A}"), ["B", "A"]);
        assert_eq!(expand("{Y..b}"), ["Y", "Z", "a", "b"]);
    }

    #[test]
    fn alternation_nesting_and_literals() {
        assert_eq!(
            expand("index.html{,.backup}"),
            ["index.html", "index.html.backup"]
        );
        assert_eq!(
            expand("python{2.{5..7},3.{2,3}}"),
            [
                "python2.5",
                "python2.6",
                "python2.7",
                "python3.2",
                "python3.3"
            ]
        );
        assert_eq!(
            expand("{a,b}/{0..1}.tar"),
            ["a/0.tar", "a/1.tar", "b/0.tar", "b/1.tar"]
        );
        assert_eq!(expand("{a}"), ["{a}"]);
        assert_eq!(expand("{}"), ["{}"]);
        assert_eq!(expand("x{{a,b}}"), ["x{a}", "x{b}"]);
        assert_eq!(expand(r"{1\{2,3}"), ["1{2", "3"]);
        assert_eq!(expand(r"a\,b\\c"), [r"a,b\c"]);
        assert_eq!(expand("a}b{c"), ["a}b{c"]);
        assert_eq!(expand("plain.tar"), ["plain.tar"]);
        assert_eq!(expand(""), [""]);
    }

    #[test]
    fn bad_patterns_are_refused_with_reasons() {
        let err = braceexpand("{1{2,3}").unwrap_err();
        assert!(err.contains("unbalanced"), "{err}");
        assert!(
            braceexpand("shard-{0..9.tar")
                .unwrap_err()
                .contains("unbalanced")
        );
        let err = braceexpand("{0..999999999999}").unwrap_err();
        assert!(err.contains("1000000000000 strings"), "{err}");
        let err = braceexpand("{0..9}{0..9}{0..9}{0..9}{0..9}{0..9}{0..9}").unwrap_err();
        assert!(err.contains("strings"), "{err}");
        let err = braceexpand("{0..99999999999999999999}").unwrap_err();
        assert!(err.contains("64 bits"), "{err}");
        let deep = format!("{}a,b{}", "{".repeat(40), "}".repeat(40));
        assert!(braceexpand(&deep).unwrap_err().contains("nested"));
        let long = "x".repeat(1000);
        let err = braceexpand_limited(&format!("{long}{{0..999}}"), 1 << 20, 100_000).unwrap_err();
        assert!(err.contains("bytes"), "{err}");
    }

    #[test]
    fn url_lists_split_and_expand() {
        let urls = vec![
            "a-{0..1}.tar::b.tar".to_string(),
            "s3://bucket/c-{x,y}.tar".to_string(),
        ];
        assert_eq!(
            expand_patterns("webdataset", &urls).unwrap(),
            [
                "a-0.tar",
                "a-1.tar",
                "b.tar",
                "s3://bucket/c-x.tar",
                "s3://bucket/c-y.tar"
            ]
        );
        let err = expand_patterns("webdataset", &["a.tar::".into()]).unwrap_err();
        assert!(err.to_string().contains("empty URL"), "{err}");
        let err = expand_patterns("webdataset", &[]).unwrap_err();
        assert!(err.to_string().contains("no urls"), "{err}");
        let err = expand_patterns("webdataset", &["ok.tar".into(), "{".into()]).unwrap_err();
        assert!(err.to_string().contains("urls[1]"), "{err}");
    }

    #[test]
    fn globs_match_files() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["s-1.tar", "s-0.tar", "other.txt"] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let d = dir.path().to_str().unwrap();
        let urls = expand_urls(
            "webdataset",
            &[format!("{d}/s-*.tar"), format!("{d}/other.txt")],
        )
        .unwrap();
        assert_eq!(
            urls,
            [
                format!("{d}/s-0.tar"),
                format!("{d}/s-1.tar"),
                format!("{d}/other.txt")
            ]
        );
        let err = expand_urls("webdataset", &[format!("{d}/none-*.tar")]).unwrap_err();
        assert!(err.to_string().contains("no files match"), "{err}");
    }
}
