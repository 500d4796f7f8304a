//! Iteration clients (readers): heartbeats and releases.

use tfdata_core::{Error, IterationClientId, Result};
use tfdata_proto::data::{self as wire, update::UpdateType};

use super::Dispatcher;
use super::coordinated_reads::negotiate_pending_task;
use super::errors::unknown_client;

impl Dispatcher {
    pub(crate) async fn client_heartbeat(
        &self,
        req: wire::ClientHeartbeatRequest,
    ) -> Result<wire::ClientHeartbeatResponse> {
        let client = IterationClientId(req.iteration_client_id);
        let mut txn = self.ledger.begin().await;
        let iteration_id = txn
            .state
            .client_iteration(client)
            .ok_or_else(|| unknown_client(client))?;
        let now = self.clock.now_micros();
        txn.liveness.client_heard(client, now);
        txn.load.reader_heard(client, iteration_id, &req);
        if let Some(round) = req.current_round {
            let max = txn.rounds.entry(iteration_id).or_insert(round);
            *max = (*max).max(round);
        }
        negotiate_pending_task(&mut txn, client, iteration_id, &req)?;
        let it = txn
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
            .filter_map(|t| txn.state.task(*t))
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
        let response = wire::ClientHeartbeatResponse {
            task_info,
            block_round: it.pending_tasks.front().map(|p| p.target_round),
            iteration_finished: it.finished,
            deployment_mode: self.config.deployment_mode as i32,
        };
        txn.commit().await?;
        Ok(response)
    }

    pub(crate) async fn release_iteration_client(
        &self,
        req: wire::ReleaseIterationClientRequest,
    ) -> Result<wire::ReleaseIterationClientResponse> {
        let client = IterationClientId(req.iteration_client_id);
        let mut txn = self.ledger.begin().await;
        if txn.state.client_iteration(client).is_none() {
            return Err(unknown_client(client));
        }
        txn.apply(UpdateType::ReleaseIterationClient(
            wire::ReleaseIterationClientUpdate {
                iteration_client_id: client.0,
                time_micros: self.clock.now_micros(),
            },
        ))?;
        txn.liveness.forget_client(client);
        txn.load.forget_reader(client);
        txn.commit().await?;
        Ok(wire::ReleaseIterationClientResponse {})
    }
}
