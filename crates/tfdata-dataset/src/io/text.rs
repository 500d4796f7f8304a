//! Lines of text files, as `TextLineDataset` reads them.
//!
//! TensorFlow 2.21's line splitting (`BufferedInputStream::ReadLine`),
//! verified with real TensorFlow on the fixtures in
//! `tests/fixtures/io/`:
//!
//! * a line ends at `\n`, which is not part of the element;
//! * every `\r` is dropped, wherever it is in the line, not only before the
//!   `\n`: `"a\r\nb"` gives `a`, `b`, but `"a\rb\n"` gives `ab` and
//!   `"a\rb\rc"` (old Mac line ends) is the single line `abc`;
//! * empty lines are elements (`"\n\na\n"` gives ``, ``, `a`);
//! * a last line without `\n` is an element, unless it is empty once the
//!   `\r`s are gone: `"a\nb"` gives `a`, `b`; `"a\n"` and `"a\n\r"` give
//!   just `a`;
//! * nothing else is touched: a UTF-8 byte-order mark stays in the first
//!   line, NUL bytes and invalid UTF-8 pass through (elements are bytes).
//!
//! Compressed files and error reporting work as in
//! [`super::tfrecord_reader`]: a corrupt or truncated compressed stream is
//! [`tfdata_core::Error::DataLoss`] naming the file and the uncompressed
//! offset of the line being read, and the iterator then ends.

use std::io::{BufRead, Read};

use bytes::Bytes;
use tfdata_core::Result;

use super::compression::{CompressionType, DEFAULT_BUFFER_SIZE};
use super::fs::FileSystem;
use super::stream::ItemStream;

/// What errors call one item.
const ITEM: &str = "line";

/// Reads the lines of one text file in order, one `Bytes` per line with
/// TensorFlow's `TextLineDataset` semantics (see the module docs).
pub struct TextLineReader {
    stream: ItemStream,
}

impl TextLineReader {
    /// Opens `path` (a local path or URL, see [`super::fs`]).
    pub fn open(path: &str, compression: CompressionType) -> Result<Self> {
        let stream = ItemStream::open(path, compression, ITEM)?;
        Ok(Self { stream })
    }

    /// Opens `path` on a given file system.
    pub fn open_on(fs: &dyn FileSystem, path: &str, compression: CompressionType) -> Result<Self> {
        let stream = ItemStream::open_on(fs, path, compression, ITEM)?;
        Ok(Self { stream })
    }

    /// Reads lines from any byte stream; `name` is what errors call it.
    pub fn new(
        name: impl Into<String>,
        input: impl Read + Send + 'static,
        compression: CompressionType,
    ) -> Self {
        Self::with_buffer_size(name, input, compression, DEFAULT_BUFFER_SIZE)
    }

    /// Like [`TextLineReader::new`] with TensorFlow's `buffer_size`.
    pub fn with_buffer_size(
        name: impl Into<String>,
        input: impl Read + Send + 'static,
        compression: CompressionType,
        buffer_size: usize,
    ) -> Self {
        let stream = ItemStream::new(name, input, compression, buffer_size, ITEM);
        Self { stream }
    }

    /// The file's name as errors give it.
    pub fn name(&self) -> &str {
        &self.stream.name
    }

    /// The (uncompressed) byte offset of the next line.
    pub fn offset(&self) -> u64 {
        self.stream.offset
    }

    /// The next line, `Ok(None)` at the end of the file. After an error,
    /// always `Ok(None)`.
    pub fn read_line(&mut self) -> Result<Option<Bytes>> {
        self.stream.next_item(read_line)
    }
}

fn read_line(s: &mut ItemStream) -> Result<Option<Bytes>> {
    let start = s.offset;
    let mut line = Vec::new();
    let read = s
        .input
        .read_until(b'\n', &mut line)
        .map_err(|e| s.read_error(start, e))?;
    s.offset += read as u64;
    let terminated = line.last() == Some(&b'\n');
    if terminated {
        line.pop();
    }
    line.retain(|&b| b != b'\r');
    if line.is_empty() && !terminated {
        // End of input, or a last "line" that was only `\r`s.
        return Ok(None);
    }
    Ok(Some(Bytes::from(line)))
}

impl std::fmt::Debug for TextLineReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.stream.debug(f, "TextLineReader")
    }
}

impl Iterator for TextLineReader {
    type Item = Result<Bytes>;

    fn next(&mut self) -> Option<Self::Item> {
        self.read_line().transpose()
    }
}

impl std::iter::FusedIterator for TextLineReader {}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::io::compression::Compressor;

    fn lines(text: &[u8]) -> Vec<Vec<u8>> {
        TextLineReader::with_buffer_size(
            "t.txt",
            std::io::Cursor::new(text.to_vec()),
            CompressionType::None,
            3,
        )
        .map(|l| l.unwrap().to_vec())
        .collect()
    }

    fn v(lines: &[&str]) -> Vec<Vec<u8>> {
        lines.iter().map(|l| l.as_bytes().to_vec()).collect()
    }

    /// Each case's expectation is what TensorFlow 2.21's `TextLineDataset`
    /// returned for the same bytes.
    #[test]
    fn matches_tensorflow_line_splitting() {
        let cases: &[(&[u8], &[&str])] = &[
            (b"a\r\nb\r\n", &["a", "b"]),
            (b"a\nb", &["a", "b"]),
            (b"\n\na\n\n", &["", "", "a", ""]),
            (b"a\rb\nc", &["ab", "c"]),
            (b"a\n\r", &["a"]),
            (b"a\r\r\nb", &["a", "b"]),
            (b"\n", &[""]),
            (b"", &[]),
            (b"\xef\xbb\xbfa\nb", &["\u{feff}a", "b"]),
            (b"a\rb\rc", &["abc"]),
            (b"a\nb\r", &["a", "b"]),
            (b"a\x00b\n", &["a\0b"]),
        ];
        for (text, expected) in cases {
            assert_eq!(
                lines(text),
                v(expected),
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn compressed_lines_and_corruption() {
        let text = b"one\r\ntwo\n\nlast".repeat(5000);
        // "last" is glued to the next "one"; the file ends without "\n".
        let expected: Vec<Vec<u8>> = {
            let mut out: Vec<Vec<u8>> = text
                .split(|&b| b == b'\n')
                .map(|l| l.iter().copied().filter(|&b| b != b'\r').collect())
                .collect();
            if out.last().is_some_and(|l| l.is_empty()) {
                out.pop();
            }
            out
        };
        for c in [CompressionType::Gzip, CompressionType::Zlib] {
            let mut w = Compressor::new(Vec::new(), c);
            w.write_all(&text).unwrap();
            let compressed = w.finish().unwrap();
            let got: Vec<Vec<u8>> =
                TextLineReader::new("t.gz", std::io::Cursor::new(compressed.clone()), c)
                    .map(|l| l.unwrap().to_vec())
                    .collect();
            assert_eq!(got, expected, "{c}");

            let cut = compressed[..compressed.len() / 2].to_vec();
            let mut reader = TextLineReader::new("t.gz", std::io::Cursor::new(cut), c);
            let err = reader
                .by_ref()
                .find_map(|l| l.err())
                .expect("truncation is an error");
            assert!(matches!(err, tfdata_core::Error::DataLoss { .. }), "{err}");
            let msg = err.to_string();
            assert!(
                msg.contains("t.gz at offset") && msg.contains("uncompressed"),
                "{msg}"
            );
            assert!(reader.next().is_none());
        }
    }
}
