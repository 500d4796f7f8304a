//! Nothing a user waits for waits for a worker's heartbeat (issue 34): our
//! workers here heartbeat once an hour, and a distributed save, a job's
//! tasks, a task's end and a collected iteration still travel at once
//! (the dispatcher answers a worker's held heartbeat when it has news for
//! it, docs/operations.md). TensorFlow's workers' heartbeats are never held.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::time::{Duration, Instant};

use tfdata::{Dataset, DispatchServer, DispatcherConfig, WorkerConfig, WorkerServer};
use tfdata_proto::data as wire;

/// Far longer than anything here should take, far shorter than a heartbeat.
const DEADLINE: Duration = Duration::from_secs(60);
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(3600);

/// Two registered workers of `dispatcher` heartbeating once an hour.
fn slow_workers(dispatcher: &DispatchServer) -> Vec<WorkerServer> {
    let workers: Vec<WorkerServer> = (0..2)
        .map(|_| {
            let mut config = WorkerConfig::new(dispatcher.address());
            config.heartbeat_interval = HEARTBEAT_INTERVAL;
            WorkerServer::new(config).unwrap()
        })
        .collect();
    wait_until("the workers register", || dispatcher.num_workers() == 2);
    workers
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what}: not within {DEADLINE:?} (workers heartbeat every {HEARTBEAT_INTERVAL:?})"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The tasks `worker` runs, as `GetWorkerTasks` lists them.
fn worker_tasks(runtime: &tokio::runtime::Runtime, worker: &WorkerServer) -> Vec<i64> {
    runtime.block_on(async {
        let mut client = wire::worker_service_client::WorkerServiceClient::connect(format!(
            "http://{}",
            worker.address()
        ))
        .await
        .unwrap();
        client
            .get_worker_tasks(wire::GetWorkerTasksRequest {})
            .await
            .unwrap()
            .into_inner()
            .tasks
            .iter()
            .map(|t| t.task_id)
            .collect()
    })
}

#[test]
fn a_distributed_save_does_not_wait_for_heartbeats() {
    let work_dir = tempfile::tempdir().unwrap();
    let dispatcher = DispatchServer::new(common::fault_tolerant(
        &work_dir.path().display().to_string(),
        0,
    ))
    .unwrap();
    let _workers = slow_workers(&dispatcher);
    let out = tempfile::tempdir().unwrap();
    let path = out.path().join("snapshot").display().to_string();
    tfdata::distributed_save(&Dataset::range(2500), &path, &dispatcher.target(), None).unwrap();
    // Streams are assigned when the save starts, and marked done when the
    // workers finish them, not at their next heartbeat.
    let progress = tfdata::wait_for_snapshot(&path, DEADLINE).unwrap();
    assert!(progress.done && progress.error.is_none(), "{progress:?}");
    let mut values: Vec<i64> = Dataset::load(&path, false)
        .iter()
        .unwrap()
        .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
        .collect();
    values.sort_unstable();
    assert_eq!(values, (0..2500).collect::<Vec<_>>());
}

#[test]
fn tasks_and_their_ends_do_not_wait_for_heartbeats() {
    let config = DispatcherConfig {
        job_gc_check_interval: Duration::from_millis(50),
        job_gc_timeout: Some(Duration::from_millis(100)),
        ..Default::default()
    };
    let dispatcher = DispatchServer::new(config).unwrap();
    let workers = slow_workers(&dispatcher);
    let runtime = runtime();

    // A job's tasks reach both workers, and the read ends.
    let ds = tfdata::distribute(tfdata::ProcessingMode::ParallelEpochs, &dispatcher.target())
        .apply(&Dataset::range(100))
        .unwrap();
    assert_eq!(common::scalars(&ds).len(), 200, "both workers' copies");
    // Each worker's end of task reaches the dispatcher, and the workers
    // are told to let their finished tasks go.
    wait_until("the tasks are finished at the dispatcher", || {
        let state = dispatcher.state();
        let tasks: Vec<_> = state.tasks().collect();
        tasks.len() == 2 && tasks.iter().all(|t| t.finished)
    });
    for worker in &workers {
        wait_until("the finished tasks leave the workers", || {
            worker_tasks(&runtime, worker).is_empty()
        });
    }

    // An iteration released half way is collected, and its tasks leave
    // the workers.
    let ds = tfdata::distribute(tfdata::ProcessingMode::ParallelEpochs, &dispatcher.target())
        .apply(&Dataset::range(1 << 40))
        .unwrap();
    let mut it = ds.iter().unwrap();
    it.next().unwrap().unwrap();
    for worker in &workers {
        assert_eq!(worker_tasks(&runtime, worker).len(), 1);
    }
    drop(it);
    wait_until("the iteration is collected", || {
        dispatcher
            .state()
            .iterations()
            .all(|it| it.finished || it.garbage_collected)
    });
    for worker in &workers {
        wait_until("the collected iteration's tasks leave the workers", || {
            worker_tasks(&runtime, worker).is_empty()
        });
    }
}

/// A TensorFlow worker's heartbeat (none of our fields) is answered at
/// once, and says nothing is held; one of ours asking for a hold is held.
#[test]
fn a_tensorflow_workers_heartbeat_is_never_held() {
    let dispatcher = DispatchServer::new(DispatcherConfig::default()).unwrap();
    let runtime = runtime();
    let client = {
        let _entered = runtime.enter();
        tfdata::DispatcherClient::new(&dispatcher.address()).unwrap()
    };
    let heartbeat = |req: wire::WorkerHeartbeatRequest| {
        let started = Instant::now();
        let answer = runtime.block_on(client.worker_heartbeat(req)).unwrap();
        (answer, started.elapsed())
    };
    for _ in 0..3 {
        let (answer, took) = heartbeat(wire::WorkerHeartbeatRequest {
            worker_address: "127.0.0.1:1".into(),
            ..Default::default()
        });
        assert!(!answer.tfdata_holds && answer.tfdata_news_seen == 0);
        // A hold lasts 10 s.
        assert!(took < Duration::from_secs(5), "answered after {took:?}");
    }
    let ours = |seen| wire::WorkerHeartbeatRequest {
        worker_address: "127.0.0.1:2".into(),
        tfdata_runs_pipelines: true,
        tfdata_hold_ms: 500,
        tfdata_news_seen: seen,
        ..Default::default()
    };
    let (first, _) = heartbeat(ours(0));
    assert!(first.tfdata_holds && first.tfdata_at_once);
    let (answer, took) = heartbeat(ours(first.tfdata_news_seen));
    assert!(answer.tfdata_holds && !answer.tfdata_at_once);
    assert!(
        took >= Duration::from_millis(500),
        "answered after {took:?}"
    );
}
