//! Workers: heartbeats (registration, revival, restart at the same
//! address), the `TaskDef`s they run, task completion, and what happens to
//! a lost worker's tasks and splits.

use std::collections::HashSet;

use tfdata_core::{Error, IterationId, Result, TaskId};
use tfdata_proto::data::{self as wire, processing_mode_def::ShardingPolicy, update::UpdateType};

use super::txn::Txn;
use super::worker_addresses::WorkerAddresses;
use super::{Dispatcher, requests};
use crate::state::{DispatcherState, Task};

impl Dispatcher {
    /// The entry of `address` in `worker_addresses`, if a list is set.
    pub(super) fn worker_address_entry(
        &self,
        state: &DispatcherState,
        address: &str,
    ) -> Result<Option<usize>> {
        let registered = state.workers().iter().map(|w| w.address.as_str());
        WorkerAddresses(&self.config.worker_addresses).entry_of(registered, address)
    }

    #[cfg(test)]
    pub(crate) async fn worker_heartbeat(
        &self,
        req: wire::WorkerHeartbeatRequest,
    ) -> Result<wire::WorkerHeartbeatResponse> {
        self.worker_heartbeat_from(requests::WorkerHeartbeat::try_from(req)?, None)
            .await
    }

    /// `WorkerHeartbeat` from `peer`, the IP its connection comes from (a
    /// probe of the worker's address is trusted only if it is that host).
    pub(crate) async fn worker_heartbeat_from(
        &self,
        req: requests::WorkerHeartbeat,
        peer: Option<std::net::IpAddr>,
    ) -> Result<wire::WorkerHeartbeatResponse> {
        let req = req.wire();
        let address = req.worker_address.clone();
        let mut txn = self.ledger.begin().await;
        // Before anything below hands out tasks.
        txn.liveness.set_draining(&address, req.tfdata_draining);
        if req.tfdata_draining {
            tracing::debug!(worker = %address, "worker draining: no new tasks for it");
        }
        if txn.state.worker(&address).is_none() {
            self.worker_address_entry(&txn.state, &address)?;
            txn.apply(UpdateType::RegisterWorker(wire::RegisterWorkerUpdate {
                worker_address: address.clone(),
                transfer_servers: req.transfer_servers.clone(),
                worker_tags: req.worker_tags.clone(),
                worker_uid: req.worker_uid,
                tfdata_runs_pipelines: req.tfdata_runs_pipelines,
            }))?;
            // Round-robin iterations are joined through a pending task, below.
            for iteration in iterations_to_join(&txn, &address, false) {
                let update = new_task_update(&txn.state, iteration, &address)?;
                txn.apply(update)?;
            }
            tracing::info!(worker = %address, "worker registered");
        }
        // A worker new to (or back in) a round-robin iteration joins it at an
        // agreed round.
        for iteration in iterations_to_join(&txn, &address, true) {
            let w = txn
                .state
                .worker(&address)
                .ok_or_else(|| Error::Internal(format!("worker {address} vanished")))?
                .clone();
            let target = txn.rounds.get(&iteration).copied().unwrap_or(0) + 1;
            let update = UpdateType::CreatePendingTask(wire::CreatePendingTaskUpdate {
                task_id: txn.state.next_task_id().0,
                iteration_id: iteration.0,
                worker_address: w.address.into(),
                transfer_servers: w.transfer_servers,
                worker_tags: w.tags,
                worker_uid: w.uid,
                starting_round: target,
            });
            txn.apply(update)?;
            tracing::info!(worker = %address, iteration = %iteration, round = target, "worker joining a coordinated read");
        }
        // A worker process restarted at the same address (before
        // worker_timeout noticed) lost everything its tasks held: treat the
        // old process as lost; the new one is revived below with new tasks.
        if req.worker_uid != 0
            && let Some(w) = txn.state.worker(&address)
            && !w.lost
            && w.uid != 0
            && w.uid != req.worker_uid
        {
            tracing::warn!(worker = %address, "worker restarted (new worker_uid): its old tasks are lost");
            lose_worker(&mut txn, &address)?;
        }
        if req.tfdata_stopping {
            tracing::info!(worker = %address, "worker stopping; its tasks leave their iterations");
            txn.liveness.forget_worker(&address);
            let runs_pipelines = txn.state.worker(&address).map(|w| w.runs_pipelines);
            if txn.state.worker(&address).is_some_and(|w| !w.lost) {
                lose_worker(&mut txn, &address)?;
            }
            txn.commit().await?;
            // Its snapshot streams go to other workers now: liveness no
            // longer watches it, so they would wait for it forever.
            if let Some(runs_pipelines) = runs_pipelines {
                self.snapshot_worker_lost(&address, runs_pipelines);
            }
            return Ok(wire::WorkerHeartbeatResponse::default());
        }
        if txn.state.worker(&address).is_some_and(|w| w.lost) {
            tracing::info!(worker = %address, "lost worker is back; giving it tasks again");
            txn.apply(UpdateType::TfdataReviveWorker(wire::ReviveWorkerUpdate {
                worker_address: address.clone(),
                worker_uid: req.worker_uid,
            }))?;
            for iteration in iterations_to_join(&txn, &address, false) {
                let update = new_task_update(&txn.state, iteration, &address)?;
                txn.apply(update)?;
            }
        }
        let now = self.clock.now_micros();
        let interval = (req.tfdata_heartbeat_interval_ms > 0)
            .then(|| req.tfdata_heartbeat_interval_ms.saturating_mul(1000));
        let heard = txn.liveness.worker_heard(&address, now, interval, peer);
        if !heard.warned
            && let Some(warning) =
                heard.timeout_warning(self.config.worker_timeout.as_micros() as i64)
        {
            heard.warned = true;
            tracing::warn!(worker = %address, "{warning}");
        }
        let g: &mut super::txn::Guarded = &mut txn;
        g.load.worker_heard(req, now, &g.state);

        let current: HashSet<i64> = req.current_tasks.iter().copied().collect();
        let tasks_to_delete = req
            .current_tasks
            .iter()
            .copied()
            .filter(|&t| !txn.state.is_assigned(&address, TaskId(t)))
            .collect();
        let mut new_tasks = Vec::new();
        for task in txn
            .state
            .tasks_for_worker(&address)
            .filter(|t| !current.contains(&t.id.0))
        {
            new_tasks.push(self.task_def(&txn.state, task)?);
        }
        txn.commit_heartbeat().await?;
        // After the tasks' transaction, as TensorFlow does: snapshot
        // streams are not journaled state.
        let snapshot_tasks = self.snapshot_tasks(req).await?;
        // After it too: autocache's decision is not journaled state, and a
        // cache it starts is written by the snapshot streams of the next
        // heartbeats.
        if !req.tfdata_autocache_profiles.is_empty() {
            self.autocache_profiles(&req.tfdata_autocache_profiles)
                .await;
        }
        Ok(wire::WorkerHeartbeatResponse {
            new_tasks,
            tasks_to_delete,
            snapshot_tasks,
            // Set by `worker_heartbeat_held` when the worker asked for a hold.
            ..Default::default()
        })
    }

    /// Pushes the tasks transactions left in `tasks_to_push` to their
    /// workers (`ProcessTask`), once the state that made them is durable.
    /// Best effort: a worker that misses one gets it with its next
    /// heartbeat.
    pub async fn push_created_tasks(&self) -> Result<()> {
        let defs = {
            let mut txn = self.ledger.begin().await;
            let ids = std::mem::take(&mut txn.tasks_to_push);
            let mut defs = Vec::new();
            for id in ids {
                let Some(task) = txn.state.task(id) else {
                    continue;
                };
                let live = txn
                    .state
                    .worker(&task.worker_address)
                    .is_some_and(|w| !w.lost);
                if live && !task.finished {
                    defs.push(self.task_def(&txn.state, task)?);
                }
            }
            // Waits until what made the tasks is durable.
            txn.commit().await?;
            defs
        };
        let pushes = defs.into_iter().map(|def| self.push_task(def));
        for result in futures::future::join_all(pushes).await {
            if let Err(e) = result {
                tracing::warn!(error = %e, "pushing a new task to its worker failed; its heartbeat will deliver it");
            }
        }
        Ok(())
    }

    /// The `TaskDef` a worker needs to run `task` (spec §5.5).
    pub(super) fn task_def(&self, state: &DispatcherState, task: &Task) -> Result<wire::TaskDef> {
        let it = state
            .iteration(task.iteration_id)
            .ok_or_else(|| Error::Internal(format!("task {} has no iteration", task.id)))?;
        let job = state
            .job(it.job_id)
            .ok_or_else(|| Error::Internal(format!("iteration {} has no job", it.id)))?;
        let dataset = match self.store.path(&job.dataset_id) {
            Some(path) => wire::task_def::Dataset::Path(path),
            // In memory: a map lookup, no I/O.
            None => wire::task_def::Dataset::DatasetDef(self.store.get(&job.dataset_id)?),
        };
        // Static sharding: the worker reads shard `entry` of one per entry.
        let (num_workers, worker_index) = match job.sharding_policy() {
            Some(ShardingPolicy::Off | ShardingPolicy::Dynamic) | None => (0, 0),
            Some(_) => {
                let entry = self
                    .worker_address_entry(state, &task.worker_address)?
                    .ok_or_else(|| {
                        Error::FailedPrecondition(
                            "static sharding requires worker_addresses".into(),
                        )
                    })?;
                (self.config.worker_addresses.len() as i64, entry as i64)
            }
        };
        let autocache_dir = self.autocache_profiles_task(job.id, task.id);
        Ok(wire::TaskDef {
            dataset: Some(dataset),
            dataset_id: job.dataset_id.0.clone(),
            task_id: task.id.0,
            iteration_id: it.id.0,
            num_split_providers: it.num_split_providers,
            worker_address: task.worker_address.to_string(),
            processing_mode_def: Some(job.processing_mode),
            num_consumers: job.num_consumers,
            num_workers,
            worker_index,
            use_cross_trainer_cache: job.use_cross_trainer_cache,
            tfdata_job_id: job.id.0,
            tfdata_consumed_elements: it
                .consumed_elements
                .get(&task.worker_address)
                .map(|r| r.bounds())
                .unwrap_or_default(),
            tfdata_autocache_profile: autocache_dir.is_some(),
            tfdata_autocache_dir: autocache_dir.unwrap_or_default(),
        })
    }

    pub(crate) async fn worker_update(
        &self,
        req: requests::WorkerUpdate,
    ) -> Result<wire::WorkerUpdateResponse> {
        let mut txn = self.ledger.begin().await;
        for &task_id in &req.completed {
            let task = txn
                .state
                .task(task_id)
                .ok_or_else(|| Error::not_found("task", task_id.0))?;
            if !task.finished {
                txn.apply(UpdateType::FinishTask(wire::FinishTaskUpdate {
                    task_id: task_id.0,
                }))?;
                tracing::debug!(task = task_id.0, worker = %req.worker_address, "task finished");
            }
        }
        reassign_returned_splits(&mut txn)?;
        txn.commit().await?;
        Ok(wire::WorkerUpdateResponse {})
    }
}

/// Whether `iteration` is read round-robin (coordinated reads).
pub(super) fn is_round_robin(state: &DispatcherState, iteration: IterationId) -> bool {
    state
        .iteration(iteration)
        .and_then(|it| state.job(it.job_id))
        .is_some_and(|j| j.num_consumers.is_some())
}

/// The update creating a task of `iteration` on `worker`.
pub(super) fn new_task_update(
    state: &DispatcherState,
    iteration: IterationId,
    worker: &str,
) -> Result<UpdateType> {
    let w = state
        .worker(worker)
        .ok_or_else(|| Error::Internal(format!("worker {worker} vanished")))?;
    Ok(UpdateType::CreateTask(wire::CreateTaskUpdate {
        task_id: state.next_task_id().0,
        iteration_id: iteration.0,
        worker_address: w.address.to_string(),
        transfer_servers: w.transfer_servers.clone(),
        worker_tags: w.tags.clone(),
        worker_uid: w.uid,
    }))
}

/// Most created tasks waiting to be pushed to their workers.
const MAX_TASKS_TO_PUSH: usize = 1024;

/// Unfinished iterations `worker` can run and has no task in: the
/// round-robin ones (joined through a pending task) or the others. None for
/// a draining worker.
fn iterations_to_join(txn: &Txn<'_>, worker: &str, round_robin: bool) -> Vec<IterationId> {
    if txn.liveness.is_draining(worker) {
        return Vec::new();
    }
    let state = &txn.state;
    state
        .unfinished_iterations()
        .filter(|it| is_round_robin(state, it.id) == round_robin)
        // Not a TensorFlow graph for a tfdata worker, or the reverse.
        .filter(|it| state.can_run(worker, it.id))
        .filter(|it| {
            !state
                .tasks_for_worker(worker)
                .any(|t| t.iteration_id == it.id)
        })
        .map(|it| it.id)
        .collect()
}

/// Declares `worker` lost (its tasks leave their iterations, its
/// undelivered splits return to the pool) and sees that someone will
/// produce those splits.
pub(super) fn lose_worker(txn: &mut Txn<'_>, worker: &str) -> Result<()> {
    txn.reorder_waits.forget_worker(worker);
    let update = UpdateType::TfdataLoseWorker(wire::LoseWorkerUpdate {
        worker_address: worker.to_string(),
    });
    apply_and_return_splits(txn, update)
}

/// Applies `update`, which may return splits to the pool (a worker lost,
/// a reader's receipts in, a reader released): counts them, and sees that
/// someone will produce them.
pub(super) fn apply_and_return_splits(txn: &mut Txn<'_>, update: UpdateType) -> Result<()> {
    let returned = |state: &DispatcherState| -> usize {
        state
            .iterations()
            .flat_map(|it| it.returned_splits.values())
            .map(|q| q.len())
            .sum()
    };
    let before = returned(&txn.state);
    txn.apply(update)?;
    let after = returned(&txn.state);
    txn.metrics()
        .splits_returned
        .inc_by(after.saturating_sub(before) as u64);
    reassign_returned_splits(txn)
}

/// Splits a lost worker held wait in their iteration's returned queue for
/// a task that still asks for splits. When every live task of the
/// iteration has reached the end of splits (or finished), nobody would
/// ask: start a task on a live worker to produce them, so nothing is lost.
/// With no live worker they wait (the iteration is not finished) for the
/// next worker to register.
fn reassign_returned_splits(txn: &mut Txn<'_>) -> Result<()> {
    let state = &txn.state;
    let waiting: Vec<IterationId> = state
        .unfinished_iterations()
        .filter(|it| !it.returned_splits.is_empty())
        .filter(|it| !is_round_robin(state, it.id))
        .filter(|it| {
            !it.tasks.iter().filter_map(|t| state.task(*t)).any(|t| {
                !t.finished
                    && state.worker(&t.worker_address).is_some_and(|w| !w.lost)
                    && it.returned_splits.keys().any(|&provider| {
                        it.last_split(provider, &t.worker_address)
                            .is_none_or(|last| last.split.is_some())
                    })
            })
        })
        .map(|it| it.id)
        .collect();
    for iteration in waiting {
        let worker = txn
            .state
            .workers()
            .iter()
            .find(|w| {
                !w.lost
                    && !txn.liveness.is_draining(&w.address)
                    && txn.state.can_run(&w.address, iteration)
            })
            .map(|w| w.address.clone());
        let Some(worker) = worker else {
            tracing::warn!(iteration = %iteration, "a lost worker's splits wait for a live worker");
            continue;
        };
        let update = new_task_update(&txn.state, iteration, &worker)?;
        let task = txn.state.next_task_id();
        txn.apply(update)?;
        // The worker is not asking: it would learn of the task at its next
        // heartbeat, up to heartbeat_interval (30 s by default) from now.
        // (Past the bound, heartbeats deliver the rest.)
        if txn.tasks_to_push.len() < MAX_TASKS_TO_PUSH {
            txn.tasks_to_push.push(task);
        }
        tracing::info!(iteration = %iteration, %worker, %task, "new task to produce a lost worker's splits");
    }
    Ok(())
}
