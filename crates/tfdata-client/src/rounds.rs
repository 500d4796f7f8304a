//! Coordinated (round-robin) reads (spec §3.7, §5.7): consumer `c` of `n`
//! reads every task in the dispatcher's order, one round at a time; in
//! round `r` each worker gives consumer `c` the `c`-th of `n` elements it
//! set aside for that round, so step `k` of every consumer comes from the
//! same worker. Rounds a worker could not fill are skipped by everyone.
//!
//! The heartbeat loop keeps the task list and the dispatcher's `block_round`
//! (a new worker joins at an agreed round); the round loop requests all
//! tasks of a round concurrently and emits their elements in task order.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tfdata_core::{Element, Error, Result};
use tfdata_proto::data as wire;
use tfdata_rpc::retry::backoff;
use tokio::sync::Notify;

use crate::dispatcher::DispatcherClient;
use crate::iteration::{
    FetchContext, HEARTBEAT_TIMEOUT, IterationParams, decode_off_runtime, release, task_address,
};

/// After this many failed attempts at one task in one round, a consumer asks
/// the dispatcher to remove it (TensorFlow: after the first failed retry).
const FAILURES_BEFORE_REMOVAL: u32 = 2;

#[derive(Default)]
struct Shared {
    /// Active tasks in dispatcher order.
    tasks: Vec<wire::TaskInfo>,
    removed: HashSet<i64>,
    /// Do not start this round until the dispatcher lifts it.
    block_round: Option<i64>,
    current_round: i64,
    finished: bool,
    error: Option<Error>,
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) async fn drive(
    dispatcher: DispatcherClient,
    params: IterationParams,
    client_id: i64,
    consumer: i64,
    fetch: Arc<FetchContext>,
) {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let changed = Arc::new(Notify::new());
    let heartbeats = tokio::spawn(heartbeat_loop(
        dispatcher.clone(),
        client_id,
        params.task_refresh_interval,
        Arc::clone(&shared),
        Arc::clone(&changed),
        fetch.cancel.clone(),
    ));
    let mut skipped_previous: HashMap<i64, bool> = HashMap::new();
    let mut round = 0i64;
    'rounds: loop {
        // Listening before the shared state is read: a heartbeat that
        // changes it after the read wakes the wait below (notify_waiters
        // keeps no permit, so a listener made later would miss it).
        let changes = changed.notified();
        tokio::pin!(changes);
        changes.as_mut().enable();
        if fetch.cancel.is_cancelled() {
            break;
        }
        let error = lock(&shared).error.take();
        if let Some(e) = error {
            let _ = fetch.tx.send((Err(e), None)).await;
            break;
        }
        let tasks = {
            let mut s = lock(&shared);
            if s.finished {
                break;
            }
            let blocked = s.block_round.is_some_and(|b| round >= b);
            let tasks: Vec<wire::TaskInfo> = s
                .tasks
                .iter()
                .filter(|t| t.starting_round <= round && !s.removed.contains(&t.task_id))
                .cloned()
                .collect();
            if blocked || tasks.is_empty() {
                None
            } else {
                s.current_round = round;
                Some(tasks)
            }
        };
        let Some(tasks) = tasks else {
            // Every change that can end this wait (tasks, block_round,
            // finished, an error) comes from the heartbeat loop, which
            // notifies after each.
            tokio::select! {
                () = &mut changes => {}
                () = fetch.cancel.cancelled() => break,
            }
            continue;
        };
        // One result slot per task, reserved in order.
        let mut permits = Vec::with_capacity(tasks.len());
        for _ in &tasks {
            let permit = tokio::select! {
                p = Arc::clone(&fetch.permits).acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break 'rounds,
                },
                () = fetch.cancel.cancelled() => break 'rounds,
            };
            permits.push(permit);
        }
        let requests = tasks.iter().map(|task| {
            let skipped = skipped_previous
                .get(&task.task_id)
                .copied()
                .unwrap_or(false);
            fetch_slot(&dispatcher, &fetch, task, consumer, round, skipped)
        });
        let results = tokio::select! {
            r = futures::future::join_all(requests) => r,
            () = fetch.cancel.cancelled() => break,
        };
        for ((task, result), permit) in tasks.iter().zip(results).zip(permits) {
            match result {
                Ok(Slot::Element(e)) => {
                    skipped_previous.insert(task.task_id, false);
                    if fetch.tx.send((Ok(e.into()), Some(permit))).await.is_err() {
                        break 'rounds;
                    }
                }
                Ok(Slot::Skipped) => {
                    skipped_previous.insert(task.task_id, true);
                }
                Ok(Slot::Removed) => {
                    lock(&shared).removed.insert(task.task_id);
                }
                Err(e) => {
                    let _ = fetch.tx.send((Err(e), None)).await;
                    break 'rounds;
                }
            }
        }
        round += 1;
    }
    heartbeats.abort();
    release(&dispatcher, client_id).await;
}

enum Slot {
    Element(Element),
    Skipped,
    Removed,
}

async fn fetch_slot(
    dispatcher: &DispatcherClient,
    fetch: &FetchContext,
    task: &wire::TaskInfo,
    consumer: i64,
    round: i64,
    skipped_previous_round: bool,
) -> Result<Slot> {
    let address = task_address(task);
    let mut client = fetch.worker(&address)?;
    let mut failures = 0u32;
    loop {
        let request = wire::GetElementRequest {
            task_id: task.task_id,
            consumer_index: Some(consumer),
            round_index: Some(round),
            skipped_previous_round,
            allow_skip: true,
            trainer_id: String::new(),
        };
        match client.get_element(request).await {
            Ok(response) => {
                let response = response.into_inner();
                if response.skip_task {
                    return Ok(Slot::Skipped);
                }
                if response.end_of_sequence {
                    return Err(Error::FailedPrecondition(format!(
                        "task {} on {address} reached the end of its data during a coordinated read; \
                         coordinated reads need an infinite dataset (add .repeat())",
                        task.task_id
                    )));
                }
                return decode_off_runtime(&address, task.task_id, response.element)
                    .await
                    .map(Slot::Element);
            }
            Err(status) => {
                let err = Error::from(status);
                if !err.is_retryable() {
                    return Err(crate::iteration::worker_error(&address, task.task_id, &err));
                }
                failures += 1;
                if failures >= FAILURES_BEFORE_REMOVAL {
                    let request = wire::MaybeRemoveTaskRequest {
                        task_id: task.task_id,
                        consumer_index: consumer,
                        round,
                    };
                    if let Ok(r) = dispatcher.maybe_remove_task(request).await
                        && r.removed
                    {
                        return Ok(Slot::Removed);
                    }
                }
                tokio::time::sleep(backoff(failures + 10)).await;
            }
        }
    }
}

async fn heartbeat_loop(
    dispatcher: DispatcherClient,
    client_id: i64,
    period: Duration,
    shared: Arc<Mutex<Shared>>,
    changed: Arc<Notify>,
    cancel: tfdata_rpc::CancellationToken,
) {
    loop {
        let (current_round, blocked_round) = {
            let s = lock(&shared);
            (s.current_round, s.block_round)
        };
        let request = wire::ClientHeartbeatRequest {
            iteration_client_id: client_id,
            current_round: Some(current_round),
            blocked_round,
            target_processing_time_nsec: 0.0,
        };
        let response =
            tokio::time::timeout(HEARTBEAT_TIMEOUT, dispatcher.client_heartbeat(request))
                .await
                .unwrap_or_else(|_| Err(Error::Unavailable("client heartbeat timed out".into())));
        match response {
            Ok(r) => {
                let mut s = lock(&shared);
                s.tasks = r.task_info;
                s.block_round = match r.block_round {
                    // Agree to stop before that round unless we are past it.
                    Some(b) if s.current_round < b => Some(b),
                    _ => None,
                };
                s.finished = r.iteration_finished;
                drop(s);
                changed.notify_waiters();
            }
            Err(e) if e.is_retryable() => {
                tracing::debug!(client_id, error = %e, "client heartbeat failed; will retry");
            }
            Err(e) => {
                lock(&shared).error = Some(e);
                changed.notify_waiters();
                return;
            }
        }
        // Heartbeat faster while a new task waits to join.
        let wait = if lock(&shared).block_round.is_some() {
            period.min(Duration::from_millis(50))
        } else {
            period
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = cancel.cancelled() => return,
        }
    }
}
