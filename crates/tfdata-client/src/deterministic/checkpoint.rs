//! A deterministic read's checkpoints (proto `DeterministicPosition`): per
//! own lane the index of the first element not consumed (and whether the
//! lane ended), with K, the seed, the epoch, the consumer (c of n) and its
//! steps. [`merge_checkpoints`] joins one step's checkpoints of all the
//! consumers into one that lists every lane (num_consumers 0), which
//! restores on consumer c' of any m dividing K.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use prost::Message;
use tfdata_core::{Error, Result};
use tfdata_proto::tfdata::checkpoint::{DeterministicPosition, LanePosition, ReaderCheckpoint};

use super::Deterministic;
use crate::checkpoint::{DatasetIdentity, FORMAT_VERSION, MAX_CHECKPOINT_BYTES};

/// Where a read's lanes start: from a checkpoint, or from 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LaneStart {
    pub epoch: u64,
    /// Own lane -> (first index wanted, ended).
    pub lanes: BTreeMap<u32, (i64, bool)>,
}

impl LaneStart {
    /// A fresh read of `epoch`: every own lane from its first element.
    pub(crate) fn fresh(setting: &Deterministic, epoch: u64) -> Self {
        LaneStart {
            epoch,
            lanes: setting
                .own_lanes()
                .into_iter()
                .map(|k| (k, (0, false)))
                .collect(),
        }
    }
}

/// What a consumer consumed of its lanes (its checkpoint).
#[derive(Debug)]
pub(crate) struct Consumed {
    setting: Deterministic,
    epoch: u64,
    /// Own lane -> first index not consumed, and whether it had ended
    /// when the read (or restore) began.
    next: BTreeMap<u32, (i64, bool)>,
    /// Lanes whose end the driver read, with their length.
    ends: Arc<Mutex<HashMap<u32, i64>>>,
    steps: u64,
}

impl Consumed {
    pub(crate) fn new(
        setting: Deterministic,
        start: &LaneStart,
        ends: Arc<Mutex<HashMap<u32, i64>>>,
    ) -> Self {
        Consumed {
            setting,
            epoch: start.epoch,
            next: start.lanes.clone(),
            ends,
            steps: 0,
        }
    }

    /// The element at `index` of `lane` was taken.
    pub(crate) fn consumed(&mut self, lane: u32, index: i64) {
        if let Some((next, _)) = self.next.get_mut(&lane) {
            *next = index + 1;
        }
        self.steps += 1;
    }

    pub(crate) fn encode(&self, dataset: DatasetIdentity<'_>) -> Vec<u8> {
        let ends = self.ends.lock().unwrap_or_else(|p| p.into_inner());
        let positions = self
            .next
            .iter()
            .map(|(lane, (next, ended_before))| LanePosition {
                lane: i64::from(*lane),
                next_index: *next,
                ended: *ended_before || ends.get(lane).is_some_and(|end| *next >= *end),
            })
            .collect();
        ReaderCheckpoint {
            format_version: FORMAT_VERSION,
            dataset_id: dataset.id.to_string(),
            processing_mode: dataset.mode.to_string(),
            dataset_fingerprint: dataset.fingerprint,
            deterministic: Some(DeterministicPosition {
                lanes: i64::from(self.setting.lanes),
                split_shuffle_seed: self.setting.split_shuffle_seed,
                epoch: self.epoch,
                consumer_index: i64::from(self.setting.consumer_index),
                num_consumers: i64::from(self.setting.num_consumers),
                positions,
                steps: self.steps,
            }),
            ..Default::default()
        }
        .encode_to_vec()
    }
}

/// A checkpoint's bytes, decoded, with its deterministic position.
fn decode(bytes: &[u8]) -> Result<(ReaderCheckpoint, DeterministicPosition)> {
    if bytes.len() > MAX_CHECKPOINT_BYTES {
        return Err(Error::InvalidArgument(format!(
            "reader checkpoint of {} bytes is over the {MAX_CHECKPOINT_BYTES}-byte limit",
            bytes.len()
        )));
    }
    let mut checkpoint = ReaderCheckpoint::decode(bytes)
        .map_err(|e| Error::InvalidArgument(format!("not a tfdata reader checkpoint: {e}")))?;
    if checkpoint.format_version != FORMAT_VERSION {
        return Err(Error::InvalidArgument(format!(
            "reader checkpoint format {} is not supported (this reader reads format \
             {FORMAT_VERSION})",
            checkpoint.format_version
        )));
    }
    let Some(position) = checkpoint.deterministic.take() else {
        return Err(Error::InvalidArgument(
            "the reader checkpoint is not of a deterministic read".into(),
        ));
    };
    if !(1..=i64::from(super::MAX_LANES)).contains(&position.lanes) {
        return Err(Error::InvalidArgument(format!(
            "reader checkpoint names {} lanes",
            position.lanes
        )));
    }
    for p in &position.positions {
        if !(0..position.lanes).contains(&p.lane) || p.next_index < 0 {
            return Err(Error::InvalidArgument(format!(
                "reader checkpoint has an invalid position {} for lane {}",
                p.next_index, p.lane
            )));
        }
    }
    Ok((checkpoint, position))
}

/// Where a deterministic read restoring `bytes` starts its own lanes.
pub(crate) fn restore_start(
    bytes: &[u8],
    dataset: DatasetIdentity<'_>,
    setting: &Deterministic,
) -> Result<LaneStart> {
    let (checkpoint, position) = decode(bytes)?;
    if checkpoint.dataset_fingerprint != dataset.fingerprint {
        return Err(Error::InvalidArgument(format!(
            "the reader checkpoint is of another dataset (dataset {:?} when it was taken, with a \
             different definition from this read's dataset {:?})",
            checkpoint.dataset_id, dataset.id
        )));
    }
    if position.lanes != i64::from(setting.lanes)
        || position.split_shuffle_seed != setting.split_shuffle_seed
    {
        return Err(Error::InvalidArgument(format!(
            "the reader checkpoint is of a deterministic read with {} lanes and split shuffle \
             seed {:?}; this read has {} lanes and seed {:?}",
            position.lanes, position.split_shuffle_seed, setting.lanes, setting.split_shuffle_seed
        )));
    }
    let (c, n) = (
        i64::from(setting.consumer_index),
        i64::from(setting.num_consumers),
    );
    if position.num_consumers != 0 && (position.consumer_index, position.num_consumers) != (c, n) {
        return Err(Error::InvalidArgument(format!(
            "the reader checkpoint was taken by consumer {} of {}; this read is consumer {c} of \
             {n}. A consumer's own checkpoint restores only into the same consumer: merge the \
             checkpoints of all the consumers first (merge_checkpoints), then restore the merged \
             one on any number of consumers that divides the lanes",
            position.consumer_index, position.num_consumers
        )));
    }
    let listed: BTreeMap<u32, (i64, bool)> = position
        .positions
        .iter()
        .map(|p| (p.lane as u32, (p.next_index, p.ended)))
        .collect();
    let mut start = LaneStart {
        epoch: position.epoch,
        lanes: BTreeMap::new(),
    };
    for lane in setting.own_lanes() {
        let Some(at) = listed.get(&lane) else {
            return Err(Error::InvalidArgument(format!(
                "the reader checkpoint does not list lane {lane}, which this consumer reads"
            )));
        };
        start.lanes.insert(lane, *at);
    }
    Ok(start)
}

/// Joins the checkpoints that all the consumers of one deterministic read
/// took at the same step into one that lists every lane: it restores on
/// consumer c' of any m that divides the lanes. Refuses checkpoints of
/// different reads, epochs or steps, and sets that miss a lane or list one
/// twice.
pub fn merge_checkpoints(checkpoints: &[&[u8]]) -> Result<Vec<u8>> {
    let decoded = checkpoints
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            decode(bytes).map_err(|e| Error::InvalidArgument(format!("checkpoint {i}: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let Some((first, first_position)) = decoded.first() else {
        return Err(Error::InvalidArgument("no checkpoints to merge".into()));
    };
    let describe = |c: &ReaderCheckpoint, p: &DeterministicPosition| {
        format!(
            "dataset {:?} (fingerprint {:#x}), {}, {} lanes, split shuffle seed {:?}, epoch {}",
            c.dataset_id,
            c.dataset_fingerprint,
            c.processing_mode,
            p.lanes,
            p.split_shuffle_seed,
            p.epoch
        )
    };
    let mut owner: BTreeMap<i64, usize> = BTreeMap::new();
    for (i, (c, p)) in decoded.iter().enumerate() {
        if c.dataset_fingerprint != first.dataset_fingerprint
            || c.processing_mode != first.processing_mode
            || p.lanes != first_position.lanes
            || p.split_shuffle_seed != first_position.split_shuffle_seed
            || p.epoch != first_position.epoch
        {
            return Err(Error::InvalidArgument(format!(
                "checkpoints of different reads: checkpoint 0 is of {}, checkpoint {i} of {}",
                describe(first, first_position),
                describe(c, p)
            )));
        }
        if p.num_consumers == 0 && decoded.len() > 1 {
            return Err(Error::InvalidArgument(format!(
                "checkpoint {i} is merged already; merge the consumers' own checkpoints"
            )));
        }
        for lane in &p.positions {
            if let Some(other) = owner.insert(lane.lane, i) {
                return Err(Error::InvalidArgument(format!(
                    "lane {} is in checkpoints {other} and {i}: each consumer's checkpoint \
                     once, please",
                    lane.lane
                )));
            }
        }
    }
    let missing: Vec<i64> = (0..first_position.lanes)
        .filter(|k| !owner.contains_key(k))
        .collect();
    if !missing.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "the checkpoints cover {} of {} lanes; lanes {missing:?} are missing: merge the \
             checkpoints of every consumer",
            owner.len(),
            first_position.lanes
        )));
    }
    let most = decoded.iter().map(|(_, p)| p.steps).max().unwrap_or(0);
    let behind = decoded
        .iter()
        .any(|(_, p)| p.steps != most && !p.positions.iter().all(|l| l.ended));
    if behind {
        let steps: Vec<String> = decoded
            .iter()
            .map(|(_, p)| {
                format!(
                    "consumer {} of {}: {} steps",
                    p.consumer_index, p.num_consumers, p.steps
                )
            })
            .collect();
        return Err(Error::FailedPrecondition(format!(
            "the checkpoints were taken at different steps ({}); merge checkpoints that every \
             consumer took at the same step",
            steps.join(", ")
        )));
    }
    let mut positions: Vec<LanePosition> = decoded
        .iter()
        .flat_map(|(_, p)| p.positions.iter().cloned())
        .collect();
    positions.sort_by_key(|p| p.lane);
    Ok(ReaderCheckpoint {
        format_version: FORMAT_VERSION,
        dataset_id: first.dataset_id.clone(),
        processing_mode: first.processing_mode.clone(),
        dataset_fingerprint: first.dataset_fingerprint,
        deterministic: Some(DeterministicPosition {
            lanes: first_position.lanes,
            split_shuffle_seed: first_position.split_shuffle_seed,
            epoch: first_position.epoch,
            consumer_index: 0,
            num_consumers: 0,
            positions,
            steps: decoded.iter().map(|(_, p)| p.steps).sum(),
        }),
        ..Default::default()
    }
    .encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::ProcessingMode;

    const DATASET: DatasetIdentity<'static> = DatasetIdentity {
        id: "7",
        fingerprint: 42,
        mode: ProcessingMode::DistributedEpoch,
    };

    fn setting(c: u32, n: u32) -> Deterministic {
        Deterministic {
            lanes: 4,
            consumer_index: c,
            num_consumers: n,
            split_shuffle_seed: Some(9),
            ..Default::default()
        }
    }

    /// Consumer c of n's checkpoint after taking `steps` elements in q order.
    fn taken(c: u32, n: u32, steps: u64) -> Vec<u8> {
        let s = setting(c, n);
        let mut consumed = Consumed::new(s, &LaneStart::fresh(&s, 3), Default::default());
        let lanes = s.own_lanes();
        for i in 0..steps as usize {
            consumed.consumed(lanes[i % lanes.len()], (i / lanes.len()) as i64);
        }
        consumed.encode(DATASET)
    }

    #[test]
    fn merged_checkpoints_restore_on_any_divisor_and_own_ones_only_on_their_consumer() {
        let (a, b) = (taken(0, 2, 5), taken(1, 2, 5));
        let merged = merge_checkpoints(&[&b, &a]).unwrap();
        let on = |c, n| restore_start(&merged, DATASET, &setting(c, n)).unwrap();
        // Consumer 0 of 2 took lanes 0,2,0,2,0: lane 0 at 3, lane 2 at 2.
        let all = on(0, 1);
        assert_eq!(all.epoch, 3);
        let next: Vec<i64> = all.lanes.values().map(|(n, _)| *n).collect();
        assert_eq!(next, [3, 3, 2, 2]);
        assert_eq!(on(3, 4).lanes.keys().copied().collect::<Vec<_>>(), [3]);
        assert!(restore_start(&a, DATASET, &setting(0, 2)).is_ok());
        let err = restore_start(&a, DATASET, &setting(0, 4))
            .unwrap_err()
            .to_string();
        assert!(err.contains("merge the checkpoints"), "{err}");
        let other = DatasetIdentity {
            fingerprint: 1,
            ..DATASET
        };
        assert!(restore_start(&merged, other, &setting(0, 1)).is_err());
    }

    #[test]
    fn merging_refuses_other_steps_missing_consumers_and_mixed_reads() {
        let err = merge_checkpoints(&[&taken(0, 2, 5), &taken(1, 2, 4)]).unwrap_err();
        assert_eq!(err.code(), tonic::Code::FailedPrecondition);
        assert!(
            err.to_string().contains("consumer 0 of 2: 5 steps"),
            "{err}"
        );
        assert!(
            err.to_string().contains("consumer 1 of 2: 4 steps"),
            "{err}"
        );
        let err = merge_checkpoints(&[&taken(0, 2, 5)])
            .unwrap_err()
            .to_string();
        assert!(err.contains("lanes [1, 3] are missing"), "{err}");
        let err = merge_checkpoints(&[&taken(0, 2, 5), &taken(0, 2, 5)]).unwrap_err();
        assert!(
            err.to_string().contains("lane 0 is in checkpoints 0 and 1"),
            "{err}"
        );
        let mut other_seed = setting(1, 2);
        other_seed.split_shuffle_seed = None;
        let mut c = Consumed::new(
            other_seed,
            &LaneStart::fresh(&other_seed, 3),
            Default::default(),
        );
        c.consumed(1, 0);
        let err = merge_checkpoints(&[&taken(0, 2, 1), &c.encode(DATASET)]).unwrap_err();
        assert!(err.to_string().contains("different reads"), "{err}");
        assert!(merge_checkpoints(&[b"junk".as_slice()]).is_err());
        assert!(merge_checkpoints(&[]).is_err());
    }

    #[test]
    fn a_consumer_whose_lanes_all_ended_may_be_behind() {
        let s = setting(1, 2);
        let ends = Arc::new(Mutex::new(HashMap::from([(1, 1), (3, 1)])));
        let mut done = Consumed::new(s, &LaneStart::fresh(&s, 3), ends);
        done.consumed(1, 0);
        done.consumed(3, 0);
        let merged = merge_checkpoints(&[&taken(0, 2, 5), &done.encode(DATASET)]).unwrap();
        let start = restore_start(&merged, DATASET, &setting(0, 1)).unwrap();
        assert_eq!(start.lanes[&1], (1, true));
        assert_eq!(start.lanes[&0], (3, false));
    }
}
