//! `WeightedFlatMapDataset`: a share of each input, in order, the shares
//! proportional to the weights and as large as the inputs allow.
//!
//! TensorFlow's kernel scales each input's cardinality by its weight over
//! the largest weight, takes the input `m` with the smallest result, and
//! reads `(that result * weight_i / weight_m)` elements (truncated) from
//! input `i`, all in `f64` as its kernel computes them: the inputs
//! {100, 100, 10} with weights {0.2, 0.3, 0.5} give {4, 6, 10}. Read in
//! order, the dataset is those first elements of input 0, then of input 1,
//! and so on: `take` of each, concatenated. The inputs' cardinalities must
//! be known and the weights positive, with TensorFlow's messages.

use tfdata_core::{DType, Error, Result};
use tfdata_dataset::{INFINITE_CARDINALITY, UNKNOWN_CARDINALITY};
use tfdata_proto::tensorflow::NodeDef;

use super::node::handle;
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(node: &NodeDef, attrs: &NodeAttrs) -> Result<Option<CompiledNode>> {
    if node.op != "WeightedFlatMapDataset" {
        return Ok(None);
    }
    let n = attrs.count("N")?;
    let m = attrs.count("M")?;
    Ok(Some(handle(
        move |mut i| {
            let inputs = i
                .take(Some(n))?
                .into_iter()
                .map(|v| v.into_dataset("WeightedFlatMapDataset input"))
                .collect::<Result<Vec<_>>>()?;
            if inputs.len() <= 1 {
                return Err(Error::InvalidArgument(
                    "WeightedFlatMap must have at least two input datasets.".into(),
                ));
            }
            let weights = i
                .take(Some(m))?
                .into_iter()
                .map(|v| {
                    let t = v.into_tensor("WeightedFlatMapDataset weights")?;
                    if t.dtype() != DType::Double || !t.shape().is_empty() {
                        return Err(Error::InvalidArgument(
                            "WeightedFlatMapDataset: each weight must be a float64 scalar".into(),
                        ));
                    }
                    t.to_scalar::<f64>()
                })
                .collect::<Result<Vec<_>>>()?;
            if weights.len() != inputs.len() {
                return Err(Error::InvalidArgument(format!(
                    "`input_datasets` and `weights` of the WeightedFlatMap must have the same \
                     size. Got {} datasets and {} weights.",
                    inputs.len(),
                    weights.len()
                )));
            }
            let mut cardinalities = Vec::with_capacity(inputs.len());
            for (k, input) in inputs.iter().enumerate() {
                let c = input.cardinality();
                if c == INFINITE_CARDINALITY || c == UNKNOWN_CARDINALITY {
                    return Err(Error::InvalidArgument(format!(
                        "Cardinalities of the inputs must be known. Input {k} has {} cardinality.",
                        if c == INFINITE_CARDINALITY {
                            "INFINITE"
                        } else {
                            "UNKNOWN"
                        }
                    )));
                }
                cardinalities.push(c.max(0) as u64);
            }
            for (k, &w) in weights.iter().enumerate() {
                // NaN is refused too, as TensorFlow's `weight > 0.0` check does.
                if w.is_nan() || w <= 0.0 {
                    return Err(Error::InvalidArgument(format!(
                        "`weights` must be greater than 0.0. Input {k} has a weight of {w}"
                    )));
                }
            }
            let shares = shares(&weights, &cardinalities)?;
            let mut parts = inputs
                .into_iter()
                .zip(shares)
                .map(|(input, share)| input.take(share as i64));
            let first = parts
                .next()
                .ok_or_else(|| Error::Internal("WeightedFlatMap without inputs".into()))?;
            Ok(parts.fold(first, |acc, part| acc.concatenate(part)))
        },
        node,
    )))
}

/// Elements read from each input: TensorFlow's normalization, in `f64`.
fn shares(weights: &[f64], cardinalities: &[u64]) -> Result<Vec<u64>> {
    let max_weight = weights.iter().copied().fold(0.0f64, f64::max);
    let mut min_cardinality = f64::MAX;
    let mut min_index = 0;
    for (k, (&c, &w)) in cardinalities.iter().zip(weights).enumerate() {
        let scaled = c as f64 * w / max_weight;
        if min_cardinality > scaled {
            min_cardinality = scaled;
            min_index = k;
        }
    }
    cardinalities
        .iter()
        .zip(weights)
        .enumerate()
        .map(|(k, (&c, &w))| {
            // `as` saturates, as the cast of a finite double does in range.
            let share = (min_cardinality * w / weights[min_index]) as u64;
            if share > c {
                return Err(Error::InvalidArgument(format!(
                    "Input {k} needs to have at least {share} elements. It only has {c} elements."
                )));
            }
            Ok(share)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::shares;

    #[test]
    fn tensorflow_s_example() {
        assert_eq!(
            shares(&[0.2, 0.3, 0.5], &[100, 100, 10]).unwrap(),
            vec![4, 6, 10]
        );
    }
}
