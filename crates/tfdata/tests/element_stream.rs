//! tfdata's own element stream between tfdata readers and tfdata workers
//! (issue 7): what readers see through it, its fallback to `GetElement`, and
//! its credit-based flow control at the protocol level.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{cluster, first_task, scalars};
use tfdata::{
    Compression, Dataset, DispatchServer, DispatcherConfig, ProcessingMode, Tensor, WorkerConfig,
    WorkerServer, distribute,
};
use tfdata_proto::data as wire;
use tfdata_proto::tfdata::stream::{self as stream_wire, StreamRequest};

#[test]
fn every_element_arrives_once_and_in_order_then_the_end() {
    let (dispatcher, _workers) = cluster(1);
    // Larger than a batch and than the stream window: many batches, credit
    // granted again and again.
    let n = 50_000;
    let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .apply(&Dataset::range(n))
        .unwrap();
    assert_eq!(scalars(&ds), (0..n).collect::<Vec<_>>());
    // The next repetition streams again from a new task.
    assert_eq!(scalars(&ds), (0..n).collect::<Vec<_>>());
}

#[test]
fn small_windows_still_deliver_everything_in_order() {
    let (dispatcher, _workers) = cluster(1);
    for compression in [Compression::Auto, Compression::Snappy, Compression::Off] {
        let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
            .compression(compression)
            .stream_window(3, 20)
            .apply(&Dataset::range(1000))
            .unwrap();
        assert_eq!(
            scalars(&ds),
            (0..1000).collect::<Vec<_>>(),
            "{compression:?}"
        );
    }
}

#[test]
fn large_and_string_elements_round_trip() {
    let (dispatcher, _workers) = cluster(1);
    let values: Vec<f32> = (0..300_000).map(|i| (i % 977) as f32 * 0.5).collect();
    let big = Tensor::from_slice(&values, vec![300, 1000]).unwrap();
    let words = Tensor::strings(vec!["a".into(), "".into(), "ccc".into()], vec![3]).unwrap();
    let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .apply(&Dataset::from_tensors(vec![big.clone(), words.clone()]).repeat(Some(7)))
        .unwrap();
    let elements: Vec<_> = ds.iter().unwrap().map(Result::unwrap).collect();
    assert_eq!(elements.len(), 7);
    for e in elements {
        assert_eq!(e.components, vec![big.clone(), words.clone()]);
    }
}

#[test]
fn distributed_epoch_over_two_workers_gives_every_element_once() {
    let (dispatcher, _workers) = cluster(2);
    let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .apply(&Dataset::range(2000))
        .unwrap();
    let mut values = scalars(&ds);
    values.sort_unstable();
    assert_eq!(values, (0..2000).collect::<Vec<_>>());
}

#[test]
fn job_sharing_readers_split_the_task_between_them() {
    let (dispatcher, _workers) = cluster(1);
    let n = 40_000;
    let make = || {
        distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
            .job_name("shared-stream")
            // Small windows, so both readers take part while the task runs.
            .stream_window(64, 1 << 20)
            .apply(&Dataset::range(n))
            .unwrap()
    };
    // Both iterators exist before either reads, so both join the iteration.
    let (ia, ib) = (make().iter().unwrap(), make().iter().unwrap());
    let read = |it: tfdata::ElementIterator| {
        it.map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
            .collect::<Vec<_>>()
    };
    let reader = std::thread::spawn(move || read(ia));
    let b = read(ib);
    let a = reader.join().unwrap();
    // Each element went to exactly one reader, each in the task's order.
    for part in [&a, &b] {
        assert!(part.windows(2).all(|w| w[0] < w[1]), "out of order");
    }
    let all: BTreeSet<i64> = a.iter().chain(&b).copied().collect();
    assert_eq!(a.len() + b.len(), n as usize, "no duplicates");
    assert_eq!(all, (0..n).collect());
}

/// A reader of a shared job whose trainer stops consuming holds up nobody:
/// the other reader reads to the end. The task completes only once every
/// stream that read it was closed after the end, so the worker sends the
/// end without credit and the paused reader's fetcher reads it (and closes
/// its stream) while its trainer is away. Before, the other reader waited
/// for the paused one forever (found by `reader_checkpoints.rs`, whose
/// consumers read one after the other).
#[test]
fn a_paused_reader_of_a_shared_job_holds_up_no_other_readers_end() {
    let (dispatcher, _workers) = cluster(1);
    let n = 2_000;
    let make = || {
        distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
            .job_name("paused")
            // The paused reader's window fills at once.
            .stream_window(4, 1 << 20)
            .apply(&Dataset::range(n))
            .unwrap()
    };
    let (mut paused, active) = (make().iter().unwrap(), make().iter().unwrap());
    let value =
        |e: tfdata::Result<tfdata::Element>| e.unwrap().components[0].to_scalar::<i64>().unwrap();
    let mut b = vec![value(paused.next().unwrap())];
    let reader = std::thread::spawn(move || active.map(value).collect::<Vec<_>>());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !reader.is_finished() {
        assert!(
            Instant::now() < deadline,
            "the active reader waits for the paused one"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let a = reader.join().unwrap();
    b.extend(paused.map(value));
    let all: BTreeSet<i64> = a.iter().chain(&b).copied().collect();
    assert_eq!(a.len() + b.len(), n as usize, "no duplicates");
    assert_eq!(all, (0..n).collect());
}

#[test]
fn readers_fall_back_to_get_element_on_workers_without_the_stream() {
    let dispatcher = DispatchServer::new(DispatcherConfig::default()).unwrap();
    let mut plain = WorkerConfig::new(dispatcher.address());
    plain.element_stream = false;
    let _plain = WorkerServer::new(plain).unwrap();
    let _streaming = WorkerServer::new(WorkerConfig::new(dispatcher.address())).unwrap();
    common::wait_for_workers(&dispatcher, 2);
    // One worker streams, the other answers UNIMPLEMENTED and is read with
    // GetElement: the read is complete either way.
    let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .apply(&Dataset::range(1000))
        .unwrap();
    let mut values = scalars(&ds);
    values.sort_unstable();
    assert_eq!(values, (0..1000).collect::<Vec<_>>());
    let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .apply(&Dataset::range(300))
        .unwrap();
    let mut values = scalars(&ds);
    values.sort_unstable();
    let expected: Vec<i64> = (0..300).flat_map(|v| [v, v]).collect();
    assert_eq!(values, expected);
}

#[test]
fn a_worker_stopping_mid_stream_leaves_the_read_to_the_others() {
    let dispatcher = DispatchServer::new(DispatcherConfig::default()).unwrap();
    let stays = WorkerServer::new(WorkerConfig::new(dispatcher.address())).unwrap();
    let leaves = WorkerServer::new(WorkerConfig::new(dispatcher.address())).unwrap();
    common::wait_for_workers(&dispatcher, 2);
    let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .task_refresh_interval(Duration::from_millis(50))
        // A small window: the leaving worker is mid-stream when it stops.
        .stream_window(8, 1 << 20)
        .apply(&Dataset::range(2000))
        .unwrap();
    let mut counts = std::collections::BTreeMap::new();
    for (i, e) in ds.iter().unwrap().enumerate() {
        *counts
            .entry(e.unwrap().components[0].to_scalar::<i64>().unwrap())
            .or_insert(0) += 1;
        if i == 100 {
            leaves.stop();
        }
    }
    // The remaining worker's full copy arrived and the read ended.
    assert_eq!(counts.len(), 2000, "every element at least once");
    assert!(counts.values().all(|&c| c <= 2));
    drop(stays);
}

/// A dispatcher with one registered worker (awaited, not slept for).
async fn one_worker() -> (DispatchServer, WorkerServer) {
    let dispatcher = DispatchServer::new(DispatcherConfig::default()).unwrap();
    let worker = WorkerServer::new(WorkerConfig::new(dispatcher.address())).unwrap();
    common::wait_for_workers_async(&dispatcher, 1).await;
    (dispatcher, worker)
}

/// Registers `dataset`, creates a job and iteration, and returns the task
/// id on the single worker, as a reader would learn it.
async fn one_task(dispatcher: &tfdata::DispatcherClient, dataset: &Dataset) -> i64 {
    one_task_compressed(dispatcher, dataset, false).await
}

/// [`one_task`] of `dataset` registered with Snappy compression or none.
async fn one_task_compressed(
    dispatcher: &tfdata::DispatcherClient,
    dataset: &Dataset,
    compress: bool,
) -> i64 {
    one_task_and_reader(dispatcher, dataset, compress).await.0
}

/// [`one_task_compressed`], with the reader's iteration client id.
async fn one_task_and_reader(
    dispatcher: &tfdata::DispatcherClient,
    dataset: &Dataset,
    compress: bool,
) -> (i64, i64) {
    let pipeline = tfdata_dataset::pipeline::to_pipeline_def(dataset, compress).unwrap();
    let compression = if compress {
        wire::data_service_metadata::Compression::Snappy
    } else {
        wire::data_service_metadata::Compression::Off
    };
    let dataset_id = dispatcher
        .get_or_register_dataset(wire::GetOrRegisterDatasetRequest {
            dataset: Some(wire::DatasetDef {
                graph: Default::default(),
                tfdata_pipeline: Some(pipeline),
            }),
            metadata: Some(wire::DataServiceMetadata {
                element_spec: None,
                compression: compression as i32,
                cardinality: dataset.cardinality(),
            }),
            dataset_id: None,
        })
        .await
        .unwrap()
        .dataset_id;
    first_task(
        dispatcher,
        dataset_id,
        ProcessingMode::ParallelEpochs.to_proto(),
    )
    .await
}

/// Opens a stream on `task_id` with one grant of credit, closes the credit
/// side at once, and returns every element value and whether the end of
/// sequence came. The worker sends what the credit allows, then ends.
async fn read_with_credit(
    worker: &str,
    task_id: i64,
    elements: u64,
    bytes: u64,
) -> (Vec<i64>, bool) {
    let (values, end, _) = read_with(
        worker,
        task_id,
        stream_wire::Compression::Auto,
        elements,
        bytes,
    )
    .await;
    (values, end)
}

/// [`read_with_credit`] asking for `compression`; also returns how many of
/// the chunks came Snappy-compressed.
async fn read_with(
    worker: &str,
    task_id: i64,
    compression: stream_wire::Compression,
    elements: u64,
    bytes: u64,
) -> (Vec<i64>, bool, usize) {
    let channel = tfdata_rpc::channel::channel(worker, &Default::default()).unwrap();
    // tonic's generated client: the hand-framed server speaks plain gRPC.
    let mut client = stream_wire::element_stream_client::ElementStreamClient::new(channel);
    let open = StreamRequest {
        task_id,
        compression: compression as i32,
        credit_elements: elements,
        credit_bytes: bytes,
        start_index: 0,
        received_batches: 0,
        ..Default::default()
    };
    let mut batches = loop {
        // The worker may not have received the task yet (UNAVAILABLE).
        match client
            .stream_elements(futures::stream::iter(vec![open]))
            .await
        {
            Ok(r) => break r.into_inner(),
            Err(s) if s.code() == tonic::Code::Unavailable => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(s) => panic!("{s}"),
        }
    };
    let mut values = Vec::new();
    let mut end = false;
    let mut compressed = 0;
    while let Some(batch) = batches.message().await.unwrap() {
        assert!(!end, "nothing follows the end of sequence");
        end = batch.end_of_sequence;
        compressed += batch
            .chunks
            .iter()
            .filter(|c| c.snappy_uncompressed_size > 0)
            .count();
        for e in tfdata_core::batch::decode_batch(batch).unwrap() {
            values.push(e.components[0].to_scalar::<i64>().unwrap());
        }
    }
    (values, end, compressed)
}

/// A reader on the worker's host (here: loopback) gets raw chunks under
/// `Auto`, even for data Snappy would shrink; forced Snappy still
/// compresses. Either way the values arrive whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_compression_sends_raw_chunks_to_a_reader_on_the_same_host() {
    let (dispatcher, worker) = one_worker().await;
    let client = tfdata::DispatcherClient::new(&dispatcher.address()).unwrap();
    let address = worker.address().to_string();
    // Small int64 values: Snappy shrinks their chunks by far more than the
    // eighth `Auto` asks for across the network.
    let n = 20_000;
    for (compression, expect_compressed) in [
        (stream_wire::Compression::Auto, false),
        (stream_wire::Compression::Always, true),
    ] {
        let task_id = one_task_compressed(&client, &Dataset::range(n), true).await;
        let (values, end, compressed) =
            read_with(&address, task_id, compression, 1 << 20, 1 << 30).await;
        assert_eq!(values, (0..n).collect::<Vec<_>>(), "{compression:?}");
        assert!(end);
        assert_eq!(
            compressed > 0,
            expect_compressed,
            "{compression:?}: {compressed} compressed chunks"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_send_no_more_than_the_credit_and_lose_nothing_between_streams() {
    let (dispatcher, worker) = one_worker().await;
    let client = tfdata::DispatcherClient::new(&dispatcher.address()).unwrap();
    let task_id = one_task(&client, &Dataset::range(100)).await;
    let address = worker.address().to_string();

    // Five elements of credit: exactly five, in order.
    let (values, end) = read_with_credit(&address, task_id, 5, 1 << 20).await;
    assert_eq!(values, vec![0, 1, 2, 3, 4]);
    assert!(!end);
    // 20 bytes of credit for 8-byte elements: two fit, and a third starts
    // while the credit is still positive; then it is exhausted.
    let (values, end) = read_with_credit(&address, task_id, 1000, 20).await;
    assert_eq!(values, vec![5, 6, 7]);
    assert!(!end);
    // The rest, then the end of sequence.
    let (values, end) = read_with_credit(&address, task_id, 1000, 1 << 20).await;
    assert_eq!(values, (8..100).collect::<Vec<_>>());
    assert!(end);
    // After the end, a new stream gets the end at once.
    let (values, end) = read_with_credit(&address, task_id, 1000, 1 << 20).await;
    assert!(values.is_empty());
    assert!(end);
}

/// A worker reports a task complete (the dispatcher then stops holding its
/// splits, and the iteration can end) only once every stream that read it
/// was closed by its reader after the end of sequence. Reported when the
/// first reader saw the end, a batch still on its way to another reader
/// was lost if the worker died then, and that reader waited for the dead
/// worker's finished task forever (`chaos.rs` in tfdata-cli).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_complete_once_its_readers_closed_their_streams_after_the_end() {
    let (dispatcher, worker) = one_worker().await;
    let client = tfdata::DispatcherClient::new(&dispatcher.address()).unwrap();
    let (task_id, reader) = one_task_and_reader(&client, &Dataset::range(10), false).await;
    let channel = tfdata_rpc::channel::channel(worker.address(), &Default::default()).unwrap();
    let mut streams = stream_wire::element_stream_client::ElementStreamClient::new(channel);
    let open = StreamRequest {
        task_id,
        credit_elements: 100,
        credit_bytes: 1 << 20,
        ..Default::default()
    };
    // The reader's side stays open (its sender kept) after the end.
    let (requests, mut batches) = loop {
        let (requests, rx) = tokio::sync::mpsc::channel(1);
        requests.send(open).await.unwrap();
        match streams
            .stream_elements(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
        {
            Ok(r) => break (requests, r.into_inner()),
            // The worker may not have received the task yet.
            Err(s) if s.code() == tonic::Code::Unavailable => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(s) => panic!("{s}"),
        }
    };
    let mut values = Vec::new();
    loop {
        let batch = batches
            .message()
            .await
            .unwrap()
            .expect("the end of sequence");
        let end = batch.end_of_sequence;
        for e in tfdata_core::batch::decode_batch(batch).unwrap() {
            values.push(e.components[0].to_scalar::<i64>().unwrap());
        }
        if end {
            break;
        }
    }
    assert_eq!(values, (0..10).collect::<Vec<_>>());
    let finished = || async {
        client
            .client_heartbeat(wire::ClientHeartbeatRequest {
                iteration_client_id: reader,
                ..Default::default()
            })
            .await
            .unwrap()
            .iteration_finished
    };
    // The worker reports a completion within milliseconds of deciding on
    // it: a third of a second of heartbeats would see one.
    for _ in 0..15 {
        assert!(
            !finished().await,
            "complete while a reader's stream is open"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop((requests, batches));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !finished().await {
        assert!(Instant::now() < deadline, "the task never completed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinated_reads_keep_their_rounds() {
    // Round-robin tasks are read with GetElement, one element per round.
    let dispatcher = DispatchServer::new(DispatcherConfig::default()).unwrap();
    let worker = WorkerServer::new(WorkerConfig::new(dispatcher.address())).unwrap();
    let ds = Dataset::range(10).repeat(None);
    common::wait_for_workers_async(&dispatcher, 1).await;
    let read = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .job_name("rounds")
        .consumers(0, 1)
        .apply_async(&ds)
        .await
        .unwrap();
    let mut elements = read.stream().await.unwrap();
    use futures::StreamExt;
    let values: Vec<i64> = (&mut elements)
        .take(25)
        .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
        .collect()
        .await;
    assert_eq!(values, (0..25).map(|v| v % 10).collect::<Vec<_>>());
    drop(elements);
    drop(worker);
}

/// Bad input from the network gets a clear error and leaves the worker
/// serving: a request that is not a `StreamRequest`, one that claims a
/// compressed gRPC message, and an unknown method of the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_stream_requests_get_errors_and_the_worker_keeps_serving() {
    use tfdata_rpc::raw_grpc::{open_stream, small_message};
    let dispatcher = DispatchServer::new(DispatcherConfig::default()).unwrap();
    let worker = WorkerServer::new(WorkerConfig::new(dispatcher.address())).unwrap();
    let channel = tfdata_rpc::channel::channel(worker.address(), &Default::default()).unwrap();
    let path = tfdata_rpc::channel::STREAM_ELEMENTS_PATH;
    let open = |parts: Vec<bytes::Bytes>| {
        open_stream(
            channel.clone(),
            path,
            futures::stream::iter(vec![parts]),
            1 << 20,
        )
    };
    // Field 1 (task_id) as a length-delimited field: not a StreamRequest.
    let not_a_request = vec![bytes::Bytes::from_static(&[
        0, 0, 0, 0, 3, 0x0a, 0x05, 0x01,
    ])];
    let err = open(not_a_request).await.err().unwrap();
    assert_eq!(err.code(), tonic::Code::Internal, "{err}");
    assert!(err.message().contains("malformed"), "{err}");
    // The compressed flag set (we never negotiated gRPC compression).
    let compressed = vec![bytes::Bytes::from_static(&[1, 0, 0, 0, 0])];
    let err = open(compressed).await.err().unwrap();
    assert!(err.message().contains("compressed"), "{err}");
    // An unknown method of the service.
    let unknown = open_stream(
        channel.clone(),
        "/tfdata.stream.ElementStream/NoSuchMethod",
        futures::stream::iter(vec![small_message(&StreamRequest::default())]),
        1 << 20,
    )
    .await
    .err()
    .unwrap();
    assert_eq!(unknown.code(), tonic::Code::Unimplemented, "{unknown}");
    // An unknown task: the worker says so (NotFound/Unavailable), and still reads.
    let unknown_task = StreamRequest {
        task_id: 987_654,
        credit_elements: 1,
        credit_bytes: 1,
        ..Default::default()
    };
    let err = open(small_message(&unknown_task)).await.err().unwrap();
    assert_ne!(err.code(), tonic::Code::Ok, "{err}");
    // The worker still serves readers.
    let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .apply_async(&Dataset::range(10))
        .await
        .unwrap();
    let mut elements = ds.stream().await.unwrap();
    use futures::StreamExt;
    let mut values = Vec::new();
    while let Some(e) = elements.next().await {
        values.push(e.unwrap().components[0].to_scalar::<i64>().unwrap());
    }
    assert_eq!(values, (0..10).collect::<Vec<_>>());
}
