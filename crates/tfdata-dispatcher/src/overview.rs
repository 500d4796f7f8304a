//! The one query operators' views read: [`Overview`], everything the
//! dispatcher shows of itself taken at one instant, as plain rows.
//! `Dispatcher::overview` (in `dispatcher::overview`) fills it under the
//! state's lock; the status service (`tfdata status`) and the status page
//! (`/` and `/api/status`) each render it, so neither reads the state
//! machine or the dispatcher's internals, and the two cannot disagree on
//! what they were shown.
//!
//! The pace figures ([`WorkerRates`], [`ReaderRates`], [`Demand`]) are
//! defined here and computed by `dispatcher::load`.

use std::time::Duration;

use bytes::Bytes;
use tfdata_core::{DatasetId, IterationClientId, IterationId, JobId, TaskId};
use tfdata_proto::data::{TfdataReaderStats, TfdataWorkerStats};

/// Everything operators are shown, taken at one instant.
#[derive(Debug, Clone)]
pub struct Overview {
    pub now_micros: i64,
    pub fault_tolerant: bool,
    pub journal_failed: bool,
    /// The dispatcher's `worker_timeout` (a worker silent for long is shown
    /// as stale before it is lost).
    pub worker_timeout: Duration,
    pub workers: Vec<WorkerOverview>,
    pub readers: Vec<ReaderOverview>,
    pub datasets: Vec<DatasetOverview>,
    pub jobs: Vec<JobOverview>,
    /// Every iteration the state holds, garbage-collected ones included.
    pub iterations: Vec<IterationOverview>,
    pub tasks: Vec<TaskOverview>,
    pub demand: Demand,
    /// The scaling controller's last decision.
    pub scaling: ScalingOverview,
    /// Distributed snapshots (`distributed_save`), by path.
    pub snapshots: Vec<SnapshotOverview>,
    /// Deterministic reads' readers' reorder waits, per iteration and
    /// worker, by iteration then worker.
    pub reorder_waits: Vec<ReorderWaitOverview>,
    /// What autocache decided, per dataset a job asked for (issue 36).
    pub autocache: Vec<AutocacheOverview>,
}

/// What autocache decided for one dataset (`AutocacheStatus` on the wire).
#[derive(Debug, Clone, PartialEq)]
pub struct AutocacheOverview {
    pub dataset_id: DatasetId,
    /// "profiling", "writing", "cached", "not cached", "dropped".
    pub state: &'static str,
    /// Why, in one sentence.
    pub reason: String,
    /// The chosen (or best) point, e.g. "2: map(decode_jpeg)".
    pub point: String,
    /// The cache's directory.
    pub path: String,
    pub compute_seconds_per_element: f64,
    pub read_seconds_per_element: f64,
    pub bytes_per_element: f64,
    /// Jobs that read the cache instead of the pipeline.
    pub jobs_served: i64,
}

/// What the readers of a deterministic iteration reported of one worker:
/// the time their ordered merge waited for the lanes it serves while other
/// lanes' elements were buffered (a slow worker's lanes hold readers up).
#[derive(Debug, Clone, PartialEq)]
pub struct ReorderWaitOverview {
    pub iteration: IterationId,
    pub worker_address: String,
    /// Reported within the last minute (summed over readers and lanes).
    pub recent_wait: Duration,
    /// Reported since the dispatcher started.
    pub total_wait: Duration,
    /// The fullest reorder window a reader reported within the last
    /// minute while waiting on it: (elements, the window's bound).
    pub recent_window: Option<(u64, u64)>,
}

/// A deterministic read's setting (`ProcessingModeDef.tfdata_deterministic`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeterministicOverview {
    pub lanes: i64,
    pub split_shuffle_seed: Option<u64>,
}

/// The scaling controller as operators see it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScalingOverview {
    /// How often it decides.
    pub period: Duration,
    /// The callers' bounds (the last `GetScalingAdvice` request's).
    pub bounds: crate::scaling::Bounds,
    /// `None` before its first decision.
    pub decision: Option<crate::scaling::Decision>,
}

/// A worker as operators see it.
#[derive(Debug, Clone)]
pub struct WorkerOverview {
    pub address: String,
    pub tags: Vec<String>,
    pub lost: bool,
    /// A tfdata worker (else TensorFlow's).
    pub tfdata: bool,
    /// Its assigned, unfinished tasks.
    pub tasks: usize,
    /// Age of its last heartbeat (µs); `None` if not heard since this
    /// dispatcher started.
    pub last_heartbeat_age_micros: Option<i64>,
    /// Its pace over its last heartbeat interval (tfdata workers).
    pub rates: Option<WorkerRates>,
    /// Its cumulative figures (tfdata workers).
    pub totals: Option<TfdataWorkerStats>,
    /// Mean processing time per element (ns) over its active tasks, if
    /// reported (tfdata and TensorFlow workers).
    pub processing_time_nsec: Option<f64>,
    /// Why `worker_timeout` contradicts its heartbeat interval, if it does
    /// (its timeout raised, or, for a TensorFlow worker, a risk).
    pub heartbeat_warning: Option<String>,
}

/// A reader (iteration client) as operators see it.
#[derive(Debug, Clone)]
pub struct ReaderOverview {
    pub client: IterationClientId,
    pub iteration: IterationId,
    /// The trainer's time per element outside `next()` (ns); 0 if unknown.
    pub target_processing_time_nsec: f64,
    /// Starvation and consumption over its last heartbeat interval
    /// (tfdata readers).
    pub rates: Option<ReaderRates>,
    pub totals: Option<TfdataReaderStats>,
}

/// A registered dataset.
#[derive(Debug, Clone)]
pub struct DatasetOverview {
    pub id: DatasetId,
    /// TensorFlow's `DataServiceMetadata.Compression`, as registered.
    pub compression: i32,
    /// TensorFlow's: -1 infinite, -2 unknown.
    pub cardinality: i64,
    /// The encoded `StructuredValue`, if registered with one.
    pub element_spec: Option<Bytes>,
    /// Which workers can run it.
    pub runs_on_tfdata: bool,
    pub runs_on_tensorflow: bool,
}

/// A job.
#[derive(Debug, Clone)]
pub struct JobOverview {
    pub id: JobId,
    pub name: String,
    pub dataset_id: DatasetId,
    /// TensorFlow's `ProcessingModeDef.ShardingPolicy`.
    pub sharding_policy: i32,
    pub num_consumers: Option<i64>,
    /// TensorFlow's `TargetWorkers`.
    pub target_workers: i32,
    pub cross_trainer_cache: bool,
    /// A deterministic read's lanes and seed.
    pub deterministic: Option<DeterministicOverview>,
}

/// An iteration and its progress.
#[derive(Debug, Clone)]
pub struct IterationOverview {
    pub iteration: IterationId,
    pub job_id: JobId,
    pub repetition: i64,
    pub num_clients: i64,
    pub finished: bool,
    pub garbage_collected: bool,
    /// Its active tasks.
    pub tasks: usize,
    /// Coordinated reads: its tasks waiting to join at an agreed round.
    pub pending_tasks: usize,
    /// distributed_epoch: splits produced so far in the current repetition,
    /// summed over split providers.
    pub splits_produced: i64,
    /// Their total, when every provider knows its cardinality.
    pub splits_total: Option<i64>,
    /// Elements its tfdata readers consumed (as they last reported).
    pub elements_consumed: u64,
    /// Its readers (iteration clients).
    pub readers: usize,
}

/// A task.
#[derive(Debug, Clone)]
pub struct TaskOverview {
    pub id: TaskId,
    pub iteration: IterationId,
    pub worker_address: String,
    pub finished: bool,
    pub starting_round: i64,
}

/// A distributed snapshot (`distributed_save`) the dispatcher knows.
#[derive(Debug, Clone)]
pub struct SnapshotOverview {
    pub path: String,
    /// "active", "winding down", "done" or "error".
    pub state: &'static str,
    /// The failure, for state "error"; else empty.
    pub error: String,
    pub assigned_splits: i64,
    /// -1 if unknown.
    pub total_splits: i64,
    pub streams: Vec<SnapshotStreamOverview>,
}

/// One stream of a distributed snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotStreamOverview {
    pub index: i64,
    /// "assigned", "orphan" or "done".
    pub state: &'static str,
}

/// A tfdata worker's pace over its last heartbeat interval.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WorkerRates {
    /// Elements and bytes sent to readers per second.
    pub elements_per_second: f64,
    pub bytes_per_second: f64,
    /// Fraction of its pipelines' time spent blocked on a full buffer
    /// (readers not taking elements as fast as they are made).
    pub buffer_full_ratio: f64,
    /// Seconds per second its element streams waited for readers' credit
    /// (summed over streams, so it can pass 1).
    pub credit_wait_per_second: f64,
}

/// A tfdata reader's pace over its last heartbeat interval.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ReaderRates {
    /// Fraction of the time its trainer waited in `next()`.
    pub starvation_ratio: f64,
    pub elements_per_second: f64,
    pub bytes_per_second: f64,
}

/// One iteration's part of the demand estimate.
#[derive(Debug, Clone, PartialEq)]
pub struct IterationDemand {
    pub iteration: IterationId,
    /// Readers' summed consumption rate (elements/s), outliers replaced.
    pub consumption_per_second: f64,
    /// Mean production rate of one worker (elements/s), outliers replaced.
    pub worker_throughput_per_second: f64,
    /// Workers reporting a processing time for this iteration.
    pub reporting_workers: usize,
    /// `ceil(consumption / throughput)`, at least 1.
    pub workers: i64,
}

/// The dispatcher's demand estimate.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Demand {
    /// What `tfdata_dispatcher_optimal_workers` exports: the bounded
    /// estimate; the live workers when readers read but nothing is measured
    /// yet; 0 when no reader reads.
    pub optimal_workers: i64,
    /// Whether `optimal_workers` comes from measurements.
    pub measured: bool,
    pub iterations: Vec<IterationDemand>,
}
