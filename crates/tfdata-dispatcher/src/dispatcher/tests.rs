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
async fn register(d: &Dispatcher, dataset: &tfdata_dataset::Dataset, cardinality: i64) -> String {
    let pipeline = tfdata_dataset::pipeline::to_pipeline_def(dataset, false).unwrap();
    d.get_or_register_dataset(wire::GetOrRegisterDatasetRequest {
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
    })
    .await
    .unwrap()
    .dataset_id
}

/// Registers `range(n)`, creates a job with `policy` and its first
/// iteration; returns the iteration client id.
pub(super) async fn iteration_of_range(d: &Dispatcher, n: i64, policy: i32) -> i64 {
    let id = register(d, &tfdata_dataset::Dataset::range(n), 0).await;
    let job_id = d
        .get_or_create_job(wire::GetOrCreateJobRequest {
            dataset_id: id,
            processing_mode_def: Some(wire::ProcessingModeDef {
                sharding_policy: policy,
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .job_id;
    d.get_or_create_iteration(wire::GetOrCreateIterationRequest {
        job_id,
        repetition: 0,
    })
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
    assert_eq!(d.snapshot_state().await.clients().count(), 1);

    d.client_heartbeat(wire::ClientHeartbeatRequest {
        iteration_client_id: client,
        ..Default::default()
    })
    .await
    .unwrap();
    clock.0.fetch_add(31_000_000, Ordering::SeqCst);
    d.run_maintenance().await.unwrap();
    let state = d.snapshot_state().await;
    assert_eq!(state.clients().count(), 0, "released after client_timeout");
    assert!(!state.iterations().next().unwrap().garbage_collected);

    clock.0.fetch_add(61_000_000, Ordering::SeqCst);
    d.run_maintenance().await.unwrap();
    let state = d.snapshot_state().await;
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
        .get_or_create_job(wire::GetOrCreateJobRequest {
            dataset_id,
            processing_mode_def: Some(wire::ProcessingModeDef { sharding_policy: 0 }),
            job_name: Some("coordinated".into()),
            num_consumers: Some(2),
            ..Default::default()
        })
        .await
        .unwrap()
        .job_id;
    d.get_or_create_iteration(wire::GetOrCreateIterationRequest {
        job_id,
        repetition: 0,
    })
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
            .maybe_remove_task(wire::MaybeRemoveTaskRequest {
                task_id,
                consumer_index: bad,
                round: 3,
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{bad}: {err}");
    }
    assert!(d.snapshot_state().await.task(TaskId(task_id)).is_some());
}

#[tokio::test]
async fn job_options_must_match_a_shared_job() {
    let (d, _clock) = dispatcher();
    iteration_with_client(&d).await;
    let named = |policy: i32, target: i32| wire::GetOrCreateJobRequest {
        dataset_id: "1000".into(),
        processing_mode_def: Some(wire::ProcessingModeDef {
            sharding_policy: policy,
        }),
        job_name: Some("shared".into()),
        target_workers: target,
        ..Default::default()
    };
    let id = d.get_or_create_job(named(0, 0)).await.unwrap().job_id;
    assert_eq!(
        d.get_or_create_job(named(0, 1)).await.unwrap().job_id,
        id,
        "UNSPECIFIED = AUTO"
    );
    let err = d
        .get_or_create_job(named(0, 2))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("target_workers"), "{err}");
    let err = d
        .get_or_create_job(named(1, 1))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("processing_mode_def"), "{err}");
    let err = d.get_or_create_job(named(9, 1)).await.unwrap_err();
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
        .get_or_register_dataset(wire::GetOrRegisterDatasetRequest {
            dataset: Some(wire::DatasetDef {
                graph: crate::tf_graph::tests::doubled(40).into(),
                tfdata_pipeline: None,
            }),
            metadata: Some(wire::DataServiceMetadata::default()),
            dataset_id: None,
        })
        .await
        .unwrap()
        .dataset_id;
    let job = {
        let d = Arc::clone(&d);
        tokio::spawn(async move {
            d.get_or_create_job(wire::GetOrCreateJobRequest {
                dataset_id: graph,
                processing_mode_def: Some(wire::ProcessingModeDef {
                    sharding_policy: 1, // DYNAMIC
                }),
                ..Default::default()
            })
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
