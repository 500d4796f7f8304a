//! Whole pipelines from JSON over `s3://` on a real S3-compatible server
//! (moto, see `io_object_store_moto`): `list_files` + `interleave` with the
//! built-in `tfrecord_dataset`, a vocabulary file, and `parquet_dataset` with a
//! filter (ranged reads of the footer and row groups), found the two ways a
//! pipeline's file sources find their object-store configuration:
//!
//! * the environment (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, ...), as a
//!   tf.data worker is configured: the pipeline runs in a child process (this
//!   test binary re-run on one ignored test) given those variables, since
//!   changing the environment of a multi-threaded test process is unsound;
//! * [`set_global`], for programs configuring storage in code: the in-process
//!   test installs a file system pointing at its server. It is the only test
//!   here that touches the process-wide file system.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod io_object_store_moto;

use std::collections::BTreeSet;
use std::process::Command;

use io_object_store_moto::Moto;
use tfdata_core::Element;
use tfdata_dataset::io::object_store::set_global;
use tfdata_dataset::io::{CompressionType, FileSystem, TfRecordWriter};
use tfdata_dataset::json::from_json;

/// Names the bucket for the child process; its absence means "not the child".
const BUCKET_VAR: &str = "TFDATA_TEST_S3_BUCKET";
const SHARDS: usize = 3;
const PER_SHARD: usize = 4;

fn record(shard: usize, i: usize) -> String {
    format!("shard{shard}-record{i}")
}

/// Writes the GZIP TFRecord shards, a decoy, and a vocabulary and text file.
fn write_data(fs: &dyn FileSystem, bucket: &str) {
    for s in 0..SHARDS {
        let url = format!("s3://{bucket}/train/part-{s:02}.tfrecord");
        let mut w = TfRecordWriter::new(&url, fs.create(&url).unwrap(), CompressionType::Gzip);
        for i in 0..PER_SHARD {
            w.write(record(s, i).as_bytes()).unwrap();
        }
        w.finish().unwrap();
    }
    // A Parquet file of several row groups (ids 0..1000), as pyarrow or
    // Spark would leave it in a bucket.
    let ids = arrow_array::Int64Array::from_iter_values(0..1000);
    let batch = arrow_array::RecordBatch::try_from_iter(vec![(
        "id",
        std::sync::Arc::new(ids) as arrow_array::ArrayRef,
    )])
    .unwrap();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(100))
        .build();
    let mut bytes = Vec::new();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let mut w = fs
        .create(&format!("s3://{bucket}/table/part-0.parquet"))
        .unwrap();
    w.write_all(&bytes).unwrap();
    w.flush().unwrap();
    for (key, text) in [
        ("train/README", "not a tfrecord"),
        ("vocab.txt", "alpha\nbeta\ngamma\n"),
        ("tokens.txt", "gamma\nalpha\nzeta\nbeta\n"),
    ] {
        let mut w = fs.create(&format!("s3://{bucket}/{key}")).unwrap();
        w.write_all(text.as_bytes()).unwrap();
        w.flush().unwrap();
    }
}

fn collect(json: &str) -> Vec<Element> {
    let parsed = from_json(json).unwrap();
    let mut it = parsed.dataset.iter().unwrap();
    let mut out = Vec::new();
    while let Some(e) = it.next_element().unwrap() {
        out.push(e);
    }
    out
}

/// Runs both pipelines over `bucket` through whatever configuration the
/// process has, checking their output.
fn run_pipelines(bucket: &str) {
    let records = collect(&format!(
        r#"{{"op": "interleave", "cycle_length": 2, "num_parallel_calls": 2,
            "function": {{"function": "tfrecord_dataset", "args": {{"compression_type": "GZIP"}}}},
            "input": {{"op": "list_files", "file_pattern": "s3://{bucket}/train/*.tfrecord",
                       "shuffle": false}}}}"#
    ));
    let got: Vec<String> = records
        .iter()
        .map(|e| String::from_utf8(e.components[0].string_values().unwrap()[0].to_vec()).unwrap())
        .collect();
    // cycle_length 2 alternates shards 0 and 1, then shard 2 alone.
    assert_eq!(
        &got[..4],
        [record(0, 0), record(1, 0), record(0, 1), record(1, 1)]
    );
    let expected: BTreeSet<String> = (0..SHARDS)
        .flat_map(|s| (0..PER_SHARD).map(move |i| record(s, i)))
        .collect();
    assert_eq!(got.len(), expected.len());
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), expected);

    let ids = collect(&format!(
        r#"{{"op": "map",
            "function": {{"function": "lookup",
                          "args": {{"vocabulary_file": "s3://{bucket}/vocab.txt", "default_value": -1}}}},
            "input": {{"op": "text_line_dataset", "filenames": ["s3://{bucket}/tokens.txt"]}}}}"#
    ));
    let ids: Vec<i64> = ids
        .iter()
        .map(|e| e.components[0].to_vec::<i64>().unwrap()[0])
        .collect();
    assert_eq!(ids, [2, 0, -1, 1]);

    // Parquet: ranged reads of the footer and of the row groups a filter
    // keeps, in batches.
    let batches = collect(&format!(
        r#"{{"op": "parquet_dataset", "filenames": ["s3://{bucket}/table/*.parquet"],
            "batch_size": 64, "filter": [["id", ">=", 250], ["id", "<", 420]]}}"#
    ));
    let ids: Vec<i64> = batches
        .iter()
        .flat_map(|e| e.components[0].to_vec::<i64>().unwrap())
        .collect();
    assert_eq!(ids, (250..420).collect::<Vec<_>>());
}

#[test]
fn pipelines_over_s3_configured_by_environment() {
    let Some(moto) = Moto::start() else {
        return;
    };
    moto.create_bucket("env-pipeline");
    write_data(&moto.file_system(), "env-pipeline");

    let mut child = Command::new(std::env::current_exe().unwrap());
    child.args([
        "child_runs_pipelines_from_environment",
        "--exact",
        "--ignored",
        "--nocapture",
    ]);
    // Only the server's settings: none of the developer's own.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("AWS_") || key.starts_with("S3_") {
            child.env_remove(&*key);
        }
    }
    let out = child
        .env(BUCKET_VAR, "env-pipeline")
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", io_object_store_moto::ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", io_object_store_moto::SECRET_KEY)
        .env("AWS_REGION", io_object_store_moto::REGION)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

/// The child half of [`pipelines_over_s3_configured_by_environment`].
#[test]
#[ignore = "run by pipelines_over_s3_configured_by_environment in a child process"]
fn child_runs_pipelines_from_environment() {
    let bucket = std::env::var(BUCKET_VAR).expect("run by the parent test, which sets the bucket");
    run_pipelines(&bucket);
}

#[test]
fn pipelines_over_s3_configured_in_code() {
    let Some(moto) = Moto::start() else {
        return;
    };
    moto.create_bucket("code-pipeline");
    write_data(&moto.file_system(), "code-pipeline");
    set_global(moto.file_system());
    assert_eq!(
        tfdata_dataset::io::glob("s3://code-pipeline/train/part-0[12].tfrecord").unwrap(),
        [
            "s3://code-pipeline/train/part-01.tfrecord",
            "s3://code-pipeline/train/part-02.tfrecord"
        ]
    );
    run_pipelines("code-pipeline");
}
