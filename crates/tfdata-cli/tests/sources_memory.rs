//! A worker's memory while it reads a Parquet file larger than its buffers
//! (issue 32): the `tfdata worker` process holds one row group's fetched
//! columns and its elements in flight, not the file, so its peak RSS grows
//! by a bounded amount whatever the file's size.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::process::Command;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use common::process::{BIN, Process};
use tfdata::{Dataset, ProcessingMode, distribute};

/// Rows of the file: 16 bytes each before compression (random floats do
/// not compress), about 384 MiB: more than twice what the worker may grow
/// by even with the allocator's cache.
const ROWS: i64 = 24 << 20;
/// Rows per row group (about 4 MiB).
const ROW_GROUP_ROWS: usize = 256 << 10;
/// What the worker's live memory may grow by while reading, its buffers:
/// the task's element buffer (32 MiB, the worker's
/// `DEFAULT_TASK_BUFFER_BYTES`), the reader's stream window (16 MiB), two
/// row groups' fetched and decoded columns (the one read and the next: 4 MiB
/// each, twice), 16 MiB of allocator and thread slack, and 32 MiB for what
/// the transport and the allocator's per-thread pages hold when the reader
/// lags (a loaded CI machine). Measured with the allocator returning freed
/// pages at once (`MIMALLOC_PURGE_DELAY=0`): 41-62 MiB on a quiet machine,
/// 86 MiB once under a CI run's load.
const LIVE_GROWTH_LIMIT: u64 = (32 + 16 + 2 * 2 * 4 + 16 + 32) << 20;
/// The same with mimalloc's defaults, as users run it: freed pages go back
/// to the system after a 10 ms delay, and at a few hundred MB/s of elements
/// made and sent that keeps up to 64 MiB more in RSS. Measured: 80-119 MiB,
/// the same for a 192 MiB file as for a 384 MiB one.
const DEFAULT_GROWTH_LIMIT: u64 = LIVE_GROWTH_LIMIT + (64 << 20);

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

/// The worker's peak RSS before and after reading the file through a
/// dispatcher and a worker of its own, `env` set in the worker's
/// environment; checks every row arrives, in order.
fn read_through_a_worker(path: &std::path::Path, env: &[(&str, &str)]) -> (u64, u64) {
    let (_dispatcher, port) = Process::start(&["dispatcher", "--port", "0"]);
    let address = format!("localhost:{port}");
    let mut command = Command::new(BIN);
    command
        .args(["worker", "--dispatcher-address", &address])
        .envs(env.iter().copied());
    let (worker, _) = Process::start_command("worker", command);
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
    (before, peak_rss(worker.child.id()))
}

#[test]
fn a_worker_reading_a_parquet_file_larger_than_its_buffers_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large.parquet");
    write_parquet(&path);
    let file_bytes = std::fs::metadata(&path).unwrap().len();
    assert!(
        file_bytes > 2 * DEFAULT_GROWTH_LIMIT,
        "the file ({file_bytes} bytes) must be larger than the growth allowed"
    );
    for (what, env, limit) in [
        (
            "live memory",
            &[("MIMALLOC_PURGE_DELAY", "0")][..],
            LIVE_GROWTH_LIMIT,
        ),
        ("mimalloc's defaults", &[][..], DEFAULT_GROWTH_LIMIT),
    ] {
        let (before, after) = read_through_a_worker(&path, env);
        let growth = after.saturating_sub(before);
        eprintln!(
            "{what}: read {file_bytes} bytes of Parquet: the worker's peak RSS went from {} to {} MiB",
            before >> 20,
            after >> 20
        );
        assert!(
            growth < limit,
            "{what}: the worker grew by {} MiB reading a {} MiB file (limit {} MiB)",
            growth >> 20,
            file_bytes >> 20,
            limit >> 20
        );
    }
}
