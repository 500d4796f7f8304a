//! Ops that select, repeat, run ahead or check elements: `take`, `skip`,
//! `repeat`, `shard`, `prefetch`, `assert_cardinality`. Reordering
//! (`shuffle`, TensorFlow's seeds and order) is in [`super::shuffle`],
//! keeping a pass (`cache`) in [`super::cache`].

use tfdata_core::{Element, Error, Result};

use super::parallel::Prefetcher;
use crate::attrs::Attrs;
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::iterators::{ElementIterator, VecIter};
use crate::spec::Structure;
use crate::{INFINITE_CARDINALITY, UNKNOWN_CARDINALITY};

/// Selecting, repeating, running ahead and checking.
impl Dataset {
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
