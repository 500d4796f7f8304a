//! One reader's pass over a job (spec §5.4): create the job and iteration,
//! heartbeat the dispatcher to learn of tasks and of the iteration's end, and
//! fetch elements from every task's worker.
//!
//! A driver task owns the heartbeat loop and spawns one fetcher per task.
//!
//! A fetcher first opens tfdata's element stream on the task's worker
//! (`tfdata.stream.ElementStream`, tfdata workers only): the worker sends
//! batches of elements within the credit the fetcher grants, a window of
//! [`STREAM_WINDOW_ELEMENTS`] elements and [`STREAM_WINDOW_BYTES`] bytes
//! per task; a batch's credit is granted again once the reader has taken
//! all its elements, so a slow reader slows the worker instead of growing
//! memory. A worker that answers UNIMPLEMENTED (TensorFlow's, or ours with
//! the stream off) is read with `GetElement` from then on.
//!
//! `GetElement` fetchers hold at most one call in flight each; a semaphore of
//! `max_outstanding_requests` permits bounds requests in flight plus elements
//! buffered for the reader (a permit travels with its element and is returned
//! when the reader takes it).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tfdata_core::{Element, Error, Result, element};
use tfdata_proto::data::{
    self as wire, get_element_response, worker_service_client::WorkerServiceClient,
};
use tfdata_proto::tfdata::stream::{Compression as StreamCompression, ElementBatch, StreamRequest};
use tfdata_rpc::CancellationToken;
use tfdata_rpc::retry::{backoff, retry};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::DropGuard;
use tonic::transport::Channel;

use crate::dispatcher::DispatcherClient;
use crate::options::{ProcessingMode, TargetWorkers};

/// Bound on one `ReleaseIterationClient` when a reader goes away.
pub(crate) const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on one `ClientHeartbeat`; a slower answer counts as a transient failure.
pub(crate) const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(30);
/// First poll delay once all tasks are drained but the end is not yet known.
const END_POLL_START: Duration = Duration::from_millis(5);
/// Elements a reader lets each task's stream send ahead of it: two of the
/// worker's largest batches, so one is decoded and read while the next is
/// on its way.
pub(crate) const STREAM_WINDOW_ELEMENTS: u64 = 16_384;
/// Payload bytes a reader lets each task's stream send ahead of it.
pub(crate) const STREAM_WINDOW_BYTES: u64 = 16 << 20;

pub(crate) struct IterationParams {
    pub dataset_id: String,
    pub mode: ProcessingMode,
    pub job_name: Option<String>,
    pub target_workers: TargetWorkers,
    pub consumer_index: Option<i64>,
    pub num_consumers: Option<i64>,
    pub trainer_id: Option<String>,
    /// Registered cardinality of the dataset (−1 infinite, −2 unknown).
    pub cardinality: i64,
    pub repetition: i64,
    pub max_outstanding_requests: usize,
    pub task_refresh_interval: Duration,
    pub dispatcher_timeout: Duration,
    /// How the dataset was registered to be compressed (streams only).
    pub compression: StreamCompression,
    /// Per-task stream window (tests shrink it).
    pub stream_window: (u64, u64),
}

/// What a fetcher hands the reader: one element (`GetElement`) or a
/// stream batch, whose credit goes back to the worker once it is read.
pub(crate) struct Delivery {
    elements: std::vec::IntoIter<Element>,
    /// Held for its `Drop`: the credit goes back when the delivery is read.
    _credit: Option<CreditReturn>,
}

impl From<Element> for Delivery {
    fn from(e: Element) -> Self {
        Delivery {
            elements: vec![e].into_iter(),
            _credit: None,
        }
    }
}

pub(crate) type Item = (Result<Delivery>, Option<OwnedSemaphorePermit>);

/// The reader's end of a running iteration.
pub(crate) struct Iteration {
    rx: mpsc::Receiver<Item>,
    /// The delivery being read, and what it holds of the fetchers' budgets.
    current: Option<(Delivery, Option<OwnedSemaphorePermit>)>,
    failed: bool,
    _stop_driver: DropGuard,
}

impl Iteration {
    /// The next element of the current delivery; its credit and permit go
    /// back as soon as its last element is taken.
    fn take_buffered(&mut self) -> Option<Element> {
        let (delivery, _) = self.current.as_mut()?;
        let element = delivery.elements.next();
        if delivery.elements.len() == 0 {
            self.current = None;
        }
        element
    }

    fn take(&mut self, item: Option<Item>) -> Option<Result<Element>> {
        if self.failed {
            return None;
        }
        let (result, permit) = item?;
        match result {
            Ok(delivery) => {
                self.current = Some((delivery, permit));
                // An empty delivery is never sent; be safe anyway.
                self.take_buffered().map(Ok)
            }
            Err(e) => {
                // An error ends the iteration, as in TensorFlow.
                self.failed = true;
                Some(Err(e))
            }
        }
    }

    pub fn next_blocking(&mut self) -> Option<Result<Element>> {
        if let Some(e) = self.take_buffered() {
            return Some(Ok(e));
        }
        let item = self.rx.blocking_recv();
        self.take(item)
    }

    /// The next element without waiting: `Pending` if none has arrived.
    pub fn try_next(&mut self) -> Poll<Option<Result<Element>>> {
        if let Some(e) = self.take_buffered() {
            return Poll::Ready(Some(Ok(e)));
        }
        match self.rx.try_recv() {
            Ok(item) => Poll::Ready(self.take(Some(item))),
            Err(mpsc::error::TryRecvError::Disconnected) => Poll::Ready(self.take(None)),
            Err(mpsc::error::TryRecvError::Empty) => Poll::Pending,
        }
    }

    /// The next element, waiting at most `timeout` on `handle`'s runtime
    /// for it (so a caller can look at other things, such as signals,
    /// between waits): `Pending` if none arrived in time.
    pub fn next_within(
        &mut self,
        handle: &tokio::runtime::Handle,
        timeout: Duration,
    ) -> Poll<Option<Result<Element>>> {
        if let Poll::Ready(item) = self.try_next() {
            return Poll::Ready(item);
        }
        // The timer is made inside the future: it needs the runtime's context.
        let rx = &mut self.rx;
        match handle.block_on(async { tokio::time::timeout(timeout, rx.recv()).await }) {
            Ok(item) => Poll::Ready(self.take(item)),
            Err(_elapsed) => Poll::Pending,
        }
    }

    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Element>>> {
        if let Some(e) = self.take_buffered() {
            return Poll::Ready(Some(Ok(e)));
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(item) => Poll::Ready(self.take(item)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Creates (or joins) the job and iteration, then starts the driver on `handle`.
fn decode(
    address: &str,
    task_id: i64,
    element: Option<get_element_response::Element>,
) -> Result<Element> {
    match element {
        Some(get_element_response::Element::Compressed(c)) => element::uncompress(&c),
        Some(get_element_response::Element::Uncompressed(u)) => element::from_uncompressed(&u),
        None => Err(Error::Internal(format!(
            "worker {address} answered GetElement for task {task_id} with no element"
        ))),
    }
}

/// Compressed payloads at least this large are decompressed on a blocking
/// thread: Snappy over megabytes would stall the (one-thread) client runtime,
/// and with it every other read's network I/O.
const DECODE_OFF_RUNTIME_BYTES: usize = 256 << 10;

/// [`decode`], on a blocking thread when the payload is large and compressed.
pub(crate) async fn decode_off_runtime(
    address: &str,
    task_id: i64,
    element: Option<get_element_response::Element>,
) -> Result<Element> {
    let large = matches!(&element, Some(get_element_response::Element::Compressed(c))
        if c.data.len() >= DECODE_OFF_RUNTIME_BYTES);
    if !large {
        return decode(address, task_id, element);
    }
    let address = address.to_string();
    tokio::task::spawn_blocking(move || decode(&address, task_id, element))
        .await
        .map_err(|e| Error::Internal(format!("decoding an element failed: {e}")))?
}

/// The elements of a stream batch, decompressed on a blocking thread when it
/// carries large compressed chunks.
async fn decode_batch_off_runtime(batch: ElementBatch) -> Result<Vec<Element>> {
    let large = batch
        .chunks
        .iter()
        .any(|c| c.snappy_uncompressed_size >= DECODE_OFF_RUNTIME_BYTES as u64);
    if !large {
        return tfdata_core::batch::decode_batch(batch);
    }
    tokio::task::spawn_blocking(move || tfdata_core::batch::decode_batch(batch))
        .await
        .map_err(|e| Error::Internal(format!("decoding a batch failed: {e}")))?
}

pub(crate) async fn start(
    dispatcher: DispatcherClient,
    params: IterationParams,
    handle: tokio::runtime::Handle,
) -> Result<Iteration> {
    let cancel = CancellationToken::new();
    let timeout = Some(params.dispatcher_timeout);
    // TensorFlow's iterator-initialisation checks.
    if params.target_workers == TargetWorkers::Local && tfdata_rpc::local_workers::is_empty() {
        return Err(Error::FailedPrecondition(
            "Local reads require local tf.data workers, but no local worker is found. \
             Start a WorkerServer in this process or use target_workers=AUTO or ANY."
                .into(),
        ));
    }
    if params.trainer_id.is_some() {
        if params.cardinality >= 0 {
            return Err(Error::FailedPrecondition(format!(
                "cross-trainer caching requires an infinite dataset, but the registered cardinality is {}",
                params.cardinality
            )));
        }
        if params.repetition > 1 {
            return Err(Error::FailedPrecondition(
                "cross-trainer caching does not support repeated iterations (repetition > 1)"
                    .into(),
            ));
        }
    }
    let job_request = wire::GetOrCreateJobRequest {
        dataset_id: params.dataset_id.clone(),
        processing_mode_def: Some(params.mode.to_proto()),
        job_name: params.job_name.clone(),
        num_consumers: params.num_consumers,
        use_cross_trainer_cache: params.trainer_id.is_some(),
        target_workers: params.target_workers.to_proto() as i32,
    };
    let job_id = retry(&dispatcher.target(), timeout, &cancel, || {
        dispatcher.get_or_create_job(job_request.clone())
    })
    .await?
    .job_id;
    let iteration_request = wire::GetOrCreateIterationRequest {
        job_id,
        repetition: params.repetition,
    };
    let client_id = retry(&dispatcher.target(), timeout, &cancel, || {
        dispatcher.get_or_create_iteration(iteration_request)
    })
    .await?
    .iteration_client_id;
    tracing::debug!(
        job_id,
        client_id,
        repetition = params.repetition,
        "reading iteration"
    );

    let capacity = params.max_outstanding_requests.max(1);
    let (tx, rx) = mpsc::channel(capacity);
    let fetch = Arc::new(FetchContext {
        permits: Arc::new(Semaphore::new(capacity)),
        tx,
        cancel: cancel.clone(),
        workers: Mutex::new(HashMap::new()),
        streams: Mutex::new(HashMap::new()),
        trainer_id: params.trainer_id.clone().unwrap_or_default(),
        compression: params.compression,
        stream_window: params.stream_window,
    });
    match params.consumer_index {
        Some(consumer) => {
            handle.spawn(crate::rounds::drive(
                dispatcher, params, client_id, consumer, fetch,
            ));
        }
        None => {
            handle.spawn(drive(dispatcher, params, client_id, fetch));
        }
    }
    Ok(Iteration {
        rx,
        current: None,
        failed: false,
        _stop_driver: cancel.drop_guard(),
    })
}

pub(crate) struct FetchContext {
    pub permits: Arc<Semaphore>,
    pub tx: mpsc::Sender<Item>,
    pub cancel: CancellationToken,
    /// One channel (connection) per worker address.
    workers: Mutex<HashMap<String, Channel>>,
    /// Element-stream clients by worker address; `None` once the worker
    /// answered UNIMPLEMENTED (it is read with `GetElement`).
    streams: Mutex<HashMap<String, Option<Channel>>>,
    trainer_id: String,
    compression: StreamCompression,
    stream_window: (u64, u64),
}

/// The address to read a task from: TensorFlow clients look the worker up by
/// transfer protocol; "grpc" is the WorkerService on the worker's address.
pub(crate) fn task_address(task: &wire::TaskInfo) -> String {
    task.transfer_servers
        .iter()
        .find(|s| s.protocol == "grpc")
        .map_or(task.worker_address.clone(), |s| s.address.clone())
}

/// Whether a non-coordinated reader reads `task` under `target`.
fn targeted(target: TargetWorkers, task: &wire::TaskInfo) -> bool {
    let local = tfdata_rpc::local_workers::contains(&task.worker_address);
    match target {
        TargetWorkers::Any => true,
        TargetWorkers::Local => local,
        TargetWorkers::Auto => {
            local
                || !task
                    .worker_tags
                    .iter()
                    .any(|t| t.eq_ignore_ascii_case("COLOCATED"))
        }
    }
}

pub(crate) async fn release(dispatcher: &DispatcherClient, client_id: i64) {
    let release = dispatcher.release_iteration_client(wire::ReleaseIterationClientRequest {
        iteration_client_id: client_id,
    });
    match tokio::time::timeout(RELEASE_TIMEOUT, release).await {
        Ok(Ok(_)) => tracing::debug!(client_id, "iteration client released"),
        Ok(Err(e)) => tracing::warn!(client_id, error = %e, "failed to release iteration client"),
        Err(_) => tracing::warn!(client_id, "timed out releasing iteration client"),
    }
}

impl FetchContext {
    fn channel(&self, address: &str) -> Result<Channel> {
        let mut workers = lock(&self.workers);
        if let Some(c) = workers.get(address) {
            return Ok(c.clone());
        }
        let c = tfdata_rpc::channel::channel(address)?;
        workers.insert(address.to_string(), c.clone());
        Ok(c)
    }

    pub(crate) fn worker(&self, address: &str) -> Result<WorkerServiceClient<Channel>> {
        Ok(tfdata_rpc::channel::worker_client(self.channel(address)?))
    }

    /// The element-stream client of `address`, unless it is known not to
    /// offer the stream. Shares the worker's channel (one connection).
    fn stream_client(&self, address: &str) -> Result<Option<Channel>> {
        if let Some(c) = lock(&self.streams).get(address) {
            return Ok(c.clone());
        }
        let c = self.channel(address)?;
        lock(&self.streams).insert(address.to_string(), Some(c.clone()));
        Ok(Some(c))
    }

    fn no_stream(&self, address: &str) {
        lock(&self.streams).insert(address.to_string(), None);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

async fn drive(
    dispatcher: DispatcherClient,
    params: IterationParams,
    client_id: i64,
    fetch: Arc<FetchContext>,
) {
    let cancel = fetch.cancel.clone();
    let refresh = params.task_refresh_interval;
    let mut fetchers: JoinSet<FetchEnd> = JoinSet::new();
    let mut known_tasks = HashSet::new();
    let mut running: HashMap<i64, tokio::task::AbortHandle> = HashMap::new();
    let mut finished = false;
    // Skipping a task for targeting means the dispatcher's end of the
    // iteration is not ours: we end when our own tasks end.
    let mut skipped_any = false;
    let mut next_heartbeat = Instant::now();
    let mut end_poll = END_POLL_START;
    loop {
        if finished && fetchers.is_empty() {
            break;
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep_until(next_heartbeat) => {
                let request = wire::ClientHeartbeatRequest {
                    iteration_client_id: client_id,
                    ..Default::default()
                };
                let response = tokio::time::timeout(HEARTBEAT_TIMEOUT, dispatcher.client_heartbeat(request))
                    .await
                    .unwrap_or_else(|_| Err(Error::Unavailable("client heartbeat timed out".into())));
                match response {
                    Ok(response) => {
                        // Tasks the dispatcher dropped (a lost worker's) are
                        // no longer read.
                        let listed: HashSet<i64> = response.task_info.iter().map(|t| t.task_id).collect();
                        running.retain(|task_id, handle: &mut tokio::task::AbortHandle| {
                            let keep = listed.contains(task_id);
                            if !keep {
                                handle.abort();
                            }
                            keep
                        });
                        for task in response.task_info {
                            if known_tasks.insert(task.task_id) {
                                if targeted(params.target_workers, &task) {
                                    let id = task.task_id;
                                    let handle = fetchers.spawn(fetch_task(Arc::clone(&fetch), task));
                                    running.insert(id, handle);
                                } else {
                                    skipped_any = true;
                                }
                            }
                        }
                        finished = response.iteration_finished
                            || (skipped_any && fetchers.is_empty() && !known_tasks.is_empty());
                    }
                    Err(e) if e.is_retryable() => {
                        tracing::debug!(client_id, error = %e, "client heartbeat failed; will retry");
                    }
                    Err(e) => {
                        let _ = fetch.tx.send((Err(e), None)).await;
                        break;
                    }
                }
                // Once every known task is drained, poll the dispatcher quickly
                // for the iteration's end instead of waiting a full period.
                let drained = !known_tasks.is_empty() && fetchers.is_empty();
                next_heartbeat = if !finished && drained {
                    end_poll = (end_poll * 2).min(refresh);
                    Instant::now() + end_poll
                } else {
                    Instant::now() + refresh
                };
            }
            Some(joined) = fetchers.join_next_with_id(), if !fetchers.is_empty() => {
                match joined {
                    Ok((id, FetchEnd::Failed)) => {
                        running.retain(|_, h| h.id() != id);
                        break;
                    }
                    Ok((id, _)) => running.retain(|_, h| h.id() != id),
                    Err(e) => running.retain(|_, h| h.id() != e.id()),
                }
                if fetchers.is_empty() && skipped_any {
                    finished = true;
                }
                if fetchers.is_empty() && !finished {
                    next_heartbeat = Instant::now();
                }
            }
        }
    }
    fetchers.abort_all();
    drop(fetchers);
    drop(fetch);
    release(&dispatcher, client_id).await;
}

enum FetchEnd {
    EndOfSequence,
    Stopped,
    Failed,
}

/// Reads one task until its end of sequence: streamed from tfdata workers,
/// with `GetElement` from others (and for cross-trainer caches).
async fn fetch_task(ctx: Arc<FetchContext>, task: wire::TaskInfo) -> FetchEnd {
    let address = task_address(&task);
    if ctx.trainer_id.is_empty() {
        match ctx.stream_client(&address) {
            Ok(Some(client)) => match stream_task(&ctx, &task, &address, client).await {
                Streamed::Ended(end) => return end,
                Streamed::NotOffered => {
                    tracing::debug!(worker = %address, "no element stream; reading with GetElement");
                    ctx.no_stream(&address);
                }
            },
            Ok(None) => {}
            Err(e) => {
                let _ = ctx.tx.send((Err(e), None)).await;
                return FetchEnd::Failed;
            }
        }
    }
    get_elements(ctx, task, address).await
}

enum Streamed {
    Ended(FetchEnd),
    /// The worker does not serve the element stream.
    NotOffered,
}

/// The credit a stream's reader holds: elements delivered to the reader and
/// not yet read, and what was read since the worker was last told.
#[derive(Default)]
struct CreditState {
    held_elements: u64,
    held_bytes: u64,
    returned_elements: u64,
    returned_bytes: u64,
}

#[derive(Default)]
struct CreditPool {
    state: Mutex<CreditState>,
    returned: Notify,
}

/// Gives a batch's credit back when the reader has taken all its elements.
pub(crate) struct CreditReturn {
    pool: Arc<CreditPool>,
    elements: u64,
    bytes: u64,
}

impl Drop for CreditReturn {
    fn drop(&mut self) {
        let mut st = lock(&self.pool.state);
        st.held_elements = st.held_elements.saturating_sub(self.elements);
        st.held_bytes = st.held_bytes.saturating_sub(self.bytes);
        st.returned_elements += self.elements;
        st.returned_bytes += self.bytes;
        drop(st);
        self.pool.returned.notify_one();
    }
}

/// Reads `task` over the element stream, reconnecting after transient
/// failures (elements in flight when a stream breaks are lost, as a
/// `GetElement` response in flight is).
async fn stream_task(
    ctx: &FetchContext,
    task: &wire::TaskInfo,
    address: &str,
    channel: Channel,
) -> Streamed {
    let pool = Arc::new(CreditPool::default());
    let (window_elements, window_bytes) = ctx.stream_window;
    let mut attempt = 0u32;
    let mut opened_once = false;
    loop {
        // A new stream may send the window minus what the reader still holds.
        let (credit_elements, credit_bytes) = {
            let mut st = lock(&pool.state);
            st.returned_elements = 0;
            st.returned_bytes = 0;
            (
                window_elements.saturating_sub(st.held_elements).max(1),
                window_bytes.saturating_sub(st.held_bytes).max(1),
            )
        };
        let (requests, rx) = mpsc::channel(4);
        let open = StreamRequest {
            task_id: task.task_id,
            compression: ctx.compression as i32,
            credit_elements,
            credit_bytes,
        };
        if requests.try_send(open).is_err() {
            return Streamed::Ended(FetchEnd::Stopped);
        }
        let call = tokio::select! {
            r = tfdata_rpc::channel::open_element_stream(
                channel.clone(),
                tokio_stream::wrappers::ReceiverStream::new(rx),
            ) => r,
            () = ctx.cancel.cancelled() => return Streamed::Ended(FetchEnd::Stopped),
        };
        let mut stream = match call {
            Ok(reader) => reader,
            Err(status) if status.code() == tonic::Code::Unimplemented && !opened_once => {
                return Streamed::NotOffered;
            }
            Err(status) => match retry_or_fail(ctx, task, address, status, &mut attempt).await {
                Some(end) => return Streamed::Ended(end),
                None => continue,
            },
        };
        opened_once = true;
        loop {
            let message = tokio::select! {
                m = stream.message() => m,
                () = pool.returned.notified() => {
                    let (elements, bytes) = {
                        let mut st = lock(&pool.state);
                        (std::mem::take(&mut st.returned_elements), std::mem::take(&mut st.returned_bytes))
                    };
                    if elements > 0 || bytes > 0 {
                        let credit = StreamRequest {
                            credit_elements: elements,
                            credit_bytes: bytes,
                            ..Default::default()
                        };
                        // The stream is gone if this fails; reading says why.
                        let _ = requests.send(credit).await;
                    }
                    continue;
                }
                () = ctx.cancel.cancelled() => return Streamed::Ended(FetchEnd::Stopped),
            };
            let batch = match message.and_then(|m| {
                m.map(tfdata_rpc::raw_grpc::decode::<ElementBatch>)
                    .transpose()
            }) {
                Ok(Some(batch)) => batch,
                // A worker ends a stream only after the end of sequence; an
                // early end is a broken stream.
                Ok(None) => {
                    let status = tonic::Status::unavailable(format!(
                        "element stream of task {} ended early",
                        task.task_id
                    ));
                    match retry_or_fail(ctx, task, address, status, &mut attempt).await {
                        Some(end) => return Streamed::Ended(end),
                        None => break,
                    }
                }
                Err(status) => {
                    match retry_or_fail(ctx, task, address, status, &mut attempt).await {
                        Some(end) => return Streamed::Ended(end),
                        None => break,
                    }
                }
            };
            attempt = 0;
            let end = batch.end_of_sequence;
            let payload_bytes = batch.payload_bytes;
            let elements = match decode_batch_off_runtime(batch).await {
                Ok(elements) => elements,
                Err(e) => {
                    let err = worker_error(address, task.task_id, &e);
                    let _ = ctx.tx.send((Err(err), None)).await;
                    return Streamed::Ended(FetchEnd::Failed);
                }
            };
            if !elements.is_empty() {
                let count = elements.len() as u64;
                {
                    let mut st = lock(&pool.state);
                    st.held_elements += count;
                    st.held_bytes += payload_bytes;
                }
                let delivery = Delivery {
                    elements: elements.into_iter(),
                    _credit: Some(CreditReturn {
                        pool: Arc::clone(&pool),
                        elements: count,
                        bytes: payload_bytes,
                    }),
                };
                if ctx.tx.send((Ok(delivery), None)).await.is_err() {
                    return Streamed::Ended(FetchEnd::Stopped);
                }
            }
            if end {
                return Streamed::Ended(FetchEnd::EndOfSequence);
            }
        }
    }
}

/// A worker's error as the reader reports it (TensorFlow's wording), with
/// the worker's code.
pub(crate) fn worker_error(address: &str, task_id: i64, err: &Error) -> Error {
    Error::Remote {
        code: err.code(),
        message: format!("Failed to get element from worker {address} (task {task_id}): {err}"),
    }
}

/// After a failed call: `None` to retry (transient, after a backoff), or how
/// the fetcher ends (the error reported to the reader).
async fn retry_or_fail(
    ctx: &FetchContext,
    task: &wire::TaskInfo,
    address: &str,
    status: tonic::Status,
    attempt: &mut u32,
) -> Option<FetchEnd> {
    let err = Error::from(status);
    if err.is_retryable() {
        // The worker may be starting, restarting, or not have the task yet.
        tokio::select! {
            () = tokio::time::sleep(backoff(*attempt)) => {}
            () = ctx.cancel.cancelled() => return Some(FetchEnd::Stopped),
        }
        *attempt = attempt.saturating_add(1);
        return None;
    }
    let err = worker_error(address, task.task_id, &err);
    let _ = ctx.tx.send((Err(err), None)).await;
    Some(FetchEnd::Failed)
}

/// Reads one task with `GetElement`, one element per call.
async fn get_elements(ctx: Arc<FetchContext>, task: wire::TaskInfo, address: String) -> FetchEnd {
    let mut client = match ctx.worker(&address) {
        Ok(c) => c,
        Err(e) => {
            let _ = ctx.tx.send((Err(e), None)).await;
            return FetchEnd::Failed;
        }
    };
    let mut attempt = 0u32;
    loop {
        let permit = tokio::select! {
            p = Arc::clone(&ctx.permits).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return FetchEnd::Stopped,
            },
            () = ctx.cancel.cancelled() => return FetchEnd::Stopped,
        };
        let request = wire::GetElementRequest {
            task_id: task.task_id,
            allow_skip: false,
            trainer_id: ctx.trainer_id.clone(),
            ..Default::default()
        };
        let response = tokio::select! {
            r = client.get_element(request) => r,
            () = ctx.cancel.cancelled() => return FetchEnd::Stopped,
        };
        let response = match response {
            Ok(r) => r.into_inner(),
            Err(status) => {
                let err = Error::from(status);
                if err.is_retryable() {
                    // The worker may be starting, restarting, or not have the task yet.
                    drop(permit);
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt = attempt.saturating_add(1);
                    continue;
                }
                let err = worker_error(&address, task.task_id, &err);
                let _ = ctx.tx.send((Err(err), None)).await;
                return FetchEnd::Failed;
            }
        };
        attempt = 0;
        if response.end_of_sequence {
            return FetchEnd::EndOfSequence;
        }
        if response.skip_task {
            drop(permit);
            tokio::time::sleep(backoff(0)).await;
            continue;
        }
        let decoded = decode_off_runtime(&address, task.task_id, response.element)
            .await
            .map(Delivery::from);
        let failed = decoded.is_err();
        if ctx.tx.send((decoded, Some(permit))).await.is_err() {
            return FetchEnd::Stopped;
        }
        if failed {
            return FetchEnd::Failed;
        }
    }
}
