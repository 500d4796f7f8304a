//! Random kernels: the stateful ops (`RandomUniform`, `RandomUniformInt`,
//! `RandomStandardNormal`, `TruncatedNormal`, `RandomShuffle`) that
//! `tf.random.*` and `tf.image.random_*` emit, and the stateless ones
//! (`StatelessRandom*V2` with `StatelessRandomGetKeyCounter[Alg]`, and the
//! v1 `StatelessRandom*` taking a seed pair).
//!
//! The values are not TensorFlow's (its Philox streams are not replayed):
//! only the distributions are, so tests compare statistics, not values.
//! Uniform floats are `[0, 1)` from the top mantissa bits (TensorFlow's
//! construction), uniform integers `[minval, maxval)` without modulo bias,
//! normals by Box-Muller, truncated normals by rejection outside two
//! standard deviations. Determinism follows TensorFlow's contract: a
//! stateful op with `seed` or `seed2` set draws the same sequence every
//! time its node is built, one unseeded draws a fresh sequence; each call
//! (each element) advances the node's generator, kept in the kernel. A
//! stateless op is a pure function of its key, counter and algorithm (or
//! seed pair). `StatelessRandomGetKeyCounter` derives tfdata's own key and
//! counter from the seed, meaningful only to these kernels.

use std::sync::Mutex;

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};

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
        op: "StatelessRandomUniformV2",
        outputs: one_output,
        build: |a| stateless(a, Dist::Uniform, Seed::KeyCounter),
    },
    KernelDef {
        op: "StatelessRandomNormalV2",
        outputs: one_output,
        build: |a| stateless(a, Dist::Normal, Seed::KeyCounter),
    },
    KernelDef {
        op: "StatelessTruncatedNormalV2",
        outputs: one_output,
        build: |a| stateless(a, Dist::Truncated, Seed::KeyCounter),
    },
    KernelDef {
        op: "StatelessRandomUniformIntV2",
        outputs: one_output,
        build: |a| stateless(a, Dist::Int, Seed::KeyCounter),
    },
    KernelDef {
        op: "StatelessRandomUniform",
        outputs: one_output,
        build: |a| stateless(a, Dist::Uniform, Seed::Pair),
    },
    KernelDef {
        op: "StatelessRandomNormal",
        outputs: one_output,
        build: |a| stateless(a, Dist::Normal, Seed::Pair),
    },
    KernelDef {
        op: "StatelessTruncatedNormal",
        outputs: one_output,
        build: |a| stateless(a, Dist::Truncated, Seed::Pair),
    },
    KernelDef {
        op: "StatelessRandomUniformInt",
        outputs: one_output,
        build: |a| stateless(a, Dist::Int, Seed::Pair),
    },
    KernelDef {
        op: "StatelessRandomGetKeyCounter",
        outputs: |_| Ok(vec![("key", 1), ("counter", 1)]),
        build: |_| {
            Ok(Box::new(|inputs| {
                key_counter("StatelessRandomGetKeyCounter", inputs, false)
            }))
        },
    },
    KernelDef {
        op: "StatelessRandomGetKeyCounterAlg",
        outputs: |_| Ok(vec![("key", 1), ("counter", 1), ("alg", 1)]),
        build: |_| {
            Ok(Box::new(|inputs| {
                key_counter("StatelessRandomGetKeyCounterAlg", inputs, true)
            }))
        },
    },
    KernelDef {
        op: "StatelessRandomGetAlg",
        outputs: |_| Ok(vec![("alg", 1)]),
        build: |_| Ok(Box::new(|_| Ok(vec![Tensor::scalar(PHILOX)]))),
    },
];

/// TensorFlow's `RNG_ALG_PHILOX`, what it picks on CPU.
const PHILOX: i32 = 1;

fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

/// SplitMix64's output function: a bijective 64-bit mixer.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64: one call's stream of random words.
struct Bits(u64);

impl Bits {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix(self.0)
    }

    /// Uniform in `[0, 1)` with `bits` random mantissa bits.
    fn unit(&mut self, bits: u32) -> f64 {
        (self.next() >> (64 - bits)) as f64 / (1u64 << bits) as f64
    }

    /// Uniform in `0..n` (`n > 0`), without modulo bias worth measuring.
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }

    fn normal(&mut self) -> f64 {
        // Box-Muller on (0, 1] x [0, 1); one of the pair is used, which
        // keeps each element a function of its own words.
        let u1 = 1.0 - self.unit(53);
        let u2 = self.unit(53);
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Dist {
    Uniform,
    Normal,
    Truncated,
    Int,
}

/// The requested output shape (a 1-D int32/int64 tensor).
fn shape_of(op: &str, t: &Tensor) -> Result<Vec<i64>> {
    if t.shape().len() > 1 {
        return Err(invalid(op, "shape must be a vector of {int32,int64}"));
    }
    let dims = int_values(op, t, "shape")?;
    if dims.iter().any(|&d| d < 0) {
        return Err(invalid(op, format!("Dimension < 0 in shape {dims:?}")));
    }
    Ok(dims)
}

/// `n` values of `dist` as a tensor of `dtype` (`range` for integers).
fn draw(
    op: &str,
    dist: Dist,
    dtype: DType,
    shape: Vec<i64>,
    range: Option<(i64, i64)>,
    bits: &mut Bits,
) -> Result<Tensor> {
    let n = tfdata_core::tensor::num_elements(&shape)?;
    check_size(op, dtype, n)?;
    let n = n as usize;
    if dist == Dist::Int {
        let (lo, hi) = range.ok_or_else(|| invalid(op, "missing minval/maxval"))?;
        if lo >= hi {
            return Err(invalid(op, format!("Need minval < maxval: {lo} >= {hi}")));
        }
        let span = hi.wrapping_sub(lo) as u64;
        let v = (0..n).map(|_| lo.wrapping_add(bits.below(span) as i64));
        return match dtype {
            DType::Int32 => Tensor::from_slice(&v.map(|x| x as i32).collect::<Vec<_>>(), shape),
            DType::Int64 => Tensor::from_slice(&v.collect::<Vec<_>>(), shape),
            DType::UInt32 => Tensor::from_slice(&v.map(|x| x as u32).collect::<Vec<_>>(), shape),
            DType::UInt64 => Tensor::from_slice(&v.map(|x| x as u64).collect::<Vec<_>>(), shape),
            other => Err(invalid(op, format!("unsupported integer dtype {other}"))),
        };
    }
    // Mantissa bits of the output type, so that a uniform value is exact in
    // it and never rounds up to 1.
    let mantissa = match dtype {
        DType::Double => 52,
        DType::Float => 23,
        DType::Half => 10,
        DType::BFloat16 => 7,
        other => return Err(invalid(op, format!("unsupported dtype {other}"))),
    };
    let v: Vec<f64> = (0..n)
        .map(|_| match dist {
            Dist::Uniform => bits.unit(mantissa),
            Dist::Normal => bits.normal(),
            _ => loop {
                let z = bits.normal();
                if z.abs() < 2.0 {
                    break z;
                }
            },
        })
        .collect();
    let doubles = Tensor::from_slice(&v, shape)?;
    if dtype == DType::Double {
        return Ok(doubles);
    }
    tfdata_dataset::kernels::cast(&doubles, dtype)
}

/// A seed for unseeded ops: fresh entropy, or reproducible inside
/// `tfdata_dataset::random::with_seed` (see there).
fn entropy() -> u64 {
    tfdata_dataset::random::unseeded_seed()
}

/// The generator of a stateful node: seeded from `seed`/`seed2`, or fresh.
fn node_generator(attrs: &NodeAttrs) -> Result<Mutex<Bits>> {
    let seed = attrs.int_or("seed", 0)?;
    let seed2 = attrs.int_or("seed2", 0)?;
    let start = if seed == 0 && seed2 == 0 {
        entropy()
    } else {
        mix(seed as u64 ^ mix((seed2 as u64).wrapping_add(GOLDEN)))
    };
    Ok(Mutex::new(Bits(start)))
}

/// A scalar integer input (`minval`, `maxval`).
fn scalar_int(op: &str, t: &Tensor, what: &str) -> Result<i64> {
    let v = int_values(op, t, what)?;
    match (t.shape(), v.as_slice()) {
        ([], [x]) => Ok(*x),
        _ => Err(invalid(
            op,
            format!("{what} must be 0-D, got shape {:?}", t.shape()),
        )),
    }
}

fn stateful(attrs: &NodeAttrs, dist: Dist) -> Result<Compute> {
    let op = attrs.op.to_string();
    let dtype = attrs.dtype(if dist == Dist::Int { "Tout" } else { "dtype" })?;
    let generator = node_generator(attrs)?;
    Ok(Box::new(move |inputs| {
        let op = op.as_str();
        expect_inputs(op, &inputs, if dist == Dist::Int { 3 } else { 1 })?;
        let shape = shape_of(op, &inputs[0])?;
        let range = if dist == Dist::Int {
            Some((
                scalar_int(op, &inputs[1], "minval")?,
                scalar_int(op, &inputs[2], "maxval")?,
            ))
        } else {
            None
        };
        // One word of the node's generator seeds this call's values.
        let call = generator.lock().unwrap_or_else(|e| e.into_inner()).next();
        Ok(vec![draw(op, dist, dtype, shape, range, &mut Bits(call))?])
    }))
}

fn shuffle(attrs: &NodeAttrs) -> Result<Compute> {
    let generator = node_generator(attrs)?;
    Ok(Box::new(move |inputs| {
        const OP: &str = "RandomShuffle";
        expect_inputs(OP, &inputs, 1)?;
        let t = &inputs[0];
        let Some(&rows) = t.shape().first() else {
            return Ok(vec![t.clone()]);
        };
        let rows = rows as usize;
        let mut order: Vec<usize> = (0..rows).collect();
        let mut bits = Bits(generator.lock().unwrap_or_else(|e| e.into_inner()).next());
        for i in (1..rows).rev() {
            order.swap(i, bits.below(i as u64 + 1) as usize);
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
        Ok(vec![Tensor::new(t.dtype(), t.shape().to_vec(), data)?])
    }))
}

#[derive(Clone, Copy, PartialEq)]
enum Seed {
    /// `key` (uint64 `[1]`), `counter` (uint64 `[2]`), `alg` inputs.
    KeyCounter,
    /// A `seed` pair input (int32 or int64 `[2]`).
    Pair,
}

fn words(op: &str, t: &Tensor, what: &str, n: usize) -> Result<Vec<u64>> {
    let v: Vec<u64> = match t.dtype() {
        DType::UInt64 => t.to_vec()?,
        DType::Int64 => t.to_vec::<i64>()?.into_iter().map(|x| x as u64).collect(),
        DType::Int32 => t
            .to_vec::<i32>()?
            .into_iter()
            .map(|x| x as i64 as u64)
            .collect(),
        other => {
            return Err(invalid(
                op,
                format!("{what} must be int32, int64 or uint64, got {other}"),
            ));
        }
    };
    if v.len() < n {
        return Err(invalid(
            op,
            format!(
                "{what} must have at least {n} elements, got shape {:?}",
                t.shape()
            ),
        ));
    }
    Ok(v)
}

/// The seed of a stateless call, from its seed pair.
fn pair_seed(a: u64, b: u64) -> u64 {
    mix(a ^ mix(b.wrapping_add(GOLDEN)))
}

fn stateless(attrs: &NodeAttrs, dist: Dist, seed: Seed) -> Result<Compute> {
    let op = attrs.op.to_string();
    let dtype = if attrs.has("dtype") {
        attrs.dtype("dtype")?
    } else if dist == Dist::Int {
        DType::Int64
    } else {
        DType::Float
    };
    Ok(Box::new(move |inputs| {
        let op = op.as_str();
        let seeds = if seed == Seed::KeyCounter { 3 } else { 1 };
        let ints = if dist == Dist::Int { 2 } else { 0 };
        expect_inputs(op, &inputs, 1 + seeds + ints)?;
        let shape = shape_of(op, &inputs[0])?;
        let start = match seed {
            Seed::Pair => {
                let s = words(op, &inputs[1], "seed", 2)?;
                if inputs[1].shape() != [2] {
                    return Err(invalid(
                        op,
                        format!("seed must have shape [2], not {:?}", inputs[1].shape()),
                    ));
                }
                pair_seed(s[0], s[1])
            }
            Seed::KeyCounter => {
                let key = words(op, &inputs[1], "key", 1)?;
                let counter = words(op, &inputs[2], "counter", 1)?;
                let alg = scalar_int(op, &inputs[3], "alg")?;
                if !(1..=3).contains(&alg) {
                    return Err(invalid(op, format!("Unsupported algorithm id: {alg}")));
                }
                let c1 = counter.get(1).copied().unwrap_or(0);
                mix(key[0]
                    ^ mix(counter[0].wrapping_add(GOLDEN)
                        ^ mix(c1.wrapping_add(GOLDEN.wrapping_mul(2)))))
            }
        };
        let range = if dist == Dist::Int {
            let k = 1 + seeds;
            Some((
                scalar_int(op, &inputs[k], "minval")?,
                scalar_int(op, &inputs[k + 1], "maxval")?,
            ))
        } else {
            None
        };
        Ok(vec![draw(op, dist, dtype, shape, range, &mut Bits(start))?])
    }))
}

/// tfdata's key and counter for a seed pair (the pair mixed into the key,
/// a zero counter): not TensorFlow's scrambling, only a stable function of
/// the seed for the V2 kernels here.
fn key_counter(op: &str, inputs: Vec<Tensor>, with_alg: bool) -> Result<Vec<Tensor>> {
    expect_inputs(op, &inputs, 1)?;
    let s = words(op, &inputs[0], "seed", 2)?;
    if inputs[0].shape() != [2] {
        return Err(invalid(
            op,
            format!("seed must have shape [2], not {:?}", inputs[0].shape()),
        ));
    }
    let mut out = vec![
        Tensor::vector(&[pair_seed(s[0], s[1])]),
        Tensor::vector(&[0u64, 0]),
    ];
    if with_alg {
        out.push(Tensor::scalar(PHILOX));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use tfdata_core::{DType, Tensor};
    use tfdata_proto::tensorflow::{AttrValue, NodeDef};

    use super::super::testing::{int, node, ty};
    use crate::attrs::NodeAttrs;

    /// Builds the kernel once, as the executor does, so calls share state.
    fn kernel(op: &str, attrs: &[(&str, AttrValue)]) -> super::Compute {
        let n: NodeDef = node(op, attrs);
        (super::super::lookup(op).unwrap().build)(&NodeAttrs::of(&n)).unwrap()
    }

    fn mean_var(v: &[f64]) -> (f64, f64) {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        (m, v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n)
    }

    fn f32s(t: &Tensor) -> Vec<f64> {
        t.to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect()
    }

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
            e.to_string().contains("Need minval < maxval: 0 >= 0"),
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
    fn stateless_ops_are_pure_functions_of_their_seed() {
        let kc = kernel("StatelessRandomGetKeyCounter", &[]);
        let out = kc(vec![Tensor::vector(&[1i64, 2])]).unwrap();
        assert_eq!(
            (out[0].dtype(), out[0].shape(), out[1].shape()),
            (DType::UInt64, &[1i64][..], &[2i64][..])
        );
        let alg = kernel("StatelessRandomGetAlg", &[])(vec![])
            .unwrap()
            .remove(0);
        let uniform = kernel("StatelessRandomUniformV2", &[("dtype", ty(DType::Float))]);
        let call = |key: &Tensor| {
            uniform(vec![
                Tensor::vector(&[10000i32]),
                key.clone(),
                out[1].clone(),
                alg.clone(),
            ])
            .unwrap()
            .remove(0)
        };
        let a = call(&out[0]);
        assert_eq!(a, call(&out[0]));
        let other = kc(vec![Tensor::vector(&[1i64, 3])]).unwrap().remove(0);
        assert_ne!(a, call(&other));
        let (m, _) = mean_var(&f32s(&a));
        assert!((m - 0.5).abs() < 0.02);

        let ints = kernel(
            "StatelessRandomUniformIntV2",
            &[("dtype", ty(DType::Int64))],
        );
        let v: Vec<i64> = ints(vec![
            Tensor::vector(&[1000i32]),
            out[0].clone(),
            out[1].clone(),
            alg.clone(),
            Tensor::scalar(0i64),
            Tensor::scalar(5i64),
        ])
        .unwrap()[0]
            .to_vec()
            .unwrap();
        assert!(v.iter().all(|x| (0..5).contains(x)) && (0..5).all(|k| v.contains(&k)));
        let normal = kernel("StatelessRandomNormalV2", &[("dtype", ty(DType::Float))]);
        let n = f32s(
            &normal(vec![
                Tensor::vector(&[20000i32]),
                out[0].clone(),
                out[1].clone(),
                alg.clone(),
            ])
            .unwrap()[0],
        );
        let (m, var) = mean_var(&n);
        assert!(m.abs() < 0.03 && (var - 1.0).abs() < 0.04, "{m} {var}");
        let v1 = kernel("StatelessRandomUniform", &[("dtype", ty(DType::Float))]);
        let x = v1(vec![Tensor::vector(&[4i32]), Tensor::vector(&[1i32, 2])])
            .unwrap()
            .remove(0);
        assert_eq!(
            x,
            v1(vec![Tensor::vector(&[4i32]), Tensor::vector(&[1i32, 2])]).unwrap()[0]
        );
        let k3 = kernel("StatelessRandomGetKeyCounterAlg", &[])(vec![Tensor::vector(&[1i32, 2])])
            .unwrap();
        assert_eq!((k3.len(), k3[2].to_scalar::<i32>().unwrap()), (3, 1));
        assert!(
            uniform(vec![
                Tensor::vector(&[3i32]),
                out[0].clone(),
                out[1].clone(),
                Tensor::scalar(9i32)
            ])
            .is_err()
        );
    }
}
