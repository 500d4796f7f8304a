//! The worker's logic: registration and heartbeats, the task table,
//! completion reports, and the `WorkerService` RPCs (spec §5.2, §5.5).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tfdata_client::DispatcherClient;
use tfdata_core::{DatasetId, Error, IterationId, Result, TaskId};
use tfdata_dataset::autoshard::StaticPolicy;
use tfdata_proto::data::{
    self as wire, processing_mode_def::ShardingPolicy, task_def,
    worker_service_server::WorkerService,
};
use tfdata_rpc::CancellationToken;
use tfdata_rpc::retry::retry;
use tokio::sync::mpsc;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::config::WorkerConfig;
use crate::metrics::WorkerMetrics;
use crate::observe::Pace;
use crate::producer::BufferLimits;
use crate::snapshot::{ChunkPolicy, DispatcherEnv, SnapshotWriters, WriterEnv};
use crate::strategy::Next;
use crate::task::TaskRunner;

/// Pause between attempts to report finished tasks (TensorFlow's 5 s).
const COMPLETION_RETRY: Duration = Duration::from_secs(5);

/// The longest a worker waits to tell the dispatcher it drains or stops.
const ANNOUNCE_TIMEOUT: Duration = Duration::from_secs(2);

pub struct Worker {
    config: WorkerConfig,
    address: String,
    dispatcher: DispatcherClient,
    tasks: Mutex<HashMap<TaskId, Arc<TaskRunner>>>,
    /// Tasks the dispatcher deleted: `GetElement` answers end of sequence.
    finished_tasks: Mutex<HashSet<TaskId>>,
    registered: AtomicBool,
    /// Fired once registration succeeds, so readiness does not wait for its
    /// next tick (a probe right after registration would otherwise see 503).
    registration: tokio::sync::Notify,
    /// When the dispatcher last answered a heartbeat
    /// (`tfdata_rpc::metrics::monotonic_nanos`): readiness follows it.
    last_heartbeat_answered: AtomicU64,
    /// Metrics, and the pace figures heartbeats carry.
    pace: Pace,
    shutdown: CancellationToken,
    completions: mpsc::UnboundedSender<TaskId>,
    /// Random per worker (process): a dispatcher seeing a new uid at a known
    /// address knows the old worker's tasks, and the splits they held, are gone.
    uid: i64,
    /// Distributed-snapshot stream writers, as heartbeats assign them.
    snapshots: SnapshotWriters,
    /// How they reach the dispatcher; made on the runtime at the first
    /// heartbeat response.
    snapshot_env: std::sync::OnceLock<Arc<dyn WriterEnv>>,
    /// Cancelled when the worker starts draining (`crate::drain`).
    draining: CancellationToken,
    /// Woken when a task's drain state changes.
    drain_changed: Arc<tokio::sync::Notify>,
}

/// A random, non-zero worker uid.
fn new_worker_uid() -> i64 {
    use std::hash::BuildHasher;
    let h = std::collections::hash_map::RandomState::new()
        .hash_one((std::process::id(), std::time::SystemTime::now()));
    ((h >> 1) as i64) | 1
}

impl Worker {
    /// A worker advertising `address`, and the receiver of its task completions.
    pub fn new(
        config: WorkerConfig,
        address: String,
        shutdown: CancellationToken,
    ) -> Result<(Arc<Self>, mpsc::UnboundedReceiver<TaskId>)> {
        let dispatcher = DispatcherClient::with_security(
            &config.dispatcher_host_port()?,
            &config.security.client()?,
        )?;
        let (completions, rx) = mpsc::unbounded_channel();
        let metrics = Arc::new(WorkerMetrics::new());
        let snapshots = SnapshotWriters::new(
            ChunkPolicy {
                max_chunk_bytes: config.snapshot_max_chunk_size_bytes,
                commit_interval: config.snapshot_commit_interval,
                commits: metrics.snapshot.clone(),
            },
            shutdown.clone(),
        );
        Ok((
            Arc::new(Worker {
                config,
                address,
                dispatcher,
                tasks: Mutex::new(HashMap::new()),
                finished_tasks: Mutex::new(HashSet::new()),
                registered: AtomicBool::new(false),
                registration: tokio::sync::Notify::new(),
                last_heartbeat_answered: AtomicU64::new(0),
                pace: Pace::new(metrics),
                shutdown,
                completions,
                uid: new_worker_uid(),
                snapshots,
                snapshot_env: std::sync::OnceLock::new(),
                draining: CancellationToken::new(),
                drain_changed: Arc::new(tokio::sync::Notify::new()),
            }),
            rx,
        ))
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    pub fn num_tasks(&self) -> usize {
        lock(&self.tasks).len()
    }

    /// The tasks held now.
    fn task_list(&self) -> Vec<Arc<TaskRunner>> {
        lock(&self.tasks).values().cloned().collect()
    }

    /// This worker's metrics, gauges set from its tasks, in `format`.
    pub fn encode_metrics(&self, format: tfdata_rpc::metrics::Format) -> String {
        self.pace.encode(&self.task_list(), format)
    }

    pub fn metrics(&self) -> &Arc<WorkerMetrics> {
        &self.pace.metrics
    }

    /// Whether it has registered with the dispatcher.
    pub fn is_registered(&self) -> bool {
        self.registered.load(Ordering::SeqCst)
    }

    /// Waits until the worker has registered (at once if it has).
    pub async fn registered(&self) {
        // `notify_one` stores a permit, so a registration between the check
        // and the wait is not missed.
        while !self.is_registered() {
            self.registration.notified().await;
        }
    }

    /// How long since the dispatcher last answered a heartbeat.
    pub fn since_heartbeat_answered(&self) -> Duration {
        let last = self.last_heartbeat_answered.load(Ordering::SeqCst);
        Duration::from_nanos(tfdata_rpc::metrics::monotonic_nanos().saturating_sub(last))
    }

    pub(crate) fn heartbeat_answered(&self) {
        self.last_heartbeat_answered
            .store(tfdata_rpc::metrics::monotonic_nanos(), Ordering::SeqCst);
    }

    pub(crate) fn heartbeat_request(&self) -> wire::WorkerHeartbeatRequest {
        let tasks = self.task_list();
        let current: Vec<i64> = tasks.iter().map(|t| t.task_id().0).collect();
        wire::WorkerHeartbeatRequest {
            worker_address: self.address.clone(),
            transfer_servers: vec![wire::DataTransferServerInfo {
                protocol: "grpc".into(),
                address: self.address.clone(),
                ..Default::default()
            }],
            worker_tags: self.config.worker_tags.clone(),
            worker_uid: self.uid,
            active_tasks: self.pace.active_tasks(&tasks),
            current_tasks: current,
            snapshot_task_progress: self
                .snapshots
                .progress()
                .into_iter()
                .map(|p| {
                    let path = p
                        .snapshot_task
                        .as_ref()
                        .map(|t| t.base_path.clone())
                        .unwrap_or_default();
                    (path, p)
                })
                .collect(),
            tfdata_stopping: false,
            tfdata_runs_pipelines: true,
            tfdata_draining: self.draining.is_cancelled(),
            tfdata_stats: Some(self.pace.stats(&tasks)),
            // So a worker_timeout too short for it is raised, not obeyed.
            tfdata_heartbeat_interval_ms: i64::try_from(self.config.heartbeat_interval.as_millis())
                .unwrap_or(i64::MAX),
            // Set by the heartbeat loop (`crate::heartbeats`).
            tfdata_hold_ms: 0,
            tfdata_news_seen: 0,
        }
    }

    /// Starts draining: split providers take no new splits, and heartbeats
    /// (the first one now) tell the dispatcher to give this worker no new
    /// tasks.
    pub(crate) async fn start_draining(self: &Arc<Self>) {
        self.draining.cancel();
        let call = self.dispatcher.worker_heartbeat(self.heartbeat_request());
        match tokio::time::timeout(ANNOUNCE_TIMEOUT, call).await {
            Ok(Ok(response)) => self.apply_heartbeat_response(response),
            Ok(Err(e)) => {
                tracing::warn!(worker = %self.address, error = %e, "could not tell the dispatcher we are draining; the next heartbeat will")
            }
            Err(_) => {
                tracing::warn!(worker = %self.address, "timed out telling the dispatcher we are draining; the next heartbeat will")
            }
        }
    }

    /// The tasks running now.
    pub(crate) fn running_tasks(&self) -> Vec<Arc<TaskRunner>> {
        lock(&self.tasks).values().cloned().collect()
    }

    /// Woken whenever a task's drain state may have changed.
    pub(crate) fn drain_changed(&self) -> &tokio::sync::Notify {
        &self.drain_changed
    }

    /// Tells the dispatcher this worker is stopping, so its tasks leave their
    /// iterations at once instead of after worker_timeout. Best effort.
    pub async fn announce_stop(&self) {
        let mut request = self.heartbeat_request();
        request.tfdata_stopping = true;
        let call = self.dispatcher.worker_heartbeat(request);
        match tokio::time::timeout(ANNOUNCE_TIMEOUT, call).await {
            Ok(Ok(_)) => {
                tracing::debug!(worker = %self.address, "told the dispatcher we are stopping")
            }
            Ok(Err(e)) => {
                tracing::debug!(worker = %self.address, error = %e, "could not announce the stop")
            }
            Err(_) => tracing::debug!(worker = %self.address, "timed out announcing the stop"),
        }
    }

    /// Registers with the dispatcher, retrying transient failures until
    /// stopped (a worker may start before its dispatcher). A version mismatch
    /// or a refusal (e.g. not in `worker_addresses`) is fatal.
    pub async fn register(self: &Arc<Self>) -> Result<()> {
        let response = retry(&self.dispatcher.target(), None, &self.shutdown, || {
            self.dispatcher.worker_heartbeat(self.heartbeat_request())
        })
        .await?;
        self.apply_heartbeat_response(response);
        self.heartbeat_answered();
        self.registered.store(true, Ordering::SeqCst);
        self.registration.notify_one();
        tracing::info!(worker = %self.address, dispatcher = %self.dispatcher.address(), "registered with dispatcher");
        Ok(())
    }

    pub(crate) fn apply_heartbeat_response(
        self: &Arc<Self>,
        response: wire::WorkerHeartbeatResponse,
    ) {
        for id in response.tasks_to_delete.into_iter().map(TaskId) {
            if let Some(task) = lock(&self.tasks).remove(&id) {
                // Readers still holding the task (a stream, a waiting
                // GetElement) see the end; its pipeline stops.
                task.cancel();
                self.pace.retire(&task);
                tracing::debug!(task = id.0, "task deleted by dispatcher");
            }
            lock(&self.finished_tasks).insert(id);
        }
        for def in response.new_tasks {
            self.start_task(def);
        }
        let env = self.snapshot_env.get_or_init(|| {
            Arc::new(DispatcherEnv {
                dispatcher: self.dispatcher.clone(),
                runtime: tokio::runtime::Handle::current(),
                worker_address: self.address.clone(),
                timeout: self.config.dispatcher_timeout,
            })
        });
        self.snapshots.update(&response.snapshot_tasks, env);
    }

    /// The snapshot stream writers' progress (`GetSnapshotTaskProgresses`).
    pub fn snapshot_progress(&self) -> Vec<wire::SnapshotTaskProgress> {
        self.snapshots.progress()
    }

    /// Reports finished tasks, retrying each until the dispatcher accepts it.
    /// A task the dispatcher no longer knows (it restarted without fault
    /// tolerance) is dropped with a warning instead of retried forever.
    pub async fn completion_loop(self: Arc<Self>, mut rx: mpsc::UnboundedReceiver<TaskId>) {
        let mut pending: Vec<TaskId> = Vec::new();
        loop {
            if pending.is_empty() {
                tokio::select! {
                    id = rx.recv() => match id {
                        Some(id) => pending.push(id),
                        None => return,
                    },
                    () = self.shutdown.cancelled() => return,
                }
            }
            while let Ok(id) = rx.try_recv() {
                pending.push(id);
            }
            let mut still_pending = Vec::new();
            for id in pending.drain(..) {
                let request = wire::WorkerUpdateRequest {
                    worker_address: self.address.clone(),
                    updates: vec![wire::TaskProgress {
                        task_id: id.0,
                        completed: true,
                    }],
                };
                match self.dispatcher.worker_update(request).await {
                    Ok(_) => {}
                    Err(e) if e.code() == tonic::Code::NotFound => {
                        tracing::warn!(task = id.0, error = %e, "dispatcher does not know a finished task; dropping its completion report");
                    }
                    Err(e) => {
                        tracing::warn!(task = id.0, error = %e, "failed to report task completion; will retry");
                        still_pending.push(id);
                    }
                }
            }
            pending = still_pending;
            if !pending.is_empty() {
                tokio::select! {
                    () = tokio::time::sleep(COMPLETION_RETRY) => {}
                    () = self.shutdown.cancelled() => return,
                }
            }
        }
    }

    /// Starts a task unless it is already known (`ProcessTask` and heartbeats
    /// may both deliver it).
    pub fn start_task(self: &Arc<Self>, def: wire::TaskDef) {
        let id = TaskId(def.task_id);
        let runner = {
            let mut tasks = lock(&self.tasks);
            if tasks.contains_key(&id) || lock(&self.finished_tasks).contains(&id) {
                return;
            }
            let limits = BufferLimits {
                elements: self.config.task_buffer_elements,
                max_elements: self.config.task_buffer_max_elements,
                // Validated to fit a usize.
                bytes: usize::try_from(self.config.task_buffer_bytes).unwrap_or(usize::MAX),
            };
            let span = task_span(&def, &self.address);
            let ledger = Arc::new(crate::splits::SplitLedger::new(
                self.draining.clone(),
                Arc::clone(&self.drain_changed),
            ));
            let runner = Arc::new(
                TaskRunner::with_limits(def, limits, self.config.cross_trainer_cache_size_bytes)
                    .in_worker(ledger, span),
            );
            tasks.insert(id, Arc::clone(&runner));
            runner
        };
        let span = runner.span.clone();
        let worker = Arc::clone(self);
        tokio::spawn(
            async move {
                tracing::info!("task received");
                match worker.load_pipeline(&runner).await {
                    Ok((dataset, ctx, form)) => runner.run_pipeline(dataset, ctx, form),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot start task");
                        runner.fail(e);
                    }
                }
            }
            .instrument(span),
        );
    }

    /// Checks a task definition and loads its pipeline.
    async fn load_pipeline(
        &self,
        runner: &TaskRunner,
    ) -> Result<(
        tfdata_dataset::Dataset,
        tfdata_dataset::IterContext,
        crate::pipeline::ServedForm,
    )> {
        let def = &runner.def;
        if def.worker_address != self.address {
            return Err(Error::Internal(format!(
                "task {} is for worker {:?} but this worker is {:?}",
                def.task_id, def.worker_address, self.address
            )));
        }
        let policy = def
            .processing_mode_def
            .map_or(ShardingPolicy::Off as i32, |m| m.sharding_policy);
        let static_policy = match ShardingPolicy::try_from(policy) {
            Ok(ShardingPolicy::Off | ShardingPolicy::Dynamic) => None,
            Ok(ShardingPolicy::File) => Some(StaticPolicy::File),
            Ok(ShardingPolicy::Data) => Some(StaticPolicy::Data),
            Ok(ShardingPolicy::FileOrData) => Some(StaticPolicy::FileOrData),
            Ok(ShardingPolicy::Hint) => Some(StaticPolicy::Hint),
            Err(_) => {
                return Err(Error::InvalidArgument(format!(
                    "task {}: unknown sharding policy {policy}",
                    def.task_id
                )));
            }
        };

        let dataset_id = DatasetId(def.dataset_id.clone());
        let dataset_def = match &def.dataset {
            Some(task_def::Dataset::DatasetDef(d)) => d.clone(),
            Some(task_def::Dataset::Path(path)) => {
                // A local path or an object-store URL (an object-store
                // work_dir); blocking I/O either way.
                let path = path.clone();
                let read = tokio::task::spawn_blocking(move || read_dataset_file(&path))
                    .await
                    .map_err(|e| Error::Internal(format!("dataset read failed: {e}")))?;
                match read {
                    Ok(d) => d,
                    // The file may be on a disk this worker cannot see.
                    Err(e) => {
                        tracing::debug!(error = %e, "reading the dataset file failed; asking the dispatcher");
                        self.fetch_dataset_def(&dataset_id).await?
                    }
                }
            }
            None => self.fetch_dataset_def(&dataset_id).await?,
        };
        // Translating a TensorFlow graph compiles its functions and may
        // glob files: not on an RPC thread.
        let (num_workers, shard_index) = (def.num_workers, def.worker_index);
        let (dataset, mut form) = tokio::task::spawn_blocking(move || {
            crate::pipeline::build_dataset(&dataset_def, static_policy, num_workers, shard_index)
        })
        .await
        .map_err(|e| Error::Internal(format!("building the pipeline failed: {e}")))??;
        if (def.num_consumers.is_some() || def.use_cross_trainer_cache)
            && dataset.cardinality() >= 0
        {
            return Err(Error::FailedPrecondition(format!(
                "coordinated reads and cross-trainer caches need an infinite dataset, but dataset {} has {} elements; \
                 add .repeat() at the end",
                def.dataset_id,
                dataset.cardinality()
            )));
        }
        let mut ctx = tfdata_dataset::IterContext::new();
        if policy == ShardingPolicy::Dynamic as i32 {
            let sources = dataset.sources();
            if sources.len() as i64 != def.num_split_providers {
                return Err(Error::FailedPrecondition(format!(
                    "task {}: the dataset has {} sources but the dispatcher has {} split providers",
                    def.task_id,
                    sources.len(),
                    def.num_split_providers
                )));
            }
            for (split_provider_index, source) in sources.iter().enumerate() {
                let provider = Arc::new(crate::splits::RemoteSplitProvider {
                    dispatcher: self.dispatcher.clone(),
                    runtime: tokio::runtime::Handle::current(),
                    iteration_id: IterationId(def.iteration_id),
                    split_provider_index: split_provider_index as i64,
                    repetition: Default::default(),
                    received: Default::default(),
                    worker_address: self.address.clone(),
                    timeout: self.config.dispatcher_timeout,
                    cancel: self.shutdown.clone(),
                    task_id: TaskId(def.task_id),
                    delivered: Default::default(),
                    ledger: Arc::clone(&runner.ledger),
                    exhausted: Default::default(),
                    get_split_duration: self.metrics().get_split_duration.clone(),
                    leases: Default::default(),
                });
                runner.ledger.add_provider(Arc::clone(&provider));
                ctx.split_providers.insert(source.op_key(), provider);
            }
        }
        form.compress = form.compress && !self.compression_disabled(&dataset_id).await?;
        Ok((dataset, ctx, form))
    }

    /// Whether the dispatcher recorded that compression is off at runtime for
    /// this dataset (the first proposal wins; ours is "keep it").
    async fn compression_disabled(&self, dataset_id: &DatasetId) -> Result<bool> {
        use wire::disable_compression_at_runtime_response::Decision;
        let request = wire::DisableCompressionAtRuntimeRequest {
            dataset_id: dataset_id.0.clone(),
            disable_compression_at_runtime: false,
        };
        let response = retry(
            &self.dispatcher.target(),
            Some(self.config.dispatcher_timeout),
            &self.shutdown,
            || {
                self.dispatcher
                    .disable_compression_at_runtime(request.clone())
            },
        )
        .await?;
        Ok(matches!(
            response.decision,
            Some(Decision::CompressionDisabledAtRuntime(true))
        ))
    }

    async fn fetch_dataset_def(&self, dataset_id: &DatasetId) -> Result<wire::DatasetDef> {
        let request = wire::GetDatasetDefRequest {
            dataset_id: dataset_id.0.clone(),
        };
        let response = retry(
            &self.dispatcher.target(),
            Some(self.config.dispatcher_timeout),
            &self.shutdown,
            || self.dispatcher.get_dataset_def(request.clone()),
        )
        .await?;
        response.dataset_def.ok_or_else(|| {
            Error::Internal(format!(
                "dispatcher returned no definition for dataset {dataset_id}"
            ))
        })
    }

    pub(crate) fn config(&self) -> &WorkerConfig {
        &self.config
    }

    pub(crate) fn shutdown_token(&self) -> &CancellationToken {
        &self.shutdown
    }

    pub(crate) fn dispatcher(&self) -> &DispatcherClient {
        &self.dispatcher
    }

    /// Notified when the worker has news for the dispatcher (a snapshot
    /// stream writer ended): the next heartbeat goes at once.
    pub(crate) fn news_for_dispatcher(&self) -> &tokio::sync::Notify {
        self.snapshots.writer_ended()
    }

    /// Tells the dispatcher (in the background) that a task reached its end.
    pub(crate) fn report_completion(&self, task_id: TaskId) {
        let _ = self.completions.send(task_id);
    }

    /// The task a reader asks for, with `GetElement`'s answers for a worker
    /// that is stopping, not registered yet, or does not know the task.
    pub(crate) fn lookup_task(&self, task_id: TaskId) -> Result<Lookup> {
        if self.shutdown.is_cancelled() {
            return Err(Error::Cancelled("Worker is shutting down".into()));
        }
        if !self.registered.load(Ordering::SeqCst) {
            return Err(Error::Unavailable(
                "Worker has not yet registered with dispatcher.".into(),
            ));
        }
        if let Some(task) = lock(&self.tasks).get(&task_id).cloned() {
            return Ok(Lookup::Task(task));
        }
        if lock(&self.finished_tasks).contains(&task_id) {
            return Ok(Lookup::Finished);
        }
        Err(Error::Unavailable(format!("Task {task_id} not found")))
    }

    async fn get_element(&self, req: wire::GetElementRequest) -> Result<wire::GetElementResponse> {
        let coordinated = match (req.consumer_index, req.round_index) {
            (Some(c), Some(r)) => Some((c, r)),
            (None, None) => None,
            _ => {
                return Err(Error::InvalidArgument(
                    "a coordinated read needs both consumer_index and round_index".into(),
                ));
            }
        };
        let task_id = TaskId(req.task_id);
        let task = match self.lookup_task(task_id)? {
            Lookup::Task(task) => task,
            Lookup::Finished => return Ok(end_of_sequence()),
        };
        let next = tokio::select! {
            next = async {
                match coordinated {
                    Some((consumer, round)) => task.next_for_round(consumer, round, req.allow_skip).await,
                    None if task.def.use_cross_trainer_cache => task.next_for_trainer(&req.trainer_id).await,
                    None => task.next(req.allow_skip).await,
                }
            } => next?,
            () = self.shutdown.cancelled() => return Err(Error::Cancelled("Worker is shutting down".into())),
        };
        Ok(match next {
            Next::Element { payload, index } => {
                let response = wire::GetElementResponse {
                    element: Some(payload),
                    element_index: index,
                    end_of_sequence: false,
                    skip_task: false,
                    // A round's element: its index in the task's sequence,
                    // which coordinated readers' checkpoints count by.
                    tfdata_element_index: coordinated.map(|_| index),
                };
                let sent = &self.metrics().get_element;
                sent.elements.inc();
                sent.bytes
                    .inc_by(prost::Message::encoded_len(&response) as u64);
                response
            }
            Next::Skip => wire::GetElementResponse {
                skip_task: true,
                ..Default::default()
            },
            Next::EndOfSequence { first } => {
                if first && task.data_ended() {
                    self.report_completion(task_id);
                }
                end_of_sequence()
            }
        })
    }
}

/// The span a task's logs carry: its ids, and the worker's address.
fn task_span(def: &wire::TaskDef, worker: &str) -> tracing::Span {
    let span = tracing::info_span!(
        "task",
        task = def.task_id,
        iteration = def.iteration_id,
        job = tracing::field::Empty,
        dataset = %def.dataset_id,
        worker,
    );
    // Not sent by TensorFlow's dispatcher.
    if def.tfdata_job_id != 0 {
        span.record("job", def.tfdata_job_id);
    }
    span
}

/// A task as readers find it.
pub(crate) enum Lookup {
    Task(Arc<TaskRunner>),
    /// Deleted by the dispatcher: its readers get the end of sequence.
    Finished,
}

fn end_of_sequence() -> wire::GetElementResponse {
    wire::GetElementResponse {
        end_of_sequence: true,
        ..Default::default()
    }
}

/// Reads a dataset file the dispatcher wrote (`<work_dir>/datasets/<id>`):
/// a local path, a `file://` URL or an object-store URL, through the io
/// layer (whose object-store client is configured from this process's
/// environment). Exactly one complete TFRecord holding a `DatasetDef`.
fn read_dataset_file(path: &str) -> Result<wire::DatasetDef> {
    use prost::Message;
    use tfdata_core::tfrecord::{self, Tail};
    let bytes = tfdata_dataset::io::read_all(path)?;
    let records = match tfrecord::read_records(path, &bytes)? {
        (records, Tail::Clean) => records,
        (_, Tail::Torn { offset }) => {
            return Err(Error::DataLoss {
                location: format!("{path} at offset {offset}"),
                reason: "record truncated".into(),
            });
        }
    };
    let [record] = records.as_slice() else {
        return Err(Error::DataLoss {
            location: path.to_string(),
            reason: format!("expected one record, found {}", records.len()),
        });
    };
    wire::DatasetDef::decode(record.clone()).map_err(|e| Error::DataLoss {
        location: path.to_string(),
        reason: format!("not a DatasetDef: {e}"),
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The tonic adapter around [`Worker`].
#[derive(Clone)]
pub struct WorkerGrpc(pub Arc<Worker>);

#[tonic::async_trait]
impl WorkerService for WorkerGrpc {
    async fn process_task(
        &self,
        r: Request<wire::ProcessTaskRequest>,
    ) -> Result<Response<wire::ProcessTaskResponse>, Status> {
        let Some(task) = r.into_inner().task else {
            return Err(Error::InvalidArgument("ProcessTask without a task".into()).into());
        };
        self.0.start_task(task);
        Ok(Response::new(wire::ProcessTaskResponse {}))
    }

    async fn get_element(
        &self,
        r: Request<wire::GetElementRequest>,
    ) -> Result<Response<wire::GetElementResponse>, Status> {
        match self.0.get_element(r.into_inner()).await {
            Ok(resp) => Ok(Response::new(resp)),
            Err(e) => {
                tracing::debug!(error = %e, "GetElement failed");
                Err(e.into())
            }
        }
    }

    async fn get_worker_tasks(
        &self,
        _r: Request<wire::GetWorkerTasksRequest>,
    ) -> Result<Response<wire::GetWorkerTasksResponse>, Status> {
        let tasks = lock(&self.0.tasks)
            .values()
            .map(|t| wire::TaskInfo {
                worker_address: self.0.address.clone(),
                task_id: t.def.task_id,
                iteration_id: t.def.iteration_id,
                ..Default::default()
            })
            .collect();
        Ok(Response::new(wire::GetWorkerTasksResponse { tasks }))
    }

    async fn get_snapshot_task_progresses(
        &self,
        _r: Request<wire::GetSnapshotTaskProgressesRequest>,
    ) -> Result<Response<wire::GetSnapshotTaskProgressesResponse>, Status> {
        Ok(Response::new(wire::GetSnapshotTaskProgressesResponse {
            snapshot_task_progresses: self.0.snapshot_progress(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn dataset_files_read_from_paths_and_urls() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1000");
        let def = wire::DatasetDef {
            graph: bytes::Bytes::from_static(b"\x0a\x03abc"),
            tfdata_pipeline: None,
        };
        let mut buf = Vec::new();
        tfdata_core::tfrecord::write_record(&mut buf, &def.encode_to_vec()).unwrap();
        std::fs::write(&path, &buf).unwrap();
        let local = path.to_str().unwrap();
        assert_eq!(read_dataset_file(local).unwrap(), def);
        assert_eq!(read_dataset_file(&format!("file://{local}")).unwrap(), def);

        // Truncated: an error naming the file, never a panic.
        std::fs::write(&path, &buf[..buf.len() - 2]).unwrap();
        let err = read_dataset_file(local).unwrap_err();
        assert!(matches!(err, Error::DataLoss { .. }), "{err}");
        assert!(err.to_string().contains(local), "{err}");
        let missing = format!("{}/missing", dir.path().display());
        let err = read_dataset_file(&missing).unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{err}");
        let err = read_dataset_file("hdfs://namenode/x").unwrap_err();
        assert!(err.to_string().contains("hdfs"), "{err}");
    }
}
