//! The dispatcher's logic, independent of the transport (spec §4.2, §5).
//!
//! Every RPC handler is a method of [`Dispatcher`], written in the module
//! of its concern. Each takes its request validated ([`requests`]: converted
//! from the wire message, `TryFrom`, by the transport), does its slow work (reading
//! or writing a dataset, building split providers, which may glob an object
//! store, walking a TensorFlow graph) before it takes the state lock, then
//! runs one [`txn::Txn`]: the updates it implies, applied to the state
//! machine, journaled as one group, and answered once durable. Calls to
//! workers (`ProcessTask`) happen after the transaction.
//!
//! * [`requests`]: the validated requests handlers take, converted from
//!   the wire messages (`TryFrom`): every check of a request's own fields;
//! * [`txn`]: transactions and the journal's group commit;
//! * [`liveness`]: last heartbeats, apart from the journaled state;
//! * [`worker_addresses`]: the `worker_addresses` resolver;
//! * [`workers`]: worker heartbeats (registration, revival, restart), task
//!   definitions, task completion, lost workers and their splits;
//! * [`worker_news`]: what changed a worker's heartbeat answer, and the
//!   heartbeats held until it does; [`long_poll`]: `WorkerHeartbeat` held
//!   for our workers;
//! * [`datasets`]: registration, definitions, metadata, compression;
//! * [`jobs`]: jobs, iterations and their first tasks;
//! * [`autocache`]: autocache at job creation (a cache read instead of the
//!   pipeline, or a task asked to profile), profiles deciding, caches
//!   written as distributed snapshots (issue 36);
//! * [`clients`]: client heartbeats and releases;
//! * [`coordinated_reads`]: pending-task negotiation and `MaybeRemoveTask`;
//! * [`splits`]: split providers and `GetSplit`;
//! * [`distributed_snapshots`]: `Snapshot`, `GetSnapshotSplit`,
//!   `GetSnapshotStreams`, the snapshot part of heartbeats, recovery;
//! * [`maintenance`]: liveness checks and garbage collection;
//! * [`task_lists`]: each iteration's task list kept encoded for heartbeats;
//! * [`load`]: what workers and readers report of their pace, and the
//!   demand estimate;
//! * [`reorder_waits`]: what deterministic reads' readers report of the
//!   workers their ordered merge waited on;
//! * [`scaling`]: the scaling controller's observations, steps and
//!   advice (`GetScalingAdvice`);
//! * [`overview`]: the numbers operators see: the state gauges of
//!   `/metrics` and the [`Overview`](crate::overview::Overview) the status
//!   service and the status page render.
//!
//! Imports between them point one way (`python3 .ci/module_cycles.py
//! crates --edges tfdata-dispatcher dispatcher` prints them):
//! `{maintenance, probes} → workers → {txn, worker_addresses}`,
//! `jobs → {workers, autocache}`, `autocache → {datasets, distributed_snapshots}`, `clients → {coordinated_reads, task_lists, workers}`,
//! `distributed_snapshots → {datasets, splits}`, `long_poll → worker_news`,
//! `{clients, coordinated_reads, jobs, overview, scaling, workers} → txn →
//! {liveness, load, reorder_waits, task_lists, worker_news}`, handlers
//! `→ {requests, errors}`, and `{requests, liveness, load, reorder_waits,
//! task_lists, worker_news} → state`. `Dispatcher`'s methods live in the module of their concern and
//! call each other through `self`, which is not an import.

mod autocache;
mod clients;
mod coordinated_reads;
mod datasets;
mod distributed_snapshots;
mod errors;
mod jobs;
mod liveness;
pub mod load;
mod long_poll;
mod maintenance;
pub mod overview;
mod probes;
mod reorder_waits;
pub(crate) mod requests;
mod scaling;
mod splits;
mod task_lists;
mod txn;
mod worker_addresses;
mod worker_news;
mod workers;

#[cfg(test)]
mod commit_tests;
#[cfg(test)]
mod deterministic_tests;
#[cfg(test)]
mod long_poll_tests;
#[cfg(test)]
mod probe_tests;
#[cfg(test)]
mod scaling_tests;
#[cfg(test)]
mod snapshot_tests;
#[cfg(test)]
mod split_tests;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use tfdata_core::{Error, Result, TaskId};
use tfdata_proto::data::worker_service_client::WorkerServiceClient;
use tfdata_rpc::security::{ClientSecurity, RpcChannel};

use crate::config::DispatcherConfig;
use crate::metrics::DispatcherMetrics;
use crate::persistence::journal;
use crate::persistence::store::DatasetStore;
use crate::persistence::work_dir::WorkDir;
use crate::state::DispatcherState;

pub use clients::EncodedHeartbeat;
pub(crate) use probes::probe_loop;
pub use txn::MAX_GROUP_UPDATES;

/// Time as the dispatcher sees it; injected so timeouts are testable.
pub trait Clock: Send + Sync + 'static {
    fn now_micros(&self) -> i64;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now_micros(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64)
    }
}

/// Journal records after which the state is compacted and the history
/// dropped: a restart replays at most this many updates after the
/// compaction.
pub const COMPACT_AFTER_RECORDS: u64 = 50_000;

/// [`COMPACT_AFTER_RECORDS`] for object-store work_dirs, where every group
/// of records is an object that a restart must fetch (a request each,
/// ~10-50 ms on a cloud store, 8 at a time): 1,000 keeps a replay to a few
/// seconds, while a compaction costs one `PUT` of the state plus deletions
/// in the background.
pub const OBJECT_STORE_COMPACT_AFTER_RECORDS: u64 = 1_000;

/// The dispatcher: its configuration, the state behind its lock and
/// journal, and what it keeps outside the state.
pub struct Dispatcher {
    config: DispatcherConfig,
    store: DatasetStore,
    clock: Arc<dyn Clock>,
    ledger: txn::Ledger,
    /// Serialises dataset registrations, so a new dataset's id stays free
    /// while its definition is written outside the state lock.
    registration: tokio::sync::Mutex<()>,
    worker_clients: std::sync::Mutex<HashMap<String, WorkerServiceClient<RpcChannel>>>,
    /// How the dispatcher calls workers (`config.security`, loaded).
    client_security: ClientSecurity,
    /// `MaybeRemoveTask` rendezvous, per task.
    removers: std::sync::Mutex<HashMap<TaskId, Arc<coordinated_reads::Remover>>>,
    /// Distributed snapshots: not state, recovered from their files.
    snapshots: crate::distributed_snapshot::Snapshots,
    /// Serialises `Snapshot` calls, so a path is checked and claimed at once.
    snapshot_starts: tokio::sync::Mutex<()>,
    /// Workers suspected dead, waiting for the dispatcher's own probe.
    probes: probes::Probes,
    /// What autocache knows per dataset (not state: never journaled).
    autocache: autocache::Book,
    /// The scaling controller (not state: it restarts from the live
    /// workers). Locked after the state lock, never before it.
    scaling: std::sync::Mutex<scaling::Scaling>,
}

impl Dispatcher {
    /// Creates the dispatcher's state: empty, or, in fault-tolerant mode,
    /// recovered from the journal in `work_dir`. Does blocking file I/O.
    pub fn new(config: DispatcherConfig, clock: Arc<dyn Clock>) -> Result<Self> {
        config.validate()?;
        let work_dir = config.work_dir.as_deref().map(WorkDir::parse).transpose()?;
        Self::with_work_dir(config, clock, work_dir)
    }

    /// [`new`](Self::new) with the `work_dir` already opened (for example an
    /// object store served by a file system of the caller's, in tests);
    /// `config.work_dir` is then only used in messages.
    pub fn with_work_dir(
        config: DispatcherConfig,
        clock: Arc<dyn Clock>,
        work_dir: Option<WorkDir>,
    ) -> Result<Self> {
        Self::with_work_dir_fenced(config, clock, work_dir, None)
    }

    /// [`with_work_dir`](Self::with_work_dir) for the leader of several
    /// dispatchers sharing `work_dir`: every journal write, from the
    /// compaction at start on, first checks `fence` and is refused once
    /// the leader lease is lost ([`journal::open_fenced`]).
    pub fn with_work_dir_fenced(
        config: DispatcherConfig,
        clock: Arc<dyn Clock>,
        work_dir: Option<WorkDir>,
        fence: Option<crate::persistence::leader_lease::Fence>,
    ) -> Result<Self> {
        Self::taking_over(config, clock, work_dir, fence, None)
    }

    /// [`with_work_dir_fenced`](Self::with_work_dir_fenced) reading the
    /// journal objects a standby read ahead from `prefetched`
    /// ([`journal::open_prefetched`]).
    pub fn taking_over(
        config: DispatcherConfig,
        clock: Arc<dyn Clock>,
        work_dir: Option<WorkDir>,
        fence: Option<crate::persistence::leader_lease::Fence>,
        prefetched: Option<&journal::Prefetched>,
    ) -> Result<Self> {
        config.validate()?;
        let client_security = config.security.client()?;
        let store = match &work_dir {
            Some(dir) => DatasetStore::in_work_dir(dir)?,
            None => DatasetStore::memory(),
        };
        let mut state = DispatcherState::new();
        let journal = match (&work_dir, config.fault_tolerant_mode) {
            (Some(dir), true) => {
                let journal::Recovered {
                    compaction,
                    updates,
                    writer,
                } = journal::open_prefetched(dir, fence, prefetched)?;
                let fence_held = writer.fenced();
                if let Some((location, compacted)) = &compaction {
                    state = DispatcherState::from_compacted(compacted).map_err(|e| {
                        Error::DataLoss {
                            location: location.clone(),
                            reason: format!("the compacted state does not restore: {e}"),
                        }
                    })?;
                }
                for (i, update) in updates.iter().enumerate() {
                    state.apply(update).map_err(|e| Error::DataLoss {
                        location: format!("{}/{}, update {i}", dir.display(), journal::JOURNAL_DIR),
                        reason: format!("journal does not replay: {e}"),
                    })?;
                }
                tracing::info!(
                    compaction = compaction.as_ref().map_or("none", |(location, _)| location.as_str()),
                    updates = updates.len(),
                    datasets = state.datasets().count(),
                    workers = state.workers().len(),
                    iterations = state.iterations().count(),
                    journal = %writer.path(),
                    "dispatcher state recovered from the journal"
                );
                // Start the new run from a compaction, so the next replay is
                // short. A leader taking over always does: the compaction
                // supersedes the old leader's run, so a write of the old
                // leader still in flight when it was replaced (never
                // acknowledged: see `journal::open_fenced`) is read by no
                // later replay.
                if !updates.is_empty() || fence_held {
                    writer.compact(&state.to_compacted())?;
                }
                Some(writer)
            }
            _ => None,
        };
        let compact_after = match work_dir {
            Some(WorkDir::ObjectStore(_)) => OBJECT_STORE_COMPACT_AFTER_RECORDS,
            _ => COMPACT_AFTER_RECORDS,
        };
        let snapshots = crate::distributed_snapshot::Snapshots::new(
            config.worker_max_concurrent_snapshots as usize,
        );
        distributed_snapshots::resume_snapshots(state.snapshots.iter().cloned(), &snapshots);
        // Everyone recovered is treated as having just heartbeated.
        let liveness = liveness::Liveness::recovered(&state, clock.now_micros());
        let guarded = txn::Guarded {
            state,
            liveness,
            load: load::Load::default(),
            reorder_waits: Default::default(),
            split_providers: HashMap::new(),
            rounds: HashMap::new(),
            task_lists: HashMap::new(),
            tasks_to_push: Vec::new(),
        };
        let metrics = Arc::new(DispatcherMetrics::new());
        let scaling = scaling::Scaling::new(config.scaling_period, clock.now_micros());
        Ok(Dispatcher {
            config,
            store,
            clock,
            ledger: txn::Ledger::new(guarded, journal, compact_after, metrics)?,
            registration: Default::default(),
            worker_clients: Default::default(),
            client_security,
            removers: Default::default(),
            snapshots,
            snapshot_starts: Default::default(),
            probes: Default::default(),
            autocache: Default::default(),
            scaling: std::sync::Mutex::new(scaling),
        })
    }

    pub fn config(&self) -> &DispatcherConfig {
        &self.config
    }

    /// This dispatcher's metrics (its own registry).
    pub fn metrics(&self) -> &Arc<DispatcherMetrics> {
        self.ledger.metrics()
    }

    /// Whether a journal write failed: every state change is refused until
    /// a restart recovers from the journal.
    pub fn journal_failed(&self) -> bool {
        self.ledger.journal_failed()
    }

    /// Whether this dispatcher stopped writing its journal because it lost
    /// its leader lease (high availability).
    pub fn deposed(&self) -> bool {
        self.ledger.deposed()
    }

    /// Resolves when a transaction has created tasks to push to workers
    /// ([`Self::push_created_tasks`]).
    pub(crate) async fn tasks_created(&self) {
        self.ledger.tasks_created.notified().await;
    }

    /// A copy of the current state (for introspection and tests).
    pub async fn state_copy(&self) -> DispatcherState {
        self.ledger.begin().await.state.clone()
    }

    /// [`state_copy`](Self::state_copy) for synchronous callers
    /// outside any async runtime.
    pub fn state_blocking(&self) -> DispatcherState {
        self.ledger.state_blocking()
    }

    /// `GetWorkers`: the registered workers, in registration order.
    pub async fn get_workers(&self) -> Result<Vec<String>> {
        self.ledger
            .read(|g| {
                g.state
                    .workers()
                    .iter()
                    .map(|w| w.address.to_string())
                    .collect()
            })
            .await
    }

    #[cfg(test)]
    pub(crate) fn set_compact_after_records(&mut self, records: u64) {
        self.ledger.compact_after_records = records;
    }
}
