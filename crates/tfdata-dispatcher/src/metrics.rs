//! Every metric the dispatcher exports, declared in one place
//! (docs/operations.md lists them with their meaning). One registry per
//! dispatcher instance. Counters and histograms are updated where things
//! happen (an RPC, a journal write, a split); gauges that describe the
//! state are set from it when `/metrics` is scraped
//! ([`crate::Dispatcher::encode_metrics`]), so the RPC path never pays
//! for them.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tfdata_core::error::code_name;
use tfdata_rpc::metrics::{Histogram, prometheus_client};

/// `method` and `code` of an RPC: both from fixed sets.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    pub method: &'static str,
    pub code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabel {
    pub method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    pub state: &'static str,
}

/// A worker's state (`live`, `lost`) and kind (`tfdata`, `tensorflow`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkerLabels {
    pub state: &'static str,
    pub kind: &'static str,
}

/// Where a split handed out came from: a split provider, or the pool of
/// splits a lost worker had not delivered.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabel {
    pub source: &'static str,
}

/// A worker's address: a label bounded by the registered workers, and
/// removed when the worker goes (`forget_reorder_series`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkerLabel {
    pub worker: String,
}

/// A scaling decision's direction (`up`, `down`) and how it ended
/// (`kept`, `reverted`, `abandoned`, `idle`): both from fixed sets.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScalingLabels {
    pub direction: &'static str,
    pub outcome: &'static str,
}

type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;
type FloatCounter = Counter<f64, std::sync::atomic::AtomicU64>;

/// The dispatcher's metrics. Cloning a metric handle shares it.
#[derive(Debug)]
pub struct DispatcherMetrics {
    registry: Registry,
    // State, set at scrape time.
    pub workers: Family<WorkerLabels, Gauge>,
    pub datasets: Gauge,
    pub jobs: Gauge,
    pub iterations: Family<StateLabel, Gauge>,
    pub tasks: Family<StateLabel, Gauge>,
    pub clients: Gauge,
    pub snapshots: Family<StateLabel, Gauge>,
    pub snapshot_streams: Family<StateLabel, Gauge>,
    pub snapshot_splits_assigned: Gauge,
    pub snapshot_splits_total: Gauge,
    pub optimal_workers: Gauge,
    /// The same estimate under TensorFlow's name, set (as TensorFlow sets
    /// it) only when measured: the last measured value otherwise.
    pub tensorflow_optimal_workers: Gauge,
    pub reader_starvation_mean: FloatGauge,
    pub reader_starvation_max: FloatGauge,
    /// Autocache's datasets by state (issue 36).
    pub autocache_caches: Family<StateLabel, Gauge>,
    // Events.
    rpcs: Family<RpcLabels, Counter>,
    rpc_duration: Family<MethodLabel, Histogram>,
    pub journal_write_duration: Histogram,
    pub journal_written_bytes: Counter,
    pub journal_updates: Counter,
    pub journal_compactions: Counter,
    pub splits_handed_out: Family<SourceLabel, Counter>,
    pub splits_returned: Counter,
    pub workers_probed_lost: Counter,
    /// Jobs autocache served from a cache instead of the pipeline.
    pub autocache_jobs_served: Counter,
    /// The scaling controller's target (set at each decision) and its
    /// judged decisions.
    pub target_workers: Gauge,
    pub scaling_decisions: Family<ScalingLabels, Counter>,
    /// Deterministic reads: readers' reorder waits per worker (counted as
    /// heartbeats report them), and the fullest window reported in the
    /// last minute (set at scrape time).
    reorder_wait: Family<WorkerLabel, FloatCounter>,
    reorder_window: Family<WorkerLabel, Gauge>,
}

impl Default for DispatcherMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl DispatcherMetrics {
    pub fn new() -> Self {
        let mut m = DispatcherMetrics {
            registry: Registry::default(),
            workers: Family::default(),
            datasets: Gauge::default(),
            jobs: Gauge::default(),
            iterations: Family::default(),
            tasks: Family::default(),
            clients: Gauge::default(),
            snapshots: Family::default(),
            snapshot_streams: Family::default(),
            snapshot_splits_assigned: Gauge::default(),
            snapshot_splits_total: Gauge::default(),
            optimal_workers: Gauge::default(),
            tensorflow_optimal_workers: Gauge::default(),
            reader_starvation_mean: FloatGauge::default(),
            reader_starvation_max: FloatGauge::default(),
            autocache_caches: Family::default(),
            rpcs: Family::default(),
            rpc_duration: Family::default(),
            journal_write_duration: Histogram::default(),
            journal_written_bytes: Counter::default(),
            journal_updates: Counter::default(),
            journal_compactions: Counter::default(),
            splits_handed_out: Family::default(),
            splits_returned: Counter::default(),
            workers_probed_lost: Counter::default(),
            autocache_jobs_served: Counter::default(),
            target_workers: Gauge::default(),
            scaling_decisions: Family::default(),
            reorder_wait: Family::default(),
            reorder_window: Family::default(),
        };
        // prometheus-client appends `_total` to counter names itself.
        let r = &mut m.registry;
        r.register(
            "tfdata_dispatcher_workers",
            "Registered workers by state (live, lost) and kind (tfdata, tensorflow)",
            m.workers.clone(),
        );
        r.register(
            "tfdata_dispatcher_datasets",
            "Registered datasets",
            m.datasets.clone(),
        );
        r.register("tfdata_dispatcher_jobs", "Jobs", m.jobs.clone());
        r.register(
            "tfdata_dispatcher_iterations",
            "Iterations by state (active, finished, garbage_collected)",
            m.iterations.clone(),
        );
        r.register(
            "tfdata_dispatcher_tasks",
            "Tasks by state (active, finished, pending: a coordinated read's task waiting for its round)",
            m.tasks.clone(),
        );
        r.register(
            "tfdata_dispatcher_clients",
            "Iteration clients (readers) attached to iterations",
            m.clients.clone(),
        );
        r.register(
            "tfdata_dispatcher_snapshots",
            "Distributed snapshots by state (active, done, error)",
            m.snapshots.clone(),
        );
        r.register(
            "tfdata_dispatcher_snapshot_streams",
            "Streams of distributed snapshots by state (assigned, orphan, done)",
            m.snapshot_streams.clone(),
        );
        r.register(
            "tfdata_dispatcher_snapshot_splits_assigned",
            "Splits of distributed snapshots handed to stream writers",
            m.snapshot_splits_assigned.clone(),
        );
        r.register(
            "tfdata_dispatcher_snapshot_splits",
            "Splits of distributed snapshots in all, where known",
            m.snapshot_splits_total.clone(),
        );
        r.register(
            "tfdata_dispatcher_autocache_caches",
            "Autocache's datasets by state (profiling, writing, cached, not_cached, dropped)",
            m.autocache_caches.clone(),
        );
        r.register(
            "tfdata_dispatcher_autocache_jobs_served",
            "Jobs autocache served from a cache instead of running the pipeline's prefix",
            m.autocache_jobs_served.clone(),
        );
        r.register(
            "tfdata_dispatcher_optimal_workers",
            "Workers that would keep the readers fed: readers' consumption over workers' production rates (TensorFlow's auto_scaler idea); 0 without readers",
            m.optimal_workers.clone(),
        );
        // TensorFlow's `/tensorflow/data/service/optimal_number_of_workers`,
        // as Prometheus spells it: dashboards and autoscalers written for
        // TensorFlow's dispatcher find it here too.
        r.register(
            "tensorflow_data_service_optimal_number_of_workers",
            "TensorFlow's metric /tensorflow/data/service/optimal_number_of_workers: the bounded estimate of the workers needed (same as tfdata_dispatcher_optimal_workers, kept at its last measured value when nothing is measured, as TensorFlow does)",
            m.tensorflow_optimal_workers.clone(),
        );
        r.register(
            "tfdata_dispatcher_target_workers",
            "The scaling controller's target: how many workers to run now (GetScalingAdvice; docs/operations.md, Scaling)",
            m.target_workers.clone(),
        );
        r.register(
            "tfdata_dispatcher_scaling_decisions",
            "Changes of the scaling controller's target, counted when judged: by direction (up, down) and outcome (kept, reverted, abandoned: readers left first, idle: dropped to the minimum without readers)",
            m.scaling_decisions.clone(),
        );
        r.register(
            "tfdata_dispatcher_reader_starvation_mean_ratio",
            "Mean over reporting readers of the fraction of time the trainer waited in next(), over each reader's last heartbeat interval",
            m.reader_starvation_mean.clone(),
        );
        r.register(
            "tfdata_dispatcher_reader_starvation_max_ratio",
            "Largest fraction of time a reporting reader's trainer waited in next(), over its last heartbeat interval",
            m.reader_starvation_max.clone(),
        );
        r.register(
            "tfdata_dispatcher_rpcs",
            "RPCs answered, by method and gRPC status code",
            m.rpcs.clone(),
        );
        r.register(
            "tfdata_dispatcher_rpc_duration_seconds",
            "Time to answer an RPC, by method (its durable journal write included)",
            m.rpc_duration.clone(),
        );
        r.register(
            "tfdata_dispatcher_journal_write_duration_seconds",
            "Time of one journal write: a group of updates written and synced (or one object), or a compaction",
            m.journal_write_duration.clone(),
        );
        r.register(
            "tfdata_dispatcher_journal_written_bytes",
            "Bytes written to the journal (records and compactions)",
            m.journal_written_bytes.clone(),
        );
        r.register(
            "tfdata_dispatcher_journal_updates",
            "State updates written to the journal",
            m.journal_updates.clone(),
        );
        r.register(
            "tfdata_dispatcher_journal_compactions",
            "Journal compactions (the state written whole, the history before it dropped)",
            m.journal_compactions.clone(),
        );
        r.register(
            "tfdata_dispatcher_splits_handed_out",
            "distributed_epoch splits handed to workers (a retried request's same answer not counted), by source (provider, returned)",
            m.splits_handed_out.clone(),
        );
        r.register(
            "tfdata_dispatcher_splits_returned",
            "Splits a lost worker had not delivered, returned to the pool to be produced again",
            m.splits_returned.clone(),
        );
        r.register(
            "tfdata_dispatcher_workers_probed_lost",
            "Workers declared lost before worker_timeout because their port refused the dispatcher's probes (a reader reported it refusing, or heartbeats were overdue)",
            m.workers_probed_lost.clone(),
        );
        r.register(
            "tfdata_dispatcher_reorder_wait_seconds",
            "Deterministic reads: time readers' ordered merges waited for the next element of a lane this worker serves while other lanes' elements were buffered, as readers report it (a slow worker's grows fastest)",
            m.reorder_wait.clone(),
        );
        r.register(
            "tfdata_dispatcher_reorder_window_elements",
            "Deterministic reads: the fullest reorder window (elements buffered beyond the merge point) a reader reported in the last minute while waiting on a lane this worker serves",
            m.reorder_window.clone(),
        );
        m
    }

    /// Readers waited `waited` on lanes `worker` serves.
    pub fn reorder_waited(&self, worker: &str, waited: Duration) {
        self.reorder_wait
            .get_or_create(&WorkerLabel {
                worker: worker.to_string(),
            })
            .inc_by(waited.as_secs_f64());
    }

    /// The window gauge of `worker`.
    pub fn reorder_window(&self, worker: &str) -> Gauge {
        self.reorder_window
            .get_or_create(&WorkerLabel {
                worker: worker.to_string(),
            })
            .clone()
    }

    /// Removes `worker`'s reorder series (it was lost, or nothing of it is
    /// recorded any more): a counter that comes back starts at 0, which
    /// Prometheus reads as a reset.
    pub fn forget_reorder_series(&self, worker: &str) {
        let label = WorkerLabel {
            worker: worker.to_string(),
        };
        self.reorder_wait.remove(&label);
        self.reorder_window.remove(&label);
    }

    /// Counts one answered RPC and its duration.
    pub fn rpc(&self, method: &'static str, code: tonic::Code, elapsed: Duration) {
        self.rpcs
            .get_or_create(&RpcLabels {
                method,
                code: code_name(code),
            })
            .inc();
        self.rpc_duration
            .get_or_create(&MethodLabel { method })
            .observe(elapsed);
    }

    /// A split handed out, from a provider (`returned`: from a lost
    /// worker's pool).
    pub fn splits_handed_out(&self, returned: bool, count: u64) {
        let source = if returned { "returned" } else { "provider" };
        self.splits_handed_out
            .get_or_create(&SourceLabel { source })
            .inc_by(count);
    }

    /// The metrics in `format` (gauges as last set).
    pub fn encode(&self, format: tfdata_rpc::metrics::Format) -> String {
        tfdata_rpc::metrics::encode_as(&self.registry, format)
    }
}
