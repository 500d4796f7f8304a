//! Which task serves each lane. Any worker can serve any lane; a lane is
//! placed on one of the iteration's live tasks (sorted by task id, lane k
//! on index k % T, T the tasks it may use) and stays there until its stream
//! fails. Then it moves, avoiding the task that failed it for a while, and
//! reopens where it stopped (the merge knows the index).

use std::collections::HashMap;
use std::time::Duration;

use tfdata_core::TaskId;
use tfdata_proto::data as wire;
use tokio::time::Instant;

/// How long a task that failed a lane's stream is avoided when placing
/// lanes: long enough for the dispatcher to declare a dead worker lost
/// (it probes refused ports at once), short enough that a worker that
/// recovered serves again soon.
pub(crate) const AVOID_FAILED_TASK: Duration = Duration::from_secs(5);

#[derive(Debug, Default)]
pub(crate) struct Placement {
    /// The iteration's live tasks, by task id.
    tasks: Vec<wire::TaskInfo>,
    /// Tasks that failed a stream, until when they are avoided.
    avoid: HashMap<TaskId, Instant>,
}

impl Placement {
    /// The tasks the dispatcher listed in its latest heartbeat answer.
    /// Returns the tasks that left (their lanes move).
    pub(crate) fn update(&mut self, mut tasks: Vec<wire::TaskInfo>) -> Vec<TaskId> {
        tasks.sort_by_key(|t| t.task_id);
        let gone = self
            .tasks
            .iter()
            .filter(|old| !tasks.iter().any(|t| t.task_id == old.task_id))
            .map(|t| TaskId(t.task_id))
            .collect();
        self.tasks = tasks;
        gone
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// A task failed a stream: avoid it until `now + AVOID_FAILED_TASK`.
    pub(crate) fn avoid(&mut self, task: TaskId, now: Instant) {
        self.avoid.insert(task, now + AVOID_FAILED_TASK);
    }

    /// The task to serve `lane`: index lane % T among the live tasks not
    /// avoided; if every task is avoided, among all (one worker left is
    /// better than none).
    pub(crate) fn place(&mut self, lane: u32, now: Instant) -> Option<wire::TaskInfo> {
        self.avoid.retain(|_, until| *until > now);
        let usable: Vec<&wire::TaskInfo> = self
            .tasks
            .iter()
            .filter(|t| !self.avoid.contains_key(&TaskId(t.task_id)))
            .collect();
        let from: Vec<&wire::TaskInfo> = if usable.is_empty() {
            self.tasks.iter().collect()
        } else {
            usable
        };
        if from.is_empty() {
            return None;
        }
        Some(from[lane as usize % from.len()].clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: i64) -> wire::TaskInfo {
        wire::TaskInfo {
            task_id: id,
            worker_address: format!("w{id}"),
            ..Default::default()
        }
    }

    #[test]
    fn lanes_spread_over_tasks_by_id_and_move_off_a_failed_one() {
        let now = Instant::now();
        let mut p = Placement::default();
        assert!(p.place(0, now).is_none());
        assert!(p.update(vec![task(9), task(3), task(5)]).is_empty());
        let on = |p: &mut Placement, lane| p.place(lane, now).unwrap().task_id;
        assert_eq!(
            (0..6).map(|k| on(&mut p, k)).collect::<Vec<_>>(),
            [3, 5, 9, 3, 5, 9]
        );
        p.avoid(TaskId(5), now);
        assert_eq!(on(&mut p, 1), 9);
        assert_eq!(on(&mut p, 0), 3);
        // Every task avoided: any will do.
        p.avoid(TaskId(3), now);
        p.avoid(TaskId(9), now);
        assert!(p.place(1, now).is_some());
        // The avoidance wears off.
        assert_eq!(p.place(1, now + AVOID_FAILED_TASK * 2).unwrap().task_id, 5);
        assert_eq!(p.update(vec![task(3), task(11)]), [TaskId(5), TaskId(9)]);
        assert_eq!(p.place(1, now + AVOID_FAILED_TASK * 2).unwrap().task_id, 11);
    }
}
