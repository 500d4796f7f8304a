//! One reader's pass over a job (spec §5.4): create the job and iteration,
//! heartbeat the dispatcher to learn of tasks and of the iteration's end, and
//! fetch elements from every task's worker.
//!
//! A driver task owns the heartbeat loop and spawns one fetcher per task
//! ([`crate::fetch`]); coordinated reads have a driver of their own
//! ([`crate::rounds`]). Both hand the reader [`Delivery`]s through one
//! channel, bounded (with the fetchers' permits and stream credit) so a slow
//! reader slows the workers instead of growing memory.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tfdata_core::{DatasetId, Error, IterationClientId, JobId, Result, TaskId};
use tfdata_proto::data as wire;
use tfdata_proto::tfdata::stream::Compression as StreamCompression;
use tfdata_rpc::CancellationToken;
use tfdata_rpc::retry::retry;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::DropGuard;
use tracing::Instrument;

use crate::checkpoint::Positions;
use crate::dispatcher::DispatcherClient;
use crate::fetch::{
    self, Delivery, FetchContext, FetchEnd, FetchParams, Item, Origin, ReceivedElement,
    StreamWindow,
};
use crate::metrics::{NextClock, ReaderStats, TargetTime};
use crate::options::{ProcessingMode, TargetWorkers};

/// First poll delay once all tasks are drained but the end is not yet known.
const END_POLL_START: Duration = Duration::from_millis(5);

pub(crate) struct IterationParams {
    pub dataset_id: DatasetId,
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
    pub stream_window: StreamWindow,
    /// How workers are reached.
    pub security: tfdata_rpc::security::ClientSecurity,
    /// Per worker, where to start its task (a restored reader checkpoint).
    pub start: Positions,
    /// A deterministic read: its setting, and where its lanes start.
    pub deterministic: Option<(
        crate::deterministic::Deterministic,
        crate::deterministic::LaneStart,
    )>,
    /// `ProcessingModeDef.tfdata_autocache` (issue 36).
    pub autocache: bool,
}

impl IterationParams {
    /// A consumer of a shared parallel_epochs job: its positions are the
    /// element indices it consumed per worker (others' interleave).
    fn per_element(&self) -> bool {
        self.mode == ProcessingMode::ParallelEpochs
            && self.job_name.is_some()
            && self.consumer_index.is_none()
    }

    /// A coordinated read's consumer: which, of how many.
    fn coordinated(&self) -> Option<crate::checkpoint::Coordinated> {
        Some(crate::checkpoint::Coordinated {
            consumer: self.consumer_index?,
            consumers: self.num_consumers?,
        })
    }
}

/// The reader's end of a running iteration.
pub(crate) struct Iteration {
    rx: mpsc::Receiver<Item>,
    /// The delivery being read, with what it holds of the fetchers' budgets.
    current: Option<Delivery>,
    failed: bool,
    /// Times `next()` (the reader's starvation, `crate::metrics`).
    clock: NextClock,
    /// Where the reader is in each worker's sequence (deliveries fully
    /// read; the current one is added when a checkpoint is taken).
    positions: Positions,
    /// Why this read cannot be checkpointed, if it cannot.
    unresumable: Option<String>,
    /// Whether any element was taken (a restore must come first).
    taken_any: bool,
    /// A consumer of a shared job: what its checkpoints name.
    shared: Option<SharedConsumer>,
    /// A consumer of a shared parallel_epochs job: positions are sets of
    /// element indices per worker.
    per_element: bool,
    /// A deterministic read: what it consumed of its lanes.
    deterministic: Option<crate::deterministic::Consumed>,
    _stop_driver: DropGuard,
    /// The driver, for [`Iteration::close`] to wait for its release.
    driver: Option<tokio::task::JoinHandle<()>>,
}

/// What a shared job's driver tells its reader.
struct SharedSignals {
    /// The most readers a heartbeat said the iteration had.
    consumers: AtomicI64,
    /// A shared parallel_epochs read saw a worker restart (its sequence
    /// started over): why its checkpoints would be wrong.
    restarted_worker: std::sync::Mutex<Option<String>>,
}

/// A consumer of a shared job: the iteration and client id the dispatcher
/// gave it, and the most readers its heartbeats said the iteration had.
struct SharedConsumer {
    iteration: i64,
    client: i64,
    signals: Arc<SharedSignals>,
    /// Told the dispatcher it checkpoints (once per read), so that a
    /// restoration of the iteration waits for it: a checkpoint taken before
    /// another consumer joined does not count that one.
    registered: std::sync::atomic::AtomicBool,
    dispatcher: DispatcherClient,
    dispatcher_timeout: Duration,
}

impl Iteration {
    /// Stops the read and waits (up to `within`) for the driver to release
    /// the reader at the dispatcher: a process about to exit would
    /// otherwise leave it to the dispatcher's client_timeout.
    pub(crate) async fn close(mut self, within: Duration) {
        let driver = self.driver.take();
        drop(self);
        if let Some(driver) = driver {
            let _ = tokio::time::timeout(within, driver).await;
        }
    }

    /// The next element of the current delivery; its credit or permit goes
    /// back as soon as its last element is taken.
    fn take_buffered(&mut self) -> Option<ReceivedElement> {
        let delivery = self.current.as_mut()?;
        let element = delivery.next();
        self.taken_any |= element.is_some();
        if element.is_some()
            && let (Some(d), Origin::Lanes(positions)) = (&mut self.deterministic, &delivery.origin)
            && let Some(&(lane, index)) = positions.get(delivery.taken as usize - 1)
        {
            d.consumed(lane, index);
        }
        if delivery.is_read()
            && let Some(done) = self.current.take()
        {
            record(&mut self.positions, &done, self.per_element);
        }
        element
    }

    /// The reader's position as checkpoint bytes (`crate::checkpoint`).
    pub fn checkpoint(&self, dataset: crate::checkpoint::DatasetIdentity<'_>) -> Result<Vec<u8>> {
        if let Some(reason) = &self.unresumable {
            return Err(Error::FailedPrecondition(reason.clone()));
        }
        if self.failed {
            return Err(Error::FailedPrecondition(
                "this read failed; checkpoint the reader before an error, or restore an \
                 earlier checkpoint"
                    .into(),
            ));
        }
        if let Some(d) = &self.deterministic {
            return Ok(d.encode(dataset));
        }
        if let Some(reason) = self.shared.as_ref().and_then(|s| {
            s.signals
                .restarted_worker
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        }) {
            return Err(Error::FailedPrecondition(reason));
        }
        let mut positions = self.positions.clone();
        if let Some(current) = &self.current {
            record(&mut positions, current, self.per_element);
        }
        let shared = self.shared.as_ref().map(|s| crate::checkpoint::SharedRead {
            iteration: s.iteration,
            client: s.client,
            consumers: s.signals.consumers.load(Ordering::SeqCst).max(1),
        });
        positions.encode(dataset, shared)
    }

    /// A shared job's consumer tells the dispatcher, before its first
    /// checkpoint is returned, that it takes checkpoints.
    pub async fn register_checkpoints(&self) -> Result<()> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        if shared.registered.load(Ordering::SeqCst) {
            return Ok(());
        }
        let request = wire::ClientHeartbeatRequest {
            iteration_client_id: shared.client,
            tfdata_checkpoint_taken: true,
            ..Default::default()
        };
        let dispatcher = &shared.dispatcher;
        let answer = retry(
            &dispatcher.target(),
            Some(shared.dispatcher_timeout),
            &CancellationToken::new(),
            || dispatcher.reader_heartbeat(request.clone()),
        )
        .await;
        match answer {
            Ok(response) => {
                shared
                    .signals
                    .consumers
                    .fetch_max(response.tfdata_iteration_clients, Ordering::SeqCst);
            }
            // The read is over at the dispatcher (its end came and the
            // driver released it): there is nothing left to wait for.
            Err(e) if e.code() == tonic::Code::NotFound => {}
            Err(e) => return Err(e),
        }
        shared.registered.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Whether an element was taken already.
    pub fn started(&self) -> bool {
        self.taken_any
    }

    /// The buffered element, counted as a `next()` answered at once.
    fn take_at_once(&mut self) -> Option<ReceivedElement> {
        let element = self.take_buffered()?;
        self.clock.served_at_once();
        Some(element)
    }

    /// A wait for `item` ended.
    fn take(&mut self, item: Option<Item>) -> Option<Result<ReceivedElement>> {
        let taken = self.take_item(item);
        self.clock.wait_ends(matches!(taken, Some(Ok(_))));
        taken
    }

    fn take_item(&mut self, item: Option<Item>) -> Option<Result<ReceivedElement>> {
        if self.failed {
            return None;
        }
        match item? {
            Ok(delivery) => {
                self.current = Some(delivery);
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

    pub fn next_blocking(&mut self) -> Option<Result<ReceivedElement>> {
        if let Some(e) = self.take_at_once() {
            return Some(Ok(e));
        }
        self.clock.wait_begins();
        let item = self.rx.blocking_recv();
        self.take(item)
    }

    /// The next element without waiting: `Pending` if none has arrived
    /// (the trainer counts as waiting from then until an element comes).
    pub fn try_next(&mut self) -> Poll<Option<Result<ReceivedElement>>> {
        if let Some(e) = self.take_at_once() {
            return Poll::Ready(Some(Ok(e)));
        }
        self.clock.wait_begins();
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
    ) -> Poll<Option<Result<ReceivedElement>>> {
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

    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<ReceivedElement>>> {
        if let Some(e) = self.take_at_once() {
            return Poll::Ready(Some(Ok(e)));
        }
        self.clock.wait_begins();
        match self.rx.poll_recv(cx) {
            Poll::Ready(item) => Poll::Ready(self.take(item)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Adds what was taken of `delivery` to `positions`.
/// `per_element`: a consumer of a shared parallel_epochs job, whose
/// elements interleave with other consumers'.
fn record(positions: &mut Positions, delivery: &Delivery, per_element: bool) {
    if let Some(splits) = &delivery.splits {
        for i in 0..delivery.taken.max(0) as usize {
            let (names, accounted) = splits.of(i);
            let (pieces, ends) = splits.pieces_of(i);
            positions.consumed_splits(names, pieces, ends, accounted);
        }
    }
    match &delivery.origin {
        Origin::Numbered { worker, first } if positions.coordinated.is_some() => {
            if delivery.taken > 0 {
                positions.consumed_in_round(worker, *first);
            }
        }
        Origin::Numbered { worker, first } if per_element => {
            positions.consumed_elements(worker, *first, delivery.taken)
        }
        Origin::Numbered { worker, first } => positions.advance(worker, *first, delivery.taken),
        Origin::Unnumbered { worker } => {
            if delivery.taken > 0 {
                positions.consumed_unnumbered(worker);
            }
        }
        // A deterministic read's lanes: `Iteration::deterministic`.
        Origin::Lanes(_) => {}
    }
}

/// Creates (or joins) the job and iteration, then starts the driver on `handle`.
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
    // TensorFlow's reader checks these (`ValidateDataServiceParams`), with
    // these codes and words; the dispatcher checks the cardinality again
    // when it makes the job, for readers that do not.
    if params.trainer_id.is_some() {
        if params.cardinality >= 0 {
            return Err(Error::InvalidArgument(format!(
                "Cross-trainer caching requires the input dataset to be infinite. Got input \
                 with cardinality {}",
                params.cardinality
            )));
        }
        if params.repetition > 1 {
            return Err(Error::InvalidArgument(format!(
                "Cross-trainer caching requires infinite datasets and disallows multiple \
                 repetitions of the same dataset. Got repetition {}",
                params.repetition
            )));
        }
    }
    let mut mode_def = params.mode.to_proto();
    mode_def.tfdata_deterministic = params.deterministic.as_ref().map(|(d, _)| d.to_proto());
    mode_def.tfdata_autocache = params.autocache;
    let job_request = wire::GetOrCreateJobRequest {
        dataset_id: params.dataset_id.0.clone(),
        processing_mode_def: Some(mode_def),
        job_name: params.job_name.clone(),
        num_consumers: params.num_consumers,
        use_cross_trainer_cache: params.trainer_id.is_some(),
        target_workers: params.target_workers.to_proto() as i32,
    };
    let job_id = JobId(
        retry(&dispatcher.target(), timeout, &cancel, || {
            dispatcher.get_or_create_job(job_request.clone())
        })
        .await?
        .job_id,
    );
    // distributed_epoch readers report what they received whole from a
    // lost worker (`fetch::Receipts`), so it is not produced again.
    let reports_receipts = params.mode == ProcessingMode::DistributedEpoch
        && params.consumer_index.is_none()
        && params.trainer_id.is_none()
        && params.deterministic.is_none();
    let dynamic = params.mode == ProcessingMode::DistributedEpoch;
    let iteration_request = wire::GetOrCreateIterationRequest {
        job_id: job_id.0,
        repetition: params.repetition,
        tfdata_reports_receipts: reports_receipts,
        // A restored distributed_epoch reader: its new iteration skips the
        // splits its checkpoint consumed (with those of the other
        // consumers of a shared job, which restore into the same one).
        tfdata_consumed: if dynamic {
            params.start.consumed_ranges()
        } else {
            Vec::new()
        },
        tfdata_restore: params
            .start
            .shared
            .filter(|_| params.job_name.is_some())
            .map(|s| wire::TfdataRestore {
                origin_iteration_id: s.iteration,
                origin_client_id: s.client,
                consumers: s.consumers,
            }),
        // A restored shared parallel_epochs consumer (or coordinated read):
        // the elements its restoration's workers drop.
        tfdata_consumed_elements: if params.per_element() || params.coordinated().is_some() {
            params.start.consumed_element_ranges()
        } else {
            Vec::new()
        },
        // ... and hands out the splits it consumed part of without those parts.
        tfdata_consumed_pieces: if dynamic {
            params.start.consumed_pieces()
        } else {
            Vec::new()
        },
    };
    let joined = retry(&dispatcher.target(), timeout, &cancel, || {
        dispatcher.get_or_create_iteration(iteration_request.clone())
    })
    .await?;
    let client_id = IterationClientId(joined.iteration_client_id);
    let signals = Arc::new(SharedSignals {
        // A coordinated read has exactly its consumers; a shared job's
        // count grows with the heartbeats.
        consumers: AtomicI64::new(params.num_consumers.unwrap_or(1)),
        restarted_worker: std::sync::Mutex::new(None),
    });
    let per_element = params.per_element();
    let shared =
        (params.job_name.is_some() && params.deterministic.is_none()).then(|| SharedConsumer {
            iteration: joined.tfdata_iteration_id,
            client: client_id.0,
            signals: Arc::clone(&signals),
            registered: Default::default(),
            dispatcher: dispatcher.clone(),
            dispatcher_timeout: params.dispatcher_timeout,
        });
    tracing::debug!(
        job_id = job_id.0,
        client_id = client_id.0,
        repetition = params.repetition,
        "reading iteration"
    );

    let unresumable = crate::checkpoint::unresumable_read(
        params.mode,
        params.consumer_index.is_some(),
        params.trainer_id.is_some(),
    );
    let stats = ReaderStats::new();
    if let Some((setting, lane_start)) = params.deterministic.clone() {
        // Lanes, not tasks: a driver of its own (`crate::deterministic`).
        let span = tracing::info_span!("deterministic_read", dataset = %params.dataset_id, job = job_id.0, client = client_id.0, epoch = lane_start.epoch);
        let read = crate::deterministic::ReadParams {
            setting,
            start: lane_start,
            compression: params.compression,
            security: params.security.clone(),
            refresh: params.task_refresh_interval,
            stats: Arc::clone(&stats),
            channel_capacity: params.max_outstanding_requests,
        };
        let (rx, consumed) =
            crate::deterministic::spawn(dispatcher, read, client_id, &cancel, &handle, span);
        return Ok(Iteration {
            rx,
            current: None,
            failed: false,
            clock: NextClock::new(stats),
            positions: Positions::default(),
            unresumable: None,
            taken_any: false,
            shared: None,
            per_element: false,
            deterministic: Some(consumed),
            _stop_driver: cancel.drop_guard(),
            driver: None,
        });
    }
    let (fetch, rx) = FetchContext::new(
        FetchParams {
            max_outstanding_requests: params.max_outstanding_requests,
            trainer_id: params.trainer_id.clone().unwrap_or_default(),
            compression: params.compression,
            stream_window: params.stream_window,
            security: params.security.clone(),
            stats: Arc::clone(&stats),
            // Streams open at a reader's position only where positions are
            // per worker.
            // (Not a shared task: its other readers want their elements.)
            positioned: unresumable.is_none()
                && params.mode == ProcessingMode::ParallelEpochs
                && params.job_name.is_none(),
            start: params.start.clone(),
            reports_receipts,
        },
        cancel.clone(),
    );
    // The driver's logs (and its fetchers') carry the reader's ids.
    let span = tracing::info_span!(
        "iteration",
        dataset = %params.dataset_id,
        job = job_id.0,
        client = client_id.0,
        repetition = params.repetition,
    );
    let mut positions = params.start.clone();
    positions.coordinated = params.coordinated();
    let driver = match params.consumer_index {
        Some(consumer_index) => handle.spawn(
            crate::rounds::drive(
                dispatcher,
                params.task_refresh_interval,
                client_id,
                consumer_index,
                fetch,
            )
            .instrument(span),
        ),
        None => handle.spawn(drive(dispatcher, params, client_id, fetch, signals).instrument(span)),
    };
    Ok(Iteration {
        rx,
        current: None,
        failed: false,
        clock: NextClock::new(stats),
        positions,
        unresumable,
        taken_any: false,
        shared,
        per_element,
        deterministic: None,
        _stop_driver: cancel.drop_guard(),
        driver: Some(driver),
    })
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

/// Reads every targeted task, one fetcher each, until the iteration ends,
/// the read stops or a fetcher fails; then releases `client_id`.
async fn drive(
    dispatcher: DispatcherClient,
    params: IterationParams,
    client_id: IterationClientId,
    fetch: Arc<FetchContext>,
    signals: Arc<SharedSignals>,
) {
    let cancel = fetch.cancel.clone();
    // A restoration's consumers still to join, as last logged.
    let mut awaited_restores = 0;
    let refresh = params.task_refresh_interval;
    let mut fetchers: JoinSet<FetchEnd> = JoinSet::new();
    let mut known_tasks: HashSet<TaskId> = HashSet::new();
    // Shared parallel_epochs: the task read from each worker address.
    let per_element = params.per_element();
    let mut task_of_worker: HashMap<String, TaskId> = HashMap::new();
    // Tasks that left the iteration, and their receipts not yet sent.
    let mut left: HashSet<TaskId> = HashSet::new();
    let mut leaving: HashMap<tokio::task::Id, TaskId> = HashMap::new();
    let mut receipts: Vec<wire::TfdataTaskReceipts> = Vec::new();
    let mut running: HashMap<TaskId, tokio::task::AbortHandle> = HashMap::new();
    let mut finished = false;
    // Skipping a task for targeting means the dispatcher's end of the
    // iteration is not ours: we end when our own tasks end.
    let mut skipped_any = false;
    let mut next_heartbeat = Instant::now();
    let mut end_poll = END_POLL_START;
    let mut target = TargetTime::default();
    loop {
        if finished && fetchers.is_empty() {
            break;
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            // A worker's port refused a fetcher: the dispatcher hears of it
            // now, not at the next refresh (it probes, and declares a dead
            // worker lost in seconds whatever worker_timeout is).
            () = fetch.unreachable.notified() => {
                next_heartbeat = Instant::now();
            }
            () = tokio::time::sleep_until(next_heartbeat) => {
                let (target_processing_time_nsec, stats) = target.heartbeat(&fetch.stats);
                let unreachable = fetch.take_refused();
                let request = wire::ClientHeartbeatRequest {
                    iteration_client_id: client_id.0,
                    target_processing_time_nsec,
                    tfdata_stats: Some(stats),
                    tfdata_receipts: receipts.clone(),
                    tfdata_unreachable_workers: unreachable.clone(),
                    ..Default::default()
                };
                match dispatcher.reader_heartbeat(request).await {
                    Ok(response) => {
                        crate::metrics::receipts_reported(&receipts);
                        receipts.clear();
                        signals.consumers.fetch_max(response.tfdata_iteration_clients, Ordering::SeqCst);
                        if response.tfdata_restores_awaited != awaited_restores {
                            awaited_restores = response.tfdata_restores_awaited;
                            if awaited_restores > 0 {
                                tracing::info!(awaited = awaited_restores, "restored shared job: waiting for its other consumers to restore before any reads");
                            }
                        }
                        // Tasks the dispatcher dropped (a lost worker's) are
                        // no longer read.
                        let listed: HashSet<TaskId> =
                            response.task_info.iter().map(|t| TaskId(t.task_id)).collect();
                        // Their receipts go to the dispatcher once their
                        // fetchers have stopped (nothing more is delivered).
                        let gone: Vec<TaskId> =
                            known_tasks.difference(&listed).filter(|t| left.insert(**t)).copied().collect();
                        for task_id in gone {
                            match running.remove(&task_id) {
                                Some(handle) => {
                                    // One that read the task's end hands the
                                    // last elements over first: they exist
                                    // nowhere else.
                                    if !fetch.has_read_end(task_id) {
                                        handle.abort();
                                    }
                                    leaving.insert(handle.id(), task_id);
                                }
                                None => receipts.extend(fetch.take_receipts(task_id)),
                            }
                        }
                        // Lost before this reader heard of them: it read
                        // nothing from them, and says so.
                        for task_id in response.tfdata_awaited_receipts.iter().map(|t| TaskId(*t)) {
                            if !known_tasks.contains(&task_id) && left.insert(task_id) {
                                receipts.push(wire::TfdataTaskReceipts {
                                    task_id: task_id.0,
                                    ..Default::default()
                                });
                            }
                        }
                        for task in response.task_info {
                            let id = TaskId(task.task_id);
                            if per_element
                                && let Some(old) = task_of_worker.insert(task.worker_address.clone(), id)
                                && old != id
                            {
                                let mut restarted = signals.restarted_worker.lock().unwrap_or_else(|p| p.into_inner());
                                restarted.get_or_insert_with(|| format!(
                                    "worker {} restarted during this shared parallel_epochs read and \
                                     started its sequence again (task {} replaced task {}), so a \
                                     checkpoint cannot say which of its elements were consumed",
                                    task.worker_address, id.0, old.0
                                ));
                            }
                            if known_tasks.insert(id) {
                                if targeted(params.target_workers, &task) {
                                    let span = tracing::info_span!("task", task = task.task_id, iteration = task.iteration_id, worker = %task.worker_address);
                                    let handle = fetchers.spawn(fetch::fetch_task(Arc::clone(&fetch), task).instrument(span));
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
                        tracing::debug!(client_id = client_id.0, error = %e, "client heartbeat failed; will retry");
                        fetch.requeue_refused(unreachable);
                    }
                    Err(e) => {
                        fetch.fail(e).await;
                        break;
                    }
                }
                // Once every known task is drained, poll the dispatcher quickly
                // for the iteration's end instead of waiting a full period.
                let drained = !known_tasks.is_empty() && fetchers.is_empty();
                next_heartbeat = if !receipts.is_empty() {
                    // The dispatcher waits for them to hand splits out again.
                    Instant::now()
                } else if !finished && drained {
                    end_poll = (end_poll * 2).min(refresh);
                    Instant::now() + end_poll
                } else {
                    Instant::now() + refresh
                };
            }
            Some(joined) = fetchers.join_next_with_id(), if !fetchers.is_empty() => {
                let id = match &joined {
                    Ok((id, _)) => *id,
                    Err(e) => e.id(),
                };
                running.retain(|_, h| h.id() != id);
                if let Some(task_id) = leaving.remove(&id) {
                    receipts.extend(fetch.take_receipts(task_id));
                    next_heartbeat = Instant::now();
                }
                if matches!(joined, Ok((_, FetchEnd::Failed))) {
                    break;
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
    if !receipts.is_empty() {
        // Best effort: unreported, the splits are produced again.
        let request = wire::ClientHeartbeatRequest {
            iteration_client_id: client_id.0,
            tfdata_receipts: receipts,
            ..Default::default()
        };
        if dispatcher.reader_heartbeat(request.clone()).await.is_ok() {
            crate::metrics::receipts_reported(&request.tfdata_receipts);
        }
    }
    if params.job_name.is_some() {
        // A shared job's consumer stays a client of the iteration until its
        // iterator goes (as TensorFlow's, released when the iterator is
        // destroyed), so a checkpoint taken at the end of the data can
        // still be recorded: the job's restoration then waits for it. The
        // dispatcher's client_timeout releases it if the iterator lingers.
        cancel.cancelled().await;
    }
    dispatcher.release_reader(client_id).await;
}
