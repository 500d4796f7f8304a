//! The span each RPC runs in, carrying the ids its request names (dataset,
//! job, iteration, task, worker, reader), so every log line an RPC causes
//! can be traced to them (`tfdata --log-format json` prints them per line).
//!
//! Every field is declared on every span and recorded only when the request
//! has it: a JSON log line lists what the request named, nothing empty.

use tfdata_proto::data as wire;
use tracing::field::Empty;

/// The span of one `method` call; [`RequestIds::record`] fills its ids.
pub(crate) fn rpc_span(method: &'static str) -> tracing::Span {
    tracing::info_span!(
        "rpc",
        method,
        dataset = Empty,
        job = Empty,
        iteration = Empty,
        task = Empty,
        worker = Empty,
        client = Empty,
        snapshot = Empty,
    )
}

/// The ids a request names, recorded on its span.
pub(crate) trait RequestIds {
    fn record(&self, _span: &tracing::Span) {}
}

fn non_empty(span: &tracing::Span, field: &str, value: &str) {
    if !value.is_empty() {
        span.record(field, value);
    }
}

fn non_zero(span: &tracing::Span, field: &str, value: i64) {
    if value != 0 {
        span.record(field, value);
    }
}

impl RequestIds for wire::WorkerHeartbeatRequest {
    fn record(&self, span: &tracing::Span) {
        non_empty(span, "worker", &self.worker_address);
    }
}

impl RequestIds for wire::WorkerUpdateRequest {
    fn record(&self, span: &tracing::Span) {
        non_empty(span, "worker", &self.worker_address);
        if let [update] = self.updates.as_slice() {
            span.record("task", update.task_id);
        }
    }
}

impl RequestIds for wire::GetDatasetDefRequest {
    fn record(&self, span: &tracing::Span) {
        non_empty(span, "dataset", &self.dataset_id);
    }
}

impl RequestIds for wire::GetSplitRequest {
    fn record(&self, span: &tracing::Span) {
        span.record("iteration", self.iteration_id);
        non_zero(span, "task", self.tfdata_task_id);
        non_empty(span, "worker", &self.tfdata_worker_address);
    }
}

impl RequestIds for wire::GetOrRegisterDatasetRequest {
    fn record(&self, span: &tracing::Span) {
        if let Some(id) = &self.dataset_id {
            non_empty(span, "dataset", id);
        }
    }
}

impl RequestIds for wire::GetOrCreateJobRequest {
    fn record(&self, span: &tracing::Span) {
        non_empty(span, "dataset", &self.dataset_id);
    }
}

impl RequestIds for wire::GetOrCreateIterationRequest {
    fn record(&self, span: &tracing::Span) {
        span.record("job", self.job_id);
    }
}

impl RequestIds for wire::MaybeRemoveTaskRequest {
    fn record(&self, span: &tracing::Span) {
        span.record("task", self.task_id);
    }
}

impl RequestIds for wire::ReleaseIterationClientRequest {
    fn record(&self, span: &tracing::Span) {
        span.record("client", self.iteration_client_id);
    }
}

impl RequestIds for wire::ClientHeartbeatRequest {
    fn record(&self, span: &tracing::Span) {
        span.record("client", self.iteration_client_id);
    }
}

impl RequestIds for wire::GetDataServiceMetadataRequest {
    fn record(&self, span: &tracing::Span) {
        non_empty(span, "dataset", &self.dataset_id);
    }
}

impl RequestIds for wire::DisableCompressionAtRuntimeRequest {
    fn record(&self, span: &tracing::Span) {
        non_empty(span, "dataset", &self.dataset_id);
    }
}

impl RequestIds for wire::SnapshotRequest {
    fn record(&self, span: &tracing::Span) {
        non_empty(span, "snapshot", &self.path);
    }
}

impl RequestIds for wire::GetSnapshotSplitRequest {
    fn record(&self, span: &tracing::Span) {
        non_empty(span, "snapshot", &self.base_path);
        non_empty(span, "worker", &self.worker_address);
    }
}

impl RequestIds for wire::GetSnapshotStreamsRequest {
    fn record(&self, span: &tracing::Span) {
        non_empty(span, "snapshot", &self.path);
    }
}
