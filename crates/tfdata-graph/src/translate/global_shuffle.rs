//! `GlobalShuffleDataset` (`tf.data`'s global shuffle): output `p` is the
//! input's element `index_shuffle(p)`, the permutation of all the input's
//! indices TensorFlow's `RandomIndexShuffle` computes (8 rounds, keyed by
//! three 32-bit seeds), so a seeded global shuffle gives TensorFlow's order.
//!
//! The seeds come from a seed generator made from the `(seed, seed2)`
//! inputs (both zero: drawn at random once for the dataset), which each
//! iterator asks twice for two seeds. Without `reshuffle_each_iteration`
//! it answers the inputs each time (key `seed, seed2, seed`); with it, the
//! dataset's `k`-th iterator reads words `4k..4k + 3` of Philox(`seed`,
//! `seed2`) and keys with the first three, as TensorFlow's
//! `RandomSeedGenerator` does.
//!
//! The input must be readable by index ([`super::random_access`]) and have
//! a known, finite, nonzero cardinality, or the node fails as TensorFlow's
//! kernel does.

use std::sync::atomic::{AtomicU64, Ordering};

use tfdata_core::{Element, Error, Result};
use tfdata_dataset::philox::Philox;
use tfdata_dataset::spec::Structure;
use tfdata_dataset::{Attrs, Dataset, DatasetOp, ElementIterator, IterContext};
use tfdata_proto::tensorflow::NodeDef;

use super::node::handle;
use super::random_access::{Prefix, compatible};
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;
use crate::kernels::random_index_shuffle::index_shuffle;

/// TensorFlow's rounds of the index permutation for a global shuffle.
const ROUNDS: usize = 8;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(node: &NodeDef, attrs: &NodeAttrs) -> Result<Option<CompiledNode>> {
    if node.op != "GlobalShuffleDataset" {
        return Ok(None);
    }
    let reshuffle = attrs.bool_or("reshuffle_each_iteration", true)?;
    Ok(Some(handle(
        move |mut i| {
            let input = i.dataset()?;
            if let Err(status) = compatible(&input) {
                return Err(Error::FailedPrecondition(format!(
                    "`global_shuffle` requires all upstream transformations be compatible \
                     with random access. Got: {status}"
                )));
            }
            let cardinality = input.cardinality();
            if cardinality <= 0 {
                return Err(Error::InvalidArgument(format!(
                    "`global_shuffle` requires the input dataset to have a non-empty finite \
                     cardinality. Got cardinality {cardinality} for dataset {}",
                    input.op().name()
                )));
            }
            let (seed, seed2) = (i.int("seed")?, i.int("seed2")?);
            i.next("seed_generator")?;
            // Both zero: seeds drawn once for the dataset, as TensorFlow does.
            let seeds = if seed == 0 && seed2 == 0 {
                (
                    tfdata_dataset::random::unseeded_seed(),
                    tfdata_dataset::random::unseeded_seed(),
                )
            } else {
                (seed as u64, seed2 as u64)
            };
            Ok(Dataset::from_op(GlobalShuffle {
                input,
                cardinality: cardinality as u64,
                seeds,
                reshuffle,
                iterators: AtomicU64::new(0),
            }))
        },
        node,
    )))
}

#[derive(Debug)]
struct GlobalShuffle {
    input: Dataset,
    cardinality: u64,
    seeds: (u64, u64),
    reshuffle: bool,
    /// Iterators made so far (each asks the seed generator again).
    iterators: AtomicU64,
}

impl GlobalShuffle {
    /// The permutation key of the dataset's `k`-th iterator.
    fn key(&self, k: u64) -> [u32; 3] {
        let (seed, seed2) = self.seeds;
        if !self.reshuffle {
            return [seed as u32, seed2 as u32, seed as u32];
        }
        let mut generator = Philox::from_seeds(seed, seed2);
        // Four words an iterator: one Philox block.
        generator.skip(k);
        let block = generator.next_block();
        [block[0], block[1], block[2]]
    }
}

impl DatasetOp for GlobalShuffle {
    fn name(&self) -> &'static str {
        "global_shuffle"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("seed", self.seeds.0 as i64)
            .with("seed2", self.seeds.1 as i64)
            .with("reshuffle_each_iteration", self.reshuffle)
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        self.input.element_spec()
    }
    fn cardinality(&self) -> i64 {
        self.cardinality as i64
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        // Counted from the context's epoch, as `shuffle` counts (a
        // deterministic read's epoch `e` is the `e`-th local iteration).
        let k = ctx
            .epoch
            .wrapping_add(self.iterators.fetch_add(1, Ordering::SeqCst));
        Ok(Box::new(GlobalShuffleIter {
            input: match range_of(&self.input) {
                Some((start, step)) => Source::Range { start, step },
                None => Source::Read(Prefix::new(&self.input, ctx, "GlobalShuffleDataset")?),
            },
            key: self.key(k),
            max_index: self.cardinality - 1,
            position: 0,
        }))
    }
}

/// Where the shuffled elements come from.
enum Source {
    /// An int64 `range`, computed from the index (TensorFlow's random
    /// access to a range), so a huge range needs no reading.
    Range { start: i64, step: i64 },
    /// Any other input, read in order and kept.
    Read(Prefix),
}

/// `(start, step)` when `ds` is an int64 `range`.
fn range_of(ds: &Dataset) -> Option<(i64, i64)> {
    let op = ds.op();
    if op.name() != "range" {
        return None;
    }
    let attrs = op.attrs();
    match (attrs.get("start"), attrs.get("step")) {
        (Some(tfdata_dataset::Attr::Int(start)), Some(tfdata_dataset::Attr::Int(step))) => {
            Some((*start, *step))
        }
        _ => None,
    }
}

struct GlobalShuffleIter {
    input: Source,
    key: [u32; 3],
    max_index: u64,
    position: u64,
}

impl ElementIterator for GlobalShuffleIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        if self.position > self.max_index {
            return Ok(None);
        }
        let index = index_shuffle(self.position, self.key, self.max_index, ROUNDS)?;
        self.position += 1;
        let index = usize::try_from(index).map_err(|_| {
            Error::InvalidArgument("GlobalShuffleDataset: index out of range".into())
        })?;
        let read = match &mut self.input {
            // In range: `index <= max_index`, so the value is below `stop`.
            Source::Range { start, step } => {
                let value = start.wrapping_add((index as i64).wrapping_mul(*step));
                return Ok(Some(Element::new(vec![tfdata_core::Tensor::scalar(value)])));
            }
            Source::Read(prefix) => prefix.get(index)?,
        };
        match read {
            Some(e) => Ok(Some(e.clone())),
            // The input ended before its declared cardinality.
            None => Err(Error::Internal(format!(
                "GlobalShuffleDataset: the input ended before its cardinality {}",
                self.max_index + 1
            ))),
        }
    }
}
