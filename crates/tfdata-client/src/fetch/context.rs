//! What every fetcher shares: the reader's channel and its budgets, one
//! connection per worker, what a fetcher delivers, and how a worker's
//! errors are worded and retried.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use tfdata_core::batch::BatchSplits;
use tfdata_core::positions::PositionSet;
use tfdata_core::ranges::IndexRanges;
use tfdata_core::{Error, Result, SplitName, TaskId};
use tfdata_proto::data::{self as wire, worker_service_client::WorkerServiceClient};
use tfdata_proto::tfdata::stream::Compression as StreamCompression;
use tfdata_rpc::CancellationToken;
use tfdata_rpc::retry::backoff;
use tfdata_rpc::security::{ClientSecurity, RpcChannel};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};

use super::received::ReceivedElement;
use crate::metrics::ReaderStats;

/// Elements a reader lets each task's stream send ahead of it: two of the
/// worker's largest batches, so one is decoded and read while the next is
/// on its way.
pub(crate) const STREAM_WINDOW_ELEMENTS: u64 = 16_384;
/// Payload bytes a reader lets each task's stream send ahead of it.
pub(crate) const STREAM_WINDOW_BYTES: u64 = 16 << 20;

/// Most entries a reader keeps per task for its receipts: ranges of split
/// indices received whole, plus splits received in part (see [`Receipts`]).
/// A worker tells its readers which splits the dispatcher acknowledged as
/// delivered (`ElementBatch.released_splits`), and those are forgotten, so
/// receipts hold only what was delivered and not yet acknowledged: the last
/// few hundred milliseconds of a task's output, a handful of ranges however
/// fast it goes (leases are runs of consecutive splits). Past the bound the
/// lowest are forgotten; that costs exactness only if the task's worker is
/// lost while it still held such a split, i.e. after more than a million
/// gaps among its unacknowledged deliveries.
pub(crate) const MAX_RECEIPT_ENTRIES_PER_TASK: usize = 1 << 20;

/// Compressed payloads at least this large are decompressed on a blocking
/// thread: Snappy over megabytes would stall the (one-thread) client runtime,
/// and with it every other read's network I/O.
pub(crate) const DECODE_OFF_RUNTIME_BYTES: usize = 256 << 10;

/// How far each task's element stream may run ahead of the reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamWindow {
    pub elements: u64,
    pub bytes: u64,
}

impl Default for StreamWindow {
    fn default() -> Self {
        StreamWindow {
            elements: STREAM_WINDOW_ELEMENTS,
            bytes: STREAM_WINDOW_BYTES,
        }
    }
}

/// What a fetcher hands the reader: one element (`GetElement`) or a
/// stream batch, and what it holds of the fetchers' budgets until it is read.
pub(crate) struct Delivery {
    elements: std::vec::IntoIter<ReceivedElement>,
    /// Where the elements are in their worker's sequence (reader
    /// checkpoints, `crate::checkpoint`).
    pub origin: Origin,
    /// Elements taken so far.
    pub taken: i64,
    /// distributed_epoch stream batches: the splits each element holds
    /// whole (reader checkpoints count the consumed ones).
    pub splits: Option<tfdata_core::batch::BatchSplits>,
    /// Held for their `Drop`, given back once the last element is taken: a
    /// `GetElement` permit (`max_outstanding_requests`), or a stream
    /// batch's credit (granted to the worker again).
    _permit: Option<OwnedSemaphorePermit>,
    _credit: Option<CreditReturn>,
}

/// Which worker a delivery came from, and where its elements are in that
/// worker's task.
#[derive(Debug, Clone)]
pub(crate) enum Origin {
    /// A stream batch: its first element's index in the task.
    Numbered { worker: Arc<str>, first: i64 },
    /// `GetElement` answers carry no index, except a tfdata worker's in a
    /// coordinated read (`Numbered`).
    Unnumbered { worker: Arc<str> },
    /// A run of a deterministic read's merged elements: each one's lane
    /// and its index there, in order.
    Lanes(Vec<(u32, i64)>),
}

impl Delivery {
    /// One element read with `GetElement`, holding its permit.
    pub(crate) fn element(
        element: ReceivedElement,
        permit: OwnedSemaphorePermit,
        origin: Origin,
    ) -> Self {
        Delivery {
            elements: vec![element].into_iter(),
            origin,
            taken: 0,
            splits: None,
            _permit: Some(permit),
            _credit: None,
        }
    }

    /// A run of a deterministic read's merged elements, in order (their
    /// streams' credit went back when they left the reorder window).
    pub(crate) fn lane_run(elements: Vec<ReceivedElement>, positions: Vec<(u32, i64)>) -> Self {
        debug_assert_eq!(elements.len(), positions.len());
        Delivery {
            elements: elements.into_iter(),
            origin: Origin::Lanes(positions),
            taken: 0,
            splits: None,
            _permit: None,
            _credit: None,
        }
    }

    /// A stream batch's elements, holding its credit.
    pub(crate) fn batch(
        elements: Vec<ReceivedElement>,
        credit: CreditReturn,
        origin: Origin,
        splits: Option<tfdata_core::batch::BatchSplits>,
    ) -> Self {
        Delivery {
            elements: elements.into_iter(),
            origin,
            taken: 0,
            splits,
            _permit: None,
            _credit: Some(credit),
        }
    }

    /// The next element; `None` once all are taken.
    pub(crate) fn next(&mut self) -> Option<ReceivedElement> {
        let element = self.elements.next()?;
        self.taken += 1;
        Some(element)
    }

    pub(crate) fn is_read(&self) -> bool {
        self.elements.len() == 0
    }
}

/// The credit a stream's reader holds: elements delivered to the reader and
/// not yet read, and what was read since the worker was last told.
#[derive(Default)]
pub(crate) struct CreditState {
    pub held_elements: u64,
    pub held_bytes: u64,
    pub returned_elements: u64,
    pub returned_bytes: u64,
}

/// One stream's credit, shared by the fetcher and its undelivered batches.
#[derive(Default)]
pub(crate) struct CreditPool {
    pub state: Mutex<CreditState>,
    /// Woken when a batch's credit comes back.
    pub returned: Notify,
}

/// Gives a batch's credit back when the reader has taken all its elements.
pub(crate) struct CreditReturn {
    pub pool: Arc<CreditPool>,
    pub elements: u64,
    pub bytes: u64,
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

/// What the reader receives: a delivery, or the error that ends the iteration.
pub(crate) type Item = Result<Delivery>;

/// How a fetcher ended.
pub(crate) enum FetchEnd {
    EndOfSequence,
    Stopped,
    /// The error was sent to the reader.
    Failed,
}

/// A task and the address its elements are read from.
#[derive(Debug, Clone)]
pub(crate) struct TaskEndpoint {
    pub task_id: TaskId,
    pub address: String,
    /// The worker's address as the dispatcher lists it (what reader
    /// checkpoints key positions by).
    pub worker: Arc<str>,
}

impl TaskEndpoint {
    /// Where to read `task`: TensorFlow clients look the worker up by
    /// transfer protocol; "grpc" is the WorkerService on the worker's address.
    pub(crate) fn of(task: &wire::TaskInfo) -> Self {
        let address = task
            .transfer_servers
            .iter()
            .find(|s| s.protocol == "grpc")
            .map_or(task.worker_address.clone(), |s| s.address.clone());
        TaskEndpoint {
            task_id: TaskId(task.task_id),
            address,
            worker: Arc::from(task.worker_address.as_str()),
        }
    }

    /// A worker's error as the reader reports it (TensorFlow's wording),
    /// with the worker's code.
    pub(crate) fn error(&self, err: Error) -> Error {
        Error::Context {
            context: Some(format!(
                "Failed to get element from worker {} (task {})",
                self.address, self.task_id
            )),
            source: Arc::new(err),
        }
    }
}

/// What the fetchers of one iteration need to set up.
pub(crate) struct FetchParams {
    /// Requests in flight plus elements buffered for the reader (`GetElement`).
    pub max_outstanding_requests: usize,
    /// Empty unless the job uses a cross-trainer cache.
    pub trainer_id: String,
    /// How the dataset was registered to be compressed (streams only).
    pub compression: StreamCompression,
    pub stream_window: StreamWindow,
    /// How workers are reached.
    pub security: ClientSecurity,
    /// The iterator's figures, counted as elements arrive.
    pub stats: Arc<ReaderStats>,
    /// Whether this reader alone reads its tasks and their sequences are
    /// the same on every run (parallel_epochs, own job): streams then open
    /// at the next index the reader wants, so a reconnect or a restored
    /// checkpoint skips what it already has.
    pub positioned: bool,
    /// Per worker, the index to start its task at (a restored checkpoint).
    pub start: crate::checkpoint::Positions,
    /// Whether to record receipts for lost tasks ([`Receipts`]).
    pub reports_receipts: bool,
}

/// distributed_epoch: the splits this reader received whole from each task
/// (named by the worker on each stream batch) and the positions it received
/// of others, so that when a task leaves the iteration (its worker was
/// lost) the reader can tell the dispatcher, which then hands out again
/// only what nobody received. A batch is recorded once it was handed to the
/// reader's channel (never before: a fetcher stopped while it waits to hand
/// a batch over drops it), and a task's receipts are taken only after its
/// fetcher has stopped, so they are exactly the batches delivered, less the
/// splits the worker said the dispatcher no longer holds.
#[derive(Default)]
pub(crate) struct Receipts {
    tasks: HashMap<TaskId, TaskReceipts>,
}

/// What a reader received from one task and the dispatcher may still hold.
#[derive(Default)]
struct TaskReceipts {
    /// Splits received whole, per (provider, pass).
    whole: BTreeMap<(i64, i64), IndexRanges>,
    /// Positions received of splits spread over several elements.
    pieces: BTreeMap<SplitName, PositionSet>,
    /// The totals of splits in `pieces` whose last element arrived: once
    /// the positions received number it, the split was received whole.
    totals: BTreeMap<SplitName, u64>,
    /// Ranges in `whole` plus splits in `pieces` (the bound's measure).
    entries: usize,
}

impl TaskReceipts {
    fn insert_whole(&mut self, n: &SplitName) {
        let r = self.whole.entry((n.provider, n.repetition)).or_default();
        let before = r.range_count();
        r.insert(n.index);
        self.entries = self.entries + r.range_count() - before;
    }

    fn insert_piece(&mut self, n: &SplitName, position: &[i64]) {
        let set = self.pieces.entry(*n).or_insert_with(|| {
            self.entries += 1;
            PositionSet::default()
        });
        set.insert(position);
    }

    /// A split spread over several elements whose every piece arrived here.
    fn complete_if_whole(&mut self, n: &SplitName) {
        let Some(&total) = self.totals.get(n) else {
            return;
        };
        if self.pieces.get(n).is_some_and(|p| p.count() >= total) {
            self.pieces.remove(n);
            self.totals.remove(n);
            self.entries -= 1;
            self.insert_whole(n);
        }
    }

    /// Forgets the splits in `released` (the dispatcher holds them no more
    /// for this task). From the network: a malformed range is skipped.
    fn release(&mut self, released: &[wire::TfdataSplitRanges]) {
        for r in released {
            let key = (r.provider, r.repetition);
            for pair in r.bounds.chunks_exact(2) {
                let (start, end) = (pair[0], pair[1]);
                if start >= end {
                    continue;
                }
                if let Some(w) = self.whole.get_mut(&key) {
                    let before = w.range_count();
                    w.remove_range(start, end);
                    self.entries = self.entries + w.range_count() - before;
                    if w.is_empty() {
                        self.whole.remove(&key);
                    }
                }
                let name = |index| SplitName {
                    provider: r.provider,
                    repetition: r.repetition,
                    index,
                };
                let gone: Vec<SplitName> = self
                    .pieces
                    .range(name(start)..name(end))
                    .map(|(n, _)| *n)
                    .collect();
                for n in gone {
                    self.pieces.remove(&n);
                    self.totals.remove(&n);
                    self.entries -= 1;
                }
            }
        }
    }

    /// Keeps within [`MAX_RECEIPT_ENTRIES_PER_TASK`], forgetting the lowest.
    fn bound(&mut self) {
        while self.entries > MAX_RECEIPT_ENTRIES_PER_TASK {
            if let Some(mut lowest) = self.whole.first_entry() {
                lowest.get_mut().pop_first();
                if lowest.get().is_empty() {
                    lowest.remove();
                }
            } else if let Some((n, _)) = self.pieces.pop_first() {
                self.totals.remove(&n);
            } else {
                break;
            }
            self.entries -= 1;
        }
    }
}

impl Receipts {
    /// Records what the elements of a batch from `task` just delivered hold,
    /// after forgetting the splits the batch says were released.
    pub(crate) fn record(
        &mut self,
        task: TaskId,
        splits: &BatchSplits,
        released: &[wire::TfdataSplitRanges],
    ) {
        if !released.is_empty()
            && let Some(r) = self.tasks.get_mut(&task)
        {
            r.release(released);
        }
        if splits.names.is_empty() && splits.pieces.is_empty() {
            return;
        }
        let r = self.tasks.entry(task).or_default();
        for n in &splits.names {
            r.insert_whole(n);
        }
        for (n, position) in &splits.pieces {
            r.insert_piece(n, position);
        }
        for (n, total) in &splits.ends {
            if r.pieces.contains_key(n) {
                r.totals.insert(*n, *total);
            }
        }
        // Splits now received in full (their last piece may come before
        // others of them).
        for (n, _) in &splits.ends {
            r.complete_if_whole(n);
        }
        r.bound();
    }

    /// What `task` delivered (its fetcher has stopped), as its report.
    pub(crate) fn take(&mut self, task: TaskId) -> wire::TfdataTaskReceipts {
        let r = self.tasks.remove(&task).unwrap_or_default();
        wire::TfdataTaskReceipts {
            task_id: task.0,
            splits: Vec::new(),
            ranges: r
                .whole
                .iter()
                .map(
                    |(&(provider, repetition), ranges)| wire::TfdataSplitRanges {
                        provider,
                        repetition,
                        bounds: ranges.bounds(),
                    },
                )
                .collect(),
            pieces: r
                .pieces
                .iter()
                .map(|(n, set)| wire::TfdataSplitPieces {
                    split: Some(wire::TfdataSplitName {
                        provider: n.provider,
                        repetition: n.repetition,
                        index: n.index,
                    }),
                    positions: set.ranges(),
                })
                .collect(),
        }
    }

    #[cfg(test)]
    fn entries(&self, task: TaskId) -> usize {
        self.tasks.get(&task).map_or(0, |r| r.entries)
    }
}

/// A worker's connection, shared by its tasks' fetchers.
struct WorkerChannel {
    channel: RpcChannel,
    /// `false` once the worker answered UNIMPLEMENTED to the element stream
    /// (it is read with `GetElement` from then on).
    offers_stream: bool,
}

/// The fetchers' shared state: the reader's channel, the permits bounding
/// `GetElement` reads, the stop signal, one connection per worker.
pub(crate) struct FetchContext {
    permits: Arc<Semaphore>,
    tx: mpsc::Sender<Item>,
    pub cancel: CancellationToken,
    workers: Mutex<HashMap<String, WorkerChannel>>,
    pub trainer_id: String,
    pub compression: StreamCompression,
    pub stream_window: StreamWindow,
    security: ClientSecurity,
    pub stats: Arc<ReaderStats>,
    pub positioned: bool,
    /// Per worker, the next index wanted: the checkpoint's, then past what
    /// the fetchers received. A task a restarted worker gets anew in this
    /// read is the same sequence, so it starts here too.
    received: Mutex<crate::checkpoint::Positions>,
    /// `Some` when this reader reports receipts (distributed_epoch).
    receipts: Option<Mutex<Receipts>>,
    /// Tasks whose end of sequence a stream fetcher has read: it holds all
    /// their elements and is handing them over. Not stopped when their task
    /// leaves the iteration (its worker was lost after the task ended, so
    /// the elements exist nowhere else).
    read_end: Mutex<std::collections::HashSet<TaskId>>,
    /// Workers whose port refused a fetcher's reconnection, to tell the
    /// dispatcher (which probes them and declares the dead ones lost), with
    /// when each was last told; `unreachable` wakes the driver.
    refused: Mutex<RefusedWorkers>,
    pub unreachable: Notify,
}

/// How often a reader tells the dispatcher the same worker refused it.
pub(crate) const UNREACHABLE_REPORT_INTERVAL: std::time::Duration =
    std::time::Duration::from_secs(1);

/// Workers whose port refused this reader (see [`FetchContext::refused`]).
#[derive(Default)]
struct RefusedWorkers {
    /// Not yet told to the dispatcher.
    pending: Vec<Arc<str>>,
    /// When each was last queued.
    told: HashMap<Arc<str>, std::time::Instant>,
}

impl FetchContext {
    /// The fetchers' state, and the receiver the reader reads from.
    pub(crate) fn new(
        params: FetchParams,
        cancel: CancellationToken,
    ) -> (Arc<Self>, mpsc::Receiver<Item>) {
        let capacity = params.max_outstanding_requests.max(1);
        let (tx, rx) = mpsc::channel(capacity);
        let ctx = FetchContext {
            permits: Arc::new(Semaphore::new(capacity)),
            tx,
            cancel,
            workers: Mutex::new(HashMap::new()),
            trainer_id: params.trainer_id,
            compression: params.compression,
            stream_window: params.stream_window,
            security: params.security,
            stats: params.stats,
            positioned: params.positioned,
            received: Mutex::new(params.start),
            receipts: params
                .reports_receipts
                .then(|| Mutex::new(Receipts::default())),
            read_end: Mutex::new(std::collections::HashSet::new()),
            refused: Mutex::new(RefusedWorkers::default()),
            unreachable: Notify::new(),
        };
        (Arc::new(ctx), rx)
    }

    /// A permit for one `GetElement` request and its element; `None` once
    /// the read stops.
    pub(crate) async fn permit(&self) -> Option<OwnedSemaphorePermit> {
        tokio::select! {
            p = Arc::clone(&self.permits).acquire_owned() => p.ok(),
            () = self.cancel.cancelled() => None,
        }
    }

    /// Counts elements received from a worker (`stream`: over the element
    /// stream, else `GetElement`).
    pub(crate) fn received(&self, stream: bool, elements: u64, bytes: u64) {
        crate::metrics::received(stream).add(&self.stats, elements, bytes);
    }

    /// Hands `item` to the reader; `false` if the reader is gone.
    pub(crate) async fn send(&self, item: Item) -> bool {
        self.tx.send(item).await.is_ok()
    }

    /// Room for one item in the reader's channel (cancel-safe); `None` if
    /// the reader is gone.
    pub(crate) async fn reserve(&self) -> Option<mpsc::Permit<'_, Item>> {
        self.tx.reserve().await.ok()
    }

    /// A stream fetcher has read `task`'s end (see [`Self::has_read_end`]).
    pub(crate) fn read_end(&self, task: TaskId) {
        lock(&self.read_end).insert(task);
    }

    /// Whether a fetcher has read `task`'s end: it is handing over the
    /// task's last elements, which exist nowhere else, so it must not be
    /// stopped when the task leaves the iteration.
    pub(crate) fn has_read_end(&self, task: TaskId) -> bool {
        lock(&self.read_end).contains(&task)
    }

    /// Whether this reader records receipts (distributed_epoch).
    pub(crate) fn reports_receipts(&self) -> bool {
        self.receipts.is_some()
    }

    /// Records what a batch from `task` just delivered holds of splits,
    /// and forgets the splits it says the dispatcher released.
    pub(crate) fn record_receipts(
        &self,
        task: TaskId,
        splits: &BatchSplits,
        released: &[wire::TfdataSplitRanges],
    ) {
        if let Some(r) = &self.receipts {
            lock(r).record(task, splits, released);
        }
    }

    /// What `task` delivered, for the report once it left the iteration and
    /// its fetcher stopped; `None` if this reader reports no receipts.
    pub(crate) fn take_receipts(&self, task: TaskId) -> Option<wire::TfdataTaskReceipts> {
        self.receipts.as_ref().map(|r| lock(r).take(task))
    }

    /// `worker`'s port refused a reconnection: likely dead. Queued for the
    /// dispatcher at most once per [`UNREACHABLE_REPORT_INTERVAL`].
    pub(crate) fn refused(&self, worker: &Arc<str>) {
        let now = std::time::Instant::now();
        let mut r = lock(&self.refused);
        if r.told
            .get(worker)
            .is_some_and(|at| now.duration_since(*at) < UNREACHABLE_REPORT_INTERVAL)
        {
            return;
        }
        r.told.insert(Arc::clone(worker), now);
        r.pending.push(Arc::clone(worker));
        drop(r);
        tracing::debug!(%worker, "a worker's port refused the reader: telling the dispatcher");
        self.unreachable.notify_one();
    }

    /// The workers to tell the dispatcher about (each once).
    pub(crate) fn take_refused(&self) -> Vec<String> {
        let mut r = lock(&self.refused);
        r.pending.drain(..).map(|w| w.to_string()).collect()
    }

    /// Workers [`Self::take_refused`] gave that the dispatcher did not hear
    /// of (the heartbeat failed): told with the next one.
    pub(crate) fn requeue_refused(&self, workers: Vec<String>) {
        let mut r = lock(&self.refused);
        r.pending.extend(workers.into_iter().map(Arc::from));
    }

    /// The index of the next element wanted from `worker`'s task.
    pub(crate) fn next_index(&self, worker: &str) -> i64 {
        lock(&self.received).start_of(worker)
    }

    /// `count` elements of `worker`'s task from index `first` arrived.
    pub(crate) fn arrived(&self, worker: &Arc<str>, first: i64, count: i64) {
        if self.positioned {
            lock(&self.received).advance(worker, first, count);
        }
    }

    /// Reports `err` to the reader (which ends the iteration).
    pub(crate) async fn fail(&self, err: Error) -> FetchEnd {
        let _ = self.tx.send(Err(err)).await;
        FetchEnd::Failed
    }

    fn channel(&self, address: &str) -> Result<RpcChannel> {
        let mut workers = lock(&self.workers);
        if let Some(w) = workers.get(address) {
            return Ok(w.channel.clone());
        }
        let channel = tfdata_rpc::channel::channel(address, &self.security)?;
        workers.insert(
            address.to_string(),
            WorkerChannel {
                channel: channel.clone(),
                offers_stream: true,
            },
        );
        Ok(channel)
    }

    pub(crate) fn worker(&self, address: &str) -> Result<WorkerServiceClient<RpcChannel>> {
        Ok(tfdata_rpc::channel::worker_client(self.channel(address)?))
    }

    /// The channel to open `address`'s element stream on, unless it is
    /// known not to offer the stream. Shares the worker's connection.
    pub(crate) fn stream_channel(&self, address: &str) -> Result<Option<RpcChannel>> {
        let channel = self.channel(address)?;
        let offers = lock(&self.workers)
            .get(address)
            .is_none_or(|w| w.offers_stream);
        Ok(offers.then_some(channel))
    }

    /// `address` answered UNIMPLEMENTED to the element stream.
    pub(crate) fn no_stream(&self, address: &str) {
        if let Some(w) = lock(&self.workers).get_mut(address) {
            w.offers_stream = false;
        }
    }
}

/// After a failed call: `None` to retry (transient, after a backoff), or how
/// the fetcher ends (the error reported to the reader).
pub(crate) async fn retry_or_fail(
    ctx: &FetchContext,
    task: &TaskEndpoint,
    status: tonic::Status,
    attempt: &mut u32,
) -> Option<FetchEnd> {
    // A port that refuses: the worker process likely died. The dispatcher
    // hears of it at once instead of after worker_timeout.
    if tfdata_rpc::peer::is_refused(&status) {
        ctx.refused(&task.worker);
    }
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
    Some(ctx.fail(task.error(err)).await)
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(index: i64) -> SplitName {
        SplitName {
            provider: 0,
            repetition: 0,
            index,
        }
    }

    fn whole(indices: impl IntoIterator<Item = i64>) -> BatchSplits {
        BatchSplits {
            names: indices.into_iter().map(name).collect(),
            ..Default::default()
        }
    }

    fn released(start: i64, end: i64) -> Vec<wire::TfdataSplitRanges> {
        vec![wire::TfdataSplitRanges {
            provider: 0,
            repetition: 0,
            bounds: vec![start, end],
        }]
    }

    const TASK: TaskId = TaskId(7);

    /// A task's receipts hold what it delivered and the worker has not yet
    /// said was acknowledged: at a million splits, in leases of 1,024 with
    /// another worker's leases between them and a shuffle reordering each,
    /// they stay a few ranges, and the report names exactly what is left.
    #[test]
    fn a_million_splits_leave_only_the_unacknowledged_in_a_few_ranges() {
        let mut r = Receipts::default();
        let lease = 1024;
        let mut most = 0;
        for l in 0..1000i64 {
            // This task's leases are every other one; within a lease the
            // splits arrive out of order (a shuffle buffer of 16).
            let start = 2 * l * lease;
            let mut order: Vec<i64> = (start..start + lease).collect();
            for chunk in order.chunks_mut(16) {
                chunk.reverse();
            }
            // The worker's acknowledgements trail by two leases.
            let acked =
                (l >= 2).then(|| released(2 * (l - 2) * lease, 2 * (l - 2) * lease + lease));
            r.record(
                TASK,
                &whole(order.iter().copied()),
                &acked.unwrap_or_default(),
            );
            most = most.max(r.entries(TASK));
        }
        assert!(
            most <= 3,
            "at most three leases' ranges are held, held {most}"
        );
        let report = r.take(TASK);
        let bounds: Vec<i64> = report
            .ranges
            .iter()
            .flat_map(|r| r.bounds.clone())
            .collect();
        assert_eq!(
            bounds,
            vec![
                2 * 998 * lease,
                2 * 998 * lease + lease,
                2 * 999 * lease,
                2 * 999 * lease + lease
            ]
        );
        assert!(report.splits.is_empty() && report.pieces.is_empty());
    }

    /// Positions of a split spread over elements are kept until the split
    /// is received whole (then it is named as a whole split) or released.
    #[test]
    fn pieces_become_whole_when_complete_and_go_when_released() {
        let mut r = Receipts::default();
        let piece = |n: i64, p: i64| BatchSplits {
            pieces: vec![(name(n), vec![p])],
            ..Default::default()
        };
        r.record(TASK, &piece(3, 0), &[]);
        r.record(TASK, &piece(3, 1), &[]);
        let mut last = piece(3, 2);
        last.ends = vec![(name(3), 3)];
        r.record(TASK, &last, &[]);
        r.record(TASK, &piece(5, 0), &[]);
        r.record(TASK, &piece(9, 0), &[]);
        assert_eq!(r.entries(TASK), 3, "split 3 whole, 5 and 9 in part");
        // 5 is released; so is 3, whose range is cut away.
        r.record(TASK, &BatchSplits::default(), &released(3, 6));
        let report = r.take(TASK);
        assert!(report.ranges.is_empty(), "{:?}", report.ranges);
        let pieces: Vec<i64> = report
            .pieces
            .iter()
            .map(|p| p.split.as_ref().unwrap().index)
            .collect();
        assert_eq!(pieces, vec![9]);
        // Malformed releases from the network are skipped, not obeyed.
        r.record(TASK, &whole([1, 2]), &released(5, 3));
        assert_eq!(r.take(TASK).ranges[0].bounds, vec![1, 3]);
    }

    /// The bound: past [`MAX_RECEIPT_ENTRIES_PER_TASK`] gaps the lowest are
    /// forgotten (produced again if the worker is lost still holding them).
    #[test]
    fn receipts_past_the_bound_forget_the_lowest() {
        let mut r = Receipts::default();
        let n = MAX_RECEIPT_ENTRIES_PER_TASK as i64 + 10;
        // Every other split: each its own range.
        r.record(TASK, &whole((0..n).map(|i| 2 * i)), &[]);
        assert_eq!(r.entries(TASK), MAX_RECEIPT_ENTRIES_PER_TASK);
        let report = r.take(TASK);
        assert_eq!(report.ranges[0].bounds[0], 20, "the ten lowest forgotten");
        assert_eq!(report.ranges[0].bounds.last(), Some(&(2 * (n - 1) + 1)));
    }
}
