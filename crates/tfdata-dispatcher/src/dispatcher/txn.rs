//! Transactions over the dispatcher's state, and the group commit that
//! makes them durable.
//!
//! Every RPC that reads or changes state runs one [`Txn`]: it takes the
//! state lock, applies its updates one by one through
//! [`DispatcherState::apply`] (which validates each and changes nothing when
//! one is inconsistent), computes its answer, and [`Txn::commit`]s. Commit
//! hands the transaction's updates to the journal as one group, releases
//! the lock, and only then waits until everything the transaction saw is
//! durable. So the lock is never held across an fsync or a `PUT`, and
//! RPCs that commit at the same time share one write (etcd's and Kafka's
//! group commit): the journal thread writes every group queued since its
//! last write in one `write` + `fdatasync` (or one object), up to
//! [`MAX_GROUP_UPDATES`].
//!
//! Invariants:
//! * Groups reach the journal in the order their transactions held the
//!   lock, so replay applies updates in the order they were applied live.
//!   A compaction's state is taken under the lock, queued behind the
//!   groups it includes, and written by the journal thread in that order.
//! * No answer is given from state that is not durable: a transaction
//!   waits for the newest group queued when it released the lock, its own
//!   or an earlier one it may have read, even when it changed nothing. (A
//!   heartbeat that changed nothing waits for the newest group that can
//!   change its answer: split handouts cannot, [`Txn::commit_heartbeat`].)
//! * After a failed journal write memory may be ahead of disk. Every later
//!   update and every transaction that saw unwritten state fails; a restart
//!   recovers from the journal.
//! * A transaction dropped without commit (an error returned half way)
//!   still queues what it applied: memory and journal never diverge.

use std::collections::{HashMap, VecDeque};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex as SyncMutex};
use std::thread::JoinHandle;

use tfdata_core::{Error, IterationId, Result};
use tfdata_dataset::splits::SplitProvider;
use tfdata_proto::data::{Update, update::UpdateType};
use tfdata_proto::tfdata::compaction::CompactedState;
use tokio::sync::{Mutex, MutexGuard, watch};

use super::liveness::Liveness;
use super::load::Load;
use super::worker_news::{WorkerNews, workers_told};
use crate::metrics::DispatcherMetrics;
use crate::persistence::journal::JournalWriter;
use crate::state::DispatcherState;

/// Updates written in one journal write at most. Groups are never split,
/// so one larger transaction still goes out whole; the bound keeps one
/// write (and the time its waiters wait) proportionate when thousands of
/// RPCs queue behind a slow disk or store.
pub const MAX_GROUP_UPDATES: usize = 4096;

/// Everything behind the state lock: the journaled state and what is
/// derived from it in memory.
pub(crate) struct Guarded {
    pub state: DispatcherState,
    /// When workers and clients were last heard from (not journaled).
    pub liveness: Liveness,
    /// What workers and readers report of their pace (not journaled).
    pub load: Load,
    /// Deterministic reads' readers' reorder waits (not journaled).
    pub reorder_waits: super::reorder_waits::ReorderWaits,
    /// Live split providers of distributed_epoch iterations, one per source.
    /// Not state: rebuilt from the dataset and the journaled cursors.
    pub split_providers: HashMap<IterationId, Vec<Box<dyn SplitProvider>>>,
    /// Coordinated reads: the highest round any client of an iteration reported.
    pub rounds: HashMap<IterationId, i64>,
    /// Each iteration's task list, encoded for client heartbeats.
    pub task_lists: HashMap<IterationId, super::task_lists::EncodedTaskList>,
    /// Tasks created for workers that are not asking (a lost worker's
    /// splits given to a live worker): pushed to them with `ProcessTask`
    /// once durable, instead of waiting for their next heartbeat (30 s by
    /// default). Taken by `Dispatcher::push_created_tasks`.
    pub tasks_to_push: Vec<tfdata_core::TaskId>,
}

/// The state lock and the journal behind it.
pub(crate) struct Ledger {
    guarded: Mutex<Guarded>,
    /// Present in fault-tolerant mode.
    journal: Option<GroupCommit>,
    /// Set when a journal write failed (see the module's invariants).
    failed: Arc<AtomicBool>,
    /// Set with `failed` when the write failed because this dispatcher
    /// lost its leader lease (high availability): the refusals are then
    /// `Unavailable`, so clients retry and find the new leader.
    deposed: Arc<AtomicBool>,
    /// The journal is compacted when this many updates were queued since
    /// the last compaction.
    pub compact_after_records: u64,
    metrics: Arc<DispatcherMetrics>,
    /// Woken when a transaction leaves `Guarded::tasks_to_push` non-empty.
    pub tasks_created: tokio::sync::Notify,
    /// Told of every update that changes a worker's heartbeat answer, so
    /// its held heartbeat is answered.
    pub news: WorkerNews,
}

impl Ledger {
    pub fn new(
        guarded: Guarded,
        journal: Option<JournalWriter>,
        compact_after: u64,
        metrics: Arc<DispatcherMetrics>,
    ) -> Result<Self> {
        let failed = Arc::new(AtomicBool::new(false));
        let deposed = Arc::new(AtomicBool::new(false));
        let journal = journal
            .map(|writer| {
                GroupCommit::start(
                    writer,
                    Arc::clone(&failed),
                    Arc::clone(&deposed),
                    Arc::clone(&metrics),
                )
            })
            .transpose()?;
        Ok(Ledger {
            guarded: Mutex::new(guarded),
            journal,
            failed,
            deposed,
            compact_after_records: compact_after,
            metrics,
            tasks_created: tokio::sync::Notify::new(),
            news: WorkerNews::default(),
        })
    }

    pub fn metrics(&self) -> &Arc<DispatcherMetrics> {
        &self.metrics
    }

    /// Whether a journal write failed: state changes are refused until a
    /// restart recovers from the journal.
    pub fn journal_failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    /// Starts a transaction: waits for the state lock.
    pub async fn begin(&self) -> Txn<'_> {
        Txn {
            guarded: self.guarded.lock().await,
            ledger: self,
            updates: Vec::new(),
        }
    }

    /// A read-only transaction: `f`'s answer once everything it saw is durable.
    pub async fn read<T>(&self, f: impl FnOnce(&Guarded) -> T) -> Result<T> {
        let txn = self.begin().await;
        let answer = f(&txn);
        txn.commit().await?;
        Ok(answer)
    }

    /// The state as it is in memory, for synchronous callers outside any
    /// async runtime (introspection; not an answer to an RPC).
    pub fn state_blocking(&self) -> DispatcherState {
        self.guarded.blocking_lock().state.clone()
    }

    /// Whether this dispatcher stopped writing because it lost its leader
    /// lease (a journal write was refused by the lease's fence).
    pub fn deposed(&self) -> bool {
        self.deposed.load(Ordering::SeqCst)
    }

    fn refuse_if_failed(&self) -> Result<()> {
        if self.failed.load(Ordering::SeqCst) {
            return Err(failure(
                self.deposed(),
                "an earlier journal write failed; restart the dispatcher to recover from its journal",
            ));
        }
        Ok(())
    }
}

/// Why a state change is refused after a failed journal write: retryable
/// (`Unavailable`) when the dispatcher lost its leader lease, since
/// another dispatcher leads now; otherwise `Internal` with `message`.
fn failure(deposed: bool, message: &str) -> Error {
    if deposed {
        Error::Unavailable(
            "this dispatcher lost its leader lease and no longer writes the journal; \
             another dispatcher leads now"
                .into(),
        )
    } else {
        Error::Internal(message.into())
    }
}

/// One RPC's view of the state and the updates it made (see the module docs).
pub(crate) struct Txn<'a> {
    guarded: MutexGuard<'a, Guarded>,
    ledger: &'a Ledger,
    updates: Vec<Update>,
}

impl Deref for Txn<'_> {
    type Target = Guarded;
    fn deref(&self) -> &Guarded {
        &self.guarded
    }
}

impl DerefMut for Txn<'_> {
    fn deref_mut(&mut self) -> &mut Guarded {
        &mut self.guarded
    }
}

impl Txn<'_> {
    pub fn metrics(&self) -> &DispatcherMetrics {
        &self.ledger.metrics
    }

    /// Applies one update to the state (the only way state changes). An
    /// inconsistent update is an error and changes nothing; earlier updates
    /// of the transaction stay applied and are journaled. In debug builds
    /// (and so in every test) the state's invariants are checked after
    /// each update, not only when a compaction is restored.
    pub fn apply(&mut self, update: UpdateType) -> Result<()> {
        self.ledger.refuse_if_failed()?;
        let told = workers_told(&self.guarded.state, &update);
        let update = Update {
            update_type: Some(update),
        };
        self.guarded.state.apply(&update)?;
        // The whole state, every time: it costs about half a millisecond
        // of a debug build at 80 iterations and 160 tasks (held splits cost
        // a few lookups per task), well within the tests' budgets.
        debug_assert_eq!(
            self.guarded.state.check_invariants(),
            Ok(()),
            "{update:?} broke an invariant"
        );
        for worker in &told {
            self.ledger.news.tell(worker);
        }
        if self.ledger.journal.is_some() {
            self.updates.push(update);
        }
        Ok(())
    }

    /// Queues the transaction's updates as one group, releases the lock,
    /// and waits until the group, and every group queued before it, is
    /// durable.
    pub async fn commit(mut self) -> Result<()> {
        let (journal, awaited) = (self.ledger.journal.as_ref(), self.queue());
        drop(self);
        match journal {
            Some(journal) => journal.wait_durable(awaited).await,
            None => Ok(()),
        }
    }

    /// [`commit`](Self::commit) for a heartbeat (a reader's or a worker's).
    /// One that applied no update waits only for the groups a heartbeat's
    /// answer can reflect: all but split handouts (`ProduceSplit` changes
    /// an iteration's split cursors and held splits, which no heartbeat
    /// reads). So readers and workers do not queue behind every `GetSplit`'s
    /// fsync, and still never see a task, a worker or an iteration's end
    /// before it is durable. After a failed journal write it fails, as every
    /// transaction does.
    pub async fn commit_heartbeat(self) -> Result<()> {
        if !self.updates.is_empty() {
            return self.commit().await;
        }
        let Some(journal) = self.ledger.journal.as_ref() else {
            return Ok(());
        };
        self.ledger.refuse_if_failed()?;
        // Read under the state lock, so it covers every group this
        // transaction could have seen.
        let awaited = journal.heartbeat_horizon();
        drop(self);
        journal.wait_durable(awaited).await
    }

    /// Queues the updates applied so far (under the lock, so groups are
    /// queued in lock order) and, past the bound, a compaction of
    /// the state they lead to. Returns the group number to wait for.
    fn queue(&mut self) -> u64 {
        let Some(journal) = &self.ledger.journal else {
            return 0;
        };
        let updates = std::mem::take(&mut self.updates);
        let compact_after = self.ledger.compact_after_records;
        let state = &self.guarded.state;
        journal.queue(updates, compact_after, || state.to_compacted())
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        // Runs before the guard is released: an abandoned transaction's
        // updates still go out in lock order.
        if !self.updates.is_empty() {
            self.queue();
        }
        if !self.guarded.tasks_to_push.is_empty() {
            self.ledger.tasks_created.notify_one();
        }
    }
}

/// What the journal thread writes, in order.
enum Entry {
    Group(Vec<Update>),
    /// The state after every group queued before it.
    Compact(Box<CompactedState>),
}

#[derive(Default)]
struct Queue {
    entries: VecDeque<Entry>,
    /// Entries queued so far; an entry's number is its position from 1.
    queued: u64,
    /// Updates queued since the last compaction.
    since_compaction: u64,
    /// The newest group with an update other than a split handout: what a
    /// heartbeat that changed nothing waits for (`Txn::commit_heartbeat`).
    heartbeat_horizon: u64,
    stopping: bool,
}

/// How far the journal got.
#[derive(Debug, Clone, Copy, Default)]
struct Durable {
    /// Entries written, in queue order.
    written: u64,
    failed: bool,
}

/// The journal thread and its queue.
struct GroupCommit {
    queue: Arc<(SyncMutex<Queue>, Condvar)>,
    durable: watch::Sender<Durable>,
    deposed: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl GroupCommit {
    fn start(
        writer: JournalWriter,
        failed: Arc<AtomicBool>,
        deposed: Arc<AtomicBool>,
        metrics: Arc<DispatcherMetrics>,
    ) -> Result<Self> {
        let queue: Arc<(SyncMutex<Queue>, Condvar)> = Arc::default();
        let (durable, _) = watch::channel(Durable::default());
        let thread = {
            let (queue, durable) = (Arc::clone(&queue), durable.clone());
            let deposed = Arc::clone(&deposed);
            std::thread::Builder::new()
                .name("tfdata-journal".into())
                .spawn(move || write_loop(&writer, &queue, &durable, (&failed, &deposed), &metrics))
                .map_err(|e| Error::io("starting the journal thread", e))?
        };
        Ok(GroupCommit {
            queue,
            durable,
            deposed,
            thread: Some(thread),
        })
    }

    fn queue(
        &self,
        updates: Vec<Update>,
        compact_after: u64,
        compacted: impl FnOnce() -> CompactedState,
    ) -> u64 {
        let (lock, wake) = &*self.queue;
        let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
        if updates.is_empty() {
            return q.queued;
        }
        q.since_compaction += updates.len() as u64;
        // Anything but a split handout may change a heartbeat's answer (an
        // update type added later counts too, until shown otherwise).
        let seen_by_heartbeats = updates
            .iter()
            .any(|u| !matches!(u.update_type, Some(UpdateType::ProduceSplit(_))));
        q.entries.push_back(Entry::Group(updates));
        q.queued += 1;
        if seen_by_heartbeats {
            q.heartbeat_horizon = q.queued;
        }
        if q.since_compaction >= compact_after {
            q.entries.push_back(Entry::Compact(Box::new(compacted())));
            q.queued += 1;
            q.since_compaction = 0;
        }
        wake.notify_one();
        q.queued
    }

    /// The newest group a heartbeat's answer can reflect (see [`Queue`]).
    fn heartbeat_horizon(&self) -> u64 {
        let (lock, _) = &*self.queue;
        lock.lock()
            .unwrap_or_else(|p| p.into_inner())
            .heartbeat_horizon
    }

    async fn wait_durable(&self, entry: u64) -> Result<()> {
        if entry == 0 {
            return Ok(());
        }
        let mut durable = self.durable.subscribe();
        let reached = durable
            .wait_for(|d| d.written >= entry || d.failed)
            .await
            .map(|d| d.written >= entry)
            .unwrap_or(false);
        if reached {
            Ok(())
        } else {
            Err(failure(
                self.deposed.load(Ordering::SeqCst),
                "the journal write failed; restart the dispatcher to recover from its journal",
            ))
        }
    }
}

impl Drop for GroupCommit {
    /// Writes what is queued, then stops the thread.
    fn drop(&mut self) {
        let (lock, wake) = &*self.queue;
        lock.lock().unwrap_or_else(|p| p.into_inner()).stopping = true;
        wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The journal thread: takes everything queued, writes consecutive groups
/// as one write, compactions in their place, and publishes progress.
fn write_loop(
    writer: &JournalWriter,
    queue: &(SyncMutex<Queue>, Condvar),
    durable: &watch::Sender<Durable>,
    (failed, deposed): (&AtomicBool, &AtomicBool),
    metrics: &DispatcherMetrics,
) {
    let (lock, wake) = queue;
    loop {
        let batch: Vec<Entry> = {
            let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
            while q.entries.is_empty() && !q.stopping {
                q = wake.wait(q).unwrap_or_else(|p| p.into_inner());
            }
            if q.entries.is_empty() {
                return;
            }
            let mut updates = 0;
            let mut batch = Vec::new();
            while let Some(entry) = q.entries.front() {
                let size = match entry {
                    Entry::Group(g) => g.len(),
                    Entry::Compact(_) => 0,
                };
                if !batch.is_empty() && updates + size > MAX_GROUP_UPDATES {
                    break;
                }
                updates += size;
                batch.extend(q.entries.pop_front());
            }
            batch
        };
        let entries = batch.len() as u64;
        if let Err(e) = write_batch(writer, batch, metrics) {
            if writer.fenced_out() {
                deposed.store(true, Ordering::SeqCst);
            }
            failed.store(true, Ordering::SeqCst);
            durable.send_modify(|d| d.failed = true);
            tracing::error!(error = %e, "journal write failed; refusing further state changes");
            return;
        }
        durable.send_modify(|d| d.written += entries);
    }
}

fn write_batch(
    writer: &JournalWriter,
    batch: Vec<Entry>,
    metrics: &DispatcherMetrics,
) -> Result<()> {
    let mut pending: Vec<Update> = Vec::new();
    for entry in batch {
        match entry {
            Entry::Group(group) => pending.extend(group),
            Entry::Compact(compacted) => {
                write_group(writer, &pending, metrics)?;
                pending.clear();
                let started = std::time::Instant::now();
                let bytes = writer.compact(&compacted)?;
                metrics.journal_write_duration.observe(started.elapsed());
                metrics.journal_written_bytes.inc_by(bytes);
                metrics.journal_compactions.inc();
            }
        }
    }
    write_group(writer, &pending, metrics)
}

/// One group write, measured (an empty group writes nothing).
fn write_group(
    writer: &JournalWriter,
    updates: &[Update],
    metrics: &DispatcherMetrics,
) -> Result<()> {
    if updates.is_empty() {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let bytes = writer.write_group_bytes(updates)?;
    metrics.journal_write_duration.observe(started.elapsed());
    metrics.journal_written_bytes.inc_by(bytes);
    metrics.journal_updates.inc_by(updates.len() as u64);
    Ok(())
}
