//! The numbers operators look at: [`Dispatcher::overview`] (the query the
//! status service and the status page both read, [`Overview`]: workers
//! with their rates, readers with their starvation, datasets, jobs,
//! iterations with their progress, tasks, the demand estimate, snapshots)
//! and [`Dispatcher::encode_metrics`] (the state gauges of `/metrics`, set
//! from the state when scraped, then every metric as OpenMetrics text).

use std::collections::HashMap;

use tfdata_core::IterationId;
use tfdata_proto::data::snapshot_stream_info::State as StreamState;

use super::Dispatcher;
use super::txn::Guarded;
use crate::distributed_snapshot::manager::{Mode, Progress};
use crate::metrics::{StateLabel, WorkerLabels};
use crate::overview::{
    DatasetOverview, DeterministicOverview, IterationOverview, JobOverview, Overview,
    ReaderOverview, SnapshotOverview, SnapshotStreamOverview, TaskOverview, WorkerOverview,
};

impl Dispatcher {
    /// Everything operators are shown, taken under one lock of the state.
    pub async fn overview(&self) -> Overview {
        let now = self.clock.now_micros();
        self.autocache_refresh();
        let txn = self.ledger.begin().await;
        let worker_timeout = self.config.worker_timeout.as_micros() as i64;
        let workers = worker_overviews(&txn, now, worker_timeout);
        let readers = reader_overviews(&txn);
        let iterations = iteration_overviews(&txn);
        let demand = txn.load.demand(&txn.state);
        let reorder_waits = txn.reorder_waits.overviews(now);
        let state = &txn.state;
        let datasets = state
            .datasets()
            .map(|d| DatasetOverview {
                id: d.id.clone(),
                compression: d.metadata.compression,
                cardinality: d.metadata.cardinality,
                element_spec: d.metadata.element_spec.clone(),
                runs_on_tfdata: d.runs_on_tfdata(),
                runs_on_tensorflow: d.runs_on_tensorflow(),
            })
            .collect();
        let jobs = state
            .jobs()
            .map(|j| JobOverview {
                id: j.id,
                name: j.name.clone(),
                dataset_id: j.dataset_id.clone(),
                sharding_policy: j.processing_mode.sharding_policy,
                num_consumers: j.num_consumers,
                target_workers: j.target_workers,
                cross_trainer_cache: j.use_cross_trainer_cache,
                deterministic: j.deterministic().map(|d| DeterministicOverview {
                    lanes: d.lanes,
                    split_shuffle_seed: d.split_shuffle_seed,
                }),
            })
            .collect();
        let tasks = state
            .tasks()
            .map(|t| TaskOverview {
                id: t.id,
                iteration: t.iteration_id,
                worker_address: t.worker_address.to_string(),
                finished: t.finished,
                starting_round: t.starting_round,
            })
            .collect();
        drop(txn);
        let scaling = self.scaling_overview();
        Overview {
            now_micros: now,
            fault_tolerant: self.config.fault_tolerant_mode,
            journal_failed: self.journal_failed(),
            worker_timeout: self.config.worker_timeout,
            workers,
            readers,
            datasets,
            jobs,
            iterations,
            tasks,
            demand,
            scaling,
            snapshots: self
                .snapshots
                .progress()
                .into_iter()
                .map(|(path, p)| snapshot_overview(path, &p))
                .collect(),
            reorder_waits,
            autocache: self.autocache.overview(),
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
            let mut txn = self.ledger.begin().await;
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
            let demand = txn.load.demand(state);
            m.optimal_workers.set(demand.optimal_workers);
            if demand.measured {
                m.tensorflow_optimal_workers.set(demand.optimal_workers);
            }
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
            let now = self.clock.now_micros();
            let g: &mut Guarded = &mut txn;
            g.reorder_waits.forget_ended(&g.state);
            let fullest = txn.reorder_waits.fullest_windows(now);
            set_reorder_series(m, &mut txn, &fullest);
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
                match StreamState::try_from(s.state) {
                    Ok(StreamState::Done) => streams_done += 1,
                    Ok(StreamState::Orphan) => orphan += 1,
                    _ => assigned += 1,
                }
            }
            splits_assigned += p.num_assigned_splits;
            splits_total += p.num_total_splits.max(0);
        }
        self.autocache_refresh();
        let rows = self.autocache.overview();
        for state in super::autocache::CacheState::ALL {
            let n = rows.iter().filter(|r| r.state == state.name()).count();
            set(&m.autocache_caches, state.label(), n as i64);
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

/// The per-worker reorder series: the window gauge set for every worker
/// with a record, and both series removed for workers that have none any
/// more (lost, or their iterations collected), so their number stays within
/// the registered workers.
fn set_reorder_series(
    m: &crate::metrics::DispatcherMetrics,
    g: &mut Guarded,
    fullest: &std::collections::BTreeMap<crate::state::WorkerAddress, u64>,
) {
    let live = |w: &crate::state::WorkerAddress| g.state.worker(w).is_some_and(|w| !w.lost);
    let gone: Vec<_> = g
        .reorder_waits
        .exported
        .iter()
        .filter(|w| !live(w) || !fullest.contains_key(*w))
        .cloned()
        .collect();
    for worker in gone {
        m.forget_reorder_series(&worker);
        g.reorder_waits.exported.remove(&worker);
    }
    for (worker, elements) in fullest {
        if live(worker) {
            m.reorder_window(worker).set(*elements as i64);
            g.reorder_waits.exported.insert(worker.clone());
        }
    }
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
                tags: w.tags.clone(),
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

fn snapshot_overview(path: String, p: &Progress) -> SnapshotOverview {
    SnapshotOverview {
        path,
        state: p.mode.describe(),
        error: match &p.mode {
            Mode::Error(status) => status.message.clone(),
            _ => String::new(),
        },
        assigned_splits: p.num_assigned_splits,
        total_splits: p.num_total_splits,
        streams: p
            .streams
            .iter()
            .map(|s| SnapshotStreamOverview {
                index: s.index,
                state: match StreamState::try_from(s.state) {
                    Ok(StreamState::Done) => "done",
                    Ok(StreamState::Orphan) => "orphan",
                    _ => "assigned",
                },
            })
            .collect(),
    }
}

fn iteration_overviews(g: &Guarded) -> Vec<IterationOverview> {
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
        .map(|it| {
            let totals: Option<Vec<i64>> = g
                .split_providers
                .get(&it.id)
                .map(|providers| providers.iter().map(|p| p.cardinality()).collect());
            let (elements_consumed, readers) = consumed.get(&it.id).copied().unwrap_or_default();
            IterationOverview {
                iteration: it.id,
                job_id: it.job_id,
                repetition: it.repetition.0,
                num_clients: it.num_clients,
                finished: it.finished,
                garbage_collected: it.garbage_collected,
                tasks: it.tasks.len(),
                pending_tasks: it.pending_tasks.len(),
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
