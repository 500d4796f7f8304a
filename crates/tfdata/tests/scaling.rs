//! The scaling controller end to end (issue 36): a real dispatcher, real
//! workers and a real reader on sockets; the test plays the supervisor,
//! asking `GetScalingAdvice` over gRPC and starting the workers it asks for.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use std::time::{Duration, Instant};

use tfdata::{
    DispatchServer, DispatcherConfig, Element, ProcessingMode, WorkerConfig, WorkerServer,
    distribute,
};
use tfdata_proto::tfdata::status::{
    GetScalingAdviceRequest, ScalingAdvice, status_service_client::StatusServiceClient,
};

/// Short, so the test's steps take a few seconds; long enough for a
/// reader's heartbeat (every ~0.5 s under load) to land within one.
const PERIOD: Duration = Duration::from_millis(1500);
const MAX_WORKERS: i64 = 4;

struct Advisor {
    runtime: tokio::runtime::Runtime,
    client: StatusServiceClient<tfdata_rpc::security::RpcChannel>,
}

impl Advisor {
    fn new(dispatcher: &DispatchServer) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let security = tfdata::security::TransportSecurity::default()
            .client()
            .unwrap();
        let channel = runtime
            .block_on(async { tfdata_rpc::channel::channel(&dispatcher.address(), &security) })
            .unwrap();
        Advisor {
            runtime,
            client: StatusServiceClient::new(channel),
        }
    }

    fn ask(&mut self, min: i64, max: i64) -> Result<ScalingAdvice, tonic::Status> {
        let request = GetScalingAdviceRequest {
            min_workers: min,
            max_workers: max,
        };
        self.runtime
            .block_on(self.client.get_scaling_advice(request))
            .map(|r| r.into_inner())
    }

    /// Asks until `done` holds of the advice (or panics after `limit`).
    fn until(
        &mut self,
        what: &str,
        limit: Duration,
        done: impl Fn(&ScalingAdvice) -> bool,
    ) -> ScalingAdvice {
        let deadline = Instant::now() + limit;
        loop {
            let advice = self.ask(1, MAX_WORKERS).unwrap();
            if done(&advice) {
                return advice;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {limit:?} waiting for {what}; last advice: {advice:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A reader starved by one worker whose pipeline waits 5 ms per element
/// (latency, not CPU: more workers help on two cores) gets more workers;
/// the step is judged on the readers' wait; with the reader gone the
/// target falls to the minimum.
#[test]
fn the_advice_follows_a_starved_reader_up_and_its_departure_down() {
    let config = DispatcherConfig {
        scaling_period: PERIOD,
        ..Default::default()
    };
    let (dispatcher, mut workers) = common::cluster_with(config, 1);
    let mut advisor = Advisor::new(&dispatcher);

    let refused = advisor.ask(5, 2).unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    let advice = advisor.ask(1, MAX_WORKERS).unwrap();
    assert_eq!(advice.target_workers, 1, "{advice:?}");
    assert_eq!(advice.period_ms, PERIOD.as_millis() as i64);

    tfdata::register_function("scaling_test_latency", |e: Element| {
        std::thread::sleep(Duration::from_millis(5));
        Ok(e)
    });
    let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .task_refresh_interval(Duration::from_millis(100))
        .apply(&tfdata::Dataset::range(10_000_000).map("scaling_test_latency"))
        .unwrap();
    let reader = common::BackgroundRead::start(ds);

    let up = advisor.until("a step up", Duration::from_secs(60), |a| {
        a.target_workers > 1
    });
    assert!(up.starvation >= 0.05, "{up:?}");
    // Asked at the decision ("readers starve ...: 1 -> N") or a step
    // later ("waiting for the change 1 -> N ...").
    assert!(up.reason.contains("1 -> "), "{up:?}");
    assert!(up.target_workers <= MAX_WORKERS, "{up:?}");
    // The supervisor's part: start what is asked for.
    while (workers.len() as i64) < up.target_workers {
        workers.push(WorkerServer::new(WorkerConfig::new(dispatcher.address())).unwrap());
    }
    common::wait_for_these_workers(&dispatcher, &workers);
    // Judged after the workers are live and one period settled: kept (the
    // wait fell) and either steady or stepping on.
    let judged = advisor.until("the step judged", Duration::from_secs(60), |a| {
        a.phase != "probing up" || a.target_workers > up.target_workers
    });
    assert!(judged.decisions >= 1, "{judged:?}");
    assert_eq!(judged.reverts, 0, "{judged:?}");
    assert!(judged.live_workers >= up.target_workers, "{judged:?}");

    // The reader leaves: after a period without readers, the minimum.
    let read = reader.stop();
    assert!(read > 0);
    let idle = advisor.until("idle", Duration::from_secs(60), |a| a.phase == "idle");
    assert_eq!(idle.target_workers, 1, "{idle:?}");
    assert!(idle.reason.contains("no readers"), "{idle:?}");
}
