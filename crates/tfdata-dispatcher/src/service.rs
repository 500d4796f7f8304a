//! The `DispatcherService` RPCs (spec §4.2, §5). Each handler validates its
//! request, computes the `Update`s it implies against the current state,
//! commits them one by one through [`Dispatcher::commit`] (the only way state
//! changes), and answers from the resulting state. Calls to workers
//! (`ProcessTask`) happen after the state lock is released.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tfdata_core::{DatasetId, Error, IterationClientId, IterationId, JobId, Result, TaskId};
use tfdata_proto::data::{
    self as wire, dispatcher_service_server::DispatcherService,
    processing_mode_def::ShardingPolicy, update::UpdateType,
    worker_service_client::WorkerServiceClient,
};
use tokio::sync::Mutex;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use crate::config::DispatcherConfig;
use crate::journal::{self, JournalWriter};
use crate::state::{DispatcherState, Task, normalize_target_workers};
use crate::store::DatasetStore;
use crate::work_dir::WorkDir;
use tfdata_dataset::splits::SplitProvider;

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

/// How long the dispatcher waits for a worker to accept a `ProcessTask`.
/// Heartbeats deliver the task anyway if this push fails.
const PROCESS_TASK_TIMEOUT: Duration = Duration::from_secs(10);

struct Inner {
    state: DispatcherState,
    /// Liveness, not journaled: last heartbeat per worker and per client.
    worker_heartbeats: HashMap<String, i64>,
    /// `i64::MAX` until a client's first heartbeat, so a slow starter is not
    /// timed out (TensorFlow's behaviour).
    client_heartbeats: HashMap<IterationClientId, i64>,
    /// Live split providers of distributed_epoch iterations, one per source.
    /// Not state: rebuilt from the dataset and the journaled cursors.
    split_providers: HashMap<IterationId, Vec<Box<dyn SplitProvider>>>,
    /// Coordinated reads: the highest round any client of an iteration reported.
    rounds: HashMap<IterationId, i64>,
}

/// The dispatcher's logic, independent of the transport.
pub struct Dispatcher {
    config: DispatcherConfig,
    store: DatasetStore,
    clock: Arc<dyn Clock>,
    inner: Mutex<Inner>,
    /// Present in fault-tolerant mode.
    journal: Option<JournalWriter>,
    /// Set when a journal write failed: memory may then be ahead of disk, so
    /// no further change is accepted until a restart recovers from the journal.
    journal_failed: std::sync::atomic::AtomicBool,
    worker_clients: std::sync::Mutex<HashMap<String, WorkerServiceClient<Channel>>>,
    /// `MaybeRemoveTask` rendezvous, per task.
    removers: std::sync::Mutex<HashMap<TaskId, Arc<Remover>>>,
    /// The journal is compacted when its current file reaches this many records.
    pub(crate) compact_after_records: u64,
}

/// Journal records after which the state is snapshotted and the history
/// dropped: a restart replays at most this many updates after the snapshot.
pub const COMPACT_AFTER_RECORDS: u64 = 50_000;

/// [`COMPACT_AFTER_RECORDS`] for object-store work_dirs, where every record
/// is an object that a restart must fetch (a request each, ~10-50 ms on a
/// cloud store, 8 at a time): 1,000 keeps a replay to a few seconds, while
/// a compaction costs one `PUT` of the state plus deletions in the
/// background.
pub const OBJECT_STORE_COMPACT_AFTER_RECORDS: u64 = 1_000;

fn journal_records(journal: &JournalWriter) -> u64 {
    journal.records()
}

/// Consumers agreeing that a task is gone: all must ask for the same round.
struct Remover {
    round: i64,
    consumers: std::sync::Mutex<HashSet<i64>>,
    removed: std::sync::atomic::AtomicBool,
    done: tokio::sync::Notify,
}

/// How long a `MaybeRemoveTask` waits for the other consumers (TensorFlow's).
const REMOVAL_RENDEZVOUS: Duration = Duration::from_secs(10);

impl Dispatcher {
    /// Creates the dispatcher's state: empty, or, in fault-tolerant mode,
    /// recovered from the journal in `work_dir`. Does blocking file I/O.
    pub fn new(config: DispatcherConfig, clock: Arc<dyn Clock>) -> Result<Self> {
        config.validate()?;
        let work_dir = config.work_dir.as_deref().map(WorkDir::parse).transpose()?;
        let store = match &work_dir {
            Some(dir) => DatasetStore::in_work_dir(dir)?,
            None => DatasetStore::memory(),
        };
        let mut state = DispatcherState::new();
        let journal = match (&work_dir, config.fault_tolerant_mode) {
            (Some(dir), true) => {
                let journal::Recovered {
                    snapshot,
                    updates,
                    writer,
                } = journal::open(dir)?;
                if let Some(snapshot) = &snapshot {
                    state = DispatcherState::from_snapshot(snapshot)?;
                }
                for (i, update) in updates.iter().enumerate() {
                    state.apply(update).map_err(|e| Error::DataLoss {
                        location: format!("{}/{}, update {i}", dir.display(), journal::JOURNAL_DIR),
                        reason: format!("journal does not replay: {e}"),
                    })?;
                }
                tracing::info!(
                    updates = updates.len(),
                    datasets = state.datasets().count(),
                    workers = state.workers().len(),
                    iterations = state.iterations().count(),
                    journal = %writer.path(),
                    "dispatcher state recovered from the journal"
                );
                // Start the new run from a snapshot, so the next replay is short.
                if !updates.is_empty() {
                    writer.compact(&state.to_snapshot())?;
                }
                Some(writer)
            }
            _ => None,
        };
        // Everyone recovered is treated as having just heartbeated.
        let now = clock.now_micros();
        let worker_heartbeats = state
            .workers()
            .iter()
            .map(|w| (w.address.clone(), now))
            .collect();
        let client_heartbeats = state.clients().map(|(c, _)| (c, now)).collect();
        Ok(Dispatcher {
            config,
            store,
            clock,
            inner: Mutex::new(Inner {
                state,
                worker_heartbeats,
                client_heartbeats,
                split_providers: HashMap::new(),
                rounds: HashMap::new(),
            }),
            journal,
            journal_failed: Default::default(),
            worker_clients: Default::default(),
            removers: Default::default(),
            compact_after_records: match work_dir {
                Some(WorkDir::ObjectStore(_)) => OBJECT_STORE_COMPACT_AFTER_RECORDS,
                _ => COMPACT_AFTER_RECORDS,
            },
        })
    }

    pub fn config(&self) -> &DispatcherConfig {
        &self.config
    }

    /// A copy of the current state (for introspection and tests).
    pub async fn snapshot_state(&self) -> DispatcherState {
        self.inner.lock().await.state.clone()
    }

    /// The state and the workers' last heartbeat times (µs).
    pub(crate) async fn state_and_heartbeats(&self) -> (DispatcherState, HashMap<String, i64>) {
        let inner = self.inner.lock().await;
        (inner.state.clone(), inner.worker_heartbeats.clone())
    }

    pub(crate) fn now_micros(&self) -> i64 {
        self.clock.now_micros()
    }

    /// [`snapshot_state`](Self::snapshot_state) for synchronous callers
    /// outside any async runtime.
    pub fn state_blocking(&self) -> DispatcherState {
        self.inner.blocking_lock().state.clone()
    }

    /// The single path by which dispatcher state changes: apply the update
    /// (which validates it and changes nothing if it is inconsistent), then,
    /// in fault-tolerant mode, make it durable before the caller answers.
    async fn commit(&self, inner: &mut Inner, update: UpdateType) -> Result<()> {
        use std::sync::atomic::Ordering;
        if self.journal_failed.load(Ordering::SeqCst) {
            return Err(Error::Internal(
                "an earlier journal write failed; restart the dispatcher to recover from its journal".into(),
            ));
        }
        let update = wire::Update {
            update_type: Some(update),
        };
        inner.state.apply(&update)?;
        let Some(journal) = self.journal.clone() else {
            return Ok(());
        };
        // Past the bound, the state replaces the file's history (while the
        // state lock is held, so no update slips between).
        let snapshot = (journal_records(&journal) + 1 >= self.compact_after_records)
            .then(|| inner.state.to_snapshot());
        let written = tokio::task::spawn_blocking(move || {
            journal.write(&update)?;
            if let Some(snapshot) = snapshot {
                journal.compact(&snapshot)?;
            }
            Ok(())
        })
        .await
        .unwrap_or_else(|e| Err(Error::Internal(format!("journal write task failed: {e}"))));
        if let Err(e) = &written {
            self.journal_failed.store(true, Ordering::SeqCst);
            tracing::error!(error = %e, "journal write failed; refusing further state changes");
        }
        written
    }

    // ---- Workers ----

    /// The position of `address` in `worker_addresses`, if the list is set.
    /// Entries are `host:port`, a bare `host`, or `host:%port%`-style
    /// placeholders. Exact entries match their address; placeholder and bare
    /// entries are bound, in registration order, to the first registering
    /// worker on that host that has no exact entry (TensorFlow's resolver).
    fn worker_index(&self, state: &DispatcherState, address: &str) -> Result<Option<usize>> {
        let entries = &self.config.worker_addresses;
        if entries.is_empty() {
            return Ok(None);
        }
        if let Some(i) = entries.iter().position(|e| e == address) {
            return Ok(Some(i));
        }
        let host_of = |a: &str| {
            a.rsplit_once(':')
                .map_or(a.to_string(), |(h, _)| h.to_string())
        };
        let is_placeholder = |e: &str| match e.rsplit_once(':') {
            None => true,
            Some((_, port)) => port.starts_with('%') && port.ends_with('%'),
        };
        let mut bound: Vec<Option<&str>> = vec![None; entries.len()];
        let registered = state.workers().iter().map(|w| w.address.as_str());
        let candidates = registered.chain(std::iter::once(address));
        for worker in candidates {
            if entries.iter().any(|e| e == worker) || bound.contains(&Some(worker)) {
                continue;
            }
            let host = host_of(worker);
            if let Some(j) = (0..entries.len()).find(|&j| {
                bound[j].is_none() && is_placeholder(&entries[j]) && host_of(&entries[j]) == host
            }) {
                bound[j] = Some(worker);
            }
        }
        match bound.iter().position(|b| *b == Some(address)) {
            Some(i) => Ok(Some(i)),
            None => Err(Error::FailedPrecondition(format!(
                "worker {address} is not in the dispatcher's configured worker_addresses {entries:?} \
                 (or every matching entry is taken by another worker)"
            ))),
        }
    }

    fn is_round_robin(&self, state: &DispatcherState, iteration: IterationId) -> bool {
        state
            .iteration(iteration)
            .and_then(|it| state.job(it.job_id))
            .is_some_and(|j| j.num_consumers.is_some())
    }

    fn new_task_update(
        state: &DispatcherState,
        iteration: IterationId,
        worker: &str,
    ) -> Result<UpdateType> {
        let w = state
            .worker(worker)
            .ok_or_else(|| Error::Internal(format!("worker {worker} vanished")))?;
        Ok(UpdateType::CreateTask(wire::CreateTaskUpdate {
            task_id: state.next_task_id().0,
            iteration_id: iteration.0,
            worker_address: w.address.clone(),
            transfer_servers: w.transfer_servers.clone(),
            worker_tags: w.tags.clone(),
            worker_uid: w.uid,
        }))
    }

    async fn worker_heartbeat(
        &self,
        req: wire::WorkerHeartbeatRequest,
    ) -> Result<wire::WorkerHeartbeatResponse> {
        let address = req.worker_address.clone();
        if address.is_empty() {
            return Err(Error::InvalidArgument("worker_address is empty".into()));
        }
        let mut inner = self.inner.lock().await;
        let inner = &mut *inner;
        if inner.state.worker(&address).is_none() {
            self.worker_index(&inner.state, &address)?;
            self.commit(
                inner,
                UpdateType::RegisterWorker(wire::RegisterWorkerUpdate {
                    worker_address: address.clone(),
                    transfer_servers: req.transfer_servers.clone(),
                    worker_tags: req.worker_tags.clone(),
                    worker_uid: req.worker_uid,
                    tfdata_runs_pipelines: req.tfdata_runs_pipelines,
                }),
            )
            .await?;
            // Round-robin iterations are joined through a pending task, below.
            for iteration in self.iterations_to_join(&inner.state, &address, false) {
                let update = Self::new_task_update(&inner.state, iteration, &address)?;
                self.commit(inner, update).await?;
            }
            tracing::info!(worker = %address, "worker registered");
        }
        // A worker new to (or back in) a round-robin iteration joins it at an
        // agreed round.
        for iteration in self.iterations_to_join(&inner.state, &address, true) {
            let w = inner
                .state
                .worker(&address)
                .ok_or_else(|| Error::Internal(format!("worker {address} vanished")))?
                .clone();
            let target = inner.rounds.get(&iteration).copied().unwrap_or(0) + 1;
            let update = UpdateType::CreatePendingTask(wire::CreatePendingTaskUpdate {
                task_id: inner.state.next_task_id().0,
                iteration_id: iteration.0,
                worker_address: w.address,
                transfer_servers: w.transfer_servers,
                worker_tags: w.tags,
                worker_uid: w.uid,
                starting_round: target,
            });
            self.commit(inner, update).await?;
            tracing::info!(worker = %address, iteration = %iteration, round = target, "worker joining a coordinated read");
        }
        // A worker process restarted at the same address (before
        // worker_timeout noticed) lost everything its tasks held: treat the
        // old process as lost; the new one is revived below with new tasks.
        if req.worker_uid != 0
            && let Some(w) = inner.state.worker(&address)
            && !w.lost
            && w.uid != 0
            && w.uid != req.worker_uid
        {
            tracing::warn!(worker = %address, "worker restarted (new worker_uid): its old tasks are lost");
            self.lose_worker(inner, &address).await?;
        }
        if req.tfdata_stopping {
            tracing::info!(worker = %address, "worker stopping; its tasks leave their iterations");
            inner.worker_heartbeats.remove(&address);
            if inner.state.worker(&address).is_some_and(|w| !w.lost) {
                self.lose_worker(inner, &address).await?;
            }
            return Ok(wire::WorkerHeartbeatResponse::default());
        }
        if inner.state.worker(&address).is_some_and(|w| w.lost) {
            tracing::info!(worker = %address, "lost worker is back; giving it tasks again");
            let update = UpdateType::TfdataReviveWorker(wire::ReviveWorkerUpdate {
                worker_address: address.clone(),
                worker_uid: req.worker_uid,
            });
            self.commit(inner, update).await?;
            for iteration in self.iterations_to_join(&inner.state, &address, false) {
                let update = Self::new_task_update(&inner.state, iteration, &address)?;
                self.commit(inner, update).await?;
            }
        }
        inner
            .worker_heartbeats
            .insert(address.clone(), self.clock.now_micros());

        let current: HashSet<i64> = req.current_tasks.iter().copied().collect();
        let tasks_to_delete = req
            .current_tasks
            .iter()
            .copied()
            .filter(|&t| !inner.state.is_assigned(&address, TaskId(t)))
            .collect();
        let new: Vec<Task> = inner
            .state
            .tasks_for_worker(&address)
            .filter(|t| !current.contains(&t.id.0))
            .cloned()
            .collect();
        let mut new_tasks = Vec::with_capacity(new.len());
        for task in &new {
            new_tasks.push(self.task_def(&inner.state, task)?);
        }
        Ok(wire::WorkerHeartbeatResponse {
            new_tasks,
            tasks_to_delete,
            snapshot_tasks: Vec::new(),
        })
    }

    /// The `TaskDef` a worker needs to run `task` (spec §5.5).
    fn task_def(&self, state: &DispatcherState, task: &Task) -> Result<wire::TaskDef> {
        let it = state
            .iteration(task.iteration_id)
            .ok_or_else(|| Error::Internal(format!("task {} has no iteration", task.id)))?;
        let job = state
            .job(it.job_id)
            .ok_or_else(|| Error::Internal(format!("iteration {} has no job", it.id)))?;
        let dataset = match self.store.path(&job.dataset_id) {
            Some(path) => wire::task_def::Dataset::Path(path),
            None => wire::task_def::Dataset::DatasetDef(self.store.get(&job.dataset_id)?),
        };
        let (num_workers, worker_index) = match job.sharding_policy() {
            Some(ShardingPolicy::Off | ShardingPolicy::Dynamic) | None => (0, 0),
            Some(_) => {
                let index = self
                    .worker_index(state, &task.worker_address)?
                    .ok_or_else(|| {
                        Error::FailedPrecondition(
                            "static sharding requires worker_addresses".into(),
                        )
                    })?;
                (self.config.worker_addresses.len() as i64, index as i64)
            }
        };
        Ok(wire::TaskDef {
            dataset: Some(dataset),
            dataset_id: job.dataset_id.0.clone(),
            task_id: task.id.0,
            iteration_id: it.id.0,
            num_split_providers: it.num_split_providers,
            worker_address: task.worker_address.clone(),
            processing_mode_def: Some(job.processing_mode),
            num_consumers: job.num_consumers,
            num_workers,
            worker_index,
            use_cross_trainer_cache: job.use_cross_trainer_cache,
        })
    }

    async fn worker_update(
        &self,
        req: wire::WorkerUpdateRequest,
    ) -> Result<wire::WorkerUpdateResponse> {
        let mut inner = self.inner.lock().await;
        let inner = &mut *inner;
        for update in req.updates.iter().filter(|u| u.completed) {
            let task = inner
                .state
                .task(TaskId(update.task_id))
                .ok_or_else(|| Error::not_found("task", update.task_id))?;
            if !task.finished {
                self.commit(
                    inner,
                    UpdateType::FinishTask(wire::FinishTaskUpdate {
                        task_id: update.task_id,
                    }),
                )
                .await?;
                tracing::debug!(task = update.task_id, worker = %req.worker_address, "task finished");
            }
        }
        self.reassign_returned_splits(inner).await?;
        Ok(wire::WorkerUpdateResponse {})
    }

    async fn get_dataset_def(
        &self,
        req: wire::GetDatasetDefRequest,
    ) -> Result<wire::GetDatasetDefResponse> {
        let id = DatasetId(req.dataset_id);
        if self.inner.lock().await.state.dataset(&id).is_none() {
            return Err(Error::not_found("dataset", id));
        }
        let store = self.store.clone();
        let def = tokio::task::spawn_blocking(move || store.get(&id))
            .await
            .map_err(|e| Error::Internal(format!("dataset read task failed: {e}")))??;
        Ok(wire::GetDatasetDefResponse {
            dataset_def: Some(def),
        })
    }

    // ---- Datasets ----

    async fn get_or_register_dataset(
        &self,
        req: wire::GetOrRegisterDatasetRequest,
    ) -> Result<wire::GetOrRegisterDatasetResponse> {
        let def = req.dataset.unwrap_or_default();
        match &def.tfdata_pipeline {
            // Reject a bad pipeline now, not on a worker later.
            Some(p) => {
                tfdata_dataset::pipeline::from_pipeline_def(p)?;
            }
            None if def.graph.is_empty() => {
                return Err(Error::InvalidArgument(
                    "the dataset has neither a TensorFlow graph nor a tfdata pipeline".into(),
                ));
            }
            None => {}
        }
        let metadata = req.metadata.unwrap_or_default();
        let mut inner = self.inner.lock().await;
        if let Some(id) = &req.dataset_id {
            if id.is_empty() {
                return Err(Error::InvalidArgument(
                    "requested dataset_id is empty".into(),
                ));
            }
            if let Some(existing) = inner.state.dataset(&DatasetId(id.clone())) {
                check_same_metadata(id, &existing.metadata, &metadata)?;
                return Ok(wire::GetOrRegisterDatasetResponse {
                    dataset_id: id.clone(),
                });
            }
        }
        let id = match req.dataset_id {
            Some(id) => DatasetId(id),
            None => inner.state.next_dataset_id(),
        };
        let store = self.store.clone();
        let is_pipeline = def.tfdata_pipeline.is_some();
        let (put_id, put_def) = (id.clone(), def);
        tokio::task::spawn_blocking(move || store.put(&put_id, &put_def))
            .await
            .map_err(|e| Error::Internal(format!("dataset write task failed: {e}")))??;
        self.commit(
            &mut inner,
            UpdateType::RegisterDataset(wire::RegisterDatasetUpdate {
                dataset_id: id.0.clone(),
                metadata: Some(metadata),
                tfdata_pipeline: is_pipeline,
                ..Default::default()
            }),
        )
        .await?;
        tracing::info!(dataset = %id, "dataset registered");
        Ok(wire::GetOrRegisterDatasetResponse { dataset_id: id.0 })
    }

    async fn get_data_service_metadata(
        &self,
        req: wire::GetDataServiceMetadataRequest,
    ) -> Result<wire::GetDataServiceMetadataResponse> {
        let inner = self.inner.lock().await;
        let ds = inner
            .state
            .dataset(&DatasetId(req.dataset_id.clone()))
            .ok_or_else(|| unknown_dataset(&req.dataset_id))?;
        Ok(wire::GetDataServiceMetadataResponse {
            metadata: Some(ds.metadata.clone()),
        })
    }

    async fn disable_compression_at_runtime(
        &self,
        req: wire::DisableCompressionAtRuntimeRequest,
    ) -> Result<wire::DisableCompressionAtRuntimeResponse> {
        use wire::disable_compression_at_runtime_response::Decision;
        let mut inner = self.inner.lock().await;
        let id = DatasetId(req.dataset_id.clone());
        let ds = inner
            .state
            .dataset(&id)
            .ok_or_else(|| unknown_dataset(&req.dataset_id))?;
        let decision =
            if ds.metadata.compression == wire::data_service_metadata::Compression::Off as i32 {
                Decision::NoCompressionToDisable(true)
            } else if let Some(decided) = ds.compression_disabled_at_runtime {
                Decision::CompressionDisabledAtRuntime(decided)
            } else {
                self.commit(
                    &mut inner,
                    UpdateType::CompressionDisabledAtRuntime(
                        wire::CompressionDisabledAtRuntimeUpdate {
                            dataset_id: req.dataset_id.clone(),
                            compression_disabled: req.disable_compression_at_runtime,
                        },
                    ),
                )
                .await?;
                Decision::CompressionDisabledAtRuntime(req.disable_compression_at_runtime)
            };
        Ok(wire::DisableCompressionAtRuntimeResponse {
            decision: Some(decision),
        })
    }

    // ---- Jobs and iterations ----

    async fn get_or_create_job(
        &self,
        req: wire::GetOrCreateJobRequest,
    ) -> Result<wire::GetOrCreateJobResponse> {
        let mode = req.processing_mode_def.unwrap_or_default();
        let policy = ShardingPolicy::try_from(mode.sharding_policy).map_err(|_| {
            Error::Internal(format!(
                "invalid sharding policy {} (expected 0..=5: OFF, DYNAMIC, FILE, DATA, FILE_OR_DATA, HINT)",
                mode.sharding_policy
            ))
        })?;
        let target_workers = normalize_target_workers(req.target_workers);
        if wire::TargetWorkers::try_from(req.target_workers).is_err() {
            return Err(Error::InvalidArgument(format!(
                "invalid target_workers {}",
                req.target_workers
            )));
        }
        let mut inner = self.inner.lock().await;
        if inner
            .state
            .dataset(&DatasetId(req.dataset_id.clone()))
            .is_none()
        {
            return Err(unknown_dataset(&req.dataset_id));
        }
        if let Some(name) = &req.job_name {
            if name.is_empty() {
                return Err(Error::InvalidArgument("job_name must not be empty".into()));
            }
            if let Some(job) = inner.state.job_by_name(name) {
                let mut diffs = Vec::new();
                if job.processing_mode != mode {
                    diffs.push(format!(
                        "processing_mode_def: existing {:?}, requested {:?}",
                        job.sharding_policy(),
                        ShardingPolicy::try_from(mode.sharding_policy).ok()
                    ));
                }
                if job.use_cross_trainer_cache != req.use_cross_trainer_cache {
                    diffs.push(format!(
                        "use_cross_trainer_cache: existing {}, requested {}",
                        job.use_cross_trainer_cache, req.use_cross_trainer_cache
                    ));
                }
                if job.target_workers != target_workers {
                    diffs.push(format!(
                        "target_workers: existing {}, requested {}",
                        target_workers_name(job.target_workers),
                        target_workers_name(target_workers)
                    ));
                }
                if !diffs.is_empty() {
                    return Err(Error::InvalidArgument(format!(
                        "tried to create job with name {name} but found an existing job with different parameters: {}",
                        diffs.join("; ")
                    )));
                }
                return Ok(wire::GetOrCreateJobResponse { job_id: job.id.0 });
            }
        }
        // Capabilities not built yet fail here, clearly, before any state changes.
        if policy == ShardingPolicy::Dynamic {
            // Checks now that the dataset's sources can be split.
            self.new_split_providers(&DatasetId(req.dataset_id.clone()))
                .await?;
        }
        if let Some(n) = req.num_consumers
            && n <= 0
        {
            return Err(Error::InvalidArgument(format!(
                "num_consumers must be positive, got {n}"
            )));
        }

        let is_static = !matches!(policy, ShardingPolicy::Off | ShardingPolicy::Dynamic);
        if is_static && self.config.worker_addresses.is_empty() {
            return Err(Error::FailedPrecondition(format!(
                "static sharding policy {policy:?} requires the dispatcher's worker_addresses to be set"
            )));
        }
        let job_id = inner.state.next_job_id();
        let name = match req.job_name {
            Some(name) => name,
            None => format!("anonymous_job_{}_{}", job_id.0, rand::random::<u64>()),
        };
        self.commit(
            &mut inner,
            UpdateType::CreateJob(wire::CreateJobUpdate {
                job_id: job_id.0,
                job_name: name.clone(),
                dataset_id: req.dataset_id.clone(),
                processing_mode_def: Some(mode),
                num_consumers: req.num_consumers,
                target_workers,
                use_cross_trainer_cache: req.use_cross_trainer_cache,
            }),
        )
        .await?;
        tracing::info!(job = %job_id, name = %name, dataset = %req.dataset_id, "job created");
        Ok(wire::GetOrCreateJobResponse { job_id: job_id.0 })
    }

    async fn get_or_create_iteration(
        &self,
        req: wire::GetOrCreateIterationRequest,
    ) -> Result<wire::GetOrCreateIterationResponse> {
        let mut new_task_defs = Vec::new();
        let client_id = {
            let mut inner = self.inner.lock().await;
            let inner = &mut *inner;
            let job = inner
                .state
                .job(JobId(req.job_id))
                .ok_or_else(|| Error::not_found("job", req.job_id))?
                .clone();
            let iteration_id = match inner.state.iteration_by_key(&job.name, req.repetition) {
                Some(it) => it.id,
                None => {
                    let id = inner.state.next_iteration_id();
                    let providers = if job.sharding_policy() == Some(ShardingPolicy::Dynamic) {
                        self.new_split_providers(&job.dataset_id).await?
                    } else {
                        Vec::new()
                    };
                    self.commit(
                        inner,
                        UpdateType::CreateIteration(wire::CreateIterationUpdate {
                            iteration_id: id.0,
                            job_id: job.id.0,
                            repetition: req.repetition,
                            num_split_providers: providers.len() as i64,
                        }),
                    )
                    .await?;
                    if !providers.is_empty() {
                        inner.split_providers.insert(id, providers);
                    }
                    let workers: Vec<String> = inner
                        .state
                        .workers()
                        .iter()
                        .filter(|w| !w.lost && inner.state.can_run(&w.address, id))
                        .map(|w| w.address.clone())
                        .collect();
                    for worker in workers {
                        let update = Self::new_task_update(&inner.state, id, &worker)?;
                        let task_id = inner.state.next_task_id();
                        self.commit(inner, update).await?;
                        let task = inner
                            .state
                            .task(task_id)
                            .ok_or_else(|| Error::Internal("created task vanished".into()))?
                            .clone();
                        new_task_defs.push(self.task_def(&inner.state, &task)?);
                    }
                    tracing::info!(iteration = %id, job = %job.id, repetition = req.repetition, "iteration created");
                    id
                }
            };
            let client_id = inner.state.next_client_id();
            self.commit(
                inner,
                UpdateType::AcquireIterationClient(wire::AcquireIterationClientUpdate {
                    iteration_id: iteration_id.0,
                    iteration_client_id: client_id.0,
                }),
            )
            .await?;
            inner.client_heartbeats.insert(client_id, i64::MAX);
            client_id
        };
        // Best effort: workers also learn their tasks from heartbeats.
        let pushes = new_task_defs.into_iter().map(|def| self.push_task(def));
        for result in futures::future::join_all(pushes).await {
            result?;
        }
        Ok(wire::GetOrCreateIterationResponse {
            iteration_client_id: client_id.0,
        })
    }

    fn worker_client(&self, address: &str) -> Result<WorkerServiceClient<Channel>> {
        let mut clients = self
            .worker_clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(c) = clients.get(address) {
            return Ok(c.clone());
        }
        let client = tfdata_rpc::channel::worker_client(tfdata_rpc::channel::channel(address)?);
        clients.insert(address.to_string(), client.clone());
        Ok(client)
    }

    /// Sends `ProcessTask`; transient failures are left to the heartbeat path.
    async fn push_task(&self, task: wire::TaskDef) -> Result<()> {
        let (worker, task_id) = (task.worker_address.clone(), task.task_id);
        let mut client = self.worker_client(&worker)?;
        let call = client.process_task(wire::ProcessTaskRequest { task: Some(task) });
        match tokio::time::timeout(PROCESS_TASK_TIMEOUT, call).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(status)) if tfdata_core::error::is_retryable_code(status.code()) => {
                tracing::debug!(%worker, task = task_id, error = %status.message(), "ProcessTask failed; heartbeat will deliver the task");
                Ok(())
            }
            Ok(Err(status)) => Err(Error::from(status)),
            Err(_) => {
                tracing::debug!(%worker, task = task_id, "ProcessTask timed out; heartbeat will deliver the task");
                Ok(())
            }
        }
    }

    // ---- Clients ----

    async fn client_heartbeat(
        &self,
        req: wire::ClientHeartbeatRequest,
    ) -> Result<wire::ClientHeartbeatResponse> {
        let client = IterationClientId(req.iteration_client_id);
        let mut inner = self.inner.lock().await;
        let iteration_id = inner
            .state
            .client_iteration(client)
            .ok_or_else(|| unknown_client(client))?;
        let now = self.clock.now_micros();
        inner.client_heartbeats.insert(client, now);
        if let Some(round) = req.current_round {
            let max = inner.rounds.entry(iteration_id).or_insert(round);
            *max = (*max).max(round);
        }
        self.negotiate_pending_task(&mut inner, client, iteration_id, &req)
            .await?;
        let it = inner
            .state
            .iteration(iteration_id)
            .ok_or_else(|| Error::Internal(format!("client {client} has no iteration")))?;
        if it.garbage_collected {
            return Err(Error::FailedPrecondition(format!(
                "iteration {iteration_id} has been garbage collected (it had no clients for longer than job_gc_timeout)"
            )));
        }
        let task_info = it
            .tasks
            .iter()
            .filter_map(|t| inner.state.task(*t))
            .map(|t| wire::TaskInfo {
                worker_address: t.worker_address.clone(),
                transfer_servers: t.transfer_servers.clone(),
                worker_tags: t.worker_tags.clone(),
                task_id: t.id.0,
                iteration_id: t.iteration_id.0,
                worker_uid: t.worker_uid,
                starting_round: t.starting_round,
            })
            .collect();
        Ok(wire::ClientHeartbeatResponse {
            task_info,
            block_round: it.pending_tasks.front().map(|p| p.target_round),
            iteration_finished: it.finished,
            deployment_mode: self.config.deployment_mode as i32,
        })
    }

    /// Moves the iteration's first pending task towards joining (spec §5.7):
    /// a client already at or past its target round rejects it (a later
    /// target is chosen); a client that agreed to stop before it accepts.
    async fn negotiate_pending_task(
        &self,
        inner: &mut Inner,
        client: IterationClientId,
        iteration_id: IterationId,
        req: &wire::ClientHeartbeatRequest,
    ) -> Result<()> {
        let Some(it) = inner.state.iteration(iteration_id) else {
            return Ok(());
        };
        let Some(pending) = it.pending_tasks.front() else {
            return Ok(());
        };
        let update = match (req.current_round, req.blocked_round) {
            (Some(current), _) if current >= pending.target_round => {
                let max = inner
                    .rounds
                    .get(&iteration_id)
                    .copied()
                    .unwrap_or(current)
                    .max(current);
                let backoff = 2i64.saturating_mul(1i64 << pending.failures.clamp(0, 20));
                Some(wire::ClientHeartbeatUpdate {
                    iteration_client_id: client.0,
                    task_accepted: false,
                    task_rejected: Some(wire::TaskRejected {
                        new_target_round: max.saturating_add(backoff),
                    }),
                })
            }
            (_, Some(blocked))
                if blocked <= pending.target_round
                    && !pending.ready_consumers.contains(&client) =>
            {
                Some(wire::ClientHeartbeatUpdate {
                    iteration_client_id: client.0,
                    task_accepted: true,
                    task_rejected: None,
                })
            }
            _ => None,
        };
        if let Some(update) = update {
            self.commit(inner, UpdateType::ClientHeartbeat(update))
                .await?;
        }
        Ok(())
    }

    async fn release_iteration_client(
        &self,
        req: wire::ReleaseIterationClientRequest,
    ) -> Result<wire::ReleaseIterationClientResponse> {
        let client = IterationClientId(req.iteration_client_id);
        let mut inner = self.inner.lock().await;
        if inner.state.client_iteration(client).is_none() {
            return Err(unknown_client(client));
        }
        self.commit(
            &mut inner,
            UpdateType::ReleaseIterationClient(wire::ReleaseIterationClientUpdate {
                iteration_client_id: client.0,
                time_micros: self.clock.now_micros(),
            }),
        )
        .await?;
        inner.client_heartbeats.remove(&client);
        Ok(wire::ReleaseIterationClientResponse {})
    }

    /// `MaybeRemoveTask` (spec §5.7): a task is removed from a coordinated
    /// read once every consumer asks for its removal in the same round.
    async fn maybe_remove_task(
        &self,
        req: wire::MaybeRemoveTaskRequest,
    ) -> Result<wire::MaybeRemoveTaskResponse> {
        let task_id = TaskId(req.task_id);
        let num_consumers = {
            let inner = self.inner.lock().await;
            let Some(task) = inner.state.task(task_id) else {
                return Ok(wire::MaybeRemoveTaskResponse { removed: true });
            };
            let job = inner
                .state
                .iteration(task.iteration_id)
                .and_then(|it| inner.state.job(it.job_id));
            match job.and_then(|j| j.num_consumers) {
                // An index outside the job's consumers would count towards
                // the agreement and remove the task early.
                Some(n) if !(0..n).contains(&req.consumer_index) => {
                    return Err(Error::InvalidArgument(format!(
                        "MaybeRemoveTask: consumer_index {} is not in [0, {n})",
                        req.consumer_index
                    )));
                }
                Some(n) => n,
                None => {
                    return Err(Error::FailedPrecondition(format!(
                        "MaybeRemoveTask called for task {} of a non-round-robin iteration",
                        req.task_id
                    )));
                }
            }
        };
        let remover = {
            let mut removers = self.removers.lock().unwrap_or_else(|p| p.into_inner());
            let entry = removers.entry(task_id).or_insert_with(|| {
                Arc::new(Remover {
                    round: req.round,
                    consumers: Default::default(),
                    removed: Default::default(),
                    done: tokio::sync::Notify::new(),
                })
            });
            if entry.round != req.round {
                let empty = entry
                    .consumers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .is_empty();
                if !empty {
                    return Ok(wire::MaybeRemoveTaskResponse { removed: false });
                }
                *entry = Arc::new(Remover {
                    round: req.round,
                    consumers: Default::default(),
                    removed: Default::default(),
                    done: tokio::sync::Notify::new(),
                });
            }
            Arc::clone(entry)
        };
        let notified = remover.done.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let agreed = {
            let mut consumers = remover.consumers.lock().unwrap_or_else(|p| p.into_inner());
            consumers.insert(req.consumer_index);
            consumers.len() as i64 >= num_consumers
        };
        if agreed {
            let mut inner = self.inner.lock().await;
            if inner.state.task(task_id).is_some() {
                self.commit(
                    &mut inner,
                    UpdateType::RemoveTask(wire::RemoveTaskUpdate { task_id: task_id.0 }),
                )
                .await?;
                tracing::info!(task = %task_id, round = req.round, "task removed by consumer agreement");
            }
            remover
                .removed
                .store(true, std::sync::atomic::Ordering::SeqCst);
            remover.done.notify_waiters();
            self.removers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&task_id);
            return Ok(wire::MaybeRemoveTaskResponse { removed: true });
        }
        if tokio::time::timeout(REMOVAL_RENDEZVOUS, notified)
            .await
            .is_err()
        {
            remover
                .consumers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&req.consumer_index);
        }
        Ok(wire::MaybeRemoveTaskResponse {
            removed: remover.removed.load(std::sync::atomic::Ordering::SeqCst),
        })
    }

    /// Fresh split providers for a dataset's sources (in depth-first order,
    /// the order of `split_provider_index`). Only tfdata pipelines can be
    /// split by this dispatcher so far.
    async fn new_split_providers(
        &self,
        dataset_id: &DatasetId,
    ) -> Result<Vec<Box<dyn SplitProvider>>> {
        let store = self.store.clone();
        let id = dataset_id.clone();
        let def = tokio::task::spawn_blocking(move || store.get(&id))
            .await
            .map_err(|e| Error::Internal(format!("dataset read task failed: {e}")))??;
        let Some(pipeline) = &def.tfdata_pipeline else {
            // A TensorFlow graph: its sources' constant inputs give the splits.
            let graph = def.graph.clone();
            return tokio::task::spawn_blocking(move || crate::tf_graph::split_providers(&graph))
                .await
                .map_err(|e| Error::Internal(format!("split provider task failed: {e}")))?;
        };
        let dataset = tfdata_dataset::pipeline::from_pipeline_def(pipeline)?;
        // Globbing list_files sources reads directories: off the async threads.
        tokio::task::spawn_blocking(move || {
            dataset
                .sources()
                .iter()
                .map(|source| match source.op().split_provider() {
                    Some(provider) => provider,
                    None => Err(Error::InvalidArgument(format!(
                        "distributed_epoch: the dataset's source `{}` cannot be split dynamically \
                         (splittable sources: range, from_tensor_slices, list_files, tfrecord_dataset, \
                         text_line_dataset)",
                        source.op().name()
                    ))),
                })
                .collect()
        })
        .await
        .map_err(|e| Error::Internal(format!("split provider task failed: {e}")))?
    }

    /// `GetSplit` (spec §5.6): the next split of one source for one iteration,
    /// journaled before it is returned.
    // The providers are built by an async call between the check and the
    // insert, which the entry API cannot span.
    #[allow(clippy::map_entry)]
    async fn get_split(&self, req: wire::GetSplitRequest) -> Result<wire::GetSplitResponse> {
        let iteration_id = IterationId(req.iteration_id);
        let mut inner = self.inner.lock().await;
        let inner = &mut *inner;
        let it = inner
            .state
            .iteration(iteration_id)
            .ok_or_else(|| Error::not_found("iteration", req.iteration_id))?;
        let job = inner
            .state
            .job(it.job_id)
            .ok_or_else(|| Error::Internal(format!("iteration {iteration_id} has no job")))?;
        if job.sharding_policy() != Some(ShardingPolicy::Dynamic) {
            return Err(Error::FailedPrecondition(format!(
                "GetSplit called for iteration {} whose processing mode is not distributed_epoch (DYNAMIC)",
                req.iteration_id
            )));
        }
        let p = usize::try_from(req.split_provider_index)
            .ok()
            .filter(|&p| p < it.split_indices.len())
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "split_provider_index {} out of range: iteration {iteration_id} has {} split providers",
                    req.split_provider_index,
                    it.split_indices.len()
                ))
            })?;
        // A tfdata worker repeating its last request lost the answer: give it
        // the same split again (nothing new is journaled).
        if let Some(sequence) = req.tfdata_split_sequence
            && let Some(last) = it
                .last_splits
                .get(&(req.split_provider_index, req.tfdata_worker_address.clone()))
            && last.repetition == req.repetition
            && last.sequence == sequence
        {
            return Ok(match &last.split {
                Some(split) => wire::GetSplitResponse {
                    split: Some(split.clone()),
                    end_of_splits: false,
                },
                None => end_of_splits(),
            });
        }
        // Splits a lost worker held are handed out first, to whichever
        // repetition asks: they must be produced once, wherever.
        let returned = it
            .returned_splits
            .get(&req.split_provider_index)
            .and_then(|q| q.front())
            .map(|(_, split)| split.clone());
        if let Some(split) = returned {
            self.commit(
                inner,
                UpdateType::ProduceSplit(wire::ProduceSplitUpdate {
                    iteration_id: req.iteration_id,
                    repetition: req.repetition,
                    split_provider_index: req.split_provider_index,
                    finished: false,
                    tfdata_worker_address: req.tfdata_worker_address.clone(),
                    tfdata_split_sequence: req.tfdata_split_sequence,
                    tfdata_split: Some(split.clone()),
                    tfdata_from_returned: true,
                    tfdata_delivered: req.tfdata_delivered.clone(),
                    tfdata_task_id: req.tfdata_task_id,
                }),
            )
            .await?;
            return Ok(wire::GetSplitResponse {
                split: Some(split),
                end_of_splits: false,
            });
        }
        let Some(&current) = it.split_repetitions.get(p) else {
            return Err(Error::Internal(format!(
                "iteration {iteration_id} has no split repetition for provider {p}"
            )));
        };
        if req.repetition < current {
            // That repetition is over for everyone.
            return Ok(end_of_splits());
        }
        if !inner.split_providers.contains_key(&iteration_id) {
            // After a restart: rebuild and fast-forward past journaled splits.
            let (dataset_id, indices) = (job.dataset_id.clone(), it.split_indices.clone());
            let providers = self.new_split_providers(&dataset_id).await?;
            for (provider, &skip) in providers.iter().zip(&indices) {
                provider.skip(skip.max(0) as u64)?;
            }
            inner.split_providers.insert(iteration_id, providers);
        }
        let provider = inner
            .split_providers
            .get(&iteration_id)
            .and_then(|v| v.get(p))
            .ok_or_else(|| {
                Error::Internal(format!("iteration {iteration_id} lost split provider {p}"))
            })?;
        if req.repetition > current {
            provider.reset()?;
        }
        let split = provider.get_next()?;
        let finished = split.is_none();
        if finished {
            // Ready for the next repetition.
            provider.reset()?;
        }
        let split = split.map(|t| tfdata_core::element::tensor_to_proto(&t));
        self.commit(
            inner,
            UpdateType::ProduceSplit(wire::ProduceSplitUpdate {
                iteration_id: req.iteration_id,
                repetition: req.repetition,
                split_provider_index: req.split_provider_index,
                finished,
                tfdata_worker_address: req.tfdata_worker_address.clone(),
                tfdata_split_sequence: req.tfdata_split_sequence,
                tfdata_split: split
                    .clone()
                    .filter(|_| req.tfdata_split_sequence.is_some()),
                tfdata_from_returned: false,
                tfdata_delivered: req.tfdata_delivered.clone(),
                tfdata_task_id: req.tfdata_task_id,
            }),
        )
        .await?;
        Ok(match split {
            Some(split) => wire::GetSplitResponse {
                split: Some(split),
                end_of_splits: false,
            },
            None => end_of_splits(),
        })
    }

    /// Unfinished iterations `worker` can run and has no task in: the
    /// round-robin ones (joined through a pending task) or the others.
    fn iterations_to_join(
        &self,
        state: &DispatcherState,
        worker: &str,
        round_robin: bool,
    ) -> Vec<IterationId> {
        state
            .unfinished_iterations()
            .filter(|it| self.is_round_robin(state, it.id) == round_robin)
            // Not a TensorFlow graph for a tfdata worker, or the reverse.
            .filter(|it| state.can_run(worker, it.id))
            .filter(|it| {
                !state
                    .tasks_for_worker(worker)
                    .any(|t| t.iteration_id == it.id)
            })
            .map(|it| it.id)
            .collect()
    }

    /// Declares `worker` lost (its tasks leave their iterations, its
    /// undelivered splits return to the pool) and sees that someone will
    /// produce those splits.
    async fn lose_worker(&self, inner: &mut Inner, worker: &str) -> Result<()> {
        let update = UpdateType::TfdataLoseWorker(wire::LoseWorkerUpdate {
            worker_address: worker.to_string(),
        });
        self.commit(inner, update).await?;
        self.reassign_returned_splits(inner).await
    }

    /// Splits a lost worker held wait in their iteration's returned queue for
    /// a task that still asks for splits. When every live task of the
    /// iteration has reached the end of splits (or finished), nobody would
    /// ask: start a task on a live worker to produce them, so nothing is lost.
    /// With no live worker they wait (the iteration is not finished) for the
    /// next worker to register.
    async fn reassign_returned_splits(&self, inner: &mut Inner) -> Result<()> {
        let state = &inner.state;
        let waiting: Vec<IterationId> = state
            .unfinished_iterations()
            .filter(|it| !it.returned_splits.is_empty())
            .filter(|it| !self.is_round_robin(state, it.id))
            .filter(|it| {
                !it.tasks.iter().filter_map(|t| state.task(*t)).any(|t| {
                    !t.finished
                        && state.worker(&t.worker_address).is_some_and(|w| !w.lost)
                        && it.returned_splits.keys().any(|p| {
                            it.last_splits
                                .get(&(*p, t.worker_address.clone()))
                                .is_none_or(|last| last.split.is_some())
                        })
                })
            })
            .map(|it| it.id)
            .collect();
        for iteration in waiting {
            let worker = inner
                .state
                .workers()
                .iter()
                .find(|w| !w.lost && inner.state.can_run(&w.address, iteration))
                .map(|w| w.address.clone());
            let Some(worker) = worker else {
                tracing::warn!(iteration = %iteration, "a lost worker's splits wait for a live worker");
                continue;
            };
            let update = Self::new_task_update(&inner.state, iteration, &worker)?;
            self.commit(inner, update).await?;
            tracing::info!(iteration = %iteration, %worker, "new task to produce a lost worker's splits");
        }
        Ok(())
    }

    /// One pass of all maintenance (spec §5.9): [`check_liveness`] and
    /// [`collect_garbage`].
    ///
    /// [`check_liveness`]: Self::check_liveness
    /// [`collect_garbage`]: Self::collect_garbage
    pub async fn run_maintenance(&self) -> Result<()> {
        self.check_liveness().await?;
        self.collect_garbage().await
    }

    /// How often [`check_liveness`](Self::check_liveness) runs: often enough
    /// that a silent client or worker is noticed within about a quarter of
    /// its timeout, whatever `job_gc_check_interval` is.
    pub fn liveness_check_interval(&self) -> Duration {
        let shortest = self.config.client_timeout.min(self.config.worker_timeout);
        (shortest / 4).clamp(Duration::from_millis(10), Duration::from_secs(5))
    }

    /// Releases clients silent for `client_timeout` and declares workers
    /// silent for `worker_timeout` lost. Independent of garbage collection:
    /// TensorFlow runs both on the GC interval (10 minutes by default), so
    /// a dead worker went unnoticed that long, and `job_gc_timeout = -1`
    /// turned both off.
    pub async fn check_liveness(&self) -> Result<()> {
        let now = self.clock.now_micros();
        let client_timeout = self.config.client_timeout.as_micros() as i64;
        let mut inner = self.inner.lock().await;
        let inner = &mut *inner;
        let timed_out: Vec<IterationClientId> = inner
            .client_heartbeats
            .iter()
            .filter(|(_, last)| **last != i64::MAX && now.saturating_sub(**last) > client_timeout)
            .map(|(c, _)| *c)
            .collect();
        for client in timed_out {
            tracing::info!(client = %client, "releasing iteration client after client_timeout without heartbeats");
            self.commit(
                inner,
                UpdateType::ReleaseIterationClient(wire::ReleaseIterationClientUpdate {
                    iteration_client_id: client.0,
                    time_micros: now,
                }),
            )
            .await?;
            inner.client_heartbeats.remove(&client);
        }
        // Beyond TensorFlow: a silent worker is declared lost, so its
        // iterations can finish and readers stop waiting for it.
        let worker_timeout = self.config.worker_timeout.as_micros() as i64;
        let silent: Vec<String> = inner
            .worker_heartbeats
            .iter()
            .filter(|(_, last)| now.saturating_sub(**last) > worker_timeout)
            .map(|(w, _)| w.clone())
            .collect();
        for worker in silent {
            tracing::warn!(%worker, "worker silent for longer than worker_timeout: declaring it lost");
            inner.worker_heartbeats.remove(&worker);
            if inner.state.worker(&worker).is_some_and(|w| !w.lost) {
                self.lose_worker(inner, &worker).await?;
            }
        }
        Ok(())
    }

    /// Collects iterations without clients for `job_gc_timeout` (none when
    /// it is unset, TensorFlow's -1).
    pub async fn collect_garbage(&self) -> Result<()> {
        let Some(gc_timeout) = self.config.job_gc_timeout else {
            return Ok(());
        };
        let now = self.clock.now_micros();
        let mut inner = self.inner.lock().await;
        let inner = &mut *inner;
        let gc_micros = gc_timeout.as_micros() as i64;
        let collectable: Vec<IterationId> = inner
            .state
            .iterations()
            .filter(|it| {
                let dynamic = inner
                    .state
                    .job(it.job_id)
                    .is_some_and(|j| j.sharding_policy() == Some(ShardingPolicy::Dynamic));
                !it.finished
                    && it.num_clients == 0
                    && (!dynamic || self.config.gc_dynamic_sharding_jobs)
                    && it
                        .last_client_released_micros
                        .is_some_and(|t| now >= t.saturating_add(gc_micros))
            })
            .map(|it| it.id)
            .collect();
        for id in collectable {
            tracing::info!(iteration = %id, "garbage collecting iteration without clients");
            self.commit(
                inner,
                UpdateType::GarbageCollectIteration(wire::GarbageCollectIterationUpdate {
                    iteration_id: id.0,
                }),
            )
            .await?;
        }
        Ok(())
    }
}

fn end_of_splits() -> wire::GetSplitResponse {
    wire::GetSplitResponse {
        split: None,
        end_of_splits: true,
    }
}

fn unknown_dataset(id: &str) -> Error {
    Error::NotFound {
        what: "dataset",
        id: format!("{id} (datasets must be registered with register_dataset before use)"),
    }
}

fn unknown_client(client: IterationClientId) -> Error {
    Error::NotFound {
        what: "iteration client id",
        id: format!(
            "{client}: unknown to the dispatcher. This can be caused by a dispatcher restart \
             without fault tolerance (set work_dir and fault_tolerant_mode)"
        ),
    }
}

fn target_workers_name(v: i32) -> &'static str {
    wire::TargetWorkers::try_from(v).map_or("INVALID", |t| t.as_str_name())
}

/// A dataset re-registered under an existing id must describe the same data.
fn check_same_metadata(
    id: &str,
    existing: &wire::DataServiceMetadata,
    new: &wire::DataServiceMetadata,
) -> Result<()> {
    let mut diffs = Vec::new();
    if existing.element_spec != new.element_spec {
        diffs.push("element_spec".to_string());
    }
    if existing.compression != new.compression {
        diffs.push(format!(
            "compression (existing {}, requested {})",
            existing.compression, new.compression
        ));
    }
    if existing.cardinality != new.cardinality {
        diffs.push(format!(
            "cardinality (existing {}, requested {})",
            existing.cardinality, new.cardinality
        ));
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "a dataset with id {id} is already registered with different metadata: {}",
            diffs.join(", ")
        )))
    }
}

/// The tonic adapter around [`Dispatcher`].
#[derive(Clone)]
pub struct DispatcherGrpc(pub Arc<Dispatcher>);

fn respond<T>(method: &'static str, result: Result<T>) -> Result<Response<T>, Status> {
    match result {
        Ok(v) => Ok(Response::new(v)),
        Err(e) => {
            tracing::debug!(method, error = %e, "request failed");
            Err(e.into())
        }
    }
}

/// The `DispatcherService` impl: methods that hand the request to the
/// `Dispatcher` method of the same name (listed once each), and the rest
/// written out.
macro_rules! dispatcher_service {
    (
        delegated { $($method:ident($req:ident) -> $resp:ident as $name:literal;)* }
        custom { $($custom:tt)* }
    ) => {
        #[tonic::async_trait]
        impl DispatcherService for DispatcherGrpc {
            $(
                async fn $method(
                    &self,
                    r: Request<wire::$req>,
                ) -> Result<Response<wire::$resp>, Status> {
                    respond($name, self.0.$method(r.into_inner()).await)
                }
            )*
            $($custom)*
        }
    };
}

dispatcher_service! {
    delegated {
        worker_heartbeat(WorkerHeartbeatRequest) -> WorkerHeartbeatResponse as "WorkerHeartbeat";
        worker_update(WorkerUpdateRequest) -> WorkerUpdateResponse as "WorkerUpdate";
        get_dataset_def(GetDatasetDefRequest) -> GetDatasetDefResponse as "GetDatasetDef";
        get_split(GetSplitRequest) -> GetSplitResponse as "GetSplit";
        get_or_register_dataset(GetOrRegisterDatasetRequest) -> GetOrRegisterDatasetResponse
            as "GetOrRegisterDataset";
        get_or_create_job(GetOrCreateJobRequest) -> GetOrCreateJobResponse as "GetOrCreateJob";
        get_or_create_iteration(GetOrCreateIterationRequest) -> GetOrCreateIterationResponse
            as "GetOrCreateIteration";
        maybe_remove_task(MaybeRemoveTaskRequest) -> MaybeRemoveTaskResponse as "MaybeRemoveTask";
        release_iteration_client(ReleaseIterationClientRequest) -> ReleaseIterationClientResponse
            as "ReleaseIterationClient";
        client_heartbeat(ClientHeartbeatRequest) -> ClientHeartbeatResponse as "ClientHeartbeat";
        get_data_service_metadata(GetDataServiceMetadataRequest) -> GetDataServiceMetadataResponse
            as "GetDataServiceMetadata";
        disable_compression_at_runtime(DisableCompressionAtRuntimeRequest) -> DisableCompressionAtRuntimeResponse
            as "DisableCompressionAtRuntime";
    }
    custom {
        async fn get_version(
            &self,
            _r: Request<wire::GetVersionRequest>,
        ) -> Result<Response<wire::GetVersionResponse>, Status> {
            Ok(Response::new(wire::GetVersionResponse {
                version: tfdata_proto::DATA_SERVICE_VERSION,
            }))
        }

        async fn get_workers(
            &self,
            _r: Request<wire::GetWorkersRequest>,
        ) -> Result<Response<wire::GetWorkersResponse>, Status> {
            let inner = self.0.inner.lock().await;
            let workers = inner
                .state
                .workers()
                .iter()
                .map(|w| wire::WorkerInfo {
                    address: w.address.clone(),
                })
                .collect();
            Ok(Response::new(wire::GetWorkersResponse { workers }))
        }

        async fn get_data_service_config(
            &self,
            _r: Request<wire::GetDataServiceConfigRequest>,
        ) -> Result<Response<wire::GetDataServiceConfigResponse>, Status> {
            Ok(Response::new(wire::GetDataServiceConfigResponse {
                config: Some(wire::DataServiceConfig {
                    deployment_mode: self.0.config.deployment_mode as i32,
                }),
            }))
        }

        async fn snapshot(
            &self,
            _r: Request<wire::SnapshotRequest>,
        ) -> Result<Response<wire::SnapshotResponse>, Status> {
            let err = if self.0.config.fault_tolerant_mode {
                Error::Unimplemented(
                    "distributed snapshots (distributed_save) are not supported yet".into(),
                )
            } else {
                Error::InvalidArgument(
                    "distributed_save requires the dispatcher to run in fault-tolerant mode \
                     (set work_dir and fault_tolerant_mode)"
                        .into(),
                )
            };
            respond("Snapshot", Err(err))
        }

        async fn get_snapshot_split(
            &self,
            r: Request<wire::GetSnapshotSplitRequest>,
        ) -> Result<Response<wire::GetSnapshotSplitResponse>, Status> {
            let path = r.into_inner().base_path;
            respond(
                "GetSnapshotSplit",
                Err(Error::InvalidArgument(format!("unknown snapshot {path:?}"))),
            )
        }

        async fn get_snapshot_streams(
            &self,
            r: Request<wire::GetSnapshotStreamsRequest>,
        ) -> Result<Response<wire::GetSnapshotStreamsResponse>, Status> {
            let path = r.into_inner().path;
            respond(
                "GetSnapshotStreams",
                Err(Error::not_found("snapshot", path)),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};

    use super::*;

    /// A clock tests move by hand.
    pub(super) struct ManualClock(pub(super) AtomicI64);

    impl Clock for ManualClock {
        fn now_micros(&self) -> i64 {
            self.0.load(Ordering::SeqCst)
        }
    }

    fn dispatcher() -> (Dispatcher, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock(AtomicI64::new(1_000_000)));
        let config = DispatcherConfig {
            job_gc_timeout: Some(Duration::from_secs(60)),
            client_timeout: Duration::from_secs(30),
            ..Default::default()
        };
        (Dispatcher::new(config, clock.clone()).unwrap(), clock)
    }

    /// Registers `dataset` (of `cardinality`); returns its id.
    async fn register(
        d: &Dispatcher,
        dataset: &tfdata_dataset::Dataset,
        cardinality: i64,
    ) -> String {
        let pipeline = tfdata_dataset::pipeline::to_pipeline_def(dataset, false).unwrap();
        d.get_or_register_dataset(wire::GetOrRegisterDatasetRequest {
            dataset: Some(wire::DatasetDef {
                graph: Default::default(),
                tfdata_pipeline: Some(pipeline),
            }),
            metadata: Some(wire::DataServiceMetadata {
                compression: 1,
                cardinality,
                ..Default::default()
            }),
            dataset_id: None,
        })
        .await
        .unwrap()
        .dataset_id
    }

    /// Registers `range(n)`, creates a job with `policy` and its first
    /// iteration; returns the iteration client id.
    pub(super) async fn iteration_of_range(d: &Dispatcher, n: i64, policy: i32) -> i64 {
        let id = register(d, &tfdata_dataset::Dataset::range(n), 0).await;
        let job_id = d
            .get_or_create_job(wire::GetOrCreateJobRequest {
                dataset_id: id,
                processing_mode_def: Some(wire::ProcessingModeDef {
                    sharding_policy: policy,
                }),
                ..Default::default()
            })
            .await
            .unwrap()
            .job_id;
        d.get_or_create_iteration(wire::GetOrCreateIterationRequest {
            job_id,
            repetition: 0,
        })
        .await
        .unwrap()
        .iteration_client_id
    }

    async fn iteration_with_client(d: &Dispatcher) -> i64 {
        iteration_of_range(d, 3, 0).await
    }

    #[tokio::test]
    async fn silent_clients_are_released_and_their_iteration_collected() {
        let (d, clock) = dispatcher();
        let client = iteration_with_client(&d).await;
        // Before its first heartbeat a client never times out.
        clock.0.fetch_add(3_600_000_000, Ordering::SeqCst);
        d.run_maintenance().await.unwrap();
        assert_eq!(d.snapshot_state().await.clients().count(), 1);

        d.client_heartbeat(wire::ClientHeartbeatRequest {
            iteration_client_id: client,
            ..Default::default()
        })
        .await
        .unwrap();
        clock.0.fetch_add(31_000_000, Ordering::SeqCst);
        d.run_maintenance().await.unwrap();
        let state = d.snapshot_state().await;
        assert_eq!(state.clients().count(), 0, "released after client_timeout");
        assert!(!state.iterations().next().unwrap().garbage_collected);

        clock.0.fetch_add(61_000_000, Ordering::SeqCst);
        d.run_maintenance().await.unwrap();
        let state = d.snapshot_state().await;
        let it = state.iterations().next().unwrap();
        assert!(
            it.garbage_collected && it.finished,
            "collected after job_gc_timeout"
        );

        let err = d
            .client_heartbeat(wire::ClientHeartbeatRequest {
                iteration_client_id: client,
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::NotFound);
    }

    /// A consumer index outside the job's consumers is refused: counted, it
    /// would make up the agreement that removes a coordinated-read task.
    #[tokio::test]
    async fn maybe_remove_task_checks_the_consumer_index() {
        let (d, _clock) = dispatcher();
        let dataset_id = register(&d, &tfdata_dataset::Dataset::range(3).repeat(None), -1).await;
        d.worker_heartbeat(wire::WorkerHeartbeatRequest {
            worker_address: "w:1".into(),
            tfdata_runs_pipelines: true,
            ..Default::default()
        })
        .await
        .unwrap();
        let job_id = d
            .get_or_create_job(wire::GetOrCreateJobRequest {
                dataset_id,
                processing_mode_def: Some(wire::ProcessingModeDef { sharding_policy: 0 }),
                job_name: Some("coordinated".into()),
                num_consumers: Some(2),
                ..Default::default()
            })
            .await
            .unwrap()
            .job_id;
        d.get_or_create_iteration(wire::GetOrCreateIterationRequest {
            job_id,
            repetition: 0,
        })
        .await
        .unwrap();
        let heartbeat = d
            .worker_heartbeat(wire::WorkerHeartbeatRequest {
                worker_address: "w:1".into(),
                tfdata_runs_pipelines: true,
                ..Default::default()
            })
            .await
            .unwrap();
        let task_id = heartbeat
            .new_tasks
            .first()
            .expect("a task for the worker")
            .task_id;
        for bad in [2, 5, -1] {
            let err = d
                .maybe_remove_task(wire::MaybeRemoveTaskRequest {
                    task_id,
                    consumer_index: bad,
                    round: 3,
                })
                .await
                .unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument, "{bad}: {err}");
        }
        assert!(d.snapshot_state().await.task(TaskId(task_id)).is_some());
    }

    #[tokio::test]
    async fn job_options_must_match_a_shared_job() {
        let (d, _clock) = dispatcher();
        iteration_with_client(&d).await;
        let named = |policy: i32, target: i32| wire::GetOrCreateJobRequest {
            dataset_id: "1000".into(),
            processing_mode_def: Some(wire::ProcessingModeDef {
                sharding_policy: policy,
            }),
            job_name: Some("shared".into()),
            target_workers: target,
            ..Default::default()
        };
        let id = d.get_or_create_job(named(0, 0)).await.unwrap().job_id;
        assert_eq!(
            d.get_or_create_job(named(0, 1)).await.unwrap().job_id,
            id,
            "UNSPECIFIED = AUTO"
        );
        let err = d
            .get_or_create_job(named(0, 2))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("target_workers"), "{err}");
        let err = d
            .get_or_create_job(named(1, 1))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("processing_mode_def"), "{err}");
        let err = d.get_or_create_job(named(9, 1)).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::Internal);
    }

    #[tokio::test]
    async fn workers_outside_worker_addresses_are_refused() {
        let clock = Arc::new(ManualClock(AtomicI64::new(0)));
        let config = DispatcherConfig {
            worker_addresses: vec!["good:1".into(), "other:%port%".into()],
            ..Default::default()
        };
        let d = Dispatcher::new(config, clock).unwrap();
        let beat = |addr: &str| wire::WorkerHeartbeatRequest {
            worker_address: addr.into(),
            ..Default::default()
        };
        d.worker_heartbeat(beat("good:1")).await.unwrap();
        d.worker_heartbeat(beat("other:7777")).await.unwrap();
        // The placeholder entry is bound to other:7777 now.
        assert!(d.worker_heartbeat(beat("other:8888")).await.is_err());
        let err = d.worker_heartbeat(beat("bad:1")).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::FailedPrecondition);
        assert!(err.to_string().contains("bad:1"));
    }
}

#[cfg(test)]
mod split_tests {
    use std::sync::atomic::{AtomicI64, Ordering};

    use super::*;

    use super::tests::{ManualClock as FixedClock, iteration_of_range};

    /// A distributed_epoch iteration over `range(5)`; returns its id.
    async fn dynamic_iteration(d: &Dispatcher) -> i64 {
        iteration_of_range(d, 5, 1).await;
        IterationId::FIRST
    }

    fn value(r: &wire::GetSplitResponse) -> Option<i64> {
        r.split.as_ref().map(|t| {
            tfdata_core::element::tensor_from_proto(t)
                .unwrap()
                .to_scalar::<i64>()
                .unwrap()
        })
    }

    /// A split journaled but never delivered is delivered on the retry, even
    /// across a restart from the journal: none lost, none duplicated.
    #[tokio::test]
    async fn a_retried_get_split_gets_the_same_split_even_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let config = DispatcherConfig {
            work_dir: Some(dir.path().display().to_string()),
            fault_tolerant_mode: true,
            ..Default::default()
        };
        let clock = Arc::new(FixedClock(AtomicI64::new(1)));
        let d = Dispatcher::new(config.clone(), clock.clone()).unwrap();
        let iteration = dynamic_iteration(&d).await;
        let ask = |seq: i64, worker: &str| wire::GetSplitRequest {
            iteration_id: iteration,
            repetition: 0,
            split_provider_index: 0,
            tfdata_worker_address: worker.into(),
            tfdata_split_sequence: Some(seq),
            ..Default::default()
        };
        assert_eq!(value(&d.get_split(ask(0, "w1")).await.unwrap()), Some(0));
        assert_eq!(value(&d.get_split(ask(1, "w1")).await.unwrap()), Some(1));
        // The answer to seq 1 was "lost": the retry gets split 1 again.
        assert_eq!(value(&d.get_split(ask(1, "w1")).await.unwrap()), Some(1));
        assert_eq!(value(&d.get_split(ask(0, "w2")).await.unwrap()), Some(2));
        drop(d);

        let d = Dispatcher::new(config, clock).unwrap();
        assert_eq!(
            value(&d.get_split(ask(0, "w2")).await.unwrap()),
            Some(2),
            "retry after restart"
        );
        assert_eq!(value(&d.get_split(ask(2, "w1")).await.unwrap()), Some(3));
        assert_eq!(value(&d.get_split(ask(1, "w2")).await.unwrap()), Some(4));
        let end = d.get_split(ask(3, "w1")).await.unwrap();
        assert!(end.end_of_splits);
        // TensorFlow workers (no sequence) get plain cursor semantics.
        let tf = wire::GetSplitRequest {
            iteration_id: iteration,
            repetition: 1,
            split_provider_index: 0,
            ..Default::default()
        };
        assert_eq!(value(&d.get_split(tf).await.unwrap()), Some(0));
    }

    /// A worker silent for worker_timeout is lost: its task leaves the
    /// iteration and the split it held goes to the next worker that asks.
    #[tokio::test]
    async fn a_lost_workers_undelivered_splits_are_handed_out_again() {
        let clock = Arc::new(FixedClock(AtomicI64::new(1_000_000)));
        let config = DispatcherConfig {
            worker_timeout: Duration::from_secs(1),
            ..Default::default()
        };
        let d = Dispatcher::new(config, clock.clone()).unwrap();
        let heartbeat = |w: &'static str, uid: i64| wire::WorkerHeartbeatRequest {
            worker_address: w.into(),
            tfdata_runs_pipelines: true,
            worker_uid: uid,
            ..Default::default()
        };
        for w in ["w1:1", "w2:1"] {
            d.worker_heartbeat(heartbeat(w, 7)).await.unwrap();
        }
        let iteration = dynamic_iteration(&d).await; // range(5)
        let task_of = |state: &DispatcherState, w: &str| {
            state
                .tasks_for_worker(w)
                .find(|t| t.iteration_id == IterationId(iteration))
                .map(|t| t.id.0)
                .unwrap()
        };
        let state = d.snapshot_state().await;
        let (t1, t2) = (task_of(&state, "w1:1"), task_of(&state, "w2:1"));
        let ask = |seq: i64, worker: &str, task: i64, delivered: &[i64]| wire::GetSplitRequest {
            iteration_id: iteration,
            repetition: 0,
            split_provider_index: 0,
            tfdata_worker_address: worker.into(),
            tfdata_split_sequence: Some(seq),
            tfdata_task_id: task,
            tfdata_delivered: delivered
                .iter()
                .map(|&sequence| wire::TfdataDeliveredSplit {
                    repetition: 0,
                    sequence,
                })
                .collect(),
        };
        // w1 gets splits 0, 1, 2 and reports the first delivered.
        for seq in 0..3 {
            let got = d.get_split(ask(seq, "w1:1", t1, &[])).await.unwrap();
            assert_eq!(value(&got), Some(seq));
        }
        let got = d.get_split(ask(3, "w1:1", t1, &[0])).await.unwrap();
        assert_eq!(value(&got), Some(3));
        // w2 gets split 4, then the end of splits: it will not ask again.
        assert_eq!(
            value(&d.get_split(ask(0, "w2:1", t2, &[])).await.unwrap()),
            Some(4)
        );
        assert_eq!(
            value(&d.get_split(ask(1, "w2:1", t2, &[0])).await.unwrap()),
            None
        );

        // w2 keeps heartbeating; w1 goes silent and is declared lost.
        clock.0.fetch_add(900_000, Ordering::SeqCst);
        d.worker_heartbeat(heartbeat("w2:1", 7)).await.unwrap();
        clock.0.fetch_add(900_000, Ordering::SeqCst);
        d.run_maintenance().await.unwrap();
        let state = d.snapshot_state().await;
        assert!(state.worker("w1:1").unwrap().lost);
        let it = state.iteration(IterationId(iteration)).unwrap();
        assert!(!it.finished, "splits 1, 2 and 3 are not delivered yet");
        // Nobody would ask for them, so w2 got a new task to produce them.
        let recovery: Vec<i64> = state
            .tasks_for_worker("w2:1")
            .filter(|t| t.id.0 != t2)
            .map(|t| t.id.0)
            .collect();
        assert_eq!(recovery.len(), 1, "{state:?}");
        let t3 = recovery[0];
        let mut got = Vec::new();
        for seq in 0.. {
            match value(&d.get_split(ask(seq, "w2:1", t3, &[])).await.unwrap()) {
                Some(v) => got.push(v),
                None => break,
            }
        }
        assert_eq!(got, vec![1, 2, 3], "undelivered splits only, in order");
        // The iteration ends when the tasks do.
        for task in [t2, t3] {
            d.worker_update(wire::WorkerUpdateRequest {
                worker_address: "w2:1".into(),
                updates: vec![wire::TaskProgress {
                    task_id: task,
                    completed: true,
                }],
            })
            .await
            .unwrap();
        }
        assert!(
            d.snapshot_state()
                .await
                .iteration(IterationId(iteration))
                .unwrap()
                .finished
        );

        // w1 returns: it is revived.
        d.worker_heartbeat(heartbeat("w1:1", 7)).await.unwrap();
        assert!(!d.snapshot_state().await.worker("w1:1").unwrap().lost);
    }

    #[tokio::test]
    async fn a_worker_restarted_at_the_same_address_loses_its_old_tasks() {
        let clock = Arc::new(FixedClock(AtomicI64::new(1_000_000)));
        let d = Dispatcher::new(DispatcherConfig::default(), clock).unwrap();
        let heartbeat = |uid: i64| wire::WorkerHeartbeatRequest {
            worker_address: "w1:1".into(),
            tfdata_runs_pipelines: true,
            worker_uid: uid,
            ..Default::default()
        };
        d.worker_heartbeat(heartbeat(11)).await.unwrap();
        let iteration = dynamic_iteration(&d).await;
        let old = d
            .snapshot_state()
            .await
            .tasks_for_worker("w1:1")
            .next()
            .unwrap()
            .id;
        let first_split_of = |task: i64| wire::GetSplitRequest {
            iteration_id: iteration,
            split_provider_index: 0,
            tfdata_worker_address: "w1:1".into(),
            tfdata_split_sequence: Some(0),
            tfdata_task_id: task,
            ..Default::default()
        };
        let got = d.get_split(first_split_of(old.0)).await.unwrap();
        assert_eq!(value(&got), Some(0));
        // Same uid: nothing happens. A new uid: a new process.
        let same = wire::WorkerHeartbeatRequest {
            current_tasks: vec![old.0],
            ..heartbeat(11)
        };
        assert!(d.worker_heartbeat(same).await.unwrap().new_tasks.is_empty());
        let r = d.worker_heartbeat(heartbeat(12)).await.unwrap();
        assert_eq!(r.new_tasks.len(), 1);
        assert_ne!(r.new_tasks[0].task_id, old.0);
        let state = d.snapshot_state().await;
        assert!(state.task(old).unwrap().finished);
        assert_eq!(state.worker("w1:1").unwrap().uid, 12);
        // Split 0 died with the old process: the new task gets it first.
        let got = d.get_split(first_split_of(r.new_tasks[0].task_id)).await;
        assert_eq!(value(&got.unwrap()), Some(0));
    }

    /// Compaction bounds replay: with a tiny bound the journal directory
    /// holds a snapshot and a short tail, and a restart rebuilds the same
    /// state (including split cursors and per-worker last splits).
    #[tokio::test]
    async fn compaction_keeps_the_state_and_bounds_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let config = DispatcherConfig {
            work_dir: Some(dir.path().display().to_string()),
            fault_tolerant_mode: true,
            ..Default::default()
        };
        let clock = Arc::new(FixedClock(AtomicI64::new(1)));
        let mut d = Dispatcher::new(config.clone(), clock.clone()).unwrap();
        d.compact_after_records = 4;
        let iteration = dynamic_iteration(&d).await;
        for seq in 0..5 {
            d.get_split(wire::GetSplitRequest {
                iteration_id: iteration,
                repetition: 0,
                split_provider_index: 0,
                tfdata_worker_address: "w".into(),
                tfdata_split_sequence: Some(seq),
                ..Default::default()
            })
            .await
            .unwrap();
        }
        let before = d.snapshot_state().await;
        assert_eq!(
            DispatcherState::from_snapshot(&before.to_snapshot()).unwrap(),
            before
        );
        drop(d);
        let journal_dir = dir.path().join(journal::JOURNAL_DIR);
        let files: Vec<String> = std::fs::read_dir(&journal_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            files.iter().any(|f| f.starts_with("snapshot_")),
            "{files:?}"
        );
        assert!(files.len() <= 3, "old files are deleted: {files:?}");
        let d = Dispatcher::new(config, clock).unwrap();
        assert_eq!(d.snapshot_state().await, before);
    }

    /// Property: for random sequences of operations (registrations, jobs of
    /// every sharding mode, iterations, splits and their retries, task
    /// completions, client releases, worker loss and revival, GC), replaying
    /// the journal — with or without a compaction in between — rebuilds
    /// exactly the state the live dispatcher had.
    #[tokio::test]
    async fn replaying_any_journal_gives_the_live_state() {
        use rand::{Rng, SeedableRng};
        let (mut saw_held, mut saw_returned) = (false, false);
        for seed in 0..8u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let dir = tempfile::tempdir().unwrap();
            let config = DispatcherConfig {
                work_dir: Some(dir.path().display().to_string()),
                fault_tolerant_mode: true,
                worker_timeout: Duration::from_secs(1),
                job_gc_timeout: Some(Duration::from_secs(1)),
                client_timeout: Duration::from_secs(1),
                ..Default::default()
            };
            let clock = Arc::new(FixedClock(AtomicI64::new(1)));
            let mut d = Dispatcher::new(config.clone(), clock.clone()).unwrap();
            d.compact_after_records = rng.random_range(5..200);
            let mut clients = Vec::new();
            let mut splits_seq: HashMap<(i64, String), i64> = HashMap::new();
            let workers = ["w0:1", "w1:1", "w2:1"];
            for _ in 0..rng.random_range(20..70) {
                match rng.random_range(0..9) {
                    0 | 1 => {
                        let policy = rng.random_range(0..2);
                        let client = iteration_of_range(&d, rng.random_range(1..20), policy).await;
                        clients.push(client);
                    }
                    2 | 3 => {
                        let w = workers[rng.random_range(0..workers.len())];
                        let current: Vec<i64> = d
                            .snapshot_state()
                            .await
                            .tasks_for_worker(w)
                            .map(|t| t.id.0)
                            .collect();
                        let r = d
                            .worker_heartbeat(wire::WorkerHeartbeatRequest {
                                worker_address: w.into(),
                                current_tasks: current,
                                tfdata_runs_pipelines: true,
                                // Now and then the worker process restarts.
                                worker_uid: 1 + i64::from(rng.random_bool(0.1)),
                                ..Default::default()
                            })
                            .await
                            .unwrap();
                        // Finish some of the worker's tasks.
                        for t in r.new_tasks.iter().filter(|_| rng.random_bool(0.3)) {
                            d.worker_update(wire::WorkerUpdateRequest {
                                worker_address: w.into(),
                                updates: vec![wire::TaskProgress {
                                    task_id: t.task_id,
                                    completed: true,
                                }],
                            })
                            .await
                            .unwrap();
                        }
                    }
                    4 | 5 => {
                        let state = d.snapshot_state().await;
                        let dynamic: Vec<i64> = state
                            .iterations()
                            .filter(|it| it.num_split_providers > 0)
                            .map(|it| it.id.0)
                            .collect();
                        if let Some(&iteration) =
                            dynamic.get(rng.random_range(0..dynamic.len().max(1)))
                        {
                            let w = workers[rng.random_range(0..workers.len())].to_string();
                            let task = state
                                .tasks_for_worker(&w)
                                .find(|t| t.iteration_id == IterationId(iteration))
                                .map_or(0, |t| t.id.0);
                            let seq = splits_seq.entry((iteration, w.clone())).or_insert(0);
                            let retry = rng.random_bool(0.2) && *seq > 0;
                            let asked = if retry { *seq - 1 } else { *seq };
                            // Report some earlier splits delivered.
                            let delivered = (0..rng.random_range(0..3))
                                .map(|_| wire::TfdataDeliveredSplit {
                                    repetition: 0,
                                    sequence: rng.random_range(0..asked.max(1)),
                                })
                                .collect();
                            let _ = d
                                .get_split(wire::GetSplitRequest {
                                    iteration_id: iteration,
                                    repetition: 0,
                                    split_provider_index: 0,
                                    tfdata_worker_address: w,
                                    tfdata_split_sequence: Some(asked),
                                    tfdata_task_id: task,
                                    tfdata_delivered: delivered,
                                })
                                .await;
                            if !retry {
                                *seq += 1;
                            }
                        }
                    }
                    6 => {
                        if !clients.is_empty() {
                            let c = clients.swap_remove(rng.random_range(0..clients.len()));
                            let _ = d
                                .release_iteration_client(wire::ReleaseIterationClientRequest {
                                    iteration_client_id: c,
                                })
                                .await;
                        }
                    }
                    7 => {
                        // Time passes: silent workers are lost, idle iterations collected.
                        clock.0.fetch_add(
                            rng.random_range(0..2_000_000),
                            std::sync::atomic::Ordering::SeqCst,
                        );
                        d.run_maintenance().await.unwrap();
                    }
                    _ => {
                        if let Some(&c) = clients.first() {
                            let _ = d
                                .client_heartbeat(wire::ClientHeartbeatRequest {
                                    iteration_client_id: c,
                                    ..Default::default()
                                })
                                .await;
                        }
                    }
                }
            }
            let live = d.snapshot_state().await;
            saw_held |= live.iterations().any(|it| !it.held_splits.is_empty());
            saw_returned |= live.iterations().any(|it| !it.returned_splits.is_empty());
            drop(d);
            let replayed = Dispatcher::new(config.clone(), clock.clone()).unwrap();
            let got = replayed.snapshot_state().await;
            // Snapshots first: their difference is readable.
            assert_eq!(
                got.to_snapshot(),
                live.to_snapshot(),
                "seed {seed}: first replay"
            );
            assert!(got == live, "seed {seed}: first replay");
            drop(replayed);
            // Again, from the compacted journal the restart left behind.
            let again = Dispatcher::new(config, clock).unwrap();
            assert_eq!(
                again.snapshot_state().await,
                live,
                "seed {seed}: replay after compaction"
            );
        }
        assert!(
            saw_held && saw_returned,
            "the histories exercise held and returned splits"
        );
    }
}
