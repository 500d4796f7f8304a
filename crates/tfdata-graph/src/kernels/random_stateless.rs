//! The stateless random ops: `StatelessRandom*V2` (key, counter and
//! algorithm inputs), the v1 `StatelessRandom*` (a seed pair),
//! `StatelessShuffle`, and the ops that turn a seed pair into TensorFlow's
//! key and counter (`StatelessRandomGetKeyCounter[Alg]`,
//! `StatelessRandomGetAlg`). Their output is a pure function of the seed
//! inputs: nothing is reserved from a node's generator, which sets them
//! apart from the stateful ops of [`super::random`], whose Philox draws
//! (the distributions, the seed-pair and V2 generators) they share.

use tfdata_core::{DType, Result, Tensor};

use super::random::{
    Dist, FLOAT_TYPES, PHILOX, check_dtype, draw, invalid, key_counter_of_seed, scalar_int,
    seed_pair, shape_of, shuffle_rows, v2_generator,
};
use super::{Compute, KernelDef, expect_inputs, one_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "StatelessShuffle",
        outputs: one_output,
        build: stateless_shuffle,
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
        op: "StatelessRandomUniformFullIntV2",
        outputs: one_output,
        build: |a| stateless(a, Dist::FullInt, Seed::KeyCounter),
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
        op: "StatelessRandomUniformFullInt",
        outputs: one_output,
        build: |a| stateless(a, Dist::FullInt, Seed::Pair),
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

#[derive(Clone, Copy, PartialEq)]
enum Seed {
    /// `key` (uint64 `[1]`), `counter` (uint64 `[2]`), `alg` inputs.
    KeyCounter,
    /// A `seed` pair input (int32 or int64 `[2]`).
    Pair,
}

/// `StatelessShuffle`: [`shuffle_rows`] from the key, counter and
/// algorithm inputs (TensorFlow's V2 checks), nothing reserved.
fn stateless_shuffle(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(move |inputs| {
        const OP: &str = "StatelessShuffle";
        expect_inputs(OP, &inputs, 4)?;
        let rng = v2_generator(OP, &inputs[1], &inputs[2], &inputs[3])?;
        let t = &inputs[0];
        let rows = match t.shape().first() {
            Some(&rows) if rows > 1 && t.num_elements() > 1 => rows as usize,
            _ => return Ok(vec![t.clone()]),
        };
        if rows as u64 > u64::from(u32::MAX) {
            return Err(invalid(OP, "more than 2^32 rows are not supported"));
        }
        Ok(vec![shuffle_rows(t, rows, rng)?])
    }))
}

fn stateless(attrs: &NodeAttrs, dist: Dist, seed: Seed) -> Result<Compute> {
    let op = attrs.op.to_string();
    let dtype = if attrs.has("dtype") {
        attrs.dtype("dtype")?
    } else if matches!(dist, Dist::Int | Dist::FullInt) {
        DType::Int64
    } else {
        DType::Float
    };
    match dist {
        // TensorFlow's CPU kernels of the V2 op take int32 and int64 only.
        Dist::Int => check_dtype(attrs, dtype, &[DType::Int32, DType::Int64])?,
        Dist::FullInt => check_dtype(
            attrs,
            dtype,
            &[DType::Int32, DType::Int64, DType::UInt32, DType::UInt64],
        )?,
        _ => check_dtype(attrs, dtype, FLOAT_TYPES)?,
    }
    Ok(Box::new(move |inputs| {
        let op = op.as_str();
        let seeds = if seed == Seed::KeyCounter { 3 } else { 1 };
        let ints = if dist == Dist::Int { 2 } else { 0 };
        expect_inputs(op, &inputs, 1 + seeds + ints)?;
        let shape = shape_of(op, &inputs[0])?;
        let rng = match seed {
            Seed::Pair => {
                let (s0, s1) = seed_pair(op, &inputs[1])?;
                key_counter_of_seed(s0, s1)
            }
            Seed::KeyCounter => v2_generator(op, &inputs[1], &inputs[2], &inputs[3])?,
        };
        let range = if dist == Dist::Int {
            let k = 1 + seeds;
            let lo = scalar_int(op, &inputs[k], "minval")?;
            let hi = scalar_int(op, &inputs[k + 1], "maxval")?;
            if tfdata_core::tensor::num_elements(&shape)? > 0 && lo >= hi {
                return Err(invalid(
                    op,
                    format!("Need minval < maxval, got {lo} >= {hi}"),
                ));
            }
            Some((lo, hi))
        } else {
            None
        };
        Ok(vec![draw(op, dist, dtype, shape, range, rng)?])
    }))
}

/// TensorFlow's key and counter for a seed pair: key `uint64 [1]`,
/// counter `uint64 [2]` (the words of [`key_counter_of_seed`], low first).
fn key_counter(op: &str, inputs: Vec<Tensor>, with_alg: bool) -> Result<Vec<Tensor>> {
    expect_inputs(op, &inputs, 1)?;
    let (s0, s1) = seed_pair(op, &inputs[0])?;
    let g = key_counter_of_seed(s0, s1);
    let word = |a: u32, b: u32| u64::from(a) | (u64::from(b) << 32);
    let mut out = vec![
        Tensor::vector(&[word(g.key[0], g.key[1])]),
        Tensor::vector(&[
            word(g.counter[0], g.counter[1]),
            word(g.counter[2], g.counter[3]),
        ]),
    ];
    if with_alg {
        out.push(Tensor::scalar(PHILOX));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use tfdata_core::{DType, Tensor};

    use super::super::testing::{f32s, kernel, mean_var, ty};

    #[test]
    fn key_and_counter_are_tensorflows() {
        // tf.raw_ops.StatelessRandomGetKeyCounter(seed=[1, 2]) in TF 2.21.
        let out =
            kernel("StatelessRandomGetKeyCounter", &[])(vec![Tensor::vector(&[1i32, 2])]).unwrap();
        assert_eq!(out[0].to_vec::<u64>().unwrap(), [10413732777507651514]);
        assert_eq!(out[1].to_vec::<u64>().unwrap(), [0, 17830669156045600267]);
        // tf.raw_ops.StatelessRandomUniform(shape=[5], seed=[1, 2]).
        let u: Vec<f32> = kernel("StatelessRandomUniform", &[("dtype", ty(DType::Float))])(vec![
            Tensor::vector(&[5i32]),
            Tensor::vector(&[1i32, 2]),
        ])
        .unwrap()[0]
            .to_vec()
            .unwrap();
        assert_eq!(u, [0.8440604, 0.19204533, 0.9962232, 0.1603874, 0.27199018]);
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
