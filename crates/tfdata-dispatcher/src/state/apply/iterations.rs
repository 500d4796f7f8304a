//! Iterations and their readers: `CreateIteration`,
//! `AcquireIterationClient`, `ReleaseIterationClient` and
//! `GarbageCollectIteration`.

use std::collections::{BTreeMap, BTreeSet};

use tfdata_core::{IterationClientId, IterationId, JobId, Result, TaskId};
use tfdata_proto::data::{
    AcquireIterationClientUpdate, CreateIterationUpdate, GarbageCollectIterationUpdate,
    ReleaseIterationClientUpdate,
};

use super::restoration::{consumed_pieces, consumed_splits};
use super::{all_delivered, bad, iteration_mut};
use crate::state::{
    DispatcherState, Iteration, IterationKey, MAX_RESTORATION_CONSUMERS, Repetition, Restoration,
};

impl DispatcherState {
    pub(super) fn apply_create_iteration(&mut self, u: &CreateIterationUpdate) -> Result<()> {
        let id = IterationId(u.iteration_id);
        let job = self
            .jobs
            .get(&JobId(u.job_id))
            .ok_or_else(|| bad("create_iteration", format!("unknown job {}", u.job_id)))?;
        if self.iterations.contains_key(&id) {
            return Err(bad("create_iteration", format!("iteration {id} exists")));
        }
        let key = IterationKey {
            job_name: job.name.clone(),
            repetition: Repetition(u.repetition),
        };
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
        self.next_iteration_id = self.next_iteration_id.max(u.iteration_id.saturating_add(1));
        self.iterations_by_key.insert(key, id);
        self.iterations.insert(
            id,
            Iteration {
                id,
                job_id: JobId(u.job_id),
                repetition: Repetition(u.repetition),
                num_split_providers: u.num_split_providers,
                split_repetitions: vec![Repetition(0); providers],
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
        Ok(())
    }

    pub(super) fn apply_acquire_iteration_client(
        &mut self,
        u: &AcquireIterationClientUpdate,
    ) -> Result<()> {
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
        Ok(())
    }

    pub(super) fn apply_release_iteration_client(
        &mut self,
        u: &ReleaseIterationClientUpdate,
    ) -> Result<()> {
        let client = IterationClientId(u.iteration_client_id);
        let iteration = self.clients.get(&client).copied().ok_or_else(|| {
            bad(
                "release_iteration_client",
                format!("unknown client {client}"),
            )
        })?;
        let ending = self.ending(iteration);
        let it = iteration_mut(&mut self.iterations, "release_iteration_client", iteration)?;
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
            it.finished = all_delivered(it, &self.tasks, ending);
        }
        Ok(())
    }

    pub(super) fn apply_garbage_collect_iteration(
        &mut self,
        u: &GarbageCollectIterationUpdate,
    ) -> Result<()> {
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
        Ok(())
    }
}
