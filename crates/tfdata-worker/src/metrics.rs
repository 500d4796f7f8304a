//! Every metric the worker exports, declared in one place
//! (docs/operations.md lists them with their meaning). One registry per
//! worker instance.
//!
//! The data plane pays per batch or per `GetElement`, never per byte, and
//! only in atomics: handles for each transfer are resolved once here, not
//! looked up per call. The pipeline's busy and blocked times are kept by
//! each task's buffer under the lock it takes anyway, and summed when
//! scraped or reported ([`crate::worker::Worker::encode_metrics`]).

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tfdata_rpc::metrics::Histogram;

/// How elements left the worker: tfdata's element stream or `GetElement`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransferLabel {
    pub transfer: &'static str,
}

type Seconds = Counter<f64, AtomicU64>;

/// Elements and bytes sent through one transfer.
#[derive(Debug, Clone, Default)]
pub struct Sent {
    pub elements: Counter,
    pub bytes: Counter,
}

/// Snapshot chunks this worker committed.
#[derive(Debug, Clone, Default)]
pub struct SnapshotCommits {
    pub chunks: Counter,
    pub elements: Counter,
    pub bytes: Counter,
}

#[derive(Debug)]
pub struct WorkerMetrics {
    registry: Registry,
    // Set when scraped.
    pub tasks: Gauge,
    pub buffered_elements: Gauge,
    pub buffered_bytes: Gauge,
    pub pipeline_busy: Seconds,
    pub buffer_full: Seconds,
    // Events.
    pub stream: Sent,
    pub get_element: Sent,
    pub credit_wait: Seconds,
    pub get_split_duration: Histogram,
    pub snapshot: SnapshotCommits,
    // Brought up to the process's totals when scraped.
    pub webdataset_skipped_samples: Counter,
    pub webdataset_ignored_members: Counter,
}

impl Default for WorkerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl WorkerMetrics {
    pub fn new() -> Self {
        let sent_elements = Family::<TransferLabel, Counter>::default();
        let sent_bytes = Family::<TransferLabel, Counter>::default();
        let sent = |transfer| {
            let label = TransferLabel { transfer };
            Sent {
                elements: sent_elements.get_or_create(&label).clone(),
                bytes: sent_bytes.get_or_create(&label).clone(),
            }
        };
        let mut m = WorkerMetrics {
            registry: Registry::default(),
            tasks: Gauge::default(),
            buffered_elements: Gauge::default(),
            buffered_bytes: Gauge::default(),
            pipeline_busy: Seconds::default(),
            buffer_full: Seconds::default(),
            stream: sent("stream"),
            get_element: sent("get_element"),
            credit_wait: Seconds::default(),
            get_split_duration: Histogram::default(),
            snapshot: SnapshotCommits::default(),
            webdataset_skipped_samples: Counter::default(),
            webdataset_ignored_members: Counter::default(),
        };
        // prometheus-client appends `_total` to counter names itself.
        let r = &mut m.registry;
        r.register(
            "tfdata_worker_tasks",
            "Tasks this worker runs",
            m.tasks.clone(),
        );
        r.register(
            "tfdata_worker_buffered_elements",
            "Elements produced and waiting in the tasks' buffers for readers",
            m.buffered_elements.clone(),
        );
        r.register(
            "tfdata_worker_buffered_bytes",
            "Payload bytes of the elements waiting in the tasks' buffers",
            m.buffered_bytes.clone(),
        );
        r.register(
            "tfdata_worker_sent_elements",
            "Elements sent to readers, by transfer (stream: tfdata's element stream; get_element: GetElement)",
            sent_elements,
        );
        r.register(
            "tfdata_worker_sent_bytes",
            "Bytes of element messages sent to readers, by transfer",
            sent_bytes,
        );
        r.register(
            "tfdata_worker_pipeline_busy_seconds",
            "Time the tasks' pipelines spent producing elements (summed over tasks)",
            m.pipeline_busy.clone(),
        );
        r.register(
            "tfdata_worker_buffer_full_seconds",
            "Time the tasks' pipelines spent blocked on a full buffer, readers not taking elements as fast as they were made (summed over tasks)",
            m.buffer_full.clone(),
        );
        r.register(
            "tfdata_worker_stream_credit_wait_seconds",
            "Time element streams waited for their reader's credit (summed over streams)",
            m.credit_wait.clone(),
        );
        r.register(
            "tfdata_worker_get_split_duration_seconds",
            "Time from sending a distributed_epoch GetSplit (one lease of splits) to its answer (retries included); its count is the number of GetSplit requests",
            m.get_split_duration.clone(),
        );
        r.register(
            "tfdata_worker_snapshot_committed_chunks",
            "Distributed-snapshot chunk files this worker committed",
            m.snapshot.chunks.clone(),
        );
        r.register(
            "tfdata_worker_snapshot_committed_elements",
            "Elements in the snapshot chunks this worker committed",
            m.snapshot.elements.clone(),
        );
        r.register(
            "tfdata_worker_snapshot_committed_bytes",
            "Element bytes in the snapshot chunks this worker committed (before compression)",
            m.snapshot.bytes.clone(),
        );
        r.register(
            "tfdata_worker_webdataset_skipped_samples",
            "WebDataset samples dropped by on_error=\"skip\" (damaged, missing a field, a bad integer) in this worker's process",
            m.webdataset_skipped_samples.clone(),
        );
        r.register(
            "tfdata_worker_webdataset_ignored_members",
            "WebDataset tar members read past because their name has no key (README, .hidden), as webdataset drops them, in this worker's process",
            m.webdataset_ignored_members.clone(),
        );
        m
    }

    /// Raises a counter kept as a running total elsewhere to `total`.
    pub fn catch_up_count(counter: &Counter, total: u64) {
        let behind = total.saturating_sub(counter.get());
        if behind > 0 {
            counter.inc_by(behind);
        }
    }

    /// Raises a seconds counter kept as a running total elsewhere to
    /// `total` (never lowers it).
    pub fn catch_up(counter: &Seconds, total: f64) {
        let behind = total - counter.get();
        if behind > 0.0 {
            counter.inc_by(behind);
        }
    }

    pub fn encode(&self, format: tfdata_rpc::metrics::Format) -> String {
        tfdata_rpc::metrics::encode_as(&self.registry, format)
    }
}
