//! A deterministic read's element stream: one lane of the job
//! (`StreamRequest.lane`), served from a pipeline instance of the stream's
//! own (`crate::lane_task`). The instance is built on its pipeline thread
//! (not on the RPC runtime) inside the lane's seed scope, skips to the
//! opening's `start_index` (sources seek), and feeds a bounded producer;
//! batches are numbered by the lane's element index, carry no lineage (the
//! lane is rebuilt anywhere from its index, nothing is leased), and the
//! lane's end goes out as an end of sequence numbered with the lane's
//! length. Closing the stream, or the task's removal, drops the producer,
//! which stops the pipeline thread at its next element.

use std::sync::Arc;

use tfdata_core::TaskId;
use tfdata_core::batch::{BatchEncoder, Compressor};
use tfdata_dataset::splits::lanes::{LaneSpec, lane_context};
use tfdata_proto::tfdata::stream::StreamRequest;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use super::{
    BatchSender, Batches, Credit, MAX_BATCH_BYTES, MAX_BATCH_ELEMENTS, QUEUED_BATCHES, Requests,
    encode, end_of_sequence, finish_batch, stream_compression,
};
use crate::lane_task::{LaneSource, LaneStreamSlot};
use crate::pipeline::build_dataset;
use crate::producer::Producer;
use crate::task::TaskRunner;
use crate::worker::Worker;

/// Opens lane `open.lane` of `task` (a deterministic read's): checks the
/// lane and the worker's bound on lane streams, starts the lane's pipeline
/// and serves it in the background.
pub(super) async fn open_lane(
    worker: Arc<Worker>,
    task: Arc<TaskRunner>,
    open: StreamRequest,
    requests: Requests,
    same_host: bool,
) -> Result<Batches, Status> {
    let Some(lanes) = task.lanes() else {
        return Err(Status::internal("not a deterministic read's task"));
    };
    let lane = lanes.check_lane(open.lane.unwrap_or(-1))?;
    if open.start_index < 0 {
        return Err(Status::invalid_argument(format!(
            "start_index must be at least 0, got {}",
            open.start_index
        )));
    }
    let Some(slot) = worker.lane_streams().acquire() else {
        return Err(Status::resource_exhausted(format!(
            "this worker serves at most {} lane streams at once (max_lane_streams); open the \
             lane on another worker",
            worker.lane_streams().max()
        )));
    };
    let source = lanes.source().await?;
    if !source.form.sparse_variants.is_empty() {
        return Err(Status::failed_precondition(format!(
            "task {}: components {:?} of the elements are SparseTensors (TensorFlow's \
             DT_VARIANT), which tfdata's element stream cannot carry; densify them \
             (tf.sparse.to_dense) in the last map",
            open.task_id, source.form.sparse_variants
        )));
    }
    let spec = LaneSpec {
        lanes: lanes.lanes,
        lane,
        epoch: open.epoch,
        split_shuffle_seed: lanes.split_shuffle_seed,
        fingerprint: source.fingerprint,
    };
    spec.validate()?;
    let producer = start_lane(&worker, task.task_id(), &source, spec, open.start_index);
    let (tx, rx) = mpsc::channel(QUEUED_BATCHES);
    let lane_stream = LaneStream {
        worker,
        task,
        producer,
        _slot: slot,
    };
    let compress = source.form.compress;
    tokio::spawn(serve_lane(
        lane_stream,
        open,
        requests,
        tx,
        same_host,
        compress,
    ));
    Ok(ReceiverStream::new(rx))
}

/// The lane's pipeline, started: built on its own thread from the task's
/// definition, inside the lane's seed scope, `start_index` elements skipped.
fn start_lane(
    worker: &Worker,
    task_id: TaskId,
    source: &Arc<LaneSource>,
    spec: LaneSpec,
    start_index: i64,
) -> Producer {
    let config = worker.config();
    let limits = crate::producer::BufferLimits {
        elements: config.task_buffer_elements,
        max_elements: config.task_buffer_max_elements,
        bytes: usize::try_from(config.task_buffer_bytes).unwrap_or(usize::MAX),
    };
    let producer = Producer::new(task_id, limits);
    // Taken by the pipeline thread before its first element: sources seek.
    producer.skip(start_index as u64);
    let definition = Arc::clone(source);
    let span = tracing::info_span!(
        "lane",
        task = task_id.0,
        lane = spec.lane,
        epoch = spec.epoch
    );
    let _entered = span.enter();
    producer.run_seeded(
        Box::new(move || {
            let (dataset, _) = build_dataset(&definition.dataset_def, None, 0, 0)?;
            let ctx = lane_context(&dataset, &spec)?;
            Ok((dataset, ctx))
        }),
        spec.seed(),
        source.form.clone(),
    );
    producer
}

/// A lane stream's state: its producer (dropped with it, which stops the
/// pipeline) and its place among the worker's lane streams.
struct LaneStream {
    worker: Arc<Worker>,
    task: Arc<TaskRunner>,
    producer: Producer,
    _slot: LaneStreamSlot,
}

/// Serves the lane under the reader's credit until the lane ends, the
/// reader goes away or stops granting credit, the task is removed, or the
/// worker stops.
async fn serve_lane(
    lane: LaneStream,
    open: StreamRequest,
    mut requests: Requests,
    tx: BatchSender,
    same_host: bool,
    compress: bool,
) {
    let LaneStream {
        worker,
        task,
        producer,
        ..
    } = &lane;
    let Some(lanes) = task.lanes() else {
        return;
    };
    let shutdown = worker.shutdown_token().clone();
    let removed = lanes.removed().clone();
    let metrics = Arc::clone(worker.metrics());
    let mut credit = Credit::default();
    credit.add(&open);
    producer.raise_capacity(usize::try_from(open.credit_elements).unwrap_or(usize::MAX));
    let mut compressor = Compressor::new(stream_compression(compress, open.compression, same_host));
    let mut index = open.start_index;
    let mut granting = true;
    loop {
        // Stopped, or a credit grant (or the reader's half-close) read.
        let stop: Option<Option<Status>> = if !credit.can_send() {
            if !granting {
                return; // everything granted was sent
            }
            let stalled = std::time::Instant::now();
            let outcome = tokio::select! {
                m = requests.message() => match m {
                    Ok(Some(m)) => { credit.add(&m); None }
                    Ok(None) => { granting = false; None }
                    Err(_) => Some(None),
                },
                () = tx.closed() => Some(None),
                () = removed.cancelled() => Some(Some(lanes.removed_error().into())),
                () = shutdown.cancelled() => Some(Some(Status::cancelled("Worker is shutting down"))),
            };
            metrics.credit_wait.inc_by(stalled.elapsed().as_secs_f64());
            outcome
        } else {
            let max_elements = usize::try_from(credit.elements)
                .unwrap_or(usize::MAX)
                .min(MAX_BATCH_ELEMENTS);
            let max_bytes = usize::try_from(credit.bytes)
                .unwrap_or(usize::MAX)
                .min(MAX_BATCH_BYTES);
            let taken = tokio::select! {
                taken = producer.take(max_elements, max_bytes) => taken,
                m = requests.message(), if granting => {
                    match m {
                        Ok(Some(m)) => credit.add(&m),
                        Ok(None) => granting = false,
                        Err(_) => return,
                    }
                    continue;
                }
                () = tx.closed() => return,
                () = removed.cancelled() => {
                    let _ = tx.send(Err(lanes.removed_error().into())).await;
                    return;
                }
                () = shutdown.cancelled() => {
                    let _ = tx.send(Err(Status::cancelled("Worker is shutting down"))).await;
                    return;
                }
            };
            match taken {
                Err(e) => Some(Some(e.into())),
                Ok(None) => {
                    // The lane's end, numbered with the lane's length.
                    if tx.send(Ok(encode(end_of_sequence(index)))).await.is_ok() {
                        // Kept open until the reader closes its side, so
                        // the end is not cut off by the stream's teardown.
                        let _ = tokio::time::timeout(super::END_RECEIPT_WAIT, async {
                            while let Ok(Some(_)) = requests.message().await {}
                        })
                        .await;
                    }
                    return;
                }
                Ok(Some(elements)) if elements.is_empty() => None,
                Ok(Some(elements)) => {
                    let encoder = BatchEncoder::with_elements(&elements);
                    drop(elements);
                    let n = encoder.num_elements();
                    credit.elements = credit.elements.saturating_sub(u64::from(n));
                    credit.bytes = credit
                        .bytes
                        .saturating_sub(i64::try_from(encoder.payload_bytes()).unwrap_or(i64::MAX));
                    match finish_batch(encoder, &mut compressor).await {
                        Ok(mut batch) => {
                            batch.first_element_index = index;
                            index += i64::from(n);
                            let parts = encode(batch);
                            metrics.stream.elements.inc_by(u64::from(n));
                            metrics
                                .stream
                                .bytes
                                .inc_by(parts.iter().map(|p| p.len() as u64).sum());
                            if tx.send(Ok(parts)).await.is_err() {
                                return; // the reader is gone
                            }
                            None
                        }
                        Err(e) => Some(Some(Status::from(e))),
                    }
                }
            }
        };
        match stop {
            None => {}
            Some(None) => return,
            Some(Some(status)) => {
                tracing::debug!(task = task.task_id().0, lane = ?open.lane, status = %status, "lane stream failed");
                let _ = tx.send(Err(status)).await;
                return;
            }
        }
    }
}
