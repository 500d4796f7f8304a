//! Operations on a live in-process cluster, over real sockets: `/metrics`
//! scraped over HTTP while a read runs, `/healthz` and `/readyz`, gRPC's
//! health service (`Check` and `Watch`), a reader's starvation reaching
//! the dispatcher, and the demand estimate for a slow and a fast pipeline.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tfdata::{
    Dataset, DispatchServer, DispatcherConfig, Element, ProcessingMode, WorkerConfig, WorkerServer,
    distribute,
};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// [`common::http_get`]'s status and body; a scrape's content type is
/// checked on the way.
fn http_get(port: u16, path: &str) -> (u16, String) {
    let (status, head, body) = common::http_get(port, path);
    if path == "/metrics" {
        assert!(
            head.contains("content-type: application/openmetrics-text; version=1.0.0"),
            "{head}"
        );
    }
    (status, body)
}

/// The value of the sample `series` (name and labels exactly as exported;
/// 0 if absent).
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == series).then(|| value.parse::<f64>().unwrap())
        })
        .unwrap_or(0.0)
}

fn metrics(port: u16) -> String {
    let (status, body) = http_get(port, "/metrics");
    assert_eq!(status, 200);
    assert!(body.ends_with("# EOF\n"), "{body}");
    body
}

fn worker_config(dispatcher: &str) -> WorkerConfig {
    let mut config = WorkerConfig::new(dispatcher);
    config.heartbeat_interval = Duration::from_millis(100);
    config.http_port = Some(0);
    config
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

async fn health(port: u16, service: &str) -> Result<ServingStatus, tonic::Status> {
    let channel = tfdata_rpc::channel::channel(
        &format!("localhost:{port}"),
        &tfdata_rpc::security::ClientSecurity::plaintext(),
    )
    .unwrap();
    let response = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await?;
    Ok(response.into_inner().status())
}

#[test]
fn metrics_move_while_a_read_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::fault_tolerant(dir.path().to_str().unwrap(), 0);
    config.http_port = Some(0);
    let dispatcher = DispatchServer::new(config).unwrap();
    let dport = dispatcher.http_port().unwrap();
    let worker = WorkerServer::new(worker_config(&dispatcher.address())).unwrap();
    let wport = worker.http_port().unwrap();
    assert_ne!(dport, dispatcher.port());
    common::wait_for_workers(&dispatcher, 1);

    let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .task_refresh_interval(Duration::from_millis(50))
        .stream_window(64, 1 << 20)
        .apply(&Dataset::range(100_000))
        .unwrap();
    let mut it = ds.iter().unwrap();
    let mut take = |n: usize| {
        for _ in 0..n {
            it.next().unwrap().unwrap();
        }
    };
    take(1_000);
    let sent = |text: &str| {
        sample(
            text,
            r#"tfdata_worker_sent_elements_total{transfer="stream"}"#,
        )
    };
    let first = metrics(wport);
    assert!(sent(&first) >= 1_000.0, "{first}");
    assert_eq!(sample(&first, "tfdata_worker_tasks"), 1.0, "{first}");
    take(5_000);
    let second = metrics(wport);
    assert!(
        sent(&second) >= 6_000.0 && sent(&second) > sent(&first),
        "{second}"
    );
    assert!(
        sample(
            &second,
            "tfdata_worker_sent_bytes_total{transfer=\"stream\"}"
        ) > 0.0,
        "{second}"
    );

    // An RPC that fails is counted with its code.
    let rt = runtime();
    let err = rt
        .block_on(async {
            let client = tfdata::DispatcherClient::new(&dispatcher.address()).unwrap();
            client
                .client_heartbeat(tfdata_proto::data::ClientHeartbeatRequest {
                    iteration_client_id: 987_654,
                    ..Default::default()
                })
                .await
        })
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound, "{err}");

    let text = metrics(dport);
    let rpcs = |method: &str, code: &str| {
        sample(
            &text,
            &format!(r#"tfdata_dispatcher_rpcs_total{{method="{method}",code="{code}"}}"#),
        )
    };
    assert_eq!(rpcs("GetOrCreateJob", "OK"), 1.0, "{text}");
    assert!(rpcs("ClientHeartbeat", "OK") >= 1.0, "{text}");
    assert!(rpcs("WorkerHeartbeat", "OK") >= 1.0, "{text}");
    assert_eq!(rpcs("ClientHeartbeat", "NOT_FOUND"), 1.0, "{text}");
    assert!(
        sample(
            &text,
            r#"tfdata_dispatcher_rpc_duration_seconds_count{method="GetOrCreateJob"}"#
        ) >= 1.0,
        "{text}"
    );
    // Fault-tolerant: registration, job, iteration, task went to the journal.
    assert!(
        sample(&text, "tfdata_dispatcher_journal_written_bytes_total") > 0.0,
        "{text}"
    );
    assert!(
        sample(&text, "tfdata_dispatcher_journal_updates_total") >= 4.0,
        "{text}"
    );
    assert!(
        sample(
            &text,
            "tfdata_dispatcher_journal_write_duration_seconds_count"
        ) >= 1.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"tfdata_dispatcher_workers{state="live",kind="tfdata"}"#
        ),
        1.0,
        "{text}"
    );
    assert_eq!(sample(&text, "tfdata_dispatcher_datasets"), 1.0, "{text}");
    assert_eq!(
        sample(&text, r#"tfdata_dispatcher_iterations{state="active"}"#),
        1.0,
        "{text}"
    );
    assert_eq!(sample(&text, "tfdata_dispatcher_clients"), 1.0, "{text}");

    // Health and readiness of both, over HTTP.
    for port in [dport, wport] {
        assert_eq!(http_get(port, "/healthz"), (200, "ok\n".into()));
        assert_eq!(http_get(port, "/readyz"), (200, "ready\n".into()));
        assert_eq!(http_get(port, "/nothing").0, 404);
    }

    // The reader's own metrics, for its process.
    let reader = tfdata::reader_metrics();
    assert!(
        sample(&reader, "tfdata_reader_consumed_elements_total") >= 6_000.0,
        "{reader}"
    );
    assert!(
        sample(
            &reader,
            r#"tfdata_reader_received_elements_total{transfer="stream"}"#
        ) >= 6_000.0,
        "{reader}"
    );
    assert!(
        sample(&reader, "tfdata_reader_lifetime_seconds_total") > 0.0,
        "{reader}"
    );
    // A live iterator adds its instant calls to the histogram 64 at a time.
    assert!(
        sample(&reader, "tfdata_reader_next_duration_seconds_count") >= 6_000.0 - 64.0,
        "{reader}"
    );
}

#[test]
fn worker_readiness_follows_registration_and_the_dispatcher() {
    // A port for a dispatcher that is not there yet.
    let port = std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let worker = WorkerServer::new(worker_config(&format!("localhost:{port}"))).unwrap();
    let wport = worker.http_port().unwrap();
    let rt = runtime();

    // Not registered: live, not ready, on HTTP and on gRPC health; Watch
    // says NOT_SERVING first.
    assert_eq!(http_get(wport, "/healthz").0, 200);
    let (status, body) = http_get(wport, "/readyz");
    assert_eq!(status, 503);
    assert!(body.contains("not registered"), "{body}");
    let grpc_port = worker.port();
    let mut watch = rt.block_on(async {
        let channel = tfdata_rpc::channel::channel(
            &format!("localhost:{grpc_port}"),
            &tfdata_rpc::security::ClientSecurity::plaintext(),
        )
        .unwrap();
        HealthClient::new(channel)
            .watch(HealthCheckRequest {
                service: "tensorflow.data.WorkerService".into(),
            })
            .await
            .unwrap()
            .into_inner()
    });
    let next_status = |watch: &mut tonic::Streaming<_>| {
        rt.block_on(async {
            let update: tonic_health::pb::HealthCheckResponse =
                tokio::time::timeout(Duration::from_secs(10), watch.message())
                    .await
                    .expect("a health update")
                    .unwrap()
                    .unwrap();
            update.status()
        })
    };
    assert_eq!(next_status(&mut watch), ServingStatus::NotServing);
    assert_eq!(
        rt.block_on(health(grpc_port, "")).unwrap(),
        ServingStatus::NotServing
    );

    // The dispatcher comes up: the worker registers and is ready.
    let dispatcher = DispatchServer::new(DispatcherConfig {
        port,
        ..Default::default()
    })
    .unwrap();
    common::wait_for("the worker to be ready", Duration::from_secs(20), || {
        http_get(wport, "/readyz").0 == 200
    });
    assert_eq!(next_status(&mut watch), ServingStatus::Serving);
    assert_eq!(
        rt.block_on(health(grpc_port, "tensorflow.data.WorkerService"))
            .unwrap(),
        ServingStatus::Serving
    );

    // The dispatcher goes away: after three heartbeat intervals (at least
    // 3 s) without an answer the worker is not ready, though still live.
    drop(dispatcher);
    common::wait_for("the worker to notice", Duration::from_secs(20), || {
        http_get(wport, "/readyz").0 == 503
    });
    let (_, body) = http_get(wport, "/readyz");
    assert!(body.contains("has not answered a heartbeat"), "{body}");
    assert_eq!(http_get(wport, "/healthz").0, 200);
    assert_eq!(next_status(&mut watch), ServingStatus::NotServing);
}

#[test]
fn grpc_health_on_the_dispatcher_port() {
    let dispatcher = DispatchServer::new(DispatcherConfig::default()).unwrap();
    let rt = runtime();
    let port = dispatcher.port();
    for service in ["", "tensorflow.data.DispatcherService"] {
        assert_eq!(
            rt.block_on(health(port, service)).unwrap(),
            ServingStatus::Serving,
            "{service:?}"
        );
    }
    let unknown = rt.block_on(health(port, "no.such.Service")).unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    // The port still speaks TensorFlow's protocol beside it.
    rt.block_on(async {
        let client = tfdata::DispatcherClient::new(&dispatcher.address()).unwrap();
        client
            .get_workers(tfdata_proto::data::GetWorkersRequest {})
            .await
    })
    .unwrap();
    assert_eq!(dispatcher.http_port(), None, "no HTTP port unless asked");
}

#[test]
fn dispatcher_readiness_follows_journal_replay() {
    let dir = tempfile::tempdir().unwrap();
    let work_dir = dir.path().to_str().unwrap().to_string();
    // A journal with a registered dataset in it.
    let dataset_id = {
        let first = DispatchServer::new(common::fault_tolerant(&work_dir, 0)).unwrap();
        tfdata::register_dataset(
            &first.target(),
            &Dataset::range(10),
            tfdata::Compression::Auto,
            None,
        )
        .unwrap()
    };

    // Replay it behind a gate, with the HTTP endpoint up meanwhile.
    let rt = runtime();
    let grpc = tfdata_rpc::server::bind(0).unwrap();
    let grpc_port = grpc.local_addr().unwrap().port();
    let http = tfdata_rpc::admin::bind(0).unwrap();
    let http_port = http.local_addr().unwrap().port();
    let (open_gate, gate) = std::sync::mpsc::channel::<()>();
    let config = common::fault_tolerant(&work_dir, grpc_port);
    let security = config.security.clone();
    let shutdown = tfdata_rpc::CancellationToken::new();
    let server = {
        let shutdown = shutdown.clone();
        rt.spawn(async move {
            let grpc = tokio::net::TcpListener::from_std(grpc).unwrap();
            tfdata_dispatcher::serving::server::serve_recovering(
                grpc,
                Some(http),
                &security,
                shutdown,
                move || {
                    gate.recv().unwrap();
                    tfdata_dispatcher::Dispatcher::new(
                        config,
                        Arc::new(tfdata_dispatcher::SystemClock),
                    )
                },
            )
            .await
        })
    };
    common::wait_for("the HTTP endpoint", Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", http_port)).is_ok()
    });
    assert_eq!(http_get(http_port, "/healthz").0, 200);
    let (status, body) = http_get(http_port, "/readyz");
    assert_eq!((status, body.as_str()), (503, "replaying the journal\n"));
    assert_eq!(metrics(http_port), "# EOF\n");
    // The status page and its JSON say why they have nothing yet.
    let (status, page) = http_get(http_port, "/");
    assert_eq!(status, 503);
    assert!(page.contains("replaying its journal"), "{page}");
    assert_eq!(
        http_get(http_port, "/api/status"),
        (
            503,
            r#"{"ready":false,"reason":"replaying the journal"}"#.into()
        )
    );

    open_gate.send(()).unwrap();
    common::wait_for(
        "the replayed dispatcher to be ready",
        Duration::from_secs(20),
        || http_get(http_port, "/readyz").0 == 200,
    );
    assert_eq!(
        rt.block_on(health(grpc_port, "tensorflow.data.DispatcherService"))
            .unwrap(),
        ServingStatus::Serving
    );
    let text = metrics(http_port);
    assert_eq!(sample(&text, "tfdata_dispatcher_datasets"), 1.0, "{text}");
    let (status, json) = http_get(http_port, "/api/status");
    assert_eq!(status, 200);
    assert!(
        json.contains(&format!(r#""dataset_id":"{dataset_id}""#)),
        "{json}"
    );
    // The replayed state serves the dataset registered before the restart.
    let ds = tfdata::from_dataset_id(
        ProcessingMode::ParallelEpochs,
        &format!("grpc://localhost:{grpc_port}"),
        &dataset_id,
    )
    .build()
    .unwrap();
    assert_eq!(ds.dataset_id(), dataset_id);

    shutdown.cancel();
    rt.block_on(server).unwrap().unwrap();
}

/// Reads `dataset` from a one-worker cluster while `consume` runs per
/// element, until the dispatcher has rates for the reader and a measured
/// demand; returns the reader's starvation and the optimal workers.
fn pace_of(name: &str, dataset: Dataset, consume: fn(&Element)) -> (f64, i64) {
    let dispatcher = DispatchServer::new(DispatcherConfig {
        http_port: Some(0),
        ..Default::default()
    })
    .unwrap();
    let worker = WorkerServer::new(worker_config(&dispatcher.address())).unwrap();
    common::wait_for_workers(&dispatcher, 1);
    let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .job_name(name)
        .task_refresh_interval(Duration::from_millis(100))
        .stream_window(16, 1 << 20)
        .apply(&dataset)
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut it = ds.iter().unwrap();
            while !stop.load(Ordering::SeqCst) {
                consume(&it.next().unwrap().unwrap());
            }
        })
    };
    let rt = runtime();
    let d = Arc::clone(dispatcher.dispatcher());
    let started = Instant::now();
    let deadline = started + Duration::from_secs(30);
    let overview = loop {
        let overview = rt.block_on(d.overview());
        let rated = overview.readers.iter().any(|r| r.rates.is_some());
        // A few intervals in, so the figures are not the start-up's.
        if rated && overview.demand.measured && started.elapsed() > Duration::from_secs(2) {
            break overview;
        }
        assert!(Instant::now() < deadline, "no pace reported: {overview:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    // The gauges on /metrics, while the reader still reads.
    let text = metrics(dispatcher.http_port().unwrap());
    stop.store(true, Ordering::SeqCst);
    reader.join().unwrap();
    let starvation = overview.readers[0].rates.unwrap().starvation_ratio;
    let max = sample(&text, "tfdata_dispatcher_reader_starvation_max_ratio");
    assert!((0.0..=1.0).contains(&max), "{text}");
    assert_eq!(
        (max > 0.5),
        (starvation > 0.5),
        "the gauge and the overview disagree: {text}"
    );
    assert!(
        sample(&text, "tfdata_dispatcher_optimal_workers") >= 1.0,
        "{text}"
    );
    let worker_view = &overview.workers[0];
    assert!(
        worker_view.processing_time_nsec.unwrap() > 0.0,
        "{overview:?}"
    );
    drop(worker);
    eprintln!(
        "{name}: starvation {starvation:.3}, optimal workers {}, demand {:?}",
        overview.demand.optimal_workers, overview.demand.iterations
    );
    (starvation, overview.demand.optimal_workers)
}

fn take_no_time(_: &Element) {}

fn take_20ms(_: &Element) {
    std::thread::sleep(Duration::from_millis(20));
}

#[test]
fn a_slow_pipeline_starves_its_reader_and_asks_for_more_workers() {
    tfdata::register_function("operations_test_slow", |e: Element| {
        std::thread::sleep(Duration::from_millis(20));
        Ok(e)
    });
    let slow = Dataset::range(1_000_000).map("operations_test_slow");
    let (starvation, workers) = pace_of("slow-pipeline", slow, take_no_time);
    assert!(starvation > 0.5, "starvation {starvation}");
    // The trainer takes elements far faster than one worker makes them:
    // more workers, within the ×4 step from the one there is.
    assert!((2..=4).contains(&workers), "{workers} workers");
}

#[test]
fn a_fast_pipeline_keeps_a_slow_trainer_fed_with_one_worker() {
    let (starvation, workers) = pace_of("fast-pipeline", Dataset::range(1_000_000), take_20ms);
    assert!(starvation < 0.5, "starvation {starvation}");
    assert_eq!(workers, 1);
}

/// distributed_epoch over a fast source: the worker leases many splits per
/// `GetSplit` (its metric counts the requests), and the epoch still comes
/// out exactly once.
#[test]
fn a_fast_source_is_leased_many_splits_per_get_split() {
    let dispatcher = DispatchServer::new(DispatcherConfig::default()).unwrap();
    let worker = WorkerServer::new(worker_config(&dispatcher.address())).unwrap();
    let wport = worker.http_port().unwrap();
    common::wait_for_workers(&dispatcher, 1);
    let n = 20_000;
    let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .apply(&Dataset::range(n))
        .unwrap();
    let mut values: Vec<i64> = ds
        .iter()
        .unwrap()
        .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
        .collect();
    values.sort_unstable();
    assert_eq!(values, (0..n).collect::<Vec<_>>());
    let requests = sample(
        &metrics(wport),
        "tfdata_worker_get_split_duration_seconds_count",
    );
    assert!(
        requests >= 2.0 && requests < (n / 10) as f64,
        "{requests} GetSplit requests for {n} splits"
    );
}
