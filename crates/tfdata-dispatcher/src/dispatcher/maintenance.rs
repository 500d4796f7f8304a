//! Maintenance (spec §5.9): noticing silent clients and workers, on their
//! own timeouts, and garbage-collecting iterations without clients, on the
//! GC schedule.

use std::time::Duration;

use tfdata_core::{IterationId, Result};
use tfdata_proto::data::{self as wire, processing_mode_def::ShardingPolicy, update::UpdateType};

use super::Dispatcher;
use super::workers::lose_worker;

impl Dispatcher {
    /// One pass of all maintenance: [`check_liveness`] and
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
        let worker_timeout = self.config.worker_timeout.as_micros() as i64;
        let mut txn = self.ledger.begin().await;
        for client in txn.liveness.silent_clients(now, client_timeout) {
            tracing::info!(client = %client, "releasing iteration client after client_timeout without heartbeats");
            // Lost tasks waiting for its receipts wait no more.
            let update = UpdateType::ReleaseIterationClient(wire::ReleaseIterationClientUpdate {
                iteration_client_id: client.0,
                time_micros: now,
            });
            super::workers::apply_and_return_splits(&mut txn, update)?;
            txn.liveness.forget_client(client);
            txn.load.forget_reader(client);
        }
        // Beyond TensorFlow: a silent worker is declared lost, so its
        // iterations can finish and readers stop waiting for it.
        let mut lost = Vec::new();
        for worker in txn.liveness.silent_workers(now, worker_timeout) {
            tracing::warn!(%worker, "worker silent for longer than worker_timeout: declaring it lost");
            txn.liveness.forget_worker(&worker);
            if let Some(w) = txn.state.worker(&worker) {
                lost.push((worker.clone(), w.runs_pipelines));
                if !w.lost {
                    lose_worker(&mut txn, &worker)?;
                }
            }
        }
        txn.commit().await?;
        for (worker, runs_pipelines) in lost {
            self.snapshot_worker_lost(&worker, runs_pipelines);
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
        let gc_micros = gc_timeout.as_micros() as i64;
        let mut txn = self.ledger.begin().await;
        let state = &txn.state;
        let collectable: Vec<IterationId> = state
            .iterations()
            .filter(|it| {
                // TensorFlow keeps distributed_epoch iterations (their
                // split state would be lost) unless asked; a deterministic
                // read's readers hold every position themselves, so its
                // iteration is collected like any other.
                let dynamic = state.job(it.job_id).is_some_and(|j| {
                    j.sharding_policy() == Some(ShardingPolicy::Dynamic)
                        && j.deterministic().is_none()
                });
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
            txn.apply(UpdateType::GarbageCollectIteration(
                wire::GarbageCollectIterationUpdate { iteration_id: id.0 },
            ))?;
        }
        let g: &mut super::txn::Guarded = &mut txn;
        g.reorder_waits.forget_ended(&g.state);
        txn.commit().await
    }
}
