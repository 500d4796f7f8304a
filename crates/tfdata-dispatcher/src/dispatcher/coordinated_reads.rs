//! Coordinated reads (round-robin, `num_consumers`; spec §5.7): how a new
//! worker's pending task is agreed on by every consumer, and
//! `MaybeRemoveTask`, the consumers' agreement that a task is gone.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tfdata_core::{Error, IterationClientId, IterationId, Result};
use tfdata_proto::data::{self as wire, update::UpdateType};

use super::Dispatcher;
use super::requests::MaybeRemoveTask;
use super::txn::Txn;

/// How long a `MaybeRemoveTask` waits for the other consumers (TensorFlow's).
const REMOVAL_RENDEZVOUS: Duration = Duration::from_secs(10);

/// Consumers agreeing that a task is gone: all must ask for the same round.
pub(super) struct Remover {
    round: i64,
    consumers: std::sync::Mutex<HashSet<i64>>,
    removed: AtomicBool,
    done: tokio::sync::Notify,
}

impl Remover {
    fn new(round: i64) -> Arc<Self> {
        Arc::new(Remover {
            round,
            consumers: Default::default(),
            removed: Default::default(),
            done: tokio::sync::Notify::new(),
        })
    }
}

/// Moves the iteration's first pending task towards joining (spec §5.7):
/// a client already at or past its target round rejects it (a later
/// target is chosen); a client that agreed to stop before it accepts.
pub(super) fn negotiate_pending_task(
    txn: &mut Txn<'_>,
    client: IterationClientId,
    iteration_id: IterationId,
    req: &wire::ClientHeartbeatRequest,
) -> Result<()> {
    let Some(it) = txn.state.iteration(iteration_id) else {
        return Ok(());
    };
    let Some(pending) = it.pending_tasks.front() else {
        return Ok(());
    };
    let update = match (req.current_round, req.blocked_round) {
        (Some(current), _) if current >= pending.target_round => {
            let max = txn
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
            if blocked <= pending.target_round && !pending.ready_consumers.contains(&client) =>
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
        txn.apply(UpdateType::ClientHeartbeat(update))?;
    }
    Ok(())
}

impl Dispatcher {
    /// `MaybeRemoveTask` (spec §5.7): a task is removed from a coordinated
    /// read once every consumer asks for its removal in the same round.
    pub(crate) async fn maybe_remove_task(
        &self,
        req: MaybeRemoveTask,
    ) -> Result<wire::MaybeRemoveTaskResponse> {
        let task_id = req.task_id;
        let num_consumers = self
            .ledger
            .read(|g| {
                let Some(task) = g.state.task(task_id) else {
                    return Ok(None);
                };
                let job = g
                    .state
                    .iteration(task.iteration_id)
                    .and_then(|it| g.state.job(it.job_id));
                match job.and_then(|j| j.num_consumers) {
                    // An index outside the job's consumers would count towards
                    // the agreement and remove the task early.
                    Some(n) if !(0..n).contains(&req.consumer_index) => {
                        Err(Error::InvalidArgument(format!(
                            "MaybeRemoveTask: consumer_index {} is not in [0, {n})",
                            req.consumer_index
                        )))
                    }
                    Some(n) => Ok(Some(n)),
                    None => Err(Error::FailedPrecondition(format!(
                        "MaybeRemoveTask called for task {} of a non-round-robin iteration",
                        req.task_id.0
                    ))),
                }
            })
            .await??;
        let Some(num_consumers) = num_consumers else {
            return Ok(wire::MaybeRemoveTaskResponse { removed: true });
        };
        let remover = {
            let mut removers = self.removers.lock().unwrap_or_else(|p| p.into_inner());
            let entry = removers
                .entry(task_id)
                .or_insert_with(|| Remover::new(req.round));
            if entry.round != req.round {
                let empty = entry
                    .consumers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .is_empty();
                if !empty {
                    return Ok(wire::MaybeRemoveTaskResponse { removed: false });
                }
                *entry = Remover::new(req.round);
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
            let mut txn = self.ledger.begin().await;
            if txn.state.task(task_id).is_some() {
                txn.apply(UpdateType::RemoveTask(wire::RemoveTaskUpdate {
                    task_id: task_id.0,
                }))?;
                tracing::info!(task = %task_id, round = req.round, "task removed by consumer agreement");
            }
            txn.commit().await?;
            remover.removed.store(true, Ordering::SeqCst);
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
            removed: remover.removed.load(Ordering::SeqCst),
        })
    }
}
