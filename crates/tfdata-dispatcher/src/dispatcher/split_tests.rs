//! Tests of dynamic sharding, restarts and the journal: splits are never lost or duplicated, and replay rebuilds the live state.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tfdata_core::IterationId;
use tfdata_proto::data as wire;

use super::Dispatcher;
use crate::config::DispatcherConfig;
use crate::persistence::journal;
use crate::state::DispatcherState;

use std::sync::atomic::{AtomicI64, Ordering};

use super::tests::{ManualClock as FixedClock, iteration_of_range};

/// A distributed_epoch iteration over `range(5)`; returns its id.
async fn dynamic_iteration(d: &Dispatcher) -> i64 {
    iteration_of_range(d, 5, 1).await;
    IterationId::FIRST
}

/// A tfdata worker's heartbeat (uid 7) from `address`.
fn tfdata_worker_heartbeat(address: &str) -> wire::WorkerHeartbeatRequest {
    wire::WorkerHeartbeatRequest {
        worker_address: address.into(),
        tfdata_runs_pipelines: true,
        worker_uid: 7,
        ..Default::default()
    }
}

/// A fault-tolerant dispatcher journaling in `dir`, with its config and
/// clock (to restart it on the same journal).
fn fault_tolerant_dispatcher(
    dir: &tempfile::TempDir,
) -> (DispatcherConfig, Arc<FixedClock>, Dispatcher) {
    let config = DispatcherConfig {
        work_dir: Some(dir.path().display().to_string()),
        fault_tolerant_mode: true,
        ..Default::default()
    };
    let clock = Arc::new(FixedClock(AtomicI64::new(1)));
    let d = Dispatcher::new(config.clone(), clock.clone()).unwrap();
    (config, clock, d)
}

/// A plain heartbeat from reader `client`: its answer.
async fn reader_heartbeat(d: &Dispatcher, client: i64) -> wire::ClientHeartbeatResponse {
    d.client_heartbeat(wire::ClientHeartbeatRequest {
        iteration_client_id: client,
        ..Default::default()
    })
    .await
    .unwrap()
}

/// A distributed_epoch job named "shared" over `range(n)`; returns its id.
async fn shared_dynamic_job(d: &Dispatcher, n: i64) -> i64 {
    let dataset_id = super::tests::register(d, &tfdata_dataset::Dataset::range(n), n).await;
    d.get_or_create_job(
        wire::GetOrCreateJobRequest {
            dataset_id,
            processing_mode_def: Some(wire::ProcessingModeDef {
                sharding_policy: 1,
                ..Default::default()
            }),
            job_name: Some("shared".into()),
            ..Default::default()
        }
        .try_into()
        .unwrap(),
    )
    .await
    .unwrap()
    .job_id
}

/// The (first) split an answer carries.
fn value(r: &wire::GetSplitResponse) -> Option<i64> {
    lease_values(r).first().copied()
}

/// A split journaled but never delivered is delivered on the retry, even
/// across a restart from the journal: none lost, none duplicated.
#[tokio::test]
async fn a_retried_get_split_gets_the_same_split_even_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (config, clock, d) = fault_tolerant_dispatcher(&dir);
    let iteration = dynamic_iteration(&d).await;
    let ask = |seq: i64, worker: &str| wire::GetSplitRequest {
        iteration_id: iteration,
        repetition: 0,
        split_provider_index: 0,
        tfdata_worker_address: worker.into(),
        tfdata_split_sequence: Some(seq),
        ..Default::default()
    };
    assert_eq!(
        value(&d.get_split_wire(ask(0, "w1")).await.unwrap()),
        Some(0)
    );
    assert_eq!(
        value(&d.get_split_wire(ask(1, "w1")).await.unwrap()),
        Some(1)
    );
    // The answer to seq 1 was "lost": the retry gets split 1 again.
    assert_eq!(
        value(&d.get_split_wire(ask(1, "w1")).await.unwrap()),
        Some(1)
    );
    assert_eq!(
        value(&d.get_split_wire(ask(0, "w2")).await.unwrap()),
        Some(2)
    );
    drop(d);

    let d = Dispatcher::new(config, clock).unwrap();
    assert_eq!(
        value(&d.get_split_wire(ask(0, "w2")).await.unwrap()),
        Some(2),
        "retry after restart"
    );
    assert_eq!(
        value(&d.get_split_wire(ask(2, "w1")).await.unwrap()),
        Some(3)
    );
    assert_eq!(
        value(&d.get_split_wire(ask(1, "w2")).await.unwrap()),
        Some(4)
    );
    let end = d.get_split_wire(ask(3, "w1")).await.unwrap();
    assert!(end.end_of_splits);
    // TensorFlow workers (no sequence) get plain cursor semantics.
    let tf = wire::GetSplitRequest {
        iteration_id: iteration,
        repetition: 1,
        split_provider_index: 0,
        ..Default::default()
    };
    assert_eq!(value(&d.get_split_wire(tf).await.unwrap()), Some(0));
}

/// The chaos test's duplicates (`tests/chaos.rs`): a dispatcher killed
/// during its start-up compaction, after `snapshot_<m>` was renamed into
/// place and before `journal_<m>` was created. The next start wrote
/// `journal_<m + 1>`, and every start after it stopped replaying at the
/// missing `journal_<m>`: the splits journaled in `journal_<m + 1>` were
/// forgotten and handed out again (once per such restart).
#[tokio::test]
async fn a_crash_between_a_compaction_and_its_journal_file_duplicates_no_split() {
    let dir = tempfile::tempdir().unwrap();
    let journal_dir = dir.path().join(journal::JOURNAL_DIR);
    let config = DispatcherConfig {
        work_dir: Some(dir.path().display().to_string()),
        fault_tolerant_mode: true,
        ..Default::default()
    };
    let clock = Arc::new(FixedClock(AtomicI64::new(1)));
    let ask = |seq: i64, worker: &str| wire::GetSplitRequest {
        iteration_id: IterationId::FIRST,
        repetition: 0,
        split_provider_index: 0,
        tfdata_worker_address: worker.into(),
        tfdata_split_sequence: Some(seq),
        ..Default::default()
    };
    // First run (journal_0): splits 0 and 1.
    let d = Dispatcher::new(config.clone(), clock.clone()).unwrap();
    dynamic_iteration(&d).await;
    assert_eq!(
        value(&d.get_split_wire(ask(0, "w1")).await.unwrap()),
        Some(0)
    );
    assert_eq!(
        value(&d.get_split_wire(ask(1, "w1")).await.unwrap()),
        Some(1)
    );
    drop(d);
    // Second start: replays journal_0, opens journal_1 and compacts into
    // snapshot_2 and (still empty) journal_2. Without journal_2 the
    // directory is as the SIGKILL left it (the files before snapshot_2 it
    // also left are ignored by a start).
    drop(Dispatcher::new(config.clone(), clock.clone()).unwrap());
    let journal_2 = journal_dir.join("journal_2");
    assert!(journal_dir.join("snapshot_2").exists());
    assert_eq!(std::fs::metadata(&journal_2).unwrap().len(), 0);
    std::fs::remove_file(&journal_2).unwrap();
    // Third start: the compaction, nothing to replay; writes journal_3.
    let d = Dispatcher::new(config.clone(), clock.clone()).unwrap();
    assert_eq!(
        value(&d.get_split_wire(ask(2, "w1")).await.unwrap()),
        Some(2)
    );
    drop(d);
    // Fourth start: split 2 is journaled in journal_3: the next worker
    // gets split 3, and w1's retry (its answer lost) split 2 again.
    let d = Dispatcher::new(config, clock).unwrap();
    assert_eq!(
        value(&d.get_split_wire(ask(0, "w2")).await.unwrap()),
        Some(3),
        "split 2 handed out twice"
    );
    assert_eq!(
        value(&d.get_split_wire(ask(2, "w1")).await.unwrap()),
        Some(2)
    );
}

/// A worker silent for worker_timeout is lost: its task leaves the
/// iteration and the split it held goes to the next worker that asks.
#[tokio::test]
async fn a_lost_workers_undelivered_splits_are_handed_out_again() {
    let clock = Arc::new(FixedClock(AtomicI64::new(1_000_000)));
    let config = DispatcherConfig {
        worker_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let d = Dispatcher::new(config, clock.clone()).unwrap();
    let heartbeat = |w: &'static str, uid: i64| wire::WorkerHeartbeatRequest {
        worker_address: w.into(),
        tfdata_runs_pipelines: true,
        worker_uid: uid,
        ..Default::default()
    };
    for w in ["w1:1", "w2:1"] {
        d.worker_heartbeat(heartbeat(w, 7)).await.unwrap();
    }
    let iteration = dynamic_iteration(&d).await; // range(5)
    let task_of = |state: &DispatcherState, w: &str| {
        state
            .tasks_for_worker(w)
            .find(|t| t.iteration_id == IterationId(iteration))
            .map(|t| t.id.0)
            .unwrap()
    };
    let state = d.state_copy().await;
    let (t1, t2) = (task_of(&state, "w1:1"), task_of(&state, "w2:1"));
    let ask = |seq: i64, worker: &str, task: i64, delivered: &[i64]| wire::GetSplitRequest {
        iteration_id: iteration,
        repetition: 0,
        split_provider_index: 0,
        tfdata_worker_address: worker.into(),
        tfdata_split_sequence: Some(seq),
        tfdata_task_id: task,
        tfdata_delivered: delivered
            .iter()
            .map(|&sequence| wire::TfdataDeliveredSplit {
                repetition: 0,
                sequence,
            })
            .collect(),
        tfdata_max_splits: None,
    };
    // w1 gets splits 0, 1, 2 and reports the first delivered.
    for seq in 0..3 {
        let got = d.get_split_wire(ask(seq, "w1:1", t1, &[])).await.unwrap();
        assert_eq!(value(&got), Some(seq));
    }
    let got = d.get_split_wire(ask(3, "w1:1", t1, &[0])).await.unwrap();
    assert_eq!(value(&got), Some(3));
    // w2 gets split 4, then the end of splits: it will not ask again.
    assert_eq!(
        value(&d.get_split_wire(ask(0, "w2:1", t2, &[])).await.unwrap()),
        Some(4)
    );
    assert_eq!(
        value(&d.get_split_wire(ask(1, "w2:1", t2, &[0])).await.unwrap()),
        None
    );

    // w2 keeps heartbeating; w1 goes silent and is declared lost.
    clock.0.fetch_add(900_000, Ordering::SeqCst);
    d.worker_heartbeat(heartbeat("w2:1", 7)).await.unwrap();
    clock.0.fetch_add(900_000, Ordering::SeqCst);
    d.run_maintenance().await.unwrap();
    let state = d.state_copy().await;
    assert!(state.worker("w1:1").unwrap().lost);
    assert_eq!(
        workers_lost(&d).await,
        [("w1:1".to_string(), true), ("w2:1".to_string(), false)],
        "the status service (`tfdata status`) shows the lost worker"
    );
    let it = state.iteration(IterationId(iteration)).unwrap();
    assert!(!it.finished, "splits 1, 2 and 3 are not delivered yet");
    // Nobody would ask for them, so w2 got a new task to produce them.
    let recovery: Vec<i64> = state
        .tasks_for_worker("w2:1")
        .filter(|t| t.id.0 != t2)
        .map(|t| t.id.0)
        .collect();
    assert_eq!(recovery.len(), 1, "{state:?}");
    let t3 = recovery[0];
    let mut got = Vec::new();
    for seq in 0.. {
        match value(&d.get_split_wire(ask(seq, "w2:1", t3, &[])).await.unwrap()) {
            Some(v) => got.push(v),
            None => break,
        }
    }
    assert_eq!(got, vec![1, 2, 3], "undelivered splits only, in order");
    // The iteration ends when the tasks do.
    for task in [t2, t3] {
        d.worker_update_wire(wire::WorkerUpdateRequest {
            worker_address: "w2:1".into(),
            updates: vec![wire::TaskProgress {
                task_id: task,
                completed: true,
            }],
        })
        .await
        .unwrap();
    }
    assert!(
        d.state_copy()
            .await
            .iteration(IterationId(iteration))
            .unwrap()
            .finished
    );

    // w1 returns: it is revived.
    d.worker_heartbeat(heartbeat("w1:1", 7)).await.unwrap();
    assert!(!d.state_copy().await.worker("w1:1").unwrap().lost);
    assert_eq!(
        workers_lost(&d).await,
        [("w1:1".to_string(), false), ("w2:1".to_string(), false)]
    );
}

/// A dispatcher whose worker_timeout is 1 s, on a clock the test moves, with
/// two tfdata workers (w1:1, w2:1) registered.
async fn two_workers_timing_out_after_a_second() -> (Dispatcher, Arc<FixedClock>) {
    let clock = Arc::new(FixedClock(AtomicI64::new(1_000_000)));
    let config = DispatcherConfig {
        worker_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let d = Dispatcher::new(config, clock.clone()).unwrap();
    for w in ["w1:1", "w2:1"] {
        d.worker_heartbeat(tfdata_worker_heartbeat(w))
            .await
            .unwrap();
    }
    (d, clock)
}

/// A worker that finished its task and then died: the task leaves the
/// iteration's task list, so a reader that has not read the task's end (it
/// heard of the task late) does not wait for a worker that is gone. Found
/// by `chaos.rs::workers_killed_mid_file_duplicate_no_record` in
/// tfdata-cli, where such a reader retried the dead worker until the test's
/// deadline.
#[tokio::test]
async fn a_lost_workers_finished_tasks_leave_the_task_list() {
    let (d, clock) = two_workers_timing_out_after_a_second().await;
    let client = iteration_of_range(&d, 5, 1).await; // distributed_epoch
    let listed = |r: wire::ClientHeartbeatResponse| -> Vec<String> {
        let mut workers: Vec<String> = r.task_info.into_iter().map(|t| t.worker_address).collect();
        workers.sort();
        workers
    };
    assert_eq!(listed(reader_heartbeat(&d, client).await), ["w1:1", "w2:1"]);
    let t1 = d
        .state_copy()
        .await
        .tasks_for_worker("w1:1")
        .map(|t| t.id.0)
        .next()
        .unwrap();
    d.worker_update_wire(wire::WorkerUpdateRequest {
        worker_address: "w1:1".into(),
        updates: vec![wire::TaskProgress {
            task_id: t1,
            completed: true,
        }],
    })
    .await
    .unwrap();
    assert_eq!(
        listed(reader_heartbeat(&d, client).await),
        ["w1:1", "w2:1"],
        "a finished task stays listed while its worker lives: readers read its end"
    );

    // w1 goes silent and is declared lost.
    clock.0.fetch_add(900_000, Ordering::SeqCst);
    d.worker_heartbeat(tfdata_worker_heartbeat("w2:1"))
        .await
        .unwrap();
    clock.0.fetch_add(900_000, Ordering::SeqCst);
    d.run_maintenance().await.unwrap();
    assert!(d.state_copy().await.worker("w1:1").unwrap().lost);
    assert_eq!(listed(reader_heartbeat(&d, client).await), ["w2:1"]);
    let state = d.state_copy().await;
    let it = state.iteration(IterationId(IterationId::FIRST)).unwrap();
    assert!(!it.finished, "w2's task is still running");
}

/// Every task of a distributed_epoch iteration lost (all its workers
/// declared lost at once, each holding nothing its readers had not
/// received): that is not the end of the data. The iteration stays
/// unfinished, and a worker that registers gets a task for the rest of its
/// splits. (It used to finish: readers ended with most of the data unread.)
#[tokio::test]
async fn an_iteration_whose_every_task_was_lost_waits_for_a_worker() {
    let (d, clock) = two_workers_timing_out_after_a_second().await;
    iteration_of_range(&d, 5, 1).await; // distributed_epoch, no receipts
    clock.0.fetch_add(2_000_000, Ordering::SeqCst);
    d.run_maintenance().await.unwrap();
    let state = d.state_copy().await;
    assert!(state.workers().iter().all(|w| w.lost));
    let it = state.iteration(IterationId(IterationId::FIRST)).unwrap();
    assert!(it.tasks.is_empty(), "every task left with its worker");
    assert!(!it.finished, "every task lost is not the end of the data");
    let answer = d
        .worker_heartbeat(tfdata_worker_heartbeat("w3:1"))
        .await
        .unwrap();
    assert_eq!(answer.new_tasks.len(), 1, "the new worker reads the rest");
    let task = answer.new_tasks[0].task_id;
    d.worker_update_wire(wire::WorkerUpdateRequest {
        worker_address: "w3:1".into(),
        updates: vec![wire::TaskProgress {
            task_id: task,
            completed: true,
        }],
    })
    .await
    .unwrap();
    let state = d.state_copy().await;
    assert!(
        state
            .iteration(IterationId(IterationId::FIRST))
            .unwrap()
            .finished
    );
}

/// Each worker's address and whether the status service calls it lost.
async fn workers_lost(d: &Dispatcher) -> Vec<(String, bool)> {
    let mut workers: Vec<(String, bool)> = d
        .status()
        .await
        .workers
        .into_iter()
        .map(|w| (w.address, w.lost))
        .collect();
    workers.sort();
    workers
}

/// A worker cut off by a partition is declared lost, then the link heals and
/// a `GetSplit` its old task sent before the cut arrives (TCP delivers it
/// late). That task left the iteration and its splits went back to the
/// pool: it gets the end of splits, and no split is handed to it. (Before,
/// it took the next split, held by a task nobody reads any more: a lost
/// element, found by `tests/multi_host.rs` in tfdata-cli.)
#[tokio::test]
async fn a_late_get_split_from_a_lost_workers_old_task_takes_no_split() {
    let clock = Arc::new(FixedClock(AtomicI64::new(1_000_000)));
    let config = DispatcherConfig {
        worker_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let d = Dispatcher::new(config, clock.clone()).unwrap();
    let heartbeat = tfdata_worker_heartbeat;
    for w in ["w1:1", "w2:1"] {
        d.worker_heartbeat(heartbeat(w)).await.unwrap();
    }
    let iteration = dynamic_iteration(&d).await; // range(5)
    let task_of = |state: &DispatcherState, w: &str| {
        state
            .tasks_for_worker(w)
            .find(|t| t.iteration_id == IterationId(iteration))
            .map(|t| t.id.0)
            .unwrap()
    };
    let state = d.state_copy().await;
    let (old_t1, t2) = (task_of(&state, "w1:1"), task_of(&state, "w2:1"));
    let ask = |seq: i64, worker: &str, task: i64| wire::GetSplitRequest {
        iteration_id: iteration,
        repetition: 0,
        split_provider_index: 0,
        tfdata_worker_address: worker.into(),
        tfdata_split_sequence: Some(seq),
        tfdata_task_id: task,
        ..Default::default()
    };
    let mut read = Vec::new();
    for seq in 0..2 {
        read.extend(value(
            &d.get_split_wire(ask(seq, "w1:1", old_t1)).await.unwrap(),
        ));
    }
    assert_eq!(read, [0, 1]);
    let mut w2_seq = 0;
    read.extend(value(
        &d.get_split_wire(ask(w2_seq, "w2:1", t2)).await.unwrap(),
    ));
    w2_seq += 1;
    // w1 is cut off: declared lost, its splits 0 and 1 go back to the pool.
    clock.0.fetch_add(900_000, Ordering::SeqCst);
    d.worker_heartbeat(heartbeat("w2:1")).await.unwrap();
    clock.0.fetch_add(900_000, Ordering::SeqCst);
    d.run_maintenance().await.unwrap();
    assert!(d.state_copy().await.worker("w1:1").unwrap().lost);
    read.clear(); // 0 and 1 were never delivered
    read.push(2);

    // The link heals: the request w1's old task sent before the cut arrives.
    let late = d.get_split_wire(ask(2, "w1:1", old_t1)).await.unwrap();
    assert!(late.end_of_splits && late.split.is_none(), "{late:?}");
    // w1 heartbeats again: it is revived with a new task; a retry of the
    // old task's request still gets nothing.
    d.worker_heartbeat(heartbeat("w1:1")).await.unwrap();
    let state = d.state_copy().await;
    let new_t1 = task_of(&state, "w1:1");
    assert_ne!(new_t1, old_t1);
    let late = d.get_split_wire(ask(2, "w1:1", old_t1)).await.unwrap();
    assert!(late.end_of_splits && late.split.is_none(), "{late:?}");

    // Every split is produced exactly once by the live tasks.
    let mut w1_seq = 0;
    loop {
        let a = value(&d.get_split_wire(ask(w1_seq, "w1:1", new_t1)).await.unwrap());
        let b = value(&d.get_split_wire(ask(w2_seq, "w2:1", t2)).await.unwrap());
        (w1_seq, w2_seq) = (w1_seq + 1, w2_seq + 1);
        if a.is_none() && b.is_none() {
            break;
        }
        read.extend(a.into_iter().chain(b));
    }
    read.sort();
    assert_eq!(read, [0, 1, 2, 3, 4]);
}

#[tokio::test]
async fn a_worker_restarted_at_the_same_address_loses_its_old_tasks() {
    let clock = Arc::new(FixedClock(AtomicI64::new(1_000_000)));
    let d = Dispatcher::new(DispatcherConfig::default(), clock).unwrap();
    let heartbeat = |uid: i64| wire::WorkerHeartbeatRequest {
        worker_address: "w1:1".into(),
        tfdata_runs_pipelines: true,
        worker_uid: uid,
        ..Default::default()
    };
    d.worker_heartbeat(heartbeat(11)).await.unwrap();
    let iteration = dynamic_iteration(&d).await;
    let old = d
        .state_copy()
        .await
        .tasks_for_worker("w1:1")
        .next()
        .unwrap()
        .id;
    let first_split_of = |task: i64| wire::GetSplitRequest {
        iteration_id: iteration,
        split_provider_index: 0,
        tfdata_worker_address: "w1:1".into(),
        tfdata_split_sequence: Some(0),
        tfdata_task_id: task,
        ..Default::default()
    };
    let got = d.get_split_wire(first_split_of(old.0)).await.unwrap();
    assert_eq!(value(&got), Some(0));
    // Same uid: nothing happens. A new uid: a new process.
    let same = wire::WorkerHeartbeatRequest {
        current_tasks: vec![old.0],
        ..heartbeat(11)
    };
    assert!(d.worker_heartbeat(same).await.unwrap().new_tasks.is_empty());
    let r = d.worker_heartbeat(heartbeat(12)).await.unwrap();
    assert_eq!(r.new_tasks.len(), 1);
    assert_ne!(r.new_tasks[0].task_id, old.0);
    let state = d.state_copy().await;
    assert!(state.task(old).unwrap().finished);
    assert_eq!(state.worker("w1:1").unwrap().uid, 12);
    // Split 0 died with the old process: the new task gets it first.
    let got = d
        .get_split_wire(first_split_of(r.new_tasks[0].task_id))
        .await;
    assert_eq!(value(&got.unwrap()), Some(0));
}

/// Compaction bounds replay: with a tiny bound the journal directory
/// holds a compaction and a short tail, and a restart rebuilds the same
/// state (including split cursors and per-worker last splits).
#[tokio::test]
async fn compaction_keeps_the_state_and_bounds_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let config = DispatcherConfig {
        work_dir: Some(dir.path().display().to_string()),
        fault_tolerant_mode: true,
        ..Default::default()
    };
    let clock = Arc::new(FixedClock(AtomicI64::new(1)));
    let mut d = Dispatcher::new(config.clone(), clock.clone()).unwrap();
    d.set_compact_after_records(4);
    let iteration = dynamic_iteration(&d).await;
    for seq in 0..5 {
        d.get_split_wire(wire::GetSplitRequest {
            iteration_id: iteration,
            repetition: 0,
            split_provider_index: 0,
            tfdata_worker_address: "w".into(),
            tfdata_split_sequence: Some(seq),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let before = d.state_copy().await;
    assert_eq!(
        DispatcherState::from_compacted(&before.to_compacted()).unwrap(),
        before
    );
    drop(d);
    let journal_dir = dir.path().join(journal::JOURNAL_DIR);
    let files: Vec<String> = std::fs::read_dir(&journal_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        files.iter().any(|f| f.starts_with("snapshot_")),
        "{files:?}"
    );
    assert!(files.len() <= 3, "old files are deleted: {files:?}");
    let d = Dispatcher::new(config, clock).unwrap();
    assert_eq!(d.state_copy().await, before);
}

/// Property: for random sequences of operations (registrations, jobs of
/// every sharding mode, iterations, splits and their retries, task
/// completions, client releases, worker loss and revival, GC), replaying
/// the journal — with or without a compaction in between — rebuilds
/// exactly the state the live dispatcher had.
#[tokio::test]
async fn replaying_any_journal_gives_the_live_state() {
    use rand::{Rng, SeedableRng};
    let (mut saw_held, mut saw_returned) = (false, false);
    for seed in 0..8u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let config = DispatcherConfig {
            work_dir: Some(dir.path().display().to_string()),
            fault_tolerant_mode: true,
            worker_timeout: Duration::from_secs(1),
            job_gc_timeout: Some(Duration::from_secs(1)),
            client_timeout: Duration::from_secs(1),
            ..Default::default()
        };
        let clock = Arc::new(FixedClock(AtomicI64::new(1)));
        let mut d = Dispatcher::new(config.clone(), clock.clone()).unwrap();
        d.set_compact_after_records(rng.random_range(5..200));
        let mut clients = Vec::new();
        let mut splits_seq: HashMap<(i64, String), (i64, Option<i64>)> = HashMap::new();
        let workers = ["w0:1", "w1:1", "w2:1"];
        for _ in 0..rng.random_range(20..70) {
            match rng.random_range(0..9) {
                0 | 1 => {
                    let policy = rng.random_range(0..2);
                    let client = iteration_of_range(&d, rng.random_range(1..20), policy).await;
                    clients.push(client);
                }
                2 | 3 => {
                    let w = workers[rng.random_range(0..workers.len())];
                    let current: Vec<i64> = d
                        .state_copy()
                        .await
                        .tasks_for_worker(w)
                        .map(|t| t.id.0)
                        .collect();
                    let r = d
                        .worker_heartbeat(wire::WorkerHeartbeatRequest {
                            worker_address: w.into(),
                            current_tasks: current,
                            tfdata_runs_pipelines: true,
                            // Now and then the worker process restarts.
                            worker_uid: 1 + i64::from(rng.random_bool(0.1)),
                            ..Default::default()
                        })
                        .await
                        .unwrap();
                    // Finish some of the worker's tasks.
                    for t in r.new_tasks.iter().filter(|_| rng.random_bool(0.3)) {
                        d.worker_update_wire(wire::WorkerUpdateRequest {
                            worker_address: w.into(),
                            updates: vec![wire::TaskProgress {
                                task_id: t.task_id,
                                completed: true,
                            }],
                        })
                        .await
                        .unwrap();
                    }
                }
                4 | 5 => {
                    let state = d.state_copy().await;
                    let dynamic: Vec<i64> = state
                        .iterations()
                        .filter(|it| it.num_split_providers > 0)
                        .map(|it| it.id.0)
                        .collect();
                    if let Some(&iteration) = dynamic.get(rng.random_range(0..dynamic.len().max(1)))
                    {
                        let w = workers[rng.random_range(0..workers.len())].to_string();
                        let task = state
                            .tasks_for_worker(&w)
                            .find(|t| t.iteration_id == IterationId(iteration))
                            .map_or(0, |t| t.id.0);
                        // (next sequence number, the last request's).
                        let seq = splits_seq
                            .entry((iteration, w.clone()))
                            .or_insert((0, None));
                        let retry = rng.random_bool(0.2) && seq.1.is_some();
                        let asked = match seq.1 {
                            Some(last) if retry => last,
                            _ => seq.0,
                        };
                        // Report some earlier splits delivered.
                        let delivered = (0..rng.random_range(0..3))
                            .map(|_| wire::TfdataDeliveredSplit {
                                repetition: 0,
                                sequence: rng.random_range(0..asked.max(1)),
                            })
                            .collect();
                        let answer = d
                            .get_split_wire(wire::GetSplitRequest {
                                iteration_id: iteration,
                                repetition: 0,
                                split_provider_index: 0,
                                tfdata_worker_address: w,
                                tfdata_split_sequence: Some(asked),
                                tfdata_task_id: task,
                                tfdata_delivered: delivered,
                                // Sometimes a lease of several splits.
                                tfdata_max_splits: rng
                                    .random_bool(0.5)
                                    .then(|| rng.random_range(1..5)),
                            })
                            .await;
                        if !retry && let Ok(answer) = answer {
                            let received = i64::from(answer.split.is_some())
                                + answer.tfdata_more_splits.len() as i64;
                            seq.1 = Some(seq.0);
                            seq.0 += received.max(1);
                        }
                    }
                }
                6 => {
                    if !clients.is_empty() {
                        let c = clients.swap_remove(rng.random_range(0..clients.len()));
                        let _ = d
                            .release_iteration_client(
                                wire::ReleaseIterationClientRequest {
                                    iteration_client_id: c,
                                }
                                .try_into()
                                .unwrap(),
                            )
                            .await;
                    }
                }
                7 => {
                    // Time passes: silent workers are lost, idle iterations collected.
                    clock.0.fetch_add(
                        rng.random_range(0..2_000_000),
                        std::sync::atomic::Ordering::SeqCst,
                    );
                    d.run_maintenance().await.unwrap();
                }
                _ => {
                    if let Some(&c) = clients.first() {
                        let _ = d
                            .client_heartbeat(wire::ClientHeartbeatRequest {
                                iteration_client_id: c,
                                ..Default::default()
                            })
                            .await;
                    }
                }
            }
        }
        let live = d.state_copy().await;
        if let Err(v) = live.check_invariants() {
            panic!("seed {seed}: the live state broke an invariant: {v}");
        }
        saw_held |= live.iterations().any(|it| !it.held_splits.is_empty());
        saw_returned |= live.iterations().any(|it| !it.returned_splits.is_empty());
        drop(d);
        let replayed = Dispatcher::new(config.clone(), clock.clone()).unwrap();
        let got = replayed.state_copy().await;
        // Compacted forms first: their difference is readable.
        assert_eq!(
            got.to_compacted(),
            live.to_compacted(),
            "seed {seed}: first replay"
        );
        assert!(got == live, "seed {seed}: first replay");
        drop(replayed);
        // Again, from the compacted journal the restart left behind.
        let again = Dispatcher::new(config, clock).unwrap();
        assert_eq!(
            again.state_copy().await,
            live,
            "seed {seed}: replay after compaction"
        );
    }
    assert!(
        saw_held && saw_returned,
        "the histories exercise held and returned splits"
    );
}

/// A `GetSplit` naming a task that is not one of the iteration's is refused
/// before the provider moves: the split it would have taken is the next
/// caller's.
#[tokio::test]
async fn a_get_split_for_a_task_of_no_iteration_takes_no_split() {
    let d = Dispatcher::new(
        DispatcherConfig::default(),
        Arc::new(FixedClock(AtomicI64::new(1))),
    )
    .unwrap();
    let iteration = dynamic_iteration(&d).await;
    let request = |task| wire::GetSplitRequest {
        iteration_id: iteration,
        repetition: 0,
        split_provider_index: 0,
        tfdata_worker_address: "w".into(),
        tfdata_split_sequence: Some(0),
        tfdata_task_id: task,
        ..Default::default()
    };
    let err = d.get_split_wire(request(424_242)).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err}");
    assert!(err.to_string().contains("task 424242"), "{err}");
    let first = d.get_split_wire(request(0)).await.unwrap();
    assert_eq!(value(&first), Some(0));
}

/// Every split a lease carries, `split` first.
fn lease_values(r: &wire::GetSplitResponse) -> Vec<i64> {
    let more = r.tfdata_more_splits.iter().map(|b| {
        <tfdata_proto::tensorflow::TensorProto as prost::Message>::decode(b.clone()).unwrap()
    });
    r.split
        .iter()
        .cloned()
        .chain(more)
        .map(|t| {
            tfdata_core::element::tensor_from_proto(&t)
                .unwrap()
                .to_scalar::<i64>()
                .unwrap()
        })
        .collect()
}

/// A tfdata worker's task leases several splits per `GetSplit`: the lease
/// is journaled as one record, a retry (its answer lost) gets the whole
/// lease again, also after a restart; the repetition's end comes as the
/// answer to the next request, never inside a lease; a lost worker's
/// undelivered splits of a lease go to the next worker; TensorFlow's
/// one-split requests are unchanged.
#[tokio::test]
async fn leases_of_splits_are_exactly_once_across_retries_restarts_and_lost_workers() {
    let dir = tempfile::tempdir().unwrap();
    let config = DispatcherConfig {
        work_dir: Some(dir.path().display().to_string()),
        fault_tolerant_mode: true,
        worker_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let clock = Arc::new(FixedClock(AtomicI64::new(1_000_000)));
    let heartbeat = tfdata_worker_heartbeat;
    let d = Dispatcher::new(config.clone(), clock.clone()).unwrap();
    for w in ["w1:1", "w2:1"] {
        d.worker_heartbeat(heartbeat(w)).await.unwrap();
    }
    iteration_of_range(&d, 12, 1).await;
    let iteration = IterationId::FIRST;
    let state = d.state_copy().await;
    let task_of = |state: &DispatcherState, w: &str| {
        state
            .tasks_for_worker(w)
            .find(|t| t.iteration_id == IterationId(iteration))
            .map(|t| t.id.0)
            .unwrap()
    };
    let (t1, t2) = (task_of(&state, "w1:1"), task_of(&state, "w2:1"));
    let lease =
        |seq: i64, worker: &str, task: i64, max: i64, delivered: &[i64]| wire::GetSplitRequest {
            iteration_id: iteration,
            repetition: 0,
            split_provider_index: 0,
            tfdata_worker_address: worker.into(),
            tfdata_split_sequence: Some(seq),
            tfdata_task_id: task,
            tfdata_max_splits: Some(max),
            tfdata_delivered: delivered
                .iter()
                .map(|&sequence| wire::TfdataDeliveredSplit {
                    repetition: 0,
                    sequence,
                })
                .collect(),
        };
    let journal_records = |dir: &std::path::Path| {
        std::fs::read_dir(dir.join(journal::JOURNAL_DIR))
            .unwrap()
            .map(|e| std::fs::metadata(e.unwrap().path()).unwrap().len())
            .sum::<u64>()
    };
    let before = journal_records(dir.path());
    let got = d
        .get_split_wire(lease(0, "w1:1", t1, 4, &[]))
        .await
        .unwrap();
    assert_eq!(lease_values(&got), [0, 1, 2, 3]);
    assert!(!got.end_of_splits);
    assert!(
        journal_records(dir.path()) > before,
        "the lease is journaled"
    );
    // The answer was lost: the retry gets the same lease.
    let again = d
        .get_split_wire(lease(0, "w1:1", t1, 4, &[]))
        .await
        .unwrap();
    assert_eq!(lease_values(&again), [0, 1, 2, 3]);
    // w2 takes a lease of 3; its sequence numbers are its own.
    let got = d
        .get_split_wire(lease(0, "w2:1", t2, 3, &[]))
        .await
        .unwrap();
    assert_eq!(lease_values(&got), [4, 5, 6]);
    // A huge request is capped; the dispatcher restarts from its journal.
    drop(d);
    let d = Dispatcher::new(config, clock.clone()).unwrap();
    let again = d
        .get_split_wire(lease(0, "w2:1", t2, 3, &[]))
        .await
        .unwrap();
    assert_eq!(lease_values(&again), [4, 5, 6], "retry after a restart");
    // w1 delivered its lease, asks for many: the rest of the repetition,
    // without its end.
    let got = d
        .get_split_wire(lease(4, "w1:1", t1, i64::MAX, &[0, 1, 2, 3]))
        .await
        .unwrap();
    assert_eq!(lease_values(&got), [7, 8, 9, 10, 11]);
    assert!(!got.end_of_splits);
    let end = d
        .get_split_wire(lease(9, "w1:1", t1, 4, &[]))
        .await
        .unwrap();
    assert!(end.end_of_splits && lease_values(&end).is_empty());
    let state = d.state_copy().await;
    let it = state.iteration(IterationId(iteration)).unwrap();
    assert_eq!(
        it.held_splits.len(),
        3 + 5,
        "w2's lease and w1's second one"
    );

    // w1 goes silent and is lost: its undelivered splits (7..=11) go to
    // w2's next requests, one per request, as returned splits.
    clock.0.fetch_add(900_000, Ordering::SeqCst);
    d.worker_heartbeat(heartbeat("w2:1")).await.unwrap();
    clock.0.fetch_add(900_000, Ordering::SeqCst);
    d.run_maintenance().await.unwrap();
    let state = d.state_copy().await;
    assert!(state.worker("w1:1").unwrap().lost);
    let mut seq = 3;
    let mut returned = Vec::new();
    for _ in 0..20 {
        let got = d
            .get_split_wire(lease(seq, "w2:1", t2, 4, &[]))
            .await
            .unwrap();
        if got.end_of_splits {
            break;
        }
        let values = lease_values(&got);
        seq += values.len() as i64;
        returned.extend(values);
    }
    assert_eq!(returned, [7, 8, 9, 10, 11]);
}

/// Readers that report receipts (issue 17, item 2): a lost worker's held
/// splits wait for every such reader of the iteration; the splits a reader
/// received whole are not handed out again, the rest are, once all have
/// reported (a released reader counts as having reported nothing). The
/// state survives a restart from the journal.
#[tokio::test]
async fn a_lost_workers_splits_wait_for_the_readers_receipts() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(FixedClock(AtomicI64::new(1_000_000)));
    let config = DispatcherConfig {
        work_dir: Some(dir.path().display().to_string()),
        fault_tolerant_mode: true,
        worker_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let d = Dispatcher::new(config.clone(), clock.clone()).unwrap();
    let heartbeat = tfdata_worker_heartbeat;
    for w in ["w1:1", "w2:1"] {
        d.worker_heartbeat(heartbeat(w)).await.unwrap();
    }
    let job_id = shared_dynamic_job(&d, 8).await;
    let client = |reports| wire::GetOrCreateIterationRequest {
        job_id,
        repetition: 0,
        tfdata_reports_receipts: reports,
        tfdata_consumed: Vec::new(),
        tfdata_restore: None,
        tfdata_consumed_elements: Vec::new(),
        tfdata_consumed_pieces: Vec::new(),
    };
    let c1 = d
        .get_or_create_iteration(client(true).try_into().unwrap())
        .await
        .unwrap();
    let c2 = d
        .get_or_create_iteration(client(true).try_into().unwrap())
        .await
        .unwrap();
    // A reader that does not report (a TensorFlow client) is not waited for.
    let tf = d
        .get_or_create_iteration(client(false).try_into().unwrap())
        .await
        .unwrap();
    let state = d.state_copy().await;
    let iteration = state
        .client_iteration(tfdata_core::IterationClientId(c1.iteration_client_id))
        .unwrap();
    let task_of = |state: &DispatcherState, w: &str| {
        state
            .tasks_for_worker(w)
            .find(|t| t.iteration_id == iteration)
            .map(|t| t.id)
            .unwrap()
    };
    let (t1, t2) = (task_of(&state, "w1:1"), task_of(&state, "w2:1"));
    let ask = |seq: i64, worker: &str, task: tfdata_core::TaskId| wire::GetSplitRequest {
        iteration_id: iteration.0,
        split_provider_index: 0,
        tfdata_worker_address: worker.into(),
        tfdata_split_sequence: Some(seq),
        tfdata_task_id: task.0,
        ..Default::default()
    };
    // w1 holds splits 0..4 (none reported delivered), w2 the rest.
    for seq in 0..4 {
        assert_eq!(
            value(&d.get_split_wire(ask(seq, "w1:1", t1)).await.unwrap()),
            Some(seq)
        );
    }
    for seq in 0..4 {
        assert_eq!(
            value(&d.get_split_wire(ask(seq, "w2:1", t2)).await.unwrap()),
            Some(4 + seq)
        );
    }
    // w2 reached the end: it will not ask for a returned split.
    assert!(
        d.get_split_wire(ask(4, "w2:1", t2))
            .await
            .unwrap()
            .end_of_splits
    );
    // w1 goes silent and is lost.
    clock.0.fetch_add(900_000, Ordering::SeqCst);
    d.worker_heartbeat(heartbeat("w2:1")).await.unwrap();
    clock.0.fetch_add(900_000, Ordering::SeqCst);
    d.run_maintenance().await.unwrap();
    let it = d.state_copy().await.iteration(iteration).unwrap().clone();
    assert!(it.returned_splits.is_empty(), "they wait for the receipts");
    assert_eq!(it.awaited_receipts.get(&t1).map(|r| r.len()), Some(2));
    assert!(!it.finished);
    // Each reader is told which lost tasks wait for it (one that never
    // heard of a task answers with empty receipts); the TensorFlow reader
    // is not waited for.
    for (client, awaited) in [(&c1, vec![t1.0]), (&tf, vec![])] {
        let beat = reader_heartbeat(&d, client.iteration_client_id).await;
        assert_eq!(beat.tfdata_awaited_receipts, awaited);
    }

    let receipts =
        |client: &wire::GetOrCreateIterationResponse, task: tfdata_core::TaskId, seqs: &[i64]| {
            wire::ClientHeartbeatRequest {
                iteration_client_id: client.iteration_client_id,
                tfdata_receipts: vec![wire::TfdataTaskReceipts {
                    task_id: task.0,
                    splits: seqs
                        .iter()
                        .map(|&index| wire::TfdataSplitName {
                            provider: 0,
                            repetition: 0,
                            index,
                        })
                        .collect(),
                    pieces: Vec::new(),
                    ranges: Vec::new(),
                }],
                ..Default::default()
            }
        };
    // Parts of split 1 (spread over several elements): the positions
    // received, which the worker producing it again skips.
    let pieces = |ranges: &[(&[i64], i64, i64)]| wire::TfdataSplitPieces {
        split: Some(wire::TfdataSplitName {
            provider: 0,
            repetition: 0,
            index: 1,
        }),
        positions: ranges
            .iter()
            .map(|(prefix, start, end)| wire::TfdataPositionRange {
                prefix: prefix.to_vec(),
                start: *start,
                end: *end,
            })
            .collect(),
    };
    // A report with a position that cannot be is refused, and changes nothing.
    let mut bad = receipts(&c1, t1, &[0]);
    bad.tfdata_receipts[0].pieces.push(pieces(&[(&[], 4, 2)]));
    let err = d.client_heartbeat(bad).await.unwrap_err();
    assert!(
        matches!(err, tfdata_core::Error::InvalidArgument(_)),
        "{err}"
    );
    // c1 received splits 0 and 2 whole, and records 0..3 of split 1 and
    // the first part of its record 5; receipts for a task that waits for
    // nobody (w2's) or repeated change nothing.
    let mut c1_receipts = receipts(&c1, t1, &[0, 2]);
    c1_receipts.tfdata_receipts[0]
        .pieces
        .push(pieces(&[(&[], 0, 3), (&[5], 0, 1)]));
    d.client_heartbeat(c1_receipts).await.unwrap();
    d.client_heartbeat(receipts(&c1, t1, &[1])).await.unwrap();
    d.client_heartbeat(receipts(&c2, t2, &[4])).await.unwrap();
    let it = d.state_copy().await.iteration(iteration).unwrap().clone();
    assert!(it.returned_splits.is_empty(), "c2 has not reported");
    assert_eq!(
        it.held_splits.len(),
        2 + 4,
        "splits 1, 3 of w1 and w2's four"
    );
    drop(d);

    // Across a restart: c2 received split 3, and record 3 of split 1. Only
    // split 1 comes back, without what the readers hold of it.
    let d = Dispatcher::new(config.clone(), clock.clone()).unwrap();
    let mut c2_receipts = receipts(&c2, t1, &[3]);
    c2_receipts.tfdata_receipts[0]
        .pieces
        .push(pieces(&[(&[], 3, 4)]));
    d.client_heartbeat(c2_receipts).await.unwrap();
    let state = d.state_copy().await;
    let it = state.iteration(iteration).unwrap();
    assert!(it.awaited_receipts.is_empty());
    let returned: Vec<usize> = it.returned_splits.values().map(|q| q.len()).collect();
    assert_eq!(returned, vec![1]);
    let recovery = state
        .tasks_for_worker("w2:1")
        .find(|t| t.iteration_id == iteration && t.id != t2)
        .map(|t| t.id)
        .expect("a task to produce the returned split");
    let again = d.get_split_wire(ask(0, "w2:1", recovery)).await.unwrap();
    assert_eq!(value(&again), Some(1));
    let skip = tfdata_core::positions::PositionSet::from_ranges(&again.tfdata_skip).unwrap();
    assert!(skip.contains(&[0]) && skip.contains(&[3]) && skip.contains(&[5, 0]));
    assert!(!skip.contains(&[4]) && !skip.contains(&[5, 1]));
    // A retry of that request gets the same positions; so does one after a
    // restart (the answer is journaled).
    let retried = d.get_split_wire(ask(0, "w2:1", recovery)).await.unwrap();
    assert_eq!(retried.tfdata_skip, again.tfdata_skip);
    drop(d);
    let d = Dispatcher::new(config.clone(), clock.clone()).unwrap();
    let retried = d.get_split_wire(ask(0, "w2:1", recovery)).await.unwrap();
    assert_eq!(retried.tfdata_skip, again.tfdata_skip);
    assert!(
        d.get_split_wire(ask(1, "w2:1", recovery))
            .await
            .unwrap()
            .end_of_splits
    );

    // Readers released before they reported count as reporting nothing:
    // w2 is lost too, and its tasks' splits (4..8 and 1) come back once
    // both are gone.
    clock.0.fetch_add(1_800_000, Ordering::SeqCst);
    d.run_maintenance().await.unwrap();
    let waiting = |state: &DispatcherState| {
        let it = state.iteration(iteration).unwrap();
        (
            it.awaited_receipts.len(),
            it.returned_splits.values().map(|q| q.len()).sum::<usize>(),
        )
    };
    assert_eq!(waiting(&d.state_copy().await), (2, 0));
    for c in [&c1, &c2, &tf] {
        d.release_iteration_client(
            wire::ReleaseIterationClientRequest {
                iteration_client_id: c.iteration_client_id,
            }
            .try_into()
            .unwrap(),
        )
        .await
        .unwrap();
    }
    assert_eq!(waiting(&d.state_copy().await), (0, 5));
}

/// Consumers of a shared distributed_epoch job restored from their
/// checkpoints: the first one to restore creates the restoration, which
/// gets no tasks (and hands out no split) until every consumer the
/// checkpoints name has joined, across a dispatcher restart; it then skips
/// the union of their consumed splits. Restoring the same checkpoints again
/// makes a new restoration; a consumer arriving after the others resumed
/// without it is refused.
#[tokio::test]
async fn a_shared_jobs_restoration_waits_for_every_consumer_and_skips_their_union() {
    let dir = tempfile::tempdir().unwrap();
    let (config, clock, d) = fault_tolerant_dispatcher(&dir);
    d.worker_heartbeat(tfdata_worker_heartbeat("w1:1"))
        .await
        .unwrap();
    let job_id = shared_dynamic_job(&d, 10).await;
    let restore = |origin: i64, client: i64, consumers: i64, consumed: &[i64]| {
        wire::GetOrCreateIterationRequest {
            job_id,
            repetition: 0,
            tfdata_reports_receipts: true,
            tfdata_consumed: vec![wire::TfdataSplitRanges {
                provider: 0,
                repetition: 0,
                bounds: consumed.to_vec(),
            }],
            tfdata_restore: Some(wire::TfdataRestore {
                origin_iteration_id: origin,
                origin_client_id: client,
                consumers,
            }),
            tfdata_consumed_elements: Vec::new(),
            tfdata_consumed_pieces: Vec::new(),
        }
    };
    let tasks_of = |state: &DispatcherState, iteration: i64| {
        state
            .tasks_for_worker("w1:1")
            .filter(|t| t.iteration_id == IterationId(iteration))
            .map(|t| t.id)
            .collect::<Vec<_>>()
    };
    // Consumer 1 of iteration 77 (2 consumers) consumed splits 0..3.
    let a = d
        .get_or_create_iteration(restore(77, 1, 2, &[0, 3]).try_into().unwrap())
        .await
        .unwrap();
    let restored = a.tfdata_iteration_id;
    let beat = reader_heartbeat(&d, a.iteration_client_id).await;
    assert!(beat.task_info.is_empty() && !beat.iteration_finished);
    assert_eq!(beat.tfdata_restores_awaited, 1);
    d.worker_heartbeat(tfdata_worker_heartbeat("w1:1"))
        .await
        .unwrap();
    assert!(tasks_of(&d.state_copy().await, restored).is_empty());
    let early = wire::GetSplitRequest {
        iteration_id: restored,
        split_provider_index: 0,
        ..Default::default()
    };
    assert!(
        d.get_split_wire(early.clone())
            .await
            .unwrap_err()
            .to_string()
            .contains("restoring")
    );
    // The restoration survives a restart while it waits.
    drop(d);
    let d = Dispatcher::new(config.clone(), clock.clone()).unwrap();
    // Consumer 2 consumed splits 5..7 and joins: tasks start.
    let b = d
        .get_or_create_iteration(restore(77, 2, 2, &[5, 7]).try_into().unwrap())
        .await
        .unwrap();
    assert_eq!(b.tfdata_iteration_id, restored);
    let state = d.state_copy().await;
    let task = tasks_of(&state, restored);
    assert_eq!(task.len(), 1);
    let mut handed_out = Vec::new();
    for seq in 0.. {
        let r = d
            .get_split_wire(wire::GetSplitRequest {
                iteration_id: restored,
                split_provider_index: 0,
                tfdata_worker_address: "w1:1".into(),
                tfdata_split_sequence: Some(seq),
                tfdata_task_id: task[0].0,
                ..Default::default()
            })
            .await
            .unwrap();
        if r.end_of_splits {
            break;
        }
        handed_out.extend(lease_values(&r));
    }
    assert_eq!(handed_out, vec![3, 4, 7, 8, 9]);
    let beat = reader_heartbeat(&d, a.iteration_client_id).await;
    assert_eq!(
        (
            beat.task_info.len(),
            beat.tfdata_restores_awaited,
            beat.tfdata_iteration_clients
        ),
        (1, 0, 2)
    );

    // The trainers crash again and restore from the same checkpoints: a new
    // restoration.
    let again = d
        .get_or_create_iteration(restore(77, 2, 2, &[5, 7]).try_into().unwrap())
        .await
        .unwrap();
    assert_ne!(again.tfdata_iteration_id, restored);
    // That consumer's checkpoint was older than the other's, taken in the
    // first restoration: both meet in the restoration of that one.
    let newer = d
        .get_or_create_iteration(
            restore(restored, a.iteration_client_id, 2, &[0, 4])
                .try_into()
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(newer.tfdata_iteration_id, again.tfdata_iteration_id);
    let it = d
        .state_copy()
        .await
        .iteration(IterationId(newer.tfdata_iteration_id))
        .unwrap()
        .clone();
    assert!(!it.gathering());
    assert_eq!(
        it.consumed.values().map(|r| r.bounds()).collect::<Vec<_>>(),
        vec![vec![0, 4, 5, 7]]
    );
    // A checkpoint that knew of one consumer resumes at once; another
    // consumer of that iteration is then refused, saying why.
    let solo = d
        .get_or_create_iteration(restore(88, 1, 1, &[0, 1]).try_into().unwrap())
        .await
        .unwrap();
    assert_eq!(
        tasks_of(&d.state_copy().await, solo.tfdata_iteration_id).len(),
        1
    );
    let late = d
        .get_or_create_iteration(restore(88, 2, 2, &[1, 2]).try_into().unwrap())
        .await
        .unwrap_err();
    assert!(late.to_string().contains("without this one"), "{late}");
    // The origin iteration known: its consumers that took checkpoints are
    // waited for, even when a checkpoint (taken before the other consumer
    // joined) says there was one.
    let plain = wire::GetOrCreateIterationRequest {
        job_id,
        repetition: 1,
        tfdata_reports_receipts: true,
        ..Default::default()
    };
    let first = d
        .get_or_create_iteration(plain.clone().try_into().unwrap())
        .await
        .unwrap();
    let second = d
        .get_or_create_iteration(plain.try_into().unwrap())
        .await
        .unwrap();
    assert_eq!(first.tfdata_iteration_id, second.tfdata_iteration_id);
    for c in [&first, &second] {
        d.client_heartbeat(wire::ClientHeartbeatRequest {
            iteration_client_id: c.iteration_client_id,
            tfdata_checkpoint_taken: true,
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let origin = first.tfdata_iteration_id;
    let early = d
        .get_or_create_iteration(
            restore(origin, first.iteration_client_id, 1, &[0, 2])
                .try_into()
                .unwrap(),
        )
        .await
        .unwrap();
    assert!(tasks_of(&d.state_copy().await, early.tfdata_iteration_id).is_empty());
    let other = d
        .get_or_create_iteration(
            restore(origin, second.iteration_client_id, 2, &[2, 4])
                .try_into()
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(other.tfdata_iteration_id, early.tfdata_iteration_id);
    assert_eq!(
        tasks_of(&d.state_copy().await, early.tfdata_iteration_id).len(),
        1
    );
    // Hostile claims are refused, as the request arrives (`requests`).
    use super::requests::GetOrCreateIteration;
    assert!(GetOrCreateIteration::try_from(restore(99, 1, 0, &[])).is_err());
    assert!(
        d.get_or_create_iteration(restore(99, 1, 2, &[5, 3]).try_into().unwrap())
            .await
            .is_err()
    );
}
