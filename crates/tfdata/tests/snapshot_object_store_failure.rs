//! A failing object store turns a distributed snapshot into `ERROR` with
//! its cause, and the dispatcher keeps serving reads: a real S3-compatible
//! server (moto) loses the snapshot's bucket mid-save. The stream's writes
//! fail (the bucket is gone: not retryable), the worker reports it, and the
//! dispatcher records the failure; it cannot write the `ERROR` file until
//! the bucket is back, and writes it then (its maintenance retries), so a
//! reader waiting on the files learns why.
//!
//! The dispatcher and the worker reach moto through the io layer's
//! process-wide client (`set_global`), so this binary holds this one test.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

#[path = "../../tfdata-dataset/tests/io_object_store_moto/mod.rs"]
mod moto;

use std::time::Duration;

use moto::Moto;
use tfdata::{Dataset, ProcessingMode, WorkerConfig, WorkerServer, distribute};
use tfdata_dataset::io::object_store::set_global;
use tfdata_dataset::snapshot::layout;
use tfdata_dispatcher::distributed_snapshot::manager::Mode;

#[test]
fn a_bucket_lost_mid_save_fails_the_snapshot_with_the_cause_and_reads_go_on() {
    let Some(moto) = Moto::start() else {
        return;
    };
    moto.create_bucket("snapshots");
    set_global(moto.file_system());
    let work_dir = tempfile::tempdir().unwrap();
    let dispatcher = tfdata::DispatchServer::new(common::fault_tolerant(
        &work_dir.path().display().to_string(),
        0,
    ))
    .unwrap();
    let mut config = WorkerConfig::new(dispatcher.address());
    config.heartbeat_interval = Duration::from_millis(100);
    config.snapshot_commit_interval = Some(Duration::from_millis(50));
    let _worker = WorkerServer::new(config).unwrap();

    // Each range element is a split, and each split a PUT: thousands of
    // them take far longer than the moment the bucket goes.
    let path = "s3://snapshots/runs/lost";
    tfdata::distributed_save(
        &Dataset::range(20_000).batch(10, false),
        path,
        &dispatcher.target(),
        None,
    )
    .unwrap();
    common::wait_for("a committed chunk", Duration::from_secs(60), || {
        tfdata_dataset::io::list(&layout::chunks_dir(path)).is_ok_and(|c| !c.is_empty())
    });
    moto.reset();

    // The dispatcher learns of the failure from the worker, with its cause.
    let snapshots = dispatcher.dispatcher().distributed_snapshots();
    let mode = || {
        snapshots
            .progress()
            .into_iter()
            .find(|(p, _)| p == path)
            .map(|(_, progress)| progress.mode)
            .unwrap()
    };
    common::wait_for("the snapshot to fail", Duration::from_secs(60), || {
        matches!(mode(), Mode::Error(_))
    });
    let Mode::Error(status) = mode() else {
        unreachable!()
    };
    assert!(
        status.message.contains("snapshots") && status.message.contains("not found"),
        "{status:?}"
    );
    // Its ERROR file cannot be written yet: the bucket is gone.
    assert!(!snapshots.with_final_file_pending().is_empty());

    // Reads go on meanwhile.
    let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .apply(&Dataset::range(100))
        .unwrap();
    let mut values = common::scalars(&ds);
    values.sort();
    assert_eq!(values, (0..100).collect::<Vec<_>>());

    // Once the bucket is back, the dispatcher writes ERROR, and a reader
    // waiting on the files gets the cause.
    moto.create_bucket("snapshots");
    let err = tfdata::wait_for_snapshot(path, Duration::from_secs(30)).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("failed") && text.contains("not found"),
        "{text}"
    );
    assert!(snapshots.with_final_file_pending().is_empty());
}
