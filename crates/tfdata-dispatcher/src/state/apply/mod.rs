//! [`DispatcherState::apply`]: the state's one transition function. Every
//! check comes before any change, so an error leaves the state as it was
//! (property-tested in `invariants`).

use std::collections::{BTreeMap, BTreeSet};
use tfdata_core::positions::PositionSet;
use tfdata_core::ranges::IndexRanges;

use tfdata_core::{DatasetId, Error, IterationClientId, IterationId, JobId, Result, TaskId};
use tfdata_proto::data::processing_mode_def::ShardingPolicy;
use tfdata_proto::data::{Update, update::UpdateType};

use super::{
    Dataset, DispatcherState, HeldSplit, HeldSplitKey, Iteration, Job, LastSplit,
    MAX_RESTORATION_CONSUMERS, PendingTask, Restoration, SplitRequester, Task, Worker,
};

fn all_delivered(it: &Iteration, tasks: &BTreeMap<TaskId, Task>, dynamic: bool) -> bool {
    // In distributed_epoch the tasks are finished when every one left with
    // a lost worker, too: that is not the end of the data.
    (!dynamic || it.task_completed)
        && it.returned_splits.is_empty()
        && it.awaited_receipts.is_empty()
        && it
            .tasks
            .iter()
            .all(|t| tasks.get(t).is_none_or(|t| t.finished))
}

/// The iteration `id` an update of kind `update` names, or its error.
fn iteration_mut<'a>(
    iterations: &'a mut BTreeMap<IterationId, Iteration>,
    update: &str,
    id: IterationId,
) -> Result<&'a mut Iteration> {
    iterations
        .get_mut(&id)
        .ok_or_else(|| bad(update, format!("unknown iteration {id}")))
}

fn bad(update: &str, reason: String) -> Error {
    Error::Internal(format!("inconsistent {update} update: {reason}"))
}

impl DispatcherState {
    /// Applies one update. On error the state is unchanged.
    pub fn apply(&mut self, update: &Update) -> Result<()> {
        let Some(kind) = &update.update_type else {
            return Err(bad("empty", "no update type set".into()));
        };
        match kind {
            UpdateType::RegisterDataset(u) => {
                let id = DatasetId(u.dataset_id.clone());
                if id.0.is_empty() || self.datasets.contains_key(&id) {
                    return Err(bad(
                        "register_dataset",
                        format!("dataset id {id:?} taken or empty"),
                    ));
                }
                self.datasets.insert(
                    id.clone(),
                    Dataset {
                        id,
                        metadata: u.metadata.clone().unwrap_or_default(),
                        compression_disabled_at_runtime: None,
                        is_pipeline: u.tfdata_pipeline,
                        tfdata_runs_graph: !u.tfdata_pipeline && u.tfdata_workers_run_graph,
                        unsupported_ops: u.tfdata_unsupported_ops.clone(),
                    },
                );
                // TensorFlow's UpdateNextAvailableDatasetId.
                while self
                    .datasets
                    .contains_key(&DatasetId(self.next_dataset_id.to_string()))
                {
                    self.next_dataset_id += 1;
                }
            }
            UpdateType::RegisterWorker(u) => {
                if self.worker_positions.contains_key(&u.worker_address) {
                    return Err(bad(
                        "register_worker",
                        format!("{} registered twice", u.worker_address),
                    ));
                }
                self.worker_positions
                    .insert(u.worker_address.clone(), self.workers.len());
                self.workers.push(Worker {
                    address: u.worker_address.clone(),
                    transfer_servers: u.transfer_servers.clone(),
                    tags: u.worker_tags.clone(),
                    uid: u.worker_uid,
                    lost: false,
                    runs_pipelines: u.tfdata_runs_pipelines,
                });
                self.tasks_by_worker
                    .entry(u.worker_address.clone())
                    .or_default();
            }
            UpdateType::CreateJob(u) => {
                let id = JobId(u.job_id);
                if self.jobs.contains_key(&id) || self.jobs_by_name.contains_key(&u.job_name) {
                    return Err(bad(
                        "create_job",
                        format!("job {id} / {:?} exists", u.job_name),
                    ));
                }
                if !self.datasets.contains_key(&DatasetId(u.dataset_id.clone())) {
                    return Err(bad(
                        "create_job",
                        format!("unknown dataset {}", u.dataset_id),
                    ));
                }
                self.next_job_id = self.next_job_id.max(u.job_id.saturating_add(1));
                self.jobs_by_name.insert(u.job_name.clone(), id);
                self.jobs.insert(
                    id,
                    Job {
                        id,
                        name: u.job_name.clone(),
                        dataset_id: DatasetId(u.dataset_id.clone()),
                        processing_mode: u.processing_mode_def.unwrap_or_default(),
                        num_consumers: u.num_consumers,
                        target_workers: u.target_workers,
                        use_cross_trainer_cache: u.use_cross_trainer_cache,
                    },
                );
            }
            UpdateType::CreateIteration(u) => {
                let id = IterationId(u.iteration_id);
                let job = self
                    .jobs
                    .get(&JobId(u.job_id))
                    .ok_or_else(|| bad("create_iteration", format!("unknown job {}", u.job_id)))?;
                if self.iterations.contains_key(&id) {
                    return Err(bad("create_iteration", format!("iteration {id} exists")));
                }
                let key = (job.name.clone(), u.repetition);
                if let Some(old) = self.iterations_by_key.get(&key)
                    && !self
                        .iterations
                        .get(old)
                        .is_some_and(|i| i.garbage_collected)
                {
                    return Err(bad(
                        "create_iteration",
                        format!("{key:?} has a live iteration"),
                    ));
                }
                let providers = usize::try_from(u.num_split_providers)
                    .map_err(|_| bad("create_iteration", "negative split providers".into()))?;
                let consumed = consumed_splits("create_iteration", &u.tfdata_consumed, providers)?;
                let consumed_pieces =
                    consumed_pieces("create_iteration", &u.tfdata_consumed_pieces, providers)?;
                let restoration = match &u.tfdata_restore {
                    None => None,
                    Some(r) if (1..=MAX_RESTORATION_CONSUMERS).contains(&r.consumers) => {
                        Some(Restoration {
                            origin_iteration: r.origin_iteration_id,
                            expected: r.consumers,
                            joined: BTreeMap::new(),
                        })
                    }
                    Some(r) => {
                        return Err(bad(
                            "create_iteration",
                            format!("a restoration of {} consumers", r.consumers),
                        ));
                    }
                };
                self.next_iteration_id =
                    self.next_iteration_id.max(u.iteration_id.saturating_add(1));
                self.iterations_by_key.insert(key, id);
                self.iterations.insert(
                    id,
                    Iteration {
                        id,
                        job_id: JobId(u.job_id),
                        repetition: u.repetition,
                        num_split_providers: u.num_split_providers,
                        split_repetitions: vec![0; providers],
                        split_indices: vec![0; providers],
                        num_clients: 0,
                        last_client_released_micros: None,
                        finished: false,
                        task_completed: false,
                        garbage_collected: false,
                        tasks: Vec::new(),
                        pending_tasks: Default::default(),
                        awaited_receipts: BTreeMap::new(),
                        consumed,
                        consumed_pieces,
                        restoration,
                        checkpointers: BTreeSet::new(),
                        consumed_elements: BTreeMap::new(),
                        last_splits: BTreeMap::new(),
                        returned_splits: BTreeMap::new(),
                        held_splits: BTreeMap::new(),
                    },
                );
            }
            UpdateType::ProduceSplit(u) => {
                let it = iteration_mut(
                    &mut self.iterations,
                    "produce_split",
                    IterationId(u.iteration_id),
                )?;
                // Every check before any change: an error leaves the state as it was.
                let p = usize::try_from(u.split_provider_index)
                    .ok()
                    .filter(|&p| p < it.split_indices.len() && p < it.split_repetitions.len())
                    .ok_or_else(|| {
                        bad(
                            "produce_split",
                            format!("bad provider {}", u.split_provider_index),
                        )
                    })?;
                if u.tfdata_from_returned
                    && it
                        .returned_splits
                        .get(&u.split_provider_index)
                        .is_none_or(|q| q.is_empty())
                {
                    return Err(bad("produce_split", "no returned split to re-issue".into()));
                }
                // A lease is fresh splits after a first one, named by a
                // sequence number; a returned split goes out alone.
                if !u.tfdata_more_splits.is_empty()
                    && (u.tfdata_from_returned
                        || u.tfdata_split.is_none()
                        || u.tfdata_split_sequence.is_none())
                {
                    return Err(bad(
                        "produce_split",
                        "a lease of splits without a first split and sequence number, or of \
                         returned splits"
                            .into(),
                    ));
                }
                let task = TaskId(u.tfdata_task_id);
                // Held splits belong to a task of this iteration; one of
                // an unknown task would never be returned.
                if u.tfdata_task_id != 0
                    && self
                        .tasks
                        .get(&task)
                        .is_none_or(|t| t.iteration_id != it.id)
                {
                    return Err(bad(
                        "produce_split",
                        format!("task {task} is not a task of iteration {}", it.id),
                    ));
                }
                // The first split's name: a returned split keeps its own; a
                // fresh lease starts at the cursor (of a new repetition: 0),
                // or past consumed splits where the request says.
                let cursor = if u.repetition > it.split_repetitions[p] {
                    0
                } else {
                    it.split_indices[p]
                };
                if !u.tfdata_from_returned && u.tfdata_first_index.is_some_and(|f| f < cursor) {
                    return Err(bad(
                        "produce_split",
                        format!(
                            "a lease from index {:?} behind the cursor {cursor}",
                            u.tfdata_first_index
                        ),
                    ));
                }
                for d in &u.tfdata_delivered {
                    it.held_splits.remove(&HeldSplitKey {
                        task,
                        provider: u.split_provider_index,
                        repetition: d.repetition,
                        sequence: d.sequence,
                    });
                }
                let mut split_repetition = u.repetition;
                let mut first_index = u.tfdata_first_index.unwrap_or(cursor);
                // A fresh split a restored reader consumed part of goes out
                // first in its lease (`GetSplit` ends leases before one), so
                // the answer's positions are the first split's.
                let mut skip = if u.tfdata_from_returned {
                    PositionSet::default()
                } else {
                    it.consumed_pieces
                        .get(&(u.split_provider_index, u.repetition, first_index))
                        .cloned()
                        .unwrap_or_default()
                };
                if u.tfdata_from_returned {
                    // The queue has a split (checked above).
                    let queue = it.returned_splits.get_mut(&u.split_provider_index);
                    if let Some(returned) = queue.and_then(|q| q.pop_front()) {
                        split_repetition = returned.repetition;
                        first_index = returned.index;
                        skip = returned.skip;
                    }
                    // No empty queues: the state has one form (as a snapshot restores it).
                    if it
                        .returned_splits
                        .get(&u.split_provider_index)
                        .is_some_and(|q| q.is_empty())
                    {
                        it.returned_splits.remove(&u.split_provider_index);
                    }
                }
                if let (Some(sequence), Some(split)) = (u.tfdata_split_sequence, &u.tfdata_split)
                    && u.tfdata_task_id != 0
                {
                    // A lease's splits have consecutive sequence numbers.
                    let first = bytes::Bytes::from(prost::Message::encode_to_vec(split));
                    for (i, split) in std::iter::once(&first)
                        .chain(&u.tfdata_more_splits)
                        .enumerate()
                    {
                        it.held_splits.insert(
                            HeldSplitKey {
                                task,
                                provider: u.split_provider_index,
                                repetition: u.repetition,
                                sequence: sequence.saturating_add(i as i64),
                            },
                            HeldSplit {
                                produced_in: split_repetition,
                                index: first_index.saturating_add(i as i64),
                                split: split.clone(),
                                // A returned split goes out alone.
                                skip: if i == 0 {
                                    skip.clone()
                                } else {
                                    PositionSet::default()
                                },
                            },
                        );
                    }
                }
                if let Some(sequence) = u.tfdata_split_sequence {
                    it.last_splits.insert(
                        SplitRequester {
                            provider: u.split_provider_index,
                            worker: u.tfdata_worker_address.clone(),
                        },
                        LastSplit {
                            repetition: u.repetition,
                            sequence,
                            split: u.tfdata_split.clone(),
                            more_splits: u.tfdata_more_splits.clone(),
                            first_index,
                            split_repetition,
                            skip: skip.ranges(),
                        },
                    );
                }

                if u.tfdata_from_returned {
                    // Re-issued a lost worker's split: the cursor does not move.
                    return Ok(());
                }
                it.split_repetitions[p] = u.repetition;
                if u.finished {
                    it.split_repetitions[p] += 1;
                    it.split_indices[p] = 0;
                } else {
                    let produced = 1 + u.tfdata_more_splits.len() as i64;
                    it.split_indices[p] = first_index.saturating_add(produced);
                }
            }
            UpdateType::AcquireIterationClient(u) => {
                let client = IterationClientId(u.iteration_client_id);
                if self.clients.contains_key(&client) {
                    return Err(bad(
                        "acquire_iteration_client",
                        format!("client {client} exists"),
                    ));
                }
                let it = iteration_mut(
                    &mut self.iterations,
                    "acquire_iteration_client",
                    IterationId(u.iteration_id),
                )?;
                it.num_clients += 1;
                self.next_client_id = self
                    .next_client_id
                    .max(u.iteration_client_id.saturating_add(1));
                if u.tfdata_reports_receipts {
                    self.receipt_clients.insert(client);
                }
                self.clients.insert(client, it.id);
            }
            UpdateType::ReleaseIterationClient(u) => {
                let client = IterationClientId(u.iteration_client_id);
                let iteration = self.clients.get(&client).copied().ok_or_else(|| {
                    bad(
                        "release_iteration_client",
                        format!("unknown client {client}"),
                    )
                })?;
                let dynamic = self.is_dynamic(iteration);
                let it =
                    iteration_mut(&mut self.iterations, "release_iteration_client", iteration)?;
                it.num_clients -= 1;
                it.last_client_released_micros = Some(u.time_micros);
                self.clients.remove(&client);
                self.receipt_clients.remove(&client);
                // A released reader reports nothing more: what it received
                // whole and did not report is produced again.
                let waiting: Vec<TaskId> = it.awaited_receipts.keys().copied().collect();
                let mut returned = false;
                for task in waiting {
                    returned |= it.receipts_in(task, client);
                }
                if returned {
                    it.finished = all_delivered(it, &self.tasks, dynamic);
                }
            }
            UpdateType::GarbageCollectIteration(u) => {
                let id = IterationId(u.iteration_id);
                let it = iteration_mut(&mut self.iterations, "garbage_collect_iteration", id)?;
                it.finished = true;
                it.garbage_collected = true;
                for task_id in it.tasks.clone() {
                    if let Some(task) = self.tasks.get_mut(&task_id) {
                        task.finished = true;
                        if let Some(assigned) = self.tasks_by_worker.get_mut(&task.worker_address) {
                            assigned.remove(&task_id);
                        }
                    }
                }
            }
            UpdateType::RemoveTask(u) => {
                let id = TaskId(u.task_id);
                let task = self
                    .tasks
                    .remove(&id)
                    .ok_or_else(|| bad("remove_task", format!("unknown task {id}")))?;
                if let Some(it) = self.iterations.get_mut(&task.iteration_id) {
                    it.tasks.retain(|t| *t != id);
                    it.pending_tasks.retain(|p| p.task_id != id);
                    it.awaited_receipts.remove(&id);
                    it.return_held_splits(id);
                }
                if let Some(assigned) = self.tasks_by_worker.get_mut(&task.worker_address) {
                    assigned.remove(&id);
                }
            }
            UpdateType::CreatePendingTask(u) => {
                let task = Task {
                    id: TaskId(u.task_id),
                    iteration_id: IterationId(u.iteration_id),
                    worker_address: u.worker_address.clone(),
                    transfer_servers: u.transfer_servers.clone(),
                    worker_tags: u.worker_tags.clone(),
                    worker_uid: u.worker_uid,
                    starting_round: u.starting_round,
                    finished: false,
                };
                let it = self.insert_task("create_pending_task", task)?;
                it.pending_tasks.push_back(PendingTask {
                    task_id: TaskId(u.task_id),
                    target_round: u.starting_round,
                    ready_consumers: BTreeSet::new(),
                    failures: 0,
                });
            }
            UpdateType::ClientHeartbeat(u) => {
                let client = IterationClientId(u.iteration_client_id);
                let iteration_id =
                    self.clients.get(&client).copied().ok_or_else(|| {
                        bad("client_heartbeat", format!("unknown client {client}"))
                    })?;
                let num_consumers = self
                    .iterations
                    .get(&iteration_id)
                    .and_then(|it| self.jobs.get(&it.job_id))
                    .and_then(|j| j.num_consumers)
                    .ok_or_else(|| {
                        bad(
                            "client_heartbeat",
                            format!("iteration {iteration_id} is not round-robin"),
                        )
                    })?;
                let it = iteration_mut(&mut self.iterations, "client_heartbeat", iteration_id)?;
                let pending = it.pending_tasks.front_mut().ok_or_else(|| {
                    bad(
                        "client_heartbeat",
                        format!("iteration {iteration_id} has no pending task"),
                    )
                })?;
                if let Some(rejected) = &u.task_rejected {
                    pending.target_round = rejected.new_target_round;
                    pending.failures += 1;
                    pending.ready_consumers.clear();
                } else if u.task_accepted {
                    pending.ready_consumers.insert(client);
                    if pending.ready_consumers.len() as i64 >= num_consumers {
                        let (task_id, round) = (pending.task_id, pending.target_round);
                        it.pending_tasks.pop_front();
                        it.tasks.push(task_id);
                        if let Some(task) = self.tasks.get_mut(&task_id) {
                            task.starting_round = round;
                        }
                    }
                }
            }
            UpdateType::CreateTask(u) => {
                let task = Task {
                    id: TaskId(u.task_id),
                    iteration_id: IterationId(u.iteration_id),
                    worker_address: u.worker_address.clone(),
                    transfer_servers: u.transfer_servers.clone(),
                    worker_tags: u.worker_tags.clone(),
                    worker_uid: u.worker_uid,
                    starting_round: 0,
                    finished: false,
                };
                let it = self.insert_task("create_task", task)?;
                it.tasks.push(TaskId(u.task_id));
                // A new task on this worker counts its split requests from 0:
                // forget the answers an earlier task of it got.
                it.last_splits.retain(|r, _| r.worker != u.worker_address);
            }
            UpdateType::FinishTask(u) => {
                let id = TaskId(u.task_id);
                let task = self
                    .tasks
                    .get_mut(&id)
                    .ok_or_else(|| bad("finish_task", format!("unknown task {id}")))?;
                task.finished = true;
                let (worker, iteration_id) = (task.worker_address.clone(), task.iteration_id);
                if let Some(assigned) = self.tasks_by_worker.get_mut(&worker) {
                    assigned.remove(&id);
                }
                let dynamic = self.is_dynamic(iteration_id);
                if let Some(it) = self.iterations.get_mut(&iteration_id) {
                    // A finished task delivered everything it held.
                    it.held_splits.retain(|key, _| key.task != id);
                    it.task_completed = true;
                    it.finished = all_delivered(it, &self.tasks, dynamic);
                }
            }
            UpdateType::TfdataLoseWorker(u) => self.lose_worker(&u.worker_address)?,
            UpdateType::TfdataReceiveSplits(u) => self.receive_splits(u)?,
            UpdateType::TfdataCheckpointTaken(u) => {
                let client = IterationClientId(u.iteration_client_id);
                let id = *self.clients.get(&client).ok_or_else(|| {
                    bad("checkpoint_taken", format!("unknown client {}", client.0))
                })?;
                iteration_mut(&mut self.iterations, "checkpoint_taken", id)?
                    .checkpointers
                    .insert(client.0);
            }
            UpdateType::TfdataJoinRestore(u) => {
                let it = iteration_mut(
                    &mut self.iterations,
                    "join_restore",
                    IterationId(u.iteration_id),
                )?;
                let providers = it.split_indices.len();
                // Every check before any change.
                let consumed = consumed_splits("join_restore", &u.consumed, providers)?;
                let pieces = consumed_pieces("join_restore", &u.consumed_pieces, providers)?;
                let elements = consumed_elements("join_restore", &u.consumed_elements)?;
                if !(1..=MAX_RESTORATION_CONSUMERS).contains(&u.consumers) {
                    return Err(bad(
                        "join_restore",
                        format!("a checkpoint of {} consumers", u.consumers),
                    ));
                }
                if !it.gathering() {
                    return Err(bad(
                        "join_restore",
                        format!(
                            "iteration {} is not a restoration waiting for consumers",
                            it.id
                        ),
                    ));
                }
                // Nothing was handed out while it gathered: the union is
                // what it skips.
                for (key, ranges) in consumed {
                    it.consumed.entry(key).or_default().union_with(&ranges);
                }
                for (key, positions) in pieces {
                    it.consumed_pieces
                        .entry(key)
                        .or_default()
                        .union_with(&positions);
                }
                for (worker, ranges) in elements {
                    it.consumed_elements
                        .entry(worker)
                        .or_default()
                        .union_with(&ranges);
                }
                if let Some(r) = &mut it.restoration {
                    r.expected = r.expected.max(u.consumers);
                    r.joined.insert(u.origin_client_id, u.client_id);
                }
            }
            UpdateType::TfdataReviveWorker(u) => {
                let &i = self
                    .worker_positions
                    .get(&u.worker_address)
                    .ok_or_else(|| {
                        bad(
                            "revive_worker",
                            format!("unknown worker {}", u.worker_address),
                        )
                    })?;
                self.workers[i].lost = false;
                if u.worker_uid != 0 {
                    self.workers[i].uid = u.worker_uid;
                }
            }
            UpdateType::Snapshot(u) => {
                self.snapshots.insert(u.path.clone());
            }
            UpdateType::CompressionDisabledAtRuntime(u) => {
                let ds = self
                    .datasets
                    .get_mut(&DatasetId(u.dataset_id.clone()))
                    .ok_or_else(|| {
                        bad(
                            "compression_disabled_at_runtime",
                            format!("unknown dataset {}", u.dataset_id),
                        )
                    })?;
                ds.compression_disabled_at_runtime
                    .get_or_insert(u.compression_disabled);
            }
        }
        Ok(())
    }

    /// Records a new task (after checking its id is new and its iteration
    /// and worker exist; nothing changes otherwise) and returns its
    /// iteration, where the caller places it.
    /// Whether `iteration` is a distributed_epoch one (DYNAMIC sharding).
    fn is_dynamic(&self, iteration: IterationId) -> bool {
        self.iterations
            .get(&iteration)
            .and_then(|it| self.jobs.get(&it.job_id))
            .is_some_and(|j| j.sharding_policy() == Some(ShardingPolicy::Dynamic))
    }

    fn insert_task(&mut self, update: &str, task: Task) -> Result<&mut Iteration> {
        if self.tasks.contains_key(&task.id) {
            return Err(bad(update, format!("task {} exists", task.id)));
        }
        match self.iterations.get(&task.iteration_id) {
            None => {
                return Err(bad(
                    update,
                    format!("unknown iteration {}", task.iteration_id),
                ));
            }
            Some(it) if it.gathering() => {
                return Err(bad(
                    update,
                    format!(
                        "iteration {} is a restoration still waiting for consumers",
                        it.id
                    ),
                ));
            }
            Some(_) => {}
        }
        let assigned = self
            .tasks_by_worker
            .get_mut(&task.worker_address)
            .ok_or_else(|| bad(update, format!("unknown worker {}", task.worker_address)))?;
        assigned.insert(task.id);
        let (id, iteration_id) = (task.id, task.iteration_id);
        self.next_task_id = self.next_task_id.max(id.0.saturating_add(1));
        self.tasks.insert(id, task);
        self.iterations
            .get_mut(&iteration_id)
            .ok_or_else(|| bad(update, format!("unknown iteration {iteration_id}")))
    }

    fn lose_worker(&mut self, address: &str) -> Result<()> {
        let &i = self
            .worker_positions
            .get(address)
            .ok_or_else(|| bad("lose_worker", format!("unknown worker {address}")))?;
        self.workers[i].lost = true;
        let assigned: Vec<TaskId> = self
            .tasks_by_worker
            .get(address)
            .map(|t| t.iter().copied().collect())
            .unwrap_or_default();
        for task_id in assigned {
            let Some(task) = self.tasks.get_mut(&task_id) else {
                continue;
            };
            task.finished = true;
            let iteration_id = task.iteration_id;
            if let Some(assigned) = self.tasks_by_worker.get_mut(address) {
                assigned.remove(&task_id);
            }
            let dynamic = self.is_dynamic(iteration_id);
            if let Some(it) = self.iterations.get_mut(&iteration_id) {
                // Readers drop tasks no longer listed; the iteration can end.
                it.tasks.retain(|t| *t != task_id);
                it.pending_tasks.retain(|p| p.task_id != task_id);
                // The worker no longer answers for its splits.
                it.last_splits.retain(|r, _| r.worker != address);
                let readers = self
                    .clients
                    .iter()
                    .filter(|(c, i)| **i == iteration_id && self.receipt_clients.contains(c))
                    .map(|(c, _)| *c)
                    .collect();
                it.await_receipts_or_return(task_id, readers);
                it.finished = all_delivered(it, &self.tasks, dynamic);
            }
        }
        // Its finished tasks leave their lists too: a reader that has not
        // read a finished task's end (it heard of the task late) would
        // otherwise wait for a worker that is gone. A finished task
        // delivered everything, so nothing is lost.
        for it in self.iterations.values_mut() {
            let tasks = &self.tasks;
            it.tasks.retain(|t| {
                tasks
                    .get(t)
                    .is_none_or(|t| !(t.finished && t.worker_address == address))
            });
        }
        Ok(())
    }

    /// `ReceiveSplitsUpdate`: the splits the client received whole from the
    /// lost task stop being held; the rest go back to the pool once every
    /// awaited reader has reported.
    fn receive_splits(&mut self, u: &tfdata_proto::data::ReceiveSplitsUpdate) -> Result<()> {
        let client = IterationClientId(u.iteration_client_id);
        let task = TaskId(u.task_id);
        let iteration = self
            .clients
            .get(&client)
            .copied()
            .ok_or_else(|| bad("receive_splits", format!("unknown client {client}")))?;
        let dynamic = self.is_dynamic(iteration);
        let it = iteration_mut(&mut self.iterations, "receive_splits", iteration)?;
        if !it.awaits_receipts(task, client) {
            return Err(bad(
                "receive_splits",
                format!("task {task} does not wait for client {client}'s receipts"),
            ));
        }
        let names: BTreeSet<(i64, i64, i64)> = u
            .splits
            .iter()
            .map(|n| (n.provider, n.repetition, n.index))
            .collect();
        let mut ranges: BTreeMap<(i64, i64), IndexRanges> = BTreeMap::new();
        for r in &u.ranges {
            let set = IndexRanges::from_bounds(&r.bounds)
                .map_err(|e| bad("receive_splits", e.to_string()))?;
            ranges
                .entry((r.provider, r.repetition))
                .or_default()
                .union_with(&set);
        }
        let received_whole = |provider: i64, repetition: i64, index: i64| {
            names.contains(&(provider, repetition, index))
                || ranges
                    .get(&(provider, repetition))
                    .is_some_and(|r| r.covering(index).is_some())
        };
        // Parts received: every one checked before anything changes.
        let mut pieces: BTreeMap<(i64, i64, i64), PositionSet> = BTreeMap::new();
        for p in &u.pieces {
            let n = p.split.as_ref().ok_or_else(|| {
                bad(
                    "receive_splits",
                    "split pieces without their split's name".into(),
                )
            })?;
            let positions = PositionSet::from_ranges(&p.positions)
                .map_err(|e| bad("receive_splits", e.to_string()))?;
            pieces
                .entry((n.provider, n.repetition, n.index))
                .or_default()
                .union_with(&positions);
        }
        let received: Vec<HeldSplitKey> = it
            .held_splits
            .range(HeldSplitKey::all_of(task))
            .filter(|(k, h)| received_whole(k.provider, h.produced_in, h.index))
            .map(|(k, _)| *k)
            .collect();
        for key in received {
            it.held_splits.remove(&key);
        }
        // The rest are produced again without the parts readers hold.
        if !pieces.is_empty() {
            for (key, held) in it.held_splits.range_mut(HeldSplitKey::all_of(task)) {
                if let Some(p) = pieces.get(&(key.provider, held.produced_in, held.index)) {
                    held.skip.union_with(p);
                }
            }
        }
        it.receipts_in(task, client);
        it.finished = all_delivered(it, &self.tasks, dynamic);
        Ok(())
    }
}

/// A restored parallel_epochs consumer's elements, per worker, checked.
pub(crate) fn consumed_elements(
    what: &'static str,
    ranges: &[tfdata_proto::data::TfdataWorkerRanges],
) -> Result<BTreeMap<String, tfdata_core::ranges::IndexRanges>> {
    let mut consumed = BTreeMap::new();
    for w in ranges {
        if w.worker_address.is_empty() || w.worker_address.len() > MAX_WORKER_ADDRESS_BYTES {
            return Err(bad(
                what,
                "a consumed-elements entry without a worker address".into(),
            ));
        }
        // Refuses negative indices too.
        let ranges = tfdata_core::ranges::IndexRanges::from_bounds(&w.bounds)
            .map_err(|e| bad(what, e.to_string()))?;
        if !ranges.is_empty() {
            consumed.insert(w.worker_address.clone(), ranges);
        }
    }
    Ok(consumed)
}

/// Longest worker address a consumed-elements entry may name.
const MAX_WORKER_ADDRESS_BYTES: usize = 4096;

/// A restored reader's consumed splits, checked against the iteration's
/// `providers` split providers.
fn consumed_splits(
    what: &'static str,
    ranges: &[tfdata_proto::data::TfdataSplitRanges],
    providers: usize,
) -> Result<BTreeMap<(i64, i64), tfdata_core::ranges::IndexRanges>> {
    let mut consumed = BTreeMap::new();
    for c in ranges {
        if !(usize::try_from(c.provider).is_ok_and(|p| p < providers) && c.repetition >= 0) {
            return Err(bad(
                what,
                format!("consumed splits of provider {}", c.provider),
            ));
        }
        let ranges = tfdata_core::ranges::IndexRanges::from_bounds(&c.bounds)
            .map_err(|e| bad(what, e.to_string()))?;
        if !ranges.is_empty() {
            consumed.insert((c.provider, c.repetition), ranges);
        }
    }
    Ok(consumed)
}

/// A restored reader's consumed parts of splits, checked.
fn consumed_pieces(
    what: &'static str,
    pieces: &[tfdata_proto::data::TfdataSplitPieces],
    providers: usize,
) -> Result<BTreeMap<(i64, i64, i64), PositionSet>> {
    let mut consumed: BTreeMap<(i64, i64, i64), PositionSet> = BTreeMap::new();
    for p in pieces {
        let n = p
            .split
            .as_ref()
            .filter(|n| {
                usize::try_from(n.provider).is_ok_and(|p| p < providers)
                    && n.repetition >= 0
                    && n.index >= 0
            })
            .ok_or_else(|| bad(what, format!("consumed parts of split {:?}", p.split)))?;
        let positions =
            PositionSet::from_ranges(&p.positions).map_err(|e| bad(what, e.to_string()))?;
        if !positions.is_empty() {
            consumed
                .entry((n.provider, n.repetition, n.index))
                .or_default()
                .union_with(&positions);
        }
    }
    Ok(consumed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfdata_proto::data::{
        AcquireIterationClientUpdate, CreateIterationUpdate, CreateJobUpdate, CreateTaskUpdate,
        FinishTaskUpdate, RegisterDatasetUpdate, RegisterWorkerUpdate,
        ReleaseIterationClientUpdate,
    };

    fn up(u: UpdateType) -> Update {
        Update {
            update_type: Some(u),
        }
    }

    fn history() -> Vec<Update> {
        vec![
            up(UpdateType::RegisterDataset(RegisterDatasetUpdate {
                dataset_id: "1000".into(),
                ..Default::default()
            })),
            up(UpdateType::RegisterWorker(RegisterWorkerUpdate {
                worker_address: "w1:1".into(),
                ..Default::default()
            })),
            up(UpdateType::RegisterWorker(RegisterWorkerUpdate {
                worker_address: "w2:1".into(),
                ..Default::default()
            })),
            up(UpdateType::CreateJob(CreateJobUpdate {
                job_id: 5000,
                job_name: "j".into(),
                dataset_id: "1000".into(),
                ..Default::default()
            })),
            up(UpdateType::CreateIteration(CreateIterationUpdate {
                iteration_id: 2000,
                job_id: 5000,
                repetition: 0,
                num_split_providers: 0,
                tfdata_consumed: Vec::new(),
                tfdata_restore: None,
                tfdata_consumed_pieces: Vec::new(),
            })),
            up(UpdateType::CreateTask(CreateTaskUpdate {
                task_id: 4000,
                iteration_id: 2000,
                worker_address: "w1:1".into(),
                ..Default::default()
            })),
            up(UpdateType::CreateTask(CreateTaskUpdate {
                task_id: 4001,
                iteration_id: 2000,
                worker_address: "w2:1".into(),
                ..Default::default()
            })),
            up(UpdateType::AcquireIterationClient(
                AcquireIterationClientUpdate {
                    iteration_id: 2000,
                    iteration_client_id: 3000,
                    tfdata_reports_receipts: false,
                },
            )),
        ]
    }

    #[test]
    fn lifecycle_of_an_iteration() {
        let mut s = DispatcherState::new();
        for u in history() {
            s.apply(&u).unwrap();
        }
        assert_eq!(s.next_dataset_id(), DatasetId("1001".into()));
        assert_eq!(s.next_task_id(), TaskId(4002));
        assert_eq!(s.tasks_for_worker("w1:1").count(), 1);
        assert_eq!(s.iteration(IterationId(2000)).unwrap().num_clients, 1);

        s.apply(&up(UpdateType::FinishTask(FinishTaskUpdate {
            task_id: 4000,
        })))
        .unwrap();
        assert!(!s.iteration(IterationId(2000)).unwrap().finished);
        assert_eq!(s.tasks_for_worker("w1:1").count(), 0);
        s.apply(&up(UpdateType::FinishTask(FinishTaskUpdate {
            task_id: 4001,
        })))
        .unwrap();
        assert!(s.iteration(IterationId(2000)).unwrap().finished);

        s.apply(&up(UpdateType::ReleaseIterationClient(
            ReleaseIterationClientUpdate {
                iteration_client_id: 3000,
                time_micros: 77,
            },
        )))
        .unwrap();
        let it = s.iteration(IterationId(2000)).unwrap();
        assert_eq!(
            (it.num_clients, it.last_client_released_micros),
            (0, Some(77))
        );
    }

    #[test]
    fn inconsistent_updates_are_errors_and_change_nothing() {
        let mut s = DispatcherState::new();
        for u in history() {
            s.apply(&u).unwrap();
        }
        let before = s.clone();
        for u in [
            up(UpdateType::FinishTask(FinishTaskUpdate { task_id: 1 })),
            up(UpdateType::CreateTask(CreateTaskUpdate {
                task_id: 4005,
                iteration_id: 2000,
                worker_address: "unknown:1".into(),
                ..Default::default()
            })),
            history()[0].clone(),
            Update { update_type: None },
        ] {
            assert!(s.apply(&u).is_err());
            assert_eq!(s, before);
        }
    }

    /// A `ProduceSplit` that fails (a returned split that is not there)
    /// leaves the held splits it would have released in place.
    #[test]
    fn a_failed_produce_split_changes_nothing() {
        use tfdata_proto::data::{ProduceSplitUpdate, TfdataDeliveredSplit};
        let mut s = DispatcherState::new();
        for u in history() {
            s.apply(&u).unwrap();
        }
        s.apply(&up(UpdateType::CreateIteration(CreateIterationUpdate {
            iteration_id: 2001,
            job_id: 5000,
            repetition: 1,
            num_split_providers: 1,
            tfdata_consumed: Vec::new(),
            tfdata_restore: None,
            tfdata_consumed_pieces: Vec::new(),
        })))
        .unwrap();
        s.apply(&up(UpdateType::CreateTask(CreateTaskUpdate {
            task_id: 4100,
            iteration_id: 2001,
            worker_address: "w1:1".into(),
            ..Default::default()
        })))
        .unwrap();
        let split = tfdata_core::element::tensor_to_proto(&tfdata_core::Tensor::scalar(7i64));
        s.apply(&up(UpdateType::ProduceSplit(ProduceSplitUpdate {
            iteration_id: 2001,
            tfdata_worker_address: "w1:1".into(),
            tfdata_split_sequence: Some(0),
            tfdata_split: Some(split),
            tfdata_task_id: 4100,
            ..Default::default()
        })))
        .unwrap();
        let before = s.clone();
        let bad = up(UpdateType::ProduceSplit(ProduceSplitUpdate {
            iteration_id: 2001,
            tfdata_from_returned: true,
            tfdata_delivered: vec![TfdataDeliveredSplit {
                repetition: 0,
                sequence: 0,
            }],
            tfdata_task_id: 4100,
            ..Default::default()
        }));
        assert!(s.apply(&bad).is_err());
        assert_eq!(
            s, before,
            "the held split must not be released by a failed update"
        );
    }

    #[test]
    fn numeric_dataset_ids_skip_taken_ones() {
        let mut s = DispatcherState::new();
        for id in ["1000", "1001", "abc", "1003"] {
            s.apply(&up(UpdateType::RegisterDataset(RegisterDatasetUpdate {
                dataset_id: id.into(),
                ..Default::default()
            })))
            .unwrap();
        }
        assert_eq!(s.next_dataset_id(), DatasetId("1002".into()));
    }
}
