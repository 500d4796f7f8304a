//! Remote split providers: in distributed_epoch mode a task's sources read
//! their splits from the dispatcher (`GetSplit`), one provider per source.
//! They are called from the task's pipeline thread, so they block on the
//! worker's runtime rather than run on it.
//!
//! Each split is leased (`tfdata_core::lineage`): when every element made
//! from it has been handed to a reader, the split is reported delivered with
//! the provider's next request, and the dispatcher stops holding it for this
//! worker. If the worker dies, the splits it still held go back to the pool.
//!
//! A task's [`SplitLedger`] counts the leases still out and lets a draining
//! worker (`crate::drain`) stop taking splits: its providers answer "no more
//! splits" themselves, the pipeline finishes the splits in hand, and the
//! ledger tells when every one of them has been delivered.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tfdata_client::DispatcherClient;
use tfdata_core::{IterationId, Lineage, Result, SplitLease, TaskId, Tensor};
use tfdata_dataset::splits::SplitProvider;
use tfdata_proto::data::{GetSplitRequest, TfdataDeliveredSplit};
use tfdata_rpc::CancellationToken;
use tfdata_rpc::retry::retry;
use tokio::sync::Notify;

/// How long a delivered split waits before it is reported. A response handed
/// to the transport can still be lost if the worker dies before the bytes
/// leave it; a split reported too early would then be lost, one reported
/// late is at worst produced twice. The wait costs nothing but duplicates
/// after a worker loss.
pub const DELIVERY_REPORT_DELAY: Duration = Duration::from_millis(100);

/// Splits whose last element was handed out, and when.
pub type DeliveredSplits = Arc<Mutex<Vec<(Instant, TfdataDeliveredSplit)>>>;

/// One task's dynamic-sharding state as a drain sees it. Shared by the
/// task's runner, its remote split providers and its pipeline thread.
pub struct SplitLedger {
    /// Cancelled when the worker starts draining.
    draining: CancellationToken,
    /// A provider answered "no more splits" because the worker is draining,
    /// not because the dispatcher said so: the pipeline's end is not the
    /// data's, and readers must not be told it is.
    cut: AtomicBool,
    /// Splits leased whose elements have not all been handed to readers.
    outstanding: AtomicUsize,
    /// The pipeline thread has ended (however).
    ended: AtomicBool,
    providers: Mutex<Vec<Arc<RemoteSplitProvider>>>,
    /// Woken on every change a drain waits for.
    changed: Arc<Notify>,
}

impl SplitLedger {
    pub fn new(draining: CancellationToken, changed: Arc<Notify>) -> Self {
        SplitLedger {
            draining,
            cut: AtomicBool::new(false),
            outstanding: AtomicUsize::new(0),
            ended: AtomicBool::new(false),
            providers: Mutex::new(Vec::new()),
            changed,
        }
    }

    /// A ledger that never drains (tasks made outside a worker, tests).
    pub fn idle() -> Self {
        Self::new(CancellationToken::new(), Arc::new(Notify::new()))
    }

    pub fn add_provider(&self, provider: Arc<RemoteSplitProvider>) {
        lock(&self.providers).push(provider);
    }

    /// Called by the pipeline thread when it ends. True if the end is to be
    /// held back from readers (the draining worker cut the splits off).
    pub fn pipeline_ended(&self) -> bool {
        self.ended.store(true, Ordering::SeqCst);
        self.changed.notify_waiters();
        self.cut.load(Ordering::SeqCst)
    }

    /// Whether this task no longer holds a drain back: it reads no splits,
    /// or its pipeline has ended and every split it leased was delivered.
    pub fn is_drained(&self) -> bool {
        lock(&self.providers).is_empty()
            || (self.ended.load(Ordering::SeqCst) && self.outstanding.load(Ordering::SeqCst) == 0)
    }

    /// Whether the splits were cut off by the drain and the pipeline has
    /// ended, so its providers may [`flush`](RemoteSplitProvider::flush).
    pub fn cut_and_ended(&self) -> bool {
        self.cut.load(Ordering::SeqCst) && self.ended.load(Ordering::SeqCst)
    }

    pub fn providers(&self) -> Vec<Arc<RemoteSplitProvider>> {
        lock(&self.providers).clone()
    }

    /// Drops the providers (they hold this ledger: a cycle otherwise). The
    /// task runner calls it when it goes.
    pub fn forget_providers(&self) {
        lock(&self.providers).clear();
    }

    fn released(&self) {
        self.outstanding.fetch_sub(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }
}

pub struct RemoteSplitProvider {
    pub dispatcher: DispatcherClient,
    pub runtime: tokio::runtime::Handle,
    pub iteration_id: IterationId,
    /// Which of the dataset's sources (in `Dataset::sources` order) this
    /// provider serves.
    pub split_provider_index: i64,
    /// Starts at 0; each `reset` (a `repeat` after the source) moves to the
    /// next repetition of the dispatcher's cursor.
    pub repetition: AtomicI64,
    /// Splits received in this repetition: the sequence number of the next
    /// request. A retry of a request whose answer was lost repeats it, and the
    /// dispatcher answers with the same split.
    pub received: AtomicI64,
    pub worker_address: String,
    /// How long a split request retries an unreachable dispatcher.
    pub timeout: Duration,
    pub cancel: CancellationToken,
    pub task_id: TaskId,
    pub delivered: DeliveredSplits,
    pub ledger: Arc<SplitLedger>,
    /// The dispatcher answered "no more splits" for the current repetition.
    pub exhausted: AtomicBool,
    /// `tfdata_worker_get_split_duration_seconds`.
    pub get_split_duration: tfdata_rpc::metrics::Histogram,
}

impl RemoteSplitProvider {
    /// Fetches the next split; also returns the (repetition, sequence) that
    /// names it.
    fn fetch(&self) -> Result<Option<(Tensor, TfdataDeliveredSplit)>> {
        let name = TfdataDeliveredSplit {
            repetition: self.repetition.load(Ordering::SeqCst),
            sequence: self.received.load(Ordering::SeqCst),
        };
        let request = GetSplitRequest {
            iteration_id: self.iteration_id.0,
            repetition: name.repetition,
            split_provider_index: self.split_provider_index,
            tfdata_worker_address: self.worker_address.clone(),
            tfdata_split_sequence: Some(name.sequence),
            tfdata_delivered: self.take_reports(DELIVERY_REPORT_DELAY),
            tfdata_task_id: self.task_id.0,
        };
        let started = Instant::now();
        let result = self.runtime.block_on(retry(
            &self.dispatcher.target(),
            Some(self.timeout),
            &self.cancel,
            || self.dispatcher.get_split(request.clone()),
        ));
        self.get_split_duration.observe(started.elapsed());
        let response = match result {
            Ok(r) => r,
            Err(e) => {
                // Not reported after all: keep them for the next request
                // (already old enough to go with it).
                let at = Instant::now()
                    .checked_sub(DELIVERY_REPORT_DELAY)
                    .unwrap_or_else(Instant::now);
                let mut delivered = lock(&self.delivered);
                delivered.extend(request.tfdata_delivered.into_iter().map(|d| (at, d)));
                return Err(e);
            }
        };
        self.received.fetch_add(1, Ordering::SeqCst);
        if response.end_of_splits {
            self.exhausted.store(true, Ordering::SeqCst);
            return Ok(None);
        }
        match &response.split {
            Some(split) => Ok(Some((
                tfdata_core::element::tensor_from_proto(split)?,
                name,
            ))),
            None => Err(tfdata_core::Error::Internal(
                "dispatcher answered GetSplit with neither a split nor end_of_splits".into(),
            )),
        }
    }

    /// The delivered splits at least `age` old.
    fn take_reports(&self, age: Duration) -> Vec<TfdataDeliveredSplit> {
        let Some(cutoff) = Instant::now().checked_sub(age) else {
            return Vec::new();
        };
        let mut delivered = lock(&self.delivered);
        let mut reports = Vec::new();
        delivered.retain(|(at, d)| {
            if *at <= cutoff {
                reports.push(*d);
                false
            } else {
                true
            }
        });
        reports
    }
}

impl RemoteSplitProvider {
    /// At the end of a drain, once the pipeline has ended: reports the
    /// splits delivered since the last request, so the dispatcher stops
    /// holding them for this worker. The report rides on a `GetSplit`, as
    /// always; the split it leases is never produced here, so when the worker
    /// stops it goes back to the pool whole and another worker produces it
    /// once. Nothing to report, no request.
    pub fn flush(&self) -> Result<()> {
        if lock(&self.delivered).is_empty() {
            return Ok(());
        }
        let request = GetSplitRequest {
            iteration_id: self.iteration_id.0,
            repetition: self.repetition.load(Ordering::SeqCst),
            split_provider_index: self.split_provider_index,
            tfdata_worker_address: self.worker_address.clone(),
            tfdata_split_sequence: Some(self.received.load(Ordering::SeqCst)),
            tfdata_delivered: self.take_reports(Duration::ZERO),
            tfdata_task_id: self.task_id.0,
        };
        self.runtime.block_on(retry(
            &self.dispatcher.target(),
            Some(self.timeout),
            &self.cancel,
            || self.dispatcher.get_split(request.clone()),
        ))?;
        self.received.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

impl SplitProvider for RemoteSplitProvider {
    fn get_next(&self) -> Result<Option<Tensor>> {
        Ok(self.get_next_leased()?.map(|(split, _)| split))
    }

    fn get_next_leased(&self) -> Result<Option<(Tensor, Lineage)>> {
        if self.ledger.draining.is_cancelled() {
            // Draining: finish what is in hand, take nothing new.
            self.ledger.cut.store(true, Ordering::SeqCst);
            return Ok(None);
        }
        let Some((split, name)) = self.fetch()? else {
            return Ok(None);
        };
        let delivered = Arc::clone(&self.delivered);
        let ledger = Arc::clone(&self.ledger);
        ledger.outstanding.fetch_add(1, Ordering::SeqCst);
        let lease = SplitLease::new(move || {
            lock(&delivered).push((Instant::now(), name));
            ledger.released();
        });
        Ok(Some((split, Lineage::of(lease))))
    }

    fn reset(&self) -> Result<()> {
        // A pass the drain cut short is not over: a request for the next
        // repetition (the drain's flush) would end this one for every worker.
        if self.ledger.draining.is_cancelled() && !self.exhausted.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.exhausted.store(false, Ordering::SeqCst);
        self.repetition.fetch_add(1, Ordering::SeqCst);
        self.received.store(0, Ordering::SeqCst);
        Ok(())
    }

    fn cardinality(&self) -> i64 {
        tfdata_dataset::UNKNOWN_CARDINALITY
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
