//! [`DispatcherState::apply`]: the state's transition, one checked function
//! per update kind, grouped by what they change: `datasets` (datasets and
//! jobs), `workers`, `iterations` (iterations and their readers),
//! `restoration` (checkpoints and restored readers), `tasks`, `splits` and
//! `snapshots` (`distributed_save`). `apply` only dispatches. Each function
//! makes every check before any change, so an error leaves the state as it
//! was (property-tested in `invariants`).

use std::collections::BTreeMap;

use tfdata_core::{Error, IterationId, Result, TaskId};
use tfdata_proto::data::processing_mode_def::ShardingPolicy;
use tfdata_proto::data::{Update, update::UpdateType};

use super::{DispatcherState, Iteration, Task};

mod datasets;
mod iterations;
mod restoration;
mod snapshots;
mod splits;
mod tasks;
mod workers;

pub(crate) use restoration::consumed_elements;

impl DispatcherState {
    /// Applies one update. On error the state is unchanged.
    pub fn apply(&mut self, update: &Update) -> Result<()> {
        let Some(kind) = &update.update_type else {
            return Err(bad("empty", "no update type set".into()));
        };
        match kind {
            UpdateType::RegisterDataset(u) => self.apply_register_dataset(u),
            UpdateType::RegisterWorker(u) => self.apply_register_worker(u),
            UpdateType::CreateJob(u) => self.apply_create_job(u),
            UpdateType::CreateIteration(u) => self.apply_create_iteration(u),
            UpdateType::ProduceSplit(u) => self.apply_produce_split(u),
            UpdateType::AcquireIterationClient(u) => self.apply_acquire_iteration_client(u),
            UpdateType::ReleaseIterationClient(u) => self.apply_release_iteration_client(u),
            UpdateType::GarbageCollectIteration(u) => self.apply_garbage_collect_iteration(u),
            UpdateType::RemoveTask(u) => self.apply_remove_task(u),
            UpdateType::CreatePendingTask(u) => self.apply_create_pending_task(u),
            UpdateType::ClientHeartbeat(u) => self.apply_client_heartbeat(u),
            UpdateType::CreateTask(u) => self.apply_create_task(u),
            UpdateType::FinishTask(u) => self.apply_finish_task(u),
            UpdateType::TfdataLoseWorker(u) => self.apply_lose_worker(u),
            UpdateType::TfdataReceiveSplits(u) => self.apply_receive_splits(u),
            UpdateType::TfdataCheckpointTaken(u) => self.apply_checkpoint_taken(u),
            UpdateType::TfdataJoinRestore(u) => self.apply_join_restore(u),
            UpdateType::TfdataReviveWorker(u) => self.apply_revive_worker(u),
            UpdateType::Snapshot(u) => self.apply_snapshot(u),
            UpdateType::CompressionDisabledAtRuntime(u) => {
                self.apply_compression_disabled_at_runtime(u)
            }
        }
    }

    /// How `iteration`'s end is decided ([`all_delivered`]).
    fn ending(&self, iteration: IterationId) -> Ending {
        let job = self
            .iterations
            .get(&iteration)
            .and_then(|it| self.jobs.get(&it.job_id));
        match job {
            Some(j) if j.deterministic().is_some() => Ending::ByItsReaders,
            Some(j) if j.sharding_policy() == Some(ShardingPolicy::Dynamic) => {
                Ending::WhenATaskCompletes
            }
            _ => Ending::WhenItsTasksFinish,
        }
    }
}

/// What ends an iteration, besides garbage collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Its tasks all finished (parallel_epochs, static sharding).
    WhenItsTasksFinish,
    /// distributed_epoch: a task completed (the data ran out) and every
    /// task finished. Tasks that left with lost workers are not the end of
    /// the data.
    WhenATaskCompletes,
    /// A deterministic read: its readers hold every lane's position and
    /// end it by releasing it (then garbage collection); no task's end
    /// ends it, since any worker may serve any lane, later ones included.
    ByItsReaders,
}

/// An iteration is finished when all its tasks are and no returned split
/// waits for a task to produce it.
fn all_delivered(it: &Iteration, tasks: &BTreeMap<TaskId, Task>, ending: Ending) -> bool {
    if ending == Ending::ByItsReaders {
        return false;
    }
    (ending == Ending::WhenItsTasksFinish || it.task_completed)
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

#[cfg(test)]
mod tests {
    use super::*;
    use tfdata_core::DatasetId;
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
