//! A distributed snapshot written to an `s3://` URL on a real S3-compatible
//! server (moto, see the io tests' harness) by our dispatcher and two of our
//! workers, then read back with the engine's `load`: every element once,
//! no uncommitted chunk left, the layout TensorFlow's readers list.
//!
//! Chunks are committed by `FileSystem::rename`, which on an object store
//! copies on the server (the committed object appears whole) and then
//! deletes the source. The dispatcher and the workers reach the server
//! through the io layer's process-wide client ([`set_global`]), so this
//! binary holds this one test.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

#[path = "../../tfdata-dataset/tests/io_object_store_moto/mod.rs"]
mod moto;

use std::collections::BTreeMap;
use std::time::Duration;

use moto::Moto;
use tfdata::{Dataset, WorkerConfig, WorkerServer};
use tfdata_dataset::io::object_store::set_global;
use tfdata_dataset::snapshot::layout;

#[test]
fn a_snapshot_on_s3_is_written_by_our_workers_and_loads_exactly() {
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
    let workers: Vec<WorkerServer> = (0..2)
        .map(|_| {
            let mut config = WorkerConfig::new(dispatcher.address());
            config.heartbeat_interval = Duration::from_millis(100);
            // Several commits per stream, each a server-side copy.
            config.snapshot_commit_interval = Some(Duration::from_millis(50));
            WorkerServer::new(config).unwrap()
        })
        .collect();
    let path = "s3://snapshots/runs/one";
    // Every range element is a split, and each split is a PUT of its file.
    let n = 1000;
    let dataset = Dataset::range(n).batch(10, false);
    tfdata::distributed_save(&dataset, path, &dispatcher.target(), Some("GZIP")).unwrap();
    let progress = tfdata::wait_for_snapshot(path, Duration::from_secs(120)).unwrap();
    assert!(progress.done && progress.error.is_none(), "{progress:?}");
    // Each stream batches its own splits, so its last batch may be short:
    // there are at least n / 10 batches, and every value is in one of them.
    assert!(progress.elements >= (n / 10) as u64, "{progress:?}");

    // Committed chunks only; nothing left uncommitted in any stream.
    let chunks = tfdata_dataset::io::list(&layout::chunks_dir(path)).unwrap();
    assert!(!chunks.is_empty());
    for name in &chunks {
        layout::parse_chunk_name(name).unwrap();
    }
    for stream in 0..2 {
        let uncommitted =
            tfdata_dataset::io::list(&layout::uncommitted_chunks_dir(path, stream)).unwrap();
        assert!(uncommitted.is_empty(), "stream {stream}: {uncommitted:?}");
    }

    let mut seen = BTreeMap::new();
    let mut it = Dataset::load(path, false).iter().unwrap();
    let mut batches = 0;
    while let Some(batch) = it.next_element().unwrap() {
        batches += 1;
        for v in batch.components[0].to_vec::<i64>().unwrap() {
            *seen.entry(v).or_insert(0) += 1;
        }
    }
    assert_eq!(batches, progress.elements);
    assert_eq!(seen.len(), n as usize);
    assert!(
        seen.iter()
            .all(|(&v, &count)| count == 1 && (0..n).contains(&v))
    );
    drop(workers);
}
