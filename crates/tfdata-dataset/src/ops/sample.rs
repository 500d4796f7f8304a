//! `random` (an infinite dataset of random int64s) and
//! `directed_interleave` (elements taken from the input a selector dataset
//! names): what `Dataset.random`, `sample_from_datasets` and
//! `choose_from_datasets` are made of.
//!
//! `random` is TensorFlow's `RandomDataset` bit for bit: Philox4x32-10
//! keyed by `seed` with counter `[0, 0, seed2]`, one 32-bit word per
//! element. With `rerandomize_each_iteration`, each iterator (each epoch
//! of a `repeat`) takes its two seeds from a generator of the op's own,
//! seeded the same way, as TensorFlow's `RandomSeedGenerator` does.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tfdata_core::{DType, Element, Error, Result, Tensor};

use crate::attrs::Attrs;
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::iterators::ElementIterator;
use crate::philox::{Philox, Words};
use crate::spec::{Shape, Structure, TensorSpec};
use crate::splits::{IndexSplitProvider, SplitProvider};
use crate::{INFINITE_CARDINALITY, UNKNOWN_CARDINALITY};

impl Dataset {
    /// `Dataset.random(seed, rerandomize_each_iteration)` with TensorFlow's
    /// seed pair; both zero draws seeds (see [`crate::random`]).
    pub fn random(seed: i64, seed2: i64, rerandomize_each_iteration: bool) -> Dataset {
        let (s1, s2) = if seed == 0 && seed2 == 0 {
            (
                crate::random::unseeded_seed(),
                crate::random::unseeded_seed(),
            )
        } else {
            (seed as u64, seed2 as u64)
        };
        Dataset::from_op(Random {
            seed,
            seed2,
            rerandomize_each_iteration,
            iterators: Arc::new(AtomicU64::new(0)),
            fixed: (s1, s2),
        })
    }

    /// `directed_interleave(selector, inputs, stop_on_empty_dataset)`: for
    /// each index the selector yields, the next element of that input;
    /// exhausted inputs are skipped (or end everything with
    /// `stop_on_empty_dataset`).
    pub fn directed_interleave(
        selector: Dataset,
        inputs: Vec<Dataset>,
        stop_on_empty_dataset: bool,
    ) -> Dataset {
        Dataset::from_op(DirectedInterleave {
            selector,
            inputs,
            stop_on_empty_dataset,
        })
    }
}

#[derive(Debug)]
pub struct Random {
    /// TensorFlow's seeds as given (what serialises).
    pub seed: i64,
    pub seed2: i64,
    pub rerandomize_each_iteration: bool,
    /// Iterators made so far: when rerandomizing, iterator `k` (counted
    /// from [`IterContext::epoch`]) takes words `2k` and `2k + 1` of
    /// Philox(`fixed`), TensorFlow's seed generator.
    iterators: Arc<AtomicU64>,
    /// The seeds every iterator uses otherwise (drawn when both are zero).
    fixed: (u64, u64),
}

impl DatasetOp for Random {
    fn name(&self) -> &'static str {
        "random"
    }

    /// TensorFlow's `RandomDataset` has a provider of endless index splits
    /// that its iterator never reads: in distributed_epoch the other
    /// sources are split and each worker draws the whole random stream.
    fn split_provider(&self) -> Option<Result<Box<dyn SplitProvider>>> {
        Some(Ok(Box::new(IndexSplitProvider::unbounded())))
    }

    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("seed", self.seed)
            .with("seed2", self.seed2)
            .with(
                "rerandomize_each_iteration",
                self.rerandomize_each_iteration,
            )
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        Ok(Some(Structure::Tensor(TensorSpec::new(
            DType::Int64,
            Shape::scalar(),
        ))))
    }

    fn cardinality(&self) -> i64 {
        INFINITE_CARDINALITY
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let (s1, s2) = if self.rerandomize_each_iteration {
            let k = ctx
                .epoch
                .wrapping_add(self.iterators.fetch_add(1, Ordering::SeqCst));
            let mut generator = Philox::from_seeds(self.fixed.0, self.fixed.1);
            // Two words an iterator, four a block.
            generator.skip(k / 2);
            let block = generator.next_block();
            let at = 2 * (k % 2) as usize;
            (u64::from(block[at]), u64::from(block[at + 1]))
        } else {
            self.fixed
        };
        Ok(Box::new(RandomIter {
            words: Words::new(Philox::from_seeds(s1, s2)),
        }))
    }
}

struct RandomIter {
    words: Words,
}

impl ElementIterator for RandomIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let x = i64::from(self.words.next_word());
        Ok(Some(Element::new(vec![Tensor::scalar(x)])))
    }
}

#[derive(Debug)]
pub struct DirectedInterleave {
    pub selector: Dataset,
    pub inputs: Vec<Dataset>,
    pub stop_on_empty_dataset: bool,
}

impl DatasetOp for DirectedInterleave {
    fn name(&self) -> &'static str {
        "directed_interleave"
    }

    fn inputs(&self) -> Vec<Dataset> {
        let mut all = vec![self.selector.clone()];
        all.extend(self.inputs.iter().cloned());
        all
    }

    fn attrs(&self) -> Attrs {
        Attrs::new().with("stop_on_empty_dataset", self.stop_on_empty_dataset)
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        if self.inputs.is_empty() {
            return Err(Error::InvalidArgument(
                "directed_interleave: needs at least one data input".into(),
            ));
        }
        if let Some(s) = self.selector.element_spec()? {
            let scalar_int64 = matches!(s.flatten().as_slice(),
                [t] if t.dtype == DType::Int64 && t.shape.is_compatible_with(&[]));
            if !scalar_int64 {
                return Err(Error::InvalidArgument(
                    "The selector input must be a dataset of scalar int64 elements.".into(),
                ));
            }
        }
        let mut merged: Option<Structure> = None;
        for (i, input) in self.inputs.iter().enumerate() {
            let Some(s) = input.element_spec()? else {
                return Ok(None);
            };
            merged = Some(match merged {
                None => s,
                Some(m) => m.merge(&s).map_err(|e| {
                    Error::InvalidArgument(format!(
                        "directed_interleave: input {i}'s elements differ from input 0's: {e}"
                    ))
                })?,
            });
        }
        Ok(merged)
    }

    fn cardinality(&self) -> i64 {
        // As TensorFlow 2.21: infinite when a data input is, else unknown.
        if self
            .inputs
            .iter()
            .any(|i| i.cardinality() == INFINITE_CARDINALITY)
        {
            INFINITE_CARDINALITY
        } else {
            UNKNOWN_CARDINALITY
        }
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let inputs = self
            .inputs
            .iter()
            .map(|i| i.op.make_iterator(ctx).map(Some))
            .collect::<Result<Vec<_>>>()?;
        Ok(Box::new(DirectedInterleaveIter {
            selector: Some(self.selector.op.make_iterator(ctx)?),
            active: inputs.len(),
            inputs,
            stop_on_empty_dataset: self.stop_on_empty_dataset,
        }))
    }
}

struct DirectedInterleaveIter {
    /// `None` once everything has ended.
    selector: Option<Box<dyn ElementIterator>>,
    /// `None` for an exhausted input.
    inputs: Vec<Option<Box<dyn ElementIterator>>>,
    active: usize,
    stop_on_empty_dataset: bool,
}

impl DirectedInterleaveIter {
    fn end(&mut self) -> Result<Option<Element>> {
        self.selector = None;
        self.inputs.iter_mut().for_each(|i| *i = None);
        Ok(None)
    }
}

impl ElementIterator for DirectedInterleaveIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        // Each round consumes a selector element: bounded by the selector
        // (an infinite selector naming only exhausted inputs loops, as in
        // TensorFlow).
        loop {
            let Some(selector) = &mut self.selector else {
                return Ok(None);
            };
            let Some(e) = selector.next_element()? else {
                return self.end();
            };
            let index = match e.components.as_slice() {
                [t] if t.dtype() == DType::Int64 && t.num_elements() == 1 => t.to_vec::<i64>()?[0],
                _ => {
                    return Err(Error::InvalidArgument(
                        "The selector input must be a dataset of scalar int64 elements.".into(),
                    ));
                }
            };
            let n = self.inputs.len();
            let Some(slot) = usize::try_from(index).ok().filter(|&i| i < n) else {
                return Err(Error::InvalidArgument(format!(
                    "Selector index out of range: {index} >= {n}"
                )));
            };
            let Some(input) = &mut self.inputs[slot] else {
                continue;
            };
            if let Some(e) = input.next_element()? {
                return Ok(Some(e));
            }
            if self.stop_on_empty_dataset {
                return self.end();
            }
            self.inputs[slot] = None;
            self.active -= 1;
            if self.active == 0 {
                return self.end();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(ds: &Dataset, n: usize) -> Vec<i64> {
        let mut it = ds.iter().unwrap();
        (0..n)
            .map_while(|_| it.next_element().unwrap())
            .map(|e| e.components[0].to_scalar::<i64>().unwrap())
            .collect()
    }

    #[test]
    fn random_is_tensorflows() {
        // tf.data.Dataset.random(seed=4): seeds (87654321, 4) in TF 2.21.
        let ds = Dataset::random(87654321, 4, false);
        assert_eq!(ints(&ds, 3), [3128586565, 2023892699, 452966358]);
        assert_eq!(ints(&ds, 3), ints(&ds, 3));
        let re = Dataset::random(87654321, 4, true);
        assert_ne!(ints(&re, 3), ints(&re, 3));
    }

    #[test]
    fn random_ignores_its_endless_splits() {
        // TensorFlow: random() has a provider of endless index splits, which
        // its iterator never reads; each worker draws the whole stream.
        let ds = Dataset::random(87654321, 4, false);
        let provider = ds.op().split_provider().unwrap().unwrap();
        assert_eq!(provider.cardinality(), crate::INFINITE_CARDINALITY);
        let mut ctx = IterContext::new();
        let provider: Arc<dyn SplitProvider> = Arc::from(provider);
        ctx.split_providers
            .insert(ds.op_key(), Arc::clone(&provider));
        let mut it = ds.iter_with(&ctx).unwrap();
        let first = it.next_element().unwrap().unwrap().components[0]
            .to_scalar::<i64>()
            .unwrap();
        assert_eq!(first, 3128586565);
        assert_eq!(
            provider
                .get_next()
                .unwrap()
                .unwrap()
                .to_scalar::<i64>()
                .unwrap(),
            0
        );
    }

    #[test]
    fn directed_interleave_skips_exhausted_inputs() {
        let selector = Dataset::from_tensor_slices(vec![Tensor::vector(&[0i64, 1, 1, 0, 1, 0])]);
        let ds = Dataset::directed_interleave(
            selector.clone(),
            vec![Dataset::range(2), Dataset::range_with_step(10, 12, 1)],
            false,
        );
        assert_eq!(ints(&ds, 10), [0, 10, 11, 1]);
        let ds = Dataset::directed_interleave(
            selector,
            vec![Dataset::range(1), Dataset::range_with_step(10, 12, 1)],
            true,
        );
        assert_eq!(ints(&ds, 10), [0, 10, 11]);
        let bad = Dataset::directed_interleave(
            Dataset::from_tensor_slices(vec![Tensor::vector(&[2i64])]),
            vec![Dataset::range(1), Dataset::range(1)],
            false,
        );
        let err = bad.iter().unwrap().next_element().unwrap_err();
        assert!(
            err.to_string()
                .contains("Selector index out of range: 2 >= 2")
        );
    }
}
