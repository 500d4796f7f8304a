//! Distributed snapshots on the dispatcher's side (spec §8.1): one
//! [`manager::SnapshotManager`] per snapshot path, the cross-snapshot
//! stream [`assignments::Assignments`], and [`resume`] from the files after
//! a restart.
//!
//! Module dependencies point one way: `resume → manager → assignments`.

pub mod assignments;
pub mod manager;
pub mod resume;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tfdata_core::Result;
use tfdata_proto::data::{SnapshotTaskDef, WorkerHeartbeatRequest};

use assignments::Assignments;
use manager::{Io, Progress, SnapshotManager, lock};

/// Every snapshot the dispatcher knows (journaled paths, recovered or
/// started), and which worker writes which stream.
pub struct Snapshots {
    managers: Mutex<BTreeMap<String, Arc<SnapshotManager>>>,
    assignments: Mutex<Assignments>,
}

/// One snapshot's answer to a heartbeat: the stream to write, told only
/// once the I/O is done.
pub struct HeartbeatPart {
    pub manager: Arc<SnapshotManager>,
    pub task: Option<SnapshotTaskDef>,
    pub io: Vec<Io>,
    /// The snapshot finished: news for every worker (its writers stop,
    /// and workers it kept busy may take other snapshots' streams).
    pub finished: bool,
    /// The heartbeat's worker finished its stream: news for it.
    pub stream_done: bool,
}

impl Snapshots {
    pub fn new(worker_max_concurrent_snapshots: usize) -> Self {
        Snapshots {
            managers: Mutex::new(BTreeMap::new()),
            assignments: Mutex::new(Assignments::new(worker_max_concurrent_snapshots)),
        }
    }

    pub fn assignments(&self) -> &Mutex<Assignments> {
        &self.assignments
    }

    pub fn get(&self, path: &str) -> Option<Arc<SnapshotManager>> {
        lock(&self.managers).get(path).cloned()
    }

    pub fn contains(&self, path: &str) -> bool {
        lock(&self.managers).contains_key(path)
    }

    /// Adds a started or recovered snapshot; unfinished ones take workers.
    pub fn insert(&self, manager: SnapshotManager) {
        let path = manager.path().to_string();
        if !manager.is_finished() {
            lock(&self.assignments).add_snapshot(&path);
        }
        lock(&self.managers).insert(path, Arc::new(manager));
    }

    /// The snapshot streams `req`'s worker should write, and the I/O that
    /// must be done before it is told.
    pub fn worker_heartbeat(&self, req: &WorkerHeartbeatRequest) -> Result<Vec<HeartbeatPart>> {
        let paths = lock(&self.assignments).load_balance(&req.worker_address);
        let mut parts = Vec::new();
        for path in paths {
            let Some(manager) = self.get(&path) else {
                // Assignments only name snapshots that were inserted.
                lock(&self.assignments).remove_snapshot(&path);
                continue;
            };
            let outcome = manager.worker_heartbeat(
                &req.worker_address,
                req.tfdata_runs_pipelines,
                req.snapshot_task_progress.get(&path),
                &self.assignments,
            )?;
            if outcome.finished {
                lock(&self.assignments).remove_snapshot(&path);
            }
            if outcome.task.is_some()
                || !outcome.io.is_empty()
                || outcome.finished
                || outcome.stream_done
            {
                parts.push(HeartbeatPart {
                    manager,
                    task: outcome.task,
                    io: outcome.io,
                    finished: outcome.finished,
                    stream_done: outcome.stream_done,
                });
            }
        }
        Ok(parts)
    }

    /// The dispatcher lost `worker`: its unfinished streams become orphans.
    pub fn worker_lost(&self, worker: &str, runs_pipelines: bool) {
        let managers: Vec<_> = lock(&self.managers).values().cloned().collect();
        for manager in managers {
            manager.worker_lost(worker, runs_pipelines, &self.assignments);
        }
    }

    /// The finished snapshots whose `DONE`/`ERROR` file is still to be
    /// written ([`SnapshotManager::retry_final_file`]).
    pub fn with_final_file_pending(&self) -> Vec<Arc<SnapshotManager>> {
        lock(&self.managers)
            .values()
            .filter(|m| m.final_file_pending())
            .cloned()
            .collect()
    }

    /// Every snapshot's progress, by path.
    pub fn progress(&self) -> Vec<(String, Progress)> {
        let managers: Vec<_> = lock(&self.managers).values().cloned().collect();
        managers
            .iter()
            .map(|m| (m.path().to_string(), m.progress()))
            .collect()
    }
}
