//! `shuffle`, as TensorFlow's kernel runs it: the same seeds from the same
//! arguments (Python's default graph seed, the per-iterator seed
//! generator) and the same draws, so a seeded shuffle gives `tf.data`'s
//! order. Apart from the other control ops because that fidelity is its
//! whole job.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use tfdata_core::{Element, Error, Result};

use crate::attrs::Attrs;
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::iterators::ElementIterator;
use crate::philox::{Philox, Words};
use crate::spec::Structure;

/// Reordering.
impl Dataset {
    /// `shuffle(buffer_size, seed, reshuffle_each_iteration)`, with
    /// TensorFlow's Python seeding: an op seed alone pairs with TensorFlow's
    /// default graph seed, so `seed=7` gives `tf.data`'s `shuffle(seed=7)`
    /// order (without a global seed).
    pub fn shuffle(
        self,
        buffer_size: i64,
        seed: Option<u64>,
        reshuffle_each_iteration: bool,
    ) -> Dataset {
        let seeds = seed.map(|s| (DEFAULT_GRAPH_SEED, s as i64));
        Dataset::from_op(Shuffle::new(
            self,
            buffer_size,
            seeds,
            reshuffle_each_iteration,
        ))
    }

    /// `shuffle` with TensorFlow's two seeds as its kernel takes them
    /// (`ShuffleDatasetV3`'s `seed`, `seed2`); both zero draws fresh ones.
    pub fn shuffle_with_seeds(
        self,
        buffer_size: i64,
        seed: i64,
        seed2: i64,
        reshuffle_each_iteration: bool,
    ) -> Dataset {
        let seeds = (seed != 0 || seed2 != 0).then_some((seed, seed2));
        Dataset::from_op(Shuffle::new(
            self,
            buffer_size,
            seeds,
            reshuffle_each_iteration,
        ))
    }
}

/// TensorFlow's `DEFAULT_GRAPH_SEED`: the graph seed Python pairs an op
/// seed with when no global seed is set.
pub const DEFAULT_GRAPH_SEED: i64 = 87_654_321;

/// A shuffle `buffer_size` of TensorFlow's `UNKNOWN_CARDINALITY` (−2):
/// buffer the whole input.
const UNBOUNDED: i64 = -2;

/// `shuffle(buffer_size, seed, reshuffle_each_iteration)` as TensorFlow's
/// kernel runs it, so a seeded shuffle gives TensorFlow's order:
///
/// - Each iterator (each epoch under `repeat`) takes its seeds from a seed
///   generator: the dataset's own `(seed, seed2)` when it does not
///   reshuffle; else words `2k` and `2k + 1` of Philox(`seed`, `seed2`) for
///   the dataset's `k`-th iterator (TensorFlow's `RandomSeedGenerator`,
///   shared by the dataset's iterators); `k` counts from
///   [`IterContext::epoch`], so a deterministic read's epoch `e` reshuffles
///   as the `e`-th local iteration does.
/// - The iterator keeps the buffer full from its input, and each output is
///   the element `word % len` places after the oldest, drawn from
///   Philox(its seeds) one 32-bit word at a time; the oldest takes its
///   place.
#[derive(Debug)]
pub struct Shuffle {
    pub input: Dataset,
    pub buffer_size: i64,
    /// TensorFlow's `(seed, seed2)`; `None` for fresh random seeds.
    pub seeds: Option<(i64, i64)>,
    pub reshuffle_each_iteration: bool,
    /// Iterators made so far (each asks the seed generator again).
    epochs: AtomicU64,
    /// The seeds drawn for an unseeded shuffle, fixed for this dataset.
    unseeded: (i64, i64),
}

impl Shuffle {
    pub fn new(
        input: Dataset,
        buffer_size: i64,
        seeds: Option<(i64, i64)>,
        reshuffle_each_iteration: bool,
    ) -> Self {
        let drawn = crate::random::unseeded_seed();
        Shuffle {
            input,
            buffer_size,
            seeds,
            reshuffle_each_iteration,
            epochs: AtomicU64::new(0),
            // Nonzero, so that it never reads as "unseeded" again.
            unseeded: ((drawn >> 1) as i64 | 1, (drawn as u32) as i64),
        }
    }

    /// The seeds of the `k`-th iterator.
    fn iterator_seeds(&self, k: u64) -> (u64, u64) {
        let (seed, seed2) = self.seeds.unwrap_or(self.unseeded);
        if !self.reshuffle_each_iteration {
            return (seed as u64, seed2 as u64);
        }
        let mut generator = Philox::from_seeds(seed as u64, seed2 as u64);
        // Two words an iterator, four a block.
        generator.skip(k / 2);
        let block = generator.next_block();
        let at = 2 * (k % 2) as usize;
        (u64::from(block[at]), u64::from(block[at + 1]))
    }
}

impl DatasetOp for Shuffle {
    fn name(&self) -> &'static str {
        "shuffle"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        let mut a = Attrs::new()
            .with("buffer_size", self.buffer_size)
            .with("reshuffle_each_iteration", self.reshuffle_each_iteration);
        if let Some((seed, seed2)) = self.seeds {
            // The op seed alone when the graph seed is the default one, as
            // pipelines have always been written.
            if seed == DEFAULT_GRAPH_SEED {
                a = a.with("seed", seed2);
            } else {
                a = a.with("seed", seed2).with("graph_seed", seed);
            }
        }
        a
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        if self.buffer_size <= 0 && self.buffer_size != -1 && self.buffer_size != UNBOUNDED {
            return Err(Error::InvalidArgument(format!(
                "shuffle: buffer_size must be greater than zero (or -1 for AUTOTUNE, -2 for \
                 the whole input), got {}",
                self.buffer_size
            )));
        }
        self.input.element_spec()
    }
    fn cardinality(&self) -> i64 {
        self.input.cardinality()
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let iterator = self.epochs.fetch_add(1, Ordering::SeqCst);
        let (seed, seed2) = self.iterator_seeds(ctx.epoch.wrapping_add(iterator));
        let buffer_size = if self.buffer_size == UNBOUNDED {
            // TensorFlow's buffer then grows to hold the whole input (its
            // ring is the input's length, so the order is the one a buffer of
            // exactly that size gives); like TensorFlow's, it is bounded only
            // by the input.
            usize::MAX
        } else if self.buffer_size < 0 {
            1024
        } else {
            self.buffer_size as usize
        };
        Ok(Box::new(ShuffleIter {
            input: Some(self.input.op.make_iterator(ctx)?),
            buffer: VecDeque::with_capacity(buffer_size.min(1 << 16)),
            buffer_size,
            words: Words::new(Philox::from_seeds(seed, seed2)),
        }))
    }
}

struct ShuffleIter {
    input: Option<Box<dyn ElementIterator>>,
    /// The buffer from its oldest element on (TensorFlow's ring from
    /// `start`).
    buffer: VecDeque<Element>,
    buffer_size: usize,
    words: Words,
}

impl ElementIterator for ShuffleIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        while self.buffer.len() < self.buffer_size {
            let Some(input) = &mut self.input else { break };
            match input.next_element()? {
                Some(e) => self.buffer.push_back(e),
                None => self.input = None,
            }
        }
        if self.buffer.is_empty() {
            return Ok(None);
        }
        let i = (u64::from(self.words.next_word()) % self.buffer.len() as u64) as usize;
        self.buffer.swap(0, i);
        Ok(self.buffer.pop_front())
    }
}
