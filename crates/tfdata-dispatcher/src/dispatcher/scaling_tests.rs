//! The scaling controller fed by the dispatcher: observations from
//! heartbeats, decisions in the metrics, the estimate as TensorFlow keeps it.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tfdata_proto::data as wire;

use super::Dispatcher;
use super::tests::{ManualClock, iteration_of_range};
use crate::config::DispatcherConfig;
use crate::scaling::{Bounds, Phase};

const PERIOD: Duration = Duration::from_secs(5);

fn dispatcher() -> (Dispatcher, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock(AtomicI64::new(1_000_000)));
    let config = DispatcherConfig {
        scaling_period: PERIOD,
        ..Default::default()
    };
    (Dispatcher::new(config, clock.clone()).unwrap(), clock)
}

fn worker(address: &str, tasks: &[(i64, f64)], draining: bool) -> wire::WorkerHeartbeatRequest {
    wire::WorkerHeartbeatRequest {
        worker_address: address.into(),
        tfdata_runs_pipelines: true,
        current_tasks: tasks.iter().map(|t| t.0).collect(),
        active_tasks: tasks
            .iter()
            .map(|&(task_id, processing_time_nsec)| wire::ActiveTask {
                task_id,
                processing_time_nsec,
            })
            .collect(),
        tfdata_draining: draining,
        ..Default::default()
    }
}

fn reader(
    client: i64,
    target_nsec: f64,
    elements: u64,
    wait: f64,
    lifetime: f64,
) -> wire::ClientHeartbeatRequest {
    wire::ClientHeartbeatRequest {
        iteration_client_id: client,
        target_processing_time_nsec: target_nsec,
        tfdata_stats: Some(wire::TfdataReaderStats {
            elements_consumed: elements,
            wait_seconds: wait,
            lifetime_seconds: lifetime,
            bytes_received: elements * 8,
        }),
        ..Default::default()
    }
}

fn advance(clock: &ManualClock, by: Duration) {
    clock.0.fetch_add(by.as_micros() as i64, Ordering::SeqCst);
}

/// A starved reader and the estimate raise the target; a draining worker
/// does not count as live; the reader gone for a period brings the target
/// to the minimum; each shows in the metrics, TensorFlow's name included.
#[tokio::test]
async fn the_controller_follows_heartbeats_and_shows_in_the_metrics() {
    let (d, clock) = dispatcher();
    d.worker_heartbeat(worker("w:1", &[], false)).await.unwrap();
    let client = iteration_of_range(&d, 1000, 0).await;
    let task = d.state_copy().await.tasks().next().unwrap().id.0;
    // The worker makes an element every 5 ms (200/s); the trainer wants
    // one every 1 ms and waits half the time.
    d.worker_heartbeat(worker("w:1", &[(task, 5e6)], false))
        .await
        .unwrap();
    d.client_heartbeat(reader(client, 1e6, 0, 0.0, 0.0))
        .await
        .unwrap();
    d.client_heartbeat(reader(client, 1e6, 200, 0.5, 1.0))
        .await
        .unwrap();
    // A second worker on its way out.
    d.worker_heartbeat(worker("w:2", &[], true)).await.unwrap();

    let decision = d.scaling_step().await;
    assert_eq!(decision.live_workers, 1, "{decision:?}");
    // 1000/s over 200/s: 5 (the draining worker is registered, so the
    // estimate's x4 step is from 2, as TensorFlow counts).
    assert_eq!(decision.estimate, Some(5), "{decision:?}");
    assert!((decision.starvation - 0.5).abs() < 1e-9, "{decision:?}");
    assert!((decision.wait_seconds_per_element - 0.5 / 200.0).abs() < 1e-9);
    assert_eq!(
        (decision.target_workers, decision.phase),
        (5, Phase::ProbingUp)
    );
    let text = d.encode_metrics().await;
    for line in [
        "tfdata_dispatcher_target_workers 5",
        "tfdata_dispatcher_optimal_workers 5",
        "tensorflow_data_service_optimal_number_of_workers 5",
    ] {
        assert!(text.contains(line), "{line} not in {text}");
    }
    let status = d.status().await;
    let scaling = status.scaling.expect("the status carries the advice");
    assert_eq!(
        (scaling.target_workers, scaling.phase.as_str()),
        (5, "probing up")
    );
    assert_eq!(scaling.period_ms, 5000);

    // The caller's bounds clamp the advice at once.
    let advice = d.scaling_advice(Bounds::from_request(1, 3).unwrap()).await;
    assert_eq!(advice.target_workers, 3);

    // The reader leaves: after a period without readers, the minimum.
    d.release_iteration_client(
        wire::ReleaseIterationClientRequest {
            iteration_client_id: client,
        }
        .try_into()
        .unwrap(),
    )
    .await
    .unwrap();
    advance(&clock, PERIOD);
    assert_eq!(d.scaling_step().await.target_workers, 3);
    advance(&clock, PERIOD);
    let idle = d.scaling_step().await;
    assert_eq!((idle.target_workers, idle.phase), (1, Phase::Idle));
    let text = d.encode_metrics().await;
    for line in [
        "tfdata_dispatcher_target_workers 1",
        r#"tfdata_dispatcher_scaling_decisions_total{direction="up",outcome="abandoned"} 1"#,
        r#"tfdata_dispatcher_scaling_decisions_total{direction="down",outcome="idle"} 1"#,
        // TensorFlow keeps the last measured estimate; ours says 0 readers.
        "tensorflow_data_service_optimal_number_of_workers 5",
        "tfdata_dispatcher_optimal_workers 0",
    ] {
        assert!(text.contains(line), "{line} not in {text}");
    }
}

/// As TensorFlow's auto-scaler does, a worker's last processing time for
/// an iteration counts after its task stopped reporting one, and when one
/// heartbeat reports several tasks of an iteration the last one wins.
#[tokio::test]
async fn the_estimate_keeps_each_workers_last_time_per_iteration() {
    let (d, _clock) = dispatcher();
    d.worker_heartbeat(worker("w:1", &[], false)).await.unwrap();
    let client = iteration_of_range(&d, 1000, 0).await;
    let task = d.state_copy().await.tasks().next().unwrap().id.0;
    d.client_heartbeat(reader(client, 1e6, 0, 0.0, 0.0))
        .await
        .unwrap();
    d.worker_heartbeat(worker("w:1", &[(task, 2e6), (task, 1e6)], false))
        .await
        .unwrap();
    // 1000/s wanted, 1000/s made by the last report: one worker.
    let demand = d.overview().await.demand;
    assert_eq!(
        (demand.optimal_workers, demand.measured),
        (1, true),
        "{demand:?}"
    );
    // The task no longer reports a time: the last one still counts.
    d.worker_heartbeat(worker("w:1", &[], false)).await.unwrap();
    let demand = d.overview().await.demand;
    assert_eq!(
        (demand.optimal_workers, demand.measured),
        (1, true),
        "{demand:?}"
    );
}
