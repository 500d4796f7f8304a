//! Lanes of a deterministic read (issue 35, docs/fault-tolerance.md
//! "Deterministic reads"): each epoch's splits of a source are numbered in
//! one global order, the provider's own order or, with a split shuffle
//! seed, a seeded permutation of it, and lane `k` of `K` gets the splits at
//! global positions `k, k + K, k + 2K, ...`. A lane is one instance of the
//! pipeline over its splits ([`lane_context`]), so what it yields depends
//! on the pipeline, its seeds, the epoch, `K` and `k` only: any worker
//! builds the same lane.
//!
//! The permutation ([`SplitPermutation`]) is a Feistel network over the
//! smallest even power of two holding the splits, walked until it lands
//! inside them (cycle walking): a bijection of `[0, S)` computed per index
//! in O(1) expected time without a table, so a billion splits cost no
//! memory and a lane can start anywhere.

use std::sync::Mutex;

use tfdata_core::{Error, Result, Tensor};

use crate::dataset::{Dataset, IterContext};
use crate::splits::SplitProvider;

/// Most lanes a deterministic read may have (the dispatcher's limit too):
/// each lane is a pipeline instance somewhere, and a reader holds a stream
/// per lane it reads.
pub const MAX_LANES: u64 = 4096;

/// Rounds of the Feistel network: enough for the halves to depend on every
/// bit of the index and the key.
const FEISTEL_ROUNDS: u64 = 6;

/// FNV-1a, 64 bits, of a dataset's definition (its `DatasetDef` bytes): the
/// same in every process and release, so every worker derives a lane's
/// seeds alike (the reader's checkpoints use the same fingerprint).
pub fn fingerprint(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// SplitMix64's finaliser: a fixed, well-mixing function of 64 bits.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A seeded bijection of `[0, len)` that depends on `(seed, epoch)`.
#[derive(Debug, Clone, Copy)]
pub struct SplitPermutation {
    len: u64,
    key: u64,
    /// Bits of each Feistel half; the network permutes `[0, 2^(2 * half))`.
    half: u32,
}

impl SplitPermutation {
    pub fn new(len: u64, seed: u64, epoch: u64) -> Self {
        // Bits to hold `len - 1`, rounded up to an even number (at least 2).
        let bits = (64 - len.saturating_sub(1).leading_zeros()).max(1);
        SplitPermutation {
            len,
            key: mix(mix(seed) ^ epoch),
            half: bits.div_ceil(2),
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The split index at global position `position` (< `len`). The network
    /// permutes a domain of fewer than `4 * len` values, so the walk takes
    /// fewer than four steps on average.
    pub fn apply(&self, position: u64) -> u64 {
        debug_assert!(position < self.len);
        let mut x = position;
        loop {
            x = self.feistel(x);
            if x < self.len {
                return x;
            }
        }
    }

    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half) - 1;
        let (mut left, mut right) = ((x >> self.half) & mask, x & mask);
        for round in 0..FEISTEL_ROUNDS {
            let f = mix(self.key ^ mix(round ^ (right << 8))) & mask;
            (left, right) = (right, left ^ f);
        }
        (left << self.half) | right
    }
}

/// Which lane of which read: everything a lane's elements depend on
/// besides the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneSpec {
    /// `K`, the job's number of lanes (1..=[`MAX_LANES`]).
    pub lanes: u64,
    /// `k`, this lane (< `lanes`).
    pub lane: u64,
    /// The read's pass over the data (0 first).
    pub epoch: u64,
    /// Set: each epoch's splits are permuted before they are dealt.
    pub split_shuffle_seed: Option<u64>,
    /// [`fingerprint`] of the dataset's definition.
    pub fingerprint: u64,
}

impl LaneSpec {
    /// Refuses a lane count out of range or a lane not below it.
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_LANES).contains(&self.lanes) {
            return Err(Error::InvalidArgument(format!(
                "a deterministic read has 1 to {MAX_LANES} lanes, got {}",
                self.lanes
            )));
        }
        if self.lane >= self.lanes {
            return Err(Error::InvalidArgument(format!(
                "lane {} does not exist: the read has lanes 0 to {}",
                self.lane,
                self.lanes - 1
            )));
        }
        Ok(())
    }

    /// The seed to build and iterate the lane's pipeline under
    /// ([`crate::random::with_seed`]): unseeded random ops then draw the
    /// same seeds on every worker, and different ones per epoch and lane.
    pub fn seed(&self) -> u64 {
        mix(mix(mix(self.fingerprint) ^ self.epoch) ^ self.lane)
    }
}

/// Splits of one lane of a source: those at global positions `lane`,
/// `lane + lanes`, ... of the source's own provider, in that order (mapped
/// through the permutation when there is one). `reset` (a `repeat`)
/// restarts the lane.
pub struct LaneSplitProvider {
    inner: Box<dyn SplitProvider>,
    lanes: u64,
    lane: u64,
    permutation: Option<SplitPermutation>,
    /// The lane's index of its next split.
    next: Mutex<u64>,
}

impl LaneSplitProvider {
    /// Lane `spec.lane` of `inner`'s splits. A split shuffle needs the
    /// number of splits: refused (InvalidArgument) if `inner` does not know it.
    pub fn new(inner: Box<dyn SplitProvider>, spec: &LaneSpec) -> Result<Self> {
        spec.validate()?;
        let permutation = match spec.split_shuffle_seed {
            None => None,
            Some(seed) => {
                let cardinality = inner.cardinality();
                if cardinality < 0 {
                    return Err(Error::InvalidArgument(format!(
                        "a split shuffle seed needs the number of splits of every source, but \
                         a source's is {} ({}); read it without split_shuffle_seed",
                        cardinality,
                        if cardinality == crate::INFINITE_CARDINALITY {
                            "infinite"
                        } else {
                            "unknown"
                        }
                    )));
                }
                Some(SplitPermutation::new(cardinality as u64, seed, spec.epoch))
            }
        };
        inner.reset()?;
        Ok(LaneSplitProvider {
            inner,
            lanes: spec.lanes,
            lane: spec.lane,
            permutation,
            next: Mutex::new(0),
        })
    }
}

impl SplitProvider for LaneSplitProvider {
    fn get_next(&self) -> Result<Option<Tensor>> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let j = *next;
        let split = match &self.permutation {
            Some(permutation) => {
                let position = j
                    .checked_mul(self.lanes)
                    .and_then(|p| p.checked_add(self.lane));
                match position {
                    Some(p) if p < permutation.len() => {
                        self.inner.split_at(permutation.apply(p))?
                    }
                    _ => None,
                }
            }
            // The provider's order: walk it, `lanes - 1` splits between two
            // of ours (seeks for providers that override `skip`).
            None => {
                self.inner
                    .skip(if j == 0 { self.lane } else { self.lanes - 1 })?;
                self.inner.get_next()?
            }
        };
        if split.is_some() {
            *next += 1;
        }
        Ok(split)
    }

    fn reset(&self) -> Result<()> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        self.inner.reset()?;
        *next = 0;
        Ok(())
    }

    fn cardinality(&self) -> i64 {
        let total = match &self.permutation {
            Some(p) => p.len() as i64,
            None => self.inner.cardinality(),
        };
        if total < 0 {
            return total;
        }
        let (total, lanes, lane) = (total as u64, self.lanes, self.lane);
        (total.saturating_sub(lane).div_ceil(lanes)) as i64
    }
}

/// The context that runs `dataset` as lane `spec.lane`: every source reads
/// the lane's share of its own splits, ops keep their order
/// (`deterministic`), and reshuffling ops take the seeds of iterator
/// `spec.epoch + i` (`epoch`). Build the dataset and iterate it inside
/// [`crate::random::with_seed`]`(spec.seed())`: a pipeline's unseeded
/// random ops draw their seeds when it is built and iterated.
pub fn lane_context(dataset: &Dataset, spec: &LaneSpec) -> Result<IterContext> {
    spec.validate()?;
    let mut ctx = IterContext {
        deterministic: true,
        epoch: spec.epoch,
        ..IterContext::new()
    };
    for source in dataset.sources() {
        let provider = source.op().split_provider().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "a deterministic read splits every source, but `{}` cannot be split",
                source.op().name()
            ))
        })??;
        let lane = LaneSplitProvider::new(provider, spec)?;
        ctx.split_providers
            .insert(source.op_key(), std::sync::Arc::new(lane));
    }
    Ok(ctx)
}

#[cfg(test)]
#[path = "lanes_tests.rs"]
mod tests;
