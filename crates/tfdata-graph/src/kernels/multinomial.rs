//! `StatelessMultinomial` and `Multinomial`: class indices drawn from
//! logits, as TensorFlow 2.21's CPU kernel draws them
//! (`sample_from_datasets` runs the stateless one once per element to pick
//! the next input; `tf.random.categorical` is the seeded stateful one).
//!
//! Per row of `logits` `[batch, classes]`: the largest finite logit `m`;
//! a running total, in double, of `exp(logit - m)` over the finite logits
//! (a non-finite one adds nothing); per sample a uniform double (two
//! Philox words, as the uniform double kernels) times the total, and the
//! first class whose running total exceeds it (`upper_bound`). The
//! generator is the v1 stateless one for the seed pair, or a stateful
//! node's, which reserves `256 * 2 * batch * ceil4(samples)` blocks a run
//! with output (so run `k` continues where TensorFlow's does); rows draw one
//! after another from it. TensorFlow splits rows over its intra-op threads,
//! each starting `row * (samples + 3) / 4` blocks in, so its values for
//! several rows can depend on its thread count; one row (what
//! `sample_from_datasets` passes) cannot.

use bytes::Bytes;
use std::sync::Mutex;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};

use tfdata_dataset::philox::{Philox, Words};

use super::random::{key_counter_of_seed, node_generator, reserve, seed_pair, unit_f64};
use super::{Compute, KernelDef, check_size, expect_inputs, one_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "StatelessMultinomial",
        outputs: one_output,
        build: |a| build(a, None),
    },
    KernelDef {
        op: "Multinomial",
        outputs: one_output,
        build: |a| build(a, Some(node_generator(a)?)),
    },
];

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(message.to_string())
}

/// The kernel; `stateful` is a `Multinomial` node's generator (none: the
/// stateless op's seed input).
fn build(attrs: &NodeAttrs, stateful: Option<Mutex<Philox>>) -> Result<Compute> {
    let op = attrs.op.to_string();
    let logits_dtype = if attrs.has("T") {
        attrs.dtype("T")?
    } else {
        DType::Float
    };
    if !matches!(logits_dtype, DType::Float | DType::Double) {
        return Err(Error::Unimplemented(format!(
            "{}: {logits_dtype} logits (tfdata computes in float and double)",
            attrs.op
        )));
    }
    let out = if attrs.has("output_dtype") {
        attrs.dtype("output_dtype")?
    } else {
        DType::Int64
    };
    if !matches!(out, DType::Int32 | DType::Int64) {
        return Err(invalid(format!(
            "{}: output_dtype must be int32 or int64, got {out}",
            attrs.op
        )));
    }
    Ok(Box::new(move |inputs| {
        let op = op.as_str();
        expect_inputs(op, &inputs, if stateful.is_some() { 2 } else { 3 })?;
        let (logits, num_samples) = (&inputs[0], &inputs[1]);
        let [batch, classes] = *logits.shape() else {
            return Err(invalid(format!(
                "logits should be a matrix, got shape {:?}",
                logits.shape()
            )));
        };
        if num_samples.num_elements() != 1 || !num_samples.shape().is_empty() {
            return Err(invalid("num_samples should be a scalar."));
        }
        let samples = i64::from(num_samples.to_scalar::<i32>()?);
        if samples < 0 {
            return Err(invalid(format!(
                "num_samples should be non-negative, got {samples}"
            )));
        }
        if classes <= 0 {
            return Err(invalid(format!(
                "num_classes should be positive, got {classes}"
            )));
        }
        let total = (batch as u64).saturating_mul(samples as u64);
        check_size(op, out, total)?;
        let start = match &stateful {
            None => {
                let (s0, s1) = seed_pair(op, &inputs[2])?;
                key_counter_of_seed(s0, s1)
            }
            // Nothing reserved for an empty output.
            Some(generator) if total == 0 => reserve(generator, 0),
            Some(generator) => {
                let ceil4 = (samples as u64).div_ceil(4) * 4;
                reserve(generator, (batch as u64) * ceil4 * 2 * 256)
            }
        };
        let values: Vec<f64> = match logits.dtype() {
            DType::Float => logits.to_vec::<f32>()?.into_iter().map(f64::from).collect(),
            DType::Double => logits.to_vec::<f64>()?,
            other => return Err(invalid(format!("{op}: logits are {other}"))),
        };
        let mut words = Words::new(start);
        let mut picks: Vec<i64> = Vec::with_capacity(total as usize);
        let mut cdf = vec![0f64; classes as usize];
        for row in values.chunks(classes as usize) {
            let max = row
                .iter()
                .copied()
                .filter(|x| x.is_finite())
                .fold(f64::MIN, f64::max);
            let mut running = 0f64;
            for (c, &x) in cdf.iter_mut().zip(row) {
                if x.is_finite() {
                    running += (x - max).exp();
                }
                *c = running;
            }
            for _ in 0..samples {
                let (x0, x1) = (words.next_word(), words.next_word());
                let to_find = unit_f64(x0, x1) * running;
                picks.push(cdf.partition_point(|&c| c <= to_find) as i64);
            }
        }
        let shape = vec![batch, samples];
        let data = match out {
            DType::Int32 => picks
                .iter()
                .flat_map(|&p| (p as i32).to_le_bytes())
                .collect::<Vec<u8>>(),
            _ => picks.iter().flat_map(|&p| p.to_le_bytes()).collect(),
        };
        Ok(vec![Tensor::new(
            out,
            shape,
            TensorData::Buffer(Bytes::from(data)),
        )?])
    }))
}
