//! The dispatcher's state: plain data that changes only through
//! [`DispatcherState::apply`], one journal `Update` at a time (spec §6.1).
//! Replaying the same updates therefore rebuilds the same state. Queries are
//! read-only. `apply` validates every reference an update makes, so a corrupt
//! or foreign journal is an error, never a panic or a silently wrong state.
//!
//! This module holds the state's types and queries; [`apply`] its
//! transition, one checked function per update kind.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use tfdata_core::positions::PositionSet;

use tfdata_core::{DatasetId, IterationClientId, IterationId, JobId, TaskId};
use tfdata_proto::data::{
    DataServiceMetadata, DataTransferServerInfo, ProcessingModeDef, TargetWorkers,
    TfdataDeterministic, processing_mode_def::ShardingPolicy,
};

mod apply;
mod keys;

pub(crate) use apply::consumed_elements;
pub use keys::{IterationKey, ProviderIndex, ProviderPass, Repetition, SplitName, WorkerAddress};

#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub id: DatasetId,
    pub metadata: DataServiceMetadata,
    /// The first `DisableCompressionAtRuntime` decision, if any.
    pub compression_disabled_at_runtime: Option<bool>,
    /// A tfdata pipeline (else a TensorFlow graph): which workers can run it.
    pub is_pipeline: bool,
    /// A TensorFlow graph that tfdata workers can run too.
    pub tfdata_runs_graph: bool,
    /// For a graph they cannot run: the ops they lack.
    pub unsupported_ops: Vec<String>,
    /// A graph with tfdata's private ops (an autocache's load), which
    /// TensorFlow workers cannot run.
    pub tensorflow_cannot_run: bool,
}

impl Dataset {
    /// Whether tfdata workers can run it (a pipeline, or a graph of
    /// supported ops).
    pub fn runs_on_tfdata(&self) -> bool {
        self.is_pipeline || self.tfdata_runs_graph
    }

    /// Whether TensorFlow workers can run it (a graph of TensorFlow's ops).
    pub fn runs_on_tensorflow(&self) -> bool {
        !self.is_pipeline && !self.tensorflow_cannot_run
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Worker {
    pub address: WorkerAddress,
    pub transfer_servers: Vec<DataTransferServerInfo>,
    pub tags: Vec<String>,
    pub uid: i64,
    /// Declared lost (silent for worker_timeout, or stopped): gets no tasks
    /// until it heartbeats again.
    pub lost: bool,
    /// A tfdata worker (runs tfdata pipelines), else a TensorFlow worker.
    pub runs_pipelines: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub id: JobId,
    pub name: String,
    pub dataset_id: DatasetId,
    pub processing_mode: ProcessingModeDef,
    pub num_consumers: Option<i64>,
    pub target_workers: i32,
    pub use_cross_trainer_cache: bool,
}

impl Job {
    pub fn sharding_policy(&self) -> Option<ShardingPolicy> {
        ShardingPolicy::try_from(self.processing_mode.sharding_policy).ok()
    }

    /// A deterministic read's setting (issue 35), if the job is one: its
    /// tasks run on tfdata workers only, and the dispatcher hands out no
    /// splits for it (each lane's pipeline numbers its own).
    pub fn deterministic(&self) -> Option<&TfdataDeterministic> {
        self.processing_mode.tfdata_deterministic.as_ref()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Iteration {
    pub id: IterationId,
    pub job_id: JobId,
    pub repetition: Repetition,
    pub num_split_providers: i64,
    /// Per split provider: the repetition it is in and the splits produced in it.
    pub split_repetitions: Vec<Repetition>,
    pub split_indices: Vec<i64>,
    pub num_clients: i64,
    pub last_client_released_micros: Option<i64>,
    pub finished: bool,
    /// A task of it completed: its pipeline ended (in distributed_epoch,
    /// the data ran out). A distributed_epoch iteration whose every task
    /// left with a lost worker has not ended: the rest of its splits wait
    /// for a worker to come back or join.
    pub task_completed: bool,
    pub garbage_collected: bool,
    /// Active tasks in creation order: the order every client sees.
    pub tasks: Vec<TaskId>,
    /// Per (split provider, worker): the last split handed out with its
    /// repetition and sequence number (`None` split: end of splits), so a
    /// retried `GetSplit` gets the same answer.
    pub last_splits: BTreeMap<SplitRequester, LastSplit>,
    /// Per split provider: splits of lost workers to hand out again first.
    pub returned_splits: BTreeMap<ProviderIndex, std::collections::VecDeque<ReturnedSplit>>,
    /// Splits tfdata workers' tasks received and have not reported fully
    /// delivered. A lost worker's are returned to the pool.
    pub held_splits: BTreeMap<HeldSplitKey, HeldSplit>,
    /// Coordinated reads: tasks waiting to join at an agreed round, in order.
    pub pending_tasks: std::collections::VecDeque<PendingTask>,
    /// Lost tasks whose held splits wait for these readers' receipts before
    /// they go back to the pool (`ReceiveSplitsUpdate`): a split a reader
    /// received whole is not produced again.
    pub awaited_receipts: BTreeMap<TaskId, BTreeSet<IterationClientId>>,
    /// Per split provider's pass: splits a restored reader had consumed
    /// (its checkpoint), never handed out.
    pub consumed: BTreeMap<ProviderPass, tfdata_core::ranges::IndexRanges>,
    /// Parts of splits restored readers had consumed, by split: those
    /// splits are handed out skipping them.
    pub consumed_pieces: BTreeMap<SplitName, PositionSet>,
    /// A shared job's iteration restored from its consumers' checkpoints:
    /// it gets no tasks until every consumer has joined.
    pub restoration: Option<Restoration>,
    /// Readers (client ids) that took checkpoints of it: a restoration of
    /// it waits for each of them.
    pub checkpointers: BTreeSet<i64>,
    /// A restored parallel_epochs job: per worker address, the elements of
    /// its sequence the consumers had consumed (its tasks serve none).
    pub consumed_elements: BTreeMap<WorkerAddress, tfdata_core::ranges::IndexRanges>,
}

/// Most consumers a restoration waits for (a checkpoint's claim is input).
pub const MAX_RESTORATION_CONSUMERS: i64 = 1 << 20;

/// The consumers of a checkpointed iteration gathering in its restoration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restoration {
    /// The iteration their checkpoints were taken in.
    pub origin_iteration: i64,
    /// How many consumers it had (the largest number a checkpoint claims).
    pub expected: i64,
    /// Those that joined: client id in the origin iteration → client id
    /// in the restoration.
    pub joined: BTreeMap<i64, i64>,
}

impl Restoration {
    /// How many consumers have not joined yet.
    pub fn awaited(&self) -> i64 {
        (self.expected - self.joined.len() as i64).max(0)
    }
}

/// Who asked a split provider for splits: the key of
/// [`Iteration::last_splits`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SplitRequester {
    pub provider: ProviderIndex,
    pub worker: WorkerAddress,
}

/// A held split: the task that received it, its provider, and the
/// repetition and sequence number of the request that got it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct HeldSplitKey {
    pub task: TaskId,
    pub provider: ProviderIndex,
    pub repetition: Repetition,
    pub sequence: i64,
}

impl HeldSplitKey {
    /// Every key of `task`, for a range over the ordered map.
    pub(crate) fn all_of(task: TaskId) -> std::ops::RangeInclusive<HeldSplitKey> {
        let key = |v| HeldSplitKey {
            task,
            provider: ProviderIndex(v),
            repetition: Repetition(v),
            sequence: v,
        };
        key(i64::MIN)..=key(i64::MAX)
    }
}

/// A split a task holds, with the repetition it was produced in.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldSplit {
    pub produced_in: Repetition,
    /// Its index in that repetition (with the provider, its name).
    pub index: i64,
    /// The encoded `TensorProto`. Not decoded: a lease holds up to a
    /// thousand splits, and a `TensorProto` is ~400 bytes of `Vec` headers
    /// that the map would move on every insert and removal. Decoded only if
    /// the split is handed out again.
    pub split: bytes::Bytes,
    /// Positions of it that readers received (from an earlier holder, or
    /// reported after this one was lost): skipped when it is produced again.
    pub skip: PositionSet,
}

/// A lost worker's split waiting to be handed out again, with the
/// repetition it was produced in.
#[derive(Debug, Clone, PartialEq)]
pub struct ReturnedSplit {
    pub repetition: Repetition,
    pub index: i64,
    /// The encoded `TensorProto` (see [`HeldSplit::split`]).
    pub split: bytes::Bytes,
    /// Positions of it that readers received (see [`HeldSplit::skip`]).
    pub skip: PositionSet,
}

impl Iteration {
    /// Whether it is a restoration still waiting for consumers (no tasks,
    /// no splits until they have all joined).
    pub fn gathering(&self) -> bool {
        self.restoration.as_ref().is_some_and(|r| r.awaited() > 0)
    }

    /// `task` was lost: its held splits go back to the pool once `readers`
    /// (the iteration's readers that report receipts) have said which of
    /// them they received whole, or at once if there is nobody to ask.
    fn await_receipts_or_return(&mut self, task: TaskId, readers: BTreeSet<IterationClientId>) {
        let holds = self
            .held_splits
            .range(HeldSplitKey::all_of(task))
            .next()
            .is_some();
        if holds && !readers.is_empty() {
            self.awaited_receipts.insert(task, readers);
        } else {
            self.return_held_splits(task);
        }
    }

    /// `client` has reported on `task` (or will not: it was released).
    /// Returns whether `task` was waiting for it.
    fn receipts_in(&mut self, task: TaskId, client: IterationClientId) -> bool {
        let Some(waiting) = self.awaited_receipts.get_mut(&task) else {
            return false;
        };
        if !waiting.remove(&client) {
            return false;
        }
        if waiting.is_empty() {
            self.awaited_receipts.remove(&task);
            self.return_held_splits(task);
        }
        true
    }

    /// Whether `task`'s return waits for `client`'s receipts.
    pub fn awaits_receipts(&self, task: TaskId, client: IterationClientId) -> bool {
        self.awaited_receipts
            .get(&task)
            .is_some_and(|w| w.contains(&client))
    }

    /// The splits `task` held but had not fully delivered go back to the
    /// pool, in the order it received them.
    fn return_held_splits(&mut self, task: TaskId) {
        let held: Vec<HeldSplitKey> = self
            .held_splits
            .range(HeldSplitKey::all_of(task))
            .map(|(k, _)| *k)
            .collect();
        for key in held {
            if let Some(held) = self.held_splits.remove(&key) {
                self.returned_splits
                    .entry(key.provider)
                    .or_default()
                    .push_back(ReturnedSplit {
                        repetition: held.produced_in,
                        index: held.index,
                        split: held.split,
                        skip: held.skip,
                    });
            }
        }
    }

    /// The last answer `worker` got from `provider`.
    pub fn last_split(&self, provider: ProviderIndex, worker: &str) -> Option<&LastSplit> {
        self.last_splits.get(&SplitRequester {
            provider,
            worker: worker.into(),
        })
    }
}

/// The last answer to a worker's `GetSplit` for one provider.
#[derive(Debug, Clone, PartialEq)]
pub struct LastSplit {
    pub repetition: Repetition,
    pub sequence: i64,
    pub split: Option<tfdata_proto::tensorflow::TensorProto>,
    /// The rest of the lease that answer carried (encoded `TensorProto`s).
    pub more_splits: Vec<bytes::Bytes>,
    /// The answer's split names: indices from `first_index` on, in
    /// repetition `split_repetition`.
    pub first_index: i64,
    pub split_repetition: Repetition,
    /// The answer's positions to skip (`GetSplitResponse.tfdata_skip`).
    pub skip: Vec<tfdata_proto::data::TfdataPositionRange>,
}

/// A task of a round-robin iteration that joins once every consumer agreed
/// not to pass `target_round` (spec §5.7).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingTask {
    pub task_id: TaskId,
    pub target_round: i64,
    pub ready_consumers: BTreeSet<IterationClientId>,
    pub failures: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: TaskId,
    pub iteration_id: IterationId,
    pub worker_address: WorkerAddress,
    pub transfer_servers: Vec<DataTransferServerInfo>,
    pub worker_tags: Vec<String>,
    pub worker_uid: i64,
    pub starting_round: i64,
    pub finished: bool,
}

/// Everything the dispatcher knows that survives a fault-tolerant restart.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatcherState {
    pub(crate) datasets: BTreeMap<DatasetId, Dataset>,
    pub(crate) next_dataset_id: i64,
    /// Registration order, which is the order of `GetWorkers`.
    pub(crate) workers: Vec<Worker>,
    pub(crate) worker_positions: HashMap<WorkerAddress, usize>,
    pub(crate) jobs: BTreeMap<JobId, Job>,
    pub(crate) jobs_by_name: HashMap<String, JobId>,
    pub(crate) next_job_id: i64,
    pub(crate) iterations: BTreeMap<IterationId, Iteration>,
    pub(crate) iterations_by_key: HashMap<IterationKey, IterationId>,
    pub(crate) next_iteration_id: i64,
    pub(crate) clients: BTreeMap<IterationClientId, IterationId>,
    /// Clients that report receipts for lost tasks
    /// (`GetOrCreateIterationRequest.tfdata_reports_receipts`).
    pub(crate) receipt_clients: BTreeSet<IterationClientId>,
    pub(crate) next_client_id: i64,
    pub(crate) tasks: BTreeMap<TaskId, Task>,
    /// Each worker's assigned, unfinished tasks.
    pub(crate) tasks_by_worker: HashMap<WorkerAddress, BTreeSet<TaskId>>,
    pub(crate) next_task_id: i64,
    pub(crate) snapshots: BTreeSet<String>,
}

impl Default for DispatcherState {
    fn default() -> Self {
        DispatcherState {
            datasets: BTreeMap::new(),
            next_dataset_id: 1000,
            workers: Vec::new(),
            worker_positions: HashMap::new(),
            jobs: BTreeMap::new(),
            jobs_by_name: HashMap::new(),
            next_job_id: JobId::FIRST,
            iterations: BTreeMap::new(),
            iterations_by_key: HashMap::new(),
            next_iteration_id: IterationId::FIRST,
            clients: BTreeMap::new(),
            receipt_clients: BTreeSet::new(),
            next_client_id: IterationClientId::FIRST,
            tasks: BTreeMap::new(),
            tasks_by_worker: HashMap::new(),
            next_task_id: TaskId::FIRST,
            snapshots: BTreeSet::new(),
        }
    }
}

impl DispatcherState {
    pub fn new() -> Self {
        Self::default()
    }

    // ---- Queries ----

    pub fn dataset(&self, id: &DatasetId) -> Option<&Dataset> {
        self.datasets.get(id)
    }

    pub fn datasets(&self) -> impl Iterator<Item = &Dataset> {
        self.datasets.values()
    }

    /// The id a new dataset without a requested id gets: the smallest number
    /// ≥ 1000 not yet used.
    pub fn next_dataset_id(&self) -> DatasetId {
        DatasetId(self.next_dataset_id.to_string())
    }

    pub fn worker(&self, address: &str) -> Option<&Worker> {
        self.worker_positions
            .get(address)
            .map(|&i| &self.workers[i])
    }

    pub fn workers(&self) -> &[Worker] {
        &self.workers
    }

    pub fn job(&self, id: JobId) -> Option<&Job> {
        self.jobs.get(&id)
    }

    pub fn job_by_name(&self, name: &str) -> Option<&Job> {
        self.jobs_by_name.get(name).and_then(|id| self.jobs.get(id))
    }

    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values()
    }

    pub fn next_job_id(&self) -> JobId {
        JobId(self.next_job_id)
    }

    pub fn iteration(&self, id: IterationId) -> Option<&Iteration> {
        self.iterations.get(&id)
    }

    pub fn iterations(&self) -> impl Iterator<Item = &Iteration> {
        self.iterations.values()
    }

    /// The live (not garbage-collected) iteration of `job_name` at `repetition`.
    pub fn iteration_by_key(&self, job_name: &str, repetition: Repetition) -> Option<&Iteration> {
        self.iterations_by_key
            .get(&IterationKey {
                job_name: job_name.to_string(),
                repetition,
            })
            .and_then(|id| self.iterations.get(id))
            .filter(|it| !it.garbage_collected)
    }

    pub fn next_iteration_id(&self) -> IterationId {
        IterationId(self.next_iteration_id)
    }

    pub fn client_iteration(&self, client: IterationClientId) -> Option<IterationId> {
        self.clients.get(&client).copied()
    }

    pub fn clients(&self) -> impl Iterator<Item = (IterationClientId, IterationId)> + '_ {
        self.clients.iter().map(|(c, i)| (*c, *i))
    }

    pub fn next_client_id(&self) -> IterationClientId {
        IterationClientId(self.next_client_id)
    }

    pub fn task(&self, id: TaskId) -> Option<&Task> {
        self.tasks.get(&id)
    }

    pub fn tasks(&self) -> impl Iterator<Item = &Task> {
        self.tasks.values()
    }

    pub fn next_task_id(&self) -> TaskId {
        TaskId(self.next_task_id)
    }

    /// The worker's assigned, unfinished tasks.
    pub fn tasks_for_worker(&self, address: &str) -> impl Iterator<Item = &Task> {
        self.tasks_by_worker
            .get(address)
            .into_iter()
            .flatten()
            .filter_map(|id| self.tasks.get(id))
    }

    pub fn is_assigned(&self, address: &str, task: TaskId) -> bool {
        self.tasks_by_worker
            .get(address)
            .is_some_and(|t| t.contains(&task))
    }

    /// Whether `worker` can run the tasks of `iteration` (tfdata pipelines on
    /// tfdata workers, TensorFlow graphs on TensorFlow workers and, when
    /// every op is supported, on tfdata workers). A deterministic job's
    /// tasks run on tfdata workers only: its lanes are tfdata element
    /// streams, which TensorFlow's workers do not serve.
    /// A gathering restoration runs nowhere yet.
    pub fn can_run(&self, worker: &str, iteration: IterationId) -> bool {
        let job = self
            .iterations
            .get(&iteration)
            .filter(|it| !it.gathering())
            .and_then(|it| self.jobs.get(&it.job_id));
        let dataset = job.and_then(|j| self.datasets.get(&j.dataset_id));
        let deterministic = job.is_some_and(|j| j.deterministic().is_some());
        match (self.worker(worker), dataset) {
            (Some(w), Some(d)) if w.runs_pipelines => d.runs_on_tfdata(),
            (Some(_), Some(d)) => d.runs_on_tensorflow() && !deterministic,
            _ => false,
        }
    }

    /// Whether `iteration` is a deterministic read's (see [`Job::deterministic`]).
    pub fn is_deterministic(&self, iteration: IterationId) -> bool {
        self.iterations
            .get(&iteration)
            .and_then(|it| self.jobs.get(&it.job_id))
            .is_some_and(|j| j.deterministic().is_some())
    }

    /// The coordinated-read client ids of an iteration.
    pub fn clients_of(
        &self,
        iteration: IterationId,
    ) -> impl Iterator<Item = IterationClientId> + '_ {
        self.clients
            .iter()
            .filter(move |(_, i)| **i == iteration)
            .map(|(c, _)| *c)
    }

    /// Iterations that still want tasks on newly registered workers.
    pub fn unfinished_iterations(&self) -> impl Iterator<Item = &Iteration> {
        self.iterations.values().filter(|it| !it.finished)
    }
}

/// Most lanes a deterministic job has: each is a pipeline instance a worker
/// runs while a reader reads it, and a reader merges all of its lanes, so
/// the number bounds a reader's streams and a checkpoint's size.
pub const MAX_DETERMINISTIC_LANES: i64 = 4096;

/// What a deterministic setting needs of its own job: DYNAMIC sharding
/// (lanes deal the splits of one global order) and 1 to
/// [`MAX_DETERMINISTIC_LANES`] lanes. Checked where a job is requested
/// (InvalidArgument) and again where one is journaled.
pub fn check_deterministic(sharding_policy: i32, d: &TfdataDeterministic) -> Result<(), String> {
    if sharding_policy != ShardingPolicy::Dynamic as i32 {
        let mode = ShardingPolicy::try_from(sharding_policy).map_or_else(
            |_| format!("{sharding_policy}"),
            |p| p.as_str_name().to_string(),
        );
        return Err(format!(
            "a deterministic read needs distributed_epoch (sharding policy DYNAMIC), but the job's \
             sharding policy is {mode}"
        ));
    }
    if !(1..=MAX_DETERMINISTIC_LANES).contains(&d.lanes) {
        return Err(format!(
            "a deterministic read has 1 to {MAX_DETERMINISTIC_LANES} lanes, got {}",
            d.lanes
        ));
    }
    Ok(())
}

/// The `TargetWorkers` value a job stores for a request (unspecified = AUTO).
pub fn normalize_target_workers(value: i32) -> i32 {
    if value == TargetWorkers::Unspecified as i32 {
        TargetWorkers::Auto as i32
    } else {
        value
    }
}
