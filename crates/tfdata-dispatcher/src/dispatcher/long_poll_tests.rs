//! Heartbeats held for our workers until there is news for them
//! (`long_poll`, `worker_news`), and TensorFlow's never held.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tfdata_proto::data as wire;

use super::Dispatcher;
use super::tests::{ManualClock, iteration_of_range};
use super::worker_news::MAX_HOLD;
use crate::config::DispatcherConfig;

/// Far less than a hold: an answer within it was not held.
const AT_ONCE: Duration = Duration::from_secs(5);

fn dispatcher() -> (Arc<Dispatcher>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock(AtomicI64::new(1_000_000)));
    let config = DispatcherConfig {
        job_gc_timeout: Some(Duration::from_secs(60)),
        ..Default::default()
    };
    (
        Arc::new(Dispatcher::new(config, clock.clone()).unwrap()),
        clock,
    )
}

/// One of our workers' heartbeats: asks for the longest hold.
fn ours(worker: &str, seen: u64, current_tasks: Vec<i64>) -> wire::WorkerHeartbeatRequest {
    wire::WorkerHeartbeatRequest {
        worker_address: worker.into(),
        tfdata_runs_pipelines: true,
        tfdata_hold_ms: MAX_HOLD.as_millis() as i64,
        tfdata_news_seen: seen,
        current_tasks,
        ..Default::default()
    }
}

async fn heartbeat(
    d: &Dispatcher,
    req: wire::WorkerHeartbeatRequest,
) -> tfdata_core::Result<wire::WorkerHeartbeatResponse> {
    d.worker_heartbeat_held(req.try_into()?, None).await
}

/// Sends `req` in the background; the handle yields its answer.
fn held(
    d: &Arc<Dispatcher>,
    req: wire::WorkerHeartbeatRequest,
) -> tokio::task::JoinHandle<tfdata_core::Result<wire::WorkerHeartbeatResponse>> {
    let d = Arc::clone(d);
    tokio::spawn(async move { d.worker_heartbeat_held(req.try_into()?, None).await })
}

/// Registers `worker` (answered at once: it has seen nothing) and returns
/// the news number its next heartbeat says.
async fn registered(d: &Dispatcher, worker: &str) -> u64 {
    let first = tokio::time::timeout(AT_ONCE, heartbeat(d, ours(worker, 0, Vec::new())))
        .await
        .expect("a first heartbeat is answered at once")
        .unwrap();
    assert!(first.tfdata_holds && first.tfdata_at_once);
    first.tfdata_news_seen
}

/// Lets a spawned heartbeat reach its hold.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(50)).await;
}

#[tokio::test]
async fn a_tensorflow_workers_heartbeat_is_answered_at_once() {
    let (d, _) = dispatcher();
    for _ in 0..3 {
        let plain = wire::WorkerHeartbeatRequest {
            worker_address: "tf-worker:1".into(),
            ..Default::default()
        };
        let answer = tokio::time::timeout(AT_ONCE, heartbeat(&d, plain))
            .await
            .expect("a TensorFlow worker's heartbeat is never held")
            .unwrap();
        assert!(!answer.tfdata_holds);
        assert_eq!(answer.tfdata_news_seen, 0, "TensorFlow's fields only");
    }
}

#[tokio::test]
async fn a_held_heartbeat_is_answered_with_a_new_task() {
    let (d, _) = dispatcher();
    let seen = registered(&d, "w:1").await;
    let waiting = held(&d, ours("w:1", seen, Vec::new()));
    settle().await;
    assert!(!waiting.is_finished(), "held while there is no news");
    iteration_of_range(&d, 10, 0).await;
    let answer = tokio::time::timeout(AT_ONCE, waiting)
        .await
        .expect("answered when the task was made")
        .unwrap()
        .unwrap();
    assert_eq!(answer.new_tasks.len(), 1, "{answer:?}");
    assert!(answer.tfdata_holds && !answer.tfdata_at_once);
    assert!(answer.tfdata_news_seen > seen);
}

#[tokio::test]
async fn a_held_heartbeat_is_answered_when_its_iteration_is_collected() {
    let (d, clock) = dispatcher();
    let seen = registered(&d, "w:1").await;
    let client = iteration_of_range(&d, 10, 0).await;
    let answer = heartbeat(&d, ours("w:1", seen, Vec::new())).await.unwrap();
    assert!(answer.tfdata_at_once, "news when it came");
    let task = answer.new_tasks[0].task_id;
    // Told the task: nothing new until the iteration is collected.
    let waiting = held(&d, ours("w:1", answer.tfdata_news_seen, vec![task]));
    settle().await;
    assert!(!waiting.is_finished(), "held while there is no news");
    d.release_iteration_client(
        wire::ReleaseIterationClientRequest {
            iteration_client_id: client,
        }
        .try_into()
        .unwrap(),
    )
    .await
    .unwrap();
    clock.0.fetch_add(61_000_000, Ordering::SeqCst);
    d.collect_garbage().await.unwrap();
    let answer = tokio::time::timeout(AT_ONCE, waiting)
        .await
        .expect("answered when the iteration was collected")
        .unwrap()
        .unwrap();
    assert_eq!(answer.tasks_to_delete, [task]);
}

#[tokio::test]
async fn a_newer_heartbeat_answers_the_held_one() {
    let (d, _) = dispatcher();
    let seen = registered(&d, "w:1").await;
    let older = held(&d, ours("w:1", seen, Vec::new()));
    settle().await;
    let newer = held(&d, ours("w:1", seen, Vec::new()));
    tokio::time::timeout(AT_ONCE, older)
        .await
        .expect("one heartbeat per worker is held")
        .unwrap()
        .unwrap();
    assert!(!newer.is_finished());
    d.release_held_heartbeats();
    let err = tokio::time::timeout(AT_ONCE, newer)
        .await
        .expect("a stopping dispatcher answers the held heartbeats")
        .unwrap()
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable);
    // Once stopping, nothing is held, and workers are told so.
    let answer = tokio::time::timeout(AT_ONCE, heartbeat(&d, ours("w:1", seen, Vec::new())))
        .await
        .expect("not held")
        .unwrap();
    assert!(!answer.tfdata_holds);
}

#[tokio::test]
async fn a_held_heartbeat_without_news_is_answered_after_its_hold() {
    let (d, _) = dispatcher();
    let seen = registered(&d, "w:1").await;
    let mut req = ours("w:1", seen, Vec::new());
    req.tfdata_hold_ms = 300;
    let started = std::time::Instant::now();
    let answer = heartbeat(&d, req).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(answer.tfdata_holds && !answer.tfdata_at_once && answer.new_tasks.is_empty());
    assert_eq!(answer.tfdata_news_seen, seen, "nothing new");
}
