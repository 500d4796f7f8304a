//! What workers and readers report about their pace, and the demand
//! estimate made from it. Like liveness, this is not state: it lives beside
//! the journaled state (behind the same lock), is not replayed, and fills
//! again from heartbeats after a restart.
//!
//! * Workers report each active task's processing time per element
//!   (`ActiveTask.processing_time_nsec`, as TensorFlow's workers do) and,
//!   tfdata workers, cumulative figures (`tfdata_stats`) turned here into
//!   rates over the interval between two heartbeats.
//! * Readers report the time their trainer spends per element outside
//!   `next()` (`target_processing_time_nsec`, as TensorFlow's do) and,
//!   tfdata readers, cumulative figures (`tfdata_stats`): their starvation
//!   (the fraction of time spent waiting in `next()`) and consumption rate.
//!
//! The demand estimate follows TensorFlow's auto-scaler
//! (`tensorflow/core/data/service/auto_scaler.cc`,
//! `MultipleIterationsAutoScaler`): per iteration, the readers' summed
//! consumption rate (1 / target processing time) over the mean worker
//! production rate (1 / processing time, the last one each worker reported
//! for the iteration), outliers (beyond one standard deviation, with n - 1)
//! replaced by the median; at least 1; the largest estimate over
//! iterations, then, if above min(4 × current, current + 500), capped to
//! it, and to 100,000. One deviation: `current` is the live workers (lost
//! ones make nothing), where TensorFlow counts every registered worker and
//! updates nothing while none is registered; here 0 live counts as 1.

use std::collections::HashMap;

use tfdata_core::{IterationClientId, IterationId, TaskId};
use tfdata_proto::data::{self as wire, TfdataReaderStats, TfdataWorkerStats};

pub use crate::overview::{Demand, IterationDemand, ReaderRates, WorkerRates};
use crate::scaling::estimate::{bounded, iteration_estimate};
use crate::state::DispatcherState;

/// Rates are computed over at least this long (µs) between two reports:
/// readers also heartbeat every few milliseconds near an iteration's end.
const MIN_WINDOW_MICROS: i64 = 500_000;

/// What a worker last reported.
#[derive(Debug, Clone, Default)]
pub struct WorkerLoad {
    /// Per active task: its pipeline's time per element (ns), if known.
    pub processing_time_nsec: HashMap<TaskId, f64>,
    /// Per iteration: the last time per element (ns) it reported for one
    /// of its tasks there. Kept, as TensorFlow's auto-scaler keeps it, after
    /// the task ends, until the worker is lost or the iteration collected.
    pub iteration_processing_time_nsec: HashMap<IterationId, f64>,
    /// Cumulative figures (tfdata workers).
    pub totals: Option<TfdataWorkerStats>,
    pub rates: Option<WorkerRates>,
    /// The sample rates are computed from, and when (µs).
    sample: Option<(i64, TfdataWorkerStats)>,
}

/// What a reader last reported.
#[derive(Debug, Clone)]
pub struct ReaderLoad {
    pub iteration: IterationId,
    /// The trainer's time per element outside `next()` (ns), if known.
    pub target_processing_time_nsec: f64,
    pub totals: Option<TfdataReaderStats>,
    pub rates: Option<ReaderRates>,
    sample: Option<TfdataReaderStats>,
}

#[derive(Debug, Default)]
pub(crate) struct Load {
    workers: HashMap<String, WorkerLoad>,
    readers: HashMap<IterationClientId, ReaderLoad>,
}

impl Load {
    pub fn worker_heard(
        &mut self,
        req: &wire::WorkerHeartbeatRequest,
        now: i64,
        state: &DispatcherState,
    ) {
        let load = self.workers.entry(req.worker_address.clone()).or_default();
        load.processing_time_nsec.clear();
        for t in &req.active_tasks {
            if !(t.processing_time_nsec.is_finite() && t.processing_time_nsec > 0.0) {
                continue;
            }
            let task = TaskId(t.task_id);
            load.processing_time_nsec
                .insert(task, t.processing_time_nsec);
            // Tasks in order: the last one of an iteration wins, as in
            // TensorFlow's `ReportProcessingTimesFromActiveTasks`.
            if let Some(task) = state.task(task) {
                load.iteration_processing_time_nsec
                    .insert(task.iteration_id, t.processing_time_nsec);
            }
        }
        // Bounded by the iterations the state holds.
        load.iteration_processing_time_nsec
            .retain(|it, _| state.iteration(*it).is_some_and(|it| !it.garbage_collected));
        let Some(stats) = req.tfdata_stats else {
            return;
        };
        load.totals = Some(stats);
        match load.sample {
            Some((then, before)) if now - then >= MIN_WINDOW_MICROS => {
                let seconds = (now - then) as f64 / 1e6;
                let busy = (stats.pipeline_busy_seconds - before.pipeline_busy_seconds).max(0.0);
                let full = (stats.buffer_full_seconds - before.buffer_full_seconds).max(0.0);
                load.rates = Some(WorkerRates {
                    elements_per_second: delta(stats.elements_sent, before.elements_sent) / seconds,
                    bytes_per_second: delta(stats.bytes_sent, before.bytes_sent) / seconds,
                    buffer_full_ratio: ratio(full, busy + full),
                    credit_wait_per_second: (stats.credit_wait_seconds
                        - before.credit_wait_seconds)
                        .max(0.0)
                        / seconds,
                });
                load.sample = Some((now, stats));
            }
            Some(_) => {}
            None => load.sample = Some((now, stats)),
        }
    }

    pub fn reader_heard(
        &mut self,
        client: IterationClientId,
        iteration: IterationId,
        req: &wire::ClientHeartbeatRequest,
    ) {
        let load = self.readers.entry(client).or_insert_with(|| ReaderLoad {
            iteration,
            target_processing_time_nsec: 0.0,
            totals: None,
            rates: None,
            sample: None,
        });
        let target = req.target_processing_time_nsec;
        if target.is_finite() && target > 0.0 {
            load.target_processing_time_nsec = target;
        }
        let Some(stats) = req.tfdata_stats else {
            return;
        };
        load.totals = Some(stats);
        match load.sample {
            // The reader's own clock (its lifetime) measures the window.
            Some(before)
                if (stats.lifetime_seconds - before.lifetime_seconds) * 1e6
                    >= MIN_WINDOW_MICROS as f64 =>
            {
                let seconds = stats.lifetime_seconds - before.lifetime_seconds;
                load.rates = Some(ReaderRates {
                    starvation_ratio: ratio(
                        (stats.wait_seconds - before.wait_seconds).max(0.0),
                        seconds,
                    )
                    .min(1.0),
                    elements_per_second: delta(stats.elements_consumed, before.elements_consumed)
                        / seconds,
                    bytes_per_second: delta(stats.bytes_received, before.bytes_received) / seconds,
                });
                load.sample = Some(stats);
            }
            Some(_) => {}
            None => load.sample = Some(stats),
        }
    }

    pub fn forget_reader(&mut self, client: IterationClientId) {
        self.readers.remove(&client);
    }

    pub fn workers(&self) -> &HashMap<String, WorkerLoad> {
        &self.workers
    }

    pub fn readers(&self) -> &HashMap<IterationClientId, ReaderLoad> {
        &self.readers
    }

    /// The demand estimate for `state` (see the module docs).
    pub fn demand(&self, state: &DispatcherState) -> Demand {
        let live_workers = state.workers().iter().filter(|w| !w.lost).count() as i64;
        let mut consumption: HashMap<IterationId, Vec<f64>> = HashMap::new();
        for reader in self.readers.values() {
            if reader.target_processing_time_nsec > 0.0 {
                consumption
                    .entry(reader.iteration)
                    .or_default()
                    .push(1e9 / reader.target_processing_time_nsec);
            }
        }
        // Per iteration, per live worker: its last reported time per element.
        let mut throughput: HashMap<IterationId, Vec<f64>> = HashMap::new();
        for (address, load) in &self.workers {
            if state.worker(address).is_none_or(|w| w.lost) {
                continue;
            }
            for (iteration, nanos) in &load.iteration_processing_time_nsec {
                if state
                    .iteration(*iteration)
                    .is_none_or(|it| it.garbage_collected)
                {
                    continue;
                }
                throughput.entry(*iteration).or_default().push(1e9 / nanos);
            }
        }
        let mut iterations: Vec<IterationDemand> = consumption
            .iter()
            .filter_map(|(iteration, rates)| {
                let workers = throughput.get(iteration)?;
                let e = iteration_estimate(rates, workers)?;
                Some(IterationDemand {
                    iteration: *iteration,
                    consumption_per_second: e.consumption_per_second,
                    worker_throughput_per_second: e.worker_throughput_per_second,
                    reporting_workers: workers.len(),
                    workers: e.workers,
                })
            })
            .collect();
        iterations.sort_by_key(|d| d.iteration);
        let reading = !self.readers.is_empty();
        match iterations.iter().map(|d| d.workers).max() {
            Some(estimate) => Demand {
                optimal_workers: bounded(estimate, live_workers),
                measured: true,
                iterations,
            },
            None => Demand {
                optimal_workers: if reading { live_workers } else { 0 },
                measured: false,
                iterations,
            },
        }
    }
}

fn delta(now: u64, before: u64) -> f64 {
    now.saturating_sub(before) as f64
}

fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 { part / whole } else { 0.0 }
}
