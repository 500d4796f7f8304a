//! Jobs and iterations: `GetOrCreateJob`, `GetOrCreateIteration`, and the
//! first tasks of a new iteration, pushed to their workers after the
//! transaction (`ProcessTask`).
//!
//! Split providers (for distributed_epoch) are built before the state lock
//! is taken; a concurrent caller that created the same job or iteration
//! meanwhile wins, and the providers built here are dropped.

use std::collections::BTreeMap;
use std::num::NonZeroI64;
use std::time::Duration;

use tfdata_core::ranges::IndexRanges;
use tfdata_core::{DatasetId, Error, JobId, Result};
use tfdata_proto::data::{
    self as wire, processing_mode_def::ShardingPolicy, update::UpdateType,
    worker_service_client::WorkerServiceClient,
};
use tfdata_rpc::security::RpcChannel;

use super::Dispatcher;
use super::errors::unknown_dataset;
use super::requests::{GetOrCreateIteration, GetOrCreateJob, Restore};
use super::workers::new_task_update;
use crate::state::{DispatcherState, Job, Repetition, WorkerAddress};

/// How long the dispatcher waits for a worker to accept a `ProcessTask`.
/// Heartbeats deliver the task anyway if this push fails.
const PROCESS_TASK_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest chain of restorations a checkpoint is followed through (see
/// `find_restoration`): each restore of a shared job adds one.
const MAX_RESTORATION_CHAIN: usize = 10_000;

impl Dispatcher {
    pub(crate) async fn get_or_create_job(
        &self,
        req: GetOrCreateJob,
    ) -> Result<wire::GetOrCreateJobResponse> {
        let wanted = JobParameters {
            mode: req.mode,
            use_cross_trainer_cache: req.use_cross_trainer_cache,
            target_workers: req.target_workers,
        };
        // An existing job of that name is the answer (if its parameters match).
        let dataset_id = &req.dataset_id;
        let existing = self
            .ledger
            .read(|g| existing_job(&g.state, dataset_id, req.job_name.as_deref(), &wanted))
            .await??;
        if let Some(job_id) = existing {
            return Ok(wire::GetOrCreateJobResponse { job_id: job_id.0 });
        }
        // Autocache: the job may read a cache instead (a dataset of its
        // own), or profile the pipeline (`super::autocache`).
        let autocache = self.autocache_job(dataset_id, &req.mode).await;
        let asked_for = dataset_id;
        let dataset_id = autocache.serve.as_ref().unwrap_or(asked_for);
        // A job no registered worker can serve fails now, not as a read
        // that waits forever.
        let deterministic = req.mode.tfdata_deterministic.is_some();
        self.ledger
            .read(|g| check_workers_can_run(&g.state, dataset_id, deterministic))
            .await??;
        // Reads that need an infinite dataset are refused here, where every
        // consumer asks for the job, not by a worker to one reader later.
        if req.num_consumers.is_some() || req.use_cross_trainer_cache {
            let cardinality = self.dataset_cardinality(dataset_id).await?;
            refuse_finite(&req, cardinality)?;
        }
        // Capabilities not built yet fail here, clearly, before any state changes.
        let policy = req.policy;
        if policy == ShardingPolicy::Dynamic {
            // Checks that the dataset's sources can be split (outside the lock).
            self.new_split_providers(dataset_id).await?;
        }
        let is_static = !matches!(policy, ShardingPolicy::Off | ShardingPolicy::Dynamic);
        if is_static && self.config.worker_addresses.is_empty() {
            return Err(Error::FailedPrecondition(format!(
                "static sharding policy {policy:?} requires the dispatcher's worker_addresses to be set"
            )));
        }
        let mut txn = self.ledger.begin().await;
        // Someone may have created it while the providers were built.
        if let Some(job_id) = existing_job(&txn.state, asked_for, req.job_name.as_deref(), &wanted)?
        {
            txn.commit().await?;
            return Ok(wire::GetOrCreateJobResponse { job_id: job_id.0 });
        }
        let job_id = txn.state.next_job_id();
        let name = match req.job_name {
            Some(name) => name,
            None => format!("anonymous_job_{}_{}", job_id.0, rand::random::<u64>()),
        };
        txn.apply(UpdateType::CreateJob(wire::CreateJobUpdate {
            job_id: job_id.0,
            job_name: name.clone(),
            dataset_id: dataset_id.0.clone(),
            processing_mode_def: Some(req.mode),
            num_consumers: req.num_consumers.map(NonZeroI64::get),
            target_workers: req.target_workers,
            use_cross_trainer_cache: req.use_cross_trainer_cache,
        }))?;
        txn.commit().await?;
        tracing::info!(job = %job_id, name = %name, dataset = %dataset_id, "job created");
        self.autocache_job_created(asked_for, job_id, autocache);
        Ok(wire::GetOrCreateJobResponse { job_id: job_id.0 })
    }

    pub(crate) async fn get_or_create_iteration(
        &self,
        mut req: GetOrCreateIteration,
    ) -> Result<wire::GetOrCreateIterationResponse> {
        let job = self
            .ledger
            .read(|g| g.state.job(req.job_id).cloned())
            .await?
            .ok_or_else(|| Error::not_found("job", req.job_id.0))?;
        if job.deterministic().is_some() {
            refuse_split_restores(&job, &req)?;
        }
        if let Some(restore) = req.restore.take() {
            return self.restore_iteration(job, req, restore).await;
        }
        let exists = self
            .ledger
            .read(|g| {
                g.state
                    .iteration_by_key(&job.name, Repetition(req.repetition))
                    .is_some()
            })
            .await?;
        // A new distributed_epoch iteration needs providers: built outside the lock.
        let providers = if !exists && job.sharding_policy() == Some(ShardingPolicy::Dynamic) {
            self.new_split_providers(&job.dataset_id).await?
        } else {
            Vec::new()
        };
        check_consumed(&req, exists, providers.len())?;
        let mut txn = self.ledger.begin().await;
        let mut new_task_defs = Vec::new();
        let iteration_id = match txn
            .state
            .iteration_by_key(&job.name, Repetition(req.repetition))
        {
            Some(it) => it.id,
            None => {
                let id = txn.state.next_iteration_id();
                txn.apply(UpdateType::CreateIteration(wire::CreateIterationUpdate {
                    iteration_id: id.0,
                    job_id: job.id.0,
                    repetition: req.repetition,
                    num_split_providers: providers.len() as i64,
                    tfdata_consumed: req.consumed.clone(),
                    tfdata_restore: None,
                    tfdata_consumed_pieces: req.consumed_pieces.clone(),
                }))?;
                // A deterministic read's lanes number their own splits:
                // its providers only counted them (the tasks say how many).
                if !providers.is_empty() && job.deterministic().is_none() {
                    txn.split_providers.insert(id, providers);
                }
                new_task_defs = self.start_tasks(&mut txn, id)?;
                tracing::info!(iteration = %id, job = %job.id, repetition = req.repetition, "iteration created");
                id
            }
        };
        self.acquire_client(txn, iteration_id, &req, new_task_defs)
            .await
    }

    /// A consumer of a shared job restored from its checkpoint joins the
    /// restoration of the iteration it was taken in: a new iteration, in a
    /// job of its own, that gets tasks only once every consumer of the
    /// origin iteration has joined with the splits it consumed, so nothing
    /// one of them consumed is handed out again.
    async fn restore_iteration(
        &self,
        job: Job,
        req: GetOrCreateIteration,
        restored: Restore,
    ) -> Result<wire::GetOrCreateIterationResponse> {
        // Providers for a new restoration, built outside the lock; dropped
        // if the consumer joins one that exists.
        let providers = if job.sharding_policy() == Some(ShardingPolicy::Dynamic) {
            self.new_split_providers(&job.dataset_id).await?
        } else {
            Vec::new()
        };
        check_consumed_ranges(&req.consumed, providers.len())?;
        check_consumed_pieces(&req.consumed_pieces, providers.len())?;
        let Restore {
            origin: mut restore,
            consumed_elements,
            elements,
        } = restored;
        let mut txn = self.ledger.begin().await;
        // The consumers that took checkpoints of the origin iteration, if
        // this dispatcher still knows it: a checkpoint taken before another
        // consumer joined does not count that one.
        restore.consumers = restore
            .consumers
            .max(known_checkpointers(&txn.state, &job, &restore));
        let (target, restore) = find_restoration(&txn.state, &job, restore)?;
        if let Some(n) = job.num_consumers {
            let joined = target
                .and_then(|id| txn.state.iteration(id))
                .filter(|it| {
                    it.restoration
                        .as_ref()
                        .is_some_and(|r| !r.joined.is_empty())
                })
                .map(|it| &it.consumed_elements);
            check_coordinated_restore(&job.name, n, &elements, joined)?;
        }
        let iteration_id = match target {
            Some(id) => id,
            None => {
                let job_id = txn.state.next_job_id();
                let name = restoration_job_name(&job.name, restore.origin_iteration_id);
                txn.apply(UpdateType::CreateJob(wire::CreateJobUpdate {
                    job_id: job_id.0,
                    job_name: name.clone(),
                    dataset_id: job.dataset_id.0.clone(),
                    processing_mode_def: Some(job.processing_mode),
                    num_consumers: job.num_consumers,
                    target_workers: job.target_workers,
                    use_cross_trainer_cache: job.use_cross_trainer_cache,
                }))?;
                let id = txn.state.next_iteration_id();
                txn.apply(UpdateType::CreateIteration(wire::CreateIterationUpdate {
                    iteration_id: id.0,
                    job_id: job_id.0,
                    repetition: 0,
                    num_split_providers: providers.len() as i64,
                    tfdata_consumed: Vec::new(),
                    tfdata_restore: Some(restore),
                    tfdata_consumed_pieces: Vec::new(),
                }))?;
                if !providers.is_empty() {
                    txn.split_providers.insert(id, providers);
                }
                tracing::info!(iteration = %id, job = %job_id, name = %name, origin = restore.origin_iteration_id, "restoration created");
                id
            }
        };
        txn.apply(UpdateType::TfdataJoinRestore(wire::JoinRestoreUpdate {
            iteration_id: iteration_id.0,
            origin_client_id: restore.origin_client_id,
            consumers: restore.consumers,
            consumed: req.consumed.clone(),
            consumed_elements,
            consumed_pieces: req.consumed_pieces.clone(),
            // `acquire_client` below takes this id.
            client_id: txn.state.next_client_id().0,
        }))?;
        let awaited = txn
            .state
            .iteration(iteration_id)
            .and_then(|it| it.restoration.as_ref())
            .map_or(0, |r| r.awaited());
        tracing::info!(iteration = %iteration_id, origin = restore.origin_iteration_id, consumer = restore.origin_client_id, awaited, "consumer restored");
        let new_task_defs = if awaited == 0 {
            self.start_tasks(&mut txn, iteration_id)?
        } else {
            Vec::new()
        };
        self.acquire_client(txn, iteration_id, &req, new_task_defs)
            .await
    }

    /// Tasks for `id` on every live worker that can run it.
    fn start_tasks(
        &self,
        txn: &mut super::txn::Txn<'_>,
        id: tfdata_core::IterationId,
    ) -> Result<Vec<wire::TaskDef>> {
        let workers: Vec<String> = txn
            .state
            .workers()
            .iter()
            // A draining worker is about to leave: no new tasks.
            .filter(|w| {
                !w.lost
                    && !txn.liveness.is_draining(&w.address)
                    && txn.state.can_run(&w.address, id)
            })
            .map(|w| w.address.to_string())
            .collect();
        let mut defs = Vec::new();
        for worker in workers {
            let update = new_task_update(&txn.state, id, &worker)?;
            let task_id = txn.state.next_task_id();
            txn.apply(update)?;
            let task = txn
                .state
                .task(task_id)
                .ok_or_else(|| Error::Internal("created task vanished".into()))?;
            defs.push(self.task_def(&txn.state, task)?);
        }
        Ok(defs)
    }

    /// A new client of `iteration_id`, committed; then the new tasks are
    /// pushed to their workers.
    async fn acquire_client(
        &self,
        mut txn: super::txn::Txn<'_>,
        iteration_id: tfdata_core::IterationId,
        req: &GetOrCreateIteration,
        new_task_defs: Vec<wire::TaskDef>,
    ) -> Result<wire::GetOrCreateIterationResponse> {
        let client_id = txn.state.next_client_id();
        txn.apply(UpdateType::AcquireIterationClient(
            wire::AcquireIterationClientUpdate {
                iteration_id: iteration_id.0,
                iteration_client_id: client_id.0,
                tfdata_reports_receipts: req.reports_receipts,
            },
        ))?;
        txn.liveness.client_acquired(client_id);
        txn.commit().await?;
        // Best effort: workers also learn their tasks from heartbeats.
        let pushes = new_task_defs.into_iter().map(|def| self.push_task(def));
        for result in futures::future::join_all(pushes).await {
            result?;
        }
        Ok(wire::GetOrCreateIterationResponse {
            iteration_client_id: client_id.0,
            tfdata_iteration_id: iteration_id.0,
        })
    }

    fn worker_client(&self, address: &str) -> Result<WorkerServiceClient<RpcChannel>> {
        let mut clients = self
            .worker_clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(c) = clients.get(address) {
            return Ok(c.clone());
        }
        let client = tfdata_rpc::channel::worker_client(tfdata_rpc::channel::channel(
            address,
            &self.client_security,
        )?);
        clients.insert(address.to_string(), client.clone());
        Ok(client)
    }

    /// Sends `ProcessTask`; transient failures are left to the heartbeat path.
    pub(super) async fn push_task(&self, task: wire::TaskDef) -> Result<()> {
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
}

/// What a named job must agree on to be shared.
struct JobParameters {
    mode: wire::ProcessingModeDef,
    use_cross_trainer_cache: bool,
    target_workers: i32,
}

/// The job named `name`, if there is one with the `wanted` parameters
/// (else an error listing the differences); also checks the dataset exists.
fn existing_job(
    state: &crate::state::DispatcherState,
    dataset_id: &DatasetId,
    name: Option<&str>,
    wanted: &JobParameters,
) -> Result<Option<JobId>> {
    if state.dataset(dataset_id).is_none() {
        return Err(unknown_dataset(&dataset_id.0));
    }
    let Some(job) = name.and_then(|name| state.job_by_name(name)) else {
        return Ok(None);
    };
    let diffs = differences(job, wanted);
    if !diffs.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "tried to create job with name {} but found an existing job with different parameters: {}",
            job.name,
            diffs.join("; ")
        )));
    }
    Ok(Some(job.id))
}

fn differences(job: &Job, wanted: &JobParameters) -> Vec<String> {
    let mut diffs = Vec::new();
    if job.processing_mode != wanted.mode {
        diffs.push(format!(
            "processing_mode_def: existing {}, requested {}",
            describe_mode(&job.processing_mode),
            describe_mode(&wanted.mode)
        ));
    }
    if job.use_cross_trainer_cache != wanted.use_cross_trainer_cache {
        diffs.push(format!(
            "use_cross_trainer_cache: existing {}, requested {}",
            job.use_cross_trainer_cache, wanted.use_cross_trainer_cache
        ));
    }
    if job.target_workers != wanted.target_workers {
        diffs.push(format!(
            "target_workers: existing {}, requested {}",
            target_workers_name(job.target_workers),
            target_workers_name(wanted.target_workers)
        ));
    }
    diffs
}

/// A processing mode in words: its sharding policy and, for a
/// deterministic read, its lanes and split shuffle seed (a named job read
/// with other lanes or another seed would be another global order).
fn describe_mode(mode: &wire::ProcessingModeDef) -> String {
    let policy = ShardingPolicy::try_from(mode.sharding_policy).map_or_else(
        |_| format!("{}", mode.sharding_policy),
        |p| p.as_str_name().to_string(),
    );
    match &mode.tfdata_deterministic {
        None => policy,
        Some(d) => format!(
            "{policy}, deterministic with {} lanes and {}",
            d.lanes,
            d.split_shuffle_seed
                .map_or("no split shuffle".to_string(), |seed| format!(
                    "split shuffle seed {seed}"
                ))
        ),
    }
}

/// A deterministic read's consumers restore their lanes' positions on
/// their own (`ReaderCheckpoint.deterministic`): the dispatcher hands out
/// no splits, so a restore naming consumed splits or a shared job's
/// checkpoint has nothing to resume and would wait for consumers forever.
fn refuse_split_restores(job: &Job, req: &GetOrCreateIteration) -> Result<()> {
    if req.restore.is_some() || !req.consumed.is_empty() || !req.consumed_pieces.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "job {} is a deterministic read: its readers restore their lanes' positions from \
             their checkpoints, not consumed splits or a shared job's restoration",
            job.name
        )));
    }
    Ok(())
}

fn target_workers_name(v: i32) -> &'static str {
    wire::TargetWorkers::try_from(v).map_or("INVALID", |t| t.as_str_name())
}

/// Coordinated reads and cross-trainer caches need an infinite dataset: a
/// finite one would end in the middle of a round, or of the cache's
/// window. TensorFlow refuses them with these codes and words (the worker
/// for coordinated reads, the reader for caches); an unknown cardinality
/// (a `filter`, say) is allowed, as TensorFlow allows it, and fails when
/// the data ends.
fn refuse_finite(req: &GetOrCreateJob, cardinality: i64) -> Result<()> {
    if cardinality < 0 {
        return Ok(());
    }
    if req.num_consumers.is_some() {
        return Err(Error::FailedPrecondition(format!(
            "Round robin reads require that the input dataset has infinite cardinality, but \
             the dataset has cardinality {cardinality}. Consider adding a `.repeat()` \
             transformation to the dataset."
        )));
    }
    if req.use_cross_trainer_cache {
        return Err(Error::InvalidArgument(format!(
            "Cross-trainer caching requires the input dataset to be infinite. Got input with \
             cardinality {cardinality}"
        )));
    }
    Ok(())
}

/// Fails when workers are registered and none of them can run the dataset:
/// a TensorFlow graph with ops tfdata workers lack and only tfdata workers
/// (the error names the ops), or a tfdata pipeline and only TensorFlow
/// workers. With no workers yet, the job waits for them, as TensorFlow's.
///
/// A deterministic read runs on tfdata workers only (its lanes are tfdata
/// element streams): a dataset they cannot run is refused whatever is
/// registered, and TensorFlow workers do not count.
fn check_workers_can_run(
    state: &crate::state::DispatcherState,
    dataset_id: &DatasetId,
    deterministic: bool,
) -> Result<()> {
    let Some(dataset) = state.dataset(dataset_id) else {
        return Ok(());
    };
    if deterministic && !dataset.runs_on_tfdata() {
        return Err(Error::InvalidArgument(format!(
            "a deterministic read runs on tfdata workers only, and dataset {dataset_id} is a \
             TensorFlow graph they cannot run{}",
            if dataset.unsupported_ops.is_empty() {
                String::new()
            } else {
                format!(" (ops {})", dataset.unsupported_ops.join(", "))
            }
        )));
    }
    let live: Vec<_> = state
        .workers()
        .iter()
        .filter(|w| !w.lost && (w.runs_pipelines || !deterministic))
        .collect();
    if live.is_empty() {
        return Ok(());
    }
    let runnable = live.iter().any(|w| {
        if w.runs_pipelines {
            dataset.runs_on_tfdata()
        } else {
            dataset.runs_on_tensorflow()
        }
    });
    if runnable {
        return Ok(());
    }
    Err(Error::FailedPrecondition(if dataset.is_pipeline {
        format!(
            "dataset {dataset_id} is a tfdata pipeline, which TensorFlow workers cannot run, \
             and only TensorFlow workers are registered; start tfdata workers"
        )
    } else if dataset.tensorflow_cannot_run {
        format!(
            "dataset {dataset_id} reads an autocache (tfdata's private load op), which \
             TensorFlow workers cannot run, and only TensorFlow workers are registered; start \
             tfdata workers"
        )
    } else if dataset.unsupported_ops.is_empty() {
        format!(
            "dataset {dataset_id} is a TensorFlow graph registered before tfdata workers ran \
             graphs, and only tfdata workers are registered; register it again or start \
             TensorFlow workers"
        )
    } else {
        format!(
            "dataset {dataset_id} is a TensorFlow graph with ops tfdata workers do not support \
             ({}), and only tfdata workers are registered; start TensorFlow workers or remove \
             those ops from the pipeline",
            dataset.unsupported_ops.join(", ")
        )
    }))
}

/// A restored reader's consumed splits start a new distributed_epoch
/// iteration of its own: refused for an iteration that exists (its splits
/// went out already) or that has no split providers, and when malformed.
fn check_consumed(req: &GetOrCreateIteration, exists: bool, providers: usize) -> Result<()> {
    if req.consumed.is_empty() && req.consumed_pieces.is_empty() {
        return Ok(());
    }
    if exists {
        return Err(Error::FailedPrecondition(format!(
            "a reader restored from a checkpoint needs an iteration of its own, but job {} \
             already has one (checkpoints of shared jobs are not supported)",
            req.job_id.0
        )));
    }
    check_consumed_ranges(&req.consumed, providers)?;
    check_consumed_pieces(&req.consumed_pieces, providers)
}

/// Restored parts of splits, checked against the job's split providers.
fn check_consumed_pieces(pieces: &[wire::TfdataSplitPieces], providers: usize) -> Result<()> {
    for p in pieces {
        let Some(n) = &p.split else {
            return Err(Error::InvalidArgument(
                "consumed parts of a split without the split's name".into(),
            ));
        };
        if !(usize::try_from(n.provider).is_ok_and(|p| p < providers)
            && n.repetition >= 0
            && n.index >= 0)
        {
            return Err(Error::InvalidArgument(format!(
                "consumed parts of split {} of split provider {} (repetition {}), but the job \
                 has {providers} split providers (is it distributed_epoch?)",
                n.index, n.provider, n.repetition
            )));
        }
        tfdata_core::positions::PositionSet::from_ranges(&p.positions)?;
    }
    Ok(())
}

/// Restored consumed splits, checked against the job's split providers.
fn check_consumed_ranges(consumed: &[wire::TfdataSplitRanges], providers: usize) -> Result<()> {
    for c in consumed {
        if usize::try_from(c.provider).is_ok_and(|p| p < providers) && c.repetition >= 0 {
            tfdata_core::ranges::IndexRanges::from_bounds(&c.bounds)?;
        } else {
            return Err(Error::InvalidArgument(format!(
                "consumed splits of split provider {} (repetition {}), but the job has {providers} \
                 split providers (is it distributed_epoch?)",
                c.provider, c.repetition
            )));
        }
    }
    Ok(())
}

/// How many readers took checkpoints of `restore`'s origin iteration, if
/// this dispatcher knows it as an iteration of `job` (or of one of its
/// restorations) that this consumer checkpointed; else 0. Ids of another
/// dispatcher's life (no journal) may name an unrelated iteration.
fn known_checkpointers(state: &DispatcherState, job: &Job, restore: &wire::TfdataRestore) -> i64 {
    let restored_prefix = format!("{}/restored_iteration_", job.name);
    state
        .iteration(tfdata_core::IterationId(restore.origin_iteration_id))
        .filter(|it| it.checkpointers.contains(&restore.origin_client_id))
        .filter(|it| {
            state
                .job(it.job_id)
                .is_some_and(|j| j.name == job.name || j.name.starts_with(&restored_prefix))
        })
        .map_or(0, |it| it.checkpointers.len() as i64)
}

/// The job a restoration of `origin` (an iteration of `job`, or of one of
/// its restorations) runs in: one per origin.
fn restoration_job_name(job: &str, origin: i64) -> String {
    format!("{job}/restored_iteration_{origin}")
}

/// The restoration `restore`'s consumer joins: `Some` one still waiting
/// for consumers, or `None` for a new one of the returned restore's origin.
///
/// A consumer that joined a restoration of its origin before (the trainers
/// restored from these checkpoints already, or the others restored from
/// newer ones, taken in that restoration) belongs in the restoration of
/// that one, as the client it was there: followed, restoration after
/// restoration. A consumer that arrives after a restoration of its origin
/// resumed without it is refused: what it consumed may be handed out
/// again already.
/// A coordinated read's rounds line up again after a restore only if every
/// consumer checkpointed at the same step: each names, per worker, the same
/// whole rounds, the first `rounds * num_consumers` elements. `joined`: what
/// the consumers that joined the restoration before this one named.
fn check_coordinated_restore(
    job_name: &str,
    num_consumers: i64,
    elements: &BTreeMap<WorkerAddress, IndexRanges>,
    joined: Option<&BTreeMap<WorkerAddress, IndexRanges>>,
) -> Result<()> {
    for (worker, ranges) in elements {
        let whole_rounds = ranges
            .covering(0)
            .filter(|end| end % num_consumers.max(1) == 0 && ranges.count() == *end as u64);
        if whole_rounds.is_none() {
            return Err(Error::InvalidArgument(format!(
                "a coordinated read's checkpoint names elements {:?} of worker {worker}, not \
                 the first whole rounds of {num_consumers} consumers",
                ranges.bounds()
            )));
        }
    }
    if let Some(joined) = joined
        && joined != elements
    {
        let describe = |m: &BTreeMap<WorkerAddress, IndexRanges>| {
            m.iter()
                .map(|(w, r)| format!("{w}: {}", r.count() / num_consumers.max(1) as u64))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(Error::FailedPrecondition(format!(
            "the consumers of coordinated read {job_name} restore checkpoints taken at different \
             steps: this one had consumed rounds per worker {{{}}}, those restored before it \
             {{{}}}. Coordinated reads resume only when every consumer restores the checkpoint \
             of the same step",
            describe(elements),
            describe(joined)
        )));
    }
    Ok(())
}

fn find_restoration(
    state: &DispatcherState,
    job: &Job,
    mut restore: wire::TfdataRestore,
) -> Result<(Option<tfdata_core::IterationId>, wire::TfdataRestore)> {
    for _ in 0..MAX_RESTORATION_CHAIN {
        let name = restoration_job_name(&job.name, restore.origin_iteration_id);
        let Some(it) = state
            .job_by_name(&name)
            .and_then(|_| state.iteration_by_key(&name, Repetition(0)))
        else {
            return Ok((None, restore));
        };
        let Some(r) = &it.restoration else {
            return Err(Error::Internal(format!("job {name} is not a restoration")));
        };
        if it.gathering() && !it.garbage_collected {
            return Ok((Some(it.id), restore));
        }
        let Some(&client) = r.joined.get(&restore.origin_client_id) else {
            return Err(Error::FailedPrecondition(format!(
                "the other {} consumers of job {} restored from checkpoints of iteration {} \
                 resumed it without this one (client {}){}. Restore every consumer before \
                 any of them reads, each from its own checkpoint",
                r.joined.len(),
                job.name,
                restore.origin_iteration_id,
                restore.origin_client_id,
                if it.garbage_collected {
                    ", or left it until it was garbage collected"
                } else {
                    ""
                }
            )));
        };
        restore.origin_iteration_id = it.id.0;
        restore.origin_client_id = client;
        restore.consumers = restore.consumers.max(it.checkpointers.len() as i64);
    }
    Err(Error::FailedPrecondition(format!(
        "a checkpoint of job {} was followed through {MAX_RESTORATION_CHAIN} restorations",
        job.name
    )))
}
