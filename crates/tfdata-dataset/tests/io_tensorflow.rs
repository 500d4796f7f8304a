//! The file readers checked against files TensorFlow 2.21 wrote and against
//! what TensorFlow read back from them.
//!
//! `tests/fixtures/io/generate.py` wrote the fixtures with
//! `tf.io.TFRecordWriter` (plain, GZIP, ZLIB), plus text files, corrupted and
//! truncated copies, and a glob test tree; next to each it recorded what
//! `TFRecordDataset`, `TextLineDataset` and `tf.io.gfile.glob` made of it
//! (`*.expected`). The record and line generators are reimplemented here, so
//! contents are compared byte for byte, not only against the script's
//! summaries.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::io::Read;

use bytes::Bytes;
use tfdata_core::Error;
use tfdata_core::tfrecord::masked_crc32c;
use tfdata_dataset::io::{
    CompressionType, FileSystem, LocalFileSystem, TextLineReader, TfRecordReader, TfRecordWriter,
};

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/io/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn expected(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Must match `xorshift_bytes` in generate.py.
fn xorshift_bytes(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x & 0xff) as u8
        })
        .collect()
}

/// Must match `records()` in generate.py.
fn records() -> Vec<Vec<u8>> {
    vec![
        b"".to_vec(),
        b"a".to_vec(),
        b"hello, TFRecord".to_vec(),
        (0..=255u8).collect(),
        xorshift_bytes(1000, 2_463_534_242),
        (0..70_000usize)
            .map(|i| ((i * 7 + i / 1000) % 256) as u8)
            .collect(),
        b"".to_vec(),
        b"last record".to_vec(),
    ]
}

/// Must match `many_lines()` in generate.py: the elements TensorFlow read.
fn many_lines() -> Vec<Vec<u8>> {
    (0..8000)
        .map(|i| {
            if i % 97 == 0 {
                Vec::new()
            } else {
                format!("line {i} of many").into_bytes()
            }
        })
        .collect()
}

fn compression_of(name: &str) -> CompressionType {
    if name.ends_with(".gz") {
        CompressionType::Gzip
    } else if name.ends_with(".zlib") {
        CompressionType::Zlib
    } else {
        CompressionType::None
    }
}

/// Every item of a reader: the good ones, then the error if there is one.
fn drain(items: impl Iterator<Item = tfdata_core::Result<Bytes>>) -> (Vec<Bytes>, Option<Error>) {
    let mut good = Vec::new();
    for item in items {
        match item {
            Ok(item) => good.push(item),
            Err(e) => return (good, Some(e)),
        }
    }
    (good, None)
}

fn hex(line: &str) -> Vec<u8> {
    (0..line.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&line[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn reads_tensorflow_tfrecords_in_every_compression() {
    let summary: Vec<(usize, u32)> = expected("records.expected")
        .lines()
        .map(|l| {
            let (len, crc) = l.split_once(' ').unwrap();
            (len.parse().unwrap(), u32::from_str_radix(crc, 16).unwrap())
        })
        .collect();
    let records = records();
    assert_eq!(summary.len(), records.len());
    assert!(records.iter().any(|r| r.is_empty()));
    assert!(records.iter().any(|r| r.len() > 64 * 1024));
    for name in [
        "records.tfrecord",
        "records.tfrecord.gz",
        "records.tfrecord.zlib",
    ] {
        let reader = TfRecordReader::open(&fixture(name), compression_of(name)).unwrap();
        let (got, err) = drain(reader);
        assert!(err.is_none(), "{name}: {err:?}");
        assert_eq!(got.len(), records.len(), "{name}");
        for (i, ((got, want), (len, crc))) in got.iter().zip(&records).zip(&summary).enumerate() {
            assert_eq!(&got[..], &want[..], "{name} record {i}");
            assert_eq!(
                (got.len(), masked_crc32c(got)),
                (*len, *crc),
                "{name} record {i}"
            );
        }
    }
}

#[test]
fn writer_output_reads_like_tensorflow_output() {
    let records = records();
    let plain = std::fs::read(fixture("records.tfrecord")).unwrap();
    for c in [
        CompressionType::None,
        CompressionType::Gzip,
        CompressionType::Zlib,
    ] {
        let mut w = TfRecordWriter::new("mem", Vec::new(), c);
        for r in &records {
            w.write(r).unwrap();
        }
        let ours = w.finish().unwrap();
        // Deflate encoders may choose differently; the framing inside must
        // be TensorFlow's byte for byte.
        let uncompressed = match c {
            CompressionType::None => ours.clone(),
            CompressionType::Gzip => {
                let mut out = Vec::new();
                flate2::read::GzDecoder::new(&ours[..])
                    .read_to_end(&mut out)
                    .unwrap();
                out
            }
            CompressionType::Zlib => {
                // TensorFlow's ZLIB files start with a zlib header.
                assert_eq!(&ours[..2], &[0x78, 0x9c]);
                let mut out = Vec::new();
                flate2::read::ZlibDecoder::new(&ours[..])
                    .read_to_end(&mut out)
                    .unwrap();
                out
            }
        };
        assert_eq!(uncompressed, plain, "{c}");
    }
    // And TensorFlow's compressed files hold exactly the plain file.
    let tf_gz = std::fs::read(fixture("records.tfrecord.gz")).unwrap();
    assert_eq!(&tf_gz[..2], &[0x1f, 0x8b]);
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&tf_gz[..])
        .read_to_end(&mut out)
        .unwrap();
    assert_eq!(out, plain);
}

/// Each corrupted or truncated fixture fails after the same good records as
/// in TensorFlow, with a `DataLoss` naming the file and TensorFlow's offset.
#[test]
fn corrupt_tfrecords_fail_where_tensorflow_does() {
    let small: [&[u8]; 4] = [b"first", b"", b"third record", b"fourth"];
    let (good, err) =
        drain(TfRecordReader::open(&fixture("small.tfrecord"), CompressionType::None).unwrap());
    assert!(err.is_none());
    assert_eq!(good, small.map(Bytes::from_static).to_vec());

    for name in [
        "corrupt_data.tfrecord",
        "corrupt_data.tfrecord.gz",
        "corrupt_length.tfrecord",
        "corrupt_data_crc.tfrecord",
        "truncated_data.tfrecord",
        "truncated_header.tfrecord",
    ] {
        let tf = expected(&format!("{name}.expected"));
        let mut lines = tf.lines();
        let tf_good: usize = lines
            .next()
            .unwrap()
            .strip_prefix("records ")
            .unwrap()
            .parse()
            .unwrap();
        let tf_error = lines.next().unwrap().strip_prefix("error ").unwrap();

        let path = fixture(name);
        let mut reader = TfRecordReader::open(&path, compression_of(name)).unwrap();
        let (got, err) = drain(reader.by_ref());
        assert_eq!(got.len(), tf_good, "{name}: good records before the error");
        assert_eq!(
            &got[..],
            &small.map(Bytes::from_static)[..tf_good],
            "{name}"
        );
        assert!(
            reader.next().is_none(),
            "{name}: the reader ends after an error"
        );

        let err = err.unwrap_or_else(|| panic!("{name}: no error (TensorFlow: {tf_error})"));
        assert!(matches!(err, Error::DataLoss { .. }), "{name}: {err}");
        let msg = err.to_string();
        assert!(msg.contains(&path), "{name}: {msg} does not name the file");
        if name.ends_with(".gz") {
            assert!(msg.contains("uncompressed"), "{msg}");
        }
        if let Some(tf_message) = tf_error.strip_prefix("DataLossError: ") {
            // TensorFlow: "corrupted record at N" / "truncated record at N' failed with ...".
            let (what, rest) = tf_message.split_once(" at ").unwrap();
            let offset: u64 = rest
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap();
            match what {
                "corrupted record" => {
                    assert!(
                        msg.contains(&format!("corrupted record at {offset}")),
                        "{msg}"
                    )
                }
                "truncated record" => assert!(
                    msg.contains(&format!("truncated record at offset {offset}")),
                    "{msg}"
                ),
                other => panic!("unexpected TensorFlow error {other}"),
            }
        } else {
            // TensorFlow treats a header cut short as the end of the file;
            // tfdata reports the lost record (see tfrecord_reader's docs).
            assert_eq!((name, tf_error), ("truncated_header.tfrecord", "none"));
            assert!(msg.contains("truncated record at offset 65"), "{msg}");
        }
    }
}

#[test]
fn text_lines_match_tensorflow() {
    for name in [
        "lines.txt",
        "lines.txt.gz",
        "lines.txt.zlib",
        "empty.txt",
        "only_newlines.txt",
        "cr_only_last_line.txt",
        "old_mac.txt",
        "trailing_cr.txt",
    ] {
        let want: Vec<Vec<u8>> = expected(&format!("{name}.expected"))
            .lines()
            .map(hex)
            .collect();
        let (got, err) = drain(TextLineReader::open(&fixture(name), compression_of(name)).unwrap());
        assert!(err.is_none(), "{name}: {err:?}");
        assert_eq!(got, want, "{name}");
    }
    // Spot-check the TensorFlow behaviours the fixtures pin down.
    let lines: Vec<Vec<u8>> = expected("lines.txt.expected").lines().map(hex).collect();
    assert!(lines[0].starts_with(b"\xef\xbb\xbf"), "the BOM is kept");
    assert_eq!(lines[1], b"second");
    assert_eq!(lines[2], b"", "empty lines are elements");
    assert_eq!(
        lines[3], b"fourth, after an empty line",
        "\\r\\n is a terminator"
    );
    assert_eq!(lines[5], b"a loneCR inside", "every \\r is dropped");
    assert_eq!(lines.last().unwrap(), b"last line without a newline");
}

#[test]
fn long_gzip_text_matches_tensorflow() {
    let name = "many_lines.txt.gz";
    let (got, err) = drain(TextLineReader::open(&fixture(name), CompressionType::Gzip).unwrap());
    assert!(err.is_none(), "{err:?}");
    assert_eq!(got, many_lines());
}

/// Recreates generate.py's directory tree and checks every pattern's matches.
#[test]
fn glob_matches_tensorflow() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let mut patterns = 0;
    for line in expected("glob.expected").lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        match fields[0] {
            "file" => {
                let path = dir.path().join(fields[1]);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, b"x").unwrap();
            }
            "dir" => std::fs::create_dir_all(dir.path().join(fields[1])).unwrap(),
            "glob" => {
                patterns += 1;
                let pattern = fields[1].replace("{root}", root);
                let want: Vec<String> = fields[2..]
                    .iter()
                    .map(|m| m.replace("{root}", root))
                    .collect();
                let got = tfdata_dataset::io::glob(&pattern).unwrap();
                assert_eq!(got, want, "{}", fields[1]);
                assert_eq!(LocalFileSystem.glob(&pattern).unwrap(), want);
            }
            other => panic!("bad line kind {other}"),
        }
    }
    assert!(patterns >= 20);
}

#[test]
fn object_store_urls_are_unimplemented() {
    let url = "hdfs://namenode/bucket/data/train-*.tfrecord";
    let errors = [
        tfdata_dataset::io::glob(url).unwrap_err(),
        tfdata_dataset::io::read_all(url).unwrap_err(),
        tfdata_dataset::io::exists(url).unwrap_err(),
        tfdata_dataset::io::open(url).err().unwrap(),
        TfRecordReader::open(url, CompressionType::None).unwrap_err(),
        TextLineReader::open(url, CompressionType::Gzip).unwrap_err(),
        TfRecordWriter::create(url, CompressionType::None)
            .err()
            .unwrap(),
    ];
    for err in errors {
        assert!(matches!(err, Error::Unimplemented(_)), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("'hdfs'") && msg.contains(url), "{msg}");
    }
}
