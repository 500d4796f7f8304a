//! Ops that select, reorder, repeat, buffer or check elements: `take`,
//! `skip`, `repeat`, `shard`, `shuffle`, `prefetch`, `cache`,
//! `assert_cardinality`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use std::collections::VecDeque;

use tfdata_core::{Element, Error, Result};

use super::parallel::Prefetcher;
use crate::attrs::Attrs;
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::iterators::{ElementIterator, VecIter};
use crate::philox::{Philox, Words};
use crate::spec::Structure;
use crate::{INFINITE_CARDINALITY, UNKNOWN_CARDINALITY};

/// Selecting, reordering, repeating and buffering.
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

    /// `repeat(count)`; `None` (or −1) repeats forever.
    pub fn repeat(self, count: Option<i64>) -> Dataset {
        Dataset::from_op(Repeat {
            input: self,
            count: count.unwrap_or(-1),
        })
    }

    /// `take(count)`: the first `count` elements; −1 takes all.
    pub fn take(self, count: i64) -> Dataset {
        Dataset::from_op(Take { input: self, count })
    }

    /// `skip(count)`: all but the first `count` elements; −1 skips all.
    pub fn skip(self, count: i64) -> Dataset {
        Dataset::from_op(Skip { input: self, count })
    }

    /// `tf.data.experimental.assert_cardinality(expected)`: the input, whose
    /// cardinality is then `expected`; iterating fails (`FailedPrecondition`,
    /// TensorFlow's messages) as soon as the input has one element more, or
    /// at its end if it had fewer. An `expected` of −1 (infinite) fails if
    /// the input ends at all.
    pub fn assert_cardinality(self, expected: i64) -> Dataset {
        Dataset::from_op(AssertCardinality {
            input: self,
            expected,
        })
    }

    /// `shard(num_shards, index)`: every `num_shards`-th element from `index`.
    pub fn shard(self, num_shards: i64, index: i64) -> Dataset {
        Dataset::from_op(Shard {
            input: self,
            num_shards,
            index,
        })
    }

    /// `prefetch(buffer_size)`: runs the input ahead on its own thread; −1 is AUTOTUNE.
    pub fn prefetch(self, buffer_size: i64) -> Dataset {
        Dataset::from_op(Prefetch {
            input: self,
            buffer_size,
        })
    }

    /// `cache(filename)`: the first full pass is kept (in memory when
    /// `filename` is empty, else in that file) and later passes read it.
    pub fn cache(self, filename: &str) -> Dataset {
        Dataset::from_op(Cache::new(self, filename))
    }
}

/// `tf.data.experimental.assert_cardinality`. Like TensorFlow, any
/// `expected` is accepted: −2 (unknown) fails at the first element, or at
/// the end of an empty input.
#[derive(Debug)]
pub struct AssertCardinality {
    pub input: Dataset,
    pub expected: i64,
}

impl DatasetOp for AssertCardinality {
    fn name(&self) -> &'static str {
        "assert_cardinality"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new().with("expected_cardinality", self.expected)
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        self.input.element_spec()
    }
    fn cardinality(&self) -> i64 {
        self.expected
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(AssertCardinalityIter {
            input: self.input.op.make_iterator(ctx)?,
            expected: self.expected,
            seen: 0,
        }))
    }
}

struct AssertCardinalityIter {
    input: Box<dyn ElementIterator>,
    expected: i64,
    seen: i64,
}

/// TensorFlow's wording: "1 element", "0 elements", "an infinite number of
/// elements".
fn count_of_elements(n: i64) -> String {
    match n {
        INFINITE_CARDINALITY => "an infinite number of elements".into(),
        1 => "1 element".into(),
        n => format!("{n} elements"),
    }
}

impl ElementIterator for AssertCardinalityIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let next = self.input.next_element()?;
        if next.is_some() {
            self.seen += 1;
            // TensorFlow compares as signed numbers, so only −1 is exempt:
            // −2 (unknown) fails at the first element, as there.
            if self.expected != INFINITE_CARDINALITY && self.seen > self.expected {
                return Err(Error::FailedPrecondition(format!(
                    "Input dataset was expected to contain {} but contained at least {}.",
                    count_of_elements(self.expected),
                    count_of_elements(self.seen)
                )));
            }
        } else if self.seen != self.expected {
            // At the end TensorFlow asks for equality: fewer elements, an
            // infinite expectation, and any other negative one all fail.
            return Err(Error::FailedPrecondition(format!(
                "Input dataset was expected to contain {} but contained only {}.",
                count_of_elements(self.expected),
                count_of_elements(self.seen)
            )));
        }
        Ok(next)
    }
}

#[derive(Debug)]
pub struct Take {
    pub input: Dataset,
    pub count: i64,
}

impl DatasetOp for Take {
    fn name(&self) -> &'static str {
        "take"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new().with("count", self.count)
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        if self.count < -1 {
            return Err(Error::InvalidArgument(format!(
                "take: count must be -1 or at least 0, got {}",
                self.count
            )));
        }
        self.input.element_spec()
    }
    fn cardinality(&self) -> i64 {
        let n = self.input.cardinality();
        match (self.count, n) {
            (-1, n) => n,
            (0, _) => 0,
            (c, INFINITE_CARDINALITY) => c,
            (_, UNKNOWN_CARDINALITY) => UNKNOWN_CARDINALITY,
            (c, n) => c.min(n),
        }
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(TakeIter {
            input: self.input.op.make_iterator(ctx)?,
            remaining: (self.count >= 0).then_some(self.count as u64),
        }))
    }
}

struct TakeIter {
    input: Box<dyn ElementIterator>,
    remaining: Option<u64>,
}

impl ElementIterator for TakeIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        match &mut self.remaining {
            Some(0) => Ok(None),
            Some(n) => {
                *n -= 1;
                self.input.next_element()
            }
            None => self.input.next_element(),
        }
    }
}

#[derive(Debug)]
pub struct Skip {
    pub input: Dataset,
    pub count: i64,
}

impl DatasetOp for Skip {
    fn name(&self) -> &'static str {
        "skip"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new().with("count", self.count)
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        if self.count < -1 {
            return Err(Error::InvalidArgument(format!(
                "skip: count must be -1 or at least 0, got {}",
                self.count
            )));
        }
        self.input.element_spec()
    }
    fn cardinality(&self) -> i64 {
        let n = self.input.cardinality();
        // TensorFlow's rules, including skip(-1) of an infinite (infinite)
        // or unknown (unknown) input.
        match (self.count, n) {
            (_, INFINITE_CARDINALITY) => INFINITE_CARDINALITY,
            (_, UNKNOWN_CARDINALITY) => UNKNOWN_CARDINALITY,
            (-1, _) => 0,
            (c, n) => (n - c).max(0),
        }
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        if self.count < 0 {
            // Skipping everything: TensorFlow ends at once, without reading
            // the input (which may be infinite).
            return Ok(Box::new(VecIter {
                items: Vec::new().into_iter(),
            }));
        }
        Ok(Box::new(SkipIter {
            input: self.input.op.make_iterator(ctx)?,
            to_skip: self.count as u64,
        }))
    }
}

struct SkipIter {
    input: Box<dyn ElementIterator>,
    to_skip: u64,
}

impl ElementIterator for SkipIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        if self.to_skip > 0 {
            let to_skip = std::mem::take(&mut self.to_skip);
            if self.input.skip_elements(to_skip)? < to_skip {
                return Ok(None);
            }
        }
        self.input.next_element()
    }
}

#[derive(Debug)]
pub struct Repeat {
    pub input: Dataset,
    /// −1: forever.
    pub count: i64,
}

impl DatasetOp for Repeat {
    fn name(&self) -> &'static str {
        "repeat"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new().with("count", self.count)
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        if self.count < -1 {
            return Err(Error::InvalidArgument(format!(
                "repeat: count must be -1 (forever) or at least 0, got {}",
                self.count
            )));
        }
        self.input.element_spec()
    }
    fn cardinality(&self) -> i64 {
        let n = self.input.cardinality();
        match (self.count, n) {
            (0, _) | (_, 0) => 0,
            (-1, _) => INFINITE_CARDINALITY,
            (_, INFINITE_CARDINALITY) => INFINITE_CARDINALITY,
            (_, UNKNOWN_CARDINALITY) => UNKNOWN_CARDINALITY,
            (c, n) => c.saturating_mul(n),
        }
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(RepeatIter {
            input: self.input.clone(),
            ctx: ctx.clone(),
            current: None,
            remaining: (self.count >= 0).then_some(self.count as u64),
            produced_this_pass: false,
        }))
    }
}

struct RepeatIter {
    input: Dataset,
    ctx: IterContext,
    current: Option<Box<dyn ElementIterator>>,
    remaining: Option<u64>,
    produced_this_pass: bool,
}

impl ElementIterator for RepeatIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        loop {
            if self.current.is_none() {
                match &mut self.remaining {
                    Some(0) => return Ok(None),
                    Some(n) => *n -= 1,
                    None => {}
                }
                // A new pass starts the sources' splits over (their next repetition).
                for provider in self.ctx.split_providers.values() {
                    if self.produced_this_pass {
                        provider.reset()?;
                    }
                }
                self.current = Some(self.input.op.make_iterator(&self.ctx)?);
                self.produced_this_pass = false;
            }
            if let Some(current) = &mut self.current
                && let Some(e) = current.next_element()?
            {
                self.produced_this_pass = true;
                return Ok(Some(e));
            }
            // An empty pass would repeat forever without output: stop, as TensorFlow does.
            if !self.produced_this_pass {
                self.remaining = Some(0);
            }
            self.current = None;
        }
    }
}

#[derive(Debug)]
pub struct Shard {
    pub input: Dataset,
    pub num_shards: i64,
    pub index: i64,
}

impl DatasetOp for Shard {
    fn name(&self) -> &'static str {
        "shard"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("num_shards", self.num_shards)
            .with("index", self.index)
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        if self.num_shards == crate::autoshard::SHARD_HINT
            && self.index == crate::autoshard::SHARD_HINT
        {
            // A placeholder for HINT sharding, replaced on workers; it must
            // not run as it is.
            return self.input.element_spec();
        }
        if self.num_shards <= 0 {
            return Err(Error::InvalidArgument(format!(
                "shard: num_shards must be greater than zero, got {}",
                self.num_shards
            )));
        }
        if self.index < 0 || self.index >= self.num_shards {
            return Err(Error::InvalidArgument(format!(
                "shard: index must be between 0 and {} (num_shards - 1), got {}",
                self.num_shards - 1,
                self.index
            )));
        }
        self.input.element_spec()
    }
    fn cardinality(&self) -> i64 {
        let n = self.input.cardinality();
        if n < 0 || self.num_shards <= 0 {
            return n;
        }
        n / self.num_shards + i64::from(self.index < n % self.num_shards)
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        if self.num_shards <= 0 {
            return Err(Error::FailedPrecondition(
                "shard(SHARD_HINT, SHARD_HINT) only runs under HINT static sharding in tf.data service".into(),
            ));
        }
        Ok(Box::new(ShardIter {
            input: self.input.op.make_iterator(ctx)?,
            num_shards: self.num_shards as u64,
            index: self.index as u64,
            position: 0,
        }))
    }
}

struct ShardIter {
    input: Box<dyn ElementIterator>,
    num_shards: u64,
    index: u64,
    position: u64,
}

impl ElementIterator for ShardIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        while let Some(e) = self.input.next_element()? {
            let position = self.position;
            self.position += 1;
            if position % self.num_shards == self.index {
                return Ok(Some(e));
            }
        }
        Ok(None)
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
///   shared by the dataset's iterators).
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
        let epoch = self.epochs.fetch_add(1, Ordering::SeqCst);
        let (seed, seed2) = self.iterator_seeds(epoch);
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

#[derive(Debug)]
pub struct Prefetch {
    pub input: Dataset,
    pub buffer_size: i64,
}

/// `prefetch(AUTOTUNE)`'s buffer.
const AUTOTUNE_PREFETCH: usize = 8;

impl DatasetOp for Prefetch {
    fn name(&self) -> &'static str {
        "prefetch"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new().with("buffer_size", self.buffer_size)
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        if self.buffer_size < -1 {
            return Err(Error::InvalidArgument(format!(
                "prefetch: buffer_size must be at least 0 or -1 (AUTOTUNE), got {}",
                self.buffer_size
            )));
        }
        self.input.element_spec()
    }
    fn cardinality(&self) -> i64 {
        self.input.cardinality()
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let input = self.input.op.make_iterator(ctx)?;
        match self.buffer_size {
            0 => Ok(input),
            -1 => Ok(Box::new(Prefetcher::new(
                input,
                AUTOTUNE_PREFETCH,
                "prefetch",
            )?)),
            n => Ok(Box::new(Prefetcher::new(input, n as usize, "prefetch")?)),
        }
    }
}

/// `cache(filename)`. The first iterator to read the input to its end fills
/// the cache; later iterators read the cache. A pass that stops early caches
/// nothing (TensorFlow discards partial caches too). In-memory caches live as
/// long as the dataset; file caches persist in `<filename>` (a TFRecord file
/// of serialized elements, written to a temporary name and renamed when
/// complete).
#[derive(Debug)]
pub struct Cache {
    pub input: Dataset,
    pub filename: String,
    memory: Arc<Mutex<Option<Arc<Vec<Element>>>>>,
}

impl Cache {
    pub fn new(input: Dataset, filename: &str) -> Self {
        Cache {
            input,
            filename: filename.to_string(),
            memory: Default::default(),
        }
    }
}

impl DatasetOp for Cache {
    fn name(&self) -> &'static str {
        "cache"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new().with("filename", self.filename.as_str())
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        self.input.element_spec()
    }
    fn cardinality(&self) -> i64 {
        self.input.cardinality()
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        if self.filename.is_empty() {
            if let Some(cached) = self
                .memory
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
            {
                return Ok(Box::new(VecIter {
                    items: cached.as_ref().clone().into_iter(),
                }));
            }
            return Ok(Box::new(FillingIter {
                input: self.input.op.make_iterator(ctx)?,
                seen: Vec::new(),
                sink: Sink::Memory(Arc::clone(&self.memory)),
            }));
        }
        let path = std::path::PathBuf::from(&self.filename);
        if path.exists() {
            return read_cache_file(&path);
        }
        Ok(Box::new(FillingIter {
            input: self.input.op.make_iterator(ctx)?,
            seen: Vec::new(),
            sink: Sink::File(path),
        }))
    }
}

enum Sink {
    Memory(Arc<Mutex<Option<Arc<Vec<Element>>>>>),
    File(std::path::PathBuf),
}

struct FillingIter {
    input: Box<dyn ElementIterator>,
    seen: Vec<Element>,
    sink: Sink,
}

impl ElementIterator for FillingIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        match self.input.next_element()? {
            Some(e) => {
                // The cached copy is not delivered: only `e` holds its splits.
                self.seen.push(Element::new(e.components.clone()));
                Ok(Some(e))
            }
            None => {
                let elements = std::mem::take(&mut self.seen);
                match &self.sink {
                    Sink::Memory(slot) => {
                        slot.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .get_or_insert(Arc::new(elements));
                    }
                    Sink::File(path) => write_cache_file(path, &elements)?,
                }
                Ok(None)
            }
        }
    }
}

fn write_cache_file(path: &std::path::Path, elements: &[Element]) -> Result<()> {
    use prost::Message;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut buf = Vec::new();
    for e in elements {
        let proto = tfdata_core::element::to_uncompressed(e);
        tfdata_core::tfrecord::write_record(&mut buf, &proto.encode_to_vec())
            .map_err(|err| Error::io("encoding cache record", err))?;
    }
    std::fs::write(&tmp, &buf)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| Error::io(format!("writing cache file {}", path.display()), e))
}

fn read_cache_file(path: &std::path::Path) -> Result<Box<dyn ElementIterator>> {
    use prost::Message;
    let records = tfdata_core::tfrecord::read_file(path)?;
    let mut items = Vec::with_capacity(records.len());
    for (i, r) in records.into_iter().enumerate() {
        let proto =
            tfdata_proto::data::UncompressedElement::decode(r).map_err(|e| Error::DataLoss {
                location: format!("{}, record {i}", path.display()),
                reason: format!("not a cached element: {e}"),
            })?;
        items.push(tfdata_core::element::from_uncompressed(&proto)?);
    }
    Ok(Box::new(VecIter {
        items: items.into_iter(),
    }))
}
