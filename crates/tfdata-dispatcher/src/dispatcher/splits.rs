//! Dynamic sharding: split providers and `GetSplit` (spec §5.6).
//!
//! Split providers are not state: they are built from the dataset (which
//! may mean reading it from an object store, globbing file patterns or
//! walking a TensorFlow graph) outside the state lock, and fast-forwarded
//! past the journaled cursors under it.

use tfdata_core::{DatasetId, Error, IterationId, Result, TaskId};
use tfdata_dataset::splits::SplitProvider;
use tfdata_proto::data::{self as wire, processing_mode_def::ShardingPolicy, update::UpdateType};

use super::errors::task_failed;
use super::{Dispatcher, requests};
use crate::state::{ProviderIndex, ProviderPass, Repetition, SplitName};

/// Most splits one `GetSplit` leases to a tfdata worker
/// (`tfdata_max_splits`). Each costs the provider's step and a `TensorProto`
/// under the state lock and ~20 bytes of journal record: 1,024 keep a lease
/// under a millisecond of lock time.
pub const MAX_SPLITS_PER_LEASE: i64 = 1024;

impl Dispatcher {
    /// Fresh split providers for a dataset's sources (in depth-first order,
    /// the order of `split_provider_index`). Blocking work (reading the
    /// dataset, globbing, walking a graph) runs off the async threads and
    /// outside the state lock.
    pub(super) async fn new_split_providers(
        &self,
        dataset_id: &DatasetId,
    ) -> Result<Vec<Box<dyn SplitProvider>>> {
        let store = self.store.clone();
        let id = dataset_id.clone();
        tokio::task::spawn_blocking(move || split_providers_for(&store.get(&id)?))
            .await
            .map_err(|e| task_failed("split provider", e))?
    }

    /// After a restart a distributed_epoch iteration has no providers:
    /// builds them outside the lock and fast-forwards them past the
    /// journaled splits under it (unless someone else was faster).
    async fn ensure_split_providers(&self, iteration_id: IterationId) -> Result<()> {
        let missing = {
            let txn = self.ledger.begin().await;
            let job = txn
                .state
                .iteration(iteration_id)
                .and_then(|it| txn.state.job(it.job_id));
            match job {
                Some(job)
                    if job.sharding_policy() == Some(ShardingPolicy::Dynamic)
                        && !txn.split_providers.contains_key(&iteration_id) =>
                {
                    Some(job.dataset_id.clone())
                }
                _ => None,
            }
        };
        let Some(dataset_id) = missing else {
            return Ok(());
        };
        let providers = self.new_split_providers(&dataset_id).await?;
        let mut txn = self.ledger.begin().await;
        if txn.split_providers.contains_key(&iteration_id) {
            return Ok(());
        }
        let Some(it) = txn.state.iteration(iteration_id) else {
            return Ok(());
        };
        for (provider, &skip) in providers.iter().zip(&it.split_indices) {
            provider.skip(skip.max(0) as u64)?;
        }
        txn.split_providers.insert(iteration_id, providers);
        Ok(())
    }

    /// `GetSplit` (spec §5.6): the next split of one source for one iteration,
    /// journaled before it is returned.
    pub(crate) async fn get_split(
        &self,
        req: requests::GetSplit,
    ) -> Result<wire::GetSplitResponse> {
        let req = req.wire();
        let iteration_id = IterationId(req.iteration_id);
        // Before providers are built for it: a deterministic read has none.
        // (Not `ledger.read`: the refusal needs nothing durable, and must
        // not wait behind a journal write other GetSplits are in.)
        let deterministic = self
            .ledger
            .begin()
            .await
            .state
            .is_deterministic(iteration_id);
        if deterministic {
            return Err(Error::FailedPrecondition(format!(
                "GetSplit called for iteration {iteration_id}, a deterministic read's: its lanes \
                 number their own splits and the dispatcher hands out none (a worker serves it \
                 through tfdata's element stream, lane by lane)"
            )));
        }
        self.ensure_split_providers(iteration_id).await?;
        let mut txn = self.ledger.begin().await;
        let it = txn
            .state
            .iteration(iteration_id)
            .ok_or_else(|| Error::not_found("iteration", req.iteration_id))?;
        let job = txn
            .state
            .job(it.job_id)
            .ok_or_else(|| Error::Internal(format!("iteration {iteration_id} has no job")))?;
        if job.sharding_policy() != Some(ShardingPolicy::Dynamic) {
            return Err(Error::FailedPrecondition(format!(
                "GetSplit called for iteration {} whose processing mode is not distributed_epoch (DYNAMIC)",
                req.iteration_id
            )));
        }
        if it.gathering() {
            return Err(Error::FailedPrecondition(format!(
                "GetSplit called for iteration {} before its consumers finished restoring (it has \
                 no tasks yet)",
                req.iteration_id
            )));
        }
        let p = usize::try_from(req.split_provider_index)
            .ok()
            .filter(|&p| p < it.split_indices.len() && p < it.split_repetitions.len())
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "split_provider_index {} out of range: iteration {iteration_id} has {} split providers",
                    req.split_provider_index,
                    it.split_indices.len()
                ))
            })?;
        // The pass asked for, typed once: the wire's integers stay at the
        // edge (the update below and the answer carry them).
        let pass = ProviderPass {
            provider: ProviderIndex(req.split_provider_index),
            repetition: Repetition(req.repetition),
        };
        // Checked before the provider moves: a split handed to an unknown
        // task would be held by nobody.
        let task = TaskId(req.tfdata_task_id);
        if req.tfdata_task_id != 0
            && txn
                .state
                .task(task)
                .is_none_or(|t| t.iteration_id != iteration_id)
        {
            return Err(Error::InvalidArgument(format!(
                "GetSplit: task {task} is not a task of iteration {iteration_id}"
            )));
        }
        // A finished task gets no more splits. It may be a lost worker's
        // (cut off, not dead): a request sent before the cut can arrive
        // after the worker was declared lost and its splits were returned,
        // and a split handed to it would be held by a task nobody reads.
        if req.tfdata_task_id != 0 && txn.state.task(task).is_some_and(|t| t.finished) {
            tracing::info!(%task, worker = %req.tfdata_worker_address, "GetSplit from a task that left its iteration: end of splits");
            txn.commit().await?;
            return Ok(end_of_splits());
        }
        // A tfdata worker repeating its last request lost the answer: give it
        // the same split again (nothing new is journaled).
        if let Some(sequence) = req.tfdata_split_sequence
            && let Some(last) = it.last_split(pass.provider, &req.tfdata_worker_address)
            && last.repetition == pass.repetition
            && last.sequence == sequence
        {
            let mut answer = lease_response(
                last.split.clone(),
                last.more_splits.clone(),
                last.first_index,
                last.split_repetition,
            );
            answer.tfdata_skip = last.skip.clone();
            // The first answer's update recorded the same reports.
            answer.tfdata_delivered_recorded = true;
            tracing::debug!(
                task = req.tfdata_task_id,
                worker = %req.tfdata_worker_address,
                provider = p,
                repetition = req.repetition,
                sequence,
                "GetSplit repeated: the same answer again"
            );
            txn.commit().await?;
            return Ok(answer);
        }
        // Splits a lost worker held are handed out first, to whichever
        // repetition asks: they must be produced once, wherever.
        let returned = it
            .returned_splits
            .get(&pass.provider)
            .and_then(|q| q.front())
            .map(|r| (r.split.clone(), r.index, r.repetition, r.skip.ranges()));
        if let Some((encoded, index, repetition, skip)) = returned {
            let split = decode_split(&encoded)?;
            txn.apply(UpdateType::ProduceSplit(wire::ProduceSplitUpdate {
                iteration_id: req.iteration_id,
                repetition: req.repetition,
                split_provider_index: req.split_provider_index,
                finished: false,
                tfdata_worker_address: req.tfdata_worker_address.clone(),
                tfdata_split_sequence: req.tfdata_split_sequence,
                tfdata_split: Some(split.clone()),
                tfdata_from_returned: true,
                tfdata_delivered: req.tfdata_delivered.clone(),
                tfdata_task_id: req.tfdata_task_id,
                tfdata_more_splits: Vec::new(),
                tfdata_first_index: None,
            }))?;
            txn.commit().await?;
            tracing::debug!(
                task = req.tfdata_task_id,
                worker = %req.tfdata_worker_address,
                provider = p,
                repetition = req.repetition,
                sequence = ?req.tfdata_split_sequence,
                "GetSplit: a lost worker's split handed out again"
            );
            self.metrics().splits_handed_out(true, 1);
            let mut answer = lease_response(Some(split), Vec::new(), index, repetition);
            // Positions readers already received: the worker drops them.
            answer.tfdata_skip = skip;
            answer.tfdata_delivered_recorded = true;
            return Ok(answer);
        }
        let current = it.split_repetitions[p];
        if pass.repetition < current {
            // That repetition is over for everyone.
            txn.commit().await?;
            return Ok(end_of_splits());
        }
        let provider = txn
            .split_providers
            .get(&iteration_id)
            .and_then(|v| v.get(p))
            .ok_or_else(|| {
                Error::Internal(format!("iteration {iteration_id} lost split provider {p}"))
            })?;
        let mut index = if pass.repetition > current {
            provider.reset()?;
            0
        } else {
            it.split_indices[p]
        };
        // A restored reader's iteration never hands out the splits it had
        // consumed: skip past them, and end the lease before the next.
        let consumed = it.consumed.get(&pass);
        let mut first_index = None;
        if let Some(end) = consumed.and_then(|c| c.covering(index)) {
            provider.skip(end.saturating_sub(index) as u64)?;
            index = end;
            first_index = Some(end);
        }
        let room = consumed
            .and_then(|c| c.next_after(index))
            .map_or(usize::MAX, |next| next.saturating_sub(index) as usize);
        // A split it consumed part of goes out first in its lease, with the
        // positions to skip (`GetSplitResponse.tfdata_skip` is the first
        // split's): the lease ends before the next one.
        let name = |index| SplitName {
            provider: pass.provider,
            repetition: pass.repetition,
            index,
        };
        let skip = it
            .consumed_pieces
            .get(&name(index))
            .map(|s| s.ranges())
            .unwrap_or_default();
        let room = it
            .consumed_pieces
            .range(name(index.saturating_add(1))..)
            .next()
            .filter(|(next, _)| next.pass() == pass)
            .map_or(room, |(next, _)| {
                room.min(next.index.saturating_sub(index) as usize)
            });
        let (split, more_splits, finished) =
            take_lease(provider.as_ref(), lease_size(req).min(room).max(1))?;
        if finished {
            // Ready for the next repetition.
            provider.reset()?;
        }
        let leased = more_splits.len();
        txn.apply(UpdateType::ProduceSplit(wire::ProduceSplitUpdate {
            iteration_id: req.iteration_id,
            repetition: req.repetition,
            split_provider_index: req.split_provider_index,
            finished,
            tfdata_worker_address: req.tfdata_worker_address.clone(),
            tfdata_split_sequence: req.tfdata_split_sequence,
            tfdata_split: split
                .clone()
                .filter(|_| req.tfdata_split_sequence.is_some()),
            tfdata_from_returned: false,
            tfdata_delivered: req.tfdata_delivered.clone(),
            tfdata_task_id: req.tfdata_task_id,
            tfdata_more_splits: more_splits.clone(),
            tfdata_first_index: first_index,
        }))?;
        txn.commit().await?;
        tracing::debug!(
            task = req.tfdata_task_id,
            worker = %req.tfdata_worker_address,
            provider = p,
            repetition = req.repetition,
            sequence = ?req.tfdata_split_sequence,
            index,
            leased = leased + usize::from(split.is_some()),
            finished,
            delivered = req.tfdata_delivered.len(),
            "GetSplit answered"
        );
        if split.is_some() {
            self.metrics().splits_handed_out(false, 1 + leased as u64);
        }
        let mut answer = lease_response(split, more_splits, index, pass.repetition);
        if answer.split.is_some() {
            answer.tfdata_skip = skip;
        }
        answer.tfdata_delivered_recorded = true;
        Ok(answer)
    }
}

/// A split kept encoded in the state (a held or returned split).
fn decode_split(encoded: &[u8]) -> Result<tfdata_proto::tensorflow::TensorProto> {
    prost::Message::decode(encoded).map_err(|e| Error::DataLoss {
        location: "the dispatcher's state".into(),
        reason: format!("a returned split is not a TensorProto: {e}"),
    })
}

/// How many splits a request may lease: one, unless a tfdata worker's task
/// asks for more with sequence numbers to name them (TensorFlow's workers
/// never do).
fn lease_size(req: &wire::GetSplitRequest) -> usize {
    match (req.tfdata_max_splits, req.tfdata_split_sequence) {
        (Some(max), Some(_)) if req.tfdata_task_id != 0 => {
            max.clamp(1, MAX_SPLITS_PER_LEASE) as usize
        }
        _ => 1,
    }
}

/// Up to `n` splits from `provider`: the first, the rest of the lease, and
/// whether the repetition ended (then there may be fewer). A provider that
/// fails after some splits keeps its error for the next request: the splits
/// already taken go out rather than vanish.
fn take_lease(
    provider: &dyn SplitProvider,
    n: usize,
) -> Result<(
    Option<tfdata_proto::tensorflow::TensorProto>,
    Vec<bytes::Bytes>,
    bool,
)> {
    let Some(first) = provider.get_next()? else {
        return Ok((None, Vec::new(), true));
    };
    let first = tfdata_core::element::tensor_to_proto(&first);
    let mut more = Vec::with_capacity(n.saturating_sub(1).min(64));
    let mut finished = false;
    while more.len() + 1 < n {
        match provider.get_next() {
            Ok(Some(split)) => more.push(bytes::Bytes::from(prost::Message::encode_to_vec(
                &tfdata_core::element::tensor_to_proto(&split),
            ))),
            Ok(None) => {
                finished = true;
                break;
            }
            Err(e) => {
                tracing::warn!(error = %e, leased = more.len() + 1, "a split provider failed within a lease; the lease ends here");
                break;
            }
        }
    }
    Ok((Some(first), more, finished))
}

/// Fresh split providers for the sources of `def` (a tfdata pipeline or a
/// TensorFlow graph), in depth-first order. Blocking: it may glob.
pub(crate) fn split_providers_for(def: &wire::DatasetDef) -> Result<Vec<Box<dyn SplitProvider>>> {
    let Some(pipeline) = &def.tfdata_pipeline else {
        // A TensorFlow graph: its sources' constant inputs give the splits.
        return crate::tf_graph::split_providers(&def.graph);
    };
    let dataset = tfdata_dataset::pipeline::from_pipeline_def(pipeline)?;
    dataset
        .sources()
        .iter()
        .map(|source| match source.op().split_provider() {
            Some(provider) => provider,
            None => Err(Error::InvalidArgument(format!(
                "distributed_epoch: the dataset's source `{}` cannot be split dynamically \
                 (splittable sources: range, from_tensors, from_tensor_slices, list_files, \
                 tfrecord_dataset, text_line_dataset, fixed_length_record_dataset, load, \
                 parquet_dataset, arrow_dataset, huggingface_dataset, webdataset, \
                 array_record_dataset, random)",
                source.op().name()
            ))),
        })
        .collect()
}

/// The end of splits.
fn end_of_splits() -> wire::GetSplitResponse {
    lease_response(None, Vec::new(), 0, Repetition(0))
}

/// A lease's splits (`split` first, named by `first_index` on in
/// `repetition`), or the end of splits.
fn lease_response(
    split: Option<tfdata_proto::tensorflow::TensorProto>,
    more_splits: Vec<bytes::Bytes>,
    first_index: i64,
    repetition: Repetition,
) -> wire::GetSplitResponse {
    wire::GetSplitResponse {
        end_of_splits: split.is_none(),
        split,
        tfdata_more_splits: more_splits,
        tfdata_first_index: first_index,
        tfdata_split_repetition: repetition.0,
        tfdata_skip: Vec::new(),
        tfdata_delivered_recorded: false,
    }
}
