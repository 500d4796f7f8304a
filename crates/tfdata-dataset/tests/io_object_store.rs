//! The io layer on a real S3-compatible server (moto, started per test, see
//! `io_object_store_moto`): TFRecord and text files written to and read back
//! from `s3://` URLs, globbing, and errors that name the URL.
//!
//! Each test builds its [`ObjectStoreFileSystem`] with explicit endpoint and
//! credentials rather than through environment variables, since tests run
//! in parallel threads of one process. `io_object_store_pipeline.rs` covers
//! the environment and the process-wide file system.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod io_object_store_moto;

use std::io::{Read, Write};
use std::time::Duration;

use bytes::Bytes;
use io_object_store_moto::Moto;
use object_store::RetryConfig;
use tfdata_core::Error;
use tfdata_dataset::io::{
    CompressionType, FileSystem, ObjectStoreFileSystem, TextLineReader, TfRecordReader,
    TfRecordWriter,
};

fn records(n: u32, max_len: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| (0..(i * 7919) % max_len).map(|j| (i ^ j) as u8).collect())
        .collect()
}

fn write_tfrecords(fs: &dyn FileSystem, url: &str, c: CompressionType, records: &[Vec<u8>]) {
    let mut w = TfRecordWriter::new(url, fs.create(url).unwrap(), c);
    for r in records {
        w.write(r).unwrap();
    }
    w.finish().unwrap();
}

fn read_tfrecords(fs: &dyn FileSystem, url: &str, c: CompressionType) -> Vec<Bytes> {
    TfRecordReader::open_on(fs, url, c)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn tfrecords_round_trip_through_s3() {
    let Some(moto) = Moto::start() else {
        return;
    };
    moto.create_bucket("tfrecords");
    // 1 MiB reads: many ranged GETs per file, with prefetching; 5 MiB parts
    // (S3's minimum) so the plain file is a multipart upload.
    let fs = moto
        .file_system()
        .with_read_chunk_size(1 << 20)
        .with_part_size(5 << 20);
    // ~12 MiB uncompressed.
    let records = records(600, 40_000);
    let total: u64 = records.iter().map(|r| r.len() as u64 + 16).sum();
    assert!(total > 10 << 20, "{total}");
    for (c, name) in [
        (CompressionType::None, "plain"),
        (CompressionType::Gzip, "gzip"),
    ] {
        let url = format!("s3://tfrecords/train/{name}.tfrecord");
        write_tfrecords(&fs, &url, c, &records);
        let got = read_tfrecords(&fs, &url, c);
        assert_eq!(got.len(), records.len(), "{url}");
        assert!(
            got.iter().zip(&records).all(|(g, r)| g[..] == r[..]),
            "{url}"
        );
        if c == CompressionType::None {
            assert_eq!(fs.file_size(&url).unwrap(), total);
        }
    }
    assert_eq!(
        fs.glob("s3://tfrecords/train/*.tfrecord").unwrap(),
        [
            "s3://tfrecords/train/gzip.tfrecord",
            "s3://tfrecords/train/plain.tfrecord"
        ]
    );
}

#[test]
fn glob_lists_levels_like_local_paths() {
    let Some(moto) = Moto::start() else {
        return;
    };
    moto.create_bucket("globbing");
    let fs = moto.file_system();
    for key in [
        "data/part-00.tfrecord",
        "data/part-01.tfrecord",
        "data/part-01.tfrecord.tmp",
        "data/nested/part-02.tfrecord",
        "other/part-00.tfrecord",
        "top.txt",
    ] {
        let mut w = fs.create(&format!("s3://globbing/{key}")).unwrap();
        w.write_all(key.as_bytes()).unwrap();
        w.flush().unwrap();
    }
    let g = |p: &str| fs.glob(&format!("s3://globbing/{p}")).unwrap();
    let urls = |keys: &[&str]| -> Vec<String> {
        keys.iter().map(|k| format!("s3://globbing/{k}")).collect()
    };
    assert_eq!(
        g("data/part-*.tfrecord"),
        urls(&["data/part-00.tfrecord", "data/part-01.tfrecord"])
    );
    assert_eq!(
        g("*/part-00.tfrecord"),
        urls(&["data/part-00.tfrecord", "other/part-00.tfrecord"])
    );
    assert_eq!(
        g("data/*/part-0[0-9].tfrecord"),
        urls(&["data/nested/part-02.tfrecord"])
    );
    // Directories (common prefixes) match like files.
    assert_eq!(g("data/n*"), urls(&["data/nested"]));
    assert_eq!(g("*"), urls(&["data", "other", "top.txt"]));
    assert!(g("nothing/*").is_empty());
    // No wildcard: the URL if it exists.
    assert_eq!(g("top.txt"), urls(&["top.txt"]));
    assert!(g("top.txt.gz").is_empty());
    assert!(fs.exists("s3://globbing/data").unwrap());
    assert!(fs.exists("s3://globbing/data/part-00.tfrecord").unwrap());
    assert!(!fs.exists("s3://globbing/dat").unwrap());
    // A bucket that does not exist is an error naming it (a typo is likelier
    // than an empty bucket), though nothing exists in it.
    let err = fs.glob("s3://no-such-bucket/*.tfrecord").unwrap_err();
    assert!(
        matches!(&err, Error::NotFound { what: "bucket", id } if id == "s3://no-such-bucket"),
        "{err}"
    );
    assert!(!fs.exists("s3://no-such-bucket/x").unwrap());
    assert!(!fs.exists("s3://no-such-bucket").unwrap());
}

#[test]
fn list_and_delete_on_s3() {
    let Some(moto) = Moto::start() else {
        return;
    };
    moto.create_bucket("listing");
    let fs = moto.file_system();
    for key in [
        "j/journal_10",
        "j/journal_2",
        "j/snapshot_3",
        "j/sub/x",
        "k",
    ] {
        let mut w = fs.create(&format!("s3://listing/{key}")).unwrap();
        w.write_all(key.as_bytes()).unwrap();
        w.flush().unwrap();
    }
    // The objects directly under the prefix, by name, sorted bytewise.
    assert_eq!(
        fs.list("s3://listing/j").unwrap(),
        ["journal_10", "journal_2", "snapshot_3"]
    );
    assert_eq!(fs.list("s3://listing/j/").unwrap().len(), 3);
    assert_eq!(fs.list("s3://listing").unwrap(), ["k"]);
    assert!(fs.list("s3://listing/none").unwrap().is_empty());

    fs.delete("s3://listing/j/journal_2").unwrap();
    // A missing object deletes fine (S3's DELETE is idempotent).
    fs.delete("s3://listing/j/journal_2").unwrap();
    assert_eq!(
        fs.list("s3://listing/j").unwrap(),
        ["journal_10", "snapshot_3"]
    );
    let err = fs.list("s3://no-such-bucket/j").unwrap_err();
    assert!(
        matches!(&err, Error::NotFound { what: "bucket", .. }),
        "{err}"
    );
}

#[test]
fn text_lines_read_from_s3() {
    let Some(moto) = Moto::start() else {
        return;
    };
    moto.create_bucket("text");
    let fs = moto.file_system().with_read_chunk_size(5);
    let url = "s3://text/lines.txt.gz";
    let mut out = fs.create(url).unwrap();
    let mut gz = flate2::write::GzEncoder::new(&mut out, flate2::Compression::default());
    gz.write_all(b"alpha\r\nbeta\n\ngamma").unwrap();
    gz.finish().unwrap();
    out.flush().unwrap();
    drop(out);
    let got: Vec<Bytes> = TextLineReader::open_on(&fs, url, CompressionType::Gzip)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(got, ["alpha", "beta", "", "gamma"].map(Bytes::from));

    let mut plain = String::new();
    let url = "s3://text/plain.txt";
    let mut out = fs.create(url).unwrap();
    out.write_all("héllo\nwörld\n".as_bytes()).unwrap();
    out.flush().unwrap();
    fs.open(url).unwrap().read_to_string(&mut plain).unwrap();
    assert_eq!(plain, "héllo\nwörld\n");
    assert_eq!(&fs.read_all(url).unwrap()[..], "héllo\nwörld\n".as_bytes());
}

#[test]
fn errors_name_the_url() {
    let Some(moto) = Moto::start() else {
        return;
    };
    moto.create_bucket("errors");
    let fs = moto.file_system();
    let missing = "s3://errors/no/such.tfrecord";
    let missing_bucket = "s3://no-such-bucket/x.tfrecord";
    for url in [missing, missing_bucket] {
        for err in [
            fs.open(url).err().unwrap(),
            fs.read_all(url).unwrap_err(),
            fs.file_size(url).unwrap_err(),
            TfRecordReader::open_on(&fs, url, CompressionType::None).unwrap_err(),
        ] {
            assert!(matches!(err, Error::NotFound { what: "file", .. }), "{err}");
            assert!(err.to_string().contains(url), "{err}");
        }
    }
    // Uploading into a bucket that does not exist fails at the flush that
    // uploads, naming the URL, and leaves nothing behind.
    let mut w = TfRecordWriter::new(
        missing_bucket,
        fs.create(missing_bucket).unwrap(),
        CompressionType::None,
    );
    w.write(b"record").unwrap();
    let err = w.finish().err().unwrap();
    assert!(err.to_string().contains(missing_bucket), "{err}");

    // A writer dropped without flushing uploads nothing.
    let url = "s3://errors/unflushed";
    let mut w = fs.create(url).unwrap();
    w.write_all(b"data").unwrap();
    drop(w);
    assert!(!fs.exists(url).unwrap());

    // Refused credentials: moto accepts any key unless told otherwise, so
    // check the signature-less path instead: a bad endpoint option is
    // rejected when the file system is built.
    let err = ObjectStoreFileSystem::without_env()
        .with_option("aws_no_such_option", "x")
        .unwrap_err();
    assert!(err.to_string().contains("aws_no_such_option"), "{err}");
}

#[test]
fn refused_credentials_are_a_precondition_naming_the_url() {
    // moto checks credentials against its IAM backend once told to; the
    // test's made-up key is unknown there, so every request gets a 403.
    let Some(moto) = Moto::start_with_env(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")]) else {
        return;
    };
    let fs = moto.file_system();
    let url = "s3://locked/x.tfrecord";
    for err in [
        fs.open(url).err().unwrap(),
        fs.glob("s3://locked/*.tfrecord").unwrap_err(),
    ] {
        assert!(matches!(err, Error::FailedPrecondition(_)), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("s3://locked/"), "{msg}");
        assert!(msg.contains("access denied"), "{msg}");
        assert!(msg.contains("AWS_ACCESS_KEY_ID"), "{msg}");
    }
}

#[test]
fn unreachable_server_is_unavailable() {
    // A port nothing listens on: the connection is refused at once, and
    // after object_store's retries the error is Unavailable naming the URL.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let fs = ObjectStoreFileSystem::without_env()
        .with_options([
            ("aws_endpoint", format!("http://127.0.0.1:{port}")),
            ("aws_access_key_id", "k".into()),
            ("aws_secret_access_key", "s".into()),
            ("aws_region", "us-east-1".into()),
            ("aws_allow_http", "true".into()),
        ])
        .unwrap()
        .with_retry(RetryConfig {
            max_retries: 1,
            retry_timeout: Duration::from_secs(5),
            ..RetryConfig::default()
        });
    let url = "s3://bucket/x.tfrecord";
    let started = std::time::Instant::now();
    let err = fs.open(url).err().unwrap();
    assert!(matches!(err, Error::Unavailable(_)), "{err}");
    assert!(err.to_string().contains(url), "{err}");
    eprintln!("unreachable after {:?}: {err}", started.elapsed());
}
