//! One reader's pass over a job (spec §5.4): create the job and iteration,
//! heartbeat the dispatcher to learn of tasks and of the iteration's end, and
//! fetch elements from every task's worker.
//!
//! A driver task owns the heartbeat loop and spawns one fetcher per task.
//! Fetchers hold at most one `GetElement` in flight each; a semaphore of
//! `max_outstanding_requests` permits bounds requests in flight plus elements
//! buffered for the reader (a permit travels with its element and is returned
//! when the reader takes it), so a slow reader slows the fetchers instead of
//! growing memory.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tfdata_core::{Element, Error, Result, element};
use tfdata_proto::data::{
    self as wire, get_element_response, worker_service_client::WorkerServiceClient,
};
use tfdata_rpc::CancellationToken;
use tfdata_rpc::retry::{backoff, retry};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::DropGuard;
use tonic::transport::Channel;

use crate::dispatcher::DispatcherClient;
use crate::options::{ProcessingMode, TargetWorkers};

/// Bound on one `ReleaseIterationClient` when a reader goes away.
pub(crate) const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on one `ClientHeartbeat`; a slower answer counts as a transient failure.
pub(crate) const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(30);
/// First poll delay once all tasks are drained but the end is not yet known.
const END_POLL_START: Duration = Duration::from_millis(5);

pub(crate) struct IterationParams {
    pub dataset_id: String,
    pub mode: ProcessingMode,
    pub job_name: Option<String>,
    pub target_workers: TargetWorkers,
    pub consumer_index: Option<i64>,
    pub num_consumers: Option<i64>,
    pub trainer_id: Option<String>,
    /// Registered cardinality of the dataset (−1 infinite, −2 unknown).
    pub cardinality: i64,
    pub repetition: i64,
    pub max_outstanding_requests: usize,
    pub task_refresh_interval: Duration,
    pub dispatcher_timeout: Duration,
}

pub(crate) type Item = (Result<Element>, Option<OwnedSemaphorePermit>);

/// The reader's end of a running iteration.
pub(crate) struct Iteration {
    rx: mpsc::Receiver<Item>,
    failed: bool,
    _stop_driver: DropGuard,
}

impl Iteration {
    fn take(&mut self, item: Option<Item>) -> Option<Result<Element>> {
        if self.failed {
            return None;
        }
        let (result, _permit) = item?;
        // An error ends the iteration, as in TensorFlow.
        self.failed = result.is_err();
        Some(result)
    }

    pub fn next_blocking(&mut self) -> Option<Result<Element>> {
        let item = self.rx.blocking_recv();
        self.take(item)
    }

    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Element>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(item) => Poll::Ready(self.take(item)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Creates (or joins) the job and iteration, then starts the driver on `handle`.
pub(crate) fn decode(
    address: &str,
    task_id: i64,
    element: Option<get_element_response::Element>,
) -> Result<Element> {
    match element {
        Some(get_element_response::Element::Compressed(c)) => element::uncompress(&c),
        Some(get_element_response::Element::Uncompressed(u)) => element::from_uncompressed(&u),
        None => Err(Error::Internal(format!(
            "worker {address} answered GetElement for task {task_id} with no element"
        ))),
    }
}

pub(crate) async fn start(
    dispatcher: DispatcherClient,
    params: IterationParams,
    handle: tokio::runtime::Handle,
) -> Result<Iteration> {
    let cancel = CancellationToken::new();
    let timeout = Some(params.dispatcher_timeout);
    // TensorFlow's iterator-initialisation checks.
    if params.target_workers == TargetWorkers::Local && tfdata_rpc::local_workers::is_empty() {
        return Err(Error::FailedPrecondition(
            "Local reads require local tf.data workers, but no local worker is found. \
             Start a WorkerServer in this process or use target_workers=AUTO or ANY."
                .into(),
        ));
    }
    if params.trainer_id.is_some() {
        if params.cardinality >= 0 {
            return Err(Error::FailedPrecondition(format!(
                "cross-trainer caching requires an infinite dataset, but the registered cardinality is {}",
                params.cardinality
            )));
        }
        if params.repetition > 1 {
            return Err(Error::FailedPrecondition(
                "cross-trainer caching does not support repeated iterations (repetition > 1)"
                    .into(),
            ));
        }
    }
    let job_request = wire::GetOrCreateJobRequest {
        dataset_id: params.dataset_id.clone(),
        processing_mode_def: Some(params.mode.to_proto()),
        job_name: params.job_name.clone(),
        num_consumers: params.num_consumers,
        use_cross_trainer_cache: params.trainer_id.is_some(),
        target_workers: params.target_workers.to_proto() as i32,
    };
    let job_id = retry(&dispatcher.target(), timeout, &cancel, || {
        dispatcher.get_or_create_job(job_request.clone())
    })
    .await?
    .job_id;
    let iteration_request = wire::GetOrCreateIterationRequest {
        job_id,
        repetition: params.repetition,
    };
    let client_id = retry(&dispatcher.target(), timeout, &cancel, || {
        dispatcher.get_or_create_iteration(iteration_request)
    })
    .await?
    .iteration_client_id;
    tracing::debug!(
        job_id,
        client_id,
        repetition = params.repetition,
        "reading iteration"
    );

    let capacity = params.max_outstanding_requests.max(1);
    let (tx, rx) = mpsc::channel(capacity);
    let fetch = Arc::new(FetchContext {
        permits: Arc::new(Semaphore::new(capacity)),
        tx,
        cancel: cancel.clone(),
        workers: Mutex::new(HashMap::new()),
        trainer_id: params.trainer_id.clone().unwrap_or_default(),
    });
    match params.consumer_index {
        Some(consumer) => {
            handle.spawn(crate::rounds::drive(
                dispatcher, params, client_id, consumer, fetch,
            ));
        }
        None => {
            handle.spawn(drive(dispatcher, params, client_id, fetch));
        }
    }
    Ok(Iteration {
        rx,
        failed: false,
        _stop_driver: cancel.drop_guard(),
    })
}

pub(crate) struct FetchContext {
    pub permits: Arc<Semaphore>,
    pub tx: mpsc::Sender<Item>,
    pub cancel: CancellationToken,
    workers: Mutex<HashMap<String, WorkerServiceClient<Channel>>>,
    trainer_id: String,
}

/// The address to read a task from: TensorFlow clients look the worker up by
/// transfer protocol; "grpc" is the WorkerService on the worker's address.
pub(crate) fn task_address(task: &wire::TaskInfo) -> String {
    task.transfer_servers
        .iter()
        .find(|s| s.protocol == "grpc")
        .map_or(task.worker_address.clone(), |s| s.address.clone())
}

/// Whether a non-coordinated reader reads `task` under `target`.
fn targeted(target: TargetWorkers, task: &wire::TaskInfo) -> bool {
    let local = tfdata_rpc::local_workers::contains(&task.worker_address);
    match target {
        TargetWorkers::Any => true,
        TargetWorkers::Local => local,
        TargetWorkers::Auto => {
            local
                || !task
                    .worker_tags
                    .iter()
                    .any(|t| t.eq_ignore_ascii_case("COLOCATED"))
        }
    }
}

pub(crate) async fn release(dispatcher: &DispatcherClient, client_id: i64) {
    let release = dispatcher.release_iteration_client(wire::ReleaseIterationClientRequest {
        iteration_client_id: client_id,
    });
    match tokio::time::timeout(RELEASE_TIMEOUT, release).await {
        Ok(Ok(_)) => tracing::debug!(client_id, "iteration client released"),
        Ok(Err(e)) => tracing::warn!(client_id, error = %e, "failed to release iteration client"),
        Err(_) => tracing::warn!(client_id, "timed out releasing iteration client"),
    }
}

impl FetchContext {
    pub(crate) fn worker(&self, address: &str) -> Result<WorkerServiceClient<Channel>> {
        let mut workers = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = workers.get(address) {
            return Ok(c.clone());
        }
        let c = tfdata_rpc::channel::worker_client(tfdata_rpc::channel::channel(address)?);
        workers.insert(address.to_string(), c.clone());
        Ok(c)
    }
}

async fn drive(
    dispatcher: DispatcherClient,
    params: IterationParams,
    client_id: i64,
    fetch: Arc<FetchContext>,
) {
    let cancel = fetch.cancel.clone();
    let refresh = params.task_refresh_interval;
    let mut fetchers: JoinSet<FetchEnd> = JoinSet::new();
    let mut known_tasks = HashSet::new();
    let mut running: HashMap<i64, tokio::task::AbortHandle> = HashMap::new();
    let mut finished = false;
    // Skipping a task for targeting means the dispatcher's end of the
    // iteration is not ours: we end when our own tasks end.
    let mut skipped_any = false;
    let mut next_heartbeat = Instant::now();
    let mut end_poll = END_POLL_START;
    loop {
        if finished && fetchers.is_empty() {
            break;
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep_until(next_heartbeat) => {
                let request = wire::ClientHeartbeatRequest {
                    iteration_client_id: client_id,
                    ..Default::default()
                };
                let response = tokio::time::timeout(HEARTBEAT_TIMEOUT, dispatcher.client_heartbeat(request))
                    .await
                    .unwrap_or_else(|_| Err(Error::Unavailable("client heartbeat timed out".into())));
                match response {
                    Ok(response) => {
                        // Tasks the dispatcher dropped (a lost worker's) are
                        // no longer read.
                        let listed: HashSet<i64> = response.task_info.iter().map(|t| t.task_id).collect();
                        running.retain(|task_id, handle: &mut tokio::task::AbortHandle| {
                            let keep = listed.contains(task_id);
                            if !keep {
                                handle.abort();
                            }
                            keep
                        });
                        for task in response.task_info {
                            if known_tasks.insert(task.task_id) {
                                if targeted(params.target_workers, &task) {
                                    let id = task.task_id;
                                    let handle = fetchers.spawn(fetch_task(Arc::clone(&fetch), task));
                                    running.insert(id, handle);
                                } else {
                                    skipped_any = true;
                                }
                            }
                        }
                        finished = response.iteration_finished
                            || (skipped_any && fetchers.is_empty() && !known_tasks.is_empty());
                    }
                    Err(e) if e.is_retryable() => {
                        tracing::debug!(client_id, error = %e, "client heartbeat failed; will retry");
                    }
                    Err(e) => {
                        let _ = fetch.tx.send((Err(e), None)).await;
                        break;
                    }
                }
                // Once every known task is drained, poll the dispatcher quickly
                // for the iteration's end instead of waiting a full period.
                let drained = !known_tasks.is_empty() && fetchers.is_empty();
                next_heartbeat = if !finished && drained {
                    end_poll = (end_poll * 2).min(refresh);
                    Instant::now() + end_poll
                } else {
                    Instant::now() + refresh
                };
            }
            Some(joined) = fetchers.join_next_with_id(), if !fetchers.is_empty() => {
                match joined {
                    Ok((id, FetchEnd::Failed)) => {
                        running.retain(|_, h| h.id() != id);
                        break;
                    }
                    Ok((id, _)) => running.retain(|_, h| h.id() != id),
                    Err(e) => running.retain(|_, h| h.id() != e.id()),
                }
                if fetchers.is_empty() && skipped_any {
                    finished = true;
                }
                if fetchers.is_empty() && !finished {
                    next_heartbeat = Instant::now();
                }
            }
        }
    }
    fetchers.abort_all();
    drop(fetchers);
    drop(fetch);
    release(&dispatcher, client_id).await;
}

enum FetchEnd {
    EndOfSequence,
    Stopped,
    Failed,
}

/// Reads one task until its end of sequence.
async fn fetch_task(ctx: Arc<FetchContext>, task: wire::TaskInfo) -> FetchEnd {
    let address = task_address(&task);
    let mut client = match ctx.worker(&address) {
        Ok(c) => c,
        Err(e) => {
            let _ = ctx.tx.send((Err(e), None)).await;
            return FetchEnd::Failed;
        }
    };
    let mut attempt = 0u32;
    loop {
        let permit = tokio::select! {
            p = Arc::clone(&ctx.permits).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return FetchEnd::Stopped,
            },
            () = ctx.cancel.cancelled() => return FetchEnd::Stopped,
        };
        let request = wire::GetElementRequest {
            task_id: task.task_id,
            allow_skip: false,
            trainer_id: ctx.trainer_id.clone(),
            ..Default::default()
        };
        let response = tokio::select! {
            r = client.get_element(request) => r,
            () = ctx.cancel.cancelled() => return FetchEnd::Stopped,
        };
        let response = match response {
            Ok(r) => r.into_inner(),
            Err(status) => {
                let err = Error::from(status);
                if err.is_retryable() {
                    // The worker may be starting, restarting, or not have the task yet.
                    drop(permit);
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt = attempt.saturating_add(1);
                    continue;
                }
                let err = Error::Remote {
                    code: err.code(),
                    message: format!(
                        "Failed to get element from worker {address} (task {}): {err}",
                        task.task_id
                    ),
                };
                let _ = ctx.tx.send((Err(err), None)).await;
                return FetchEnd::Failed;
            }
        };
        attempt = 0;
        if response.end_of_sequence {
            return FetchEnd::EndOfSequence;
        }
        if response.skip_task {
            drop(permit);
            tokio::time::sleep(backoff(0)).await;
            continue;
        }
        let decoded = decode(&address, task.task_id, response.element);
        let failed = decoded.is_err();
        if ctx.tx.send((decoded, Some(permit))).await.is_err() {
            return FetchEnd::Stopped;
        }
        if failed {
            return FetchEnd::Failed;
        }
    }
}
