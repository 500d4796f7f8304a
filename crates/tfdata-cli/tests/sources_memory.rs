//! A worker's memory while it reads a Parquet file larger than its buffers
//! (issue 32): the `tfdata worker` process holds one row group's fetched
//! columns and its elements in flight, not the file, so its peak RSS grows
//! by a bounded amount whatever the file's size.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use common::process::Process;
use tfdata::{Dataset, ProcessingMode, distribute};

/// Rows of the file: 16 bytes each before compression (random floats do
/// not compress), about 192 MiB: more than twice what the worker may grow by.
const ROWS: i64 = 12 << 20;
/// Rows per row group (about 4 MiB).
const ROW_GROUP_ROWS: usize = 256 << 10;
/// What the worker may grow by while reading, its buffers: the task's
/// element buffer (32 MiB, the worker's `DEFAULT_TASK_BUFFER_BYTES`), the
/// reader's stream window (16 MiB), two row groups' fetched and decoded
/// columns (the one read and the next: 4 MiB each, twice), and 16 MiB of
/// allocator and thread slack. (Measured: 55-60 MiB, for a 64 MiB file as
/// for a 128 MiB one.)
const GROWTH_LIMIT: u64 = (32 + 16 + 2 * 2 * 4 + 16) << 20;

fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmHWM in /proc/<pid>/status");
    kib * 1024
}

/// Writes the file in slices, so the test's own memory stays small too.
fn write_parquet(path: &std::path::Path) {
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_dictionary_enabled(false)
        .build();
    let schema = Arc::new(arrow_schema::Schema::new(vec![
        arrow_schema::Field::new("id", arrow_schema::DataType::Int64, false),
        arrow_schema::Field::new("value", arrow_schema::DataType::Float64, false),
    ]));
    let file = std::fs::File::create(path).unwrap();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(file, schema.clone(), Some(props)).unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let slice = ROW_GROUP_ROWS as i64;
    for start in (0..ROWS).step_by(slice as usize) {
        let ids = Int64Array::from_iter_values(start..start + slice);
        let values = Float64Array::from_iter_values((0..slice).map(|_| {
            // xorshift: incompressible values, no dependency.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            f64::from_bits((state >> 12) | 0x3ff0_0000_0000_0000)
        }));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(ids) as ArrayRef, Arc::new(values)],
        )
        .unwrap();
        writer.write(&batch).unwrap();
    }
    writer.close().unwrap();
}

#[test]
fn a_worker_reading_a_parquet_file_larger_than_its_buffers_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large.parquet");
    write_parquet(&path);
    let file_bytes = std::fs::metadata(&path).unwrap().len();
    assert!(
        file_bytes > 2 * GROWTH_LIMIT,
        "the file ({file_bytes} bytes) must be larger than the growth allowed"
    );

    let (_dispatcher, port) = Process::start(&["dispatcher", "--port", "0"]);
    let address = format!("localhost:{port}");
    let (worker, _) = Process::start(&["worker", "--dispatcher-address", &address]);
    common::wait_for_workers(&address, 1);
    let before = peak_rss(worker.child.id());

    let pipeline = Dataset::parquet(&[path.to_str().unwrap()], None, Some(1024), None);
    let ds = distribute(ProcessingMode::ParallelEpochs, &format!("grpc://{address}"))
        .apply(&pipeline)
        .unwrap();
    let (mut rows, mut next_id) = (0i64, 0i64);
    for e in ds.iter().unwrap() {
        let e = e.unwrap();
        let ids = e.components[0].to_vec::<i64>().unwrap();
        assert_eq!(ids[0], next_id, "rows in order, none lost");
        next_id += ids.len() as i64;
        rows += ids.len() as i64;
    }
    assert_eq!(rows, ROWS);
    let after = peak_rss(worker.child.id());
    let growth = after.saturating_sub(before);
    eprintln!(
        "read {file_bytes} bytes of Parquet: the worker's peak RSS went from {} to {} MiB",
        before >> 20,
        after >> 20
    );
    assert!(
        growth < GROWTH_LIMIT,
        "the worker grew by {} MiB reading a {} MiB file (limit {} MiB)",
        growth >> 20,
        file_bytes >> 20,
        GROWTH_LIMIT >> 20
    );
}
