//! [`DispatcherState`] to and from its compacted form, the one message a
//! journal compaction writes (`tfdata.compaction.CompactedState`). The
//! derived indexes (by name, by key, tasks by worker) are rebuilt on load,
//! so a compacted state holds each fact once. Invariant (tested): `from_compacted(to_compacted(s)) == s`.
//!
//! Restoring is the one way into the state besides `apply`: the decoded
//! state must pass [`DispatcherState::check_invariants`], the invariants
//! `apply` keeps, or the compacted state is refused as data loss (and the caller
//! names the file).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use tfdata_core::positions::PositionSet;

use tfdata_core::{DatasetId, Error, IterationClientId, IterationId, JobId, Result, TaskId};
use tfdata_proto::data::{TfdataSplitName, TfdataSplitPieces};
use tfdata_proto::tfdata::compaction as wire;

use crate::state::{
    Dataset, DispatcherState, HeldSplit, HeldSplitKey, Iteration, IterationKey, Job, LastSplit,
    PendingTask, ProviderIndex, ProviderPass, Repetition, ReturnedSplit, SplitName, SplitRequester,
    Task, Worker,
};

pub const COMPACTION_FORMAT_VERSION: u32 = 1;

impl DispatcherState {
    pub fn to_compacted(&self) -> wire::CompactedState {
        wire::CompactedState {
            format_version: COMPACTION_FORMAT_VERSION,
            datasets: self
                .datasets
                .values()
                .map(|d| wire::Dataset {
                    id: d.id.0.clone(),
                    metadata: Some(d.metadata.clone()),
                    compression_disabled_at_runtime: d.compression_disabled_at_runtime,
                    is_pipeline: d.is_pipeline,
                    tfdata_workers_run_graph: d.tfdata_runs_graph,
                    tfdata_unsupported_ops: d.unsupported_ops.clone(),
                    tfdata_tensorflow_cannot_run: d.tensorflow_cannot_run,
                })
                .collect(),
            next_dataset_id: self.next_dataset_id,
            workers: self
                .workers
                .iter()
                .map(|w| wire::Worker {
                    address: w.address.to_string(),
                    transfer_servers: w.transfer_servers.clone(),
                    tags: w.tags.clone(),
                    uid: w.uid,
                    lost: w.lost,
                    runs_pipelines: w.runs_pipelines,
                })
                .collect(),
            jobs: self
                .jobs
                .values()
                .map(|j| wire::Job {
                    id: j.id.0,
                    name: j.name.clone(),
                    dataset_id: j.dataset_id.0.clone(),
                    processing_mode: Some(j.processing_mode),
                    num_consumers: j.num_consumers,
                    target_workers: j.target_workers,
                    use_cross_trainer_cache: j.use_cross_trainer_cache,
                })
                .collect(),
            next_job_id: self.next_job_id,
            iterations: self.iterations.values().map(iteration_to_wire).collect(),
            next_iteration_id: self.next_iteration_id,
            clients: self
                .clients
                .iter()
                .map(|(c, i)| wire::Client {
                    id: c.0,
                    iteration_id: i.0,
                    reports_receipts: self.receipt_clients.contains(c),
                })
                .collect(),
            next_client_id: self.next_client_id,
            tasks: self
                .tasks
                .values()
                .map(|t| wire::Task {
                    id: t.id.0,
                    iteration_id: t.iteration_id.0,
                    worker_address: t.worker_address.to_string(),
                    transfer_servers: t.transfer_servers.clone(),
                    worker_tags: t.worker_tags.clone(),
                    worker_uid: t.worker_uid,
                    starting_round: t.starting_round,
                    finished: t.finished,
                })
                .collect(),
            next_task_id: self.next_task_id,
            snapshots: self.snapshots.iter().cloned().collect(),
        }
    }

    /// Rebuilds a state, checking the compacted state's references.
    pub fn from_compacted(s: &wire::CompactedState) -> Result<DispatcherState> {
        let corrupt = |reason: String| Error::DataLoss {
            location: "compacted dispatcher state".into(),
            reason,
        };
        if s.format_version != COMPACTION_FORMAT_VERSION {
            return Err(corrupt(format!(
                "format version {} (this build reads {COMPACTION_FORMAT_VERSION})",
                s.format_version
            )));
        }
        let mut state = DispatcherState::new();
        for d in &s.datasets {
            let id = DatasetId(d.id.clone());
            state.datasets.insert(
                id.clone(),
                Dataset {
                    id,
                    metadata: d.metadata.clone().unwrap_or_default(),
                    compression_disabled_at_runtime: d.compression_disabled_at_runtime,
                    is_pipeline: d.is_pipeline,
                    tfdata_runs_graph: !d.is_pipeline && d.tfdata_workers_run_graph,
                    unsupported_ops: d.tfdata_unsupported_ops.clone(),
                    tensorflow_cannot_run: !d.is_pipeline && d.tfdata_tensorflow_cannot_run,
                },
            );
        }
        state.next_dataset_id = s.next_dataset_id;
        for w in &s.workers {
            state
                .worker_positions
                .insert(w.address.clone().into(), state.workers.len());
            state
                .tasks_by_worker
                .entry(w.address.clone().into())
                .or_default();
            state.workers.push(Worker {
                address: w.address.clone().into(),
                transfer_servers: w.transfer_servers.clone(),
                tags: w.tags.clone(),
                uid: w.uid,
                lost: w.lost,
                runs_pipelines: w.runs_pipelines,
            });
        }
        for j in &s.jobs {
            let id = JobId(j.id);
            state.jobs_by_name.insert(j.name.clone(), id);
            state.jobs.insert(
                id,
                Job {
                    id,
                    name: j.name.clone(),
                    dataset_id: DatasetId(j.dataset_id.clone()),
                    processing_mode: j.processing_mode.unwrap_or_default(),
                    num_consumers: j.num_consumers,
                    target_workers: j.target_workers,
                    use_cross_trainer_cache: j.use_cross_trainer_cache,
                },
            );
        }
        state.next_job_id = s.next_job_id;
        for it in &s.iterations {
            // One cursor and one repetition per split provider: GetSplit
            // indexes both by the same provider index.
            if it.split_indices.len() != it.split_repetitions.len() {
                return Err(corrupt(format!(
                    "iteration {} has {} split cursors but {} split repetitions",
                    it.id,
                    it.split_indices.len(),
                    it.split_repetitions.len()
                )));
            }
            // A damaged range or position set is a damaged compacted state.
            let iteration = iteration_from_wire(it).map_err(|e| match e {
                Error::DataLoss { .. } => e,
                other => corrupt(format!("iteration {}: {other}", it.id)),
            })?;
            let job = state.jobs.get(&iteration.job_id).ok_or_else(|| {
                corrupt(format!("iteration {} of unknown job {}", it.id, it.job_id))
            })?;
            let key = IterationKey {
                job_name: job.name.clone(),
                repetition: iteration.repetition,
            };
            // A collected iteration is replaced by a later one of the same key.
            let replace = state.iterations_by_key.get(&key).is_none_or(|old| {
                state
                    .iterations
                    .get(old)
                    .is_some_and(|o| o.garbage_collected)
            });
            if replace {
                state.iterations_by_key.insert(key, iteration.id);
            }
            state.iterations.insert(iteration.id, iteration);
        }
        state.next_iteration_id = s.next_iteration_id;
        for c in &s.clients {
            state
                .clients
                .insert(IterationClientId(c.id), IterationId(c.iteration_id));
            if c.reports_receipts {
                state.receipt_clients.insert(IterationClientId(c.id));
            }
        }
        state.next_client_id = s.next_client_id;
        for t in &s.tasks {
            let task = Task {
                id: TaskId(t.id),
                iteration_id: IterationId(t.iteration_id),
                worker_address: t.worker_address.clone().into(),
                transfer_servers: t.transfer_servers.clone(),
                worker_tags: t.worker_tags.clone(),
                worker_uid: t.worker_uid,
                starting_round: t.starting_round,
                finished: t.finished,
            };
            if !task.finished {
                state
                    .tasks_by_worker
                    .get_mut(&task.worker_address)
                    .ok_or_else(|| {
                        corrupt(format!(
                            "task {} on unknown worker {}",
                            t.id, t.worker_address
                        ))
                    })?
                    .insert(task.id);
            }
            state.tasks.insert(task.id, task);
        }
        state.next_task_id = s.next_task_id;
        state.snapshots = s.snapshots.iter().cloned().collect();
        // The same invariants every `apply` keeps: what a restart hands the
        // RPC paths is a state they could have reached live.
        state.check_invariants().map_err(corrupt)?;
        Ok(state)
    }
}

fn iteration_to_wire(it: &Iteration) -> wire::Iteration {
    wire::Iteration {
        id: it.id.0,
        job_id: it.job_id.0,
        repetition: it.repetition.0,
        num_split_providers: it.num_split_providers,
        split_repetitions: it.split_repetitions.iter().map(|r| r.0).collect(),
        split_indices: it.split_indices.clone(),
        num_clients: it.num_clients,
        last_client_released_micros: it.last_client_released_micros,
        finished: it.finished,
        task_completed: it.task_completed,
        garbage_collected: it.garbage_collected,
        tasks: it.tasks.iter().map(|t| t.0).collect(),
        pending_tasks: it
            .pending_tasks
            .iter()
            .map(|p| wire::PendingTask {
                task_id: p.task_id.0,
                target_round: p.target_round,
                ready_consumers: p.ready_consumers.iter().map(|c| c.0).collect(),
                failures: p.failures,
            })
            .collect(),
        last_splits: it
            .last_splits
            .iter()
            .map(|(r, l)| wire::LastSplit {
                provider: r.provider.0,
                worker: r.worker.to_string(),
                repetition: l.repetition.0,
                sequence: l.sequence,
                split: l.split.clone(),
                more_splits: l.more_splits.clone(),
                first_index: l.first_index,
                split_repetition: l.split_repetition.0,
                skip: l.skip.clone(),
            })
            .collect(),
        returned_splits: it
            .returned_splits
            .iter()
            .flat_map(|(provider, q)| {
                q.iter().map(move |r| wire::ReturnedSplit {
                    provider: provider.0,
                    repetition: r.repetition.0,
                    split: r.split.clone(),
                    index: r.index,
                    skip: r.skip.ranges(),
                })
            })
            .collect(),
        held_splits: it
            .held_splits
            .iter()
            .map(|(key, held)| wire::HeldSplit {
                task_id: key.task.0,
                provider: key.provider.0,
                repetition: key.repetition.0,
                sequence: key.sequence,
                split_repetition: held.produced_in.0,
                split: held.split.clone(),
                index: held.index,
                skip: held.skip.ranges(),
            })
            .collect(),
        awaited_receipts: it
            .awaited_receipts
            .iter()
            .map(|(task, clients)| wire::AwaitedReceipts {
                task_id: task.0,
                clients: clients.iter().map(|c| c.0).collect(),
            })
            .collect(),
        consumed: it
            .consumed
            .iter()
            .map(|(pass, ranges)| tfdata_proto::data::TfdataSplitRanges {
                provider: pass.provider.0,
                repetition: pass.repetition.0,
                bounds: ranges.bounds(),
            })
            .collect(),
        consumed_pieces: it
            .consumed_pieces
            .iter()
            .map(|(split, positions)| TfdataSplitPieces {
                split: Some(TfdataSplitName::from(*split)),
                positions: positions.ranges(),
            })
            .collect(),
        restoration: it.restoration.as_ref().map(|r| wire::Restoration {
            origin_iteration_id: r.origin_iteration,
            expected: r.expected,
            joined: r.joined.keys().copied().collect(),
            joined_as: r.joined.values().copied().collect(),
        }),
        checkpointers: it.checkpointers.iter().copied().collect(),
        consumed_elements: it
            .consumed_elements
            .iter()
            .map(|(worker, r)| tfdata_proto::data::TfdataWorkerRanges {
                worker_address: worker.to_string(),
                bounds: r.bounds(),
            })
            .collect(),
    }
}

fn iteration_from_wire(it: &wire::Iteration) -> Result<Iteration> {
    let mut consumed = BTreeMap::new();
    for c in &it.consumed {
        let ranges = tfdata_core::ranges::IndexRanges::from_bounds(&c.bounds)?;
        consumed.insert(
            ProviderPass {
                provider: ProviderIndex(c.provider),
                repetition: Repetition(c.repetition),
            },
            ranges,
        );
    }
    let mut consumed_pieces = BTreeMap::new();
    for p in &it.consumed_pieces {
        let n = p.split.as_ref().ok_or_else(|| Error::DataLoss {
            location: "compacted dispatcher state".into(),
            reason: "consumed parts of a split without its name".into(),
        })?;
        consumed_pieces.insert(SplitName::from(n), PositionSet::from_ranges(&p.positions)?);
    }
    let mut returned: BTreeMap<ProviderIndex, VecDeque<_>> = BTreeMap::new();
    for r in &it.returned_splits {
        returned
            .entry(ProviderIndex(r.provider))
            .or_default()
            .push_back(ReturnedSplit {
                repetition: Repetition(r.repetition),
                index: r.index,
                split: r.split.clone(),
                skip: PositionSet::from_ranges(&r.skip)?,
            });
    }
    Ok(Iteration {
        id: IterationId(it.id),
        job_id: JobId(it.job_id),
        repetition: Repetition(it.repetition),
        num_split_providers: it.num_split_providers,
        split_repetitions: it
            .split_repetitions
            .iter()
            .copied()
            .map(Repetition)
            .collect(),
        split_indices: it.split_indices.clone(),
        num_clients: it.num_clients,
        last_client_released_micros: it.last_client_released_micros,
        finished: it.finished,
        task_completed: it.task_completed,
        garbage_collected: it.garbage_collected,
        tasks: it.tasks.iter().map(|t| TaskId(*t)).collect(),
        pending_tasks: it
            .pending_tasks
            .iter()
            .map(|p| PendingTask {
                task_id: TaskId(p.task_id),
                target_round: p.target_round,
                ready_consumers: p
                    .ready_consumers
                    .iter()
                    .map(|c| IterationClientId(*c))
                    .collect::<BTreeSet<_>>(),
                failures: p.failures,
            })
            .collect(),
        last_splits: it
            .last_splits
            .iter()
            .map(|l| {
                (
                    SplitRequester {
                        provider: ProviderIndex(l.provider),
                        worker: l.worker.clone().into(),
                    },
                    LastSplit {
                        repetition: Repetition(l.repetition),
                        sequence: l.sequence,
                        split: l.split.clone(),
                        more_splits: l.more_splits.clone(),
                        first_index: l.first_index,
                        split_repetition: Repetition(l.split_repetition),
                        skip: l.skip.clone(),
                    },
                )
            })
            .collect(),
        returned_splits: returned,
        consumed_pieces,
        held_splits: it
            .held_splits
            .iter()
            .map(|h| {
                Ok((
                    HeldSplitKey {
                        task: TaskId(h.task_id),
                        provider: ProviderIndex(h.provider),
                        repetition: Repetition(h.repetition),
                        sequence: h.sequence,
                    },
                    HeldSplit {
                        produced_in: Repetition(h.split_repetition),
                        index: h.index,
                        split: h.split.clone(),
                        skip: PositionSet::from_ranges(&h.skip)?,
                    },
                ))
            })
            .collect::<Result<_>>()?,
        awaited_receipts: it
            .awaited_receipts
            .iter()
            .map(|a| {
                (
                    TaskId(a.task_id),
                    a.clients.iter().map(|c| IterationClientId(*c)).collect(),
                )
            })
            .collect(),
        consumed,
        checkpointers: it.checkpointers.iter().copied().collect(),
        consumed_elements: crate::state::consumed_elements(
            "compacted state",
            &it.consumed_elements,
        )
        .map_err(|e| Error::DataLoss {
            location: "compacted dispatcher state".into(),
            reason: format!("iteration {}: {e}", it.id),
        })?,
        restoration: match &it.restoration {
            None => None,
            Some(r)
                if (1..=crate::state::MAX_RESTORATION_CONSUMERS).contains(&r.expected)
                    && r.joined.len() == r.joined_as.len() =>
            {
                Some(crate::state::Restoration {
                    origin_iteration: r.origin_iteration_id,
                    expected: r.expected,
                    joined: r
                        .joined
                        .iter()
                        .copied()
                        .zip(r.joined_as.iter().copied())
                        .collect(),
                })
            }
            Some(r) => {
                return Err(Error::DataLoss {
                    location: "compacted dispatcher state".into(),
                    reason: format!(
                        "iteration {} is a restoration of {} consumers ({} joined as {})",
                        it.id,
                        r.expected,
                        r.joined.len(),
                        r.joined_as.len()
                    ),
                });
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfdata_proto::data::{
        CreateIterationUpdate, CreateJobUpdate, RegisterDatasetUpdate, Update, update::UpdateType,
    };

    fn up(u: UpdateType) -> Update {
        Update {
            update_type: Some(u),
        }
    }

    /// A compacted state whose iteration has fewer split repetitions than split
    /// cursors (damaged, or written by something else) is refused, naming
    /// what is wrong, instead of panicking at the next GetSplit.
    #[test]
    fn mismatched_split_vectors_are_refused() {
        let mut state = DispatcherState::new();
        for u in [
            UpdateType::RegisterDataset(RegisterDatasetUpdate {
                dataset_id: "1000".into(),
                ..Default::default()
            }),
            UpdateType::CreateJob(CreateJobUpdate {
                job_id: 5000,
                dataset_id: "1000".into(),
                ..Default::default()
            }),
            UpdateType::CreateIteration(CreateIterationUpdate {
                iteration_id: 2000,
                job_id: 5000,
                repetition: 0,
                num_split_providers: 2,
                tfdata_consumed: Vec::new(),
                tfdata_restore: None,
                tfdata_consumed_pieces: Vec::new(),
            }),
        ] {
            state.apply(&up(u)).unwrap();
        }
        let mut compacted = state.to_compacted();
        assert_eq!(DispatcherState::from_compacted(&compacted).unwrap(), state);
        compacted.iterations[0].split_repetitions.pop();
        let err = DispatcherState::from_compacted(&compacted).unwrap_err();
        assert!(
            matches!(err, Error::DataLoss { .. }) && err.to_string().contains("split repetitions"),
            "{err}"
        );
    }
}
