//! The numbers operators look at: [`Dispatcher::overview`] (everything a
//! status page shows: workers with their rates, readers with their
//! starvation, iterations with their progress, the demand estimate) and
//! [`Dispatcher::encode_metrics`] (the state gauges of `/metrics`, set from
//! the state when scraped, then every metric as OpenMetrics text).

use std::collections::HashMap;

use tfdata_core::{IterationClientId, IterationId};
use tfdata_proto::data::{TfdataReaderStats, TfdataWorkerStats};

use super::Dispatcher;
use super::load::{Demand, ReaderRates, WorkerRates};
use super::txn::Guarded;
use crate::distributed_snapshot::manager::{Mode, Progress};
use crate::metrics::{StateLabel, WorkerLabels};
use crate::state::DispatcherState;

/// A worker as operators see it.
#[derive(Debug, Clone)]
pub struct WorkerOverview {
    pub address: String,
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

/// An iteration's progress.
#[derive(Debug, Clone)]
pub struct IterationProgress {
    pub iteration: IterationId,
    pub finished: bool,
    /// distributed_epoch: splits produced so far in the current repetition,
    /// summed over split providers.
    pub splits_produced: i64,
    /// Their total, when every provider knows its cardinality.
    pub splits_total: Option<i64>,
    /// Elements its tfdata readers consumed (as they last reported).
    pub elements_consumed: u64,
    pub readers: usize,
}

/// Everything a status page shows, taken at one instant.
#[derive(Debug, Clone)]
pub struct Overview {
    pub now_micros: i64,
    pub fault_tolerant: bool,
    pub journal_failed: bool,
    /// Datasets, jobs, iterations, tasks, as journaled.
    pub state: DispatcherState,
    pub workers: Vec<WorkerOverview>,
    pub readers: Vec<ReaderOverview>,
    pub iterations: Vec<IterationProgress>,
    pub demand: Demand,
    /// Distributed snapshots by path.
    pub snapshots: Vec<(String, Progress)>,
}

impl Dispatcher {
    /// Everything a status page shows (a copy of the state included).
    pub async fn overview(&self) -> Overview {
        let now = self.clock.now_micros();
        let txn = self.ledger.begin().await;
        let worker_timeout = self.config.worker_timeout.as_micros() as i64;
        let workers = worker_overviews(&txn, now, worker_timeout);
        let readers = reader_overviews(&txn);
        let iterations = iteration_progress(&txn);
        let demand = txn.load.demand(&txn.state);
        let state = txn.state.clone();
        drop(txn);
        Overview {
            now_micros: now,
            fault_tolerant: self.config.fault_tolerant_mode,
            journal_failed: self.journal_failed(),
            state,
            workers,
            readers,
            iterations,
            demand,
            snapshots: self.snapshots.progress(),
        }
    }

    /// Sets the state gauges from the state, then encodes every metric
    /// (OpenMetrics text).
    pub async fn encode_metrics(&self) -> String {
        self.encode_metrics_as(tfdata_rpc::metrics::Format::OpenMetrics)
            .await
    }

    /// [`encode_metrics`](Self::encode_metrics) in `format`. Counting takes
    /// the state lock once, without copying the state.
    pub async fn encode_metrics_as(&self, format: tfdata_rpc::metrics::Format) -> String {
        let m = self.metrics();
        {
            let txn = self.ledger.begin().await;
            let state = &txn.state;
            for (state_label, lost) in [("live", false), ("lost", true)] {
                for (kind, tfdata) in [("tfdata", true), ("tensorflow", false)] {
                    let n = state
                        .workers()
                        .iter()
                        .filter(|w| w.lost == lost && w.runs_pipelines == tfdata)
                        .count();
                    m.workers
                        .get_or_create(&WorkerLabels {
                            state: state_label,
                            kind,
                        })
                        .set(n as i64);
                }
            }
            m.datasets.set(state.datasets().count() as i64);
            m.jobs.set(state.jobs().count() as i64);
            let (mut active, mut finished, mut collected) = (0, 0, 0);
            let mut pending = 0;
            for it in state.iterations() {
                pending += it.pending_tasks.len() as i64;
                if it.garbage_collected {
                    collected += 1;
                } else if it.finished {
                    finished += 1;
                } else {
                    active += 1;
                }
            }
            set(&m.iterations, "active", active);
            set(&m.iterations, "finished", finished);
            set(&m.iterations, "garbage_collected", collected);
            let done = state.tasks().filter(|t| t.finished).count() as i64;
            set(&m.tasks, "active", state.tasks().count() as i64 - done);
            set(&m.tasks, "finished", done);
            set(&m.tasks, "pending", pending);
            m.clients.set(state.clients().count() as i64);
            m.optimal_workers
                .set(txn.load.demand(state).optimal_workers);
            let starvation: Vec<f64> = txn
                .load
                .readers()
                .values()
                .filter_map(|r| r.rates.map(|r| r.starvation_ratio))
                .collect();
            let mean = if starvation.is_empty() {
                0.0
            } else {
                starvation.iter().sum::<f64>() / starvation.len() as f64
            };
            m.reader_starvation_mean.set(mean);
            m.reader_starvation_max
                .set(starvation.iter().copied().fold(0.0, f64::max));
        }
        let (mut active, mut done, mut error) = (0, 0, 0);
        let (mut assigned, mut orphan, mut streams_done) = (0, 0, 0);
        let (mut splits_assigned, mut splits_total) = (0, 0);
        for (_, p) in self.snapshots.progress() {
            match p.mode {
                Mode::Done => done += 1,
                Mode::Error(_) => error += 1,
                Mode::Active | Mode::WindingDown => active += 1,
            }
            for s in &p.streams {
                use tfdata_proto::data::snapshot_stream_info::State;
                match State::try_from(s.state) {
                    Ok(State::Done) => streams_done += 1,
                    Ok(State::Orphan) => orphan += 1,
                    _ => assigned += 1,
                }
            }
            splits_assigned += p.num_assigned_splits;
            splits_total += p.num_total_splits.max(0);
        }
        set(&m.snapshots, "active", active);
        set(&m.snapshots, "done", done);
        set(&m.snapshots, "error", error);
        set(&m.snapshot_streams, "assigned", assigned);
        set(&m.snapshot_streams, "orphan", orphan);
        set(&m.snapshot_streams, "done", streams_done);
        m.snapshot_splits_assigned.set(splits_assigned);
        m.snapshot_splits_total.set(splits_total);
        m.encode(format)
    }
}

fn set(
    family: &prometheus_client::metrics::family::Family<
        StateLabel,
        prometheus_client::metrics::gauge::Gauge,
    >,
    state: &'static str,
    value: i64,
) {
    family.get_or_create(&StateLabel { state }).set(value);
}

fn worker_overviews(g: &Guarded, now: i64, worker_timeout: i64) -> Vec<WorkerOverview> {
    let heartbeats = g.liveness.worker_heartbeats();
    g.state
        .workers()
        .iter()
        .map(|w| {
            let load = g.load.workers().get(w.address.as_str());
            let times: Vec<f64> = load
                .map(|l| l.processing_time_nsec.values().copied().collect())
                .unwrap_or_default();
            WorkerOverview {
                address: w.address.to_string(),
                lost: w.lost,
                tfdata: w.runs_pipelines,
                tasks: g.state.tasks_for_worker(&w.address).count(),
                last_heartbeat_age_micros: heartbeats
                    .get(w.address.as_str())
                    .map(|t| now.saturating_sub(*t).max(0)),
                rates: load.and_then(|l| l.rates),
                totals: load.and_then(|l| l.totals),
                processing_time_nsec: (!times.is_empty())
                    .then(|| times.iter().sum::<f64>() / times.len() as f64),
                heartbeat_warning: g
                    .liveness
                    .worker(&w.address)
                    .and_then(|h| h.timeout_warning(worker_timeout)),
            }
        })
        .collect()
}

fn reader_overviews(g: &Guarded) -> Vec<ReaderOverview> {
    let mut readers: Vec<ReaderOverview> = g
        .state
        .clients()
        .map(|(client, iteration)| {
            let load = g.load.readers().get(&client);
            ReaderOverview {
                client,
                iteration,
                target_processing_time_nsec: load.map_or(0.0, |l| l.target_processing_time_nsec),
                rates: load.and_then(|l| l.rates),
                totals: load.and_then(|l| l.totals),
            }
        })
        .collect();
    readers.sort_by_key(|r| r.client);
    readers
}

fn iteration_progress(g: &Guarded) -> Vec<IterationProgress> {
    let mut consumed: HashMap<IterationId, (u64, usize)> = HashMap::new();
    for (client, iteration) in g.state.clients() {
        let entry = consumed.entry(iteration).or_default();
        entry.1 += 1;
        if let Some(totals) = g.load.readers().get(&client).and_then(|l| l.totals) {
            entry.0 += totals.elements_consumed;
        }
    }
    g.state
        .iterations()
        .filter(|it| !it.garbage_collected)
        .map(|it| {
            let totals: Option<Vec<i64>> = g
                .split_providers
                .get(&it.id)
                .map(|providers| providers.iter().map(|p| p.cardinality()).collect());
            let (elements_consumed, readers) = consumed.get(&it.id).copied().unwrap_or_default();
            IterationProgress {
                iteration: it.id,
                finished: it.finished,
                splits_produced: it.split_indices.iter().sum(),
                splits_total: totals
                    .filter(|t| !t.is_empty() && t.iter().all(|&c| c >= 0))
                    .map(|t| t.iter().sum()),
                elements_consumed,
                readers,
            }
        })
        .collect()
}
