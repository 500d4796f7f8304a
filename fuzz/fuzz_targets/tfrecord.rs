//! TFRecord framing from disk: `tfdata_core::tfrecord::read_records` (the
//! in-memory reader of the journal and dataset files) and the dataset
//! crate's streaming `TfRecordReader` and `TextLineReader`, uncompressed,
//! GZIP and ZLIB, through buffers of fuzz-chosen sizes. Uncompressed, the
//! two TFRecord readers must agree record for record.
//!
//! Input: a mode byte (bits 0-1: compression; bit 2: text lines), a buffer
//! size byte, then the file.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use tfdata_core::tfrecord::{self, Tail};
use tfdata_dataset::io::{CompressionType, TextLineReader, TfRecordReader};
use tfdata_fuzz::Input;

/// Each record takes at least 16 bytes of the uncompressed stream, each
/// line one; a deflate stream expands at most ~1032 times.
fn item_bound(len: usize) -> usize {
    (len + 1) * 1100
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mode = input.u8();
    let buffer_size = match input.u8() {
        0 => tfdata_dataset::io::DEFAULT_BUFFER_SIZE,
        n => usize::from(n),
    };
    let file = input.rest();
    let compression = match mode & 3 {
        0 | 3 => CompressionType::None,
        1 => CompressionType::Gzip,
        _ => CompressionType::Zlib,
    };

    if mode & 4 != 0 {
        let mut reader = TextLineReader::with_buffer_size(
            "fuzz",
            Cursor::new(file.to_vec()),
            compression,
            buffer_size,
        );
        for _ in 0..item_bound(file.len()) {
            match reader.read_line() {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return,
            }
        }
        panic!("TextLineReader did not end");
    }

    let core = tfrecord::read_records("fuzz", file);
    let mut reader = TfRecordReader::with_buffer_size(
        "fuzz",
        Cursor::new(file.to_vec()),
        compression,
        buffer_size,
    );
    let mut streamed = Vec::new();
    let mut error = false;
    let mut ended = false;
    for _ in 0..item_bound(file.len()) {
        match reader.read_record() {
            Ok(Some(r)) => streamed.push(r),
            Ok(None) => {
                ended = true;
                break;
            }
            Err(_) => {
                error = true;
                ended = true;
                break;
            }
        }
    }
    assert!(ended, "TfRecordReader did not end");
    // After its error a reader is finished.
    assert!(
        matches!(reader.read_record(), Ok(None)),
        "read after the end"
    );
    if compression != CompressionType::None {
        return;
    }
    match core {
        Ok((records, Tail::Clean)) => {
            assert!(!error, "streaming reader failed on a clean file");
            assert_eq!(streamed, records, "the two readers disagree");
        }
        Ok((records, Tail::Torn { .. })) => {
            // Streaming reads a torn tail as a truncated record.
            assert!(error, "streaming reader accepted a torn tail");
            assert_eq!(streamed, records, "the two readers disagree");
        }
        Err(_) => assert!(error, "streaming reader accepted a corrupt file"),
    }
});
