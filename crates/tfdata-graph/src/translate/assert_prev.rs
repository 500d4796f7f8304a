//! `AssertPrevDataset` (`tf.data.experimental.assert_prev`): the
//! transformations before the node, nearest first, must be the ones named,
//! each with the attribute values given. TensorFlow checks when an iterator
//! is made; the worker checks the graph before translating it, with
//! TensorFlow's messages.
//!
//! TensorFlow checks the pipeline it runs, after its static rewrites; the
//! worker runs the graph as written (its options' rewrites are not
//! applied), so the check is made on the graph as written.
//!
//! Each assertion is a `NameAttrList` in protobuf's text format (what
//! Python's `assert_prev` writes): `name: "MapDataset" attr { key: "k"
//! value { b: true } }`, with `b`, `i` or `s` values. A name matches an op
//! of that name or any version of it (`MapDataset` matches `MapDatasetV2`).

use std::collections::HashMap;

use bytes::Bytes;

use tfdata_core::{Error, Result};
use tfdata_proto::tensorflow::{GraphDef, NodeDef, attr_value};

use crate::attrs::NodeAttrs;

/// The most assertions one node may make (each walks one step).
const MAX_ASSERTIONS: usize = 1 << 10;

/// Checks every `AssertPrevDataset` node of `graph`'s top level.
pub(super) fn check(graph: &GraphDef) -> Result<()> {
    let by_name: HashMap<&str, &NodeDef> =
        graph.node.iter().map(|n| (n.name.as_str(), n)).collect();
    for node in graph.node.iter().filter(|n| n.op == "AssertPrevDataset") {
        let texts = asserted_texts("AssertPrevDataset", node, &by_name)?;
        let asserted = texts
            .iter()
            .map(|t| parse_assertion(t))
            .collect::<Result<Vec<_>>>()?;
        let chain = previous(node, &by_name, asserted.len());
        if chain.len() < asserted.len() {
            return Err(Error::InvalidArgument(format!(
                "Asserted previous {} transformations but encountered only {}.",
                asserted.len(),
                chain.len()
            )));
        }
        for (offset, (want, got)) in asserted.iter().zip(&chain).enumerate() {
            check_one(offset, want, got)?;
        }
    }
    Ok(())
}

/// An assert node's `transformations` input (its second), a constant
/// vector of strings: `op` names the node's kind in the errors.
pub(super) fn asserted_texts(
    op: &str,
    node: &NodeDef,
    by_name: &HashMap<&str, &NodeDef>,
) -> Result<Vec<Bytes>> {
    let Some(list) = node
        .input
        .get(1)
        .and_then(|i| by_name.get(node_name(i)))
        .filter(|n| n.op == "Const")
    else {
        return Err(Error::Unimplemented(format!(
            "{op} node {:?}: its transformations must be a constant",
            node.name
        )));
    };
    let list = NodeAttrs::of(list).tensor("value")?;
    let texts = list.string_values()?;
    if texts.len() > MAX_ASSERTIONS {
        return Err(Error::InvalidArgument(format!(
            "{op}: {} transformations asserted, over {MAX_ASSERTIONS}",
            texts.len()
        )));
    }
    Ok(texts.to_vec())
}

pub(super) fn node_name(input: &str) -> &str {
    let name = input.split(':').next().unwrap_or(input);
    name.strip_prefix('^').unwrap_or(name)
}

/// The dataset nodes before `node`, nearest first, following each one's
/// first input while it is a dataset node (at most `n`).
fn previous<'g>(
    node: &NodeDef,
    by_name: &HashMap<&str, &'g NodeDef>,
    n: usize,
) -> Vec<&'g NodeDef> {
    let is_dataset = |n: &NodeDef| super::DATASET_OPS.contains(&n.op.as_str());
    let mut out = Vec::new();
    let mut at = node.input.first().and_then(|i| by_name.get(node_name(i)));
    while let Some(&d) = at {
        if out.len() >= n || !is_dataset(d) {
            break;
        }
        out.push(d);
        at = d.input.first().and_then(|i| by_name.get(node_name(i)));
    }
    out
}

/// One asserted transformation: its name and attribute values.
struct Assertion {
    name: String,
    attrs: Vec<(String, Expected)>,
}

#[derive(PartialEq, Debug)]
enum Expected {
    B(bool),
    I(i64),
    S(Vec<u8>),
}

impl Expected {
    fn show(&self) -> String {
        match self {
            Expected::B(b) => format!("b: {b}"),
            Expected::I(i) => format!("i: {i}"),
            Expected::S(s) => format!("s: {:?}", String::from_utf8_lossy(s)),
        }
    }

    fn of(v: &attr_value::Value) -> Option<Expected> {
        match v {
            attr_value::Value::B(b) => Some(Expected::B(*b)),
            attr_value::Value::I(i) => Some(Expected::I(*i)),
            attr_value::Value::S(s) => Some(Expected::S(s.to_vec())),
            _ => None,
        }
    }
}

fn check_one(offset: usize, want: &Assertion, got: &NodeDef) -> Result<()> {
    let fail = |msg: String| {
        Error::InvalidArgument(format!(
            "Failure checking transformations at offset {offset}: {msg}"
        ))
    };
    if !matches_any_version(&want.name, &got.op) {
        return Err(fail(format!(
            "Asserted transformation matching '{}', but found '{}'.",
            want.name, got.op
        )));
    }
    for (key, value) in &want.attrs {
        let found = got.attr.get(key).and_then(|a| a.value.as_ref());
        let Some(found) = found else {
            return Err(fail(format!(
                "Asserted attribute '{key}' having a value of '{}', but found no such \
                 attribute defined.",
                value.show()
            )));
        };
        if Expected::of(found).as_ref() != Some(value) {
            return Err(fail(format!(
                "Asserted attribute '{key}' having a value of '{}', but found value of '{}'.",
                value.show(),
                Expected::of(found).map_or_else(|| format!("{found:?}"), |e| e.show())
            )));
        }
    }
    Ok(())
}

/// `op` is `name` or a version of it (`name` then `V` and digits).
pub(super) fn matches_any_version(name: &str, op: &str) -> bool {
    match op.strip_prefix(name) {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix('V')
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    }
}

/// A `NameAttrList` in text format.
fn parse_assertion(text: &[u8]) -> Result<Assertion> {
    let bad = |why: &str| {
        Error::InvalidArgument(format!(
            "AssertPrevDataset: transformation {:?} is not a NameAttrList: {why}",
            String::from_utf8_lossy(text)
        ))
    };
    let tokens = tokenize(text).map_err(|e| bad(&e))?;
    let fields = Parser {
        tokens: &tokens,
        at: 0,
    }
    .message(0)
    .map_err(|e| bad(&e))?;
    let mut out = Assertion {
        name: String::new(),
        attrs: Vec::new(),
    };
    for (key, field) in fields {
        match (key.as_str(), field) {
            ("name", Field::Scalar(Token::Str(s))) => {
                out.name = String::from_utf8_lossy(&s).into_owned()
            }
            ("attr", Field::Message(entry)) => {
                let mut name = None;
                let mut value = None;
                for (k, f) in entry {
                    match (k.as_str(), f) {
                        ("key", Field::Scalar(Token::Str(s))) => {
                            name = Some(String::from_utf8_lossy(&s).into_owned())
                        }
                        ("value", Field::Message(v)) => {
                            value = Some(expected(v).map_err(|e| bad(&e))?)
                        }
                        _ => return Err(bad("an attr entry has only `key` and `value`")),
                    }
                }
                match (name, value) {
                    (Some(n), Some(v)) => out.attrs.push((n, v)),
                    _ => return Err(bad("an attr entry needs `key` and `value`")),
                }
            }
            _ => return Err(bad("only `name` and `attr` fields")),
        }
    }
    Ok(out)
}

fn expected(fields: Vec<(String, Field)>) -> std::result::Result<Expected, String> {
    let [(kind, Field::Scalar(token))] =
        <[_; 1]>::try_from(fields).map_err(|_| "a value has one field".to_string())?
    else {
        return Err("a value is `b`, `i` or `s`".into());
    };
    match (kind.as_str(), token) {
        ("b", Token::Word(w)) if w == "true" || w == "false" => Ok(Expected::B(w == "true")),
        ("i", Token::Word(w)) => w
            .parse()
            .map(Expected::I)
            .map_err(|_| format!("bad integer {w}")),
        ("s", Token::Str(s)) => Ok(Expected::S(s)),
        _ => Err("a value is `b`, `i` or `s`".into()),
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Word(String),
    Str(Vec<u8>),
    Colon,
    Open,
    Close,
}

enum Field {
    Scalar(Token),
    Message(Vec<(String, Field)>),
}

fn tokenize(text: &[u8]) -> std::result::Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b':' => {
                out.push(Token::Colon);
                i += 1
            }
            b'{' => {
                out.push(Token::Open);
                i += 1
            }
            b'}' => {
                out.push(Token::Close);
                i += 1
            }
            b'"' | b'\'' => {
                let (s, next) = string(text, i + 1, c)?;
                // Adjacent literals concatenate, as in protobuf.
                match out.last_mut() {
                    Some(Token::Str(prev)) => prev.extend_from_slice(&s),
                    _ => out.push(Token::Str(s)),
                }
                i = next;
            }
            c if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'.' => {
                let start = i;
                while i < text.len()
                    && (text[i].is_ascii_alphanumeric() || b"_-.+".contains(&text[i]))
                {
                    i += 1;
                }
                out.push(Token::Word(
                    String::from_utf8_lossy(&text[start..i]).into_owned(),
                ));
            }
            _ => return Err(format!("unexpected byte {c:#04x}")),
        }
    }
    Ok(out)
}

/// A quoted string from `i` (after the opening quote) with C escapes; the
/// bytes and the index after the closing quote.
fn string(text: &[u8], mut i: usize, quote: u8) -> std::result::Result<(Vec<u8>, usize), String> {
    let mut out = Vec::new();
    while i < text.len() {
        match text[i] {
            c if c == quote => return Ok((out, i + 1)),
            b'\\' => {
                let e = *text.get(i + 1).ok_or("a string ends in an escape")?;
                i += 2;
                match e {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'r' => out.push(b'\r'),
                    b'x' => {
                        let end = (i..text.len().min(i + 2))
                            .find(|&j| !text[j].is_ascii_hexdigit())
                            .unwrap_or(text.len().min(i + 2));
                        let v = u8::from_str_radix(&String::from_utf8_lossy(&text[i..end]), 16)
                            .map_err(|_| "bad \\x escape")?;
                        out.push(v);
                        i = end;
                    }
                    b'0'..=b'7' => {
                        let start = i - 1;
                        let end = (start..text.len().min(start + 3))
                            .find(|&j| !(b'0'..=b'7').contains(&text[j]))
                            .unwrap_or(text.len().min(start + 3));
                        let v = u32::from_str_radix(&String::from_utf8_lossy(&text[start..end]), 8)
                            .map_err(|_| "bad octal escape")?;
                        out.push(u8::try_from(v).map_err(|_| "octal escape over 255")?);
                        i = end;
                    }
                    other => out.push(other),
                }
            }
            c => {
                out.push(c);
                i += 1
            }
        }
    }
    Err("an unterminated string".into())
}

struct Parser<'t> {
    tokens: &'t [Token],
    at: usize,
}

/// How deep messages may nest (a NameAttrList needs three levels).
const MAX_DEPTH: usize = 8;

impl Parser<'_> {
    /// Fields up to a `}` (consumed) or, at depth 0, the end.
    fn message(&mut self, depth: usize) -> std::result::Result<Vec<(String, Field)>, String> {
        if depth > MAX_DEPTH {
            return Err("nested too deep".into());
        }
        let mut fields = Vec::new();
        loop {
            match self.tokens.get(self.at).cloned() {
                None if depth == 0 => return Ok(fields),
                None => return Err("a `{` is not closed".into()),
                Some(Token::Close) if depth > 0 => {
                    self.at += 1;
                    return Ok(fields);
                }
                Some(Token::Word(key)) => {
                    self.at += 1;
                    if self.tokens.get(self.at) == Some(&Token::Colon) {
                        self.at += 1;
                    }
                    match self.tokens.get(self.at).cloned() {
                        Some(Token::Open) => {
                            self.at += 1;
                            fields.push((key, Field::Message(self.message(depth + 1)?)));
                        }
                        Some(t @ (Token::Word(_) | Token::Str(_))) => {
                            self.at += 1;
                            fields.push((key, Field::Scalar(t)));
                        }
                        _ => return Err(format!("field `{key}` has no value")),
                    }
                }
                Some(t) => return Err(format!("unexpected {t:?}")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_python_writes() {
        let a = parse_assertion(
            b"name: \"MapDataset\"\nattr {\n  key: \"k\"\n  value {\n    b: true\n  }\n}\n\
              attr { key: \"s\" value { s: \"a\\\"b\\001\" } } attr { key: \"i\" value { i: -3 } }",
        )
        .unwrap();
        assert_eq!(a.name, "MapDataset");
        assert_eq!(
            a.attrs,
            vec![
                ("k".to_string(), Expected::B(true)),
                ("s".to_string(), Expected::S(b"a\"b\x01".to_vec())),
                ("i".to_string(), Expected::I(-3)),
            ]
        );
        assert!(parse_assertion(b"name: \"x\" attr {").is_err());
        assert!(parse_assertion(b"name: \"x\" attr { key: \"k\" value { f: 1 } }").is_err());
    }

    #[test]
    fn versions_match() {
        assert!(matches_any_version("MapDataset", "MapDataset"));
        assert!(matches_any_version("MapDataset", "MapDatasetV2"));
        assert!(!matches_any_version("MapDataset", "MapDatasetV"));
        assert!(!matches_any_version("Map", "MapDataset"));
        assert!(!matches_any_version("MapDataset", "ParallelMapDataset"));
    }
}
