//! The io layer on real files: writing and reading back through paths and
//! `file://` URLs, glob paths relative to the working directory, and errors
//! that name the file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::io::Write;

use bytes::Bytes;
use tfdata_core::Error;
use tfdata_dataset::io::{
    CompressionType, FileSystem, LocalFileSystem, TextLineReader, TfRecordReader, TfRecordWriter,
    file_system, glob,
};

const ALL: [CompressionType; 3] = [
    CompressionType::None,
    CompressionType::Gzip,
    CompressionType::Zlib,
];

#[test]
fn tfrecord_files_round_trip_through_paths_and_urls() {
    let dir = tempfile::tempdir().unwrap();
    // 300 records of up to 40 KiB: several MiB, far more than one buffer.
    let records: Vec<Vec<u8>> = (0..300u32)
        .map(|i| (0..(i * 137) % 40_000).map(|j| (i + j) as u8).collect())
        .collect();
    for c in ALL {
        let path = format!("{}/data-{c}.tfrecord", dir.path().display());
        let mut w = TfRecordWriter::create(&path, c).unwrap();
        for r in &records {
            w.write(r).unwrap();
        }
        w.finish().unwrap();
        for name in [path.clone(), format!("file://{path}")] {
            let got: Vec<Bytes> = TfRecordReader::open(&name, c)
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(got.len(), records.len(), "{name}");
            assert!(
                got.iter().zip(&records).all(|(g, r)| g[..] == r[..]),
                "{name}"
            );
        }
        // The offset is the uncompressed stream's length after the last record.
        let mut reader = TfRecordReader::open(&path, c).unwrap();
        reader.by_ref().for_each(|r| {
            r.unwrap();
        });
        let total: u64 = records.iter().map(|r| r.len() as u64 + 16).sum();
        assert_eq!(reader.offset(), total);
        if c == CompressionType::None {
            assert_eq!(LocalFileSystem.file_size(&path).unwrap(), total);
        }
    }
}

#[test]
fn text_files_read_through_paths() {
    let dir = tempfile::tempdir().unwrap();
    let path = format!("{}/lines.txt.gz", dir.path().display());
    let mut out = file_system(&path).unwrap().create(&path).unwrap();
    let mut gz = flate2::write::GzEncoder::new(&mut out, flate2::Compression::default());
    gz.write_all(b"alpha\r\nbeta\n\ngamma").unwrap();
    gz.finish().unwrap();
    drop(out);
    let got: Vec<Bytes> = TextLineReader::open(&format!("file://{path}"), CompressionType::Gzip)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(got, ["alpha", "beta", "", "gamma"].map(Bytes::from));

    // The same file read without decompression is just (odd) lines, not an
    // error: text has no framing to check.
    let raw = TextLineReader::open(&path, CompressionType::None).unwrap();
    assert!(raw.count() >= 1);
}

#[test]
fn missing_files_are_not_found_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = format!("{}/missing.tfrecord", dir.path().display());
    let errors = [
        TfRecordReader::open(&path, CompressionType::None).unwrap_err(),
        TextLineReader::open(&path, CompressionType::None).unwrap_err(),
        tfdata_dataset::io::read_all(&path).unwrap_err(),
    ];
    for err in errors {
        assert!(matches!(err, Error::NotFound { what: "file", .. }), "{err}");
        assert!(err.to_string().contains(&path), "{err}");
    }
    assert!(!tfdata_dataset::io::exists(&path).unwrap());
    assert!(glob(&path).unwrap().is_empty());
}

#[test]
fn corruption_in_a_written_file_names_path_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = format!("{}/c.tfrecord", dir.path().display());
    let mut w = TfRecordWriter::create(&path, CompressionType::None).unwrap();
    for r in [&b"one"[..], b"two", b"three"] {
        w.write(r).unwrap();
    }
    w.finish().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    // Record 2 starts at 2 * (16 + 3) = 38; flip a data byte.
    bytes[38 + 13] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let mut reader = TfRecordReader::open(&path, CompressionType::None).unwrap();
    assert_eq!(&reader.next().unwrap().unwrap()[..], b"one");
    assert_eq!(&reader.next().unwrap().unwrap()[..], b"two");
    let err = reader.next().unwrap().unwrap_err();
    assert!(
        err.to_string().contains(&format!("{path} at offset 38")),
        "{err}"
    );
    assert!(reader.next().is_none());
}

/// A pattern without a directory is searched in `.` and returned as
/// `./name`, as `tf.io.gfile.glob` does; one with a directory keeps it.
/// Cargo runs tests in the package root.
#[test]
fn relative_globs_keep_tensorflow_prefixes() {
    assert_eq!(glob("Cargo.t?ml").unwrap(), ["./Cargo.toml"]);
    assert_eq!(glob("./Cargo.t?ml").unwrap(), ["./Cargo.toml"]);
    assert_eq!(
        glob("tests/fixtures/io/records.tfrecord*").unwrap(),
        [
            "tests/fixtures/io/records.tfrecord",
            "tests/fixtures/io/records.tfrecord.gz",
            "tests/fixtures/io/records.tfrecord.zlib",
        ]
    );
}

#[test]
fn glob_results_are_sorted_bytewise() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["b", "a10", "a2", "A", "_x", ".h", "a1", "é", "z"];
    for n in names {
        std::fs::write(dir.path().join(format!("{n}.rec")), b"").unwrap();
    }
    let root = dir.path().display().to_string();
    let got = glob(&format!("{root}/*.rec")).unwrap();
    let mut want: Vec<String> = names.iter().map(|n| format!("{root}/{n}.rec")).collect();
    want.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    assert_eq!(got, want);
    assert_eq!(
        got.iter()
            .map(|p| p.rsplit('/').next().unwrap())
            .collect::<Vec<_>>(),
        [
            ".h.rec", "A.rec", "_x.rec", "a1.rec", "a10.rec", "a2.rec", "b.rec", "z.rec", "é.rec"
        ]
    );
}
