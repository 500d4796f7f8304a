//! Readers' reorder waits (issue 35): the time a deterministic read's
//! readers spent waiting for one lane's next element while other lanes'
//! elements sat in their reorder window, per worker serving the lane, as
//! each reader reports it in its `ClientHeartbeat`
//! (`tfdata_reorder_waits`). A worker whose lanes keep readers waiting is
//! slower than the others: the status page and `/metrics` show it.
//!
//! Like `load`, these are observations, not state: kept beside the
//! journaled state (behind the same lock), never journaled, and refilled by
//! the next heartbeats after a restart. Memory is bounded: one fixed-size
//! [`WaitRecord`] per (iteration, registered worker), for deterministic
//! iterations only; waits naming workers the dispatcher does not know are
//! ignored, a lost worker's records are dropped, and so are a
//! garbage-collected iteration's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use tfdata_core::IterationId;
use tfdata_proto::data as wire;

use crate::overview::ReorderWaitOverview;
use crate::state::{DispatcherState, WorkerAddress};

/// How far back "recent" waits reach: the status page shows the waits of
/// the last minute, so a worker that was slow an hour ago does not stand
/// out now.
pub const RECENT: Duration = Duration::from_secs(60);
/// [`RECENT`] is kept as this many slots of equal length, each the sum of
/// the waits reported in it (and the fullest window reported in it).
const SLOTS: usize = 6;
const SLOT_MICROS: i64 = (RECENT.as_micros() / SLOTS as u128) as i64;

/// What the readers of one iteration reported of one worker: fixed size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WaitRecord {
    /// Per slot: its number (time / slot length), the waits reported in it
    /// (ms) and the fullest reorder window reported in it (elements, and
    /// that window's bound).
    slot: [i64; SLOTS],
    waited_ms: [u64; SLOTS],
    window_elements: [u64; SLOTS],
    window_limit: [u64; SLOTS],
    /// Every wait reported since the dispatcher started (ms).
    pub total_waited_ms: u64,
}

impl Default for WaitRecord {
    fn default() -> Self {
        WaitRecord {
            // No slot: a clock may start at 0.
            slot: [i64::MIN; SLOTS],
            waited_ms: [0; SLOTS],
            window_elements: [0; SLOTS],
            window_limit: [0; SLOTS],
            total_waited_ms: 0,
        }
    }
}

impl WaitRecord {
    fn add(&mut self, wait: &wire::TfdataReorderWait, now_micros: i64) {
        let slot = now_micros.div_euclid(SLOT_MICROS);
        let i = slot.rem_euclid(SLOTS as i64) as usize;
        if self.slot[i] != slot {
            self.slot[i] = slot;
            self.waited_ms[i] = 0;
            self.window_elements[i] = 0;
            self.window_limit[i] = 0;
        }
        self.waited_ms[i] = self.waited_ms[i].saturating_add(wait.waited_ms);
        if wait.window_elements >= self.window_elements[i] {
            self.window_elements[i] = wait.window_elements;
            self.window_limit[i] = wait.window_limit;
        }
        self.total_waited_ms = self.total_waited_ms.saturating_add(wait.waited_ms);
    }

    /// The slots within [`RECENT`] of `now_micros`.
    fn recent(&self, now_micros: i64) -> impl Iterator<Item = usize> + '_ {
        let current = now_micros.div_euclid(SLOT_MICROS);
        (0..SLOTS).filter(move |&i| {
            let age = current.saturating_sub(self.slot[i]);
            (0..SLOTS as i64).contains(&age)
        })
    }

    /// Waits reported within [`RECENT`].
    pub fn recent_wait(&self, now_micros: i64) -> Duration {
        Duration::from_millis(self.recent(now_micros).map(|i| self.waited_ms[i]).sum())
    }

    /// The fullest window reported within [`RECENT`]: (elements, bound).
    pub fn recent_window(&self, now_micros: i64) -> Option<(u64, u64)> {
        self.recent(now_micros)
            .map(|i| (self.window_elements[i], self.window_limit[i]))
            .max_by_key(|(elements, _)| *elements)
    }
}

#[derive(Debug, Default)]
pub(crate) struct ReorderWaits {
    by_iteration: HashMap<IterationId, BTreeMap<WorkerAddress, WaitRecord>>,
    /// Workers with series in the per-worker metrics (so the series of a
    /// worker that leaves are removed): at most the registered workers.
    pub exported: BTreeSet<WorkerAddress>,
}

/// What one heartbeat's waits changed: per worker, the wait added (for the
/// counter of `/metrics`).
pub(crate) type Added = Vec<(WorkerAddress, Duration)>;

impl ReorderWaits {
    /// Records the waits a reader of `iteration` reported. Ignored: an
    /// iteration that is not a deterministic read's, waits naming a worker
    /// that is not registered (or is lost), or a lane the job does not have.
    pub fn record(
        &mut self,
        state: &DispatcherState,
        iteration: IterationId,
        waits: &[wire::TfdataReorderWait],
        now_micros: i64,
    ) -> Added {
        let lanes = state
            .iteration(iteration)
            .filter(|it| !it.garbage_collected)
            .and_then(|it| state.job(it.job_id))
            .and_then(|j| j.deterministic())
            .map(|d| d.lanes);
        let Some(lanes) = lanes else {
            return Vec::new();
        };
        let mut added: Added = Vec::new();
        for wait in waits {
            let Some(worker) = state
                .worker(&wait.worker_address)
                .filter(|w| !w.lost)
                .map(|w| &w.address)
            else {
                continue;
            };
            if !(0..lanes).contains(&wait.lane) {
                continue;
            }
            self.by_iteration
                .entry(iteration)
                .or_default()
                .entry(worker.clone())
                .or_default()
                .add(wait, now_micros);
            match added.iter_mut().find(|(w, _)| w == worker) {
                Some((_, d)) => *d += Duration::from_millis(wait.waited_ms),
                None => added.push((worker.clone(), Duration::from_millis(wait.waited_ms))),
            }
        }
        added
    }

    /// A worker was lost: its records go (a worker that comes back starts
    /// afresh).
    pub fn forget_worker(&mut self, worker: &str) {
        for records in self.by_iteration.values_mut() {
            records.remove(worker);
        }
        self.by_iteration.retain(|_, records| !records.is_empty());
    }

    /// Drops the records of iterations that are gone or garbage collected.
    pub fn forget_ended(&mut self, state: &DispatcherState) {
        self.by_iteration
            .retain(|id, _| state.iteration(*id).is_some_and(|it| !it.garbage_collected));
    }

    /// Every record, by iteration then worker.
    pub fn overviews(&self, now_micros: i64) -> Vec<ReorderWaitOverview> {
        let mut rows: Vec<ReorderWaitOverview> = self
            .by_iteration
            .iter()
            .flat_map(|(iteration, records)| {
                records.iter().map(move |(worker, r)| ReorderWaitOverview {
                    iteration: *iteration,
                    worker_address: worker.to_string(),
                    recent_wait: r.recent_wait(now_micros),
                    total_wait: Duration::from_millis(r.total_waited_ms),
                    recent_window: r.recent_window(now_micros),
                })
            })
            .collect();
        rows.sort_by(|a, b| {
            (a.iteration, &a.worker_address).cmp(&(b.iteration, &b.worker_address))
        });
        rows
    }

    /// Per worker, the fullest window reported within [`RECENT`] over its
    /// iterations (workers with no recent report: 0).
    pub fn fullest_windows(&self, now_micros: i64) -> BTreeMap<WorkerAddress, u64> {
        let mut fullest: BTreeMap<WorkerAddress, u64> = BTreeMap::new();
        for records in self.by_iteration.values() {
            for (worker, r) in records {
                let elements = r.recent_window(now_micros).map_or(0, |(e, _)| e);
                let entry = fullest.entry(worker.clone()).or_default();
                *entry = (*entry).max(elements);
            }
        }
        fullest
    }

    #[cfg(test)]
    pub fn records(&self) -> usize {
        self.by_iteration.values().map(BTreeMap::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(waited_ms: u64, window_elements: u64) -> wire::TfdataReorderWait {
        wire::TfdataReorderWait {
            worker_address: "w:1".into(),
            lane: 0,
            waited_ms,
            window_elements,
            window_limit: 64,
        }
    }

    #[test]
    fn a_record_keeps_the_last_minute_in_fixed_slots() {
        let mut r = WaitRecord::default();
        let second = 1_000_000;
        let start = 1_000 * second;
        r.add(&wait(500, 10), start);
        r.add(&wait(250, 40), start + 5 * second);
        r.add(&wait(1_000, 20), start + 30 * second);
        assert_eq!(
            r.recent_wait(start + 30 * second),
            Duration::from_millis(1_750)
        );
        assert_eq!(r.recent_window(start + 30 * second), Some((40, 64)));
        // A minute on, the first reports have expired; the total has not.
        assert_eq!(
            r.recent_wait(start + 65 * second),
            Duration::from_millis(1_000)
        );
        assert_eq!(r.recent_window(start + 65 * second), Some((20, 64)));
        assert_eq!(r.recent_wait(start + 200 * second), Duration::ZERO);
        assert_eq!(r.recent_window(start + 200 * second), None);
        assert_eq!(r.total_waited_ms, 1_750);
        // Thousands of reports later it is the same size.
        for i in 0..10_000 {
            r.add(&wait(1, 1), start + 200 * second + i * 100_000);
        }
        assert_eq!(std::mem::size_of_val(&r), std::mem::size_of::<WaitRecord>());
        assert!(r.recent_wait(start + 1_200 * second) <= Duration::from_millis(600));
    }
}
