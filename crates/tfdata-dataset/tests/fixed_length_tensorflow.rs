//! `fixed_length_record_dataset` and `assert_cardinality` against what
//! TensorFlow 2.21 did with the same inputs.
//!
//! `tests/fixtures/fixed_length/generate.py` ran `FixedLengthRecordDataset`
//! on small files (headers, footers, partial records, several files; plain,
//! GZIP and ZLIB) and `assert_cardinality` on ranges, and wrote the elements
//! and errors to `cases.txt`. Here the same files are written to a temporary
//! directory and read by the engine.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use tfdata_core::Error;
use tfdata_dataset::Dataset;
use tfdata_dataset::io::CompressionType;
use tfdata_dataset::io::fixed_length::write_fixed_length;

fn cases() -> Vec<Vec<String>> {
    let path = format!(
        "{}/tests/fixtures/fixed_length/cases.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn list(s: &str, sep: char) -> Vec<&str> {
    if s.is_empty() {
        Vec::new()
    } else {
        s.split(sep).collect()
    }
}

/// Elements until the end or the first error.
fn drain(ds: &Dataset) -> (Vec<tfdata_core::Element>, Option<Error>) {
    let mut out = Vec::new();
    let mut it = match ds.iter() {
        Ok(it) => it,
        Err(e) => return (out, Some(e)),
    };
    loop {
        match it.next_element() {
            Ok(Some(e)) => out.push(e),
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

fn check_error(what: &str, err: Option<Error>, class: &str, message: &str) {
    match (err, class) {
        (None, "") => {}
        (Some(e), class) => {
            let kind_ok = match class {
                "InvalidArgumentError" => matches!(e, Error::InvalidArgument(_)),
                "DataLossError" => matches!(e, Error::DataLoss { .. }),
                "FailedPreconditionError" => matches!(e, Error::FailedPrecondition(_)),
                _ => false,
            };
            assert!(kind_ok, "{what}: TensorFlow: {class}, tfdata: {e:?}");
            assert!(
                e.to_string().contains(message),
                "{what}: {e} lacks TensorFlow's {message:?}"
            );
        }
        (None, class) => panic!("{what}: TensorFlow failed with {class} {message}, tfdata ended"),
    }
}

#[test]
fn fixed_length_records_match_tensorflow() {
    let mut checked = 0;
    for case in cases().iter().filter(|c| c[0] == "flr") {
        let [_, name, compression, sizes, files, records, class, message] = case.as_slice() else {
            panic!("bad case {case:?}");
        };
        let what = format!("{name} {compression:?}");
        let [h, r, f] = sizes
            .split(',')
            .map(|v| v.parse::<i64>().unwrap())
            .collect::<Vec<_>>()[..]
        else {
            panic!("bad sizes {sizes}");
        };
        let dir = tempfile::tempdir().unwrap();
        let c = CompressionType::parse(compression).unwrap();
        let mut paths = Vec::new();
        for (i, data) in list(files, ';').into_iter().enumerate() {
            let path = dir.path().join(format!("{name}_{i}.bin"));
            let file = std::fs::File::create(&path).unwrap();
            write_fixed_length(file, c, &hex(data), &[], &[]).unwrap();
            paths.push(path.display().to_string());
        }
        let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
        let ds = Dataset::fixed_length_records(&paths, h, r, f, compression);
        let (got, err) = drain(&ds);
        let got: Vec<Vec<u8>> = got
            .iter()
            .map(|e| e.components[0].string_values().unwrap()[0].to_vec())
            .collect();
        let expected: Vec<Vec<u8>> = list(records, ',').into_iter().map(hex).collect();
        assert_eq!(got, expected, "{what}");
        let message = message.replace("{dir}", &dir.path().display().to_string());
        check_error(&what, err, class, &message);
        checked += 1;
    }
    assert_eq!(checked, 39, "every case in cases.txt");
}

#[test]
fn fixed_length_sizes_are_checked_with_tensorflows_messages() {
    for (h, r, f, message) in [
        (0, 0, 0, "`record_bytes` must be > 0"),
        (0, -1, 0, "`record_bytes` must be > 0"),
        (-1, 3, 0, "`header_bytes` must be >= 0"),
        (0, 3, -1, "`footer_bytes` must be >= 0"),
        (
            0,
            (1 << 30) + 1,
            0,
            "over tfdata's limit of 1073741824 bytes",
        ),
    ] {
        let ds = Dataset::fixed_length_records(&["unused"], h, r, f, "");
        let err = ds.validate().unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
        assert!(err.to_string().contains(message), "{err}");
        assert!(ds.iter().is_err());
    }
    let err = Dataset::fixed_length_records(&["x"], 0, 3, 0, "gzip")
        .validate()
        .unwrap_err();
    assert!(err.to_string().contains("not supported"), "{err}");
}

/// TensorFlow's internal OutOfRange error for a file shorter than its
/// header is a clear error here (a documented difference).
#[test]
fn files_shorter_than_header_and_footer_fail() {
    let dir = tempfile::tempdir().unwrap();
    for (compression, data) in [("", &b"H"[..]), ("GZIP", b"H"), ("ZLIB", b"HHFF")] {
        let path = dir.path().join("short.bin");
        let c = CompressionType::parse(compression).unwrap();
        write_fixed_length(std::fs::File::create(&path).unwrap(), c, data, &[], &[]).unwrap();
        let ds = Dataset::fixed_length_records(&[path.to_str().unwrap()], 2, 1, 3, compression);
        let (got, err) = drain(&ds);
        assert!(got.is_empty());
        let err = err.expect("a short file is an error");
        assert!(
            err.to_string().contains(&format!(
                "has {} bytes, fewer than its header (2 bytes) and footer (3 bytes)",
                data.len()
            )),
            "{err}"
        );
    }
}

/// An uncompressed file shorter than its header and footer: TensorFlow's
/// unsigned body length wraps around. Not a whole number of records, its
/// error gives the wrapped length; a whole number (2^64 - 1 is a multiple of
/// 3) with the header inside the file, no records (both seen in TF 2.21).
#[test]
fn uncompressed_short_files_wrap_as_tensorflow() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short.bin");
    std::fs::write(&path, b"H").unwrap();
    let path = path.to_str().unwrap();
    let (got, err) = drain(&Dataset::fixed_length_records(&[path], 2, 3, 1, ""));
    assert!(got.is_empty());
    let err = err.expect("a partial body");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains("has body length 18446744073709551614 bytes, which is not"),
        "{err}"
    );
    let path4 = dir.path().join("four.bin");
    std::fs::write(&path4, b"HHFF").unwrap();
    for (h, r, f) in [(2, 3, 3), (4, 1, 1), (0, 1, 5)] {
        let ds = Dataset::fixed_length_records(&[path4.to_str().unwrap()], h, r, f, "");
        let (got, err) = drain(&ds);
        assert!(got.is_empty() && err.is_none(), "{h},{r},{f}: {err:?}");
    }
}

#[test]
fn assert_cardinality_matches_tensorflow() {
    let mut checked = 0;
    for case in cases().iter().filter(|c| c[0] == "card") {
        let [_, expected, n, elements, class, message] = case.as_slice() else {
            panic!("bad case {case:?}");
        };
        let (expected, n): (i64, i64) = (expected.parse().unwrap(), n.parse().unwrap());
        let what = format!("assert_cardinality({expected}) of range({n})");
        let ds = Dataset::range(n).assert_cardinality(expected);
        assert_eq!(ds.cardinality(), expected, "{what}");
        let (got, err) = drain(&ds);
        let got: Vec<i64> = got
            .iter()
            .map(|e| e.components[0].to_scalar::<i64>().unwrap())
            .collect();
        let want: Vec<i64> = list(elements, ',')
            .into_iter()
            .map(|v| v.parse().unwrap())
            .collect();
        assert_eq!(got, want, "{what}");
        check_error(&what, err, class, message);
        checked += 1;
    }
    assert_eq!(checked, 12, "every case in cases.txt");
}

#[test]
fn assert_cardinality_passes_an_infinite_input() {
    let ds = Dataset::range(2)
        .repeat(None)
        .assert_cardinality(-1)
        .take(5);
    let (got, err) = drain(&ds);
    assert!(err.is_none());
    assert_eq!(got.len(), 5);
}
