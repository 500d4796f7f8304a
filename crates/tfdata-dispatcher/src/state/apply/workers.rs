//! Workers: `RegisterWorker`, `LoseWorker` and `ReviveWorker`.

use tfdata_core::{Result, TaskId};
use tfdata_proto::data::{LoseWorkerUpdate, RegisterWorkerUpdate, ReviveWorkerUpdate};

use super::{all_delivered, bad};
use crate::state::{DispatcherState, Worker};

impl DispatcherState {
    pub(super) fn apply_register_worker(&mut self, u: &RegisterWorkerUpdate) -> Result<()> {
        if self
            .worker_positions
            .contains_key(u.worker_address.as_str())
        {
            return Err(bad(
                "register_worker",
                format!("{} registered twice", u.worker_address),
            ));
        }
        self.worker_positions
            .insert(u.worker_address.clone().into(), self.workers.len());
        self.workers.push(Worker {
            address: u.worker_address.clone().into(),
            transfer_servers: u.transfer_servers.clone(),
            tags: u.worker_tags.clone(),
            uid: u.worker_uid,
            lost: false,
            runs_pipelines: u.tfdata_runs_pipelines,
        });
        self.tasks_by_worker
            .entry(u.worker_address.clone().into())
            .or_default();
        Ok(())
    }

    /// The worker is lost: its unfinished tasks end, their held splits go
    /// back to the pool (once the readers that report receipts have), and
    /// it gets no tasks until it heartbeats again.
    pub(super) fn apply_lose_worker(&mut self, u: &LoseWorkerUpdate) -> Result<()> {
        let address = u.worker_address.as_str();
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
            let ending = self.ending(iteration_id);
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
                it.finished = all_delivered(it, &self.tasks, ending);
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

    pub(super) fn apply_revive_worker(&mut self, u: &ReviveWorkerUpdate) -> Result<()> {
        let &i = self
            .worker_positions
            .get(u.worker_address.as_str())
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
        Ok(())
    }
}
