//! Text kernels: `tf.strings.split` of one string, `tf.strings.lower` and
//! vocabulary lookup (`tf.lookup.StaticHashTable` over a
//! `tf.lookup.TextFileInitializer`).

use std::collections::HashMap;

use bytes::Bytes;
use tfdata_core::{DType, Error, Result, Tensor};

use super::{encode, from_buffer, invalid};

fn strings<'a>(kernel: &str, t: &'a Tensor) -> Result<&'a [Bytes]> {
    t.string_values().map_err(|_| {
        invalid(
            kernel,
            format!("expected a string tensor, got {}", t.dtype()),
        )
    })
}

/// `tf.strings.split(text, sep)` on a scalar: the pieces as a 1-D string
/// tensor.
///
/// With `sep` `None` (or empty, as in TensorFlow) the text is split on runs
/// of ASCII whitespace (space, `\t`, `\n`, `\v`, `\f`, `\r`; not Unicode
/// spaces) and empty pieces are dropped, so `"  a b "` gives `["a", "b"]`
/// and `""` gives `[]`. With a separator, every occurrence splits (left to
/// right, without overlap) and empty pieces are kept: `"a,,b,"` on `","`
/// gives `["a", "", "b", ""]` and `""` gives `[""]`. Bytes, not characters:
/// the text need not be UTF-8.
pub fn string_split(text: &Tensor, sep: Option<&str>) -> Result<Tensor> {
    const KERNEL: &str = "string_split";
    let values = strings(KERNEL, text)?;
    if !text.shape().is_empty() {
        return Err(invalid(
            KERNEL,
            format!(
                "`text` must be a scalar (a batch would be ragged), got shape {:?}",
                text.shape()
            ),
        ));
    }
    let s = &values[0];
    let pieces: Vec<Bytes> = match sep.filter(|sep| !sep.is_empty()) {
        None => s
            .split(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\x0B' | b'\x0C' | b'\r'))
            .filter(|piece| !piece.is_empty())
            .map(|piece| s.slice_ref(piece))
            .collect(),
        Some(sep) => {
            let sep = sep.as_bytes();
            let mut pieces = Vec::new();
            let mut start = 0;
            let mut i = 0;
            while i + sep.len() <= s.len() {
                if &s[i..i + sep.len()] == sep {
                    pieces.push(s.slice(start..i));
                    i += sep.len();
                    start = i;
                } else {
                    i += 1;
                }
            }
            pieces.push(s.slice(start..));
            pieces
        }
    };
    let n = pieces.len() as i64;
    Tensor::strings(pieces, vec![n])
}

/// `tf.strings.lower(input)` (default `encoding=""`): ASCII letters
/// lowercased, every other byte kept, so UTF-8 text passes through with
/// only its ASCII letters changed. Any shape.
pub fn lower(input: &Tensor) -> Result<Tensor> {
    let values = strings("lower", input)?;
    let lowered = values
        .iter()
        .map(|s| {
            if s.iter().any(u8::is_ascii_uppercase) {
                Bytes::from(s.to_ascii_lowercase())
            } else {
                s.clone()
            }
        })
        .collect();
    Tensor::strings(lowered, input.shape().to_vec())
}

/// A token-to-id table: id `i` for the `i`-th token, as
/// `tf.lookup.TextFileInitializer(key_index=WHOLE_LINE,
/// value_index=LINE_NUMBER)` builds from a vocabulary file.
#[derive(Debug, Clone, Default)]
pub struct Vocabulary {
    ids: HashMap<Bytes, i64>,
}

impl Vocabulary {
    /// The vocabulary of a file (any path or URL the crate's
    /// [`file systems`](crate::io::file_system) open), one token per line,
    /// as TensorFlow reads it: lines end at `\n` with a `\r` before it dropped, the last line
    /// needs no newline, whitespace inside a line is part of the token.
    /// An empty line is an `InvalidArgument` ("empty line found at position
    /// N", N the byte offset after it, as TensorFlow reports), a repeated
    /// token is a `FailedPrecondition` (TensorFlow's "HashTable has
    /// different value for same key"); an empty file is an
    /// `InvalidArgument` (TensorFlow fails reading it with `OutOfRange`).
    pub fn from_file(path: &str) -> Result<Vocabulary> {
        let data = crate::io::read_all(path)?;
        if data.is_empty() {
            return Err(invalid(
                "Vocabulary::from_file",
                format!("vocabulary file {path} is empty"),
            ));
        }
        let mut tokens = Vec::new();
        let mut start = 0;
        while start < data.len() {
            let end = data[start..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(data.len(), |p| start + p);
            let next = (end + 1).min(data.len());
            let mut line = data.slice(start..end);
            if line.last() == Some(&b'\r') {
                line.truncate(line.len() - 1);
            }
            if line.is_empty() {
                return Err(invalid(
                    "Vocabulary::from_file",
                    format!("Invalid content in {path}: empty line found at position {next}."),
                ));
            }
            tokens.push(line);
            start = end + 1;
        }
        Vocabulary::from_tokens(tokens)
    }

    /// The vocabulary of in-memory tokens, token `i` getting id `i` (as a
    /// `tf.lookup.KeyValueTensorInitializer` over `tf.range`). A repeated
    /// token is a `FailedPrecondition`, as in TensorFlow; empty tokens are
    /// allowed.
    pub fn from_tokens(tokens: Vec<Bytes>) -> Result<Vocabulary> {
        let mut ids = HashMap::with_capacity(tokens.len());
        for (i, token) in tokens.into_iter().enumerate() {
            if let Some(&first) = ids.get(&token) {
                return Err(Error::FailedPrecondition(format!(
                    "HashTable has different value for same key. Key {} has {first} and \
                     trying to add value {i}",
                    String::from_utf8_lossy(&token)
                )));
            }
            ids.insert(token, i as i64);
        }
        Ok(Vocabulary { ids })
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The id of one token.
    pub fn get(&self, token: &[u8]) -> Option<i64> {
        self.ids.get(token).copied()
    }
}

/// `table.lookup(tokens)` on a `StaticHashTable` with `default_value`: the
/// id of each token, `default_value` for tokens not in the vocabulary.
/// Any shape; output `int64` of the same shape.
pub fn lookup(tokens: &Tensor, vocabulary: &Vocabulary, default_value: i64) -> Result<Tensor> {
    if tokens.dtype() != DType::String {
        return Err(invalid(
            "lookup",
            format!("`tokens` must be a string tensor, got {}", tokens.dtype()),
        ));
    }
    let ids: Vec<i64> = strings("lookup", tokens)?
        .iter()
        .map(|t| vocabulary.get(t).unwrap_or(default_value))
        .collect();
    from_buffer(DType::Int64, tokens.shape().to_vec(), encode(&ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str, sep: Option<&str>) -> Vec<String> {
        let t = string_split(&Tensor::scalar_string(s.to_string()), sep).unwrap();
        t.string_values()
            .unwrap()
            .iter()
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn split_matches_tensorflow() {
        assert_eq!(split("  a b\tc\n", None), ["a", "b", "c"]);
        assert_eq!(split("", None), Vec::<String>::new());
        assert_eq!(split("a,,b,", Some(",")), ["a", "", "b", ""]);
        assert_eq!(split("", Some(",")), [""]);
        assert_eq!(split("aaa", Some("aa")), ["", "a"]);
        assert_eq!(split(" a b", Some("")), ["a", "b"]);
    }

    #[test]
    fn vocabulary_lines() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("v.txt");
        let path = file.to_str().unwrap();
        std::fs::write(&file, "a\r\nb\nc").unwrap();
        let v = Vocabulary::from_file(path).unwrap();
        assert_eq!(
            (v.get(b"a"), v.get(b"b"), v.get(b"c")),
            (Some(0), Some(1), Some(2))
        );
        std::fs::write(&file, "a\n\nb\n").unwrap();
        let err = Vocabulary::from_file(path).unwrap_err().to_string();
        assert!(err.contains("empty line found at position 3"), "{err}");
        std::fs::write(&file, "a\nb\na\n").unwrap();
        assert!(matches!(
            Vocabulary::from_file(path),
            Err(Error::FailedPrecondition(_))
        ));
    }
}
