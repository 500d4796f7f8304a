//! Random kernels, bit for bit TensorFlow 2.21's on CPU: the stateful ops
//! (`RandomUniform`, `RandomUniformInt`, `RandomStandardNormal`,
//! `TruncatedNormal`, `RandomShuffle`) that `tf.random.*` and
//! `tf.image.random_*` emit, and the stateless ones (`StatelessRandom*V2`
//! with `StatelessRandomGetKeyCounter[Alg]` and `StatelessRandomGetAlg`,
//! and the v1 `StatelessRandom*` taking a seed pair).
//!
//! This module has the stateful ops and what every random op draws with
//! (the distributions, the seed-pair and V2 generators); the stateless
//! ops' kernels are [`super::random_stateless`]'s.
//!
//! Every op draws from Philox4x32-10 ([`Philox`]): 128-bit counter, 64-bit
//! key, ten rounds, one block of four 32-bit words per counter value.
//!
//! * Stateless ops: a seed pair becomes a key and counter by one Philox
//!   block of the seeds under a fixed key ([`key_counter_of_seed`]); the
//!   V2 ops take that key (`uint64 [1]`) and counter (`uint64 [2]`)
//!   directly, with `alg` 1 (Philox) or 3 (auto, Philox on CPU); ThreeFry
//!   (2) is refused as TensorFlow refuses it on CPU.
//! * Stateful ops: a node seeded with `seed`/`seed2` starts at key `seed`,
//!   counter `[0, seed2]`; each run reserves `256 * n` blocks for its `n`
//!   values (`RandomShuffle`: one word per swap), so run `k` starts where
//!   TensorFlow's run `k` does. A node with both seeds 0 draws fresh seeds
//!   (reproducible inside `tfdata_dataset::random::with_seed`).
//! * Values: element `i` of a fixed-cost distribution comes from block
//!   `i / g` (`g` values a block: 4 for 32-bit and 16-bit types, 2 for
//!   64-bit ones). Uniform floats put random bits under the exponent of 1
//!   and subtract 1 (23 bits for float, 10 half, 7 bfloat16, 52 double from
//!   two words); integers are `lo + bits % (hi - lo)` (64-bit: two words);
//!   normals are Box-Muller in float (double for double: `u1` floored at
//!   1e-7, the angle `2*pi*u2` computed in double) with the platform libm's
//!   `log`, `sin` and `cos` (TensorFlow's Linux build calls glibc's
//!   `logf` and `sincosf`; glibc's `sinf` and `cosf` gave the same bits on
//!   every case, glibc 2.36 as in our Debian 12 image; another libm, musl's
//!   or macOS's, may not), then rounded to half/bfloat16. Truncated normals reject `|x| >= 2`, taking
//!   words one at a time; each group of `g` values starts `256 * g / 4`
//!   blocks after the previous group's start.
//!
//! `tests/differential.rs` replays TensorFlow's outputs for these ops
//! (`tests/differential/random.json`) and requires the same bits.

use std::sync::Mutex;

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};

use tfdata_dataset::philox::{Philox, Words, lo_hi, philox_block};

use super::strings::int_values;
use super::{Compute, KernelDef, check_size, expect_inputs, one_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "RandomUniform",
        outputs: one_output,
        build: |a| stateful(a, Dist::Uniform),
    },
    KernelDef {
        op: "RandomStandardNormal",
        outputs: one_output,
        build: |a| stateful(a, Dist::Normal),
    },
    KernelDef {
        op: "TruncatedNormal",
        outputs: one_output,
        build: |a| stateful(a, Dist::Truncated),
    },
    KernelDef {
        op: "RandomUniformInt",
        outputs: one_output,
        build: |a| stateful(a, Dist::Int),
    },
    KernelDef {
        op: "RandomShuffle",
        outputs: one_output,
        build: shuffle,
    },
    KernelDef {
        op: "NonDeterministicInts",
        outputs: one_output,
        build: non_deterministic_ints,
    },
];

/// TensorFlow's `RNG_ALG_PHILOX`, what it picks on CPU.
pub(super) const PHILOX: i32 = 1;
/// `RNG_ALG_AUTO_SELECT`: Philox on CPU.
const AUTO: i64 = 3;

pub(super) fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

/// A stateless op's generator for a seed pair: the pair, as a counter, run
/// through one Philox block under a fixed key; the block's first two words
/// are the key, the last two the counter's upper half.
pub(super) fn key_counter_of_seed(s0: u64, s1: u64) -> Philox {
    let [a, b] = lo_hi(s0);
    let [c, d] = lo_hi(s1);
    let mix = philox_block([a, b, c, d], [0x3EC8_F720, 0x0246_1E29]);
    Philox {
        counter: [0, 0, mix[2], mix[3]],
        key: [mix[0], mix[1]],
    }
}

/// `[0, 1)` from the low 23 bits of `x`, as a float in `[1, 2)` minus 1.
pub(super) fn unit_f32(x: u32) -> f32 {
    f32::from_bits(0x3F80_0000 | (x & 0x7F_FFFF)) - 1.0
}

/// `[0, 1)` from the low 20 bits of `x0` and all of `x1`.
pub(super) fn unit_f64(x0: u32, x1: u32) -> f64 {
    let mantissa = (u64::from(x0 & 0xF_FFFF) << 32) | u64::from(x1);
    f64::from_bits((1023 << 52) | mantissa) - 1.0
}

/// Half `[0, 1)` from the low 10 bits (exact in float, and in half).
fn unit_f16(x: u32) -> u16 {
    f32_to_f16(f32::from(x as u16 & 0x3FF) / 1024.0)
}

/// Bfloat16 `[0, 1)` from the low 7 bits.
fn unit_bf16(x: u32) -> u16 {
    f32_to_bf16(f32::from(x as u16 & 0x7F) / 128.0)
}

/// Float to half, rounding to nearest even (Eigen's conversion).
pub(super) fn f32_to_f16(f: f32) -> u16 {
    let x = f.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let a = x & 0x7FFF_FFFF;
    if a >= 0x7F80_0000 {
        let nan = if a > 0x7F80_0000 {
            0x200 | ((a >> 13) & 0x3FF) as u16
        } else {
            0
        };
        return sign | 0x7C00 | nan;
    }
    let exp = (a >> 23) as i32 - 127;
    let (m, shift, base) = if exp > 15 {
        return sign | 0x7C00;
    } else if exp >= -14 {
        (a & 0x7F_FFFF, 13, ((exp + 15) as u32) << 10)
    } else if exp >= -25 {
        ((a & 0x7F_FFFF) | 0x80_0000, (-14 - exp) as u32 + 13, 0)
    } else {
        return sign;
    };
    let mut h = base | (m >> shift);
    let rem = m & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    if rem > half || (rem == half && h & 1 == 1) {
        h += 1;
    }
    sign | h as u16
}

/// Float to bfloat16, rounding to nearest even; NaN to a quiet NaN.
fn f32_to_bf16(f: f32) -> u16 {
    let x = f.to_bits();
    if f.is_nan() {
        return ((x >> 16) as u16 & 0x8000) | 0x7FC0;
    }
    (x.wrapping_add(0x7FFF + ((x >> 16) & 1)) >> 16) as u16
}

/// Box-Muller in float from two words: two standard normals.
pub(super) fn box_muller_f32(x0: u32, x1: u32) -> [f32; 2] {
    let u1 = unit_f32(x0).max(1.0e-7);
    // `2 * M_PI * u` with M_PI a double: computed in double, then rounded.
    let v1 = (2.0 * std::f64::consts::PI * f64::from(unit_f32(x1))) as f32;
    let r = (-2.0f32 * u1.ln()).sqrt();
    [v1.sin() * r, v1.cos() * r]
}

/// Box-Muller in double from four words: two standard normals.
pub(super) fn box_muller_f64(x: [u32; 4]) -> [f64; 2] {
    let u1 = unit_f64(x[0], x[1]).max(1.0e-7);
    let v1 = 2.0 * std::f64::consts::PI * unit_f64(x[2], x[3]);
    let r = (-2.0 * u1.ln()).sqrt();
    [v1.sin() * r, v1.cos() * r]
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Dist {
    Uniform,
    Normal,
    Truncated,
    /// `[minval, maxval)`.
    Int,
    /// Every value of the integer type.
    FullInt,
}

/// The requested output shape (a 1-D int32/int64 tensor).
pub(super) fn shape_of(op: &str, t: &Tensor) -> Result<Vec<i64>> {
    if t.shape().len() > 1 {
        return Err(invalid(op, "shape must be a vector of {int32,int64}"));
    }
    let dims = int_values(op, t, "shape")?;
    if let Some(d) = dims.iter().find(|&&d| d < 0) {
        return Err(invalid(op, format!("Dimension {d} must be >= 0")));
    }
    Ok(dims)
}

/// The 16-bit values `bits` as a half or bfloat16 tensor.
fn bits16(dtype: DType, shape: Vec<i64>, bits: Vec<u16>) -> Result<Tensor> {
    let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
    Tensor::new(dtype, shape, TensorData::Buffer(Bytes::from(bytes)))
}

/// Values a block gives for `dtype` (TensorFlow's group size).
fn group_size(dtype: DType) -> usize {
    match dtype {
        DType::Double | DType::Int64 | DType::UInt64 => 2,
        _ => 4,
    }
}

/// `n` values, block after block from `rng`: `per_block` turns one block
/// into its group of values.
fn blocks<T: Copy>(
    n: usize,
    rng: &mut Philox,
    per_block: impl Fn([u32; 4]) -> [T; 4],
    g: usize,
) -> Vec<T> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let values = per_block(rng.next_block());
        let take = g.min(n - out.len());
        out.extend_from_slice(&values[..take]);
    }
    out
}

/// Truncated normals: group `k` of `g` values starts `256 * g / 4` blocks
/// past group `k - 1`, and takes words one at a time, rejecting
/// `|x| >= 2`.
fn truncated<T: Copy>(
    n: usize,
    rng: Philox,
    g: usize,
    mut group: impl FnMut(&mut Words) -> [T; 4],
) -> Vec<T> {
    let mut out = Vec::with_capacity(n);
    let mut k = 0u64;
    while out.len() < n {
        let mut start = rng;
        start.skip(k * (256 * g as u64 / 4));
        let values = group(&mut Words::new(start));
        let take = g.min(n - out.len());
        out.extend_from_slice(&values[..take]);
        k += 1;
    }
    out
}

fn truncated_f32(words: &mut Words) -> [f32; 4] {
    let mut out = [0f32; 4];
    let mut i = 0;
    loop {
        let (x0, x1) = (words.next_word(), words.next_word());
        for f in box_muller_f32(x0, x1) {
            if f.abs() < 2.0 {
                out[i] = f;
                i += 1;
                if i == 4 {
                    return out;
                }
            }
        }
    }
}

fn truncated_f64(words: &mut Words) -> [f64; 4] {
    let mut out = [0f64; 4];
    let mut i = 0;
    loop {
        let x = [
            words.next_word(),
            words.next_word(),
            words.next_word(),
            words.next_word(),
        ];
        for d in box_muller_f64(x) {
            if d.abs() < 2.0 {
                out[i] = d;
                i += 1;
                if i == 2 {
                    return out;
                }
            }
        }
    }
}

/// `n` values of `dist` as a tensor of `dtype` from the generator `rng`
/// (`range` for [`Dist::Int`]).
pub(super) fn draw(
    op: &str,
    dist: Dist,
    dtype: DType,
    shape: Vec<i64>,
    range: Option<(i64, i64)>,
    mut rng: Philox,
) -> Result<Tensor> {
    let n = tfdata_core::tensor::num_elements(&shape)?;
    check_size(op, dtype, n)?;
    let n = n as usize;
    let g = group_size(dtype);
    match (dist, dtype) {
        (Dist::Int, _) => {
            let (lo, hi) = range.ok_or_else(|| invalid(op, "missing minval/maxval"))?;
            match dtype {
                DType::Int32 => {
                    let (lo, span) = (lo as i32, (hi as u32).wrapping_sub(lo as u32));
                    let v = blocks(
                        n,
                        &mut rng,
                        |b| b.map(|x| lo.wrapping_add((x % span) as i32)),
                        g,
                    );
                    Tensor::from_slice(&v, shape)
                }
                DType::Int64 => {
                    let span = (hi as u64).wrapping_sub(lo as u64);
                    let v = blocks(
                        n,
                        &mut rng,
                        |b| {
                            let w = |i: usize| u64::from(b[i]) | (u64::from(b[i + 1]) << 32);
                            let v = |i| lo.wrapping_add((w(i) % span) as i64);
                            [v(0), v(2), 0, 0]
                        },
                        g,
                    );
                    Tensor::from_slice(&v, shape)
                }
                other => Err(invalid(op, format!("unsupported integer dtype {other}"))),
            }
        }
        (Dist::FullInt, _) => {
            let pair = |b: [u32; 4], i: usize| u64::from(b[i]) | (u64::from(b[i + 1]) << 32);
            match dtype {
                DType::Int32 => {
                    Tensor::from_slice(&blocks(n, &mut rng, |b| b.map(|x| x as i32), g), shape)
                }
                DType::UInt32 => Tensor::from_slice(&blocks(n, &mut rng, |b| b, g), shape),
                DType::Int64 => Tensor::from_slice(
                    &blocks(
                        n,
                        &mut rng,
                        |b| [pair(b, 0) as i64, pair(b, 2) as i64, 0, 0],
                        g,
                    ),
                    shape,
                ),
                DType::UInt64 => Tensor::from_slice(
                    &blocks(n, &mut rng, |b| [pair(b, 0), pair(b, 2), 0, 0], g),
                    shape,
                ),
                other => Err(invalid(op, format!("unsupported integer dtype {other}"))),
            }
        }
        (Dist::Uniform, DType::Float) => {
            Tensor::from_slice(&blocks(n, &mut rng, |b| b.map(unit_f32), g), shape)
        }
        (Dist::Uniform, DType::Half) => {
            bits16(dtype, shape, blocks(n, &mut rng, |b| b.map(unit_f16), g))
        }
        (Dist::Uniform, DType::BFloat16) => {
            bits16(dtype, shape, blocks(n, &mut rng, |b| b.map(unit_bf16), g))
        }
        (Dist::Uniform, DType::Double) => Tensor::from_slice(
            &blocks(
                n,
                &mut rng,
                |b| [unit_f64(b[0], b[1]), unit_f64(b[2], b[3]), 0.0, 0.0],
                g,
            ),
            shape,
        ),
        (Dist::Normal, DType::Float | DType::Half | DType::BFloat16) => {
            let v = blocks(
                n,
                &mut rng,
                |b| {
                    let [a, c] = box_muller_f32(b[0], b[1]);
                    let [d, e] = box_muller_f32(b[2], b[3]);
                    [a, c, d, e]
                },
                g,
            );
            floats(dtype, shape, v)
        }
        (Dist::Normal, DType::Double) => Tensor::from_slice(
            &blocks(
                n,
                &mut rng,
                |b| {
                    let [a, c] = box_muller_f64(b);
                    [a, c, 0.0, 0.0]
                },
                g,
            ),
            shape,
        ),
        (Dist::Truncated, DType::Float | DType::Half | DType::BFloat16) => {
            floats(dtype, shape, truncated(n, rng, g, truncated_f32))
        }
        (Dist::Truncated, DType::Double) => {
            Tensor::from_slice(&truncated(n, rng, g, truncated_f64), shape)
        }
        (_, other) => Err(invalid(op, format!("unsupported dtype {other}"))),
    }
}

/// Floats as a float, half or bfloat16 tensor (rounded to nearest even).
fn floats(dtype: DType, shape: Vec<i64>, v: Vec<f32>) -> Result<Tensor> {
    match dtype {
        DType::Half => bits16(dtype, shape, v.into_iter().map(f32_to_f16).collect()),
        DType::BFloat16 => bits16(dtype, shape, v.into_iter().map(f32_to_bf16).collect()),
        _ => Tensor::from_slice(&v, shape),
    }
}

/// The generator of a stateful node: seeded from `seed`/`seed2`, or, with
/// both 0, from fresh seeds as TensorFlow does.
pub(super) fn node_generator(attrs: &NodeAttrs) -> Result<Mutex<Philox>> {
    let seed = attrs.int_or("seed", 0)?;
    let seed2 = attrs.int_or("seed2", 0)?;
    let (seed, seed2) = if seed == 0 && seed2 == 0 {
        let s = tfdata_dataset::random::unseeded_seed();
        (s, tfdata_dataset::random::unseeded_seed())
    } else {
        (seed as u64, seed2 as u64)
    };
    Ok(Mutex::new(Philox::from_seeds(seed, seed2)))
}

/// A node generator's start for this run, which reserves `blocks` blocks.
pub(super) fn reserve(generator: &Mutex<Philox>, blocks: u64) -> Philox {
    let mut g = generator.lock().unwrap_or_else(|e| e.into_inner());
    let start = *g;
    g.skip(blocks);
    start
}

/// A scalar integer input (`minval`, `maxval`).
pub(super) fn scalar_int(op: &str, t: &Tensor, what: &str) -> Result<i64> {
    let v = int_values(op, t, what)?;
    match (t.shape(), v.as_slice()) {
        ([], [x]) => Ok(*x),
        _ => Err(invalid(
            op,
            format!("{what} must be 0-D, got shape {:?}", t.shape()),
        )),
    }
}

/// Checks a float op's `dtype` attribute (integer ops': `ints`).
pub(super) fn check_dtype(attrs: &NodeAttrs, dtype: DType, allowed: &[DType]) -> Result<()> {
    if allowed.contains(&dtype) {
        Ok(())
    } else {
        Err(attrs.error(format!(
            "TensorFlow has no CPU kernel for {} with dtype {dtype}",
            attrs.op
        )))
    }
}

pub(super) const FLOAT_TYPES: &[DType] =
    &[DType::Half, DType::BFloat16, DType::Float, DType::Double];

fn stateful(attrs: &NodeAttrs, dist: Dist) -> Result<Compute> {
    let op = attrs.op.to_string();
    let dtype = attrs.dtype(if dist == Dist::Int { "Tout" } else { "dtype" })?;
    if dist == Dist::Int {
        check_dtype(attrs, dtype, &[DType::Int32, DType::Int64])?;
    } else {
        check_dtype(attrs, dtype, FLOAT_TYPES)?;
    }
    let generator = node_generator(attrs)?;
    Ok(Box::new(move |inputs| {
        let op = op.as_str();
        expect_inputs(op, &inputs, if dist == Dist::Int { 3 } else { 1 })?;
        let shape = shape_of(op, &inputs[0])?;
        let n = tfdata_core::tensor::num_elements(&shape)?;
        let range = if dist == Dist::Int {
            let lo = scalar_int(op, &inputs[1], "minval")?;
            let hi = scalar_int(op, &inputs[2], "maxval")?;
            // Zero impossible values are fine (TensorFlow checks after
            // returning an empty output).
            if n > 0 && lo >= hi {
                return Err(invalid(
                    op,
                    format!("Need minval < maxval, got {lo} >= {hi}"),
                ));
            }
            Some((lo, hi))
        } else {
            None
        };
        check_size(op, dtype, n)?;
        let rng = reserve(&generator, n.saturating_mul(256));
        Ok(vec![draw(op, dist, dtype, shape, range, rng)?])
    }))
}

fn shuffle(attrs: &NodeAttrs) -> Result<Compute> {
    let generator = node_generator(attrs)?;
    Ok(Box::new(move |inputs| {
        const OP: &str = "RandomShuffle";
        expect_inputs(OP, &inputs, 1)?;
        let t = &inputs[0];
        let rows = match t.shape().first() {
            Some(&rows) if rows > 1 && t.num_elements() > 1 => rows as usize,
            _ => return Ok(vec![t.clone()]),
        };
        if rows as u64 > u64::from(u32::MAX) {
            return Err(invalid(OP, "more than 2^32 rows are not supported"));
        }
        // One word per swap: `rows - 1` words, reserved in blocks of four.
        let rng = reserve(&generator, (rows as u64 - 1).div_ceil(4));
        Ok(vec![shuffle_rows(t, rows, rng)?])
    }))
}

/// `NonDeterministicInts`: 64 fresh random bits per element, cut to the
/// output type (TensorFlow's registered int32, int64, uint32, uint64). No
/// seed reaches it: inside `tfdata_dataset::random::with_seed` the bits
/// come from that scope, else from the OS's entropy.
fn non_deterministic_ints(attrs: &NodeAttrs) -> Result<Compute> {
    let dtype = attrs.dtype("dtype")?;
    check_dtype(
        attrs,
        dtype,
        &[DType::Int32, DType::Int64, DType::UInt32, DType::UInt64],
    )?;
    Ok(Box::new(move |inputs| {
        const OP: &str = "NonDeterministicInts";
        expect_inputs(OP, &inputs, 1)?;
        let shape = shape_of(OP, &inputs[0])?;
        let n = tfdata_core::tensor::num_elements(&shape)?;
        check_size(OP, dtype, n)?;
        let bits: Vec<u64> = (0..n)
            .map(|_| tfdata_dataset::random::unseeded_seed())
            .collect();
        Ok(vec![match dtype {
            DType::Int32 => {
                Tensor::from_slice(&bits.iter().map(|&x| x as i32).collect::<Vec<_>>(), shape)?
            }
            DType::UInt32 => {
                Tensor::from_slice(&bits.iter().map(|&x| x as u32).collect::<Vec<_>>(), shape)?
            }
            DType::Int64 => {
                Tensor::from_slice(&bits.iter().map(|&x| x as i64).collect::<Vec<_>>(), shape)?
            }
            _ => Tensor::from_slice(&bits, shape)?,
        }])
    }))
}

/// `t`'s `rows` rows (more than one) in a Fisher-Yates order: swap `i`
/// with `i + word % (rows - i)`, one Philox word per swap, as TensorFlow's
/// `ShuffleRange`.
pub(super) fn shuffle_rows(t: &Tensor, rows: usize, rng: Philox) -> Result<Tensor> {
    let mut words = Words::new(rng);
    let mut order: Vec<usize> = (0..rows).collect();
    for i in 0..rows - 1 {
        let j = i + (words.next_word() % (rows - i) as u32) as usize;
        order.swap(i, j);
    }
    let per_row = (t.num_elements() as usize).checked_div(rows).unwrap_or(0);
    let data = match t.data() {
        TensorData::Strings(s) => TensorData::Strings(
            order
                .iter()
                .flat_map(|&r| s[r * per_row..(r + 1) * per_row].iter().cloned())
                .collect(),
        ),
        TensorData::Buffer(b) => {
            let width = per_row * t.dtype().size().unwrap_or(1);
            let mut out = Vec::with_capacity(b.len());
            for &r in &order {
                out.extend_from_slice(&b[r * width..(r + 1) * width]);
            }
            TensorData::Buffer(Bytes::from(out))
        }
    };
    Tensor::new(t.dtype(), t.shape().to_vec(), data)
}

/// A seed pair input (int32 values sign-extend to 64 bits).
pub(super) fn seed_pair(op: &str, t: &Tensor) -> Result<(u64, u64)> {
    if t.shape() != [2] {
        return Err(invalid(
            op,
            format!("seed must have shape [2], not {:?}", t.shape()),
        ));
    }
    let v = match t.dtype() {
        DType::Int32 | DType::Int64 => int_values(op, t, "seed")?,
        other => {
            return Err(invalid(
                op,
                format!("seed must be int32 or int64, got {other}"),
            ));
        }
    };
    Ok((v[0] as u64, v[1] as u64))
}

fn u64s(op: &str, t: &Tensor, what: &str) -> Result<Vec<u64>> {
    match t.dtype() {
        DType::UInt64 => t.to_vec(),
        other => Err(invalid(op, format!("{what} must be uint64, got {other}"))),
    }
}

/// The generator of a V2 call from its `key`, `counter` and `alg` inputs.
pub(super) fn v2_generator(
    op: &str,
    key: &Tensor,
    counter: &Tensor,
    alg: &Tensor,
) -> Result<Philox> {
    let alg = scalar_int(op, alg, "alg")?;
    let counter_shape = counter.shape();
    let counter_len = match counter_shape {
        [n] => *n,
        _ => -1,
    };
    match alg {
        a if a == i64::from(PHILOX) || a == AUTO => {}
        // A Philox variant TensorFlow 2.21 checks the counter of, then
        // refuses on CPU.
        4 if counter_len < 4 => {
            return Err(invalid(
                op,
                format!(
                    "counter must be a vector with length at least 4; got shape: {counter_shape:?}. (Note that batched counters are not supported yet.)"
                ),
            ));
        }
        // ThreeFry (2) is XLA's only; everything else is unknown.
        a => {
            return Err(invalid(op, format!("Unsupported algorithm id: {a}")));
        }
    }
    // TensorFlow reads past a short key or counter (its values then vary
    // from run to run): refused here.
    if key.shape() != [1] {
        return Err(invalid(
            op,
            format!("key must have shape [1], not {:?}", key.shape()),
        ));
    }
    if counter_len < 2 {
        return Err(invalid(
            op,
            format!(
                "counter must be a vector with length at least 2; got shape: {counter_shape:?}"
            ),
        ));
    }
    let k = u64s(op, key, "key")?;
    let c = u64s(op, counter, "counter")?;
    let [c0, c1] = lo_hi(c[0]);
    let [c2, c3] = lo_hi(c[1]);
    Ok(Philox {
        counter: [c0, c1, c2, c3],
        key: lo_hi(k[0]),
    })
}

#[cfg(test)]
mod tests {
    use tfdata_core::{DType, Tensor};

    use super::super::testing::{f32s, int, kernel, mean_var, node, ty};
    use crate::attrs::NodeAttrs;

    #[test]
    fn uniform_is_in_range_with_the_right_moments_and_seeding() {
        let shape = || Tensor::vector(&[20000i32]);
        let seeded = kernel(
            "RandomUniform",
            &[
                ("dtype", ty(DType::Float)),
                ("seed", int(1)),
                ("seed2", int(2)),
            ],
        );
        let a = seeded(vec![shape()]).unwrap().remove(0);
        let b = seeded(vec![shape()]).unwrap().remove(0);
        let v = f32s(&a);
        assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)));
        let (m, var) = mean_var(&v);
        assert!(
            (m - 0.5).abs() < 0.01 && (var - 1.0 / 12.0).abs() < 0.003,
            "{m} {var}"
        );
        // Successive elements differ; a node built again replays them.
        assert_ne!(a, b);
        let again = kernel(
            "RandomUniform",
            &[
                ("dtype", ty(DType::Float)),
                ("seed", int(1)),
                ("seed2", int(2)),
            ],
        );
        assert_eq!(again(vec![shape()]).unwrap()[0], a);
        // Unseeded nodes draw fresh values.
        let fresh = |_| {
            kernel("RandomUniform", &[("dtype", ty(DType::Float))])(vec![shape()])
                .unwrap()
                .remove(0)
        };
        assert_ne!(fresh(0), fresh(1));
        let d = kernel("RandomUniform", &[("dtype", ty(DType::Double))])(vec![Tensor::vector(&[
            2i64, 3,
        ])])
        .unwrap()
        .remove(0);
        assert_eq!((d.dtype(), d.shape()), (DType::Double, &[2i64, 3][..]));
        let h = kernel("RandomUniform", &[("dtype", ty(DType::Half))])(vec![Tensor::vector(&[
            5000i32,
        ])])
        .unwrap()
        .remove(0);
        let hv: Vec<f32> = tfdata_dataset::kernels::cast(&h, DType::Float)
            .unwrap()
            .to_vec()
            .unwrap();
        assert!(hv.iter().all(|&x| (0.0..1.0).contains(&x)));
        // A huge shape is refused before anything is allocated.
        assert!(
            kernel("RandomUniform", &[("dtype", ty(DType::Float))])(vec![Tensor::vector(&[
                1i64 << 40
            ])])
            .is_err()
        );
        assert!(
            kernel("RandomUniform", &[("dtype", ty(DType::Float))])(vec![Tensor::vector(&[-1i32])])
                .is_err()
        );
    }

    #[test]
    fn uniform_int_covers_its_range_uniformly() {
        let k = kernel(
            "RandomUniformInt",
            &[("Tout", ty(DType::Int32)), ("seed", int(7))],
        );
        let v: Vec<i32> = k(vec![
            Tensor::vector(&[30000i32]),
            Tensor::scalar(-3i32),
            Tensor::scalar(7i32),
        ])
        .unwrap()[0]
            .to_vec()
            .unwrap();
        let mut counts = [0usize; 10];
        for x in v {
            assert!((-3..7).contains(&x));
            counts[(x + 3) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (2700..3300).contains(&c)),
            "{counts:?}"
        );
        let e = k(vec![
            Tensor::vector(&[3i32]),
            Tensor::scalar(0i32),
            Tensor::scalar(0i32),
        ])
        .unwrap_err();
        assert!(
            e.to_string().contains("Need minval < maxval, got 0 >= 0"),
            "{e}"
        );
        let big = kernel("RandomUniformInt", &[("Tout", ty(DType::Int64))]);
        let v: Vec<i64> = big(vec![
            Tensor::vector(&[1000i32]),
            Tensor::scalar(i64::MIN),
            Tensor::scalar(i64::MAX),
        ])
        .unwrap()[0]
            .to_vec()
            .unwrap();
        assert!(v.iter().any(|&x| x < 0) && v.iter().any(|&x| x > 0));
    }

    #[test]
    fn normals_have_the_right_moments() {
        let shape = || Tensor::vector(&[40000i32]);
        let n = f32s(
            &kernel(
                "RandomStandardNormal",
                &[("dtype", ty(DType::Float)), ("seed", int(3))],
            )(vec![shape()])
            .unwrap()[0],
        );
        let (m, var) = mean_var(&n);
        assert!(m.abs() < 0.02 && (var - 1.0).abs() < 0.03, "{m} {var}");
        let t = f32s(
            &kernel(
                "TruncatedNormal",
                &[("dtype", ty(DType::Float)), ("seed", int(3))],
            )(vec![shape()])
            .unwrap()[0],
        );
        assert!(t.iter().all(|x| x.abs() < 2.0));
        let (m, var) = mean_var(&t);
        // The variance of a standard normal truncated to (-2, 2).
        assert!(m.abs() < 0.02 && (var - 0.7737).abs() < 0.03, "{m} {var}");
    }

    #[test]
    fn shuffle_permutes_rows() {
        let k = kernel("RandomShuffle", &[("seed", int(5))]);
        let rows: Vec<i32> = (0..100).flat_map(|r| [r, r]).collect();
        let t = Tensor::from_slice(&rows, vec![100, 2]).unwrap();
        let a: Vec<i32> = k(vec![t.clone()]).unwrap()[0].to_vec().unwrap();
        let b: Vec<i32> = k(vec![t.clone()]).unwrap()[0].to_vec().unwrap();
        assert_ne!(a, rows);
        assert_ne!(a, b);
        assert!(a.chunks(2).all(|p| p[0] == p[1]));
        let mut sorted = a.clone();
        sorted.sort_unstable();
        let mut want = rows.clone();
        want.sort_unstable();
        assert_eq!(sorted, want);
        let s = Tensor::strings(vec!["a".into(), "b".into(), "c".into()], vec![3]).unwrap();
        let mut out: Vec<_> = k(vec![s]).unwrap()[0].string_values().unwrap().to_vec();
        out.sort();
        assert_eq!(out, ["a", "b", "c"]);
        assert_eq!(
            k(vec![Tensor::scalar(4i32)]).unwrap()[0],
            Tensor::scalar(4i32)
        );
    }

    #[test]
    fn non_deterministic_ints_are_fresh_bits_of_the_type() {
        for dtype in [DType::Int32, DType::Int64, DType::UInt32, DType::UInt64] {
            let k = kernel("NonDeterministicInts", &[("dtype", ty(dtype))]);
            let a = k(vec![Tensor::vector(&[2i64, 50])]).unwrap().remove(0);
            let b = k(vec![Tensor::vector(&[2i64, 50])]).unwrap().remove(0);
            assert_eq!((a.dtype(), a.shape()), (dtype, &[2i64, 50][..]));
            // 100 draws of 32 or 64 bits: repeats (or equal runs) would
            // mean the bits are not fresh.
            assert_ne!(a, b);
            let mut words: Vec<u64> = match dtype {
                DType::Int32 => a
                    .to_vec::<i32>()
                    .unwrap()
                    .iter()
                    .map(|&x| x as u64)
                    .collect(),
                DType::UInt32 => a
                    .to_vec::<u32>()
                    .unwrap()
                    .iter()
                    .map(|&x| x as u64)
                    .collect(),
                DType::Int64 => a
                    .to_vec::<i64>()
                    .unwrap()
                    .iter()
                    .map(|&x| x as u64)
                    .collect(),
                _ => a.to_vec::<u64>().unwrap(),
            };
            words.sort_unstable();
            words.dedup();
            assert!(words.len() >= 99, "{}", words.len());
        }
        let float = node("NonDeterministicInts", &[("dtype", ty(DType::Float))]);
        assert!(
            (super::super::lookup("NonDeterministicInts").unwrap().build)(&NodeAttrs::of(&float))
                .is_err()
        );
    }
}
