//! `InitializeTableFromTextFileV2`: a table's entries from a vocabulary
//! file, one entry a line, as TensorFlow's text-file initializer reads it.
//!
//! Each line gives a key and a value: a column (split on the one-byte
//! delimiter), the whole line (index -2) or the line number plus `offset`
//! (index -1). Lines end at `\n`, one trailing `\r` dropped; an empty line
//! is an error; `vocab_size` (not -1) stops after that many lines and
//! refuses a shorter file. The file is read whole, at most
//! [`crate::MAX_TENSOR_BYTES`], and at most [`MAX_TABLE_ENTRIES`] lines.

use std::io::Read;

use bytes::Bytes;
use tfdata_core::{DType, Error, Result};

use super::{MAX_TABLE_ENTRIES, tf_name};
use crate::table::{Init, Key, LookupTable, Scalar};

const LINE_NUMBER: i64 = -1;
const WHOLE_LINE: i64 = -2;

/// The node's attributes.
#[derive(Clone, Debug)]
pub(super) struct TextFileSpec {
    pub vocab_size: i64,
    pub key_index: i64,
    pub value_index: i64,
    pub delimiter: u8,
    pub offset: i64,
}

fn invalid(msg: String) -> Error {
    Error::InvalidArgument(msg)
}

fn is_integer(d: DType) -> bool {
    matches!(
        d,
        DType::Int8
            | DType::Int16
            | DType::Int32
            | DType::Int64
            | DType::UInt8
            | DType::UInt16
            | DType::UInt32
            | DType::UInt64
    )
}

/// Fills `table` from the file at `path` (see the module docs).
pub(super) fn initialize(table: &LookupTable, path: &str, spec: &TextFileSpec) -> Result<()> {
    let (kd, vd) = (table.key_dtype(), table.value_dtype());
    if spec.key_index == LINE_NUMBER && kd != DType::Int64 {
        return Err(invalid(format!(
            "Key index for line number requires table key dtype of int64, got {}",
            tf_name(kd)
        )));
    }
    if spec.key_index == WHOLE_LINE && !is_integer(kd) && kd != DType::String {
        return Err(invalid(format!(
            "Key index for whole line requires string or integer table key, got {}",
            tf_name(kd)
        )));
    }
    if spec.value_index == LINE_NUMBER && vd != DType::Int64 {
        return Err(invalid(format!(
            "Value index for line number requires table value dtype of int64, got {}",
            tf_name(vd)
        )));
    }
    if spec.value_index == WHOLE_LINE && !is_integer(vd) && vd != DType::String {
        return Err(invalid(format!(
            "Value index for whole line requires table value dtype of integer or string, got {}",
            tf_name(vd)
        )));
    }
    let contents = read(path)?;
    let mut lines = Lines {
        path,
        spec,
        key_dtype: kd,
        value_dtype: vd,
        data: &contents,
        pos: 0,
        next_id: 0,
        truncated: false,
    };
    // The first line is read before anything else, as TensorFlow's
    // iterator does: a file that ends at once is its error.
    // (TensorFlow's out-of-range status, which only its file reader and
    // this initializer raise: carried as a status with that code.)
    let first = match lines.next_entry()? {
        Some(e) => e,
        None => {
            let message = if lines.truncated {
                format!("Finished reading {} of lines from {path}", spec.vocab_size)
            } else {
                "Read less bytes than requested".to_string()
            };
            return Err(Error::Remote {
                code: tonic::Code::OutOfRange,
                message,
            });
        }
    };
    let mut init: Init<'_> = table.init();
    if init.initialized_size().is_some() {
        // TensorFlow ignores a second initialisation from a file.
        return Ok(());
    }
    init.insert(first.0, first.1)?;
    while let Some((k, v)) = lines.next_entry()? {
        if lines.next_id > MAX_TABLE_ENTRIES as i64 {
            return Err(invalid(format!(
                "{path}: more than {MAX_TABLE_ENTRIES} lines, the most a table may hold"
            )));
        }
        init.insert(k, v)?;
    }
    init.finish();
    Ok(())
}

/// The whole file, refused past [`crate::MAX_TENSOR_BYTES`].
fn read(path: &str) -> Result<Vec<u8>> {
    let file = tfdata_dataset::io::open(path)?;
    let limit = crate::MAX_TENSOR_BYTES as u64;
    let mut contents = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut contents)
        .map_err(|e| Error::io(format!("reading vocabulary file {path}"), e))?;
    if contents.len() as u64 > limit {
        return Err(invalid(format!(
            "{path}: a vocabulary file larger than {limit} bytes"
        )));
    }
    Ok(contents)
}

struct Lines<'a> {
    path: &'a str,
    spec: &'a TextFileSpec,
    key_dtype: DType,
    value_dtype: DType,
    data: &'a [u8],
    /// Bytes read so far (TensorFlow's `Tell()`).
    pos: usize,
    /// Lines turned into entries so far.
    next_id: i64,
    /// Whether reading stopped at `vocab_size` lines.
    truncated: bool,
}

impl Lines<'_> {
    /// The next line without its end, or `None` at the end of the file.
    fn line(&mut self) -> Option<&[u8]> {
        let rest = &self.data[self.pos..];
        let (mut line, used) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => (&rest[..i], i + 1),
            None => (rest, rest.len()),
        };
        self.pos += used;
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        // The last line, unterminated, counts unless empty.
        if used == rest.len() && !rest.ends_with(b"\n") && line.is_empty() {
            return None;
        }
        if used == 0 {
            return None;
        }
        Some(line)
    }

    /// The next entry, `None` at the end (or at `vocab_size` lines).
    fn next_entry(&mut self) -> Result<Option<(Key, Scalar)>> {
        let (path, spec, next_id) = (self.path, self.spec, self.next_id);
        let Some(line) = self.line() else {
            if spec.vocab_size != -1 && next_id != spec.vocab_size {
                return Err(invalid(format!(
                    "Invalid vocab_size in {path}: expected {} but got {next_id}",
                    spec.vocab_size
                )));
            }
            return Ok(None);
        };
        if spec.vocab_size != -1 && next_id >= spec.vocab_size {
            self.truncated = true;
            return Ok(None);
        }
        if line.is_empty() {
            return Err(invalid(format!(
                "Invalid content in {path}: empty line found at position {}.",
                self.pos
            )));
        }
        let line = line.to_vec();
        let tokens: Vec<&[u8]> = if spec.key_index.max(spec.value_index) < 0 {
            Vec::new()
        } else {
            let tokens: Vec<&[u8]> = line.split(|&b| b == spec.delimiter).collect();
            let want = spec.key_index.max(spec.value_index) as usize + 1;
            if tokens.len() < want {
                return Err(invalid(format!(
                    "Invalid number of columns in {path} line {next_id} ({}) : expected at least {want} got {}",
                    String::from_utf8_lossy(&line),
                    tokens.len()
                )));
            }
            tokens
        };
        let key = self.field(&line, &tokens, spec.key_index, self.key_dtype)?;
        let value = self.field(&line, &tokens, spec.value_index, self.value_dtype)?;
        let key = match key {
            Scalar::I32(v) => Key::Int(v.into()),
            Scalar::I64(v) => Key::Int(v),
            Scalar::Str(s) => Key::Str(s),
            _ => return Err(invalid(format!("{path}: keys must be integers or strings"))),
        };
        self.next_id += 1;
        Ok(Some((key, value)))
    }

    /// The value `index` picks from a line, as `dtype`.
    fn field(&self, line: &[u8], tokens: &[&[u8]], index: i64, dtype: DType) -> Result<Scalar> {
        let offset = self.spec.offset;
        if index == LINE_NUMBER {
            return Ok(Scalar::I64(self.next_id.wrapping_add(offset)));
        }
        let token = if index == WHOLE_LINE {
            line
        } else {
            tokens[index as usize]
        };
        let bad = |what: &str| {
            invalid(format!(
                "Field {} in line {} is not a valid {what}.",
                String::from_utf8_lossy(token),
                self.next_id
            ))
        };
        let text = std::str::from_utf8(token).ok();
        Ok(match dtype {
            // TensorFlow adds the offset to int32 fields (not int64 ones).
            DType::Int32 => Scalar::I32(
                text.and_then(|t| parse_int(t, i32::MIN.into(), i32::MAX.into()))
                    .map(|v| v.wrapping_add(offset) as i32)
                    .ok_or_else(|| bad("int32"))?,
            ),
            DType::Int64 => Scalar::I64(
                text.and_then(|t| parse_int(t, i64::MIN, i64::MAX))
                    .ok_or_else(|| bad("int64"))?,
            ),
            DType::Float => Scalar::F32(
                text.and_then(parse_float::<f32>)
                    .ok_or_else(|| bad("float"))?,
            ),
            DType::Double => Scalar::F64(
                text.and_then(parse_float::<f64>)
                    .ok_or_else(|| bad("double"))?,
            ),
            DType::String => Scalar::Str(Bytes::copy_from_slice(token)),
            other => {
                return Err(invalid(format!(
                    "Data type {} not supported.",
                    tf_name(other)
                )));
            }
        })
    }
}

fn trim_spaces(s: &str) -> &str {
    s.trim_matches(|c: char| matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r'))
}

/// A decimal integer in `[lo, hi]`: spaces around it, one sign.
fn parse_int(s: &str, lo: i64, hi: i64) -> Option<i64> {
    let s = trim_spaces(s);
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok().filter(|v| (lo..=hi).contains(v))
}

/// A decimal float: spaces around it, `inf`/`nan` spelled any case.
fn parse_float<T: std::str::FromStr>(s: &str) -> Option<T> {
    let s = trim_spaces(s);
    if s.is_empty() {
        return None;
    }
    s.parse::<T>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(key_index: i64, value_index: i64) -> TextFileSpec {
        TextFileSpec {
            vocab_size: -1,
            key_index,
            value_index,
            delimiter: b'\t',
            offset: 0,
        }
    }

    fn load(contents: &[u8], kd: DType, vd: DType, spec: &TextFileSpec) -> Result<LookupTable> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vocab.txt");
        std::fs::write(&path, contents).unwrap();
        let t = LookupTable::new(kd, vd);
        initialize(&t, path.to_str().unwrap(), spec)?;
        Ok(t)
    }

    #[test]
    fn whole_lines_to_line_numbers() {
        let t = load(b"a\nb\r\nc", DType::String, DType::Int64, &spec(-2, -1)).unwrap();
        let keys: Vec<Key> = ["a", "b", "c", "d"]
            .iter()
            .map(|s| Key::Str(Bytes::from(*s)))
            .collect();
        let got = t.find(&keys, |_| Scalar::I64(-1)).unwrap();
        let got: Vec<String> = got.iter().map(ToString::to_string).collect();
        assert_eq!(got, ["0", "1", "2", "-1"]);
    }

    #[test]
    fn tensorflow_errors() {
        let e = load(b"a\n\nb\n", DType::String, DType::Int64, &spec(-2, -1)).unwrap_err();
        assert!(
            e.to_string().contains("empty line found at position 3."),
            "{e}"
        );
        let e = load(b"a\n", DType::String, DType::Int64, &spec(0, 2)).unwrap_err();
        assert!(
            e.to_string()
                .contains("line 0 (a) : expected at least 3 got 1"),
            "{e}"
        );
        let mut s = spec(-2, -1);
        s.vocab_size = 3;
        let e = load(b"a\nb\n", DType::String, DType::Int64, &s).unwrap_err();
        assert!(e.to_string().contains("expected 3 but got 2"), "{e}");
        let e = load(b" 5 \n+3\n0x1\n", DType::Int64, DType::Int64, &spec(-2, -1)).unwrap_err();
        assert!(
            e.to_string()
                .contains("Field 0x1 in line 2 is not a valid int64."),
            "{e}"
        );
    }
}
