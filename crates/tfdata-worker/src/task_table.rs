//! The worker's task table: the tasks it runs, and the ones the dispatcher
//! deleted, whose readers get the end of sequence. One lock over both, so a
//! task cannot be started again between its deletion and its record as
//! deleted.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use tfdata_core::TaskId;

use crate::task::TaskRunner;

/// A task as readers find it.
pub(crate) enum Lookup {
    Task(Arc<TaskRunner>),
    /// Deleted by the dispatcher: its readers get the end of sequence.
    Finished,
}

#[derive(Default)]
pub(crate) struct TaskTable {
    inner: Mutex<Tasks>,
}

#[derive(Default)]
struct Tasks {
    running: HashMap<TaskId, Arc<TaskRunner>>,
    /// Tasks the dispatcher deleted: `GetElement` answers end of sequence.
    deleted: HashSet<TaskId>,
}

impl TaskTable {
    fn lock(&self) -> MutexGuard<'_, Tasks> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds the task `make` builds, unless `id` is running or was deleted
    /// (`ProcessTask` and heartbeats may both deliver a task): the new
    /// runner, or `None` if it was known.
    pub(crate) fn insert_new(
        &self,
        id: TaskId,
        make: impl FnOnce() -> Arc<TaskRunner>,
    ) -> Option<Arc<TaskRunner>> {
        let mut tasks = self.lock();
        if tasks.running.contains_key(&id) || tasks.deleted.contains(&id) {
            return None;
        }
        let runner = make();
        tasks.running.insert(id, Arc::clone(&runner));
        Some(runner)
    }

    /// Records `id` as deleted by the dispatcher; the runner, if it ran here.
    pub(crate) fn delete(&self, id: TaskId) -> Option<Arc<TaskRunner>> {
        let mut tasks = self.lock();
        tasks.deleted.insert(id);
        tasks.running.remove(&id)
    }

    /// The task `id`, if it runs here or was deleted.
    pub(crate) fn find(&self, id: TaskId) -> Option<Lookup> {
        let tasks = self.lock();
        if let Some(task) = tasks.running.get(&id) {
            return Some(Lookup::Task(Arc::clone(task)));
        }
        tasks.deleted.contains(&id).then_some(Lookup::Finished)
    }

    /// The tasks running now.
    pub(crate) fn running(&self) -> Vec<Arc<TaskRunner>> {
        self.lock().running.values().cloned().collect()
    }

    pub(crate) fn num_running(&self) -> usize {
        self.lock().running.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfdata_proto::data::TaskDef;

    fn runner(id: i64) -> Arc<TaskRunner> {
        Arc::new(TaskRunner::new(
            TaskDef {
                task_id: id,
                ..Default::default()
            },
            1,
        ))
    }

    fn is_task(lookup: Option<Lookup>, id: i64) -> bool {
        matches!(lookup, Some(Lookup::Task(t)) if t.task_id() == TaskId(id))
    }

    #[test]
    fn a_task_is_started_once_and_never_after_its_deletion() {
        let table = TaskTable::default();
        assert!(table.find(TaskId(1)).is_none(), "unknown before it arrives");
        assert!(table.insert_new(TaskId(1), || runner(1)).is_some());
        assert!(is_task(table.find(TaskId(1)), 1));
        // Delivered again (ProcessTask and a heartbeat): not built again.
        assert!(
            table
                .insert_new(TaskId(1), || panic!("built a known task again"))
                .is_none()
        );
        assert_eq!(table.num_running(), 1);

        let deleted = table.delete(TaskId(1));
        assert!(deleted.is_some_and(|t| t.task_id() == TaskId(1)));
        assert!(matches!(table.find(TaskId(1)), Some(Lookup::Finished)));
        assert!(
            table
                .insert_new(TaskId(1), || panic!("restarted a deleted task"))
                .is_none()
        );
        assert_eq!(table.num_running(), 0);
        assert!(table.running().is_empty());
    }

    #[test]
    fn a_task_deleted_before_it_arrived_is_finished_and_never_started() {
        let table = TaskTable::default();
        assert!(table.delete(TaskId(7)).is_none());
        assert!(matches!(table.find(TaskId(7)), Some(Lookup::Finished)));
        assert!(
            table
                .insert_new(TaskId(7), || panic!("started a deleted task"))
                .is_none()
        );
        assert!(table.insert_new(TaskId(8), || runner(8)).is_some());
        let running: Vec<_> = table.running().iter().map(|t| t.task_id()).collect();
        assert_eq!(running, vec![TaskId(8)]);
    }
}
