//! `snapshot.metadata`: `DistributedSnapshotMetadata` in protobuf's text
//! format, as TensorFlow writes and reads it (Python's `load` parses it with
//! `text_format`):
//!
//! ```text
//! element_spec: "\242\003\022\n..."
//! compression: "SNAPPY"
//! ```
//!
//! And the `ERROR` files of a snapshot and of its streams: a
//! `tensorflow.StatusProto` in the same text form (`code: INTERNAL`,
//! `message: "..."`).
//!
//! Only these messages' fields are understood; anything else is an error
//! naming the file and the offset.

use tfdata_core::error::{code_name_of, code_named};
use tfdata_core::{Error, Result};
use tfdata_proto::data::DistributedSnapshotMetadata;
use tfdata_proto::tensorflow::StatusProto;

use super::layout::SnapshotCompression;

/// The most a metadata file may hold (an element spec is a few KiB).
pub const MAX_METADATA_BYTES: usize = 16 << 20;

/// The text TensorFlow writes for `metadata`.
pub fn to_text(metadata: &DistributedSnapshotMetadata) -> String {
    let mut out = String::new();
    if !metadata.element_spec.is_empty() {
        out.push_str("element_spec: \"");
        escape(&metadata.element_spec, &mut out);
        out.push_str("\"\n");
    }
    if !metadata.compression.is_empty() {
        out.push_str("compression: \"");
        escape(metadata.compression.as_bytes(), &mut out);
        out.push_str("\"\n");
    }
    out
}

/// Parses `snapshot.metadata` (`file` names it in errors); the compression
/// must be one TensorFlow knows.
pub fn from_text(file: &str, text: &[u8]) -> Result<DistributedSnapshotMetadata> {
    if text.len() > MAX_METADATA_BYTES {
        return Err(Error::DataLoss {
            location: file.to_string(),
            reason: format!(
                "{} bytes is more than a snapshot's metadata may hold ({MAX_METADATA_BYTES})",
                text.len()
            ),
        });
    }
    let mut parser = Parser { file, text, pos: 0 };
    let mut metadata = DistributedSnapshotMetadata::default();
    loop {
        parser.skip_space();
        if parser.pos == text.len() {
            break;
        }
        let name = parser.identifier()?;
        parser.skip_space();
        parser.expect(b':')?;
        let value = parser.strings()?;
        match name.as_str() {
            "element_spec" => metadata.element_spec = value.into(),
            "compression" => {
                metadata.compression = String::from_utf8(value)
                    .map_err(|_| parser.error("compression is not UTF-8"))?
            }
            other => return Err(parser.error(&format!("unknown field {other:?}"))),
        }
    }
    SnapshotCompression::parse(&metadata.compression).map_err(|e| Error::DataLoss {
        location: file.to_string(),
        reason: e.to_string(),
    })?;
    Ok(metadata)
}

/// An `ERROR` file's text for `status`, as TensorFlow writes it.
pub fn status_to_text(status: &StatusProto) -> String {
    let mut out = String::new();
    if status.code != 0 {
        match code_name_of(status.code) {
            Some(name) => out.push_str(&format!("code: {name}\n")),
            None => out.push_str(&format!("code: {}\n", status.code)),
        }
    }
    if !status.message.is_empty() {
        out.push_str("message: \"");
        escape(status.message.as_bytes(), &mut out);
        out.push_str("\"\n");
    }
    out
}

/// Parses an `ERROR` file (`file` names it in errors). Payloads are not
/// read (TensorFlow writes none there).
pub fn status_from_text(file: &str, text: &[u8]) -> Result<StatusProto> {
    let mut parser = Parser::new(file, text)?;
    let mut status = StatusProto::default();
    loop {
        parser.skip_space();
        if parser.pos == text.len() {
            break;
        }
        let name = parser.identifier()?;
        parser.skip_space();
        parser.expect(b':')?;
        parser.skip_space();
        match name.as_str() {
            "code" => {
                let value = parser.identifier()?;
                status.code = match code_named(&value) {
                    Some(code) => code as i32,
                    None => value
                        .parse()
                        .map_err(|_| parser.error(&format!("unknown status code {value:?}")))?,
                };
            }
            "message" => {
                status.message = String::from_utf8_lossy(&parser.strings()?).into_owned();
            }
            other => return Err(parser.error(&format!("unknown field {other:?}"))),
        }
    }
    Ok(status)
}

/// C-style escaping, as protobuf's text printer does: printable ASCII as
/// is, the usual backslash escapes, octal for the rest.
fn escape(bytes: &[u8], out: &mut String) {
    for &b in bytes {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
}

struct Parser<'a> {
    file: &'a str,
    text: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn new(file: &'a str, text: &'a [u8]) -> Result<Self> {
        if text.len() > MAX_METADATA_BYTES {
            return Err(Error::DataLoss {
                location: file.to_string(),
                reason: format!(
                    "{} bytes is more than a snapshot's metadata may hold ({MAX_METADATA_BYTES})",
                    text.len()
                ),
            });
        }
        Ok(Parser { file, text, pos: 0 })
    }

    fn error(&self, reason: &str) -> Error {
        Error::DataLoss {
            location: format!("{} at offset {}", self.file, self.pos),
            reason: format!("bad snapshot metadata: {reason}"),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    /// Whitespace and `#` comments.
    fn skip_space(&mut self) {
        while let Some(b) = self.peek() {
            if b.is_ascii_whitespace() {
                self.pos += 1;
            } else if b == b'#' {
                while self.peek().is_some_and(|b| b != b'\n') {
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
    }

    fn expect(&mut self, want: u8) -> Result<()> {
        if self.peek() == Some(want) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected {:?}", want as char)))
        }
    }

    /// A field name, or an enum or integer value.
    fn identifier(&mut self) -> Result<String> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.error("expected a name or a number"));
        }
        Ok(String::from_utf8_lossy(&self.text[start..self.pos]).into_owned())
    }

    /// One or more adjacent quoted strings, concatenated.
    fn strings(&mut self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.skip_space();
        if !matches!(self.peek(), Some(b'"' | b'\'')) {
            return Err(self.error("expected a quoted string"));
        }
        while let Some(quote @ (b'"' | b'\'')) = self.peek() {
            self.pos += 1;
            self.string_body(quote, &mut out)?;
            self.skip_space();
        }
        Ok(out)
    }

    fn string_body(&mut self, quote: u8, out: &mut Vec<u8>) -> Result<()> {
        loop {
            let Some(b) = self.peek() else {
                return Err(self.error("unterminated string"));
            };
            self.pos += 1;
            match b {
                b'\n' => return Err(self.error("line break inside a string")),
                b'\\' => out.push(self.escape()?),
                b if b == quote => return Ok(()),
                b => out.push(b),
            }
        }
    }

    /// The byte an escape after `\` stands for.
    fn escape(&mut self) -> Result<u8> {
        let Some(b) = self.peek() else {
            return Err(self.error("unterminated escape"));
        };
        self.pos += 1;
        Ok(match b {
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'a' => 0x07,
            b'b' => 0x08,
            b'f' => 0x0c,
            b'v' => 0x0b,
            b'?' => b'?',
            b'"' | b'\'' | b'\\' => b,
            b'0'..=b'7' => {
                let mut v = u32::from(b - b'0');
                for _ in 0..2 {
                    match self.peek() {
                        Some(d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            self.pos += 1;
                        }
                        _ => break,
                    }
                }
                u8::try_from(v).map_err(|_| self.error("octal escape above \\377"))?
            }
            b'x' | b'X' => {
                let mut v = 0u32;
                let mut digits = 0;
                while digits < 2 {
                    match self.peek().and_then(|d| (d as char).to_digit(16)) {
                        Some(d) => {
                            v = v * 16 + d;
                            self.pos += 1;
                            digits += 1;
                        }
                        None => break,
                    }
                }
                if digits == 0 {
                    return Err(self.error("\\x without hex digits"));
                }
                v as u8
            }
            other => return Err(self.error(&format!("unknown escape \\{}", other as char))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_tensorflow_wrote() {
        // `snapshot.metadata` of a TensorFlow 2.21 snapshot of
        // `range(1000).map(lambda x: (x, tf.strings.as_string(x)))`.
        let text = b"element_spec: \"\\242\\003\\022\\n\\007\\212\\002\\004\\022\\000\\030\\t\\n\\007\\212\\002\\004\\022\\000\\030\\007\"\ncompression: \"SNAPPY\"\n";
        let m = from_text("snapshot.metadata", text).unwrap();
        assert_eq!(m.compression, "SNAPPY");
        assert_eq!(
            &m.element_spec[..],
            b"\xa2\x03\x12\x0a\x07\x8a\x02\x04\x12\x00\x18\x09\x0a\x07\x8a\x02\x04\x12\x00\x18\x07"
        );
        assert_eq!(to_text(&m).as_bytes(), text);
    }

    #[test]
    fn round_trips_every_byte() {
        let m = DistributedSnapshotMetadata {
            element_spec: (0..=255u8).collect::<Vec<_>>().into(),
            compression: "GZIP".into(),
        };
        assert_eq!(from_text("m", to_text(&m).as_bytes()).unwrap(), m);
        let empty = DistributedSnapshotMetadata::default();
        assert_eq!(from_text("m", to_text(&empty).as_bytes()).unwrap(), empty);
    }

    #[test]
    fn accepts_text_formats_other_spellings() {
        let m = from_text(
            "m",
            b"# written by hand\ncompression: 'GZIP'\n element_spec: \"a\\x41\" \"\\101\"",
        )
        .unwrap();
        assert_eq!(m.compression, "GZIP");
        assert_eq!(&m.element_spec[..], b"aAA");
    }

    #[test]
    fn status_files_round_trip() {
        let status = StatusProto {
            code: 13,
            message: "disk full: \"/x\"\nwhile writing".into(),
            ..Default::default()
        };
        let text = status_to_text(&status);
        assert!(text.starts_with("code: INTERNAL\n"), "{text}");
        assert_eq!(status_from_text("ERROR", text.as_bytes()).unwrap(), status);
        let numeric = status_from_text("ERROR", b"code: 5 message: 'gone'").unwrap();
        assert_eq!((numeric.code, numeric.message.as_str()), (5, "gone"));
        let err = status_from_text("/s/ERROR", b"code: BROKEN").unwrap_err();
        assert!(err.to_string().contains("/s/ERROR"), "{err}");
    }

    #[test]
    fn damage_is_an_error_naming_file_and_offset() {
        for (bad, offset) in [
            (&b"element_spec: \"abc"[..], 18),
            (b"element_spec \"x\"", 13),
            (b"colour: \"red\"", 13),
            (b"compression: \"LZ4\"", 18),
            (b"element_spec: \"\\400\"", 19),
        ] {
            let err = from_text("/snap/snapshot.metadata", bad).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains("/snap/snapshot.metadata"), "{msg}");
            if !msg.contains("LZ4") {
                assert!(msg.contains(&format!("offset {offset}")), "{msg}");
            }
        }
    }
}
