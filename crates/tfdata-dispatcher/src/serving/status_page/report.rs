//! What the status page and `/api/status` show, taken from one
//! [`Overview`] (the query the status service renders too): rows ready to render (sorted worst first), the summary
//! over all of them, and the verdict. Rendering (HTML, JSON) reads only
//! this, so it is tested on hand-made reports.

use std::collections::HashMap;
use std::time::Duration;

use tfdata_core::{IterationId, JobId};
use tfdata_proto::data::{data_service_metadata::Compression, processing_mode_def::ShardingPolicy};

use super::verdict::{self, Evidence, Verdict};
use crate::overview::{
    AutocacheOverview, Demand, DeterministicOverview, JobOverview, Overview, ReaderRates,
    ScalingOverview, WorkerRates,
};

/// A live worker not heard from for longer than this (or half the worker
/// timeout, if shorter) is shown as stale: two of TensorFlow's default
/// 30 s heartbeat intervals.
pub const STALE_AFTER: Duration = Duration::from_secs(60);

/// Everything the page shows.
#[derive(Debug, Clone)]
pub struct StatusReport {
    /// When the overview was taken (µs since the epoch, dispatcher clock).
    pub taken_at_micros: i64,
    pub fault_tolerant: bool,
    pub journal_failed: bool,
    pub verdict: Verdict,
    pub demand: Demand,
    /// The scaling controller's last decision.
    pub scaling: ScalingOverview,
    /// Lost first, then stale, then live from the slowest.
    pub workers: Vec<WorkerRow>,
    /// Most starved first.
    pub readers: Vec<ReaderRow>,
    /// Active first, newest first.
    pub iterations: Vec<IterationRow>,
    pub datasets: Vec<DatasetRow>,
    pub snapshots: Vec<SnapshotRow>,
    /// What autocache decided, by dataset id.
    pub autocache: Vec<AutocacheOverview>,
    pub jobs: usize,
    /// Unfinished tasks, and coordinated reads' tasks waiting for a round.
    pub active_tasks: usize,
    pub pending_tasks: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum WorkerState {
    Lost,
    Stale,
    Live,
}

impl WorkerState {
    pub fn label(self) -> &'static str {
        match self {
            WorkerState::Lost => "lost",
            WorkerState::Stale => "stale",
            WorkerState::Live => "live",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRow {
    pub address: String,
    pub state: WorkerState,
    /// A tfdata worker, else TensorFlow's.
    pub tfdata: bool,
    pub tasks: usize,
    /// `None`: not heard since this dispatcher started.
    pub last_heartbeat_age: Option<Duration>,
    pub rates: Option<WorkerRates>,
    pub elements_sent: Option<u64>,
    pub bytes_sent: Option<u64>,
    /// Mean pipeline time per element over its tasks (ns).
    pub processing_time_nsec: Option<f64>,
    /// `worker_timeout` against its heartbeat interval, if they contradict.
    pub heartbeat_warning: Option<String>,
    /// Deterministic reads: how long readers' ordered merges waited on the
    /// lanes it serves in the last minute, and the fullest reorder window
    /// reported meanwhile (elements, bound). `None`: no reader reported it.
    pub reorder_wait: Option<Duration>,
    pub reorder_window: Option<(u64, u64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReaderRow {
    pub client: i64,
    pub iteration: i64,
    pub job_name: String,
    pub rates: Option<ReaderRates>,
    /// How fast its trainer would take elements if it never waited
    /// (1 / time per element outside `next()`).
    pub trainer_elements_per_second: Option<f64>,
    pub elements_consumed: Option<u64>,
    pub bytes_received: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct IterationRow {
    pub iteration: i64,
    pub job_id: i64,
    pub job_name: String,
    pub dataset_id: String,
    /// Its processing mode in words; a deterministic read's lanes and
    /// split shuffle seed too.
    pub processing_mode: String,
    pub deterministic: Option<DeterministicOverview>,
    pub repetition: i64,
    pub finished: bool,
    pub readers: usize,
    pub tasks: usize,
    /// distributed_epoch: splits handed out in this repetition, of the
    /// total where every split provider knows it.
    pub splits_produced: i64,
    pub splits_total: Option<i64>,
    pub elements_consumed: u64,
    /// Over its readers that report rates.
    pub starvation_mean: Option<f64>,
    pub consumed_per_second: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DatasetRow {
    pub id: String,
    /// TensorFlow's: -1 infinite, -2 unknown.
    pub cardinality: i64,
    pub compression: String,
    /// Which workers can run it.
    pub runs_on: &'static str,
    pub jobs: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotRow {
    pub path: String,
    pub state: &'static str,
    /// The error that stopped it, if any.
    pub error: String,
    pub splits_assigned: i64,
    /// -1 if unknown.
    pub splits_total: i64,
    pub streams_done: usize,
    pub streams: usize,
}

/// Totals over every row (not only the rendered ones).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Summary {
    pub live_workers: usize,
    pub stale_workers: usize,
    pub lost_workers: usize,
    pub tensorflow_workers: usize,
    pub elements_per_second: f64,
    pub bytes_per_second: f64,
    pub readers: usize,
    pub active_iterations: usize,
    pub finished_iterations: usize,
}

impl StatusReport {
    /// The report of `overview`.
    pub fn new(overview: &Overview) -> Self {
        let stale_after = STALE_AFTER.min(overview.worker_timeout / 2);
        let jobs: HashMap<JobId, &JobOverview> = overview.jobs.iter().map(|j| (j.id, j)).collect();
        let job_names: HashMap<IterationId, String> = overview
            .iterations
            .iter()
            .map(|it| {
                let name = jobs.get(&it.job_id).map(|j| j.name.clone());
                (it.iteration, name.unwrap_or_default())
            })
            .collect();

        // Per worker, over the deterministic iterations its lanes served.
        let mut reorder: HashMap<&str, ReorderFigures> = HashMap::new();
        for r in &overview.reorder_waits {
            let entry = reorder.entry(r.worker_address.as_str()).or_default();
            entry.0 += r.recent_wait;
            entry.1 = entry.1.max(r.recent_window);
        }
        let mut workers: Vec<WorkerRow> = overview
            .workers
            .iter()
            .map(|w| {
                let reorder = reorder.get(w.address.as_str());
                let age = w
                    .last_heartbeat_age_micros
                    .map(|a| Duration::from_micros(a.max(0) as u64));
                WorkerRow {
                    address: w.address.clone(),
                    state: if w.lost {
                        WorkerState::Lost
                    } else if age.is_some_and(|a| a > stale_after) {
                        WorkerState::Stale
                    } else {
                        WorkerState::Live
                    },
                    tfdata: w.tfdata,
                    tasks: w.tasks,
                    last_heartbeat_age: age,
                    rates: w.rates,
                    elements_sent: w.totals.map(|t| t.elements_sent),
                    bytes_sent: w.totals.map(|t| t.bytes_sent),
                    processing_time_nsec: w.processing_time_nsec,
                    heartbeat_warning: w.heartbeat_warning.clone(),
                    reorder_wait: reorder.map(|r| r.0),
                    reorder_window: reorder.and_then(|r| r.1),
                }
            })
            .collect();
        sort_worst_first(&mut workers);

        let mut readers: Vec<ReaderRow> = overview
            .readers
            .iter()
            .map(|r| ReaderRow {
                client: r.client.0,
                iteration: r.iteration.0,
                job_name: job_names.get(&r.iteration).cloned().unwrap_or_default(),
                rates: r.rates,
                trainer_elements_per_second: (r.target_processing_time_nsec > 0.0)
                    .then(|| 1e9 / r.target_processing_time_nsec),
                elements_consumed: r.totals.map(|t| t.elements_consumed),
                bytes_received: r.totals.map(|t| t.bytes_received),
            })
            .collect();
        readers.sort_by(|a, b| {
            let starvation = |r: &ReaderRow| r.rates.map_or(-1.0, |r| r.starvation_ratio);
            starvation(b)
                .total_cmp(&starvation(a))
                .then(a.client.cmp(&b.client))
        });

        let mut iterations: Vec<IterationRow> = overview
            .iterations
            .iter()
            .filter(|p| !p.garbage_collected)
            .filter_map(|p| {
                let job = jobs.get(&p.job_id)?;
                let rates: Vec<ReaderRates> = overview
                    .readers
                    .iter()
                    .filter(|r| r.iteration == p.iteration)
                    .filter_map(|r| r.rates)
                    .collect();
                let n = rates.len() as f64;
                Some(IterationRow {
                    iteration: p.iteration.0,
                    job_id: job.id.0,
                    job_name: job.name.clone(),
                    dataset_id: job.dataset_id.0.clone(),
                    processing_mode: match job.deterministic {
                        Some(d) => deterministic_mode(job.sharding_policy, d),
                        None => processing_mode(job.sharding_policy),
                    },
                    deterministic: job.deterministic,
                    repetition: p.repetition,
                    finished: p.finished,
                    readers: p.readers,
                    tasks: p.tasks,
                    splits_produced: p.splits_produced,
                    splits_total: p.splits_total,
                    elements_consumed: p.elements_consumed,
                    starvation_mean: (!rates.is_empty())
                        .then(|| rates.iter().map(|r| r.starvation_ratio).sum::<f64>() / n),
                    consumed_per_second: (!rates.is_empty())
                        .then(|| rates.iter().map(|r| r.elements_per_second).sum()),
                })
            })
            .collect();
        iterations.sort_by(|a, b| {
            a.finished
                .cmp(&b.finished)
                .then(b.iteration.cmp(&a.iteration))
        });

        let mut jobs_of: HashMap<&str, usize> = HashMap::new();
        for job in &overview.jobs {
            *jobs_of.entry(job.dataset_id.0.as_str()).or_default() += 1;
        }
        let datasets = overview
            .datasets
            .iter()
            .map(|d| DatasetRow {
                id: d.id.0.clone(),
                cardinality: d.cardinality,
                compression: Compression::try_from(d.compression)
                    .map_or("?", |c| match c {
                        Compression::Unspecified => "unspecified",
                        Compression::Off => "off",
                        Compression::Snappy => "snappy",
                        Compression::ForcedSnappy => "forced snappy",
                    })
                    .to_string(),
                runs_on: match (d.runs_on_tfdata, d.runs_on_tensorflow) {
                    (true, true) => "tfdata, TensorFlow",
                    (true, false) => "tfdata",
                    (false, true) => "TensorFlow",
                    (false, false) => "none",
                },
                jobs: jobs_of.get(d.id.0.as_str()).copied().unwrap_or(0),
            })
            .collect();

        let snapshots = overview
            .snapshots
            .iter()
            .map(|s| SnapshotRow {
                path: s.path.clone(),
                state: s.state,
                error: s.error.clone(),
                splits_assigned: s.assigned_splits,
                splits_total: s.total_splits,
                streams_done: s.streams.iter().filter(|s| s.state == "done").count(),
                streams: s.streams.len(),
            })
            .collect();

        let evidence = Evidence::gather(&overview.workers, &overview.readers, &overview.demand);
        let active_tasks = overview.tasks.iter().filter(|t| !t.finished).count();
        StatusReport {
            taken_at_micros: overview.now_micros,
            fault_tolerant: overview.fault_tolerant,
            journal_failed: overview.journal_failed,
            verdict: verdict::judge(&evidence),
            demand: overview.demand.clone(),
            scaling: overview.scaling.clone(),
            workers,
            readers,
            iterations,
            datasets,
            snapshots,
            autocache: overview.autocache.clone(),
            jobs: overview.jobs.len(),
            active_tasks,
            pending_tasks: overview.iterations.iter().map(|it| it.pending_tasks).sum(),
        }
    }

    /// Totals over all workers, readers and iterations.
    pub fn summary(&self) -> Summary {
        let mut s = Summary {
            readers: self.readers.len(),
            ..Default::default()
        };
        for w in &self.workers {
            match w.state {
                WorkerState::Live => s.live_workers += 1,
                WorkerState::Stale => s.stale_workers += 1,
                WorkerState::Lost => s.lost_workers += 1,
            }
            if !w.tfdata {
                s.tensorflow_workers += 1;
            }
            if let (Some(r), false) = (w.rates, w.state == WorkerState::Lost) {
                s.elements_per_second += r.elements_per_second;
                s.bytes_per_second += r.bytes_per_second;
            }
        }
        for it in &self.iterations {
            if it.finished {
                s.finished_iterations += 1;
            } else {
                s.active_iterations += 1;
            }
        }
        s
    }
}

/// Lost workers first, then stale ones (longest silent first), then live
/// ones from the slowest (those not reporting rates before them).
pub fn sort_worst_first(workers: &mut [WorkerRow]) {
    workers.sort_by(|a, b| {
        let speed = |w: &WorkerRow| w.rates.map_or(-1.0, |r| r.elements_per_second);
        a.state
            .cmp(&b.state)
            .then_with(|| match a.state {
                WorkerState::Live => speed(a).total_cmp(&speed(b)),
                _ => b.last_heartbeat_age.cmp(&a.last_heartbeat_age),
            })
            .then_with(|| a.address.cmp(&b.address))
    });
}

/// tfdata's names for TensorFlow's sharding policies.
fn processing_mode(policy: i32) -> String {
    match ShardingPolicy::try_from(policy) {
        Ok(ShardingPolicy::Off) => "parallel_epochs",
        Ok(ShardingPolicy::Dynamic) => "distributed_epoch",
        Ok(ShardingPolicy::File) => "static: file",
        Ok(ShardingPolicy::Data) => "static: data",
        Ok(ShardingPolicy::FileOrData) => "static: file or data",
        Ok(ShardingPolicy::Hint) => "static: hint",
        Err(_) => "unknown",
    }
    .to_string()
}

/// A worker's reorder wait in the last minute and its fullest window
/// (elements, bound), over the deterministic iterations it serves.
type ReorderFigures = (Duration, Option<(u64, u64)>);

/// A deterministic read's mode: its lanes, and its split shuffle seed if
/// it has one.
fn deterministic_mode(policy: i32, d: DeterministicOverview) -> String {
    let seed = d
        .split_shuffle_seed
        .map_or_else(String::new, |s| format!(", split shuffle seed {s}"));
    format!(
        "{}, deterministic: {} lanes{seed}",
        processing_mode(policy),
        d.lanes
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(address: &str, state: WorkerState, age_s: u64, speed: Option<f64>) -> WorkerRow {
        WorkerRow {
            address: address.into(),
            state,
            tfdata: true,
            tasks: 1,
            last_heartbeat_age: Some(Duration::from_secs(age_s)),
            rates: speed.map(|s| WorkerRates {
                elements_per_second: s,
                ..Default::default()
            }),
            elements_sent: None,
            bytes_sent: None,
            processing_time_nsec: None,
            heartbeat_warning: None,
            reorder_wait: None,
            reorder_window: None,
        }
    }

    #[test]
    fn workers_sort_worst_first() {
        let mut rows = vec![
            row("fast", WorkerState::Live, 1, Some(900.0)),
            row("stale-short", WorkerState::Stale, 70, Some(1.0)),
            row("slow", WorkerState::Live, 1, Some(10.0)),
            row("lost", WorkerState::Lost, 700, None),
            row("silent", WorkerState::Live, 1, None),
            row("stale-long", WorkerState::Stale, 300, None),
        ];
        sort_worst_first(&mut rows);
        let order: Vec<&str> = rows.iter().map(|r| r.address.as_str()).collect();
        assert_eq!(
            order,
            [
                "lost",
                "stale-long",
                "stale-short",
                "silent",
                "slow",
                "fast"
            ]
        );
    }

    #[test]
    fn processing_modes_have_tfdata_names() {
        assert_eq!(processing_mode(0), "parallel_epochs");
        assert_eq!(processing_mode(1), "distributed_epoch");
        assert_eq!(processing_mode(4), "static: file or data");
        assert_eq!(processing_mode(99), "unknown");
    }
}
