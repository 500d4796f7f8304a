//! Tests of the dispatcher as a whole: liveness, coordinated reads, jobs, workers.

use std::sync::Arc;
use std::time::Duration;

use tfdata_core::TaskId;
use tfdata_proto::data as wire;

use super::{Clock, Dispatcher};
use crate::config::DispatcherConfig;

use std::sync::atomic::{AtomicI64, Ordering};

/// A clock tests move by hand.
pub(super) struct ManualClock(pub(super) AtomicI64);

impl Clock for ManualClock {
    fn now_micros(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

fn dispatcher() -> (Dispatcher, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock(AtomicI64::new(1_000_000)));
    let config = DispatcherConfig {
        job_gc_timeout: Some(Duration::from_secs(60)),
        client_timeout: Duration::from_secs(30),
        ..Default::default()
    };
    (Dispatcher::new(config, clock.clone()).unwrap(), clock)
}

/// Registers `dataset` (of `cardinality`); returns its id.
pub(super) async fn register(
    d: &Dispatcher,
    dataset: &tfdata_dataset::Dataset,
    cardinality: i64,
) -> String {
    let pipeline = tfdata_dataset::pipeline::to_pipeline_def(dataset, false).unwrap();
    d.get_or_register_dataset(
        wire::GetOrRegisterDatasetRequest {
            dataset: Some(wire::DatasetDef {
                graph: Default::default(),
                tfdata_pipeline: Some(pipeline),
            }),
            metadata: Some(wire::DataServiceMetadata {
                compression: 1,
                cardinality,
                ..Default::default()
            }),
            dataset_id: None,
        }
        .try_into()
        .unwrap(),
    )
    .await
    .unwrap()
    .dataset_id
}

/// Registers `range(n)`, creates a job with `policy` and its first
/// iteration; returns the iteration client id.
pub(super) async fn iteration_of_range(d: &Dispatcher, n: i64, policy: i32) -> i64 {
    let id = register(d, &tfdata_dataset::Dataset::range(n), 0).await;
    let job_id = d
        .get_or_create_job(
            wire::GetOrCreateJobRequest {
                dataset_id: id,
                processing_mode_def: Some(wire::ProcessingModeDef {
                    sharding_policy: policy,
                    ..Default::default()
                }),
                ..Default::default()
            }
            .try_into()
            .unwrap(),
        )
        .await
        .unwrap()
        .job_id;
    d.get_or_create_iteration(
        wire::GetOrCreateIterationRequest {
            job_id,
            repetition: 0,
            tfdata_reports_receipts: false,
            tfdata_consumed: Vec::new(),
            tfdata_restore: None,
            tfdata_consumed_elements: Vec::new(),
            tfdata_consumed_pieces: Vec::new(),
        }
        .try_into()
        .unwrap(),
    )
    .await
    .unwrap()
    .iteration_client_id
}

async fn iteration_with_client(d: &Dispatcher) -> i64 {
    iteration_of_range(d, 3, 0).await
}

#[tokio::test]
async fn silent_clients_are_released_and_their_iteration_collected() {
    let (d, clock) = dispatcher();
    let client = iteration_with_client(&d).await;
    // Before its first heartbeat a client never times out.
    clock.0.fetch_add(3_600_000_000, Ordering::SeqCst);
    d.run_maintenance().await.unwrap();
    assert_eq!(d.state_copy().await.clients().count(), 1);

    d.client_heartbeat(wire::ClientHeartbeatRequest {
        iteration_client_id: client,
        ..Default::default()
    })
    .await
    .unwrap();
    clock.0.fetch_add(31_000_000, Ordering::SeqCst);
    d.run_maintenance().await.unwrap();
    let state = d.state_copy().await;
    assert_eq!(state.clients().count(), 0, "released after client_timeout");
    assert!(!state.iterations().next().unwrap().garbage_collected);

    clock.0.fetch_add(61_000_000, Ordering::SeqCst);
    d.run_maintenance().await.unwrap();
    let state = d.state_copy().await;
    let it = state.iterations().next().unwrap();
    assert!(
        it.garbage_collected && it.finished,
        "collected after job_gc_timeout"
    );

    let err = d
        .client_heartbeat(wire::ClientHeartbeatRequest {
            iteration_client_id: client,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
}

/// A consumer index outside the job's consumers is refused: counted, it
/// would make up the agreement that removes a coordinated-read task.
#[tokio::test]
async fn maybe_remove_task_checks_the_consumer_index() {
    let (d, _clock) = dispatcher();
    let dataset_id = register(&d, &tfdata_dataset::Dataset::range(3).repeat(None), -1).await;
    d.worker_heartbeat(wire::WorkerHeartbeatRequest {
        worker_address: "w:1".into(),
        tfdata_runs_pipelines: true,
        ..Default::default()
    })
    .await
    .unwrap();
    let job_id = d
        .get_or_create_job(
            wire::GetOrCreateJobRequest {
                dataset_id,
                processing_mode_def: Some(wire::ProcessingModeDef {
                    sharding_policy: 0,
                    ..Default::default()
                }),
                job_name: Some("coordinated".into()),
                num_consumers: Some(2),
                ..Default::default()
            }
            .try_into()
            .unwrap(),
        )
        .await
        .unwrap()
        .job_id;
    d.get_or_create_iteration(
        wire::GetOrCreateIterationRequest {
            job_id,
            repetition: 0,
            tfdata_reports_receipts: false,
            tfdata_consumed: Vec::new(),
            tfdata_restore: None,
            tfdata_consumed_elements: Vec::new(),
            tfdata_consumed_pieces: Vec::new(),
        }
        .try_into()
        .unwrap(),
    )
    .await
    .unwrap();
    let heartbeat = d
        .worker_heartbeat(wire::WorkerHeartbeatRequest {
            worker_address: "w:1".into(),
            tfdata_runs_pipelines: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let task_id = heartbeat
        .new_tasks
        .first()
        .expect("a task for the worker")
        .task_id;
    for bad in [2, 5, -1] {
        let err = d
            .maybe_remove_task(
                wire::MaybeRemoveTaskRequest {
                    task_id,
                    consumer_index: bad,
                    round: 3,
                }
                .try_into()
                .unwrap(),
            )
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{bad}: {err}");
    }
    assert!(d.state_copy().await.task(TaskId(task_id)).is_some());
}

#[tokio::test]
async fn job_options_must_match_a_shared_job() {
    let (d, _clock) = dispatcher();
    iteration_with_client(&d).await;
    let named = |policy: i32, target: i32| wire::GetOrCreateJobRequest {
        dataset_id: "1000".into(),
        processing_mode_def: Some(wire::ProcessingModeDef {
            sharding_policy: policy,
            ..Default::default()
        }),
        job_name: Some("shared".into()),
        target_workers: target,
        ..Default::default()
    };
    let id = d
        .get_or_create_job(named(0, 0).try_into().unwrap())
        .await
        .unwrap()
        .job_id;
    assert_eq!(
        d.get_or_create_job(named(0, 1).try_into().unwrap())
            .await
            .unwrap()
            .job_id,
        id,
        "UNSPECIFIED = AUTO"
    );
    let err = d
        .get_or_create_job(named(0, 2).try_into().unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("target_workers"), "{err}");
    let err = d
        .get_or_create_job(named(1, 1).try_into().unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("processing_mode_def"), "{err}");
    // An unknown policy never reaches the handler (`requests`).
    let err = super::requests::GetOrCreateJob::try_from(named(9, 1)).unwrap_err();
    assert_eq!(err.code(), tonic::Code::Internal);
}

#[tokio::test]
async fn workers_outside_worker_addresses_are_refused() {
    let clock = Arc::new(ManualClock(AtomicI64::new(0)));
    let config = DispatcherConfig {
        worker_addresses: vec!["good:1".into(), "other:%port%".into()],
        ..Default::default()
    };
    let d = Dispatcher::new(config, clock).unwrap();
    let beat = |addr: &str| wire::WorkerHeartbeatRequest {
        worker_address: addr.into(),
        ..Default::default()
    };
    d.worker_heartbeat(beat("good:1")).await.unwrap();
    d.worker_heartbeat(beat("other:7777")).await.unwrap();
    // The placeholder entry is bound to other:7777 now.
    assert!(d.worker_heartbeat(beat("other:8888")).await.is_err());
    let err = d.worker_heartbeat(beat("bad:1")).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert!(err.to_string().contains("bad:1"));
}

/// A TensorFlow client asking for distributed_epoch over a 41-node graph of
/// doubled edges (2^40 paths to its source) gets a clear refusal quickly,
/// and the graph walk, which runs outside the state lock, delays no other
/// client's RPCs meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graph_of_doubled_edges_neither_hangs_nor_blocks_other_rpcs() {
    let (d, _clock) = dispatcher();
    let d = Arc::new(d);
    let other = iteration_with_client(&d).await;
    let graph = d
        .get_or_register_dataset(
            wire::GetOrRegisterDatasetRequest {
                dataset: Some(wire::DatasetDef {
                    graph: crate::tf_graph::tests::doubled(40).into(),
                    tfdata_pipeline: None,
                }),
                metadata: Some(wire::DataServiceMetadata::default()),
                dataset_id: None,
            }
            .try_into()
            .unwrap(),
        )
        .await
        .unwrap()
        .dataset_id;
    let job = {
        let d = Arc::clone(&d);
        tokio::spawn(async move {
            d.get_or_create_job(
                wire::GetOrCreateJobRequest {
                    dataset_id: graph,
                    processing_mode_def: Some(wire::ProcessingModeDef {
                        sharding_policy: 1, // DYNAMIC
                        ..Default::default()
                    }),
                    ..Default::default()
                }
                .try_into()
                .unwrap(),
            )
            .await
        })
    };
    // Another reader keeps being served while the job request runs.
    for _ in 0..20 {
        tokio::time::timeout(
            Duration::from_secs(2),
            d.client_heartbeat(wire::ClientHeartbeatRequest {
                iteration_client_id: other,
                ..Default::default()
            }),
        )
        .await
        .expect("a client heartbeat waited behind the graph walk")
        .unwrap();
    }
    let err = tokio::time::timeout(Duration::from_secs(20), job)
        .await
        .expect("GetOrCreateJob over the doubled graph did not return in 20 s")
        .unwrap()
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err}");
    assert!(err.to_string().contains("more than 1024 sources"), "{err}");
}

/// Registers a TensorFlow graph; returns its id.
pub(super) async fn register_graph(d: &Dispatcher, graph: Vec<u8>) -> String {
    d.get_or_register_dataset(
        wire::GetOrRegisterDatasetRequest {
            dataset: Some(wire::DatasetDef {
                graph: graph.into(),
                tfdata_pipeline: None,
            }),
            metadata: Some(wire::DataServiceMetadata::default()),
            dataset_id: None,
        }
        .try_into()
        .unwrap(),
    )
    .await
    .unwrap()
    .dataset_id
}

/// `range(10)` with a node of `extra_op` beside it (reachable through a
/// control input, so it counts).
pub(super) fn graph_with(extra_op: Option<&str>) -> Vec<u8> {
    use prost::Message;
    let mut graph =
        tfdata_proto::tensorflow::GraphDef::decode(crate::tf_graph::tests::doubled(0).as_slice())
            .unwrap();
    if let Some(op) = extra_op {
        graph.node.push(tfdata_proto::tensorflow::NodeDef {
            name: "extra".into(),
            op: op.into(),
            ..Default::default()
        });
        let range = graph.node.iter_mut().find(|n| n.name == "n0").unwrap();
        range.input.push("^extra".into());
    }
    graph.encode_to_vec()
}

async fn heartbeat(d: &Dispatcher, address: &str, tfdata: bool) -> wire::WorkerHeartbeatResponse {
    d.worker_heartbeat(wire::WorkerHeartbeatRequest {
        worker_address: address.into(),
        tfdata_runs_pipelines: tfdata,
        ..Default::default()
    })
    .await
    .unwrap()
}

async fn job_for(d: &Dispatcher, dataset_id: &str) -> tfdata_core::Result<i64> {
    let job_id = d
        .get_or_create_job(
            wire::GetOrCreateJobRequest {
                dataset_id: dataset_id.into(),
                processing_mode_def: Some(wire::ProcessingModeDef {
                    sharding_policy: 0,
                    ..Default::default()
                }),
                ..Default::default()
            }
            .try_into()
            .unwrap(),
        )
        .await?
        .job_id;
    d.get_or_create_iteration(
        wire::GetOrCreateIterationRequest {
            job_id,
            repetition: 0,
            tfdata_reports_receipts: false,
            tfdata_consumed: Vec::new(),
            tfdata_restore: None,
            tfdata_consumed_elements: Vec::new(),
            tfdata_consumed_pieces: Vec::new(),
        }
        .try_into()
        .unwrap(),
    )
    .await?;
    Ok(job_id)
}

/// A TensorFlow graph of supported ops runs on tfdata workers and
/// TensorFlow workers alike; one with an op tfdata lacks only on
/// TensorFlow's, and with only tfdata workers registered its job fails at
/// once, naming the op, instead of waiting for a worker that never comes.
#[tokio::test]
async fn graphs_go_to_the_workers_that_can_run_them() {
    let (d, _clock) = dispatcher();
    heartbeat(&d, "tfdata:1", true).await;
    let runnable = register_graph(&d, graph_with(None)).await;
    let foreign = register_graph(&d, graph_with(Some("EagerPyFunc"))).await;
    let state = d.state_copy().await;
    let ds = state
        .dataset(&tfdata_core::DatasetId(runnable.clone()))
        .unwrap();
    assert!(ds.runs_on_tfdata() && ds.runs_on_tensorflow());
    let ds = state
        .dataset(&tfdata_core::DatasetId(foreign.clone()))
        .unwrap();
    assert!(!ds.runs_on_tfdata() && ds.runs_on_tensorflow());
    assert_eq!(ds.unsupported_ops, vec!["EagerPyFunc".to_string()]);

    job_for(&d, &runnable).await.unwrap();
    assert_eq!(heartbeat(&d, "tfdata:1", true).await.new_tasks.len(), 1);

    let err = job_for(&d, &foreign).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err}");
    assert!(err.to_string().contains("(EagerPyFunc)"), "{err}");

    // With a TensorFlow worker too, the job is made and only it gets the task.
    heartbeat(&d, "tensorflow:1", false).await;
    job_for(&d, &foreign).await.unwrap();
    // (A heartbeat naming no current tasks is told all of its tasks.)
    let tasks = heartbeat(&d, "tfdata:1", true).await.new_tasks;
    assert!(tasks.iter().all(|t| t.dataset_id == runnable), "{tasks:?}");
    let tasks = heartbeat(&d, "tensorflow:1", false).await.new_tasks;
    // The TensorFlow worker runs both graphs' tasks.
    assert_eq!(tasks.len(), 2, "{tasks:?}");

    // The decision survives compaction (the compacted state carries it).
    let back = crate::state::DispatcherState::from_compacted(&state.to_compacted()).unwrap();
    assert_eq!(back, state);
}

/// A graph that reads an autocache (tfdata's private load op, what the
/// dispatcher registers to serve a cached graph) runs on tfdata workers
/// only: a TensorFlow worker, even one that registers after the job was
/// made, never gets its tasks; with only TensorFlow workers its job is
/// refused, saying why. Journaled, so compaction keeps it.
#[tokio::test]
async fn a_graph_reading_an_autocache_never_goes_to_tensorflow_workers() {
    let (d, _clock) = dispatcher();
    heartbeat(&d, "tensorflow:1", false).await;
    let cached = register_graph(&d, graph_with(Some(tfdata_graph::autocache::LOAD_OP))).await;
    let state = d.state_copy().await;
    let ds = state
        .dataset(&tfdata_core::DatasetId(cached.clone()))
        .unwrap();
    assert!(ds.runs_on_tfdata() && !ds.runs_on_tensorflow(), "{ds:?}");
    let err = job_for(&d, &cached).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err}");
    assert!(err.to_string().contains("autocache"), "{err}");

    heartbeat(&d, "tfdata:1", true).await;
    job_for(&d, &cached).await.unwrap();
    assert_eq!(heartbeat(&d, "tfdata:1", true).await.new_tasks.len(), 1);
    assert!(
        heartbeat(&d, "tensorflow:1", false)
            .await
            .new_tasks
            .is_empty()
    );
    heartbeat(&d, "tensorflow:2", false).await;
    assert!(
        heartbeat(&d, "tensorflow:2", false)
            .await
            .new_tasks
            .is_empty()
    );

    let state = d.state_copy().await;
    let back = crate::state::DispatcherState::from_compacted(&state.to_compacted()).unwrap();
    assert_eq!(back, state);
}

/// A draining worker (SIGTERM) keeps the tasks it has but gets none for new
/// iterations; a new process at the same address (a new worker uid, not
/// draining) gets tasks again.
#[tokio::test]
async fn a_draining_worker_gets_no_new_tasks() {
    let (d, _clock) = dispatcher();
    let beat = |address: &str, uid: i64, draining: bool| wire::WorkerHeartbeatRequest {
        worker_address: address.into(),
        worker_uid: uid,
        tfdata_runs_pipelines: true,
        tfdata_draining: draining,
        ..Default::default()
    };
    d.worker_heartbeat(beat("steady:1", 1, false))
        .await
        .unwrap();
    d.worker_heartbeat(beat("leaving:1", 2, false))
        .await
        .unwrap();
    iteration_of_range(&d, 3, 0).await;
    let first = d
        .worker_heartbeat(beat("leaving:1", 2, true))
        .await
        .unwrap();
    assert_eq!(
        first.new_tasks.len(),
        1,
        "its existing task is still its own"
    );

    // A new iteration while it drains: a task for the steady worker only.
    iteration_of_range(&d, 5, 0).await;
    let state = d.state_copy().await;
    assert_eq!(state.tasks_for_worker("steady:1").count(), 2);
    assert_eq!(state.tasks_for_worker("leaving:1").count(), 1);
    // (The heartbeat lists no current tasks, so its old task is sent again.)
    let again = d
        .worker_heartbeat(beat("leaving:1", 2, true))
        .await
        .unwrap();
    let old_iteration = first.new_tasks[0].iteration_id;
    assert!(
        again
            .new_tasks
            .iter()
            .all(|t| t.iteration_id == old_iteration),
        "{:?}",
        again.new_tasks
    );

    // Its replacement at the same address joins both iterations afresh.
    let back = d
        .worker_heartbeat(beat("leaving:1", 3, false))
        .await
        .unwrap();
    assert_eq!(back.new_tasks.len(), 2, "{:?}", back.new_tasks);
}

/// The demand estimate and the rates follow what heartbeats report:
/// nothing without readers, the live workers while unmeasured, then
/// consumption over production, bounded to a ×4 step; rates over the
/// interval between two reports.
#[tokio::test]
async fn demand_and_rates_follow_heartbeats() {
    let (d, clock) = dispatcher();
    let worker = |tasks: Vec<wire::ActiveTask>, stats| wire::WorkerHeartbeatRequest {
        worker_address: "w:1".into(),
        tfdata_runs_pipelines: true,
        current_tasks: tasks.iter().map(|t| t.task_id).collect(),
        active_tasks: tasks,
        tfdata_stats: Some(stats),
        ..Default::default()
    };
    let stats = |elements, busy, full| wire::TfdataWorkerStats {
        elements_sent: elements,
        bytes_sent: elements * 8,
        pipeline_busy_seconds: busy,
        buffer_full_seconds: full,
        credit_wait_seconds: 0.0,
    };
    d.worker_heartbeat(worker(vec![], stats(0, 0.0, 0.0)))
        .await
        .unwrap();
    let overview = d.overview().await;
    assert_eq!(
        (overview.demand.optimal_workers, overview.demand.measured),
        (0, false)
    );

    let client = iteration_of_range(&d, 1000, 0).await;
    let task = d.state_copy().await.tasks().next().unwrap().id.0;
    let reader = |target: f64, elements, wait, lifetime| wire::ClientHeartbeatRequest {
        iteration_client_id: client,
        target_processing_time_nsec: target,
        tfdata_stats: Some(wire::TfdataReaderStats {
            elements_consumed: elements,
            wait_seconds: wait,
            lifetime_seconds: lifetime,
            bytes_received: elements * 8,
        }),
        ..Default::default()
    };
    // A reader, nothing measured: hold at the live workers.
    d.client_heartbeat(reader(0.0, 0, 0.0, 0.0)).await.unwrap();
    assert_eq!(d.overview().await.demand.optimal_workers, 1);

    // The trainer wants an element every 1 ms (1000/s); the worker makes
    // one every 5 ms (200/s): 5 workers, bounded to 4 from the one there is.
    d.client_heartbeat(reader(1e6, 1000, 0.25, 1.0))
        .await
        .unwrap();
    let active = vec![wire::ActiveTask {
        task_id: task,
        processing_time_nsec: 5e6,
    }];
    clock.0.fetch_add(1_000_000, Ordering::SeqCst);
    d.worker_heartbeat(worker(active.clone(), stats(500, 0.6, 0.2)))
        .await
        .unwrap();
    let overview = d.overview().await;
    assert!(overview.demand.measured);
    let part = &overview.demand.iterations[0];
    assert_eq!((part.workers, part.reporting_workers), (5, 1));
    assert!(
        (part.consumption_per_second - 1000.0).abs() < 1e-6,
        "{part:?}"
    );
    assert!(
        (part.worker_throughput_per_second - 200.0).abs() < 1e-6,
        "{part:?}"
    );
    assert_eq!(overview.demand.optimal_workers, 4);

    // Rates: the second report of each, over the interval between them.
    d.client_heartbeat(reader(1e6, 2000, 0.75, 2.0))
        .await
        .unwrap();
    clock.0.fetch_add(2_000_000, Ordering::SeqCst);
    d.worker_heartbeat(worker(active, stats(1500, 1.2, 1.0)))
        .await
        .unwrap();
    let overview = d.overview().await;
    let r = overview.readers[0].rates.unwrap();
    assert!((r.starvation_ratio - 0.5).abs() < 1e-9, "{r:?}");
    assert!((r.elements_per_second - 1000.0).abs() < 1e-6, "{r:?}");
    let w = overview.workers[0].rates.unwrap();
    assert!((w.elements_per_second - 500.0).abs() < 1e-6, "{w:?}");
    assert!((w.buffer_full_ratio - 0.8 / 1.4).abs() < 1e-9, "{w:?}");
    assert_eq!(overview.iterations[0].elements_consumed, 2000);
    assert_eq!(overview.workers[0].processing_time_nsec, Some(5e6));

    // The reader leaves: no demand.
    d.release_iteration_client(
        wire::ReleaseIterationClientRequest {
            iteration_client_id: client,
        }
        .try_into()
        .unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(d.overview().await.demand.optimal_workers, 0);
    let text = d.encode_metrics().await;
    assert!(
        text.contains("tfdata_dispatcher_optimal_workers 0"),
        "{text}"
    );
}

/// The task list a heartbeat answers, built from the state as TensorFlow
/// describes it (spec §4.4 `TaskInfo`), in the iteration's task order.
fn task_infos_in_state(state: &crate::state::DispatcherState) -> Vec<wire::TaskInfo> {
    let it = state.iterations().next().unwrap();
    it.tasks
        .iter()
        .map(|id| super::task_lists::task_info(state.task(*id).unwrap()))
        .collect()
}

/// A reader's heartbeat lists its iteration's tasks as they are now: the
/// encoded list kept between heartbeats follows workers joining and
/// leaving, and the encoded answer is the message field for field.
#[tokio::test]
async fn heartbeats_list_the_iterations_tasks_as_they_change() {
    let (d, _clock) = dispatcher();
    let join = |address: &str, stopping: bool| wire::WorkerHeartbeatRequest {
        worker_address: address.into(),
        transfer_servers: vec![wire::DataTransferServerInfo {
            protocol: "grpc".into(),
            address: address.into(),
            ..Default::default()
        }],
        worker_tags: vec![format!("tag-of-{address}")],
        worker_uid: 7,
        tfdata_runs_pipelines: true,
        tfdata_stopping: stopping,
        ..Default::default()
    };
    d.worker_heartbeat(join("a:1", false)).await.unwrap();
    let client = iteration_with_client(&d).await;
    let beat = || async {
        let encoded = d
            .client_heartbeat_encoded(
                wire::ClientHeartbeatRequest {
                    iteration_client_id: client,
                    ..Default::default()
                }
                .try_into()
                .unwrap(),
            )
            .await
            .unwrap();
        let mut bytes = Vec::new();
        encoded.encode(&mut bytes).unwrap();
        assert_eq!(bytes.len(), encoded.encoded_len());
        let on_the_wire = <wire::ClientHeartbeatResponse as prost::Message>::decode(&bytes[..]);
        let decoded = encoded.decode().unwrap();
        assert_eq!(on_the_wire.unwrap(), decoded);
        decoded
    };
    let first = beat().await;
    assert_eq!(first.task_info, task_infos_in_state(&d.state_copy().await));
    assert_eq!(first.task_info.len(), 1);
    assert_eq!(first.task_info[0].worker_tags, vec!["tag-of-a:1"]);
    assert_eq!(beat().await, first, "unchanged tasks, same answer");

    d.worker_heartbeat(join("b:1", false)).await.unwrap();
    let second = beat().await;
    assert_eq!(second.task_info.len(), 2);
    assert_eq!(second.task_info, task_infos_in_state(&d.state_copy().await));

    d.worker_heartbeat(join("a:1", true)).await.unwrap();
    let third = beat().await;
    assert_eq!(third.task_info, task_infos_in_state(&d.state_copy().await));
    assert_eq!(
        third
            .task_info
            .iter()
            .map(|t| t.worker_address.as_str())
            .collect::<Vec<_>>(),
        vec!["b:1"],
        "the stopped worker's task left the list"
    );
    assert!(!third.iteration_finished);
}

/// Coordinated reads and cross-trainer caches of a finite dataset are
/// refused when the job is made, in TensorFlow's codes and words; the
/// cardinality is the pipeline's own (whatever the registration said), and
/// an unknown one is allowed, as TensorFlow allows it.
#[tokio::test]
async fn jobs_that_need_an_infinite_dataset_refuse_a_finite_one() {
    use tfdata_dataset::Dataset;
    let (d, _clock) = dispatcher();
    let job = |dataset_id: &str, name: &str, num_consumers: Option<i64>, cache: bool| {
        wire::GetOrCreateJobRequest {
            dataset_id: dataset_id.to_string(),
            processing_mode_def: Some(wire::ProcessingModeDef {
                sharding_policy: 0,
                ..Default::default()
            }),
            job_name: Some(name.into()),
            num_consumers,
            use_cross_trainer_cache: cache,
            ..Default::default()
        }
    };
    // Registered as infinite, but the pipeline says 3.
    let finite = register(&d, &Dataset::range(3), -1).await;
    let err = d
        .get_or_create_job(
            job(&finite, "coordinated", Some(2), false)
                .try_into()
                .unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert_eq!(
        err.to_string(),
        "failed precondition: Round robin reads require that the input dataset has infinite \
         cardinality, but the dataset has cardinality 3. Consider adding a `.repeat()` \
         transformation to the dataset."
    );
    let err = d
        .get_or_create_job(job(&finite, "cache", None, true).try_into().unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.to_string().contains(
            "Cross-trainer caching requires the input dataset to be infinite. Got input with \
             cardinality 3"
        ),
        "{err}"
    );
    // Nothing was made: no job of either name.
    assert_eq!(d.ledger.read(|g| g.state.jobs().count()).await.unwrap(), 0);
    // A plain read of it is fine; so are unknown and infinite cardinalities.
    d.get_or_create_job(job(&finite, "plain", None, false).try_into().unwrap())
        .await
        .unwrap();
    let unknown = register(&d, &Dataset::range(3).ignore_errors(), 0).await;
    d.get_or_create_job(job(&unknown, "unknown", Some(2), false).try_into().unwrap())
        .await
        .unwrap();
    let infinite = register(&d, &Dataset::range(3).repeat(None), 0).await;
    d.get_or_create_job(
        job(&infinite, "infinite", Some(2), false)
            .try_into()
            .unwrap(),
    )
    .await
    .unwrap();
    d.get_or_create_job(
        job(&infinite, "infinite-cache", None, true)
            .try_into()
            .unwrap(),
    )
    .await
    .unwrap();
}

impl Dispatcher {
    /// `GetSplit` as the tonic adapter serves it: the wire request
    /// validated, then handled (its refusals included).
    pub(super) async fn get_split_wire(
        &self,
        req: wire::GetSplitRequest,
    ) -> tfdata_core::Result<wire::GetSplitResponse> {
        self.get_split(super::requests::GetSplit::try_from(req)?)
            .await
    }

    /// `WorkerUpdate` as the tonic adapter serves it.
    pub(super) async fn worker_update_wire(
        &self,
        req: wire::WorkerUpdateRequest,
    ) -> tfdata_core::Result<wire::WorkerUpdateResponse> {
        self.worker_update(super::requests::WorkerUpdate::try_from(req)?)
            .await
    }
}
