//! A dispatcher in fault-tolerant mode journals its state and comes back
//! from a restart with it; readers and workers carry on.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::time::Duration;

use tfdata::{
    Dataset, DispatchServer, DispatcherConfig, ProcessingMode, WorkerConfig, WorkerServer,
    distribute,
};

fn fault_tolerant(dir: &std::path::Path, port: u16) -> DispatcherConfig {
    common::fault_tolerant(&dir.display().to_string(), port)
}

#[test]
fn a_restarted_dispatcher_recovers_its_state_and_the_read_completes() {
    let dir = tempfile::tempdir().unwrap();
    let first = DispatchServer::new(fault_tolerant(dir.path(), 0)).unwrap();
    let port = first.port();
    let (_worker, it, mut values) = common::read_in_progress(&first);

    let before = first.state();
    assert_eq!(before.workers().len(), 1);
    assert_eq!(before.clients().count(), 1);
    drop(first);

    let second = DispatchServer::new(fault_tolerant(dir.path(), port)).unwrap();
    assert_eq!(
        second.state(),
        before,
        "replaying the journal rebuilds the same state"
    );

    values.extend(it.map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap()));
    assert_eq!(values, (0..100).collect::<Vec<_>>());
    // The restart compacted the journal (its file `snapshot_<m>`) plus a new file.
    let journal: Vec<String> = std::fs::read_dir(dir.path().join("tf_data_dispatcher_journal"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        journal.iter().any(|f| f.starts_with("snapshot_")),
        "{journal:?}"
    );
    assert!(dir.path().join("datasets/1000").exists());
}

#[test]
fn a_corrupt_journal_refuses_to_start_with_the_location() {
    let dir = tempfile::tempdir().unwrap();
    {
        let d = DispatchServer::new(fault_tolerant(dir.path(), 0)).unwrap();
        let _w = WorkerServer::new(WorkerConfig::new(d.address())).unwrap();
        let ds = distribute(ProcessingMode::ParallelEpochs, &d.target())
            .apply(&Dataset::range(3))
            .unwrap();
        assert_eq!(ds.iter().unwrap().count(), 3);
    }
    let journal = dir.path().join("tf_data_dispatcher_journal/journal_0");
    let mut bytes = std::fs::read(&journal).unwrap();
    assert!(bytes.len() > 40);
    bytes[20] ^= 0x01; // inside the first record's data
    std::fs::write(&journal, &bytes).unwrap();
    let err = DispatchServer::new(fault_tolerant(dir.path(), 0))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("journal_0") && err.contains("offset"), "{err}");
}

/// Beyond TensorFlow: a worker that stops mid-read tells the dispatcher; its
/// task leaves the iteration, which then finishes instead of hanging.
#[test]
fn a_worker_stopping_mid_read_does_not_hang_the_read() {
    let dispatcher = DispatchServer::new(DispatcherConfig::default()).unwrap();
    let stays = WorkerServer::new(WorkerConfig::new(dispatcher.address())).unwrap();
    let leaves = WorkerServer::new(WorkerConfig::new(dispatcher.address())).unwrap();
    common::wait_for_workers(&dispatcher, 2);
    let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .task_refresh_interval(Duration::from_millis(50))
        .apply(&Dataset::range(400))
        .unwrap();
    let mut it = ds.iter().unwrap();
    let mut values = Vec::new();
    for e in &mut it {
        values.push(e.unwrap().components[0].to_scalar::<i64>().unwrap());
        if values.len() == 50 {
            leaves.stop();
        }
        std::thread::sleep(Duration::from_micros(300));
    }
    // The remaining worker's full copy arrived; the read ended.
    let mut counts = std::collections::BTreeMap::new();
    for v in &values {
        *counts.entry(*v).or_insert(0) += 1;
    }
    assert_eq!(counts.len(), 400, "every element at least once");
    drop(stays);
}

/// A worker that goes silent is declared lost after `worker_timeout`, even
/// when garbage collection is off (`job_gc_timeout` unset) and would only
/// run every hour: liveness has its own schedule.
#[test]
fn a_silent_worker_is_lost_after_worker_timeout_whatever_the_gc_settings() {
    let config = DispatcherConfig {
        worker_timeout: Duration::from_millis(300),
        job_gc_check_interval: Duration::from_secs(3600),
        job_gc_timeout: None,
        ..Default::default()
    };
    let dispatcher = DispatchServer::new(config).unwrap();
    // One heartbeat, then silence (a worker that was SIGKILLed).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(async {
            let client = tfdata::DispatcherClient::new(&dispatcher.address())?;
            client
                .worker_heartbeat(tfdata_proto::data::WorkerHeartbeatRequest {
                    worker_address: "silent:1".into(),
                    tfdata_runs_pipelines: true,
                    ..Default::default()
                })
                .await
        })
        .unwrap();
    assert_eq!(dispatcher.num_workers(), 1);
    let lost = || dispatcher.state().workers().iter().all(|w| w.lost);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !lost() {
        assert!(
            std::time::Instant::now() < deadline,
            "the silent worker was not declared lost within 10 s (worker_timeout 300 ms)"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
