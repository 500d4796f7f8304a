//! Deterministic reads on the worker (issue 35): a task of a job with
//! `tfdata_deterministic` runs no pipeline; each element stream that names
//! a lane runs the lane's own pipeline instance, from `start_index`, and
//! ends where the lane ends. Real dispatcher, real worker, real gRPC.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod common;
use common::first_task;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use tfdata::{Dataset, DispatchServer, DispatcherConfig, WorkerConfig, WorkerServer};
use tfdata_dataset::splits::lanes::{LaneSpec, SplitPermutation, fingerprint, lane_context};
use tfdata_proto::data::{self as wire, processing_mode_def::ShardingPolicy};
use tfdata_proto::tfdata::stream::{self as stream_wire, StreamRequest};

async fn one_worker(config: impl FnOnce(&mut WorkerConfig)) -> (DispatchServer, WorkerServer) {
    let dispatcher = DispatchServer::new(DispatcherConfig::default()).unwrap();
    let mut worker_config = WorkerConfig::new(dispatcher.address());
    config(&mut worker_config);
    let worker = WorkerServer::new(worker_config).unwrap();
    common::wait_for_workers_async(&dispatcher, 1).await;
    (dispatcher, worker)
}

/// The registered form of `dataset`, as the worker receives it.
fn dataset_def(dataset: &Dataset) -> wire::DatasetDef {
    wire::DatasetDef {
        graph: Default::default(),
        tfdata_pipeline: Some(tfdata_dataset::pipeline::to_pipeline_def(dataset, false).unwrap()),
    }
}

/// Registers `dataset`, creates a job with `mode` and its iteration through
/// the dispatcher's gRPC, and returns the task on the one worker.
async fn one_task(
    dispatcher: &DispatchServer,
    dataset: &Dataset,
    mode: wire::ProcessingModeDef,
) -> i64 {
    let client = tfdata::DispatcherClient::new(&dispatcher.address()).unwrap();
    let dataset_id = client
        .get_or_register_dataset(wire::GetOrRegisterDatasetRequest {
            dataset: Some(dataset_def(dataset)),
            metadata: Some(wire::DataServiceMetadata {
                element_spec: None,
                compression: wire::data_service_metadata::Compression::Off as i32,
                cardinality: dataset.cardinality(),
            }),
            dataset_id: None,
        })
        .await
        .unwrap()
        .dataset_id;
    first_task(&client, dataset_id, mode).await.0
}

fn deterministic(lanes: i64, split_shuffle_seed: Option<u64>) -> wire::ProcessingModeDef {
    wire::ProcessingModeDef {
        sharding_policy: ShardingPolicy::Dynamic as i32,
        tfdata_deterministic: Some(wire::TfdataDeterministic {
            lanes,
            split_shuffle_seed,
        }),
        ..Default::default()
    }
}

/// What one stream read: each element's lane index and first value, and
/// the end of sequence's index if it came.
#[derive(Debug, PartialEq)]
struct LaneRead {
    elements: Vec<(i64, Vec<i64>)>,
    end: Option<i64>,
}

impl LaneRead {
    fn firsts(&self) -> Vec<i64> {
        self.elements.iter().map(|(_, v)| v[0]).collect()
    }
}

/// Opens a stream on `task_id` (with `lane`, `epoch`, `start_index`),
/// grants plenty of credit, half-closes, and reads to the end. Retries
/// while the worker does not know the task yet (Unavailable).
async fn read_lane(
    worker: &str,
    task_id: i64,
    lane: Option<i64>,
    epoch: u64,
    start_index: i64,
) -> Result<LaneRead, tonic::Status> {
    let channel = tfdata_rpc::channel::channel(worker, &Default::default()).unwrap();
    let mut client = stream_wire::element_stream_client::ElementStreamClient::new(channel);
    let open = StreamRequest {
        task_id,
        credit_elements: 1 << 20,
        credit_bytes: 1 << 30,
        start_index,
        lane,
        epoch,
        ..Default::default()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut batches = loop {
        match client
            .stream_elements(futures::stream::iter(vec![open]))
            .await
        {
            Ok(r) => break r.into_inner(),
            Err(s) if s.code() == tonic::Code::Unavailable && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(s) => return Err(s),
        }
    };
    let mut read = LaneRead {
        elements: Vec::new(),
        end: None,
    };
    while let Some(batch) = batches.message().await? {
        assert!(read.end.is_none(), "nothing follows the end of sequence");
        assert!(
            batch.whole_splits.is_empty() && batch.split_pieces.is_empty(),
            "no lineage"
        );
        if batch.end_of_sequence {
            read.end = Some(batch.first_element_index);
        }
        let first = batch.first_element_index;
        for (i, e) in tfdata_core::batch::decode_batch(batch)
            .unwrap()
            .into_iter()
            .enumerate()
        {
            read.elements
                .push((first + i as i64, e.components[0].to_vec::<i64>().unwrap()));
        }
    }
    Ok(read)
}

/// Lane `lane` of `dataset` computed here, as any worker computes it.
fn local_lane(dataset: impl Fn() -> Dataset, spec: LaneSpec) -> Vec<i64> {
    tfdata_dataset::random::with_seed(spec.seed(), || {
        let ds = dataset();
        let ctx = lane_context(&ds, &spec).unwrap();
        ds.iter_with(&ctx)
            .unwrap()
            .map(|e| e.unwrap().components[0].to_vec::<i64>().unwrap()[0])
            .collect()
    })
}

/// Every lane holds the splits of its global positions (here a permuted
/// `range`: split i is the value i), numbered from 0 and ended; together
/// they hold the dataset once; a stream from `start_index` gets exactly
/// the lane's rest, also while another stream reads the same lane; and
/// epoch 1 deals another permutation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lanes_serve_the_global_order_from_any_start() {
    let (dispatcher, worker) = one_worker(|_| {}).await;
    let (n, lanes, seed) = (50u64, 4u64, 7u64);
    let task = one_task(
        &dispatcher,
        &Dataset::range(n as i64),
        deterministic(lanes as i64, Some(seed)),
    )
    .await;
    let address = worker.address().to_string();
    let expected = |lane: u64, epoch: u64| -> Vec<i64> {
        let permutation = SplitPermutation::new(n, seed, epoch);
        (lane..n)
            .step_by(lanes as usize)
            .map(|p| permutation.apply(p) as i64)
            .collect()
    };
    let mut all = Vec::new();
    for lane in 0..lanes {
        let read = read_lane(&address, task, Some(lane as i64), 0, 0)
            .await
            .unwrap();
        let want = expected(lane, 0);
        assert_eq!(read.firsts(), want, "lane {lane}");
        let indices: Vec<i64> = read.elements.iter().map(|(i, _)| *i).collect();
        assert_eq!(indices, (0..want.len() as i64).collect::<Vec<_>>());
        assert_eq!(
            read.end,
            Some(want.len() as i64),
            "lane {lane} ends after its elements"
        );
        all.extend(read.firsts());
    }
    all.sort_unstable();
    assert_eq!(
        all,
        (0..n as i64).collect::<Vec<_>>(),
        "every split exactly once"
    );

    // From start_index: exactly the rest, numbered from there.
    let rest = read_lane(&address, task, Some(1), 0, 5).await.unwrap();
    assert_eq!(rest.firsts(), expected(1, 0)[5..].to_vec());
    assert_eq!(rest.elements[0].0, 5);
    // Past the end: the end at once.
    let past = read_lane(&address, task, Some(1), 0, 1000).await.unwrap();
    assert!(past.elements.is_empty());
    assert!(past.end.is_some());

    // Two streams of one lane at once, from different starts: each its own.
    let (a, b) = tokio::join!(
        read_lane(&address, task, Some(2), 0, 0),
        read_lane(&address, task, Some(2), 0, 3)
    );
    assert_eq!(a.unwrap().firsts(), expected(2, 0));
    assert_eq!(b.unwrap().firsts(), expected(2, 0)[3..].to_vec());

    // Epoch 1: the permutation of epoch 1.
    let epoch1 = read_lane(&address, task, Some(0), 1, 0).await.unwrap();
    assert_eq!(epoch1.firsts(), expected(0, 1));
    assert_ne!(expected(0, 1), expected(0, 0));
}

/// A lane's pipeline runs as the user wrote it (a batch, an unseeded
/// shuffle that reshuffles) and is the same on every opening: its seeds
/// derive from the dataset, the epoch and the lane. Epoch 1 of a seeded
/// reshuffling shuffle is the local second iteration's order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lanes_are_reproducible_pipelines() {
    let (dispatcher, worker) = one_worker(|_| {}).await;
    let address = worker.address().to_string();
    let unseeded = Dataset::range(100).shuffle(10, None, true).batch(3, false);
    let task = one_task(&dispatcher, &unseeded, deterministic(3, None)).await;
    let mut all = Vec::new();
    for lane in 0..3 {
        let once = read_lane(&address, task, Some(lane), 0, 0).await.unwrap();
        let again = read_lane(&address, task, Some(lane), 0, 0).await.unwrap();
        assert_eq!(once, again, "lane {lane} twice");
        all.extend(once.elements.into_iter().flat_map(|(_, v)| v));
    }
    all.sort_unstable();
    assert_eq!(all, (0..100).collect::<Vec<_>>());

    let seeded = || Dataset::range(40).shuffle(40, Some(3), true);
    let task = one_task(&dispatcher, &seeded(), deterministic(1, None)).await;
    let local = seeded();
    let iterate = || {
        local
            .iter()
            .unwrap()
            .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
            .collect::<Vec<_>>()
    };
    let (first, second) = (iterate(), iterate());
    assert_ne!(first, second);
    assert_eq!(
        read_lane(&address, task, Some(0), 0, 0)
            .await
            .unwrap()
            .firsts(),
        first
    );
    assert_eq!(
        read_lane(&address, task, Some(0), 1, 0)
            .await
            .unwrap()
            .firsts(),
        second
    );
    // And what the engine computes for the lane, fingerprint included.
    let spec = LaneSpec {
        lanes: 1,
        lane: 0,
        epoch: 1,
        split_shuffle_seed: None,
        fingerprint: fingerprint(&prost::Message::encode_to_vec(&dataset_def(&seeded()))),
    };
    assert_eq!(local_lane(seeded, spec), second);
}

/// Bad openings and `GetElement` get clear errors; the worker bounds its
/// lane streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deterministic_tasks_refuse_other_reads() {
    let (dispatcher, worker) = one_worker(|c| c.max_lane_streams = 1).await;
    let address = worker.address().to_string();
    let task = one_task(
        &dispatcher,
        &Dataset::range(1_000_000),
        deterministic(4, None),
    )
    .await;
    // Wait until the worker knows the task.
    read_lane(&address, task, Some(0), 0, 999_999)
        .await
        .unwrap();
    for (lane, what) in [
        (Some(4), "lane 4"),
        (Some(-1), "lane -1"),
        (None, "no lane"),
    ] {
        let err = read_lane(&address, task, lane, 0, 0).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{what}: {err}");
        assert!(err.message().contains("lane"), "{what}: {err}");
    }
    let mut client =
        wire::worker_service_client::WorkerServiceClient::connect(format!("http://{address}"))
            .await
            .unwrap();
    let err = client
        .get_element(wire::GetElementRequest {
            task_id: task,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err}");
    assert!(err.message().contains("element stream"), "{err}");

    // A lane on an ordinary task.
    let ordinary = one_task(
        &dispatcher,
        &Dataset::range(10),
        wire::ProcessingModeDef {
            sharding_policy: ShardingPolicy::Dynamic as i32,
            tfdata_deterministic: None,
            ..Default::default()
        },
    )
    .await;
    let err = read_lane(&address, ordinary, Some(0), 0, 0)
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err}");

    // One lane stream at a time on this worker: a second is refused while
    // the first is open, and admitted once it closed.
    let channel = tfdata_rpc::channel::channel(&address, &Default::default()).unwrap();
    let mut streams = stream_wire::element_stream_client::ElementStreamClient::new(channel);
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(StreamRequest {
        task_id: task,
        credit_elements: 1,
        credit_bytes: 1 << 20,
        lane: Some(0),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut held = streams
        .stream_elements(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let first = held.message().await.unwrap().unwrap();
    assert_eq!(first.num_elements, 1);
    let err = read_lane(&address, task, Some(1), 0, 0).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err}");
    drop(held);
    drop(tx);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match read_lane(&address, task, Some(1), 0, 249_990).await {
            Ok(read) => {
                let want: BTreeSet<i64> = (249_990..250_000).map(|j| j * 4 + 1).collect();
                assert_eq!(read.firsts().into_iter().collect::<BTreeSet<_>>(), want);
                break;
            }
            Err(e) if e.code() == tonic::Code::ResourceExhausted && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
}
