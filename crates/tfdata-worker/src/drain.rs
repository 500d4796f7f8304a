//! Draining before a stop (SIGTERM, a Kubernetes pod deletion), bounded by
//! a timeout:
//!
//! 1. The worker tells the dispatcher it is draining (a heartbeat flag,
//!    `tfdata_draining`): it gets no new tasks, no new iterations' tasks,
//!    and no lost worker's splits.
//! 2. Distributed_epoch tasks take no new splits: their providers answer
//!    "no more splits" themselves, so each pipeline finishes the splits it
//!    holds (shuffle buffers and partial batches included) and readers take
//!    every element made from them. That end is not the data's, so readers
//!    are not told the task ended and it is not reported finished.
//! 3. When every such task has ended and delivered all its splits (or the
//!    timeout passed), each reports its delivered splits to the dispatcher.
//!    The worker then stops as it always does: it announces the stop, its
//!    tasks leave their iterations, and the splits it had not produced go
//!    back to the pool for the other workers, with nothing duplicated.
//!
//! Other tasks (parallel_epochs, static sharding, coordinated reads) keep
//! serving during the drain but do not hold it: their data is not split
//! between workers, so there is nothing to hand over. Snapshot stream
//! writers are not drained: a stream restarts from its last committed chunk
//! wherever the dispatcher assigns it next.
//!
//! TensorFlow's workers have none of this: SIGTERM ends the process, and the
//! dispatcher keeps the worker's tasks until it comes back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::splits::DELIVERY_REPORT_DELAY;
use crate::worker::Worker;

/// How often a drain looks again for readers' confirmations.
const CONFIRMATION_POLL: Duration = Duration::from_millis(20);

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainOutcome {
    /// Distributed_epoch tasks that finished their splits.
    pub drained_tasks: usize,
    /// Tasks still holding undelivered splits at the timeout.
    pub undrained_tasks: usize,
}

/// Drains `worker` for at most `timeout` (see the module docs). Returns when
/// it is safe to stop, or at the timeout.
pub async fn drain(worker: &Arc<Worker>, timeout: Duration) -> DrainOutcome {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + timeout;
    tracing::info!(
        worker = %worker.address(),
        timeout_ms = timeout.as_millis() as u64,
        tasks = worker.num_tasks(),
        "draining: no new tasks or splits; finishing the splits in hand"
    );
    worker.start_draining().await;
    loop {
        // Registered before the check, so no change between the two is missed.
        let changed = worker.drain_changed().notified();
        let undrained = worker
            .running_tasks()
            .iter()
            .filter(|t| !t.ledger.is_drained())
            .count();
        if undrained == 0 {
            break;
        }
        tokio::select! {
            () = changed => {}
            () = tokio::time::sleep_until(deadline) => {
                tracing::warn!(
                    worker = %worker.address(),
                    undrained_tasks = undrained,
                    "drain timed out; the splits those tasks hold go back to the pool"
                );
                break;
            }
        }
    }
    // A split counts as delivered once its last element is handed to the
    // transport (or, on a stream, once the reader said it arrived): give
    // the transport the time it gets in normal operation, and the readers
    // until the deadline to say the last batches arrived.
    tokio::time::sleep(DELIVERY_REPORT_DELAY).await;
    while tokio::time::Instant::now() < deadline
        && worker
            .running_tasks()
            .iter()
            .any(|t| t.ledger.providers().iter().any(|p| p.unconfirmed() > 0))
    {
        tokio::time::sleep(CONFIRMATION_POLL).await;
    }
    let mut outcome = DrainOutcome {
        drained_tasks: 0,
        undrained_tasks: 0,
    };
    for task in worker.running_tasks() {
        if task.ledger.providers().is_empty() {
            continue;
        }
        if !task.ledger.is_drained() {
            outcome.undrained_tasks += 1;
        }
        // Only a pipeline that has ended leaves its providers alone.
        if !task.ledger.cut_and_ended() {
            continue;
        }
        outcome.drained_tasks += 1;
        let ledger = Arc::clone(&task.ledger);
        let span = task.span.clone();
        let flushed = tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            for provider in ledger.providers() {
                if let Err(e) = provider.flush() {
                    tracing::warn!(error = %e, "could not report delivered splits; they may be produced again");
                }
            }
        });
        if let Err(e) = flushed.await {
            tracing::warn!(error = %e, "reporting delivered splits failed");
        }
    }
    tracing::info!(
        worker = %worker.address(),
        drained_tasks = outcome.drained_tasks,
        undrained_tasks = outcome.undrained_tasks,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "drained"
    );
    outcome
}
