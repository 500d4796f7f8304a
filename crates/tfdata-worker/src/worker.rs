//! The worker's logic: registration and heartbeats, the task table,
//! completion reports, and what `WorkerService`'s RPCs ask of it (spec §5.2,
//! §5.5; the tonic adapter is [`crate::grpc`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tfdata_client::DispatcherClient;
use tfdata_core::{Error, Result, TaskId};
use tfdata_proto::data as wire;
use tfdata_rpc::CancellationToken;
use tfdata_rpc::retry::retry;
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::config::WorkerConfig;
use crate::lane_task::LaneStreamSlots;
use crate::metrics::WorkerMetrics;
use crate::observe::Pace;
use crate::producer::BufferLimits;
use crate::snapshot::{ChunkPolicy, DispatcherEnv, SnapshotWriters, WriterEnv};
use crate::task::TaskRunner;
use crate::task_pipeline::PipelineLoader;
use crate::task_table::{Lookup, TaskTable};

/// Pause between attempts to report finished tasks (TensorFlow's 5 s).
const COMPLETION_RETRY: Duration = Duration::from_secs(5);

/// The longest a worker waits to tell the dispatcher it drains or stops.
const ANNOUNCE_TIMEOUT: Duration = Duration::from_secs(2);

pub struct Worker {
    config: WorkerConfig,
    address: String,
    dispatcher: DispatcherClient,
    tasks: TaskTable,
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
    /// Deterministic reads' lane streams running now, at most
    /// `max_lane_streams`.
    lane_streams: LaneStreamSlots,
    /// Autocache profiles of tasks asked for one, sent with heartbeats.
    autocache_profiles: crate::autocache::Profiles,
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
                address,
                dispatcher,
                tasks: TaskTable::default(),
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
                lane_streams: LaneStreamSlots::new(config.max_lane_streams),
                autocache_profiles: Default::default(),
                config,
            }),
            rx,
        ))
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    pub fn num_tasks(&self) -> usize {
        self.tasks.num_running()
    }

    /// This worker's metrics, gauges set from its tasks, in `format`.
    pub fn encode_metrics(&self, format: tfdata_rpc::metrics::Format) -> String {
        self.pace.encode(&self.running_tasks(), format)
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
        let tasks = self.running_tasks();
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
            current_tasks: current.clone(),
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
            tfdata_autocache_profiles: self.autocache_profiles.for_heartbeat(&current),
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
        self.tasks.running()
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
            if let Some(task) = self.tasks.delete(id) {
                // Readers still holding the task (a stream, a waiting
                // GetElement) see the end; its pipeline stops.
                task.cancel();
                self.pace.retire(&task);
                tracing::debug!(task = id.0, "task deleted by dispatcher");
            }
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
        let runner = self.tasks.insert_new(id, || {
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
            Arc::new(
                TaskRunner::with_limits(def, limits, self.config.cross_trainer_cache_size_bytes)
                    .in_worker(ledger, span),
            )
        });
        let Some(runner) = runner else {
            return;
        };
        let span = runner.span.clone();
        let worker = Arc::clone(self);
        tokio::spawn(
            async move {
                tracing::info!("task received");
                if let Some(lanes) = runner.lanes() {
                    // A deterministic read: nothing runs until a stream
                    // opens a lane.
                    match worker.pipeline_loader().load_lane_source(&runner).await {
                        Ok(source) => lanes.set_loaded(source),
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot load deterministic task");
                            lanes.set_failed(e);
                        }
                    }
                    return;
                }
                if runner.def.tfdata_autocache_profile {
                    // Before the pipeline starts, so the two do not share
                    // the CPU the profile measures.
                    let profile = worker.pipeline_loader().autocache_profile(&runner).await;
                    if !profile.error.is_empty() {
                        tracing::warn!(error = %profile.error, "autocache profiling failed; the task runs uncached");
                    } else {
                        tracing::info!(points = profile.points.len(), "autocache profile measured");
                    }
                    worker.autocache_profiles.insert(profile);
                    // The dispatcher decides at this heartbeat, not the next.
                    worker.news_for_dispatcher().notify_one();
                }
                match worker.pipeline_loader().load(&runner).await {
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

    /// What loading a task's pipeline needs of this worker.
    fn pipeline_loader(&self) -> PipelineLoader<'_> {
        PipelineLoader {
            dispatcher: &self.dispatcher,
            worker_address: &self.address,
            timeout: self.config.dispatcher_timeout,
            shutdown: &self.shutdown,
            get_split_duration: &self.metrics().get_split_duration,
        }
    }

    /// Deterministic reads' lane streams, and their bound.
    pub(crate) fn lane_streams(&self) -> &LaneStreamSlots {
        &self.lane_streams
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
        self.tasks
            .find(task_id)
            .ok_or_else(|| Error::Unavailable(format!("Task {task_id} not found")))
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
