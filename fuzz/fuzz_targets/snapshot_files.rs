//! The files of a distributed snapshot, as read from disk: chunk files
//! (`ChunkReader`, in all four compressions, with fuzz-chosen component
//! dtypes), `snapshot.metadata` and `ERROR` files (protobuf text form), and
//! the names of chunks, splits, checkpoints and stream directories. What
//! reads back whole must write back the same: chunks through `ChunkWriter`,
//! texts through their printers, names through their formatters.
//!
//! Input: a mode byte (bits 0-1: compression; bits 2-3: chunk, metadata,
//! status or name), for chunks a byte of component count and one dtype
//! byte per component, then the file.
#![no_main]

use std::io::{Cursor, Write};
use std::sync::{Arc, Mutex};

use libfuzzer_sys::fuzz_target;
use tfdata_core::{DType, Element};
use tfdata_dataset::snapshot::chunk::{ChunkReader, ChunkWriter};
use tfdata_dataset::snapshot::layout::{self, SnapshotCompression};
use tfdata_dataset::snapshot::metadata;
use tfdata_fuzz::Input;

/// Each record takes at least 16 bytes of the uncompressed stream; deflate
/// expands at most ~1032 times and Snappy 22 times (checked by the reader).
fn element_bound(len: usize) -> usize {
    (len + 1) * 1100
}

/// A chunk written to memory the reader can read afterwards.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn read_all(file: &[u8], c: SnapshotCompression, dtypes: &[DType]) -> Option<Vec<Element>> {
    let reader = ChunkReader::new(
        "fuzz",
        Box::new(Cursor::new(file.to_vec())),
        c,
        dtypes.to_vec(),
    )
    .ok()?;
    let mut out = Vec::new();
    for (i, element) in reader.enumerate() {
        assert!(
            i <= element_bound(file.len()),
            "more elements than the file can hold"
        );
        out.push(element.ok()?);
    }
    Some(out)
}

fn encoded(elements: &[Element]) -> Vec<Vec<u8>> {
    elements
        .iter()
        .map(|e| {
            let u = tfdata_core::element::to_uncompressed(e);
            prost::Message::encode_to_vec(&u)
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mode = input.u8();
    let compression = match mode & 3 {
        0 => SnapshotCompression::None,
        1 => SnapshotCompression::Snappy,
        2 => SnapshotCompression::Gzip,
        _ => SnapshotCompression::Zlib,
    };
    match (mode >> 2) & 3 {
        0 => {
            let count = usize::from(input.u8() % 4);
            let dtypes: Vec<DType> = (0..count)
                .filter_map(|_| DType::from_code(i32::from(input.u8() % 24)).ok())
                .collect();
            let file = input.rest();
            let Some(elements) = read_all(file, compression, &dtypes) else {
                return;
            };
            let out = Shared::default();
            let mut writer = ChunkWriter::new(Box::new(out.clone()), compression);
            for e in &elements {
                writer.write(e).expect("an element read back writes");
            }
            writer.finish().expect("a chunk finishes");
            let written = out.0.lock().unwrap().clone();
            let again = read_all(&written, compression, &dtypes).expect("our own chunk reads back");
            assert!(
                encoded(&again) == encoded(&elements),
                "a chunk changed through a round trip"
            );
        }
        1 => {
            let text = input.rest();
            if let Ok(m) = metadata::from_text("fuzz", text) {
                let printed = metadata::to_text(&m);
                assert_eq!(metadata::from_text("fuzz", printed.as_bytes()).unwrap(), m);
            }
        }
        2 => {
            let text = input.rest();
            if let Ok(s) = metadata::status_from_text("fuzz", text) {
                let printed = metadata::status_to_text(&s);
                let back = metadata::status_from_text("fuzz", printed.as_bytes()).unwrap();
                assert_eq!((back.code, back.message), (s.code, s.message));
            }
        }
        _ => {
            let Ok(name) = std::str::from_utf8(input.rest()) else {
                return;
            };
            // Names format back to what parses the same (leading zeros
            // parse, as with TensorFlow's `SimpleAtoi`, and do not print).
            if let Ok(c) = layout::parse_chunk_name(name) {
                let printed = layout::chunk_name(c.stream, c.chunk, c.num_elements);
                assert_eq!(layout::parse_chunk_name(&printed).unwrap(), c);
            }
            if let Ok(s) = layout::parse_split_name(name) {
                assert!(s.local <= s.global);
            }
            if let Ok((chunk, n)) = layout::parse_checkpoint_name(name) {
                let printed = layout::checkpoint_name(chunk, n);
                assert_eq!(layout::parse_checkpoint_name(&printed).unwrap(), (chunk, n));
            }
            let _ = layout::parse_indexed_dir(name, "stream");
        }
    }
});
