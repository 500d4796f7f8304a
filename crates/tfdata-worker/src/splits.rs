//! Remote split providers: in distributed_epoch mode a task's sources read
//! their splits from the dispatcher (`GetSplit`), one provider per source.
//! They are called from the task's pipeline thread, so they block on the
//! worker's runtime rather than run on it.
//!
//! Each split is leased (`tfdata_core::lineage`): when every element made
//! from it has been handed to a reader, the split is reported delivered with
//! the provider's next request, and the dispatcher stops holding it for this
//! worker. If the worker dies, the splits it still held go back to the pool.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tfdata_client::DispatcherClient;
use tfdata_core::{IterationId, Lineage, Result, SplitLease, TaskId, Tensor};
use tfdata_dataset::splits::SplitProvider;
use tfdata_proto::data::{GetSplitRequest, TfdataDeliveredSplit};
use tfdata_rpc::CancellationToken;
use tfdata_rpc::retry::retry;

/// How long a delivered split waits before it is reported. A response handed
/// to the transport can still be lost if the worker dies before the bytes
/// leave it; a split reported too early would then be lost, one reported
/// late is at worst produced twice. The wait costs nothing but duplicates
/// after a worker loss.
pub const DELIVERY_REPORT_DELAY: Duration = Duration::from_millis(100);

/// Splits whose last element was handed out, and when.
pub type DeliveredSplits = Arc<Mutex<Vec<(Instant, TfdataDeliveredSplit)>>>;

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
            tfdata_delivered: self.take_reports(),
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

    /// The delivered splits old enough to report.
    fn take_reports(&self) -> Vec<TfdataDeliveredSplit> {
        let Some(cutoff) = Instant::now().checked_sub(DELIVERY_REPORT_DELAY) else {
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

impl SplitProvider for RemoteSplitProvider {
    fn get_next(&self) -> Result<Option<Tensor>> {
        Ok(self.get_next_leased()?.map(|(split, _)| split))
    }

    fn get_next_leased(&self) -> Result<Option<(Tensor, Lineage)>> {
        let Some((split, name)) = self.fetch()? else {
            return Ok(None);
        };
        let delivered = Arc::clone(&self.delivered);
        let lease = SplitLease::new(move || lock(&delivered).push((Instant::now(), name)));
        Ok(Some((split, Lineage::of(lease))))
    }

    fn reset(&self) -> Result<()> {
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
