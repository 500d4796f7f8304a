//! Remote split providers: in distributed_epoch mode a task's sources read
//! their splits from the dispatcher (`GetSplit`), one provider per source.
//! They are called from the task's pipeline thread, so they block on the
//! worker's runtime rather than run on it.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tfdata_client::DispatcherClient;
use tfdata_core::{Result, Tensor};
use tfdata_dataset::splits::SplitProvider;
use tfdata_proto::data::GetSplitRequest;
use tfdata_rpc::CancellationToken;
use tfdata_rpc::retry::retry;

pub struct RemoteSplitProvider {
    pub dispatcher: DispatcherClient,
    pub runtime: tokio::runtime::Handle,
    pub iteration_id: i64,
    pub index: i64,
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
}

impl SplitProvider for RemoteSplitProvider {
    fn get_next(&self) -> Result<Option<Tensor>> {
        let request = GetSplitRequest {
            iteration_id: self.iteration_id,
            repetition: self.repetition.load(Ordering::SeqCst),
            split_provider_index: self.index,
            tfdata_worker_address: self.worker_address.clone(),
            tfdata_split_sequence: Some(self.received.load(Ordering::SeqCst)),
        };
        let response = self.runtime.block_on(retry(
            &self.dispatcher.target(),
            Some(self.timeout),
            &self.cancel,
            || self.dispatcher.get_split(request.clone()),
        ))?;
        self.received.fetch_add(1, Ordering::SeqCst);
        if response.end_of_splits {
            return Ok(None);
        }
        match &response.split {
            Some(split) => tfdata_core::element::tensor_from_proto(split).map(Some),
            None => Err(tfdata_core::Error::Internal(
                "dispatcher answered GetSplit with neither a split nor end_of_splits".into(),
            )),
        }
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
