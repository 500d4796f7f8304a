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

use tfdata_core::{Error, IterationClientId, Result, TaskId};
use tfdata_proto::data as wire;
use tfdata_rpc::retry::backoff;
use tokio::sync::Notify;

use crate::dispatcher::DispatcherClient;
use crate::fetch::{
    Delivery, FetchContext, Origin, ReceivedElement, TaskEndpoint, decode_off_runtime,
};

/// After this many failed attempts at one task in one round, a consumer asks
/// the dispatcher to remove it (TensorFlow: after the first failed retry).
const FAILURES_BEFORE_REMOVAL: u32 = 2;

#[derive(Default)]
struct Shared {
    /// Active tasks in dispatcher order.
    tasks: Vec<wire::TaskInfo>,
    removed: HashSet<TaskId>,
    /// Do not start this round until the dispatcher lifts it.
    block_round: Option<i64>,
    current_round: i64,
    finished: bool,
    error: Option<Error>,
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reads rounds as consumer `consumer_index` until the read stops or fails,
/// heartbeating every `refresh`; then releases `client_id`.
pub(crate) async fn drive(
    dispatcher: DispatcherClient,
    refresh: Duration,
    client_id: IterationClientId,
    consumer_index: i64,
    fetch: Arc<FetchContext>,
) {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let changed = Arc::new(Notify::new());
    let heartbeats = tokio::spawn(heartbeat_loop(
        dispatcher.clone(),
        client_id,
        refresh,
        Arc::clone(&shared),
        Arc::clone(&changed),
        fetch.cancel.clone(),
        Arc::clone(&fetch.stats),
    ));
    let mut skipped_previous: HashMap<TaskId, bool> = HashMap::new();
    let mut round = 0i64;
    'rounds: loop {
        let next = read_when_ready(&changed, &fetch.cancel, || {
            let mut s = lock(&shared);
            if let Some(e) = s.error.take() {
                return Some(Next::Fail(e));
            }
            if s.finished {
                return Some(Next::Stop);
            }
            let blocked = s.block_round.is_some_and(|b| round >= b);
            let tasks: Vec<wire::TaskInfo> = s
                .tasks
                .iter()
                .filter(|t| t.starting_round <= round && !s.removed.contains(&TaskId(t.task_id)))
                .cloned()
                .collect();
            if blocked || tasks.is_empty() {
                // Every change that can end this wait (tasks, block_round,
                // finished, an error) comes from the heartbeat loop, which
                // notifies after each.
                None
            } else {
                s.current_round = round;
                Some(Next::Round(tasks))
            }
        })
        .await;
        let tasks = match next {
            None | Some(Next::Stop) => break,
            Some(Next::Fail(e)) => {
                fetch.fail(e).await;
                break;
            }
            Some(Next::Round(tasks)) => tasks,
        };
        // One result slot per task, reserved in order.
        let mut permits = Vec::with_capacity(tasks.len());
        for _ in &tasks {
            let Some(permit) = fetch.permit().await else {
                break 'rounds;
            };
            permits.push(permit);
        }
        let requests = tasks.iter().map(|task| {
            let skipped = skipped_previous
                .get(&TaskId(task.task_id))
                .copied()
                .unwrap_or(false);
            let slot = SlotRequest {
                consumer_index,
                round,
                skipped_previous_round: skipped,
            };
            fetch_slot(&dispatcher, &fetch, TaskEndpoint::of(task), slot)
        });
        let results = tokio::select! {
            r = futures::future::join_all(requests) => r,
            () = fetch.cancel.cancelled() => break,
        };
        for ((task, result), permit) in tasks.iter().zip(results).zip(permits) {
            let task_id = TaskId(task.task_id);
            match result {
                Ok(Slot::Element(e, index)) => {
                    skipped_previous.insert(task_id, false);
                    let worker = Arc::from(task.worker_address.as_str());
                    // A tfdata worker numbers its rounds' elements: the
                    // reader's checkpoint counts rounds per worker by them.
                    let origin = match index {
                        Some(first) => Origin::Numbered { worker, first },
                        None => Origin::Unnumbered { worker },
                    };
                    if !fetch.send(Ok(Delivery::element(e, permit, origin))).await {
                        break 'rounds;
                    }
                }
                Ok(Slot::Skipped) => {
                    skipped_previous.insert(task_id, true);
                }
                Ok(Slot::Removed) => {
                    lock(&shared).removed.insert(task_id);
                }
                Err(e) => {
                    fetch.fail(e).await;
                    break 'rounds;
                }
            }
        }
        round += 1;
    }
    heartbeats.abort();
    // Coordinated reads share a job: as `iteration::drive` does for those,
    // the consumer stays a client until its iterator goes, so a checkpoint
    // taken now is still recorded for the job's restoration.
    // The reader sees the end once the context (its channel's sender) goes.
    let cancel = fetch.cancel.clone();
    drop(fetch);
    cancel.cancelled().await;
    dispatcher.release_reader(client_id).await;
}

enum Slot {
    /// An element, with its index in the task's sequence if the worker
    /// gave it (tfdata's do).
    Element(ReceivedElement, Option<i64>),
    Skipped,
    Removed,
}

/// What the shared state says the read does next.
enum Next {
    Round(Vec<wire::TaskInfo>),
    Fail(Error),
    Stop,
}

/// Calls `read` until it answers, waiting for `changed` in between; `None`
/// once `cancel` fires. It listens before each read, so a change notified
/// after a read wakes the wait (`notify_waiters` keeps no permit: a
/// listener made after the notification would miss it and wait for the
/// next heartbeat).
async fn read_when_ready<T>(
    changed: &Notify,
    cancel: &tfdata_rpc::CancellationToken,
    mut read: impl FnMut() -> Option<T>,
) -> Option<T> {
    loop {
        let changes = changed.notified();
        tokio::pin!(changes);
        changes.as_mut().enable();
        if cancel.is_cancelled() {
            return None;
        }
        if let Some(answer) = read() {
            return Some(answer);
        }
        tokio::select! {
            () = &mut changes => {}
            () = cancel.cancelled() => return None,
        }
    }
}

/// This consumer's request for its element of one task's round.
#[derive(Clone, Copy)]
struct SlotRequest {
    consumer_index: i64,
    round: i64,
    skipped_previous_round: bool,
}

async fn fetch_slot(
    dispatcher: &DispatcherClient,
    fetch: &FetchContext,
    task: TaskEndpoint,
    slot: SlotRequest,
) -> Result<Slot> {
    let SlotRequest {
        consumer_index,
        round,
        skipped_previous_round,
    } = slot;
    let mut client = fetch.worker(&task.address)?;
    let mut failures = 0u32;
    loop {
        let request = wire::GetElementRequest {
            task_id: task.task_id.0,
            consumer_index: Some(consumer_index),
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
                    // TensorFlow's worker says this; ours reports the end.
                    return Err(Error::FailedPrecondition(format!(
                        "Encountered end of sequence on a round-robin read iterator. Please \
                         ensure that the dataset used for round-robin reading has infinite \
                         cardinality, e.g. by adding a .repeat() transformation at the end. \
                         (task {} on {})",
                        task.task_id, task.address
                    )));
                }
                let index = response.tfdata_element_index;
                return decode_off_runtime(&task, response.element)
                    .await
                    .map(|e| Slot::Element(e, index));
            }
            Err(status) => {
                let err = Error::from(status);
                if !err.is_retryable() {
                    return Err(task.error(err));
                }
                failures += 1;
                if failures >= FAILURES_BEFORE_REMOVAL {
                    let request = wire::MaybeRemoveTaskRequest {
                        task_id: task.task_id.0,
                        consumer_index,
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
    client_id: IterationClientId,
    period: Duration,
    shared: Arc<Mutex<Shared>>,
    changed: Arc<Notify>,
    cancel: tfdata_rpc::CancellationToken,
    reader: Arc<crate::metrics::ReaderStats>,
) {
    let mut target = crate::metrics::TargetTime::default();
    // A restoration's consumers still to join, as last logged.
    let mut awaited_restores = 0;
    loop {
        let (current_round, blocked_round) = {
            let s = lock(&shared);
            (s.current_round, s.block_round)
        };
        let (target_processing_time_nsec, stats) = target.heartbeat(&reader);
        let request = wire::ClientHeartbeatRequest {
            iteration_client_id: client_id.0,
            current_round: Some(current_round),
            blocked_round,
            target_processing_time_nsec,
            tfdata_stats: Some(stats),
            // Coordinated reads report no receipts (not distributed_epoch).
            tfdata_receipts: Vec::new(),
            tfdata_checkpoint_taken: false,
            // Consumers drop an unreachable worker's task themselves
            // (`MaybeRemoveTask`).
            tfdata_unreachable_workers: Vec::new(),
            tfdata_reorder_waits: Vec::new(),
        };
        match dispatcher.reader_heartbeat(request).await {
            Ok(r) => {
                if r.tfdata_restores_awaited != awaited_restores {
                    awaited_restores = r.tfdata_restores_awaited;
                    if awaited_restores > 0 {
                        tracing::info!(
                            awaited = awaited_restores,
                            "restored coordinated read: waiting for its other consumers to \
                             restore before any round"
                        );
                    }
                }
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
                tracing::debug!(client_id = client_id.0, error = %e, "client heartbeat failed; will retry");
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A change notified between a read and the wait (the heartbeat loop on
    /// another thread) wakes the wait: the second read runs at once, not a
    /// refresh interval later. With the listener made after the read, this
    /// waits for a notification that never comes.
    #[tokio::test]
    async fn a_change_right_after_a_read_is_not_lost() {
        let changed = Notify::new();
        let cancel = tfdata_rpc::CancellationToken::new();
        let mut reads = 0;
        let answer = tokio::time::timeout(
            Duration::from_secs(10),
            read_when_ready(&changed, &cancel, || {
                reads += 1;
                if reads == 1 {
                    // The state changes right after this read saw nothing.
                    changed.notify_waiters();
                    None
                } else {
                    Some(reads)
                }
            }),
        )
        .await
        .expect("the wake-up was lost");
        assert_eq!(answer, Some(2));
        cancel.cancel();
        assert_eq!(read_when_ready(&changed, &cancel, || Some(0)).await, None);
    }
}
