//! Where a snapshot stream's splits come from once its split files are
//! replayed: the dispatcher's `GetSnapshotSplit` (or a fake in tests),
//! asked now or started ahead and waited for later.

use std::time::Duration;

use tfdata_client::DispatcherClient;
use tfdata_core::{Error, Result, Tensor};
use tfdata_proto::data::{self as wire, get_snapshot_split_response::Response};
use tfdata_rpc::CancellationToken;
use tfdata_rpc::retry::retry;

/// A split, or the end of the repetition's splits (`None`), with the local
/// index the dispatcher gave it (at the end: the number of splits the stream
/// has from this source).
pub type SplitAnswer = (Option<Tensor>, i64);

/// Where splits come from once the files are replayed: the dispatcher's
/// `GetSnapshotSplit`, or a fake in tests.
pub trait SplitSource: Send + Sync {
    /// The next split of `source` in `repetition` (`None`: end of splits)
    /// and the local index the dispatcher gave it (at the end: the number
    /// of splits the stream got from this source).
    fn next_split(&self, source: i64, repetition: i64) -> Result<SplitAnswer>;

    /// Starts the same request, to be waited for later. By default it is
    /// made now (test fakes); the dispatcher's runs on the worker's runtime.
    fn start_split(&self, source: i64, repetition: i64) -> PendingSplit {
        PendingSplit(Pending::Answered(self.next_split(source, repetition)))
    }
}

/// A `GetSnapshotSplit` in flight, or already answered.
pub struct PendingSplit(Pending);

enum Pending {
    Answered(Result<SplitAnswer>),
    Running {
        runtime: tokio::runtime::Handle,
        task: tokio::task::JoinHandle<Result<SplitAnswer>>,
    },
}

impl PendingSplit {
    /// Blocks until the answer is there (called from a writer thread, never
    /// from the runtime).
    pub(super) fn wait(self) -> Result<SplitAnswer> {
        match self.0 {
            Pending::Answered(answer) => answer,
            Pending::Running { runtime, task } => runtime
                .block_on(task)
                .map_err(|e| Error::Internal(format!("a GetSnapshotSplit request failed: {e}")))?,
        }
    }
}

/// `GetSnapshotSplit` for one stream, retried within `timeout`. Called
/// from the stream's writer thread, so it blocks on the worker's runtime
/// rather than runs on it.
pub struct DispatcherSplits {
    pub dispatcher: DispatcherClient,
    pub runtime: tokio::runtime::Handle,
    pub worker_address: String,
    pub base_path: String,
    pub stream_index: i64,
    pub timeout: Duration,
    pub cancel: CancellationToken,
}

impl DispatcherSplits {
    fn request(&self, source: i64, repetition: i64) -> wire::GetSnapshotSplitRequest {
        wire::GetSnapshotSplitRequest {
            worker_address: self.worker_address.clone(),
            base_path: self.base_path.clone(),
            stream_index: self.stream_index,
            source_index: source,
            repetition_index: repetition,
        }
    }
}

impl SplitSource for DispatcherSplits {
    fn next_split(&self, source: i64, repetition: i64) -> Result<SplitAnswer> {
        self.runtime.block_on(fetch_split(
            self.dispatcher.clone(),
            self.request(source, repetition),
            self.timeout,
            self.cancel.clone(),
        ))
    }

    fn start_split(&self, source: i64, repetition: i64) -> PendingSplit {
        let task = self.runtime.spawn(fetch_split(
            self.dispatcher.clone(),
            self.request(source, repetition),
            self.timeout,
            self.cancel.clone(),
        ));
        PendingSplit(Pending::Running {
            runtime: self.runtime.clone(),
            task,
        })
    }
}

/// One `GetSnapshotSplit`, retried within `timeout`.
async fn fetch_split(
    dispatcher: DispatcherClient,
    request: wire::GetSnapshotSplitRequest,
    timeout: Duration,
    cancel: CancellationToken,
) -> Result<SplitAnswer> {
    let response = retry(&dispatcher.target(), Some(timeout), &cancel, || {
        dispatcher.get_snapshot_split(request.clone())
    })
    .await?;
    let local = response.local_split_index;
    match response.response {
        Some(Response::Split(split)) => Ok((
            Some(tfdata_core::element::tensor_from_proto(&split)?),
            local,
        )),
        Some(Response::EndOfSplits(true)) => Ok((None, local)),
        Some(Response::EndOfSplits(false)) | None => Err(Error::Internal(format!(
            "the dispatcher answered GetSnapshotSplit for {} stream {} source {} with neither a \
             split nor end_of_splits",
            request.base_path, request.stream_index, request.source_index
        ))),
    }
}
