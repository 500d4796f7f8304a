//! Tests of deterministic reads (issue 35) at the dispatcher: where such a
//! job is refused, where its tasks go, that it gets no splits, that its
//! setting is journaled, and the readers' reorder waits it shows.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tfdata_core::IterationId;
use tfdata_proto::data as wire;

use super::Dispatcher;
use super::tests::{ManualClock, graph_with, register, register_graph};
use crate::config::DispatcherConfig;
use crate::serving::server::DispatchServer;
use crate::serving::status_page::{json, report::StatusReport};
use crate::state::DispatcherState;

const DYNAMIC: i32 = wire::processing_mode_def::ShardingPolicy::Dynamic as i32;
const OFF: i32 = wire::processing_mode_def::ShardingPolicy::Off as i32;

fn mode(policy: i32, lanes: i64, seed: Option<u64>) -> wire::ProcessingModeDef {
    wire::ProcessingModeDef {
        sharding_policy: policy,
        tfdata_deterministic: Some(wire::TfdataDeterministic {
            lanes,
            split_shuffle_seed: seed,
        }),
        ..Default::default()
    }
}

fn job_request(
    dataset_id: &str,
    name: Option<&str>,
    m: wire::ProcessingModeDef,
) -> wire::GetOrCreateJobRequest {
    wire::GetOrCreateJobRequest {
        dataset_id: dataset_id.into(),
        processing_mode_def: Some(m),
        job_name: name.map(Into::into),
        ..Default::default()
    }
}

fn iteration_request(job_id: i64) -> wire::GetOrCreateIterationRequest {
    wire::GetOrCreateIterationRequest {
        job_id,
        repetition: 0,
        ..Default::default()
    }
}

fn worker(address: &str, tfdata: bool) -> wire::WorkerHeartbeatRequest {
    wire::WorkerHeartbeatRequest {
        worker_address: address.into(),
        tfdata_runs_pipelines: tfdata,
        worker_uid: 7,
        ..Default::default()
    }
}

fn dispatcher() -> (Dispatcher, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock(AtomicI64::new(1_000_000)));
    let config = DispatcherConfig {
        job_gc_timeout: Some(Duration::from_secs(60)),
        ..Default::default()
    };
    (Dispatcher::new(config, clock.clone()).unwrap(), clock)
}

async fn job(d: &Dispatcher, req: wire::GetOrCreateJobRequest) -> tfdata_core::Result<i64> {
    Ok(d.get_or_create_job(req.try_into()?).await?.job_id)
}

/// A deterministic job of `lanes` over `range(n)`, its iteration and
/// reader: (job id, iteration id, client id).
async fn deterministic_read(d: &Dispatcher, name: &str, lanes: i64) -> (i64, i64, i64) {
    let dataset = register(d, &tfdata_dataset::Dataset::range(100), 100).await;
    let job_id = job(
        d,
        job_request(&dataset, Some(name), mode(DYNAMIC, lanes, Some(7))),
    )
    .await
    .unwrap();
    let r = d
        .get_or_create_iteration(iteration_request(job_id).try_into().unwrap())
        .await
        .unwrap();
    (job_id, r.tfdata_iteration_id, r.iteration_client_id)
}

/// A dispatcher served on a real port, a runtime and a client of it.
fn served() -> (
    DispatchServer,
    tokio::runtime::Runtime,
    tfdata_proto::data::dispatcher_service_client::DispatcherServiceClient<
        tfdata_rpc::security::RpcChannel,
    >,
) {
    let server = DispatchServer::new(DispatcherConfig::default()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = runtime.block_on(async {
        tfdata_rpc::channel::dispatcher_client(
            tfdata_rpc::channel::channel(&server.address(), &Default::default()).unwrap(),
        )
    });
    (server, runtime, client)
}

/// Each refusal, over gRPC, with its code and the words that say why.
#[test]
fn a_deterministic_job_is_refused_where_it_cannot_hold() {
    let (server, runtime, mut client) = served();
    runtime.block_on(async {
        let pipeline = tfdata_dataset::pipeline::to_pipeline_def(
            &tfdata_dataset::Dataset::range(10).repeat(None),
            false,
        )
        .unwrap();
        let dataset = client
            .get_or_register_dataset(wire::GetOrRegisterDatasetRequest {
                dataset: Some(wire::DatasetDef {
                    tfdata_pipeline: Some(pipeline),
                    ..Default::default()
                }),
                metadata: Some(wire::DataServiceMetadata {
                    cardinality: -1,
                    ..Default::default()
                }),
                dataset_id: None,
            })
            .await
            .unwrap()
            .into_inner()
            .dataset_id;
        let refused = |req: wire::GetOrCreateJobRequest| {
            let mut client = client.clone();
            async move {
                let status = client.get_or_create_job(req).await.unwrap_err();
                (status.code(), status.message().to_string())
            }
        };
        let (code, msg) = refused(job_request(&dataset, None, mode(OFF, 4, None))).await;
        assert_eq!(code, tonic::Code::InvalidArgument);
        assert!(
            msg.contains("needs distributed_epoch") && msg.contains("OFF"),
            "{msg}"
        );
        let (_, msg) = refused(job_request(&dataset, None, mode(3, 4, None))).await;
        assert!(msg.contains("sharding policy is DATA"), "{msg}");
        for lanes in [0, -1, 4097] {
            let (code, msg) =
                refused(job_request(&dataset, None, mode(DYNAMIC, lanes, None))).await;
            assert_eq!(code, tonic::Code::InvalidArgument);
            assert!(
                msg.contains(&format!("1 to 4096 lanes, got {lanes}")),
                "{msg}"
            );
        }
        let mut coordinated = job_request(&dataset, Some("c"), mode(DYNAMIC, 4, None));
        coordinated.num_consumers = Some(2);
        let (code, msg) = refused(coordinated).await;
        assert_eq!(code, tonic::Code::InvalidArgument);
        assert!(msg.contains("cannot be a coordinated read"), "{msg}");
        let mut cached = job_request(&dataset, Some("c"), mode(DYNAMIC, 4, None));
        cached.use_cross_trainer_cache = true;
        let (code, msg) = refused(cached).await;
        assert_eq!(code, tonic::Code::InvalidArgument);
        assert!(msg.contains("cannot use the cross-trainer cache"), "{msg}");
        // The limits themselves are accepted.
        for lanes in [1, 4096] {
            client
                .get_or_create_job(job_request(&dataset, None, mode(DYNAMIC, lanes, None)))
                .await
                .unwrap();
        }
    });
    drop(server);
}

/// A TensorFlow graph with ops tfdata workers lack cannot be read
/// deterministically, whatever workers are registered; one they can run
/// can.
#[tokio::test]
async fn a_deterministic_job_needs_a_dataset_tfdata_workers_run() {
    let (d, _) = dispatcher();
    let foreign = register_graph(&d, graph_with(Some("EagerPyFunc"))).await;
    let err = job(&d, job_request(&foreign, None, mode(DYNAMIC, 2, None)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    let msg = err.to_string();
    assert!(
        msg.contains("runs on tfdata workers only") && msg.contains("EagerPyFunc"),
        "{msg}"
    );
    // The same graph read as usual waits for TensorFlow workers.
    let plain = wire::ProcessingModeDef {
        sharding_policy: DYNAMIC,
        tfdata_deterministic: None,
        ..Default::default()
    };
    job(&d, job_request(&foreign, None, plain)).await.unwrap();
    let runnable = register_graph(&d, graph_with(None)).await;
    job(&d, job_request(&runnable, None, mode(DYNAMIC, 2, None)))
        .await
        .unwrap();
}

/// A named job asked for again with other lanes or another seed is another
/// global order: refused like a mismatched processing mode, in its words.
#[tokio::test]
async fn a_named_deterministic_job_refuses_another_setting() {
    let (d, _) = dispatcher();
    let (job_id, _, _) = deterministic_read(&d, "train", 4).await;
    let dataset = d
        .state_copy()
        .await
        .job(tfdata_core::JobId(job_id))
        .unwrap()
        .dataset_id
        .0
        .clone();
    let same = job(
        &d,
        job_request(&dataset, Some("train"), mode(DYNAMIC, 4, Some(7))),
    );
    assert_eq!(same.await.unwrap(), job_id);
    let plain = wire::ProcessingModeDef {
        sharding_policy: DYNAMIC,
        tfdata_deterministic: None,
        ..Default::default()
    };
    for (other, words) in [
        (
            mode(DYNAMIC, 8, Some(7)),
            "requested DYNAMIC, deterministic with 8 lanes and split shuffle seed 7",
        ),
        (
            mode(DYNAMIC, 4, Some(8)),
            "requested DYNAMIC, deterministic with 4 lanes and split shuffle seed 8",
        ),
        (
            mode(DYNAMIC, 4, None),
            "requested DYNAMIC, deterministic with 4 lanes and no split shuffle",
        ),
        (plain, "requested DYNAMIC"),
    ] {
        let err = job(&d, job_request(&dataset, Some("train"), other))
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        let msg = err.to_string();
        assert!(
            msg.contains("tried to create job with name train but found an existing job with different parameters")
                && msg.contains("existing DYNAMIC, deterministic with 4 lanes and split shuffle seed 7")
                && msg.contains(words),
            "{msg}"
        );
    }
}

/// Tasks go to tfdata workers only, one each, later ones included, and
/// each carries the setting; TensorFlow workers get none. No task's end
/// and no lost worker ends the iteration: its readers do.
#[tokio::test]
async fn deterministic_tasks_go_to_tfdata_workers_only_and_to_later_ones() {
    let (d, clock) = dispatcher();
    let tf = d.worker_heartbeat(worker("tf:1", false)).await.unwrap();
    assert!(tf.new_tasks.is_empty());
    d.worker_heartbeat(worker("a:1", true)).await.unwrap();
    let (_, iteration, client) = deterministic_read(&d, "train", 3).await;
    let tasks_of = |state: &DispatcherState, w: &str| {
        state
            .tasks_for_worker(w)
            .filter(|t| t.iteration_id == IterationId(iteration))
            .count()
    };
    let state = d.state_copy().await;
    assert_eq!((tasks_of(&state, "a:1"), tasks_of(&state, "tf:1")), (1, 0));
    let a = d.worker_heartbeat(worker("a:1", true)).await.unwrap();
    assert_eq!(a.new_tasks.len(), 1);
    let def = &a.new_tasks[0];
    let lanes = def
        .processing_mode_def
        .as_ref()
        .and_then(|m| m.tfdata_deterministic.as_ref())
        .map(|d| (d.lanes, d.split_shuffle_seed));
    assert_eq!(lanes, Some((3, Some(7))), "the task carries the setting");
    assert!(
        d.worker_heartbeat(worker("tf:1", false))
            .await
            .unwrap()
            .new_tasks
            .is_empty()
    );
    // Workers that join later: a tfdata one gets a task, TensorFlow's not.
    let b = d.worker_heartbeat(worker("b:1", true)).await.unwrap();
    assert_eq!(b.new_tasks.len(), 1);
    assert_eq!(b.new_tasks[0].iteration_id, iteration);
    assert!(
        d.worker_heartbeat(worker("tf:2", false))
            .await
            .unwrap()
            .new_tasks
            .is_empty()
    );
    // A task that completes and a worker that is lost end nothing.
    d.worker_update(
        super::requests::WorkerUpdate::try_from(wire::WorkerUpdateRequest {
            worker_address: "a:1".into(),
            updates: vec![wire::TaskProgress {
                task_id: a.new_tasks[0].task_id,
                completed: true,
            }],
        })
        .unwrap(),
    )
    .await
    .unwrap();
    let mut stopping = worker("b:1", true);
    stopping.tfdata_stopping = true;
    d.worker_heartbeat(stopping).await.unwrap();
    let state = d.state_copy().await;
    state.check_invariants().unwrap();
    let it = state.iteration(IterationId(iteration)).unwrap();
    assert!(!it.finished, "ended by neither a task nor a lost worker");
    let answer = d
        .client_heartbeat(wire::ClientHeartbeatRequest {
            iteration_client_id: client,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(!answer.iteration_finished);
    // Its reader releases it; garbage collection ends it (whatever
    // `gc_dynamic_sharding_jobs` says: the readers hold the positions).
    d.release_iteration_client(
        super::requests::ReleaseIterationClient::try_from(wire::ReleaseIterationClientRequest {
            iteration_client_id: client,
        })
        .unwrap(),
    )
    .await
    .unwrap();
    clock.0.fetch_add(61_000_000, Ordering::SeqCst);
    d.run_maintenance().await.unwrap();
    let state = d.state_copy().await;
    let it = state.iteration(IterationId(iteration)).unwrap();
    assert!(it.garbage_collected && it.finished);
    state.check_invariants().unwrap();
}

/// The dispatcher hands out no split for a deterministic iteration, over
/// gRPC, and builds no split provider for it.
#[test]
fn get_split_is_refused_for_a_deterministic_iteration() {
    let (server, runtime, mut client) = served();
    runtime.block_on(async {
        client.worker_heartbeat(worker("a:1", true)).await.unwrap();
        let d = server.dispatcher();
        let (_, iteration, _) = deterministic_read(d, "train", 2).await;
        let status = client
            .get_split(wire::GetSplitRequest {
                iteration_id: iteration,
                split_provider_index: 0,
                tfdata_worker_address: "a:1".into(),
                tfdata_split_sequence: Some(0),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::FailedPrecondition);
        assert!(
            status.message().contains("a deterministic read's")
                && status.message().contains("hands out none"),
            "{}",
            status.message()
        );
        let state = d.state_copy().await;
        let it = state.iteration(IterationId(iteration)).unwrap();
        assert!(it.split_indices.iter().all(|&i| i == 0) && it.last_splits.is_empty());
        assert!(it.num_split_providers > 0, "counted for the tasks");
        assert!(
            !d.ledger
                .read(|g| g.split_providers.contains_key(&IterationId(iteration)))
                .await
                .unwrap()
        );
        // A restored reader's consumed splits mean nothing here.
        let mut restored =
            iteration_request(state.iteration(IterationId(iteration)).unwrap().job_id.0);
        restored.repetition = 1;
        restored.tfdata_consumed = vec![wire::TfdataSplitRanges {
            provider: 0,
            repetition: 0,
            bounds: vec![0, 3],
        }];
        let status = client.get_or_create_iteration(restored).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(
            status.message().contains("restore their lanes' positions"),
            "{}",
            status.message()
        );
    });
}

/// The setting is journaled with the job: a restart replays it, a
/// compaction keeps it, and the restarted dispatcher still refuses another
/// setting for the job and routes its tasks as before.
#[tokio::test]
async fn the_deterministic_setting_survives_a_replay_and_a_compaction() {
    for compact_after in [u64::MAX, 2] {
        let dir = tempfile::tempdir().unwrap();
        let config = DispatcherConfig {
            work_dir: Some(dir.path().display().to_string()),
            fault_tolerant_mode: true,
            ..Default::default()
        };
        let clock = Arc::new(ManualClock(AtomicI64::new(1_000_000)));
        let mut d = Dispatcher::new(config.clone(), clock.clone()).unwrap();
        d.set_compact_after_records(compact_after);
        let (job_id, iteration, _) = deterministic_read(&d, "train", 6).await;
        let before = d.state_copy().await;
        assert_eq!(
            DispatcherState::from_compacted(&before.to_compacted()).unwrap(),
            before
        );
        drop(d);
        let compacted =
            std::fs::read_dir(dir.path().join(crate::persistence::journal::JOURNAL_DIR))
                .unwrap()
                .any(|e| {
                    e.unwrap()
                        .file_name()
                        .to_string_lossy()
                        .starts_with("snapshot_")
                });
        assert_eq!(compacted, compact_after == 2, "compacted while running");
        let d = Dispatcher::new(config, clock).unwrap();
        let state = d.state_copy().await;
        assert_eq!(state, before, "compact after {compact_after}");
        let setting = state
            .job(tfdata_core::JobId(job_id))
            .unwrap()
            .deterministic()
            .copied();
        assert_eq!(
            setting,
            Some(wire::TfdataDeterministic {
                lanes: 6,
                split_shuffle_seed: Some(7)
            })
        );
        let dataset = state
            .job(tfdata_core::JobId(job_id))
            .unwrap()
            .dataset_id
            .0
            .clone();
        let err = job(
            &d,
            job_request(&dataset, Some("train"), mode(DYNAMIC, 5, Some(7))),
        )
        .await
        .unwrap_err();
        assert!(
            err.to_string().contains("deterministic with 6 lanes"),
            "{err}"
        );
        assert!(
            d.worker_heartbeat(worker("tf:1", false))
                .await
                .unwrap()
                .new_tasks
                .is_empty()
        );
        let a = d.worker_heartbeat(worker("a:1", true)).await.unwrap();
        assert_eq!(a.new_tasks.len(), 1);
        assert_eq!(a.new_tasks[0].iteration_id, iteration);
    }
}

fn wait(worker: &str, lane: i64, waited_ms: u64, window: u64) -> wire::TfdataReorderWait {
    wire::TfdataReorderWait {
        worker_address: worker.into(),
        lane,
        waited_ms,
        window_elements: window,
        window_limit: 64,
    }
}

/// Readers' reorder waits show per worker in the overview, the status
/// page's report and JSON, and `/metrics`; waits naming unknown workers or
/// lanes, or of an ordinary read, are ignored; a lost worker's series go;
/// the records stay one per (iteration, worker) however many reports come.
#[tokio::test]
async fn reorder_waits_show_per_worker_and_are_bounded() {
    let (d, clock) = dispatcher();
    for w in ["fast:1", "slow:1"] {
        d.worker_heartbeat(worker(w, true)).await.unwrap();
    }
    let (_, iteration, client) = deterministic_read(&d, "train", 4).await;
    // An ordinary read's reader reporting waits is ignored.
    let plain = super::tests::iteration_of_range(&d, 10, DYNAMIC).await;
    for i in 0..1_000 {
        for c in [client, plain] {
            d.client_heartbeat(wire::ClientHeartbeatRequest {
                iteration_client_id: c,
                tfdata_reorder_waits: vec![
                    wait("slow:1", 1, 30, 40 + i % 5),
                    wait("slow:1", 3, 20, 10),
                    wait("fast:1", 0, 1, 2),
                    wait(&format!("unknown-{i}:1"), 0, 1_000, 64),
                    wait("fast:1", 4, 1_000, 64),
                ],
                ..Default::default()
            })
            .await
            .unwrap();
        }
        clock.0.fetch_add(10_000, Ordering::SeqCst);
    }
    let records = d.ledger.read(|g| g.reorder_waits.records()).await.unwrap();
    assert_eq!(records, 2, "one record per (iteration, known worker)");
    let overview = d.overview().await;
    let rows: Vec<_> = overview
        .reorder_waits
        .iter()
        .map(|r| {
            (
                r.iteration.0,
                r.worker_address.as_str(),
                r.total_wait,
                r.recent_window,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (iteration, "fast:1", Duration::from_secs(1), Some((2, 64))),
            (iteration, "slow:1", Duration::from_secs(50), Some((44, 64))),
        ]
    );
    assert!(overview.reorder_waits[1].recent_wait >= Duration::from_secs(45));
    let job = overview.jobs.iter().find(|j| j.name == "train").unwrap();
    assert_eq!(
        job.deterministic.map(|d| (d.lanes, d.split_shuffle_seed)),
        Some((4, Some(7)))
    );
    // The status page: the slow worker stands out; the job shows its lanes.
    let report = StatusReport::new(&overview);
    let v = json::status(&report);
    let row = |address: &str| {
        v["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["address"] == address)
            .unwrap()
            .clone()
    };
    assert!(
        row("slow:1")["reorder_wait_seconds_last_minute"]
            .as_f64()
            .unwrap()
            >= 45.0
    );
    assert_eq!(row("slow:1")["reorder_window_elements"], 44);
    assert_eq!(row("fast:1")["reorder_window_elements"], 2);
    let train = v["iterations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|it| it["job_name"] == "train")
        .unwrap()
        .clone();
    assert_eq!(train["deterministic_lanes"], 4);
    assert_eq!(train["split_shuffle_seed"], 7);
    let html = crate::serving::status_page::html::content(&report);
    assert!(
        html.contains("deterministic: 4 lanes, split shuffle seed 7"),
        "{html}"
    );
    assert!(html.contains(r#"<span class="pill warn">"#) && html.contains("window 44/64"));
    // Metrics: a counter and a gauge per known worker, nothing for others.
    let metrics = d.encode_metrics().await;
    let waited = |metrics: &str, worker: &str| -> Option<f64> {
        let series =
            format!(r#"tfdata_dispatcher_reorder_wait_seconds_total{{worker="{worker}"}} "#);
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str()))
            .map(|v| v.parse().unwrap())
    };
    assert!(
        (waited(&metrics, "slow:1").unwrap() - 50.0).abs() < 1e-6,
        "{metrics}"
    );
    assert!(
        (waited(&metrics, "fast:1").unwrap() - 1.0).abs() < 1e-6,
        "{metrics}"
    );
    assert!(metrics.contains(r#"tfdata_dispatcher_reorder_window_elements{worker="slow:1"} 44"#));
    assert!(metrics.contains(r#"tfdata_dispatcher_reorder_window_elements{worker="fast:1"} 2"#));
    assert!(!metrics.contains("unknown-"), "{metrics}");
    // A lost worker's series and records go.
    let mut stopping = worker("slow:1", true);
    stopping.tfdata_stopping = true;
    d.worker_heartbeat(stopping).await.unwrap();
    let metrics = d.encode_metrics().await;
    assert!(!metrics.contains(r#"worker="slow:1""#), "{metrics}");
    assert!(metrics.contains(r#"worker="fast:1""#), "{metrics}");
    assert_eq!(
        d.ledger.read(|g| g.reorder_waits.records()).await.unwrap(),
        1
    );
    d.state_copy().await.check_invariants().unwrap();
}
