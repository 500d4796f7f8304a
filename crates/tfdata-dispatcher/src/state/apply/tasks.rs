//! Tasks: `CreateTask`, `CreatePendingTask` (a coordinated read's task
//! that joins at an agreed round), `ClientHeartbeat` (the consumers'
//! agreement on it), `FinishTask` and `RemoveTask`.

use std::collections::BTreeSet;

use tfdata_core::{IterationClientId, IterationId, Result, TaskId};
use tfdata_proto::data::{
    ClientHeartbeatUpdate, CreatePendingTaskUpdate, CreateTaskUpdate, FinishTaskUpdate,
    RemoveTaskUpdate,
};

use super::{all_delivered, bad, iteration_mut};
use crate::state::{DispatcherState, Iteration, PendingTask, Task};

impl DispatcherState {
    pub(super) fn apply_create_task(&mut self, u: &CreateTaskUpdate) -> Result<()> {
        let task = Task {
            id: TaskId(u.task_id),
            iteration_id: IterationId(u.iteration_id),
            worker_address: u.worker_address.clone().into(),
            transfer_servers: u.transfer_servers.clone(),
            worker_tags: u.worker_tags.clone(),
            worker_uid: u.worker_uid,
            starting_round: 0,
            finished: false,
        };
        self.check_new_task("create_task", &task)?;
        if let Some(it) = self.insert_task(task) {
            it.tasks.push(TaskId(u.task_id));
            // A new task on this worker counts its split requests from 0:
            // forget the answers an earlier task of it got.
            it.last_splits.retain(|r, _| r.worker != u.worker_address);
        }
        Ok(())
    }

    pub(super) fn apply_create_pending_task(&mut self, u: &CreatePendingTaskUpdate) -> Result<()> {
        let task = Task {
            id: TaskId(u.task_id),
            iteration_id: IterationId(u.iteration_id),
            worker_address: u.worker_address.clone().into(),
            transfer_servers: u.transfer_servers.clone(),
            worker_tags: u.worker_tags.clone(),
            worker_uid: u.worker_uid,
            starting_round: u.starting_round,
            finished: false,
        };
        self.check_new_task("create_pending_task", &task)?;
        if let Some(it) = self.insert_task(task) {
            it.pending_tasks.push_back(PendingTask {
                task_id: TaskId(u.task_id),
                target_round: u.starting_round,
                ready_consumers: BTreeSet::new(),
                failures: 0,
            });
        }
        Ok(())
    }

    /// A coordinated-read consumer accepted or rejected the first pending
    /// task's round; once every consumer accepted, the task joins.
    pub(super) fn apply_client_heartbeat(&mut self, u: &ClientHeartbeatUpdate) -> Result<()> {
        let client = IterationClientId(u.iteration_client_id);
        let iteration_id = self
            .clients
            .get(&client)
            .copied()
            .ok_or_else(|| bad("client_heartbeat", format!("unknown client {client}")))?;
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
        Ok(())
    }

    pub(super) fn apply_finish_task(&mut self, u: &FinishTaskUpdate) -> Result<()> {
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
        let ending = self.ending(iteration_id);
        if let Some(it) = self.iterations.get_mut(&iteration_id) {
            // A finished task delivered everything it held.
            it.held_splits.retain(|key, _| key.task != id);
            it.task_completed = true;
            it.finished = all_delivered(it, &self.tasks, ending);
        }
        Ok(())
    }

    pub(super) fn apply_remove_task(&mut self, u: &RemoveTaskUpdate) -> Result<()> {
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
        Ok(())
    }

    /// A new task's preconditions: its id is new, its iteration exists and
    /// is not a restoration still gathering its consumers, its worker is
    /// registered (and a tfdata worker, for a deterministic read).
    fn check_new_task(&self, update: &str, task: &Task) -> Result<()> {
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
        if !self.tasks_by_worker.contains_key(&task.worker_address) {
            return Err(bad(
                update,
                format!("unknown worker {}", task.worker_address),
            ));
        }
        if self.is_deterministic(task.iteration_id)
            && self
                .worker(&task.worker_address)
                .is_some_and(|w| !w.runs_pipelines)
        {
            return Err(bad(
                update,
                format!(
                    "iteration {} is a deterministic read's, which TensorFlow worker {} cannot serve",
                    task.iteration_id, task.worker_address
                ),
            ));
        }
        Ok(())
    }

    /// Records a task [`check_new_task`](Self::check_new_task) admitted and
    /// returns its iteration, where the caller places it.
    fn insert_task(&mut self, task: Task) -> Option<&mut Iteration> {
        let (id, iteration_id) = (task.id, task.iteration_id);
        if let Some(assigned) = self.tasks_by_worker.get_mut(&task.worker_address) {
            assigned.insert(id);
        }
        self.next_task_id = self.next_task_id.max(id.0.saturating_add(1));
        self.tasks.insert(id, task);
        self.iterations.get_mut(&iteration_id)
    }
}
