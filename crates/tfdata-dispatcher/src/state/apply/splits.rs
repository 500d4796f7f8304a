//! Splits of distributed_epoch iterations: `ProduceSplit` (a split or a
//! lease of splits handed to a worker's task, or a lost worker's split
//! handed out again) and `ReceiveSplits` (what readers received of a lost
//! task's splits).

use std::collections::{BTreeMap, BTreeSet};

use tfdata_core::positions::PositionSet;
use tfdata_core::ranges::IndexRanges;
use tfdata_core::{IterationClientId, IterationId, Result, TaskId};
use tfdata_proto::data::{ProduceSplitUpdate, ReceiveSplitsUpdate};

use super::{all_delivered, bad, iteration_mut};
use crate::state::{
    DispatcherState, HeldSplit, HeldSplitKey, Iteration, LastSplit, ProviderIndex, ProviderPass,
    Repetition, ReturnedSplit, SplitName, SplitRequester, Task,
};

impl DispatcherState {
    pub(super) fn apply_produce_split(&mut self, u: &ProduceSplitUpdate) -> Result<()> {
        // Lanes number their own splits: the dispatcher hands out none.
        if self.is_deterministic(IterationId(u.iteration_id)) {
            return Err(bad(
                "produce_split",
                format!("iteration {} is a deterministic read's", u.iteration_id),
            ));
        }
        let it = iteration_mut(
            &mut self.iterations,
            "produce_split",
            IterationId(u.iteration_id),
        )?;
        // Every check before any change: an error leaves the state as it was.
        let Checked {
            provider: p,
            cursor,
        } = check_produce_split(it, &self.tasks, u)?;
        let task = TaskId(u.tfdata_task_id);
        // The record's integers, typed once.
        let provider = ProviderIndex(u.split_provider_index);
        let repetition = Repetition(u.repetition);
        for d in &u.tfdata_delivered {
            it.held_splits.remove(&HeldSplitKey {
                task,
                provider,
                repetition: Repetition(d.repetition),
                sequence: d.sequence,
            });
        }
        // The first split's name and the positions to skip in it.
        let fresh_first = u.tfdata_first_index.unwrap_or(cursor);
        let (split_repetition, first_index, skip) = if u.tfdata_from_returned {
            // The queue has a split (checked).
            it.take_returned(provider)
                .map(|r| (r.repetition, r.index, r.skip))
                .unwrap_or((repetition, fresh_first, PositionSet::default()))
        } else {
            // A fresh split a restored reader consumed part of goes out
            // first in its lease (`GetSplit` ends leases before one), so
            // the answer's positions are the first split's.
            let skip = it
                .consumed_pieces
                .get(&SplitName {
                    provider,
                    repetition,
                    index: fresh_first,
                })
                .cloned()
                .unwrap_or_default();
            (repetition, fresh_first, skip)
        };
        if let (Some(sequence), Some(split)) = (u.tfdata_split_sequence, &u.tfdata_split)
            && u.tfdata_task_id != 0
        {
            // A lease's splits have consecutive sequence numbers.
            let first = bytes::Bytes::from(prost::Message::encode_to_vec(split));
            for (i, split) in std::iter::once(&first)
                .chain(&u.tfdata_more_splits)
                .enumerate()
            {
                it.held_splits.insert(
                    HeldSplitKey {
                        task,
                        provider,
                        repetition,
                        sequence: sequence.saturating_add(i as i64),
                    },
                    HeldSplit {
                        produced_in: split_repetition,
                        index: first_index.saturating_add(i as i64),
                        split: split.clone(),
                        // A returned split goes out alone.
                        skip: if i == 0 {
                            skip.clone()
                        } else {
                            PositionSet::default()
                        },
                    },
                );
            }
        }
        if let Some(sequence) = u.tfdata_split_sequence {
            it.last_splits.insert(
                SplitRequester {
                    provider,
                    worker: u.tfdata_worker_address.clone().into(),
                },
                LastSplit {
                    repetition,
                    sequence,
                    split: u.tfdata_split.clone(),
                    more_splits: u.tfdata_more_splits.clone(),
                    first_index,
                    split_repetition,
                    skip: skip.ranges(),
                },
            );
        }
        if u.tfdata_from_returned {
            // Re-issued a lost worker's split: the cursor does not move.
            return Ok(());
        }
        it.split_repetitions[p] = repetition;
        if u.finished {
            it.split_repetitions[p].0 += 1;
            it.split_indices[p] = 0;
        } else {
            let produced = 1 + u.tfdata_more_splits.len() as i64;
            it.split_indices[p] = first_index.saturating_add(produced);
        }
        Ok(())
    }

    /// `ReceiveSplitsUpdate`: the splits the client received whole from the
    /// lost task stop being held; the rest go back to the pool once every
    /// awaited reader has reported.
    pub(super) fn apply_receive_splits(&mut self, u: &ReceiveSplitsUpdate) -> Result<()> {
        let client = IterationClientId(u.iteration_client_id);
        let task = TaskId(u.task_id);
        let iteration = self
            .clients
            .get(&client)
            .copied()
            .ok_or_else(|| bad("receive_splits", format!("unknown client {client}")))?;
        let ending = self.ending(iteration);
        let it = iteration_mut(&mut self.iterations, "receive_splits", iteration)?;
        if !it.awaits_receipts(task, client) {
            return Err(bad(
                "receive_splits",
                format!("task {task} does not wait for client {client}'s receipts"),
            ));
        }
        // Every part of the report checked before anything changes.
        let receipts = Receipts::read(u)?;
        let received: Vec<HeldSplitKey> = it
            .held_splits
            .range(HeldSplitKey::all_of(task))
            .filter(|(k, h)| receipts.received_whole(&held_name(k, h)))
            .map(|(k, _)| *k)
            .collect();
        for key in received {
            it.held_splits.remove(&key);
        }
        // The rest are produced again without the parts readers hold.
        if !receipts.pieces.is_empty() {
            for (key, held) in it.held_splits.range_mut(HeldSplitKey::all_of(task)) {
                if let Some(p) = receipts.pieces.get(&held_name(key, held)) {
                    held.skip.union_with(p);
                }
            }
        }
        it.receipts_in(task, client);
        it.finished = all_delivered(it, &self.tasks, ending);
        Ok(())
    }
}

/// What `ProduceSplit`'s checks found.
struct Checked {
    /// The provider's position in the iteration's split cursors.
    provider: usize,
    /// Where the provider's fresh splits continue (of a new repetition: 0).
    cursor: i64,
}

/// `ProduceSplit`'s preconditions against iteration `it`.
fn check_produce_split(
    it: &Iteration,
    tasks: &BTreeMap<TaskId, Task>,
    u: &ProduceSplitUpdate,
) -> Result<Checked> {
    let p = usize::try_from(u.split_provider_index)
        .ok()
        .filter(|&p| p < it.split_indices.len() && p < it.split_repetitions.len())
        .ok_or_else(|| {
            bad(
                "produce_split",
                format!("bad provider {}", u.split_provider_index),
            )
        })?;
    if u.tfdata_from_returned
        && it
            .returned_splits
            .get(&ProviderIndex(u.split_provider_index))
            .is_none_or(|q| q.is_empty())
    {
        return Err(bad("produce_split", "no returned split to re-issue".into()));
    }
    // A lease is fresh splits after a first one, named by a
    // sequence number; a returned split goes out alone.
    if !u.tfdata_more_splits.is_empty()
        && (u.tfdata_from_returned || u.tfdata_split.is_none() || u.tfdata_split_sequence.is_none())
    {
        return Err(bad(
            "produce_split",
            "a lease of splits without a first split and sequence number, or of \
             returned splits"
                .into(),
        ));
    }
    let task = TaskId(u.tfdata_task_id);
    // Held splits belong to a task of this iteration; one of
    // an unknown task would never be returned.
    if u.tfdata_task_id != 0 && tasks.get(&task).is_none_or(|t| t.iteration_id != it.id) {
        return Err(bad(
            "produce_split",
            format!("task {task} is not a task of iteration {}", it.id),
        ));
    }
    // The first split's name: a returned split keeps its own; a
    // fresh lease starts at the cursor (of a new repetition: 0),
    // or past consumed splits where the request says.
    let cursor = if Repetition(u.repetition) > it.split_repetitions[p] {
        0
    } else {
        it.split_indices[p]
    };
    if !u.tfdata_from_returned && u.tfdata_first_index.is_some_and(|f| f < cursor) {
        return Err(bad(
            "produce_split",
            format!(
                "a lease from index {:?} behind the cursor {cursor}",
                u.tfdata_first_index
            ),
        ));
    }
    Ok(Checked {
        provider: p,
        cursor,
    })
}

impl Iteration {
    /// The next of `provider`'s returned splits, taken from its queue.
    fn take_returned(&mut self, provider: ProviderIndex) -> Option<ReturnedSplit> {
        let queue = self.returned_splits.get_mut(&provider)?;
        let returned = queue.pop_front();
        // No empty queues: the state has one form (as a compaction restores it).
        if queue.is_empty() {
            self.returned_splits.remove(&provider);
        }
        returned
    }
}

/// A reader's `ReceiveSplitsUpdate`, checked: the splits it received whole
/// (by name or in ranges of indices) and the parts it received of others.
struct Receipts {
    names: BTreeSet<SplitName>,
    ranges: BTreeMap<ProviderPass, IndexRanges>,
    pieces: BTreeMap<SplitName, PositionSet>,
}

impl Receipts {
    fn read(u: &ReceiveSplitsUpdate) -> Result<Self> {
        let names = u.splits.iter().map(SplitName::from).collect();
        let mut ranges: BTreeMap<ProviderPass, IndexRanges> = BTreeMap::new();
        for r in &u.ranges {
            let set = IndexRanges::from_bounds(&r.bounds)
                .map_err(|e| bad("receive_splits", e.to_string()))?;
            ranges
                .entry(ProviderPass {
                    provider: ProviderIndex(r.provider),
                    repetition: Repetition(r.repetition),
                })
                .or_default()
                .union_with(&set);
        }
        let mut pieces: BTreeMap<SplitName, PositionSet> = BTreeMap::new();
        for p in &u.pieces {
            let n = p.split.as_ref().ok_or_else(|| {
                bad(
                    "receive_splits",
                    "split pieces without their split's name".into(),
                )
            })?;
            let positions = PositionSet::from_ranges(&p.positions)
                .map_err(|e| bad("receive_splits", e.to_string()))?;
            pieces
                .entry(SplitName::from(n))
                .or_default()
                .union_with(&positions);
        }
        Ok(Receipts {
            names,
            ranges,
            pieces,
        })
    }

    fn received_whole(&self, split: &SplitName) -> bool {
        self.names.contains(split)
            || self
                .ranges
                .get(&split.pass())
                .is_some_and(|r| r.covering(split.index).is_some())
    }
}

/// A held split's name: its provider, and its repetition and index where
/// it was produced.
fn held_name(key: &HeldSplitKey, held: &HeldSplit) -> SplitName {
    SplitName {
        provider: key.provider,
        repetition: held.produced_in,
        index: held.index,
    }
}
