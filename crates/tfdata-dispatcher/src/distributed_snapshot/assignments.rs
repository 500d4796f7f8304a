//! Which snapshot streams each worker writes, across all snapshots, within
//! `worker_max_concurrent_snapshots` (TensorFlow's `SnapshotAssignmentManager`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tfdata_core::{Error, Result};

#[derive(Debug)]
pub struct Assignments {
    max_per_worker: usize,
    /// Each worker's (snapshot, stream) pairs.
    by_worker: HashMap<String, BTreeSet<(String, i64)>>,
    /// Streams assigned per snapshot still taking workers.
    counts: BTreeMap<String, usize>,
}

impl Assignments {
    pub fn new(max_per_worker: usize) -> Self {
        Assignments {
            max_per_worker: max_per_worker.max(1),
            by_worker: HashMap::new(),
            counts: BTreeMap::new(),
        }
    }

    pub fn max_per_worker(&self) -> usize {
        self.max_per_worker
    }

    /// A snapshot that takes workers from now on.
    pub fn add_snapshot(&mut self, path: &str) {
        self.counts.entry(path.to_string()).or_insert(0);
    }

    /// A finished (done or failed) snapshot takes no more workers.
    pub fn remove_snapshot(&mut self, path: &str) {
        self.counts.remove(path);
        for streams in self.by_worker.values_mut() {
            streams.retain(|(p, _)| p != path);
        }
    }

    /// Records that `worker` writes `stream` of `path`, unless the worker is
    /// at its limit (`Ok(false)`). Assigning the same stream twice is a bug.
    pub fn try_add(&mut self, path: &str, worker: &str, stream: i64) -> Result<bool> {
        let streams = self.by_worker.entry(worker.to_string()).or_default();
        if streams.len() >= self.max_per_worker {
            return Ok(false);
        }
        if !streams.insert((path.to_string(), stream)) {
            return Err(Error::Internal(format!(
                "worker {worker} already writes stream {stream} of the snapshot at {path}"
            )));
        }
        *self.counts.entry(path.to_string()).or_insert(0) += 1;
        Ok(true)
    }

    pub fn remove(&mut self, path: &str, worker: &str, stream: i64) {
        let removed = self
            .by_worker
            .get_mut(worker)
            .is_some_and(|s| s.remove(&(path.to_string(), stream)));
        if removed && let Some(count) = self.counts.get_mut(path) {
            *count = count.saturating_sub(1);
        }
    }

    /// The snapshots whose managers see `worker`'s heartbeat: those it
    /// writes, plus, while it is under its limit, the least-assigned other
    /// one (one at a time, so the first snapshots submitted do not take
    /// every worker before the others arrive).
    pub fn load_balance(&self, worker: &str) -> Vec<String> {
        let mut result: Vec<String> = Vec::new();
        if let Some(streams) = self.by_worker.get(worker) {
            for (path, _) in streams {
                if !result.contains(path) {
                    result.push(path.clone());
                }
            }
        }
        if result.len() >= self.max_per_worker {
            return result;
        }
        let mut by_count: Vec<(usize, &String)> =
            self.counts.iter().map(|(p, c)| (*c, p)).collect();
        by_count.sort();
        if let Some((_, path)) = by_count.into_iter().find(|(_, p)| !result.contains(p)) {
            result.push(path.clone());
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_stay_within_their_limit_and_spread_over_snapshots() {
        let mut a = Assignments::new(2);
        a.add_snapshot("/a");
        a.add_snapshot("/b");
        assert_eq!(a.load_balance("w1"), ["/a"]);
        assert!(a.try_add("/a", "w1", 0).unwrap());
        // The least-assigned other snapshot next.
        assert_eq!(a.load_balance("w1"), ["/a", "/b"]);
        assert!(a.try_add("/b", "w1", 0).unwrap());
        assert!(!a.try_add("/b", "w1", 1).unwrap());
        assert_eq!(a.load_balance("w1"), ["/a", "/b"]);
        assert_eq!(a.load_balance("w2"), ["/a"]);
        assert!(a.try_add("/a", "w2", 5).unwrap());
        assert!(a.try_add("/a", "w2", 5).is_err());
        a.remove("/a", "w1", 0);
        a.remove_snapshot("/b");
        assert_eq!(a.load_balance("w1"), ["/a"]);
        assert!(a.try_add("/a", "w1", 1).unwrap());
    }
}
