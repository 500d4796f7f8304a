//! `ParameterizedTruncatedNormal` and `StatelessParameterizedTruncatedNormal`:
//! normals of a given mean and deviation cut to `[minval, maxval]`, as
//! TensorFlow 2.21's CPU kernels draw them, in the output's type (float or
//! double; TensorFlow's half and bfloat16 kernels round after every
//! operation, which tfdata does not do, so they are refused).
//!
//! Per batch (one set of parameters) the bounds are normalised
//! (`(bound - mean) / stddev`, flipped so a one-sided bound is the lower),
//! and one of three rejection samplers runs: plain normals when at least
//! 1.3 deviations of one side lie inside the bounds; uniforms on the bounds
//! when they are narrower than a cutoff; else an exponential proposal
//! (Robert's). Each draws whole Philox blocks (4 floats or 2 doubles) and
//! takes their values in order. A sampler gives up after 1000 consecutive
//! rejections, as TensorFlow's does (an `Internal` error there).
//!
//! Streams: the stateful op reserves `batches * 2000 * ceil((samples + 3) /
//! 4)` blocks a run (scalar parameters regroup the output into batches of
//! 100 first, as TensorFlow does), the stateless one starts at its key and
//! counter. Batches draw one after another from that start. TensorFlow
//! splits large outputs over its intra-op threads and each thread skips
//! ahead to its share, so its values for outputs past one shard (more than
//! one batch of the stateful op, more than a few dozen elements of the
//! stateless one) depend on its thread count; one shard's cannot.

use std::ops::{Add, Div, Mul, Neg, Sub};
use std::sync::Mutex;

use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_dataset::philox::Philox;

use super::random::{
    box_muller_f32, box_muller_f64, key_counter_of_seed, node_generator, reserve, seed_pair,
    shape_of, unit_f32, unit_f64,
};
use super::{Compute, KernelDef, check_size, expect_inputs, one_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "ParameterizedTruncatedNormal",
        outputs: one_output,
        build: stateful,
    },
    KernelDef {
        op: "StatelessParameterizedTruncatedNormal",
        outputs: one_output,
        build: stateless,
    },
];

/// Consecutive rejections a sampler allows (TensorFlow's `kMaxIterations`).
const MAX_ITERATIONS: u32 = 1000;
/// The batch size scalar parameters regroup the output into.
const DESIRED_BATCH: i64 = 100;

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(message.to_string())
}

/// The arithmetic the samplers need, in the output's type.
trait Real:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    fn of(x: f64) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn is_finite(self) -> bool;
    fn is_infinite(self) -> bool;
    /// One Philox block's uniforms in `[0, 1)` (4 floats or 2 doubles).
    fn uniforms(block: [u32; 4]) -> Vec<Self>;
    /// One Philox block's standard normals.
    fn normals(block: [u32; 4]) -> Vec<Self>;
    fn tensor(values: &[Self], shape: Vec<i64>) -> Result<Tensor>;
    fn values(t: &Tensor) -> Result<Vec<Self>>;
}

impl Real for f32 {
    fn of(x: f64) -> Self {
        x as f32
    }
    fn exp(self) -> Self {
        f32::exp(self)
    }
    fn ln(self) -> Self {
        f32::ln(self)
    }
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    fn is_finite(self) -> bool {
        f32::is_finite(self)
    }
    fn is_infinite(self) -> bool {
        f32::is_infinite(self)
    }
    fn uniforms(b: [u32; 4]) -> Vec<Self> {
        b.map(unit_f32).to_vec()
    }
    fn normals(b: [u32; 4]) -> Vec<Self> {
        let [x, y] = box_muller_f32(b[0], b[1]);
        let [z, w] = box_muller_f32(b[2], b[3]);
        vec![x, y, z, w]
    }
    fn tensor(values: &[Self], shape: Vec<i64>) -> Result<Tensor> {
        Tensor::from_slice(values, shape)
    }
    fn values(t: &Tensor) -> Result<Vec<Self>> {
        t.to_vec()
    }
}

impl Real for f64 {
    fn of(x: f64) -> Self {
        x
    }
    fn exp(self) -> Self {
        f64::exp(self)
    }
    fn ln(self) -> Self {
        f64::ln(self)
    }
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }
    fn is_infinite(self) -> bool {
        f64::is_infinite(self)
    }
    fn uniforms(b: [u32; 4]) -> Vec<Self> {
        vec![unit_f64(b[0], b[1]), unit_f64(b[2], b[3])]
    }
    fn normals(b: [u32; 4]) -> Vec<Self> {
        box_muller_f64(b).to_vec()
    }
    fn tensor(values: &[Self], shape: Vec<i64>) -> Result<Tensor> {
        Tensor::from_slice(values, shape)
    }
    fn values(t: &Tensor) -> Result<Vec<Self>> {
        t.to_vec()
    }
}

/// `count` samples of one batch's truncated normal, drawn from `rng`,
/// handed to `emit` in order.
fn batch<T: Real>(
    params: [T; 4],
    count: u64,
    rng: &mut Philox,
    mut emit: impl FnMut(T),
) -> Result<()> {
    let [mean, mut stddev, mut minval, mut maxval] = params;
    let zero = T::of(0.0);
    if !(stddev > zero && minval < maxval && (minval.is_finite() || maxval.is_finite())) {
        return Err(invalid("Invalid parameters"));
    }
    if count == 0 {
        return Ok(());
    }
    // A one-sided bound becomes the lower one, or both bounds positive.
    if (minval.is_infinite() && minval < zero) || maxval < mean {
        std::mem::swap(&mut minval, &mut maxval);
        stddev = -stddev;
    }
    let norm_min = (minval - mean) / stddev;
    let norm_max = (maxval - mean) / stddev;
    let sqrt_factor = (norm_min * norm_min + T::of(4.0)).sqrt();
    let cutoff = T::of(2.0)
        * (T::of(0.5) + (norm_min * (norm_min - sqrt_factor)) / T::of(4.0)).exp()
        / (norm_min + sqrt_factor);
    let diff = norm_max - norm_min;
    let inside = T::of(1.3);
    let mut left = count;
    let mut iterations = 0u32;
    if (norm_min < -inside && norm_max >= zero) || (norm_max > inside && norm_min <= zero) {
        // Normals, rejected outside the bounds.
        while left > 0 {
            for x in T::normals(rng.next_block()) {
                if x >= norm_min && x <= norm_max {
                    emit(x * stddev + mean);
                    left -= 1;
                    if left == 0 {
                        break;
                    }
                    iterations = 0;
                } else {
                    iterations += 1;
                    if iterations > MAX_ITERATIONS {
                        return Err(Error::Internal(
                            "TruncatedNormal randn rejection sampler failed to accept a sample."
                                .into(),
                        ));
                    }
                }
            }
        }
    } else if diff < cutoff {
        // Uniforms on the bounds.
        let plus = if norm_min < zero {
            zero
        } else {
            norm_min * norm_min
        };
        while left > 0 {
            let z: Vec<T> = T::uniforms(rng.next_block())
                .into_iter()
                .map(|r| r * diff + norm_min)
                .collect();
            let u = T::uniforms(rng.next_block());
            for (&z, &u) in z.iter().zip(&u) {
                let g = (plus - z * z) / T::of(2.0);
                let accept = u <= g.exp();
                if accepted(
                    accept,
                    &mut iterations,
                    "TruncatedNormal uniform rejection sampler failed to  accept a sample.",
                )? {
                    emit(z * stddev + mean);
                    left -= 1;
                    if left == 0 {
                        break;
                    }
                }
            }
        }
    } else {
        // An exponential proposal offset by the lower bound.
        let alpha = (norm_min + (norm_min * norm_min + T::of(4.0)).sqrt()) / T::of(2.0);
        while left > 0 {
            let rand = T::uniforms(rng.next_block());
            for pair in rand.chunks_exact(2) {
                let z = -pair[0].ln() / alpha + norm_min;
                let x = if norm_min < alpha {
                    alpha - z
                } else {
                    norm_min - alpha
                };
                let g = (-x * x / T::of(2.0)).exp();
                let u = pair[1];
                let accept = u <= g && z < norm_max;
                if accepted(
                    accept,
                    &mut iterations,
                    "TruncatedNormal exponential distribution rejection sampler failed to accept a sample.",
                )? {
                    emit(z * stddev + mean);
                    left -= 1;
                    if left == 0 {
                        break;
                    }
                }
            }
        }
    }
    Ok(())
}

/// One proposal of the uniform and exponential samplers: whether it is
/// taken (which restarts the count of rejections in a row), or the error
/// TensorFlow gives (`failure`) when the last of `MAX_ITERATIONS` proposals
/// in a row is rejected too.
fn accepted(accept: bool, iterations: &mut u32, failure: &str) -> Result<bool> {
    if accept {
        *iterations = 0;
        Ok(true)
    } else if *iterations + 1 >= MAX_ITERATIONS {
        Err(Error::Internal(failure.into()))
    } else {
        *iterations += 1;
        Ok(false)
    }
}

fn float_type(attrs: &NodeAttrs) -> Result<DType> {
    let dtype = attrs.dtype("dtype")?;
    match dtype {
        DType::Float | DType::Double => Ok(dtype),
        DType::Half | DType::BFloat16 => Err(Error::Unimplemented(format!(
            "{}: {dtype} (TensorFlow rounds after every operation; tfdata computes in float and double)",
            attrs.op
        ))),
        other => Err(attrs.error(format!("{} has no kernel for {other}", attrs.op))),
    }
}

/// TensorFlow's `TensorShape::DebugString`.
fn debug_shape(shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
}

fn stateful(attrs: &NodeAttrs) -> Result<Compute> {
    let dtype = float_type(attrs)?;
    let generator: Mutex<Philox> = node_generator(attrs)?;
    Ok(Box::new(move |inputs| match dtype {
        DType::Float => run_stateful::<f32>(&inputs, &generator),
        _ => run_stateful::<f64>(&inputs, &generator),
    }))
}

fn run_stateful<T: Real>(inputs: &[Tensor], generator: &Mutex<Philox>) -> Result<Vec<Tensor>> {
    const OP: &str = "ParameterizedTruncatedNormal";
    expect_inputs(OP, inputs, 5)?;
    if inputs[0].shape().len() != 1 {
        return Err(invalid(format!(
            "Input shape should be a vector, got shape: {}",
            debug_shape(inputs[0].shape())
        )));
    }
    if inputs[0].num_elements() == 0 {
        return Err(invalid("Shape tensor must not be empty"));
    }
    let shape = shape_of(OP, &inputs[0])?;
    let n = tfdata_core::tensor::num_elements(&shape)?;
    check_size(OP, DType::Float, n)?;
    let names = ["means", "stddevs", "minvals", "maxvals"];
    for (t, name) in inputs[1..].iter().zip(names) {
        if t.shape().len() > 1 {
            return Err(invalid(format!(
                "Input {name} should be a scalar or vector, got shape: {}",
                debug_shape(t.shape())
            )));
        }
    }
    let mut batches = shape[0];
    let mut per_batch = shape[1..].iter().product::<i64>();
    let p = &inputs[1..];
    let single = |t: &Tensor| t.shape().is_empty() || t.shape() == [1];
    if single(&p[0]) && single(&p[1]) && p[2].shape().is_empty() && p[3].shape().is_empty() {
        // Same parameters everywhere: batches of 100.
        per_batch = DESIRED_BATCH;
        batches = n.div_ceil(DESIRED_BATCH as u64) as i64;
    } else {
        for (t, name) in p.iter().zip(names) {
            if !(t.shape().is_empty() || t.shape()[0] == 1 || t.shape()[0] == batches) {
                return Err(invalid(format!(
                    "Input {name} should have length 1 or shape[0], got shape: {}",
                    debug_shape(t.shape())
                )));
            }
        }
    }
    let params: Vec<Vec<T>> = p.iter().map(T::values).collect::<Result<_>>()?;
    let blocks = (batches as u64)
        .saturating_mul(2 * u64::from(MAX_ITERATIONS))
        .saturating_mul(per_batch as u64 + 3)
        / 4;
    let mut rng = reserve(generator, blocks);
    let mut out = Vec::with_capacity(n as usize);
    for b in 0..batches as usize {
        let at = |v: &Vec<T>| if v.len() == 1 { v[0] } else { v[b] };
        let start = b as u64 * per_batch as u64;
        let count = (start + per_batch as u64).min(n).saturating_sub(start);
        let param = [
            at(&params[0]),
            at(&params[1]),
            at(&params[2]),
            at(&params[3]),
        ];
        batch(param, count, &mut rng, |x| out.push(x))?;
    }
    Ok(vec![T::tensor(&out, shape)?])
}

fn stateless(attrs: &NodeAttrs) -> Result<Compute> {
    let dtype = float_type(attrs)?;
    Ok(Box::new(move |inputs| match dtype {
        DType::Float => run_stateless::<f32>(&inputs),
        _ => run_stateless::<f64>(&inputs),
    }))
}

/// The broadcast of several shapes (numpy's rules), `None` if they clash.
fn broadcast(shapes: &[&[i64]]) -> Option<Vec<i64>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1i64; rank];
    for s in shapes {
        for (k, &d) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + k];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return None;
            }
        }
    }
    Some(out)
}

/// The flat index into a tensor of shape `s` broadcast to `out`, for the
/// flat index `i` of `out`.
fn broadcast_index(s: &[i64], out: &[i64], mut i: u64) -> usize {
    let (mut index, mut stride) = (0u64, 1u64);
    for k in (0..out.len()).rev() {
        let d = out[k].max(1) as u64;
        let coord = i % d;
        i /= d;
        if let Some(pos) = (k + s.len()).checked_sub(out.len()) {
            let sd = s[pos] as u64;
            if sd != 1 {
                index += coord * stride;
            }
            stride *= sd;
        }
    }
    index as usize
}

fn run_stateless<T: Real>(inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    const OP: &str = "StatelessParameterizedTruncatedNormal";
    expect_inputs(OP, inputs, 6)?;
    let shape = shape_of(OP, &inputs[0])?;
    if inputs[1].shape() != [2] {
        return Err(invalid(format!(
            "seed must have shape [2], not {}",
            debug_shape(inputs[1].shape())
        )));
    }
    let p = &inputs[2..];
    let shapes: Vec<&[i64]> = p.iter().map(|t| t.shape()).collect();
    let Some(batch_shape) = broadcast(&shapes) else {
        return Err(invalid(format!(
            "Incompatible shapes: means {}, stddevs {}, minvals {}, maxvals {}",
            debug_shape(shapes[0]),
            debug_shape(shapes[1]),
            debug_shape(shapes[2]),
            debug_shape(shapes[3])
        )));
    };
    if shape.len() < batch_shape.len() || shape[shape.len() - batch_shape.len()..] != batch_shape {
        return Err(invalid("Shape passed in must end with broadcasted shape."));
    }
    let n = tfdata_core::tensor::num_elements(&shape)?;
    check_size(OP, DType::Float, n)?;
    if n == 0 {
        return Ok(vec![T::tensor(&[], shape)?]);
    }
    let batches = tfdata_core::tensor::num_elements(&batch_shape)?.max(1);
    let per_batch = n / batches;
    let (s0, s1) = seed_pair(OP, &inputs[1])?;
    let mut rng = key_counter_of_seed(s0, s1);
    let params: Vec<Vec<T>> = p.iter().map(T::values).collect::<Result<_>>()?;
    let mut out = vec![T::of(0.0); n as usize];
    for b in 0..batches {
        let at = |k: usize| params[k][broadcast_index(shapes[k], &batch_shape, b)];
        let param = [at(0), at(1), at(2), at(3)];
        let mut sample = 0u64;
        batch(param, per_batch, &mut rng, |x| {
            out[(sample * batches + b) as usize] = x;
            sample += 1;
        })?;
    }
    Ok(vec![T::tensor(&out, shape)?])
}
