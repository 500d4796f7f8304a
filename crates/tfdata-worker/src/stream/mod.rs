//! tfdata's own element stream (`tfdata.stream.ElementStream`), served next
//! to TensorFlow's `WorkerService` to tfdata readers only (see
//! `proto/tfdata/stream.proto` and docs/performance.md).
//!
//! One stream per (task, reader). The reader grants credit in elements and
//! bytes; the worker takes whatever the task's buffer holds, up to the
//! credit and one batch's bounds, without waiting for more than the first
//! element (so the first element is never held back to fill a batch), and
//! encodes it in the batch form. Readers sharing a task (job sharing) each
//! take from the same first-come-first-served buffer, so every element goes
//! to exactly one of them. Coordinated reads and cross-trainer caches keep
//! `GetElement`. A deterministic read's stream names a lane and is served
//! by a pipeline instance of its own ([`lane`]).

mod lane;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use prost::encoding::WireType;
use tfdata_core::batch::{BatchEncoder, ChunkCompression, Compressor};
use tfdata_core::lineage::DeliveryGate;
use tfdata_core::{Error, TaskId};
use tfdata_proto::tfdata::stream::{Compression, ElementBatch, StreamRequest};
use tfdata_rpc::CancellationToken;
use tfdata_rpc::channel::STREAM_ELEMENTS_PATH;
use tfdata_rpc::raw_grpc::{self, MessageReader, RopeBody, RopeWriter};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tonic::codegen::{BoxFuture, Service, http};
use tonic::transport::server::TcpConnectInfo;

use crate::strategy::fcfs::Batch;
use crate::task::TaskRunner;
use crate::task_table::Lookup;
use crate::worker::Worker;

/// Batches with at least this many payload bytes are encoded (and maybe
/// Snappy-compressed) on a blocking thread instead of the RPC runtime.
const COMPRESS_OFF_RUNTIME_BYTES: u64 = 256 << 10;

/// Most elements in one batch: large enough that per-batch costs vanish for
/// scalars, small enough that the reader gets the first ones soon.
pub const MAX_BATCH_ELEMENTS: usize = 8192;
/// Most payload bytes in one batch (a larger element travels alone): the
/// worker encodes the next batch while this one is on the wire.
pub const MAX_BATCH_BYTES: usize = 4 << 20;
/// Encoded batches queued per stream ahead of the transport.
const QUEUED_BATCHES: usize = 2;
/// Largest reader request accepted (they are a few varints).
const MAX_REQUEST_BYTES: usize = 1 << 20;
/// Longest a stream waits, after sending the end of sequence, for its
/// reader to close it (the proof that everything before the end arrived;
/// see `TaskRunner::stream_closed`). A reader drops the stream as soon as
/// it reads the end; past this the task is reported complete regardless.
const END_RECEIPT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The element stream as a hand-written gRPC service (not tonic's generated
/// one): batches go out as lists of `Bytes` parts, tensor buffers uncopied
/// (see `tfdata_rpc::raw_grpc`). Same wire format, so a tonic client of
/// `tfdata.stream.ElementStream` reads it too.
#[derive(Clone)]
pub struct ElementStreamServer(pub Arc<Worker>);

impl tonic::server::NamedService for ElementStreamServer {
    const NAME: &'static str = "tfdata.stream.ElementStream";
}

impl Service<http::Request<tonic::body::Body>> for ElementStreamServer {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let worker = Arc::clone(&self.0);
        Box::pin(async move {
            if request.uri().path() != STREAM_ELEMENTS_PATH {
                let status = Status::unimplemented(format!(
                    "unknown method {} of tfdata.stream.ElementStream",
                    request.uri().path()
                ));
                return Ok(status.into_http());
            }
            let same_host = request
                .extensions()
                .get::<TcpConnectInfo>()
                .is_some_and(on_same_host);
            let requests = Requests(MessageReader::requests(
                request.into_body(),
                MAX_REQUEST_BYTES,
            ));
            match stream_elements(worker, requests, same_host).await {
                Ok(batches) => {
                    let body = tonic::body::Body::new(RopeBody::new(batches));
                    Ok(raw_grpc::response_headers()
                        .body(body)
                        .unwrap_or_else(|_| Status::internal("bad response").into_http()))
                }
                Err(status) => Ok(status.into_http()),
            }
        })
    }
}

/// The reader's side of a stream: its opening request, then credit grants.
struct Requests(MessageReader<tonic::body::Body>);

impl Requests {
    async fn message(&mut self) -> Result<Option<StreamRequest>, Status> {
        match self.0.message().await? {
            Some(rope) => raw_grpc::decode(rope).map(Some),
            None => Ok(None),
        }
    }
}

type Batches = ReceiverStream<Result<Vec<Bytes>, Status>>;
type BatchSender = mpsc::Sender<Result<Vec<Bytes>, Status>>;

/// Whether the reader is on this host: connected over loopback, or from
/// the address it connected to.
fn on_same_host(info: &TcpConnectInfo) -> bool {
    match (info.remote_addr(), info.local_addr()) {
        (Some(remote), Some(local)) => remote.ip().is_loopback() || remote.ip() == local.ip(),
        _ => false,
    }
}

/// How a stream's chunks are compressed. The dataset's setting wins; the
/// reader then chooses. Under `Auto`, a reader on the worker's own host
/// gets raw chunks: its "network" is a memory copy, far faster than Snappy
/// (about 0.5 GB/s per core) and both ends would spend this host's CPU on
/// it. TensorFlow likewise skips compression for workers it reads locally.
fn stream_compression(
    dataset_compresses: bool,
    requested: i32,
    same_host: bool,
) -> ChunkCompression {
    if !dataset_compresses {
        return ChunkCompression::Never;
    }
    match Compression::try_from(requested) {
        Ok(Compression::Always) => ChunkCompression::Always,
        Ok(Compression::Never) => ChunkCompression::Never,
        Ok(Compression::Auto) | Err(_) if same_host => ChunkCompression::Never,
        Ok(Compression::Auto) | Err(_) => ChunkCompression::Auto,
    }
}

async fn stream_elements(
    worker: Arc<Worker>,
    mut requests: Requests,
    same_host: bool,
) -> Result<Batches, Status> {
    let Some(open) = requests.message().await? else {
        return Err(Status::invalid_argument(
            "the element stream closed before its opening request",
        ));
    };
    let (tx, rx) = mpsc::channel(QUEUED_BATCHES);
    let task = match worker.lookup_task(TaskId(open.task_id))? {
        Lookup::Task(task) => task,
        // A removed deterministic task is not the lane's end: the reader
        // opens the lane on another task.
        Lookup::Finished if open.lane.is_some() => {
            return Err(Status::unavailable(format!(
                "task {} is no longer on this worker; open the lane on another task",
                open.task_id
            )));
        }
        Lookup::Finished => {
            let _ = tx.try_send(Ok(encode(end_of_sequence(0))));
            return Ok(ReceiverStream::new(rx));
        }
    };
    match (task.lanes().is_some(), open.lane) {
        (true, Some(_)) => return lane::open_lane(worker, task, open, requests, same_host).await,
        (true, None) => {
            return Err(Status::invalid_argument(format!(
                "task {} is a deterministic read's (tfdata_deterministic): open its element \
                 stream with a lane",
                open.task_id
            )));
        }
        (false, Some(lane)) => {
            return Err(Status::invalid_argument(format!(
                "task {} is not a deterministic read's; it has no lane {lane} (do not send lane)",
                open.task_id
            )));
        }
        (false, None) => {}
    }
    if !task.first_come_first_served() {
        return Err(Error::FailedPrecondition(format!(
            "task {} is a coordinated-read or cross-trainer-cache task; read it with GetElement",
            open.task_id
        ))
        .into());
    }
    if open.start_index > 0 {
        task.skip_to(open.start_index).await;
    }
    let serving = Serving::new(worker, task);
    tokio::spawn(serve(serving, open, requests, tx, same_host));
    Ok(ReceiverStream::new(rx))
}

/// A stream serving a task: it holds back the task's completion report
/// until it ends (see `TaskRunner::stream_closed`).
struct Serving {
    worker: Arc<Worker>,
    task: Arc<TaskRunner>,
    /// distributed_epoch: splits the dispatcher acknowledged as delivered
    /// since the last batch, told to the reader with the next one.
    released: Arc<std::sync::Mutex<crate::releases::ReleasedSplits>>,
}

impl Serving {
    fn new(worker: Arc<Worker>, task: Arc<TaskRunner>) -> Self {
        task.stream_opened();
        let released = task.ledger.releases.subscribe();
        Serving {
            worker,
            task,
            released,
        }
    }

    fn take_released(&self) -> Vec<tfdata_proto::data::TfdataSplitRanges> {
        self.released
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if self.task.stream_closed() {
            self.worker.report_completion(self.task.task_id());
        }
    }
}

/// After the end of sequence: waits (at most [`END_RECEIPT_WAIT`]) until
/// the reader closes its side, having read the end, or goes away. A close
/// proves every batch arrived: their gates open.
async fn await_end_receipt(
    requests: &mut Requests,
    tx: &BatchSender,
    shutdown: &CancellationToken,
    gates: &mut Gates,
) {
    let closed = async {
        loop {
            tokio::select! {
                m = requests.message() => match m {
                    // Credit granted, or batches received, before it read
                    // the end.
                    Ok(Some(m)) => gates.open_through(m.received_batches),
                    Ok(None) => {
                        gates.open_all();
                        return;
                    }
                    Err(_) => return,
                },
                () = tx.closed() => return,
                () = shutdown.cancelled() => return,
            }
        }
    };
    if tokio::time::timeout(END_RECEIPT_WAIT, closed)
        .await
        .is_err()
    {
        tracing::warn!("an element stream's reader did not close it after the end of sequence");
    }
}

/// The delivery gates of a stream's batches its reader has not yet said
/// arrived, by batch number (`StreamRequest.received_batches`): at most
/// one per batch within the reader's window.
#[derive(Default)]
struct Gates {
    sent: u64,
    open: std::collections::VecDeque<(u64, DeliveryGate)>,
}

impl Gates {
    /// A batch went out under `gate`.
    fn sent(&mut self, gate: DeliveryGate) {
        self.sent += 1;
        self.open.push_back((self.sent, gate));
    }

    /// The reader has every batch up to `through` (0: no news).
    fn open_through(&mut self, through: u64) {
        while let Some((n, gate)) = self.open.front() {
            if *n > through {
                break;
            }
            gate.store(true, Ordering::SeqCst);
            self.open.pop_front();
        }
    }

    fn open_all(&mut self) {
        self.open_through(u64::MAX);
    }
}

/// `batch` as gRPC message parts: the small fields copied, every chunk's
/// data a part of its own when large (a tensor's buffer, uncopied).
/// Finishes a batch, compressing it as the stream's `compressor` decides.
/// Snappy over a batch of [`COMPRESS_OFF_RUNTIME_BYTES`] or more is CPU
/// work: it runs on a blocking thread, not on the RPC runtime, where it
/// would stall every other stream.
async fn finish_batch(
    encoder: BatchEncoder,
    compressor: &mut Compressor,
) -> tfdata_core::Result<ElementBatch> {
    if !(compressor.may_compress() && encoder.payload_bytes() >= COMPRESS_OFF_RUNTIME_BYTES) {
        return encoder.finish(compressor);
    }
    let mut moved = std::mem::replace(compressor, Compressor::new(ChunkCompression::Never));
    match tokio::task::spawn_blocking(move || {
        let finished = encoder.finish(&mut moved);
        (finished, moved)
    })
    .await
    {
        Ok((finished, moved)) => {
            *compressor = moved;
            finished
        }
        Err(e) => Err(Error::Internal(format!("batch encoding failed: {e}"))),
    }
}

fn encode(batch: ElementBatch) -> Vec<Bytes> {
    let ElementBatch {
        headers,
        chunks,
        num_elements,
        payload_bytes,
        first_element_index,
        end_of_sequence,
        whole_splits,
        split_pieces,
        released_splits,
    } = batch;
    let mut w = RopeWriter::new();
    w.put_fields(&ElementBatch {
        headers,
        chunks: Vec::new(),
        num_elements,
        payload_bytes,
        first_element_index,
        end_of_sequence,
        whole_splits,
        split_pieces,
        released_splits,
    });
    for chunk in chunks {
        use prost::Message;
        w.put_key(2, WireType::LengthDelimited);
        w.put_varint(chunk.encoded_len() as u64);
        w.put_key(1, WireType::LengthDelimited);
        w.put_varint(chunk.data.len() as u64);
        w.put_bytes(chunk.data);
        if chunk.snappy_uncompressed_size != 0 {
            w.put_key(2, WireType::Varint);
            w.put_varint(chunk.snappy_uncompressed_size);
        }
    }
    w.into_message()
}

/// What the worker may still send.
#[derive(Debug, Default)]
struct Credit {
    elements: u64,
    /// Goes below zero by less than one element (see the proto).
    bytes: i64,
}

impl Credit {
    fn add(&mut self, request: &StreamRequest) {
        self.elements = self.elements.saturating_add(request.credit_elements);
        let bytes = i64::try_from(request.credit_bytes).unwrap_or(i64::MAX);
        self.bytes = self.bytes.saturating_add(bytes);
    }

    fn can_send(&self) -> bool {
        self.elements > 0 && self.bytes > 0
    }
}

fn end_of_sequence(index: i64) -> ElementBatch {
    ElementBatch {
        first_element_index: index,
        end_of_sequence: true,
        ..Default::default()
    }
}

/// Runs one stream until the task ends, the reader goes away or stops
/// granting credit, or the worker stops.
async fn serve(
    serving: Serving,
    open: StreamRequest,
    mut requests: Requests,
    tx: BatchSender,
    same_host: bool,
) {
    let (worker, task) = (&serving.worker, &serving.task);
    let shutdown = worker.shutdown_token().clone();
    let mut credit = Credit::default();
    credit.add(&open);
    task.raise_prefetch(usize::try_from(open.credit_elements).unwrap_or(usize::MAX));
    // Decided at the first batch, not at the opening: a task whose pipeline
    // has not started yet does not know whether it compresses (a stream
    // opened that early would never compress).
    let mut compressor: Option<Compressor> = None;
    // Whether the reader may still grant credit (it has not half-closed).
    let mut granting = true;
    let metrics = Arc::clone(worker.metrics());
    // The data has ended: the end goes out without credit.
    let mut past_credit = false;
    let mut gates = Gates::default();
    loop {
        if !credit.can_send() && !past_credit {
            if !granting {
                return; // everything granted was sent
            }
            // Stalled on the reader's credit: the reader (or the network
            // to it) is slower than this worker.
            let stalled = std::time::Instant::now();
            let granted = tokio::select! {
                m = requests.message() => match m {
                    Ok(Some(m)) => {
                        credit.add(&m);
                        gates.open_through(m.received_batches);
                        true
                    }
                    Ok(None) => {
                        granting = false;
                        true
                    }
                    Err(_) => false, // the reader is gone
                },
                // The end needs no credit: sent at once, the reader can
                // close the stream and the task complete, however long its
                // trainer takes over what it holds. (At most the one
                // element encoded ahead goes out past the credit first.)
                () = task.data_has_ended() => {
                    past_credit = true;
                    true
                }
                () = tx.closed() => false,
                () = shutdown.cancelled() => {
                    let _ = tx.send(Err(Status::cancelled("Worker is shutting down"))).await;
                    false
                }
            };
            metrics.credit_wait.inc_by(stalled.elapsed().as_secs_f64());
            if !granted {
                return;
            }
            continue;
        }
        let max_elements = if credit.can_send() {
            usize::try_from(credit.elements)
                .unwrap_or(usize::MAX)
                .min(MAX_BATCH_ELEMENTS)
        } else {
            1 // past the credit: the end (see above)
        };
        let max_bytes = usize::try_from(credit.bytes)
            .unwrap_or(usize::MAX)
            .min(MAX_BATCH_BYTES);
        let next = tokio::select! {
            next = task.next_batch(max_elements, max_bytes) => next,
            m = requests.message(), if granting => {
                match m {
                    Ok(Some(m)) => {
                        credit.add(&m);
                        gates.open_through(m.received_batches);
                    }
                    Ok(None) => granting = false,
                    Err(_) => return,
                }
                continue;
            }
            () = tx.closed() => return,
            () = shutdown.cancelled() => {
                let _ = tx.send(Err(Status::cancelled("Worker is shutting down"))).await;
                return;
            }
        };
        let batch_gate;
        let batch = match next {
            Err(e) => {
                tracing::debug!(task = task.task_id().0, error = %e, "element stream failed");
                let _ = tx.send(Err(e.into())).await;
                return;
            }
            Ok(Batch::EndOfSequence { first }) => {
                if first && task.data_ended() {
                    worker.report_completion(task.task_id());
                }
                if tx.send(Ok(encode(end_of_sequence(0)))).await.is_ok() {
                    await_end_receipt(&mut requests, &tx, &shutdown, &mut gates).await;
                }
                return;
            }
            Ok(Batch::Elements { elements, index }) => {
                let sparse = task.sparse_variants();
                if !sparse.is_empty() {
                    // The stream carries tfdata tensors; these components
                    // are TensorFlow variants only `GetElement` can send.
                    let _ = tx
                        .send(Err(Status::failed_precondition(format!(
                            "task {}: components {sparse:?} of the elements are SparseTensors \
                             (TensorFlow's DT_VARIANT), which tfdata's element stream cannot \
                             carry; read the dataset with TensorFlow's client, or densify them \
                             (tf.sparse.to_dense) in the last map",
                            task.task_id().0
                        ))))
                        .await;
                    return;
                }
                let encoder = BatchEncoder::with_elements(&elements);
                credit.elements = credit
                    .elements
                    .saturating_sub(u64::from(encoder.num_elements()));
                credit.bytes = credit
                    .bytes
                    .saturating_sub(i64::try_from(encoder.payload_bytes()).unwrap_or(i64::MAX));
                let compressor = compressor.get_or_insert_with(|| {
                    Compressor::new(stream_compression(
                        task.compress(),
                        open.compression,
                        same_host,
                    ))
                });
                let finished = finish_batch(encoder, compressor).await;
                // The splits whose last elements these were count as
                // delivered once the reader says the batch arrived.
                let gate: DeliveryGate = Arc::new(AtomicBool::new(false));
                tfdata_core::lineage::releasing_under(&gate, || drop(elements));
                batch_gate = gate;
                match finished {
                    Ok(mut batch) => {
                        batch.first_element_index = index;
                        batch.released_splits = serving.take_released();
                        batch
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e.into())).await;
                        return;
                    }
                }
            }
        };
        if batch.num_elements == 0 {
            // Nothing went out: nothing waits for the reader.
            batch_gate.store(true, Ordering::SeqCst);
            continue;
        }
        let elements = u64::from(batch.num_elements);
        let parts = encode(batch);
        metrics.stream.elements.inc_by(elements);
        metrics
            .stream
            .bytes
            .inc_by(parts.iter().map(|p| p.len() as u64).sum());
        if tx.send(Ok(parts)).await.is_err() {
            return; // the reader is gone; like a lost GetElement response
        }
        gates.sent(batch_gate);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use tfdata_core::{Element, Tensor};

    use super::*;

    fn batch_of(bytes: usize) -> BatchEncoder {
        let mut encoder = BatchEncoder::new();
        let zeros = Tensor::from_slice(&vec![0u8; bytes], vec![bytes as i64]).unwrap();
        encoder.push(&Element::new(vec![zeros]));
        encoder
    }

    /// Whether finishing `encoder` let another task of a one-thread runtime
    /// run meanwhile, i.e. whether the work left the runtime's thread. The
    /// runtime's one blocking thread is held until that other task has run,
    /// so work sent to it cannot finish before the caller yields.
    fn left_the_runtime(encoder: BatchEncoder, mode: ChunkCompression) -> bool {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .max_blocking_threads(1)
            .build()
            .unwrap();
        runtime.block_on(async move {
            let (release, held) = std::sync::mpsc::channel::<()>();
            tokio::task::spawn_blocking(move || {
                let _ = held.recv();
            });
            let other_ran = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&other_ran);
            tokio::spawn(async move {
                flag.store(true, Ordering::SeqCst);
                let _ = release.send(());
            });
            let mut compressor = Compressor::new(mode);
            finish_batch(encoder, &mut compressor).await.unwrap();
            other_ran.load(Ordering::SeqCst)
        })
    }

    /// A batch's splits count as delivered only once the reader says the
    /// batch reached it, in the order sent, or once it closes the stream
    /// after the end (every batch arrived); never by time alone.
    #[test]
    fn a_batch_counts_as_arrived_only_once_its_reader_says_so() {
        let mut gates = Gates::default();
        let sent: Vec<DeliveryGate> = (0..3).map(|_| Arc::new(AtomicBool::new(false))).collect();
        for g in &sent {
            gates.sent(Arc::clone(g));
        }
        let open = || {
            sent.iter()
                .map(|g| g.load(Ordering::SeqCst))
                .collect::<Vec<_>>()
        };
        gates.open_through(0); // a credit grant with no news
        assert_eq!(open(), [false, false, false]);
        gates.open_through(2);
        assert_eq!(open(), [true, true, false]);
        gates.open_through(1); // an older count, repeated
        assert_eq!(open(), [true, true, false]);
        gates.open_all();
        assert_eq!(open(), [true, true, true]);
        assert!(gates.open.is_empty());
    }

    /// A large batch that may be compressed is encoded on a blocking thread,
    /// so the RPC runtime goes on serving other streams; small ones, and
    /// ones that are never compressed, stay inline (a thread hop would cost
    /// more than the copy).
    #[test]
    fn large_compressible_batches_are_encoded_off_the_runtime() {
        let large = COMPRESS_OFF_RUNTIME_BYTES as usize;
        assert!(left_the_runtime(batch_of(large), ChunkCompression::Auto));
        assert!(left_the_runtime(batch_of(large), ChunkCompression::Always));
        assert!(!left_the_runtime(batch_of(large), ChunkCompression::Never));
        assert!(!left_the_runtime(batch_of(1024), ChunkCompression::Auto));
    }
}
