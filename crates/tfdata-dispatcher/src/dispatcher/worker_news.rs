//! News for workers, and heartbeats held until it comes.
//!
//! A worker learns what it should run (tasks to start or delete, snapshot
//! streams to write or stop) from heartbeat answers. TensorFlow's workers
//! heartbeat every `heartbeat_interval` (30 s by default), so news waited
//! for the next one: a `distributed_save` of a few thousand elements took
//! a minute, its streams made at one heartbeat and marked done at the next.
//!
//! Our workers ask the dispatcher to hold their heartbeat
//! (`WorkerHeartbeatRequest.tfdata_hold_ms`) and send the next one as soon
//! as it is answered: the dispatcher answers when there is news for the
//! worker, or after the hold ([`MAX_HOLD`] at most), a long poll. Each
//! answer says where it is in the dispatcher's news
//! (`tfdata_news_seen`); the worker's next heartbeat repeats it, and is
//! answered at once if news came since. Something that changes a worker's
//! answer other than its own heartbeat is *news* for it: a task made or
//! removed for it ([`workers_told`], from every update a transaction
//! applies), a snapshot started, finished or left without a writer (for
//! every worker), a stream it finished (it may take the next snapshot's).
//!
//! TensorFlow's workers never ask for a hold, so they are never held: they
//! keep TensorFlow's protocol and schedule. Bounds: one held heartbeat per
//! worker (a newer one answers the older at once), [`MAX_HOLD`] each, and
//! none once the dispatcher stops or loses its lease ([`WorkerNews::release`]
//! answers those held with `UNAVAILABLE`). Waiting takes no thread: held
//! heartbeats wait on [`tokio::sync::Notify`]s.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tfdata_core::{IterationId, TaskId};
use tfdata_proto::data::update::UpdateType;
use tfdata_rpc::CancellationToken;
use tokio::sync::Notify;

use crate::state::{DispatcherState, WorkerAddress};

/// The longest a heartbeat is held: well under the 30 s a load balancer or
/// proxy may give a quiet call, and under readers' heartbeat deadline. A
/// worker holding heartbeats of this length says it is alive this often.
pub const MAX_HOLD: Duration = Duration::from_secs(10);

/// Why a held heartbeat is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woken {
    /// News for the worker since the number it saw.
    News,
    /// A newer heartbeat of the same worker came: this one is answered, so
    /// one at most is held.
    Superseded,
    /// The hold passed without news.
    Bound,
    /// The dispatcher stops (or lost its lease): nothing is held any more.
    Released,
}

/// One worker's news and its held heartbeat.
struct Slot {
    /// The news clock when something last changed this worker's answer.
    news: u64,
    /// The newest heartbeat of this worker asking to be held.
    newest_hold: u64,
    /// Woken with news for this worker and with a newer heartbeat.
    changed: Arc<Notify>,
}

/// Which workers have news, and the heartbeats held until they do.
pub(crate) struct WorkerNews {
    /// Random, far from 0: a number from another dispatcher (one that
    /// restarted, or the previous leader) is outside
    /// `[start, clock]` and counts as news.
    start: u64,
    /// Advanced at each piece of news.
    clock: AtomicU64,
    /// The clock at the last news for every worker.
    everyone: AtomicU64,
    everyone_changed: Notify,
    /// Per worker address: workers the state names, or that heartbeated.
    slots: Mutex<HashMap<WorkerAddress, Slot>>,
    /// Cancelled when the dispatcher stops holding heartbeats.
    released: CancellationToken,
}

impl Default for WorkerNews {
    fn default() -> Self {
        // In [2^32, 2^63): far from 0 (never seen) and from overflow.
        let start = (rand::random::<u64>() >> 1) | (1 << 32);
        WorkerNews {
            start,
            clock: AtomicU64::new(start),
            everyone: AtomicU64::new(0),
            everyone_changed: Notify::new(),
            slots: Mutex::new(HashMap::new()),
            released: CancellationToken::new(),
        }
    }
}

impl WorkerNews {
    /// Where the news is now: an answer computed after this read includes
    /// all news up to it.
    pub fn now(&self) -> u64 {
        self.clock.load(Ordering::SeqCst)
    }

    /// Something changed `worker`'s heartbeat answer.
    pub fn tell(&self, worker: &str) {
        let at = self.clock.fetch_add(1, Ordering::SeqCst) + 1;
        let mut slots = self.slots();
        let slot = slot_of(&mut slots, worker);
        slot.news = at;
        slot.changed.notify_waiters();
    }

    /// Something changed every worker's heartbeat answer (a snapshot
    /// started, finished, or has a stream without a writer).
    pub fn tell_everyone(&self) {
        let at = self.clock.fetch_add(1, Ordering::SeqCst) + 1;
        self.everyone.store(at, Ordering::SeqCst);
        self.everyone_changed.notify_waiters();
    }

    /// Whether `worker`'s answer changed since `seen` (a number from its
    /// last answer; 0 or another dispatcher's counts as a change).
    pub fn since(&self, worker: &str, seen: u64) -> bool {
        if seen < self.start || seen > self.now() {
            return true;
        }
        let mine = self.slots().get(worker).map_or(0, |s| s.news);
        mine.max(self.everyone.load(Ordering::SeqCst)) > seen
    }

    /// Whether heartbeats are held (until [`release`](Self::release)).
    pub fn holding(&self) -> bool {
        !self.released.is_cancelled()
    }

    /// Answers every held heartbeat and holds none from now on: the
    /// dispatcher stops, or lost its leader lease.
    pub fn release(&self) {
        self.released.cancel();
    }

    /// Holds a heartbeat of `worker`, which saw the news up to `seen`,
    /// until there is news for it, a newer heartbeat of it comes, the
    /// dispatcher releases it, or `bound` (at most [`MAX_HOLD`]) passes.
    pub async fn hold(&self, worker: &str, seen: u64, bound: Duration) -> Woken {
        let (hold, changed) = {
            let mut slots = self.slots();
            let slot = slot_of(&mut slots, worker);
            slot.newest_hold += 1;
            // The older one held, if any, is answered.
            slot.changed.notify_waiters();
            (slot.newest_hold, Arc::clone(&slot.changed))
        };
        let deadline = tokio::time::Instant::now() + hold_bound(bound);
        loop {
            // Registered before the checks, so news between them is not missed.
            let mine = changed.notified();
            let all = self.everyone_changed.notified();
            tokio::pin!(mine, all);
            mine.as_mut().enable();
            all.as_mut().enable();
            if !self.holding() {
                return Woken::Released;
            }
            if self
                .slots()
                .get(worker)
                .is_some_and(|s| s.newest_hold != hold)
            {
                return Woken::Superseded;
            }
            if self.since(worker, seen) {
                return Woken::News;
            }
            tokio::select! {
                () = &mut mine => {}
                () = &mut all => {}
                () = self.released.cancelled() => {}
                () = tokio::time::sleep_until(deadline) => return Woken::Bound,
            }
        }
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<WorkerAddress, Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How long a heartbeat asking for `asked` is held at most.
fn hold_bound(asked: Duration) -> Duration {
    asked.min(MAX_HOLD)
}

fn slot_of<'a>(slots: &'a mut HashMap<WorkerAddress, Slot>, worker: &str) -> &'a mut Slot {
    slots
        .entry(WorkerAddress::from(worker))
        .or_insert_with(|| Slot {
            news: 0,
            newest_hold: 0,
            changed: Arc::new(Notify::new()),
        })
}

/// The workers whose heartbeat answer `update` changes, read from the
/// state before it is applied: a task made for a worker or taken from it
/// (finished, so the worker deletes it; removed from a coordinated read;
/// garbage collected with its iteration; or the worker declared lost).
pub(crate) fn workers_told(
    state: &DispatcherState,
    update: &UpdateType,
) -> BTreeSet<WorkerAddress> {
    let task_worker = |id: i64| state.task(TaskId(id)).map(|t| t.worker_address.clone());
    match update {
        UpdateType::CreateTask(u) => {
            BTreeSet::from([WorkerAddress::from(u.worker_address.as_str())])
        }
        UpdateType::CreatePendingTask(u) => {
            BTreeSet::from([WorkerAddress::from(u.worker_address.as_str())])
        }
        UpdateType::RemoveTask(u) => task_worker(u.task_id).into_iter().collect(),
        UpdateType::FinishTask(u) => task_worker(u.task_id).into_iter().collect(),
        UpdateType::GarbageCollectIteration(u) => state
            .iteration(IterationId(u.iteration_id))
            .into_iter()
            .flat_map(|it| it.tasks.iter())
            .filter_map(|t| task_worker(t.0))
            .collect(),
        UpdateType::TfdataLoseWorker(u) => {
            BTreeSet::from([WorkerAddress::from(u.worker_address.as_str())])
        }
        _ => BTreeSet::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn news_since_a_number_and_numbers_from_elsewhere() {
        let news = WorkerNews::default();
        let seen = news.now();
        assert!(!news.since("w:1", seen), "nothing happened");
        assert!(news.since("w:1", 0), "never answered");
        assert!(
            news.since("w:1", seen + 1000),
            "another dispatcher's number"
        );
        news.tell("w:2");
        assert!(!news.since("w:1", seen), "news for another worker");
        assert!(news.since("w:2", seen));
        assert!(!news.since("w:2", news.now()));
        let seen = news.now();
        news.tell_everyone();
        assert!(news.since("w:1", seen) && news.since("w:3", seen));
    }

    #[test]
    fn a_hold_is_bounded() {
        assert_eq!(hold_bound(Duration::from_secs(3600)), MAX_HOLD);
        assert_eq!(
            hold_bound(Duration::from_millis(200)),
            Duration::from_millis(200)
        );
    }

    #[tokio::test]
    async fn a_hold_ends_with_news_a_newer_hold_the_release_or_its_bound() {
        let news = Arc::new(WorkerNews::default());
        let seen = news.now();
        let started = tokio::time::Instant::now();
        let bound = Duration::from_millis(50);
        assert_eq!(news.hold("w:1", seen, bound).await, Woken::Bound);
        assert!(started.elapsed() >= bound);

        let held = tokio::spawn({
            let news = Arc::clone(&news);
            async move { news.hold("w:1", seen, Duration::from_secs(60)).await }
        });
        tokio::task::yield_now().await;
        news.tell("w:1");
        assert_eq!(held.await.unwrap(), Woken::News);

        let seen = news.now();
        let held = tokio::spawn({
            let news = Arc::clone(&news);
            async move { news.hold("w:1", seen, Duration::from_secs(60)).await }
        });
        tokio::task::yield_now().await;
        news.tell_everyone();
        assert_eq!(held.await.unwrap(), Woken::News);

        let seen = news.now();
        let older = tokio::spawn({
            let news = Arc::clone(&news);
            async move { news.hold("w:1", seen, Duration::from_secs(60)).await }
        });
        tokio::task::yield_now().await;
        let newer = tokio::spawn({
            let news = Arc::clone(&news);
            async move { news.hold("w:1", seen, Duration::from_secs(60)).await }
        });
        assert_eq!(older.await.unwrap(), Woken::Superseded);
        news.release();
        assert_eq!(newer.await.unwrap(), Woken::Released);
        assert!(!news.holding());
        assert_eq!(
            news.hold("w:1", seen, Duration::from_secs(60)).await,
            Woken::Released
        );
    }
}
