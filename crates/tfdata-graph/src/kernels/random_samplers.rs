//! The rejection samplers, bit for bit TensorFlow 2.21's CPU kernels: gamma
//! (`RandomGamma`, `StatelessRandomGammaV2`/`V3`), Poisson
//! (`RandomPoissonV2`, `StatelessRandomPoisson`) and
//! binomial (`StatelessRandomBinomial`).
//!
//! A sample takes a variable number of Philox blocks, so TensorFlow gives
//! every output its own stretch of the stream: output `i` (parameters
//! outermost, samples innermost: `i = param * samples + sample`) starts
//! `256 * i` blocks past the op's generator (binomial inversion: `42 * i`).
//! The result still lands in the output's usual layout, samples outermost
//! (`sample * params + param`). Everything is computed in double:
//!
//! * Uniforms come two a block ([`unit_f64`] of words 0-1 and 2-3), normals
//!   two a block ([`box_muller_f64`]); a sampler keeps one block of each and
//!   hands its values out last first, as TensorFlow's sample buffers do.
//! * Gamma is Marsaglia and Tsang's transformation-rejection (`alpha < 1`
//!   boosted by one and scaled by `u^(1/alpha)`), `alpha == 1` the
//!   exponential `-log1p(-u)`.
//! * Poisson is Knuth's product of uniforms below rate 10 and Hörmann's
//!   transformed rejection (PTRS) from 10 up, with `lgamma`.
//! * Binomial is inversion (summed geometric variables) when the mean of the
//!   smaller side is below 10, else Hörmann's BTRS with Stirling tails;
//!   `count * prob` and `1 - prob` are computed in the parameters' type.
//!
//! `log`, `exp`, `log1p`, `pow` are the platform libm's (glibc on Linux, as
//! TensorFlow's build calls them); `lgamma` is the `libm` crate's, a port of
//! the same fdlibm algorithm glibc uses for positive arguments (the only ones
//! PTRS asks about). Stateful kernels reserve `256 * outputs` blocks a run,
//! so run `k` continues where TensorFlow's run `k` does.
//!
//! TensorFlow's loops have no bound (a half Poisson with a rate past 65504
//! never ends); ours give up after [`MAX_ROUNDS`] rejections with an error.

use std::sync::Mutex;

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_dataset::philox::Philox;

use super::random::{
    box_muller_f64, f32_to_f16, key_counter_of_seed, node_generator, reserve, seed_pair, shape_of,
    unit_f64, v2_generator,
};
use super::{Compute, KernelDef, check_size, expect_inputs, one_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "RandomGamma",
        outputs: one_output,
        build: |a| stateful(a, Dist::Gamma, "T", "T"),
    },
    KernelDef {
        op: "RandomPoissonV2",
        outputs: one_output,
        build: |a| stateful(a, Dist::Poisson, "R", "dtype"),
    },
    KernelDef {
        op: "StatelessRandomGammaV2",
        outputs: one_output,
        build: |a| stateless(a, Dist::Gamma, Seed::Pair, "dtype", "dtype"),
    },
    KernelDef {
        op: "StatelessRandomGammaV3",
        outputs: one_output,
        build: |a| stateless(a, Dist::Gamma, Seed::KeyCounter, "dtype", "dtype"),
    },
    KernelDef {
        op: "StatelessRandomPoisson",
        outputs: one_output,
        build: |a| stateless(a, Dist::Poisson, Seed::Pair, "Rtype", "dtype"),
    },
    KernelDef {
        op: "StatelessRandomBinomial",
        outputs: one_output,
        build: binomial_kernel,
    },
];

/// Blocks of the stream each output owns.
const BLOCKS_PER_OUTPUT: u64 = 256;
/// Blocks each binomial-inversion output owns (TensorFlow's choice: ten
/// standard deviations of a mean below 10).
const INVERSION_BLOCKS_PER_OUTPUT: u64 = 42;
/// Rejections before a sampler gives up (TensorFlow loops on).
const MAX_ROUNDS: u32 = 1 << 20;

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(message.to_string())
}

fn no_convergence(op: &str) -> Error {
    invalid(format!(
        "{op}: the rejection sampler found no sample in {MAX_ROUNDS} rounds (TensorFlow would loop on)"
    ))
}

/// One output's draws: uniform and normal doubles from its own generator,
/// each kind buffered a block at a time and handed out last first.
struct Draws {
    generator: Philox,
    uniforms: [f64; 2],
    uniforms_left: usize,
    normals: [f64; 2],
    normals_left: usize,
}

impl Draws {
    /// The draws of the output `blocks` blocks past `base`.
    fn at(base: Philox, blocks: u64) -> Draws {
        let mut generator = base;
        generator.skip(blocks);
        Draws {
            generator,
            uniforms: [0.0; 2],
            uniforms_left: 0,
            normals: [0.0; 2],
            normals_left: 0,
        }
    }

    fn uniform(&mut self) -> f64 {
        if self.uniforms_left == 0 {
            let b = self.generator.next_block();
            self.uniforms = [unit_f64(b[0], b[1]), unit_f64(b[2], b[3])];
            self.uniforms_left = 2;
        }
        self.uniforms_left -= 1;
        self.uniforms[self.uniforms_left]
    }

    fn normal(&mut self) -> f64 {
        if self.normals_left == 0 {
            self.normals = box_muller_f64(self.generator.next_block());
            self.normals_left = 2;
        }
        self.normals_left -= 1;
        self.normals[self.normals_left]
    }
}

/// A gamma(`alpha`, 1) sample (Marsaglia-Tsang), `None` after
/// [`MAX_ROUNDS`] rejections.
fn gamma(alpha: f64, draws: &mut Draws) -> Option<f64> {
    if alpha == 1.0 {
        return Some(-(-draws.uniform()).ln_1p());
    }
    let boosted = alpha < 1.0;
    let d = alpha + if boosted { 2.0 / 3.0 } else { -1.0 / 3.0 };
    let c = 1.0 / 3.0 / d.sqrt();
    for _ in 0..MAX_ROUNDS {
        let x = draws.normal();
        let mut v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        v = v * v * v;
        let u = draws.uniform();
        // The squeeze first: it spares the two logs for most samples.
        if u < 1.0 - 0.0331 * (x * x) * (x * x) || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
            let mut res = d * v;
            if boosted {
                let b = draws.uniform();
                res *= b.powf(1.0 / alpha);
            }
            return Some(res);
        }
    }
    None
}

/// A Poisson(`rate`) sample no larger than `highest` (the output type's
/// largest value), `None` after [`MAX_ROUNDS`] rounds.
fn poisson(rate: f64, highest: f64, draws: &mut Draws) -> Option<f64> {
    if rate < 10.0 {
        // Knuth: the number of uniforms whose product stays above e^-rate.
        let exp_neg_rate = (-rate).exp();
        let mut prod = 1.0;
        let mut x = 0.0;
        for _ in 0..MAX_ROUNDS {
            prod *= draws.uniform();
            if prod <= exp_neg_rate && x <= highest {
                return Some(x);
            }
            x += 1.0;
        }
        return None;
    }
    // Hörmann's PTRS: G(u) = (2a / (0.5 - |u|) + b) u + rate + 0.43.
    let log_rate = rate.ln();
    let b = 0.931 + 2.53 * rate.sqrt();
    let a = -0.059 + 0.02483 * b;
    let inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
    for _ in 0..MAX_ROUNDS {
        let u = draws.uniform() - 0.5;
        let v = draws.uniform();
        let u_shifted = 0.5 - u.abs();
        let k = ((2.0 * a / u_shifted + b) * u + rate + 0.43).floor();
        if k > highest {
            continue;
        }
        // The box under the curve where acceptance needs no logs.
        if u_shifted >= 0.07 && v <= 0.9277 - 3.6224 / (b - 2.0) {
            return Some(k);
        }
        if k < 0.0 || (u_shifted < 0.013 && v > u_shifted) {
            continue;
        }
        let s = (v * inv_alpha / (a / (u_shifted * u_shifted) + b)).ln();
        let t = -rate + k * log_rate - libm::lgamma_r(k + 1.0).0;
        if s <= t {
            return Some(k);
        }
    }
    None
}

/// The number of geometric(`prob`) variables whose sum stays within
/// `count`: a binomial(`count`, `prob`) sample for a small mean.
fn binomial_inversion(count: f64, prob: f64, draws: &mut Draws) -> Option<f64> {
    let mut geom_sum = 0.0;
    let log_q = (-prob).ln_1p();
    for num_geom in 0..MAX_ROUNDS {
        let u = draws.uniform();
        geom_sum += (u.ln() / log_q).ceil();
        if geom_sum > count {
            return Some(f64::from(num_geom));
        }
    }
    None
}

/// `log(k!)` minus its Stirling approximation (tabulated up to 9).
fn stirling_approx_tail(k: f64) -> f64 {
    const TAIL: [f64; 10] = [
        0.0810614667953272,
        0.0413406959554092,
        0.0276779256849983,
        0.02079067210376509,
        0.0166446911898211,
        0.0138761288230707,
        0.0118967099458917,
        0.0104112652619720,
        0.00925546218271273,
        0.00833056343336287,
    ];
    if k <= 9.0 {
        // k is a count here (never negative); truncation as C++'s cast.
        return TAIL[(k.max(0.0) as usize).min(9)];
    }
    let kp1sq = (k + 1.0) * (k + 1.0);
    (1.0 / 12.0 - (1.0 / 360.0 - 1.0 / 1260.0 / kp1sq) / kp1sq) / (k + 1.0)
}

/// Hörmann's BTRS: a binomial(`count`, `prob`) sample, `prob <= 0.5` and
/// mean at least 10.
fn btrs(count: f64, prob: f64, draws: &mut Draws) -> Option<f64> {
    let stddev = (count * prob * (1.0 - prob)).sqrt();
    let b = 1.15 + 2.53 * stddev;
    let a = -0.0873 + 0.0248 * b + 0.01 * prob;
    let c = count * prob + 0.5;
    let v_r = 0.92 - 4.2 / b;
    let r = prob / (1.0 - prob);
    let alpha = (2.83 + 5.1 / b) * stddev;
    let m = ((count + 1.0) * prob).floor();
    for _ in 0..MAX_ROUNDS {
        let u = draws.uniform();
        let v = draws.uniform();
        let u = u - 0.5;
        let us = 0.5 - u.abs();
        let k = ((2.0 * a / us + b) * u + c).floor();
        if us >= 0.07 && v <= v_r {
            return Some(k);
        }
        if k < 0.0 || k > count {
            continue;
        }
        // TensorFlow's form of the acceptance test (a log short of the
        // paper's, kept as TensorFlow has it).
        let v = (v * alpha / (a / (us * us) + b)).ln();
        let upperbound = (m + 0.5) * ((m + 1.0) / (r * (count - m + 1.0))).ln()
            + (count + 1.0) * ((count - m + 1.0) / (count - k + 1.0)).ln()
            + (k + 0.5) * (r * (count - k + 1.0) / (k + 1.0)).ln()
            + stirling_approx_tail(m)
            + stirling_approx_tail(count - m)
            - stirling_approx_tail(k)
            - stirling_approx_tail(count - k);
        if v <= upperbound {
            return Some(k);
        }
    }
    None
}

#[derive(Clone, Copy, PartialEq)]
enum Dist {
    Gamma,
    Poisson,
}

#[derive(Clone, Copy, PartialEq)]
enum Seed {
    /// A `seed` pair input.
    Pair,
    /// `key`, `counter` and `alg` inputs.
    KeyCounter,
}

/// A parameter tensor's values as doubles (exact for every type allowed).
fn values(op: &str, t: &Tensor) -> Result<Vec<f64>> {
    match t.dtype() {
        DType::Double => t.to_vec(),
        DType::Float => Ok(t.to_vec::<f32>()?.into_iter().map(f64::from).collect()),
        DType::Int32 => Ok(t.to_vec::<i32>()?.into_iter().map(f64::from).collect()),
        // C++'s int64 to double conversion rounds to nearest, as `as` does.
        DType::Int64 => Ok(t.to_vec::<i64>()?.into_iter().map(|x| x as f64).collect()),
        DType::Half => tfdata_dataset::kernels::cast(t, DType::Double)?.to_vec(),
        other => Err(invalid(format!("{op}: parameters of type {other}"))),
    }
}

/// The largest value of an output type, as TensorFlow's Poisson compares.
fn highest(dtype: DType) -> f64 {
    match dtype {
        DType::Half => 65504.0,
        DType::Float => f64::from(f32::MAX),
        DType::Int32 => f64::from(i32::MAX),
        DType::Int64 => i64::MAX as f64,
        _ => f64::MAX,
    }
}

/// `static_cast` of a double to an x86 integer: NaN and out-of-range values
/// become the type's minimum (the "integer indefinite" value of `cvttsd2si`).
fn x86_i32(x: f64) -> i32 {
    if x > -2147483649.0 && x < 2147483648.0 {
        x as i32
    } else {
        i32::MIN
    }
}

fn x86_i64(x: f64) -> i64 {
    // -2^63 <= x < 2^63.
    if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&x) {
        x as i64
    } else {
        i64::MIN
    }
}

/// `x` with subnormals flushed to (signed) zero: TensorFlow runs its
/// kernels with the CPU's flush-to-zero mode on.
fn flush_f64(x: f64) -> f64 {
    if x.is_subnormal() {
        0.0f64.copysign(x)
    } else {
        x
    }
}

/// `x` rounded to float, flushed to zero as TensorFlow's CPU mode does.
fn to_f32(x: f64) -> f32 {
    let f = x as f32;
    if f.is_subnormal() {
        0.0f32.copysign(f)
    } else {
        f
    }
}

/// Doubles as a tensor of `dtype`, converted as `static_cast` does under
/// flush-to-zero (half: through float, then Eigen's software rounding).
fn output(dtype: DType, shape: Vec<i64>, v: &[f64]) -> Result<Tensor> {
    match dtype {
        DType::Double => {
            Tensor::from_slice(&v.iter().map(|&x| flush_f64(x)).collect::<Vec<_>>(), shape)
        }
        DType::Float => {
            Tensor::from_slice(&v.iter().map(|&x| to_f32(x)).collect::<Vec<_>>(), shape)
        }
        DType::Int32 => {
            Tensor::from_slice(&v.iter().map(|&x| x86_i32(x)).collect::<Vec<_>>(), shape)
        }
        DType::Int64 => {
            Tensor::from_slice(&v.iter().map(|&x| x86_i64(x)).collect::<Vec<_>>(), shape)
        }
        DType::Half => {
            let bytes: Vec<u8> = v
                .iter()
                .flat_map(|&x| f32_to_f16(to_f32(x)).to_le_bytes())
                .collect();
            Tensor::new(dtype, shape, TensorData::Buffer(Bytes::from(bytes)))
        }
        other => Err(invalid(format!("output type {other}"))),
    }
}

/// Checks a type attribute against the types TensorFlow registers.
pub(super) fn check_type(attrs: &NodeAttrs, name: &str, allowed: &[DType]) -> Result<DType> {
    let dtype = attrs.dtype(name)?;
    if allowed.contains(&dtype) {
        Ok(dtype)
    } else {
        Err(attrs.error(format!(
            "TensorFlow has no CPU kernel for {} with {name}={dtype}",
            attrs.op
        )))
    }
}

pub(super) const FLOATS: &[DType] = &[DType::Half, DType::Float, DType::Double];
pub(super) const NUMBERS: &[DType] = &[
    DType::Half,
    DType::Float,
    DType::Double,
    DType::Int32,
    DType::Int64,
];

/// Samples for every parameter: `samples` per parameter, output `i` drawn
/// from `base` skipped `256 * i` blocks, written samples outermost.
fn sample_all(
    op: &str,
    dist: Dist,
    params: &[f64],
    samples: u64,
    base: Philox,
    out_type: DType,
) -> Result<Vec<f64>> {
    let n = params.len() as u64 * samples;
    let mut out = vec![0f64; n as usize];
    let top = highest(out_type);
    for (p, &param) in params.iter().enumerate() {
        for s in 0..samples {
            let index = p as u64 * samples + s;
            let mut draws = Draws::at(base, BLOCKS_PER_OUTPUT * index);
            let x = match dist {
                Dist::Gamma => gamma(param, &mut draws),
                Dist::Poisson => poisson(param, top, &mut draws),
            }
            .ok_or_else(|| no_convergence(op))?;
            out[(s * params.len() as u64) as usize + p] = x;
        }
    }
    Ok(out)
}

fn stateful(attrs: &NodeAttrs, dist: Dist, param_attr: &str, out_attr: &str) -> Result<Compute> {
    let op = attrs.op.to_string();
    let allowed = if param_attr == out_attr {
        FLOATS
    } else {
        NUMBERS
    };
    let out_type = check_type(attrs, out_attr, allowed)?;
    check_type(attrs, param_attr, allowed)?;
    let generator: Mutex<Philox> = node_generator(attrs)?;
    Ok(Box::new(move |inputs| {
        let op = op.as_str();
        expect_inputs(op, &inputs, 2)?;
        let mut shape = shape_of(op, &inputs[0])?;
        let samples = tfdata_core::tensor::num_elements(&shape)?;
        let params = &inputs[1];
        shape.extend_from_slice(params.shape());
        let n = tfdata_core::tensor::num_elements(&shape)?;
        check_size(op, out_type, n)?;
        if n == 0 {
            return Ok(vec![output(out_type, shape, &[])?]);
        }
        let base = reserve(&generator, n.saturating_mul(BLOCKS_PER_OUTPUT));
        let values = sample_all(op, dist, &values(op, params)?, samples, base, out_type)?;
        Ok(vec![output(out_type, shape, &values)?])
    }))
}

/// Whether `shape` ends with `tail` (the parameters' shape).
fn ends_with(shape: &[i64], tail: &[i64]) -> bool {
    shape.len() >= tail.len() && shape[shape.len() - tail.len()..] == *tail
}

/// The generator of a stateless call: from the seed pair at `inputs[1]`, or
/// the key, counter and algorithm at `inputs[1..4]`.
fn stateless_generator(op: &str, seed: Seed, inputs: &[Tensor]) -> Result<Philox> {
    match seed {
        Seed::Pair => {
            let (s0, s1) = seed_pair(op, &inputs[1])?;
            Ok(key_counter_of_seed(s0, s1))
        }
        Seed::KeyCounter => v2_generator(op, &inputs[1], &inputs[2], &inputs[3]),
    }
}

fn stateless(
    attrs: &NodeAttrs,
    dist: Dist,
    seed: Seed,
    param_attr: &str,
    out_attr: &str,
) -> Result<Compute> {
    let op = attrs.op.to_string();
    let allowed = if param_attr == out_attr {
        FLOATS
    } else {
        NUMBERS
    };
    let out_type = check_type(attrs, out_attr, allowed)?;
    check_type(attrs, param_attr, allowed)?;
    Ok(Box::new(move |inputs| {
        let op = op.as_str();
        let seeds = if seed == Seed::Pair { 1 } else { 3 };
        expect_inputs(op, &inputs, 2 + seeds)?;
        let shape = shape_of(op, &inputs[0])?;
        if seed == Seed::Pair && inputs[1].shape() != [2] {
            return Err(invalid(format!(
                "seed must have shape [2], not {}",
                debug_shape(inputs[1].shape())
            )));
        }
        let n = tfdata_core::tensor::num_elements(&shape)?;
        check_size(op, out_type, n)?;
        if n == 0 {
            return Ok(vec![output(out_type, shape, &[])?]);
        }
        let base = stateless_generator(op, seed, &inputs)?;
        let params = &inputs[1 + seeds];
        if !ends_with(&shape, params.shape()) {
            return Err(invalid("Shape passed in must end with broadcasted shape."));
        }
        let values = values(op, params)?;
        // `shape` ends with the parameters' shape and holds elements, so
        // there is at least one parameter.
        let samples = n / values.len().max(1) as u64;
        let values = sample_all(op, dist, &values, samples, base, out_type)?;
        Ok(vec![output(out_type, shape, &values)?])
    }))
}

/// TensorFlow's `TensorShape::DebugString`: `[2,3]`.
fn debug_shape(shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
}

/// The broadcast of two shapes (numpy's rules), `None` if they clash.
fn broadcast_shape(a: &[i64], b: &[i64]) -> Option<Vec<i64>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[i64], i: usize| {
        if i < rank - s.len() {
            1
        } else {
            s[i - (rank - s.len())]
        }
    };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// The flat index into a tensor of shape `s` that broadcasts to `out` for
/// the flat output index `i`.
fn broadcast_index(s: &[i64], out: &[i64], mut i: u64) -> usize {
    let mut index = 0u64;
    let mut stride = 1u64;
    for k in (0..out.len()).rev() {
        let d = out[k] as u64;
        let coord = i % d.max(1);
        i /= d.max(1);
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

/// `x` rounded to the parameters' type (`count * prob` and `1 - prob` are
/// computed in it; products of two halves or floats are exact in double, so
/// one rounding gives the type's own arithmetic).
fn in_type(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::Float => f64::from(x as f32),
        DType::Half => {
            let h = f32_to_f16(x as f32);
            let t = Tensor::new(
                DType::Half,
                vec![],
                TensorData::Buffer(Bytes::copy_from_slice(&h.to_le_bytes())),
            );
            t.and_then(|t| tfdata_dataset::kernels::cast(&t, DType::Double))
                .and_then(|t| t.to_scalar::<f64>())
                .unwrap_or(f64::NAN)
        }
        _ => x,
    }
}

/// One binomial sample for output `index` (TensorFlow's case analysis).
fn binomial(param_type: DType, count: f64, prob: f64, base: Philox, index: u64) -> Option<f64> {
    if count <= 0.0 || prob <= 0.0 {
        return Some(0.0);
    }
    if prob >= 1.0 {
        return Some(count);
    }
    // Integer parameters never get here (prob is 0 or at least 1).
    let (p, flipped) = if prob <= 0.5 {
        (prob, false)
    } else if prob > 0.5 {
        (in_type(param_type, 1.0 - prob), true)
    } else {
        // A NaN probability: NaN (integer outputs are refused by the caller).
        return Some(f64::NAN);
    };
    let x = if in_type(param_type, count * p) >= 10.0 {
        btrs(count, p, &mut Draws::at(base, BLOCKS_PER_OUTPUT * index))?
    } else {
        binomial_inversion(
            count,
            p,
            &mut Draws::at(base, INVERSION_BLOCKS_PER_OUTPUT * index),
        )?
    };
    Some(if flipped { count - x } else { x })
}

fn binomial_kernel(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "StatelessRandomBinomial";
    let out_type = check_type(attrs, "dtype", NUMBERS)?;
    let param_type = check_type(attrs, "T", FLOATS)?;
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 4)?;
        let (shape_t, seed, counts, probs) = (&inputs[0], &inputs[1], &inputs[2], &inputs[3]);
        if seed.shape() != [2] {
            return Err(invalid(format!(
                "seed must have shape [2], not {}",
                debug_shape(seed.shape())
            )));
        }
        let (shape, batch_shape) = binomial_shapes(OP, shape_t, counts, probs)?;
        let n = tfdata_core::tensor::num_elements(&shape)?;
        check_size(OP, out_type, n)?;
        if n == 0 {
            return Ok(vec![output(out_type, shape, &[])?]);
        }
        let (s0, s1) = seed_pair(OP, seed)?;
        let base = key_counter_of_seed(s0, s1);
        let types = (param_type, out_type);
        let out = binomial_samples(OP, types, &shape, &batch_shape, counts, probs, base)?;
        Ok(vec![out])
    }))
}

/// A binomial op's output shape and the broadcast shape of its counts and
/// probabilities (its batches), checked as TensorFlow's kernels check them.
pub(super) fn binomial_shapes(
    op: &str,
    shape_t: &Tensor,
    counts: &Tensor,
    probs: &Tensor,
) -> Result<(Vec<i64>, Vec<i64>)> {
    let Some(batch_shape) = broadcast_shape(counts.shape(), probs.shape()) else {
        return Err(invalid(format!(
            "counts and probs must have compatible batch dimensions: {} vs. {}",
            debug_shape(counts.shape()),
            debug_shape(probs.shape())
        )));
    };
    if shape_t.shape().len() != 1 {
        return Err(invalid(format!(
            "Input shape should be a vector, got shape: {}",
            debug_shape(shape_t.shape())
        )));
    }
    let shape = shape_of(op, shape_t)?;
    if !ends_with(&shape, &batch_shape) {
        return Err(invalid("Shape passed in must end with broadcasted shape."));
    }
    Ok((shape, batch_shape))
}

/// The binomial samples of output `shape` (`batch_shape` its trailing
/// dimensions), output `i` drawn from `base` skipped as TensorFlow's
/// functor skips it. `types`: the parameters' and the output's.
pub(super) fn binomial_samples(
    op: &str,
    (param_type, out_type): (DType, DType),
    shape: &[i64],
    batch_shape: &[i64],
    counts: &Tensor,
    probs: &Tensor,
    base: Philox,
) -> Result<Tensor> {
    let n = tfdata_core::tensor::num_elements(shape)?;
    check_size(op, out_type, n)?;
    if n == 0 {
        return output(out_type, shape.to_vec(), &[]);
    }
    let batches = tfdata_core::tensor::num_elements(batch_shape)?;
    let samples = n / batches.max(1);
    let (cv, pv) = (values(op, counts)?, values(op, probs)?);
    let mut out = vec![0f64; n as usize];
    for b in 0..batches {
        let count = cv[broadcast_index(counts.shape(), batch_shape, b)];
        let prob = pv[broadcast_index(probs.shape(), batch_shape, b)];
        // TensorFlow's kernel leaves these elements unwritten (whatever
        // the buffer held): no value to match, so refused.
        if prob.is_nan()
            && (count > 0.0 || count.is_nan())
            && matches!(out_type, DType::Int32 | DType::Int64)
        {
            return Err(invalid(format!(
                "{op}: a NaN probability has no {out_type} sample (TensorFlow leaves the output uninitialized)"
            )));
        }
        for s in 0..samples {
            out[(s * batches + b) as usize] =
                binomial(param_type, count, prob, base, b * samples + s)
                    .ok_or_else(|| no_convergence(op))?;
        }
    }
    output(out_type, shape.to_vec(), &out)
}

#[cfg(test)]
mod tests {
    use tfdata_core::{DType, Tensor};

    use super::super::testing::{int, run, ty};

    fn mean(v: &[f64]) -> f64 {
        v.iter().sum::<f64>() / v.len() as f64
    }

    #[test]
    fn gamma_and_poisson_have_the_right_means() {
        let g = run(
            "RandomGamma",
            &[
                ("T", ty(DType::Double)),
                ("S", ty(DType::Int32)),
                ("seed", int(1)),
            ],
            vec![Tensor::vector(&[4000i32]), Tensor::vector(&[0.5f64, 3.0])],
        )
        .unwrap()
        .remove(0);
        assert_eq!(g.shape(), [4000, 2]);
        let v: Vec<f64> = g.to_vec().unwrap();
        let a: Vec<f64> = v.iter().step_by(2).copied().collect();
        let b: Vec<f64> = v.iter().skip(1).step_by(2).copied().collect();
        assert!((mean(&a) - 0.5).abs() < 0.05 && (mean(&b) - 3.0).abs() < 0.15);
        let p = run(
            "RandomPoissonV2",
            &[
                ("R", ty(DType::Float)),
                ("dtype", ty(DType::Int64)),
                ("S", ty(DType::Int32)),
                ("seed", int(2)),
            ],
            vec![Tensor::vector(&[4000i32]), Tensor::vector(&[2.5f32, 40.0])],
        )
        .unwrap()
        .remove(0);
        let v: Vec<i64> = p.to_vec().unwrap();
        let a: Vec<f64> = v.iter().step_by(2).map(|&x| x as f64).collect();
        let b: Vec<f64> = v.iter().skip(1).step_by(2).map(|&x| x as f64).collect();
        assert!((mean(&a) - 2.5).abs() < 0.1 && (mean(&b) - 40.0).abs() < 0.5);
    }

    #[test]
    fn binomial_has_the_right_mean_and_refuses_bad_shapes() {
        let attrs = [
            ("T", ty(DType::Double)),
            ("dtype", ty(DType::Double)),
            ("S", ty(DType::Int32)),
            ("Tseed", ty(DType::Int32)),
        ];
        let out = run(
            "StatelessRandomBinomial",
            &attrs,
            vec![
                Tensor::vector(&[3000i32, 2]),
                Tensor::vector(&[1i32, 2]),
                Tensor::vector(&[10.0f64, 200.0]),
                Tensor::scalar(0.3f64),
            ],
        )
        .unwrap()
        .remove(0);
        let v: Vec<f64> = out.to_vec().unwrap();
        let a: Vec<f64> = v.iter().step_by(2).copied().collect();
        let b: Vec<f64> = v.iter().skip(1).step_by(2).copied().collect();
        assert!((mean(&a) - 3.0).abs() < 0.15 && (mean(&b) - 60.0).abs() < 0.6);
        let e = run(
            "StatelessRandomBinomial",
            &attrs,
            vec![
                Tensor::vector(&[3i32]),
                Tensor::vector(&[1i32, 2]),
                Tensor::vector(&[10.0f64, 20.0]),
                Tensor::scalar(0.3f64),
            ],
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("must end with broadcasted shape"),
            "{e}"
        );
    }
}
