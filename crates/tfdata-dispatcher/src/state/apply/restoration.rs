//! Checkpoints and restorations: `CheckpointTaken`, `JoinRestore`, and the
//! checks of what a restored reader consumed (also `CreateIteration`'s).

use std::collections::BTreeMap;

use tfdata_core::positions::PositionSet;
use tfdata_core::ranges::IndexRanges;
use tfdata_core::{IterationClientId, IterationId, Result};
use tfdata_proto::data::{CheckpointTakenUpdate, JoinRestoreUpdate};

use super::{bad, iteration_mut};
use crate::state::{
    DispatcherState, MAX_RESTORATION_CONSUMERS, ProviderIndex, ProviderPass, Repetition, SplitName,
    WorkerAddress,
};

impl DispatcherState {
    pub(super) fn apply_checkpoint_taken(&mut self, u: &CheckpointTakenUpdate) -> Result<()> {
        let client = IterationClientId(u.iteration_client_id);
        let id = *self
            .clients
            .get(&client)
            .ok_or_else(|| bad("checkpoint_taken", format!("unknown client {}", client.0)))?;
        iteration_mut(&mut self.iterations, "checkpoint_taken", id)?
            .checkpointers
            .insert(client.0);
        Ok(())
    }

    pub(super) fn apply_join_restore(&mut self, u: &JoinRestoreUpdate) -> Result<()> {
        let it = iteration_mut(
            &mut self.iterations,
            "join_restore",
            IterationId(u.iteration_id),
        )?;
        let providers = it.split_indices.len();
        // Every check before any change.
        let consumed = consumed_splits("join_restore", &u.consumed, providers)?;
        let pieces = consumed_pieces("join_restore", &u.consumed_pieces, providers)?;
        let elements = consumed_elements("join_restore", &u.consumed_elements)?;
        if !(1..=MAX_RESTORATION_CONSUMERS).contains(&u.consumers) {
            return Err(bad(
                "join_restore",
                format!("a checkpoint of {} consumers", u.consumers),
            ));
        }
        if !it.gathering() {
            return Err(bad(
                "join_restore",
                format!(
                    "iteration {} is not a restoration waiting for consumers",
                    it.id
                ),
            ));
        }
        // Nothing was handed out while it gathered: the union is
        // what it skips.
        for (key, ranges) in consumed {
            it.consumed.entry(key).or_default().union_with(&ranges);
        }
        for (key, positions) in pieces {
            it.consumed_pieces
                .entry(key)
                .or_default()
                .union_with(&positions);
        }
        for (worker, ranges) in elements {
            it.consumed_elements
                .entry(worker)
                .or_default()
                .union_with(&ranges);
        }
        if let Some(r) = &mut it.restoration {
            r.expected = r.expected.max(u.consumers);
            r.joined.insert(u.origin_client_id, u.client_id);
        }
        Ok(())
    }
}

/// A restored parallel_epochs consumer's elements, per worker, checked.
pub(crate) fn consumed_elements(
    what: &'static str,
    ranges: &[tfdata_proto::data::TfdataWorkerRanges],
) -> Result<BTreeMap<WorkerAddress, IndexRanges>> {
    let mut consumed = BTreeMap::new();
    for w in ranges {
        if w.worker_address.is_empty() || w.worker_address.len() > MAX_WORKER_ADDRESS_BYTES {
            return Err(bad(
                what,
                "a consumed-elements entry without a worker address".into(),
            ));
        }
        // Refuses negative indices too.
        let ranges = IndexRanges::from_bounds(&w.bounds).map_err(|e| bad(what, e.to_string()))?;
        if !ranges.is_empty() {
            consumed.insert(w.worker_address.clone().into(), ranges);
        }
    }
    Ok(consumed)
}

/// Longest worker address a consumed-elements entry may name.
const MAX_WORKER_ADDRESS_BYTES: usize = 4096;

/// A restored reader's consumed splits, checked against the iteration's
/// `providers` split providers.
pub(super) fn consumed_splits(
    what: &'static str,
    ranges: &[tfdata_proto::data::TfdataSplitRanges],
    providers: usize,
) -> Result<BTreeMap<ProviderPass, IndexRanges>> {
    let mut consumed = BTreeMap::new();
    for c in ranges {
        if !(usize::try_from(c.provider).is_ok_and(|p| p < providers) && c.repetition >= 0) {
            return Err(bad(
                what,
                format!("consumed splits of provider {}", c.provider),
            ));
        }
        let ranges = IndexRanges::from_bounds(&c.bounds).map_err(|e| bad(what, e.to_string()))?;
        if !ranges.is_empty() {
            consumed.insert(
                ProviderPass {
                    provider: ProviderIndex(c.provider),
                    repetition: Repetition(c.repetition),
                },
                ranges,
            );
        }
    }
    Ok(consumed)
}

/// A restored reader's consumed parts of splits, checked.
pub(super) fn consumed_pieces(
    what: &'static str,
    pieces: &[tfdata_proto::data::TfdataSplitPieces],
    providers: usize,
) -> Result<BTreeMap<SplitName, PositionSet>> {
    let mut consumed: BTreeMap<SplitName, PositionSet> = BTreeMap::new();
    for p in pieces {
        let n = p
            .split
            .as_ref()
            .filter(|n| {
                usize::try_from(n.provider).is_ok_and(|p| p < providers)
                    && n.repetition >= 0
                    && n.index >= 0
            })
            .ok_or_else(|| bad(what, format!("consumed parts of split {:?}", p.split)))?;
        let positions =
            PositionSet::from_ranges(&p.positions).map_err(|e| bad(what, e.to_string()))?;
        if !positions.is_empty() {
            consumed
                .entry(SplitName::from(n))
                .or_default()
                .union_with(&positions);
        }
    }
    Ok(consumed)
}
