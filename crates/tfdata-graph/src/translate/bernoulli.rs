//! `SamplingDataset` (`tf.data.experimental` sampling): each input element
//! kept with probability `rate`, decided by TensorFlow's generator bit for
//! bit (Philox keyed by the seeds, one word per element made a float in
//! [0, 1) from its low 23 bits), so seeded pipelines keep TensorFlow's
//! elements. Each iterator starts the generator afresh, as TensorFlow's do.

use tfdata_core::{Element, Result};
use tfdata_dataset::philox::{Philox, Words};
use tfdata_dataset::spec::Structure;
use tfdata_dataset::{Attrs, Dataset, DatasetOp, ElementIterator, IterContext};
use tfdata_proto::tensorflow::NodeDef;

use super::node::handle;
use crate::function::CompiledNode;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(node: &NodeDef) -> Result<Option<CompiledNode>> {
    if node.op != "SamplingDataset" {
        return Ok(None);
    }
    Ok(Some(handle(
        |mut i| {
            let input = i.dataset()?;
            let rate = i.tensor("rate")?;
            let rate = rate
                .to_scalar::<f32>()
                .map_err(|e| i.err(format!("input `rate`: {e}")))?;
            let (seed, seed2) = (i.int("seed")?, i.int("seed2")?);
            // Both zero: seeds drawn once for the dataset, as TensorFlow does.
            let seeds = if seed == 0 && seed2 == 0 {
                (
                    tfdata_dataset::random::unseeded_seed(),
                    tfdata_dataset::random::unseeded_seed(),
                )
            } else {
                (seed as u64, seed2 as u64)
            };
            Ok(Dataset::from_op(Sampling { input, rate, seeds }))
        },
        node,
    )))
}

#[derive(Debug)]
struct Sampling {
    input: Dataset,
    rate: f32,
    seeds: (u64, u64),
}

impl DatasetOp for Sampling {
    fn name(&self) -> &'static str {
        "sampling"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("rate", f64::from(self.rate))
            .with("seed", self.seeds.0 as i64)
            .with("seed2", self.seeds.1 as i64)
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        self.input.element_spec()
    }
    fn cardinality(&self) -> i64 {
        tfdata_dataset::UNKNOWN_CARDINALITY
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(SamplingIter {
            input: self.input.iter_with(ctx)?,
            rate: self.rate,
            words: Words::new(Philox::from_seeds(self.seeds.0, self.seeds.1)),
        }))
    }
}

struct SamplingIter {
    input: Box<dyn ElementIterator>,
    rate: f32,
    words: Words,
}

/// TensorFlow's `Uint32ToFloat`: the word's low 23 bits as the mantissa of
/// a float in [1, 2), less one.
fn unit_float(word: u32) -> f32 {
    f32::from_bits(0x3f80_0000 | (word & 0x7f_ffff)) - 1.0
}

impl ElementIterator for SamplingIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        // Bounded by the input: each turn consumes one of its elements.
        loop {
            let Some(e) = self.input.next_element()? else {
                return Ok(None);
            };
            if unit_float(self.words.next_word()) < self.rate {
                return Ok(Some(e));
            }
        }
    }
}
