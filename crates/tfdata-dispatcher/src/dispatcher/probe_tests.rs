//! Noticing dead workers: the probes that confirm a reader's report of a
//! refusing port or an overdue heartbeat, and worker timeouts too short
//! for a worker's heartbeats (issue 31).

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tfdata_proto::data as wire;

use super::Dispatcher;
use super::tests::ManualClock;
use crate::config::DispatcherConfig;

const LOOPBACK: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));

fn dispatcher(worker_timeout: Duration) -> (Dispatcher, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock(AtomicI64::new(1_000_000)));
    let config = DispatcherConfig {
        worker_timeout,
        ..Default::default()
    };
    (Dispatcher::new(config, clock.clone()).unwrap(), clock)
}

async fn heartbeat(d: &Dispatcher, address: &str, interval_ms: i64, peer: Option<IpAddr>) {
    d.worker_heartbeat_from(
        wire::WorkerHeartbeatRequest {
            worker_address: address.into(),
            worker_uid: 7,
            tfdata_runs_pipelines: interval_ms > 0,
            tfdata_heartbeat_interval_ms: interval_ms,
            ..Default::default()
        }
        .try_into()
        .unwrap(),
        peer,
    )
    .await
    .unwrap();
}

async fn lost(d: &Dispatcher, address: &str) -> bool {
    d.state_copy().await.worker(address).is_some_and(|w| w.lost)
}

fn advance(clock: &ManualClock, by: Duration) {
    clock.0.fetch_add(by.as_micros() as i64, Ordering::SeqCst);
}

/// A port nothing listens on (bound and released).
fn closed_address() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// worker_timeout 2 s against a worker heartbeating every 30 s: it would be
/// declared lost between any two heartbeats. Its timeout is raised to three
/// heartbeats and the overview says why, naming both settings; a worker
/// that heartbeats often enough keeps worker_timeout.
#[tokio::test]
async fn a_worker_timeout_shorter_than_three_heartbeats_is_raised_for_that_worker() {
    let (d, clock) = dispatcher(Duration::from_secs(2));
    heartbeat(&d, "slow:1", 30_000, None).await;
    heartbeat(&d, "fast:1", 200, None).await;
    advance(&clock, Duration::from_secs(10));
    d.check_liveness().await.unwrap();
    assert!(
        !lost(&d, "slow:1").await,
        "declared lost between two heartbeats"
    );
    assert!(lost(&d, "fast:1").await, "silent for 5 timeouts and kept");
    let overview = d.overview().await;
    let warning = |address: &str| {
        overview
            .workers
            .iter()
            .find(|w| w.address == address)
            .and_then(|w| w.heartbeat_warning.clone())
    };
    let slow = warning("slow:1").expect("a warning for the slow worker");
    assert!(
        slow.contains("worker_timeout_ms=2000")
            && slow.contains("heartbeat_interval_ms=30000")
            && slow.contains("raised to 90000 ms"),
        "{slow}"
    );
    assert_eq!(warning("fast:1"), None);
    advance(&clock, Duration::from_secs(81));
    d.check_liveness().await.unwrap();
    assert!(
        lost(&d, "slow:1").await,
        "silent for more than three heartbeats"
    );
}

/// TensorFlow's workers do not say their interval: the dispatcher sees the
/// gap between their heartbeats and warns (it does not raise their
/// timeout).
#[tokio::test]
async fn a_tensorflow_worker_heartbeating_slower_than_the_timeout_allows_gets_a_warning() {
    let (d, clock) = dispatcher(Duration::from_secs(20));
    heartbeat(&d, "tf:1", 0, None).await;
    advance(&clock, Duration::from_secs(10));
    heartbeat(&d, "tf:1", 0, None).await;
    let overview = d.overview().await;
    let warning = overview.workers[0].heartbeat_warning.clone().unwrap();
    assert!(
        warning.contains("worker_timeout_ms=20000") && warning.contains("10000 ms apart"),
        "{warning}"
    );
}

/// A reader reports a worker's port refusing: the dispatcher's own probes
/// are refused too, so it is declared lost at once (worker_timeout is 10
/// minutes). A worker whose port accepts (alive, perhaps paused) is not,
/// and neither is one whose heartbeats come from another host than its
/// address (a probe of it would test the wrong host).
#[tokio::test]
async fn a_reported_worker_is_declared_lost_only_if_its_port_refuses_the_dispatcher_too() {
    let (d, _clock) = dispatcher(Duration::from_secs(600));
    let dead = closed_address();
    let alive = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let alive = alive.local_addr().unwrap().to_string();
    let elsewhere = closed_address();
    heartbeat(&d, &dead, 30_000, LOOPBACK).await;
    heartbeat(&d, &alive, 30_000, LOOPBACK).await;
    let other_host = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 1, 2, 3)));
    heartbeat(&d, &elsewhere, 30_000, other_host).await;
    let workers = [dead.clone(), alive.clone(), elsewhere.clone()];
    d.suspect_refused(3000, &workers, 1_000_000);
    let declared = d.run_probes().await.unwrap();
    assert_eq!(declared, vec![dead.clone()]);
    assert!(lost(&d, &dead).await);
    assert!(!lost(&d, &alive).await);
    assert!(!lost(&d, &elsewhere).await);
    // A second report within the probe interval probes nothing.
    d.suspect_refused(3000, &workers, 1_000_000);
    assert_eq!(d.run_probes().await.unwrap(), Vec::<String>::new());
}

/// A worker that stops heartbeating is probed after a few of its
/// intervals (not worker_timeout): declared lost when its port refuses.
#[tokio::test]
async fn a_silent_worker_whose_port_refuses_is_declared_lost_before_worker_timeout() {
    let (d, clock) = dispatcher(Duration::from_secs(600));
    let dead = closed_address();
    heartbeat(&d, &dead, 200, LOOPBACK).await;
    advance(&clock, Duration::from_millis(300));
    assert_eq!(
        d.run_probes().await.unwrap(),
        Vec::<String>::new(),
        "not yet overdue"
    );
    assert!(!lost(&d, &dead).await);
    advance(&clock, Duration::from_secs(2));
    assert_eq!(d.run_probes().await.unwrap(), vec![dead.clone()]);
    assert!(lost(&d, &dead).await);
}
