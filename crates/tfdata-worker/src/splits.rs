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
//! Splits that the pipeline goes through quickly (a `range`'s values) are
//! leased several per round trip (`tfdata_max_splits`): each lease is sized
//! to last the pipeline [`LEASE_TARGET`] at its measured pace, up to
//! [`MAX_LEASE_SPLITS`], and the next lease is fetched in the background
//! once half of the current one is handed out. Slow splits (files) stay one
//! per request with nothing fetched ahead, as TensorFlow's workers ask,
//! so a worker never sits on a file another worker could be reading.
//! Every split of a lease is named by its own sequence number and held by
//! the dispatcher until reported delivered, exactly like a single split.
//!
//! A task's [`SplitLedger`] counts the leases still out and lets a draining
//! worker (`crate::drain`) stop taking splits: its providers answer "no more
//! splits" themselves, the pipeline finishes the splits in hand, and the
//! ledger tells when every one of them has been delivered.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prost::Message;
use tfdata_client::DispatcherClient;
use tfdata_core::positions::PositionSet;
use tfdata_core::{IterationId, Lineage, Result, SplitLease, SplitName, TaskId, Tensor};
use tfdata_dataset::splits::SplitProvider;
use tfdata_proto::data::{GetSplitRequest, GetSplitResponse, TfdataDeliveredSplit};
use tfdata_proto::tensorflow::TensorProto;
use tfdata_rpc::CancellationToken;
use tfdata_rpc::retry::retry;
use tokio::sync::Notify;

/// How long a delivered split whose last element did not go out on the
/// element stream (`GetElement`, or dropped by the pipeline) waits before it
/// is reported. A response handed to the transport can still be lost if the
/// worker dies before the bytes leave it; a split reported too early would
/// then be lost, one reported late is at worst produced twice. Splits whose
/// last element went out on a stream wait instead for the reader to say the
/// batch arrived (`tfdata_core::lineage::DeliveryGate`), which no delay can
/// stand in for: a batch may sit in a busy worker's socket for longer.
pub const DELIVERY_REPORT_DELAY: Duration = Duration::from_millis(100);

/// Splits whose last element was handed out, and when: each by the name the
/// task reports it delivered by and by its name in the iteration (what
/// readers hold receipts of, released once the dispatcher acknowledged it).
pub type DeliveredSplits = Arc<Mutex<Vec<Delivered>>>;

/// A split whose last element was handed out.
pub struct Delivered {
    pub at: Instant,
    pub report: TfdataDeliveredSplit,
    pub name: SplitName,
    /// Its last element went out in a stream batch whose reader has not
    /// yet said it arrived, if this is set and closed
    /// ([`tfdata_core::lineage::DeliveryGate`]).
    pub gate: Option<tfdata_core::lineage::DeliveryGate>,
}

impl Delivered {
    /// Whether it may be reported now: its batch's reader said it arrived,
    /// or (elements that went out otherwise: `GetElement`, filtered out)
    /// it was let go of at least `age` ago.
    fn reportable(&self, cutoff: Option<Instant>) -> bool {
        match &self.gate {
            Some(gate) => gate.load(Ordering::SeqCst),
            None => cutoff.is_some_and(|c| self.at <= c),
        }
    }
}

/// Most splits a worker asks for in one lease (the dispatcher caps leases
/// at `MAX_SPLITS_PER_LEASE` too).
pub const MAX_LEASE_SPLITS: i64 = 1024;

/// How much of the pipeline's time one lease should cover, at the pace it
/// took the last splits. It bounds how unevenly an epoch's last splits can
/// be spread over workers.
pub const LEASE_TARGET: Duration = Duration::from_millis(20);

/// A task's leased splits not yet handed to its pipeline, and the next
/// lease while it is fetched.
#[derive(Default)]
pub struct Leases {
    /// Each split with the name the task reports it delivered by, its
    /// name in the iteration (what readers record), and the positions of it
    /// readers already received (a lost worker's split handed out again).
    queue: VecDeque<(Tensor, TfdataDeliveredSplit, SplitName, PositionSet)>,
    in_flight: Option<InFlight>,
    /// Splits the next request asks for (0 until the first answer: 1).
    size: i64,
    /// The dispatcher answered "no more splits" for this repetition.
    end: bool,
    /// When the last lease arrived, and splits handed out since: the
    /// pipeline's pace, which sizes the next lease.
    last_arrival: Option<Instant>,
    handed_out: u64,
}

/// A `GetSplit` running on the worker's runtime.
struct InFlight {
    name: TfdataDeliveredSplit,
    task: tokio::task::JoinHandle<(Result<GetSplitResponse>, Vec<TfdataDeliveredSplit>)>,
    /// The names in the iteration of the splits it reports delivered.
    reported: Vec<SplitName>,
    started: Instant,
}

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
    /// The task's element streams, told of splits the dispatcher
    /// acknowledged as delivered.
    pub releases: crate::releases::ReleaseBoard,
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
            releases: crate::releases::ReleaseBoard::default(),
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
    /// Splits leased ahead of the pipeline (only its thread, and a drain's
    /// flush once the pipeline has ended, take this lock).
    pub leases: Mutex<Leases>,
}

impl RemoteSplitProvider {
    /// The next split, the (repetition, sequence) that names it in delivery
    /// reports and its name in the iteration, from the current lease or,
    /// when it is used up, the next one.
    #[allow(clippy::type_complexity)]
    fn next_split(&self) -> Result<Option<(Tensor, TfdataDeliveredSplit, SplitName, PositionSet)>> {
        let mut leases = lock(&self.leases);
        if leases.queue.is_empty() {
            if leases.end {
                return Ok(None);
            }
            let in_flight = match leases.in_flight.take() {
                Some(in_flight) => in_flight,
                None => self.start_lease(&leases),
            };
            self.receive_lease(&mut leases, in_flight)?;
        }
        let Some(next) = leases.queue.pop_front() else {
            return Ok(None);
        };
        leases.handed_out += 1;
        // Half the lease handed out: fetch the next one meanwhile (not for
        // one-split leases: a slow split is not worth holding two of).
        if leases.size > 1
            && !leases.end
            && leases.in_flight.is_none()
            && (leases.queue.len() as i64) <= leases.size / 2
        {
            leases.in_flight = Some(self.start_lease(&leases));
        }
        Ok(Some(next))
    }

    /// Sends the next `GetSplit` (named by the splits received so far) on
    /// the worker's runtime.
    fn start_lease(&self, leases: &Leases) -> InFlight {
        let name = TfdataDeliveredSplit {
            repetition: self.repetition.load(Ordering::SeqCst),
            sequence: self.received.load(Ordering::SeqCst),
        };
        let (delivered, reported) = self.take_reports(DELIVERY_REPORT_DELAY);
        let request = GetSplitRequest {
            iteration_id: self.iteration_id.0,
            repetition: name.repetition,
            split_provider_index: self.split_provider_index,
            tfdata_worker_address: self.worker_address.clone(),
            tfdata_split_sequence: Some(name.sequence),
            tfdata_delivered: delivered,
            tfdata_task_id: self.task_id.0,
            tfdata_max_splits: Some(leases.size.max(1)),
        };
        let dispatcher = self.dispatcher.clone();
        let timeout = self.timeout;
        let cancel = self.cancel.clone();
        let task = self.runtime.spawn(async move {
            let result = retry(&dispatcher.target(), Some(timeout), &cancel, || {
                dispatcher.get_split(request.clone())
            })
            .await;
            (result, request.tfdata_delivered)
        });
        InFlight {
            name,
            task,
            reported,
            started: Instant::now(),
        }
    }

    /// Waits for a lease and queues its splits (or notes the end of
    /// splits), and sizes the next one by the pipeline's pace.
    fn receive_lease(&self, leases: &mut Leases, in_flight: InFlight) -> Result<()> {
        let (result, reported) = self
            .runtime
            .block_on(in_flight.task)
            .map_err(|e| tfdata_core::Error::Internal(format!("a GetSplit request failed: {e}")))?;
        self.get_split_duration.observe(in_flight.started.elapsed());
        let response = match result {
            Ok(r) => r,
            Err(e) => {
                // Not reported after all: keep them for the next request
                // (already old enough to go with it).
                let at = Instant::now()
                    .checked_sub(DELIVERY_REPORT_DELAY)
                    .unwrap_or_else(Instant::now);
                let mut delivered = lock(&self.delivered);
                delivered.extend(reported.into_iter().zip(in_flight.reported).map(
                    |(report, name)| Delivered {
                        at,
                        report,
                        name,
                        gate: None,
                    },
                ));
                return Err(e);
            }
        };
        // Recorded (journaled): the dispatcher holds them no more, so the
        // task's readers may forget their receipts of them. An end of
        // splits to a task that left its iteration recorded nothing.
        if response.tfdata_delivered_recorded {
            self.ledger.releases.acknowledged(&in_flight.reported);
        }
        if response.end_of_splits {
            self.received.fetch_add(1, Ordering::SeqCst);
            self.exhausted.store(true, Ordering::SeqCst);
            leases.end = true;
            return Ok(());
        }
        let Some(first) = &response.split else {
            return Err(tfdata_core::Error::Internal(
                "dispatcher answered GetSplit with neither a split nor end_of_splits".into(),
            ));
        };
        let count = 1 + response.tfdata_more_splits.len() as i64;
        let name = |i: usize| TfdataDeliveredSplit {
            repetition: in_flight.name.repetition,
            sequence: in_flight.name.sequence + i as i64,
        };
        let split_name = |i: usize| SplitName {
            provider: self.split_provider_index,
            repetition: response.tfdata_split_repetition,
            index: response.tfdata_first_index.saturating_add(i as i64),
        };
        let skip = PositionSet::from_ranges(&response.tfdata_skip).map_err(|e| {
            tfdata_core::Error::Internal(format!("the dispatcher's GetSplit answer: {e}"))
        })?;
        leases.queue.push_back((
            tfdata_core::element::tensor_from_proto(first)?,
            name(0),
            split_name(0),
            skip,
        ));
        for (i, encoded) in response.tfdata_more_splits.iter().enumerate() {
            let proto = TensorProto::decode(encoded.clone()).map_err(|e| {
                tfdata_core::Error::Internal(format!(
                    "the dispatcher leased a split that is not a TensorProto: {e}"
                ))
            })?;
            leases.queue.push_back((
                tfdata_core::element::tensor_from_proto(&proto)?,
                name(i + 1),
                split_name(i + 1),
                PositionSet::default(),
            ));
        }
        self.received.fetch_add(count, Ordering::SeqCst);
        let now = Instant::now();
        if let Some(last) = leases.last_arrival {
            let elapsed = now.saturating_duration_since(last).as_secs_f64();
            let pace = leases.handed_out as f64 / elapsed.max(1e-6);
            let wanted = (pace * LEASE_TARGET.as_secs_f64()) as i64;
            // Up to the pace at once (a fast source reaches full leases in
            // two or three round trips); down by halves, so one slow split
            // does not undo the lease size.
            let size = leases.size.max(1);
            leases.size = if wanted > size {
                wanted.min(MAX_LEASE_SPLITS)
            } else {
                (size / 2).max(wanted).max(1)
            };
        } else {
            leases.size = 1;
        }
        leases.last_arrival = Some(now);
        leases.handed_out = 0;
        Ok(())
    }

    /// Splits let go of whose batch's reader has not yet said it arrived.
    pub fn unconfirmed(&self) -> usize {
        lock(&self.delivered)
            .iter()
            .filter(|d| d.gate.as_ref().is_some_and(|g| !g.load(Ordering::SeqCst)))
            .count()
    }

    /// The delivered splits that may be reported (their readers said they
    /// arrived, or they were let go of at least `age` ago): as the request
    /// names them, and by their names in the iteration.
    fn take_reports(&self, age: Duration) -> (Vec<TfdataDeliveredSplit>, Vec<SplitName>) {
        let cutoff = Instant::now().checked_sub(age);
        let mut delivered = lock(&self.delivered);
        let (mut reports, mut names) = (Vec::new(), Vec::new());
        delivered.retain(|d| {
            if d.reportable(cutoff) {
                reports.push(d.report);
                names.push(d.name);
                false
            } else {
                true
            }
        });
        (reports, names)
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
        // A lease fetched ahead carries reports and uses the next sequence
        // number: it is settled first, or this request would repeat its
        // number and the dispatcher would take it for a retry.
        {
            let mut leases = lock(&self.leases);
            if let Some(in_flight) = leases.in_flight.take() {
                self.receive_lease(&mut leases, in_flight)?;
            }
        }
        // Only what readers said arrived: the rest stays held, and goes back
        // to the pool whole when the worker leaves.
        let (delivered, reported) = self.take_reports(Duration::ZERO);
        if delivered.is_empty() {
            return Ok(());
        }
        let request = GetSplitRequest {
            iteration_id: self.iteration_id.0,
            repetition: self.repetition.load(Ordering::SeqCst),
            split_provider_index: self.split_provider_index,
            tfdata_worker_address: self.worker_address.clone(),
            tfdata_split_sequence: Some(self.received.load(Ordering::SeqCst)),
            tfdata_delivered: delivered,
            tfdata_task_id: self.task_id.0,
            tfdata_max_splits: None,
        };
        let response = self.runtime.block_on(retry(
            &self.dispatcher.target(),
            Some(self.timeout),
            &self.cancel,
            || self.dispatcher.get_split(request.clone()),
        ))?;
        self.received.fetch_add(1, Ordering::SeqCst);
        if response.tfdata_delivered_recorded {
            self.ledger.releases.acknowledged(&reported);
        }
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
        let Some((split, name, split_name, skip)) = self.next_split()? else {
            return Ok(None);
        };
        let delivered = Arc::clone(&self.delivered);
        let ledger = Arc::clone(&self.ledger);
        ledger.outstanding.fetch_add(1, Ordering::SeqCst);
        let lease = SplitLease::named_skipping(split_name, skip, move || {
            // The batch it went out in, when a stream let it go.
            let gate = tfdata_core::lineage::current_delivery_gate();
            lock(&delivered).push(Delivered {
                at: Instant::now(),
                report: name,
                name: split_name,
                gate,
            });
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
        // A source may move on before it saw the end (`from_tensors` knows
        // it has one split). A lease fetched ahead is settled under the old
        // repetition's name; splits it brought are leased to this task, so
        // they stay queued and are produced first in the next pass (as a
        // lost worker's split is produced in whichever pass asks).
        let mut leases = lock(&self.leases);
        if let Some(in_flight) = leases.in_flight.take() {
            self.receive_lease(&mut leases, in_flight)?;
        }
        leases.end = false;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn delivered(at: Instant, gate: Option<tfdata_core::lineage::DeliveryGate>) -> Delivered {
        Delivered {
            at,
            report: TfdataDeliveredSplit::default(),
            name: SplitName {
                provider: 0,
                repetition: 0,
                index: 0,
            },
            gate,
        }
    }

    /// A split whose last element went out on a stream waits for its
    /// reader's word however old it is (a batch can sit in a busy worker's
    /// socket for longer than any delay); one that went out otherwise is
    /// reported after the delay.
    #[test]
    fn a_streamed_split_is_reported_once_its_reader_has_it_and_no_sooner() {
        let long_ago = Instant::now() - Duration::from_secs(60);
        let cutoff = Instant::now().checked_sub(DELIVERY_REPORT_DELAY);
        let gate: tfdata_core::lineage::DeliveryGate = Arc::new(AtomicBool::new(false));
        let streamed = delivered(long_ago, Some(Arc::clone(&gate)));
        assert!(!streamed.reportable(cutoff));
        gate.store(true, Ordering::SeqCst);
        assert!(streamed.reportable(cutoff));
        assert!(streamed.reportable(None), "no age needed once arrived");
        assert!(delivered(long_ago, None).reportable(cutoff));
        assert!(!delivered(Instant::now(), None).reportable(cutoff));
    }
}
