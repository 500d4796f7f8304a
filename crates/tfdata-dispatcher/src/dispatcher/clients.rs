//! Iteration clients (readers): heartbeats and releases.
//!
//! A heartbeat's answer lists every task of the reader's iteration, one per
//! worker: with 1,000 workers and 10,000 readers beating once a second,
//! building those lists (a `TaskInfo` of three strings per task, under the
//! state lock) was most of the dispatcher's work. Each iteration's list is
//! therefore kept encoded (`task_lists`), rebuilt only when the
//! iteration's tasks change, and a heartbeat answers with those shared
//! bytes ([`EncodedHeartbeat`], written out by `crate::serving::grpc_heartbeat`).

use std::collections::BTreeMap;

use bytes::Bytes;
use prost::Message;
use tfdata_core::positions::PositionSet;
use tfdata_core::ranges::IndexRanges;
use tfdata_core::{Error, IterationClientId, IterationId, Result};
use tfdata_proto::data::{self as wire, update::UpdateType};

use super::Dispatcher;
use super::coordinated_reads::negotiate_pending_task;
use super::errors::unknown_client;
use super::requests::{ClientHeartbeat, ReleaseIterationClient};
use super::task_lists::{EncodedTaskList, encode_task_list};
use super::txn::Guarded;
use super::workers::apply_and_return_splits;
use crate::state::{HeldSplitKey, ProviderIndex, ProviderPass, Repetition, SplitName};

/// A `ClientHeartbeatResponse` with its task list already encoded.
#[derive(Debug, Clone)]
pub struct EncodedHeartbeat {
    /// Encoded `task_info` entries (field 1), shared by the iteration's readers.
    pub task_info: Bytes,
    /// The other fields (`task_info` empty).
    pub rest: wire::ClientHeartbeatResponse,
}

impl EncodedHeartbeat {
    /// Bytes of the whole encoded response.
    pub fn encoded_len(&self) -> usize {
        self.task_info.len() + self.rest.encoded_len()
    }

    /// Writes the response: the task list's bytes, then the other fields
    /// (protobuf fields may come in any order).
    pub fn encode(&self, dst: &mut impl bytes::BufMut) -> Result<()> {
        if dst.remaining_mut() < self.encoded_len() {
            return Err(Error::Internal("no room for the heartbeat answer".into()));
        }
        dst.put_slice(&self.task_info);
        self.rest
            .encode(dst)
            .map_err(|e| Error::Internal(format!("encoding a heartbeat answer: {e}")))
    }

    /// The response as a message.
    pub fn decode(self) -> Result<wire::ClientHeartbeatResponse> {
        let tasks = wire::ClientHeartbeatResponse::decode(self.task_info)
            .map_err(|e| Error::Internal(format!("an encoded task list does not decode: {e}")))?;
        Ok(wire::ClientHeartbeatResponse {
            task_info: tasks.task_info,
            ..self.rest
        })
    }
}

/// `iteration`'s encoded task list, re-encoded if its tasks changed.
/// Entries of iterations that no reader can ask about any more are dropped
/// whenever one is re-encoded, so the cache holds at most one entry per
/// live iteration.
fn task_list(g: &mut Guarded, iteration: IterationId) -> Result<Bytes> {
    let it = g
        .state
        .iteration(iteration)
        .ok_or_else(|| Error::Internal(format!("iteration {iteration} vanished")))?;
    if let Some(list) = g.task_lists.get(&iteration)
        && list.is_current(it)
    {
        return Ok(list.encoded().clone());
    }
    let list: EncodedTaskList = encode_task_list(&g.state, it);
    let encoded = list.encoded().clone();
    let state = &g.state;
    g.task_lists
        .retain(|id, _| state.iteration(*id).is_some_and(|it| !it.garbage_collected));
    g.task_lists.insert(iteration, list);
    Ok(encoded)
}

/// Applies a reader's receipts for lost tasks whose return waits for them
/// (a report for any other task, a repeat or a finished one, changes
/// nothing and is not journaled). Only what the task still held is
/// journaled: a report names everything the reader received and the worker
/// had not yet seen acknowledged, the journal only the splits it changes.
fn receive_splits(
    txn: &mut super::txn::Txn<'_>,
    client: IterationClientId,
    iteration_id: IterationId,
    receipts: Vec<wire::TfdataTaskReceipts>,
) -> Result<()> {
    for r in receipts {
        let task = tfdata_core::TaskId(r.task_id);
        let Some(it) = txn
            .state
            .iteration(iteration_id)
            .filter(|it| it.awaits_receipts(task, client))
        else {
            continue;
        };
        // Refused before anything is journaled: a bad report from the
        // network must not become a record replay stumbles on.
        let bad =
            |e: String| Error::InvalidArgument(format!("receipts for task {}: {e}", r.task_id));
        let mut whole: BTreeMap<ProviderPass, IndexRanges> = BTreeMap::new();
        for ranges in &r.ranges {
            let set = IndexRanges::from_bounds(&ranges.bounds).map_err(|e| bad(e.to_string()))?;
            whole
                .entry(ProviderPass {
                    provider: ProviderIndex(ranges.provider),
                    repetition: Repetition(ranges.repetition),
                })
                .or_default()
                .union_with(&set);
        }
        for n in &r.splits {
            whole
                .entry(SplitName::from(n).pass())
                .or_default()
                .insert(n.index);
        }
        let mut pieces = BTreeMap::new();
        for p in &r.pieces {
            let n = p
                .split
                .as_ref()
                .ok_or_else(|| bad("split pieces without their split's name".into()))?;
            let set = PositionSet::from_ranges(&p.positions).map_err(|e| bad(e.to_string()))?;
            pieces.insert(SplitName::from(n), (p, set));
        }
        // What the task held of it.
        let mut held_whole: BTreeMap<ProviderPass, IndexRanges> = BTreeMap::new();
        let mut held_pieces = Vec::new();
        for (key, held) in it.held_splits.range(HeldSplitKey::all_of(task)) {
            let name = SplitName {
                provider: key.provider,
                repetition: held.produced_in,
                index: held.index,
            };
            let pass = name.pass();
            if whole
                .get(&pass)
                .is_some_and(|w| w.covering(held.index).is_some())
            {
                held_whole.entry(pass).or_default().insert(held.index);
            } else if let Some((p, _)) = pieces.get(&name) {
                held_pieces.push((*p).clone());
            }
        }
        tracing::debug!(
            client = client.0,
            task = r.task_id,
            reported_ranges = r.ranges.len(),
            reported_split_pieces = r.pieces.len(),
            held_received = held_whole.values().map(IndexRanges::count).sum::<u64>(),
            held_pieces = held_pieces.len(),
            "a reader's receipts for a lost task"
        );
        let update = UpdateType::TfdataReceiveSplits(wire::ReceiveSplitsUpdate {
            iteration_client_id: client.0,
            task_id: r.task_id,
            splits: Vec::new(),
            pieces: held_pieces,
            ranges: held_whole
                .into_iter()
                .map(|(pass, set)| wire::TfdataSplitRanges {
                    provider: pass.provider.0,
                    repetition: pass.repetition.0,
                    bounds: set.bounds(),
                })
                .collect(),
        });
        apply_and_return_splits(txn, update)?;
    }
    Ok(())
}

impl Dispatcher {
    /// `ClientHeartbeat` as the gRPC server serves it (the request
    /// validated), answered decoded.
    #[cfg(test)]
    pub(crate) async fn client_heartbeat(
        &self,
        req: wire::ClientHeartbeatRequest,
    ) -> Result<wire::ClientHeartbeatResponse> {
        self.client_heartbeat_encoded(ClientHeartbeat::try_from(req)?)
            .await?
            .decode()
    }

    /// `ClientHeartbeat`, answered with the iteration's encoded task list.
    pub(crate) async fn client_heartbeat_encoded(
        &self,
        req: ClientHeartbeat,
    ) -> Result<EncodedHeartbeat> {
        let client = req.client_id;
        let req = req.into_wire();
        let mut txn = self.ledger.begin().await;
        let iteration_id = txn
            .state
            .client_iteration(client)
            .ok_or_else(|| unknown_client(client))?;
        let now = self.clock.now_micros();
        txn.liveness.client_heard(client, now);
        txn.load.reader_heard(client, iteration_id, &req);
        if !req.tfdata_reorder_waits.is_empty() {
            let g: &mut Guarded = &mut txn;
            let added =
                g.reorder_waits
                    .record(&g.state, iteration_id, &req.tfdata_reorder_waits, now);
            for (worker, waited) in added {
                txn.metrics().reorder_waited(&worker, waited);
                txn.reorder_waits.exported.insert(worker);
            }
        }
        if let Some(round) = req.current_round {
            let max = txn.rounds.entry(iteration_id).or_insert(round);
            *max = (*max).max(round);
        }
        negotiate_pending_task(&mut txn, client, iteration_id, &req)?;
        receive_splits(&mut txn, client, iteration_id, req.tfdata_receipts)?;
        // Probed outside this transaction (`probes`).
        self.suspect_refused(client.0, &req.tfdata_unreachable_workers, now);
        if req.tfdata_checkpoint_taken
            && !txn
                .state
                .iteration(iteration_id)
                .is_some_and(|it| it.checkpointers.contains(&client.0))
        {
            txn.apply(UpdateType::TfdataCheckpointTaken(
                wire::CheckpointTakenUpdate {
                    iteration_client_id: client.0,
                },
            ))?;
        }
        let it = txn
            .state
            .iteration(iteration_id)
            .ok_or_else(|| Error::Internal(format!("client {client} has no iteration")))?;
        if it.garbage_collected {
            return Err(Error::FailedPrecondition(format!(
                "iteration {iteration_id} has been garbage collected (it had no clients for longer than job_gc_timeout)"
            )));
        }
        let rest = wire::ClientHeartbeatResponse {
            task_info: Vec::new(),
            block_round: it.pending_tasks.front().map(|p| p.target_round),
            iteration_finished: it.finished,
            deployment_mode: self.config.deployment_mode as i32,
            tfdata_iteration_clients: it.num_clients,
            tfdata_restores_awaited: it.restoration.as_ref().map_or(0, |r| r.awaited()),
            tfdata_awaited_receipts: it
                .awaited_receipts
                .iter()
                .filter(|(_, readers)| readers.contains(&client))
                .map(|(task, _)| task.0)
                .collect(),
        };
        let task_info = task_list(&mut txn, iteration_id)?;
        txn.commit_heartbeat().await?;
        Ok(EncodedHeartbeat { task_info, rest })
    }

    pub(crate) async fn release_iteration_client(
        &self,
        req: ReleaseIterationClient,
    ) -> Result<wire::ReleaseIterationClientResponse> {
        let client = req.client_id;
        let mut txn = self.ledger.begin().await;
        if txn.state.client_iteration(client).is_none() {
            return Err(unknown_client(client));
        }
        // Lost tasks waiting for its receipts wait no more.
        let update = UpdateType::ReleaseIterationClient(wire::ReleaseIterationClientUpdate {
            iteration_client_id: client.0,
            time_micros: self.clock.now_micros(),
        });
        apply_and_return_splits(&mut txn, update)?;
        txn.liveness.forget_client(client);
        txn.load.forget_reader(client);
        txn.commit().await?;
        Ok(wire::ReleaseIterationClientResponse {})
    }
}
