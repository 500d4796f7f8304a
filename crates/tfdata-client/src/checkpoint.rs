//! Reader checkpoints (issue 17): where a reader is in its epoch, as opaque
//! bytes a trainer stores with its model checkpoint, and the positions a
//! restored reader starts its tasks at.
//!
//! What is covered: reads from tfdata workers over the element stream, of
//! their own job or of a job shared through `job_name`, and coordinated
//! parallel_epochs reads; not cross-trainer caches.
//!
//! - `parallel_epochs`: each worker produces the whole dataset in its own
//!   order, so a position is "the next element of that worker's sequence"
//!   (the stream numbers each task's elements), kept per worker address. A
//!   restored reader opens each worker's stream at that index and the worker
//!   skips ahead (sources seek; see
//!   `tfdata_dataset::ElementIterator::skip_elements`). For deterministic
//!   pipelines, the elements consumed before the checkpoint and those read
//!   after the restore are, per worker and in order, that worker's whole
//!   sequence.
//! - `distributed_epoch`: the position is the set of splits consumed, kept
//!   as index ranges per split provider and pass (split providers are
//!   deterministic, so an index names the same split in every iteration).
//!   Workers name, with each element, the splits it holds whole
//!   (`tfdata_core::lineage`); a restored reader's new iteration never hands
//!   those splits out. For pipelines deterministic given their splits, the
//!   elements consumed before the checkpoint and those read after the
//!   restore are the epoch as a multiset. An element made from part of a
//!   split (a file split read record by record, `flat_map`, `unbatch`) or
//!   from no split cannot be accounted for by splits.
//! - A shared job: each consumer's checkpoint holds what it consumed (in
//!   distributed_epoch the splits, in parallel_epochs the element indices
//!   per worker, which other consumers' elements interleave), and names the
//!   iteration it read, its client id there and how many readers shared it
//!   ([`SharedRead`]). Restoring every consumer resumes the job: they join
//!   one new iteration at the dispatcher (a restoration), which starts no
//!   task until all of them have joined; it never hands out a split any of
//!   them consumed, and its workers serve none of the elements any of them
//!   consumed (they produce and drop them). A worker restarted during a
//!   shared parallel_epochs read starts its sequence again (as in
//!   TensorFlow), so that read's `checkpoint()` fails from then on.
//!
//! - A coordinated read (`num_consumers`, parallel_epochs): in every round
//!   consumer `c` of `n` gets element `k * n + c` of each worker's sequence
//!   (workers number a round's elements), so its position per worker is the
//!   number of that worker's rounds it consumed, kept as `rounds * n`: the
//!   elements behind every consumer when all checkpoint at the same step, as
//!   synchronous training does. Restoring every consumer resumes the read as
//!   a shared job's restoration whose workers drop those elements; the
//!   dispatcher refuses consumers whose checkpoints disagree, since rounds
//!   could not line up again. A worker that restarted its sequence serves
//!   an index off the consumer's stride: that read's `checkpoint()` fails.
//!
//! Everything else fails at `checkpoint()`, naming why, rather than resuming
//! wrongly.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use prost::Message;
use tfdata_core::positions::{Position, PositionSet};
use tfdata_core::ranges::IndexRanges;
use tfdata_core::{Error, Result, SplitName};
use tfdata_proto::data::{
    TfdataSplitName, TfdataSplitPieces, TfdataSplitRanges, TfdataWorkerRanges,
};
use tfdata_proto::tfdata::checkpoint::{ConsumedSplits, ReaderCheckpoint, WorkerPosition};

use crate::options::ProcessingMode;

/// The checkpoint format this reader writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// Largest checkpoint accepted by `restore` (a few bytes per worker).
pub const MAX_CHECKPOINT_BYTES: usize = 16 << 20;

/// Why a read cannot be checkpointed, decided when it starts; `None` if it
/// can (so far: see [`Positions::unresumable`] for what is learned later).
pub(crate) fn unresumable_read(
    mode: ProcessingMode,
    coordinated: bool,
    cross_trainer_cache: bool,
) -> Option<String> {
    if !matches!(
        mode,
        ProcessingMode::ParallelEpochs | ProcessingMode::DistributedEpoch
    ) {
        return Some(format!(
            "reader checkpoints cover parallel_epochs and distributed_epoch reads; this read is \
             {mode}"
        ));
    }
    if coordinated && mode != ProcessingMode::ParallelEpochs {
        return Some(format!(
            "reader checkpoints cover coordinated reads in parallel_epochs; this coordinated \
             read is {mode} (a round's element names no splits)"
        ));
    }
    if cross_trainer_cache {
        return Some("reader checkpoints do not cover cross-trainer caches".into());
    }
    None
}

/// FNV-1a, 64 bits: a stable fingerprint of a dataset's definition, the
/// same in every process and release (std's hashers promise neither).
pub(crate) fn fingerprint(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The dataset a checkpoint belongs to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DatasetIdentity<'a> {
    pub id: &'a str,
    pub fingerprint: u64,
    pub mode: ProcessingMode,
}

/// A consumer of a shared job, as its checkpoint names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SharedRead {
    /// The dispatcher's id of the iteration read.
    pub iteration: i64,
    /// This reader's client id in it.
    pub client: i64,
    /// How many readers the iteration had (the most any heartbeat told).
    pub consumers: i64,
}

/// A coordinated read's consumer: its index, of how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Coordinated {
    pub consumer: i64,
    pub consumers: i64,
}

/// Where a reader is: in parallel_epochs, per worker, the index of the next
/// element it has not consumed in that worker's sequence; in
/// distributed_epoch, the splits it consumed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Positions {
    next: HashMap<Arc<str>, i64>,
    /// Per (split provider, pass): indices of the splits consumed.
    consumed: BTreeMap<(i64, i64), IndexRanges>,
    /// Splits spread over several elements of which some were consumed:
    /// the positions consumed. A split moves to `consumed` once they number
    /// its total.
    partial: BTreeMap<SplitName, PositionSet>,
    /// The totals of splits in `partial` whose last element was seen.
    totals: BTreeMap<SplitName, u64>,
    /// Set once the read took an element that has no position (read with
    /// `GetElement`: a TensorFlow worker).
    unresumable: Option<String>,
    /// A restored checkpoint of a shared job's consumer: the read it took.
    pub shared: Option<SharedRead>,
    /// A shared parallel_epochs job's consumer: per worker, the indices of
    /// the elements it consumed (others' elements interleave with them).
    elements: HashMap<Arc<str>, IndexRanges>,
    /// A coordinated read: `next` holds, per worker, the rounds consumed
    /// times the number of consumers.
    pub coordinated: Option<Coordinated>,
}

impl Positions {
    /// `count` elements of `worker`'s sequence from `first` are behind the reader.
    pub(crate) fn advance(&mut self, worker: &Arc<str>, first: i64, count: i64) {
        let end = first.saturating_add(count);
        let next = self.next.entry(Arc::clone(worker)).or_insert(0);
        *next = (*next).max(end);
    }

    /// `count` elements of `worker`'s sequence from `first` were consumed
    /// by this consumer of a shared parallel_epochs job.
    pub(crate) fn consumed_elements(&mut self, worker: &Arc<str>, first: i64, count: i64) {
        self.advance(worker, first, count);
        self.elements
            .entry(Arc::clone(worker))
            .or_default()
            .insert_range(first, first.saturating_add(count));
    }

    /// A coordinated read's consumer took element `index` of `worker`'s
    /// sequence: the next on its stride, or the read cannot be checkpointed.
    pub(crate) fn consumed_in_round(&mut self, worker: &Arc<str>, index: i64) {
        let Some(c) = self.coordinated else {
            return;
        };
        let behind = self.next.entry(Arc::clone(worker)).or_insert(0);
        let expected = behind.saturating_add(c.consumer);
        if index == expected {
            *behind = behind.saturating_add(c.consumers);
        } else if self.unresumable.is_none() {
            self.unresumable = Some(format!(
                "worker {worker} served element {index} of its sequence where consumer {} of {} \
                 expected element {expected} (the worker restarted and started its sequence \
                 again), so a checkpoint cannot say where this coordinated read is",
                c.consumer, c.consumers
            ));
        }
    }

    /// Per worker, the elements consumed, as a restored shared job's
    /// restoration is told them: a coordinated read's, the elements behind
    /// every consumer.
    pub(crate) fn consumed_element_ranges(&self) -> Vec<TfdataWorkerRanges> {
        let mut ranges: Vec<TfdataWorkerRanges> = if self.coordinated.is_some() {
            self.next
                .iter()
                .filter(|(_, behind)| **behind > 0)
                .map(|(worker, behind)| TfdataWorkerRanges {
                    worker_address: worker.to_string(),
                    bounds: vec![0, *behind],
                })
                .collect()
        } else {
            self.elements
                .iter()
                .map(|(worker, r)| TfdataWorkerRanges {
                    worker_address: worker.to_string(),
                    bounds: r.bounds(),
                })
                .collect()
        };
        ranges.sort_by(|a, b| a.worker_address.cmp(&b.worker_address));
        ranges
    }

    /// An element without a position was consumed.
    pub(crate) fn consumed_unnumbered(&mut self, worker: &str) {
        if self.unresumable.is_none() {
            self.unresumable = Some(format!(
                "worker {worker} does not number its elements (it does not serve tfdata's \
                 element stream, e.g. a TensorFlow worker), so a reader checkpoint cannot say \
                 where this read is"
            ));
        }
    }

    /// distributed_epoch: an element was consumed holding `names` whole,
    /// `pieces` of other splits, and the last of the splits in `ends` (with
    /// their totals). `accounted`: it is made of exactly those.
    pub(crate) fn consumed_splits(
        &mut self,
        names: &[SplitName],
        pieces: &[(SplitName, Position)],
        ends: &[(SplitName, u64)],
        accounted: bool,
    ) {
        if !accounted {
            if self.unresumable.is_none() {
                self.unresumable = Some(
                    "an element consumed was made from part of a split at an unknown place or \
                     from no split (a batch of several splits cut up again by flat_map or \
                     unbatch, or a source without dynamic sharding), so a distributed_epoch \
                     checkpoint cannot say which parts of splits are consumed"
                        .into(),
                );
            }
            return;
        }
        for n in names {
            self.consumed
                .entry((n.provider, n.repetition))
                .or_default()
                .insert(n.index);
        }
        for (n, position) in pieces {
            self.partial.entry(*n).or_default().insert(position);
        }
        for (n, total) in ends {
            self.totals.insert(*n, *total);
        }
        // Splits now consumed in full (their last piece may come before
        // others, from another worker's stream, after a lost worker).
        for (n, _) in pieces {
            self.complete_if_whole(n);
        }
    }

    fn complete_if_whole(&mut self, n: &SplitName) {
        let Some(&total) = self.totals.get(n) else {
            return;
        };
        if self.partial.get(n).is_some_and(|p| p.count() >= total) {
            self.partial.remove(n);
            self.totals.remove(n);
            self.consumed
                .entry((n.provider, n.repetition))
                .or_default()
                .insert(n.index);
        }
    }

    /// The parts of splits consumed, as a restored iteration is told them.
    pub(crate) fn consumed_pieces(&self) -> Vec<TfdataSplitPieces> {
        self.partial
            .iter()
            .map(|(n, positions)| TfdataSplitPieces {
                split: Some(TfdataSplitName {
                    provider: n.provider,
                    repetition: n.repetition,
                    index: n.index,
                }),
                positions: positions.ranges(),
            })
            .collect()
    }

    /// The splits consumed, as a restored iteration is told them.
    pub(crate) fn consumed_ranges(&self) -> Vec<TfdataSplitRanges> {
        self.consumed
            .iter()
            .map(|((provider, repetition), r)| TfdataSplitRanges {
                provider: *provider,
                repetition: *repetition,
                bounds: r.bounds(),
            })
            .collect()
    }

    /// How many splits were consumed.
    #[cfg(test)]
    pub(crate) fn consumed_count(&self) -> u64 {
        self.consumed.values().map(IndexRanges::count).sum()
    }

    /// The start index for `worker`'s task (0 if nothing was consumed).
    pub(crate) fn start_of(&self, worker: &str) -> i64 {
        self.next.get(worker).copied().unwrap_or(0)
    }

    /// The checkpoint's bytes, or why there can be none.
    /// `shared`: the read is a consumer of a shared job.
    pub(crate) fn encode(
        &self,
        dataset: DatasetIdentity<'_>,
        shared: Option<SharedRead>,
    ) -> Result<Vec<u8>> {
        if let Some(reason) = &self.unresumable {
            return Err(Error::FailedPrecondition(reason.clone()));
        }
        // distributed_epoch positions are splits; the streams' indices say
        // nothing there.
        let per_worker = dataset.mode == ProcessingMode::ParallelEpochs;
        let mut workers: Vec<WorkerPosition> = self
            .next
            .iter()
            .filter(|_| per_worker)
            .map(|(address, next)| WorkerPosition {
                worker_address: address.to_string(),
                next_index: *next,
                consumed: self
                    .elements
                    .get(address)
                    .map(IndexRanges::bounds)
                    .unwrap_or_default(),
            })
            .collect();
        workers.sort_by(|a, b| a.worker_address.cmp(&b.worker_address));
        let consumed = self
            .consumed
            .iter()
            .map(|((provider, repetition), r)| ConsumedSplits {
                provider: *provider,
                repetition: *repetition,
                bounds: r.bounds(),
            })
            .collect();
        Ok(ReaderCheckpoint {
            format_version: FORMAT_VERSION,
            dataset_id: dataset.id.to_string(),
            processing_mode: dataset.mode.to_string(),
            workers,
            dataset_fingerprint: dataset.fingerprint,
            consumed,
            origin_iteration_id: shared.map_or(0, |s| s.iteration),
            origin_client_id: shared.map_or(0, |s| s.client),
            consumers: shared.map_or(0, |s| s.consumers),
            consumer_index: self.coordinated.map_or(0, |c| c.consumer),
            num_consumers: self.coordinated.map_or(0, |c| c.consumers),
            consumed_pieces: self.consumed_pieces(),
            deterministic: None,
        }
        .encode_to_vec())
    }

    /// The positions in `bytes`, checked against the read restoring them.
    pub(crate) fn decode(bytes: &[u8], dataset: DatasetIdentity<'_>) -> Result<Self> {
        if bytes.len() > MAX_CHECKPOINT_BYTES {
            return Err(Error::InvalidArgument(format!(
                "reader checkpoint of {} bytes is over the {MAX_CHECKPOINT_BYTES}-byte limit",
                bytes.len()
            )));
        }
        let checkpoint = ReaderCheckpoint::decode(bytes)
            .map_err(|e| Error::InvalidArgument(format!("not a tfdata reader checkpoint: {e}")))?;
        if checkpoint.format_version != FORMAT_VERSION {
            return Err(Error::InvalidArgument(format!(
                "reader checkpoint format {} is not supported (this reader reads format \
                 {FORMAT_VERSION})",
                checkpoint.format_version
            )));
        }
        if checkpoint.dataset_fingerprint != dataset.fingerprint {
            return Err(Error::InvalidArgument(format!(
                "the reader checkpoint is of another dataset (dataset {:?} when it was taken, \
                 with a different definition from this read's dataset {:?})",
                checkpoint.dataset_id, dataset.id
            )));
        }
        if checkpoint.deterministic.is_some() {
            return Err(Error::InvalidArgument(
                "the reader checkpoint is of a deterministic read; restore it into a read set up \
                 with deterministic(...) and the same lanes"
                    .into(),
            ));
        }
        if checkpoint.processing_mode != dataset.mode.to_string() {
            return Err(Error::InvalidArgument(format!(
                "the reader checkpoint is of a {} read, this read is {}",
                checkpoint.processing_mode, dataset.mode
            )));
        }
        let mut positions = Positions::default();
        if checkpoint.consumers != 0 {
            if checkpoint.consumers < 0 || checkpoint.origin_client_id < 0 {
                return Err(Error::InvalidArgument(format!(
                    "reader checkpoint names {} consumers and client {}",
                    checkpoint.consumers, checkpoint.origin_client_id
                )));
            }
            positions.shared = Some(SharedRead {
                iteration: checkpoint.origin_iteration_id,
                client: checkpoint.origin_client_id,
                consumers: checkpoint.consumers,
            });
        }
        if checkpoint.num_consumers != 0 {
            if !(0..checkpoint.num_consumers).contains(&checkpoint.consumer_index) {
                return Err(Error::InvalidArgument(format!(
                    "reader checkpoint names consumer {} of {}",
                    checkpoint.consumer_index, checkpoint.num_consumers
                )));
            }
            positions.coordinated = Some(Coordinated {
                consumer: checkpoint.consumer_index,
                consumers: checkpoint.num_consumers,
            });
        }
        for w in checkpoint.workers {
            if w.worker_address.is_empty() || w.next_index < 0 {
                return Err(Error::InvalidArgument(format!(
                    "reader checkpoint has an invalid position {:?} for worker {:?}",
                    w.next_index, w.worker_address
                )));
            }
            if let Some(c) = positions.coordinated
                && w.next_index % c.consumers != 0
            {
                return Err(Error::InvalidArgument(format!(
                    "coordinated reader checkpoint has {} elements of worker {:?} behind its \
                     {} consumers, not whole rounds",
                    w.next_index, w.worker_address, c.consumers
                )));
            }
            let worker: Arc<str> = Arc::from(w.worker_address.as_str());
            positions.advance(&worker, 0, w.next_index);
            if !w.consumed.is_empty() {
                positions
                    .elements
                    .insert(worker, IndexRanges::from_bounds(&w.consumed)?);
            }
        }
        for c in checkpoint.consumed {
            if c.provider < 0 || c.repetition < 0 {
                return Err(Error::InvalidArgument(format!(
                    "reader checkpoint has consumed splits of provider {} in pass {}",
                    c.provider, c.repetition
                )));
            }
            let ranges = IndexRanges::from_bounds(&c.bounds)?;
            positions
                .consumed
                .insert((c.provider, c.repetition), ranges);
        }
        for p in checkpoint.consumed_pieces {
            let n = p
                .split
                .filter(|n| n.provider >= 0 && n.repetition >= 0 && n.index >= 0)
                .ok_or_else(|| {
                    Error::InvalidArgument(
                        "reader checkpoint has consumed parts of a split without a valid name"
                            .into(),
                    )
                })?;
            let name = SplitName {
                provider: n.provider,
                repetition: n.repetition,
                index: n.index,
            };
            let set = PositionSet::from_ranges(&p.positions)
                .map_err(|e| Error::InvalidArgument(format!("reader checkpoint: {e}")))?;
            positions.partial.entry(name).or_default().union_with(&set);
        }
        Ok(positions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_and_mismatches_are_refused() {
        let mut p = Positions::default();
        let a: Arc<str> = Arc::from("a:1");
        p.advance(&a, 0, 5);
        p.advance(&a, 5, 3);
        p.advance(&Arc::from("b:2"), 10, 1);
        let ds = DatasetIdentity {
            id: "ds",
            fingerprint: fingerprint(b"pipeline"),
            mode: ProcessingMode::ParallelEpochs,
        };
        let bytes = p.encode(ds, None).unwrap();
        let back = Positions::decode(&bytes, ds).unwrap();
        assert_eq!(back, p);
        assert_eq!(back.start_of("a:1"), 8);
        assert_eq!(back.start_of("b:2"), 11);
        assert_eq!(back.start_of("c:3"), 0);
        let err = |r: Result<Positions>| r.unwrap_err().to_string();
        // Another id with the same definition is the same dataset.
        let renamed = DatasetIdentity { id: "ds2", ..ds };
        assert_eq!(Positions::decode(&bytes, renamed).unwrap(), p);
        let other = DatasetIdentity {
            fingerprint: fingerprint(b"pipelinf"),
            ..ds
        };
        assert!(err(Positions::decode(&bytes, other)).contains("another dataset"));
        let dynamic = DatasetIdentity {
            mode: ProcessingMode::DistributedEpoch,
            ..ds
        };
        assert!(err(Positions::decode(&bytes, dynamic)).contains("parallel_epochs"));
        assert!(
            err(Positions::decode(b"\xff\xff\xff", ds)).contains("not a tfdata reader checkpoint")
        );
        let future = ReaderCheckpoint {
            format_version: 2,
            ..Default::default()
        }
        .encode_to_vec();
        assert!(err(Positions::decode(&future, ds)).contains("format 2"));
        p.consumed_unnumbered("tf:3");
        assert!(p.encode(ds, None).unwrap_err().to_string().contains("tf:3"));
    }

    #[test]
    fn a_coordinated_consumer_counts_whole_rounds_and_refuses_an_index_off_its_stride() {
        let ds = DatasetIdentity {
            id: "ds",
            fingerprint: fingerprint(b"pipeline"),
            mode: ProcessingMode::ParallelEpochs,
        };
        let me = Coordinated {
            consumer: 1,
            consumers: 3,
        };
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a:1"), Arc::from("b:2"));
        let mut p = Positions {
            coordinated: Some(me),
            ..Default::default()
        };
        // Rounds 0 and 1 of a, round 0 of b: elements k * 3 + 1.
        p.consumed_in_round(&a, 1);
        p.consumed_in_round(&b, 1);
        p.consumed_in_round(&a, 4);
        let back = Positions::decode(&p.encode(ds, None).unwrap(), ds).unwrap();
        assert_eq!(back.coordinated, Some(me));
        assert_eq!((back.start_of("a:1"), back.start_of("b:2")), (6, 3));
        let ranges: Vec<(String, Vec<i64>)> = back
            .consumed_element_ranges()
            .into_iter()
            .map(|r| (r.worker_address, r.bounds))
            .collect();
        assert_eq!(
            ranges,
            vec![("a:1".into(), vec![0, 6]), ("b:2".into(), vec![0, 3])]
        );
        // The next round of a is element 7; a worker that started over
        // serves 1 again: no checkpoint from then on.
        let mut restarted = back.clone();
        restarted.consumed_in_round(&a, 1);
        let err = restarted.encode(ds, None).unwrap_err().to_string();
        assert!(err.contains("expected element 7"), "{err}");
        // Not whole rounds, or a consumer out of range: damaged.
        let mut bad = ReaderCheckpoint::decode(p.encode(ds, None).unwrap().as_slice()).unwrap();
        bad.workers[0].next_index = 5;
        assert!(Positions::decode(&bad.encode_to_vec(), ds).is_err());
        bad.workers[0].next_index = 6;
        bad.consumer_index = 3;
        assert!(Positions::decode(&bad.encode_to_vec(), ds).is_err());
    }

    #[test]
    fn consumed_splits_round_trip_and_a_partial_split_is_refused() {
        let ds = DatasetIdentity {
            id: "ds",
            fingerprint: fingerprint(b"pipeline"),
            mode: ProcessingMode::DistributedEpoch,
        };
        let name = |provider, index| SplitName {
            provider,
            repetition: 0,
            index,
        };
        let mut p = Positions::default();
        // Stream indices say nothing in distributed_epoch: not kept.
        p.advance(&Arc::from("a:1"), 0, 5);
        for i in [0, 1, 2, 5, 3] {
            p.consumed_splits(&[name(0, i)], &[], &[], true);
        }
        p.consumed_splits(&[name(1, 7), name(1, 8)], &[], &[], true);
        assert_eq!(p.consumed_count(), 7);
        // Parts of split 20 (a file of 4 records, record 1 read elsewhere):
        // kept by position until the last arrives, then the split is whole.
        p.consumed_splits(
            &[],
            &[(name(0, 20), vec![0]), (name(0, 20), vec![2, 0])],
            &[],
            true,
        );
        p.consumed_splits(&[], &[(name(0, 21), vec![5])], &[], true);
        let pieces = p.consumed_pieces();
        assert_eq!(pieces.len(), 2);
        let back = Positions::decode(&p.encode(ds, None).unwrap(), ds).unwrap();
        assert_eq!(
            back.consumed_pieces(),
            pieces,
            "parts survive the checkpoint"
        );
        let mut whole = back.clone();
        whole.consumed_splits(&[], &[(name(0, 20), vec![3])], &[(name(0, 20), 4)], true);
        assert_eq!(whole.consumed_pieces().len(), 2, "3 of 4 pieces");
        whole.consumed_splits(&[], &[(name(0, 20), vec![1])], &[], true);
        assert_eq!(whole.consumed_pieces().len(), 1, "split 20 is whole");
        assert_eq!(whole.consumed_count(), 8);
        let shared = SharedRead {
            iteration: 4,
            client: 9,
            consumers: 2,
        };
        let back = Positions::decode(&p.encode(ds, Some(shared)).unwrap(), ds).unwrap();
        assert_eq!(back.shared, Some(shared));
        assert_eq!(back.consumed_ranges(), p.consumed_ranges());
        assert_eq!(back.start_of("a:1"), 0);
        let mut p = p.clone();
        assert_eq!(
            back.consumed_ranges()
                .iter()
                .map(|r| (r.provider, r.bounds.clone()))
                .collect::<Vec<_>>(),
            vec![(0, vec![0, 4, 5, 6]), (1, vec![7, 9])]
        );
        // An element made from part of a split at an unknown place: no
        // checkpoint, and why.
        p.consumed_splits(&[name(0, 9)], &[], &[], false);
        assert!(
            p.encode(ds, None)
                .unwrap_err()
                .to_string()
                .contains("part of a split")
        );
        // Garbage ranges are refused.
        let bad = ReaderCheckpoint {
            format_version: FORMAT_VERSION,
            processing_mode: "distributed_epoch".into(),
            dataset_fingerprint: ds.fingerprint,
            consumed: vec![ConsumedSplits {
                provider: 0,
                repetition: 0,
                bounds: vec![5, 3],
            }],
            ..Default::default()
        };
        assert!(Positions::decode(&bad.encode_to_vec(), ds).is_err());
    }
}
