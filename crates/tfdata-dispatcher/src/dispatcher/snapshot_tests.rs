//! The dispatcher's side of `distributed_save`, with real files: the
//! `Snapshot` checks, stream assignment in heartbeats, split files written
//! before splits are returned, completion, failure, worker limits, orphaned
//! streams, and recovery from the files after a restart.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use tfdata_dataset::Dataset;
use tfdata_dataset::snapshot::{layout, metadata};
use tfdata_proto::data::{self as wire, get_snapshot_split_response::Response as SplitResponse};
use tonic::Code;

use super::tests::ManualClock;
use super::{Dispatcher, requests};
use crate::config::DispatcherConfig;

struct Setup {
    _dir: tempfile::TempDir,
    config: DispatcherConfig,
    snapshots: String,
    clock: Arc<ManualClock>,
}

fn setup(max_concurrent: u32) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let config = DispatcherConfig {
        work_dir: Some(dir.path().join("work").display().to_string()),
        fault_tolerant_mode: true,
        worker_max_concurrent_snapshots: max_concurrent,
        worker_timeout: Duration::from_secs(10),
        ..Default::default()
    };
    let snapshots = dir.path().join("snapshots").display().to_string();
    Setup {
        _dir: dir,
        config,
        snapshots,
        clock: Arc::new(ManualClock(AtomicI64::new(1_000_000))),
    }
}

impl Setup {
    fn dispatcher(&self) -> Dispatcher {
        Dispatcher::new(self.config.clone(), self.clock.clone()).unwrap()
    }
    fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.snapshots)
    }
}

fn request(dataset: &Dataset, path: &str, compression: &str) -> requests::Snapshot {
    wire::SnapshotRequest {
        dataset: Some(wire::DatasetDef {
            graph: Default::default(),
            tfdata_pipeline: Some(
                tfdata_dataset::pipeline::to_pipeline_def(dataset, false).unwrap(),
            ),
        }),
        path: path.to_string(),
        metadata: Some(wire::DistributedSnapshotMetadata {
            element_spec: b"spec bytes".to_vec().into(),
            compression: compression.into(),
        }),
    }
    .try_into()
    .unwrap()
}

/// A stream's report: (path, stream, completed, error status).
type Report<'a> = (String, i64, bool, Option<(i32, &'a str)>);

fn heartbeat(worker: &str, progress: &[Report<'_>]) -> wire::WorkerHeartbeatRequest {
    wire::WorkerHeartbeatRequest {
        worker_address: worker.into(),
        tfdata_runs_pipelines: true,
        snapshot_task_progress: progress
            .iter()
            .map(|(path, stream, completed, status)| {
                (
                    path.clone(),
                    wire::SnapshotTaskProgress {
                        snapshot_task: Some(wire::SnapshotTaskDef {
                            base_path: path.clone(),
                            stream_index: *stream,
                            ..Default::default()
                        }),
                        completed: *completed,
                        status: status.map(|(code, message)| {
                            tfdata_proto::tensorflow::StatusProto {
                                code,
                                message: message.into(),
                                ..Default::default()
                            }
                        }),
                    },
                )
            })
            .collect(),
        ..Default::default()
    }
}

async fn streams_of(d: &Dispatcher, worker: &str) -> Vec<(String, i64)> {
    d.worker_heartbeat(heartbeat(worker, &[]))
        .await
        .unwrap()
        .snapshot_tasks
        .into_iter()
        .map(|t| (t.base_path, t.stream_index))
        .collect()
}

fn split_request(
    worker: &str,
    path: &str,
    stream: i64,
    repetition: i64,
) -> wire::GetSnapshotSplitRequest {
    wire::GetSnapshotSplitRequest {
        worker_address: worker.into(),
        base_path: path.into(),
        stream_index: stream,
        source_index: 0,
        repetition_index: repetition,
    }
}

/// `split_request`, validated as the tonic adapter validates it.
fn split(worker: &str, path: &str, stream: i64, repetition: i64) -> requests::GetSnapshotSplit {
    split_request(worker, path, stream, repetition)
        .try_into()
        .unwrap()
}

/// The split's value, or `None` at the end; checks its file exists.
async fn next_split(d: &Dispatcher, worker: &str, path: &str, stream: i64) -> Option<i64> {
    let r = d
        .get_snapshot_split(split(worker, path, stream, 0))
        .await
        .unwrap();
    match r.response {
        Some(SplitResponse::Split(t)) => {
            let v = tfdata_core::element::tensor_from_proto(&t)
                .unwrap()
                .to_scalar::<i64>()
                .unwrap();
            let files = split_files(path, stream);
            assert!(
                files.iter().any(|(local, _)| *local == r.local_split_index),
                "split {} of stream {stream} has no file: {files:?}",
                r.local_split_index
            );
            Some(v)
        }
        Some(SplitResponse::EndOfSplits(true)) => None,
        other => panic!("unexpected answer {other:?}"),
    }
}

/// (local, global) of every split file of `stream`'s source 0.
fn split_files(path: &str, stream: i64) -> BTreeSet<(i64, i64)> {
    let dir = layout::repetition_dir(path, stream, 0, 0);
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let n = layout::parse_split_name(e.unwrap().file_name().to_str().unwrap()).unwrap();
            (n.local, n.global)
        })
        .collect()
}

#[tokio::test]
async fn snapshot_is_refused_without_fault_tolerance_and_for_known_or_existing_paths() {
    let s = setup(3);
    let plain = Dispatcher::new(DispatcherConfig::default(), s.clock.clone()).unwrap();
    let err = plain
        .snapshot(request(&Dataset::range(3), &s.path("a"), ""))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.to_string().contains("fault tolerant mode"), "{err}");

    let d = s.dispatcher();
    d.snapshot(request(&Dataset::range(3), &s.path("a"), "SNAPPY"))
        .await
        .unwrap();
    let again = d
        .snapshot(request(&Dataset::range(3), &s.path("a"), "SNAPPY"))
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::AlreadyExists);
    std::fs::create_dir_all(s.path("exists")).unwrap();
    let exists = d
        .snapshot(request(&Dataset::range(3), &s.path("exists"), ""))
        .await
        .unwrap_err();
    assert_eq!(exists.code(), Code::AlreadyExists, "{exists}");
    let infinite = d
        .snapshot(request(&Dataset::range(3).repeat(None), &s.path("inf"), ""))
        .await
        .unwrap_err();
    assert_eq!(infinite.code(), Code::InvalidArgument);
    assert!(infinite.to_string().contains("infinite"), "{infinite}");
    assert!(!Path::new(&s.path("inf")).exists());
    let bad_compression = d
        .snapshot(request(&Dataset::range(3), &s.path("lz4"), "LZ4"))
        .await
        .unwrap_err();
    assert_eq!(bad_compression.code(), Code::InvalidArgument);

    // The skeleton and metadata, as TensorFlow writes them.
    let a = s.path("a");
    let m = std::fs::read(layout::metadata_file(&a)).unwrap();
    let m = metadata::from_text("m", &m).unwrap();
    assert_eq!(
        (&m.element_spec[..], m.compression.as_str()),
        (&b"spec bytes"[..], "SNAPPY")
    );
    assert_eq!(
        std::fs::read(layout::dataset_spec_file(&a)).unwrap(),
        b"spec bytes"
    );
    assert!(Path::new(&layout::dataset_def_file(&a)).is_file());
    assert!(Path::new(&layout::chunks_dir(&a)).is_dir());
    assert!(Path::new(&layout::streams_dir(&a)).is_dir());
    // Unknown snapshots.
    let err = d
        .get_snapshot_streams(requests::GetSnapshotStreams {
            path: "/nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = d
        .get_snapshot_split(split("w", "/nope", 0, 0))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}

#[tokio::test]
async fn streams_share_the_splits_each_once_and_the_snapshot_finishes_when_every_stream_has() {
    let s = setup(3);
    let d = s.dispatcher();
    let path = s.path("range");
    d.snapshot(request(&Dataset::range(10), &path, ""))
        .await
        .unwrap();
    assert_eq!(streams_of(&d, "w0:1").await, [(path.clone(), 0)]);
    assert_eq!(streams_of(&d, "w1:1").await, [(path.clone(), 1)]);
    // The same stream on every heartbeat, its owner on disk.
    assert_eq!(streams_of(&d, "w0:1").await, [(path.clone(), 0)]);
    assert_eq!(
        std::fs::read_to_string(layout::owner_worker_file(&path, 1)).unwrap(),
        "w1:1"
    );

    let mut seen = Vec::new();
    for i in 0.. {
        let (worker, stream) = if i % 3 == 0 { ("w1:1", 1) } else { ("w0:1", 0) };
        match next_split(&d, worker, &path, stream).await {
            Some(v) => seen.push(v),
            None => break,
        }
    }
    seen.sort();
    assert_eq!(seen, (0..10).collect::<Vec<_>>());
    // Local indices per stream, global ones across them, dense.
    let (f0, f1) = (split_files(&path, 0), split_files(&path, 1));
    let globals: BTreeSet<i64> = f0.iter().chain(&f1).map(|(_, g)| *g).collect();
    assert_eq!(globals, (0..10).collect());
    assert_eq!(
        f0.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
        (0..f0.len() as i64).collect::<Vec<_>>()
    );
    // Not the owner: TensorFlow's Internal error.
    let err = d
        .get_snapshot_split(split("w1:1", &path, 0, 0))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Internal);
    // Hostile requests.
    let mut bad = split_request("w0:1", &path, 0, 0);
    bad.source_index = 7;
    assert_eq!(
        d.get_snapshot_split(bad.try_into().unwrap())
            .await
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    let far = split_request("w0:1", &path, 0, 1 << 40);
    assert_eq!(
        d.get_snapshot_split(far.try_into().unwrap())
            .await
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );

    // w0 finishes: winding down, no new stream for a third worker.
    d.worker_heartbeat(heartbeat("w0:1", &[(path.clone(), 0, true, None)]))
        .await
        .unwrap();
    assert!(streams_of(&d, "w2:1").await.is_empty());
    assert!(!Path::new(&layout::done_file(&path)).exists());
    let streams = d
        .get_snapshot_streams(requests::GetSnapshotStreams { path: path.clone() })
        .await
        .unwrap();
    let states: Vec<(i64, i32)> = streams.streams.iter().map(|s| (s.index, s.state)).collect();
    assert_eq!(
        states,
        [
            (0, wire::snapshot_stream_info::State::Done as i32),
            (1, wire::snapshot_stream_info::State::Assigned as i32)
        ]
    );
    d.worker_heartbeat(heartbeat("w1:1", &[(path.clone(), 1, true, None)]))
        .await
        .unwrap();
    assert!(Path::new(&layout::done_file(&path)).exists());
    // Done: workers are told nothing, so they cancel their writers.
    assert!(streams_of(&d, "w1:1").await.is_empty());
}

#[tokio::test]
async fn a_restarted_dispatcher_continues_from_the_files_without_repeating_a_split() {
    let s = setup(3);
    let path = s.path("restart");
    let mut seen = Vec::new();
    {
        let d = s.dispatcher();
        d.snapshot(request(&Dataset::range(20), &path, "GZIP"))
            .await
            .unwrap();
        assert_eq!(streams_of(&d, "w0:1").await, [(path.clone(), 0)]);
        assert_eq!(streams_of(&d, "w1:1").await, [(path.clone(), 1)]);
        for _ in 0..4 {
            seen.push(next_split(&d, "w0:1", &path, 0).await.unwrap());
        }
        seen.push(next_split(&d, "w1:1", &path, 1).await.unwrap());
    }
    let d = s.dispatcher();
    // Each worker keeps its stream.
    assert_eq!(streams_of(&d, "w1:1").await, [(path.clone(), 1)]);
    assert_eq!(streams_of(&d, "w0:1").await, [(path.clone(), 0)]);
    while let Some(v) = next_split(&d, "w1:1", &path, 1).await {
        seen.push(v);
    }
    seen.sort();
    assert_eq!(seen, (0..20).collect::<Vec<_>>());
    assert_eq!(
        split_files(&path, 0)
            .iter()
            .map(|(l, _)| *l)
            .collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    // Both done (their writers write the streams' DONE files), across
    // another restart.
    d.worker_heartbeat(heartbeat("w0:1", &[(path.clone(), 0, true, None)]))
        .await
        .unwrap();
    std::fs::write(layout::stream_done_file(&path, 0), b"").unwrap();
    std::fs::write(layout::stream_done_file(&path, 1), b"").unwrap();
    drop(d);
    let d = s.dispatcher();
    assert!(Path::new(&layout::done_file(&path)).exists());
    assert!(streams_of(&d, "w1:1").await.is_empty());
}

#[tokio::test]
async fn a_failed_stream_fails_the_snapshot_with_its_status() {
    let s = setup(3);
    let d = s.dispatcher();
    let path = s.path("fails");
    d.snapshot(request(&Dataset::range(5), &path, ""))
        .await
        .unwrap();
    assert_eq!(streams_of(&d, "w0:1").await.len(), 1);
    d.worker_heartbeat(heartbeat(
        "w0:1",
        &[(path.clone(), 0, false, Some((13, "disk full")))],
    ))
    .await
    .unwrap();
    let text = std::fs::read(layout::error_file(&path)).unwrap();
    let status = metadata::status_from_text("ERROR", &text).unwrap();
    assert_eq!((status.code, status.message.as_str()), (13, "disk full"));
    assert!(streams_of(&d, "w0:1").await.is_empty());
    // The dispatcher keeps serving, and remembers the failure.
    drop(d);
    let d = s.dispatcher();
    assert!(streams_of(&d, "w0:1").await.is_empty());
    d.snapshot(request(&Dataset::range(5), &s.path("next"), ""))
        .await
        .unwrap();
}

/// Makes `path` unwritable (a file where its directory was) until
/// [`store_back`]: a store outage, for the files under it.
fn store_away(path: &str) {
    std::fs::rename(path, format!("{path}.away")).unwrap();
    std::fs::write(path, b"not a directory").unwrap();
}

fn store_back(path: &str) {
    std::fs::remove_file(path).unwrap();
    std::fs::rename(format!("{path}.away"), path).unwrap();
}

/// The heartbeat that finishes a snapshot cannot write its `DONE` or
/// `ERROR` file: the outcome is kept and written once the store is back,
/// instead of leaving readers waiting for a file that never comes.
#[tokio::test]
async fn a_final_file_that_cannot_be_written_is_written_once_the_store_is_back() {
    let s = setup(3);
    let d = s.dispatcher();
    let failing = s.path("failing");
    let finishing = s.path("finishing");
    for path in [&failing, &finishing] {
        d.snapshot(request(&Dataset::range(5), path, ""))
            .await
            .unwrap();
    }
    // One new snapshot per heartbeat.
    assert_eq!(streams_of(&d, "w0:1").await.len(), 1);
    assert_eq!(streams_of(&d, "w0:1").await.len(), 2);
    store_away(&failing);
    store_away(&finishing);
    d.worker_heartbeat(heartbeat(
        "w0:1",
        &[
            (failing.clone(), 0, false, Some((13, "disk full"))),
            (finishing.clone(), 0, true, None),
        ],
    ))
    .await
    .unwrap();
    assert_eq!(d.distributed_snapshots().with_final_file_pending().len(), 2);
    // Still away: the retry fails and keeps them pending.
    d.retry_snapshot_final_files().await.unwrap();
    assert_eq!(d.distributed_snapshots().with_final_file_pending().len(), 2);
    store_back(&failing);
    store_back(&finishing);
    assert!(!Path::new(&layout::error_file(&failing)).exists());
    assert!(!Path::new(&layout::done_file(&finishing)).exists());
    d.retry_snapshot_final_files().await.unwrap();
    let text = std::fs::read(layout::error_file(&failing)).unwrap();
    let status = metadata::status_from_text("ERROR", &text).unwrap();
    assert_eq!((status.code, status.message.as_str()), (13, "disk full"));
    assert!(Path::new(&layout::done_file(&finishing)).exists());
    assert!(
        d.distributed_snapshots()
            .with_final_file_pending()
            .is_empty()
    );
}

#[tokio::test]
async fn a_worker_writes_at_most_its_limit_of_streams_across_snapshots() {
    let s = setup(2);
    let d = s.dispatcher();
    for name in ["a", "b", "c"] {
        d.snapshot(request(&Dataset::range(5), &s.path(name), ""))
            .await
            .unwrap();
    }
    // One new snapshot per heartbeat, up to two.
    assert_eq!(streams_of(&d, "w:1").await.len(), 1);
    assert_eq!(streams_of(&d, "w:1").await.len(), 2);
    assert_eq!(streams_of(&d, "w:1").await.len(), 2);
    // Another worker starts with the least-assigned snapshot.
    assert_eq!(streams_of(&d, "v:1").await, [(s.path("c"), 0)]);
}

#[tokio::test]
async fn a_lost_workers_stream_goes_to_another_worker_of_its_kind() {
    let s = setup(3);
    let d = s.dispatcher();
    let path = s.path("orphan");
    d.snapshot(request(&Dataset::range(6), &path, ""))
        .await
        .unwrap();
    assert_eq!(streams_of(&d, "dead:1").await, [(path.clone(), 0)]);
    assert_eq!(next_split(&d, "dead:1", &path, 0).await, Some(0));
    // "dead" stops heartbeating; the others go on.
    for _ in 0..3 {
        s.clock
            .0
            .fetch_add(6_000_000, std::sync::atomic::Ordering::SeqCst);
        d.worker_heartbeat(heartbeat("other:1", &[])).await.unwrap();
        d.check_liveness().await.unwrap();
    }
    // A TensorFlow worker cannot run a tfdata pipeline: no stream at all...
    let mut tf = heartbeat("tf:1", &[]);
    tf.tfdata_runs_pipelines = false;
    let tasks = d.worker_heartbeat(tf).await.unwrap().snapshot_tasks;
    assert!(tasks.is_empty(), "{tasks:?}");
    // ...a tfdata worker does, and continues after the split already given.
    assert_eq!(streams_of(&d, "new:1").await, [(path.clone(), 0)]);
    assert_eq!(
        std::fs::read_to_string(layout::owner_worker_file(&path, 0)).unwrap(),
        "new:1"
    );
    assert_eq!(next_split(&d, "new:1", &path, 0).await, Some(1));
    let err = d
        .get_snapshot_split(split("dead:1", &path, 0, 0))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Internal);
}

/// A worker that stops (SIGTERM, or the end of its drain) says so: its
/// stream goes to the next worker at once, not never (liveness forgets a
/// stopped worker, so `worker_timeout` would not declare it lost).
#[tokio::test]
async fn a_stopped_workers_stream_goes_to_another_worker() {
    let s = setup(3);
    let d = s.dispatcher();
    let path = s.path("stopped");
    d.snapshot(request(&Dataset::range(6), &path, ""))
        .await
        .unwrap();
    assert_eq!(streams_of(&d, "stopping:1").await, [(path.clone(), 0)]);
    assert_eq!(next_split(&d, "stopping:1", &path, 0).await, Some(0));
    let mut stop = heartbeat("stopping:1", &[]);
    stop.tfdata_stopping = true;
    d.worker_heartbeat(stop).await.unwrap();
    assert_eq!(streams_of(&d, "new:1").await, [(path.clone(), 0)]);
    assert_eq!(next_split(&d, "new:1", &path, 0).await, Some(1));
}

#[tokio::test]
async fn a_damaged_snapshot_fails_alone_and_the_dispatcher_still_starts() {
    let s = setup(3);
    let path = s.path("damaged");
    {
        let d = s.dispatcher();
        d.snapshot(request(&Dataset::range(5), &path, ""))
            .await
            .unwrap();
        d.snapshot(request(&Dataset::range(5), &s.path("fine"), ""))
            .await
            .unwrap();
        streams_of(&d, "w:1").await;
        next_split(&d, "w:1", &path, 0).await.unwrap();
    }
    // A second split file claiming global index 0.
    std::fs::create_dir_all(layout::repetition_dir(&path, 0, 0, 1)).unwrap();
    let dup = layout::split_file(&path, 0, 0, 1, 0, 0);
    std::fs::copy(layout::split_file(&path, 0, 0, 0, 0, 0), &dup).unwrap();
    let d = s.dispatcher();
    let progress = d.distributed_snapshots().progress();
    let damaged = progress.iter().find(|(p, _)| *p == path).unwrap();
    match &damaged.1.mode {
        crate::distributed_snapshot::manager::Mode::Error(status) => {
            assert!(
                status.message.contains("duplicate global split index"),
                "{}",
                status.message
            );
        }
        other => panic!("{other:?}"),
    }
    // Not written: the next start tries again.
    assert!(!Path::new(&layout::error_file(&path)).exists());
    // The other snapshot works.
    let fine = streams_of(&d, "v:1").await;
    assert!(fine.iter().any(|(p, _)| *p == s.path("fine")), "{fine:?}");
}
