//! The ops of `tf.random.Generator`: an RNG state held in a resource
//! variable (int64 `[3]` for Philox: the 128-bit counter as two int64s, low
//! first, then the 64-bit key), read and advanced under the variable's lock.
//!
//! * `RngReadAndSkip` returns the state and advances its counter by
//!   `256 * delta` blocks; the Generator's methods then draw with the
//!   stateless V2 ops from that key and counter (`super::random`).
//!   `RngSkip` advances without reading.
//! * `StatefulUniform`, `StatefulUniformInt`, `StatefulUniformFullInt`,
//!   `StatefulStandardNormalV2`, `StatefulTruncatedNormal` draw `n` values
//!   from the state as the stateless V2 op would from the same key and
//!   counter, and advance it by `256 * n` blocks.
//! * `StatefulRandomBinomial` draws as `StatelessRandomBinomial` does from
//!   the state and advances it by `256 * (batches * 200 * (samples + 3) /
//!   4)` blocks, TensorFlow's reservation.
//!
//! The counter is advanced as TensorFlow's `PhiloxRandom::Skip` does (a
//! skip whose high word wraps carries nothing: kept). Algorithm 1 (Philox)
//! and 3 (auto: Philox on CPU) run; 2 (ThreeFry) is refused as TensorFlow
//! refuses it off XLA. Errors are TensorFlow's, in the order its kernels
//! check them (algorithm, then shape and range, then the state).

use std::sync::Arc;

use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_dataset::philox::{Philox, lo_hi};

use super::ResourceKernelDef;
use super::random::{Dist, FLOAT_TYPES, check_dtype, draw, shape_of};
use super::random_samplers::{FLOATS, NUMBERS, binomial_samples, binomial_shapes, check_type};
use super::strings::int_values;
use super::variable::{take, variable_of};
use crate::attrs::NodeAttrs;
use crate::kernels::NodeFn;
use crate::value::Value;
use crate::variable::{Variable, uninitialized};

pub(super) const KERNELS: &[ResourceKernelDef] = &[
    ResourceKernelDef {
        op: "RngReadAndSkip",
        outputs: |_| Ok(vec![("value", 1)]),
        build: |_| Ok(Arc::new(|inputs| read_and_skip("RngReadAndSkip", inputs))),
    },
    ResourceKernelDef {
        op: "RngSkip",
        outputs: |_| Ok(Vec::new()),
        build: |_| Ok(Arc::new(|inputs| read_and_skip("RngSkip", inputs))),
    },
    ResourceKernelDef {
        op: "StatefulUniform",
        outputs: |_| Ok(vec![("output", 1)]),
        build: |a| stateful(a, Dist::Uniform),
    },
    ResourceKernelDef {
        op: "StatefulStandardNormalV2",
        outputs: |_| Ok(vec![("output", 1)]),
        build: |a| stateful(a, Dist::Normal),
    },
    ResourceKernelDef {
        op: "StatefulTruncatedNormal",
        outputs: |_| Ok(vec![("output", 1)]),
        build: |a| stateful(a, Dist::Truncated),
    },
    ResourceKernelDef {
        op: "StatefulUniformInt",
        outputs: |_| Ok(vec![("output", 1)]),
        build: |a| stateful(a, Dist::Int),
    },
    ResourceKernelDef {
        op: "StatefulUniformFullInt",
        outputs: |_| Ok(vec![("output", 1)]),
        build: |a| stateful(a, Dist::FullInt),
    },
    ResourceKernelDef {
        op: "StatefulRandomBinomial",
        outputs: |_| Ok(vec![("output", 1)]),
        build: binomial,
    },
];

/// TensorFlow's `RNG_ALG_PHILOX`, `RNG_ALG_THREEFRY`, `RNG_ALG_AUTO_SELECT`.
const PHILOX: i64 = 1;
const THREEFRY: i64 = 2;
const AUTO: i64 = 3;
/// A Philox state's int64s: counter (2), key (1).
const PHILOX_STATE: usize = 3;

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(message.to_string())
}

/// TensorFlow's `TensorShape::DebugString`: `[2,3]`.
fn debug_shape(shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
}

/// TensorFlow's `GetScalar`: input `index` as a scalar of `dtype`.
fn scalar(t: &Tensor, index: usize, dtype: DType) -> Result<Tensor> {
    if !t.shape().is_empty() {
        return Err(invalid(format!(
            "input {index} (0-based) must have shape [], not {}",
            debug_shape(t.shape())
        )));
    }
    if t.dtype() != dtype {
        return Err(invalid(format!(
            "dtype of input {index} (0-based) must be {}, not {}",
            crate::variable::tf_name(dtype),
            crate::variable::tf_name(t.dtype())
        )));
    }
    Ok(t.clone())
}

/// Checks the algorithm id: Philox (or auto, Philox on CPU) runs.
fn check_alg(alg: i64) -> Result<()> {
    match alg {
        PHILOX | AUTO => Ok(()),
        THREEFRY => Err(Error::Unimplemented(
            "Non-XLA devices don't support the ThreeFry algorithm.".into(),
        )),
        other => Err(invalid(format!("Unsupported algorithm id: {other}"))),
    }
}

/// The state's int64s, checked as TensorFlow's `CheckState` and
/// `CheckPhiloxState` check them (`philox_message`: the binomial kernel's
/// wording of the size error).
fn state_of(state: Option<&Tensor>, philox_message: &str) -> Result<Vec<i64>> {
    let t = state.ok_or_else(uninitialized)?;
    if t.dtype() != DType::Int64 {
        return Err(invalid(format!(
            "dtype of RNG state variable must be int64, not {}",
            crate::variable::tf_name(t.dtype())
        )));
    }
    if t.shape().len() != 1 {
        return Err(invalid(format!(
            "RNG state must have one and only one dimension, not {}",
            t.shape().len()
        )));
    }
    let v = t.to_vec::<i64>()?;
    if v.len() < PHILOX_STATE {
        return Err(invalid(format!(
            "{philox_message}, the size of state must be at least {PHILOX_STATE}; got {}",
            v.len()
        )));
    }
    Ok(v)
}

/// The generator a Philox state holds.
fn philox_of(state: &[i64]) -> Philox {
    let [c0, c1] = lo_hi(state[0] as u64);
    let [c2, c3] = lo_hi(state[1] as u64);
    Philox {
        counter: [c0, c1, c2, c3],
        key: lo_hi(state[2] as u64),
    }
}

/// Reads the variable's Philox state, advances it by `256 * delta` blocks
/// (as TensorFlow multiplies, in 64 bits) and returns the state it read.
fn advance(var: &Variable, delta: u64, philox_message: &str) -> Result<(Philox, Vec<i64>)> {
    let mut guard = var.lock();
    let mut state = state_of(guard.as_ref(), philox_message)?;
    let start = philox_of(&state);
    let mut next = start;
    next.skip(delta.wrapping_mul(256));
    let word = |a: u32, b: u32| (u64::from(a) | (u64::from(b) << 32)) as i64;
    let read = state.clone();
    state[0] = word(next.counter[0], next.counter[1]);
    state[1] = word(next.counter[2], next.counter[3]);
    state[2] = word(next.key[0], next.key[1]);
    let len = state.len() as i64;
    *guard = Some(Tensor::from_slice(&state, vec![len])?);
    Ok((start, read))
}

const PHILOX_SIZE: &str = "For the Philox algorithm";

/// `RngReadAndSkip` (alg int32, delta uint64; returns the old state) and
/// `RngSkip` (algorithm int64, delta int64; returns nothing).
fn read_and_skip(op: &str, inputs: Vec<Value>) -> Result<Vec<Value>> {
    let [handle, alg, delta] = take(op, inputs)?;
    let (alg, delta) = (alg.into_tensor(op)?, delta.into_tensor(op)?);
    let reads = op == "RngReadAndSkip";
    let (alg, delta) = if reads {
        let alg = scalar(&alg, 1, DType::Int32)?.to_scalar::<i32>()?;
        let delta = scalar(&delta, 2, DType::UInt64)?.to_scalar::<u64>()?;
        (i64::from(alg), delta)
    } else {
        let alg = scalar(&alg, 1, DType::Int64)?.to_scalar::<i64>()?;
        let delta = scalar(&delta, 2, DType::Int64)?.to_scalar::<i64>()?;
        (alg, delta as u64)
    };
    check_alg(alg)?;
    let var = variable_of(op, &handle)?;
    if reads {
        // TensorFlow copies the whole state into its 3-element output, and
        // writes past it when the state is longer: refused, not matched.
        let guard = var.lock();
        if let Some(t) = guard.as_ref()
            && t.dtype() == DType::Int64
            && t.shape().len() == 1
            && t.num_elements() > PHILOX_STATE as u64
        {
            return Err(invalid(format!(
                "{op}: a Philox state of {} elements (TensorFlow writes them past its \
                 {PHILOX_STATE}-element output)",
                t.num_elements()
            )));
        }
    }
    let (_, read) = advance(&var, delta, PHILOX_SIZE)?;
    if reads {
        Ok(vec![Value::Tensor(Tensor::from_slice(
            &read,
            vec![PHILOX_STATE as i64],
        )?)])
    } else {
        Ok(Vec::new())
    }
}

/// The shape input of a stateful op (TensorFlow's `MakeShape`).
fn output_shape(op: &str, t: &Tensor) -> Result<Vec<i64>> {
    if t.shape().len() > 1 {
        return Err(invalid(format!(
            "shape must be a vector of {{int32,int64}}, got shape {}",
            debug_shape(t.shape())
        )));
    }
    shape_of(op, t)
}

/// A 0-D integer bound of `StatefulUniformInt`.
fn bound(op: &str, t: &Tensor, what: &str) -> Result<i64> {
    if !t.shape().is_empty() {
        return Err(invalid(format!(
            "{what} must be 0-D, got shape {}",
            debug_shape(t.shape())
        )));
    }
    Ok(int_values(op, t, what)?[0])
}

fn stateful(attrs: &NodeAttrs, dist: Dist) -> Result<NodeFn> {
    let op = attrs.op.to_string();
    let dtype = attrs.dtype("dtype")?;
    match dist {
        Dist::Int => check_dtype(attrs, dtype, &[DType::Int32, DType::Int64])?,
        Dist::FullInt => check_dtype(
            attrs,
            dtype,
            &[DType::Int32, DType::Int64, DType::UInt32, DType::UInt64],
        )?,
        _ => check_dtype(attrs, dtype, FLOAT_TYPES)?,
    }
    Ok(Arc::new(move |inputs| {
        let op = op.as_str();
        let (handle, alg, shape_t, range) = if dist == Dist::Int {
            let [handle, alg, shape, lo, hi] = take(op, inputs)?;
            let alg = alg.into_tensor(op)?;
            let alg = scalar(&alg, 1, DType::Int64)?.to_scalar::<i64>()?;
            let (lo, hi) = (lo.into_tensor(op)?, hi.into_tensor(op)?);
            let lo = bound(op, &lo, "minval")?;
            let hi = bound(op, &hi, "maxval")?;
            // Checked before the shape: zero values still need a range.
            if lo >= hi {
                return Err(invalid(format!("Need minval < maxval, got {lo} >= {hi}")));
            }
            (handle, alg, shape.into_tensor(op)?, Some((lo, hi)))
        } else {
            let [handle, alg, shape] = take(op, inputs)?;
            let alg = alg.into_tensor(op)?;
            let alg = scalar(&alg, 1, DType::Int64)?.to_scalar::<i64>()?;
            (handle, alg, shape.into_tensor(op)?, None)
        };
        let shape = output_shape(op, &shape_t)?;
        let n = tfdata_core::tensor::num_elements(&shape)?;
        super::check_size(op, dtype, n)?;
        check_alg(alg)?;
        let var = variable_of(op, &handle)?;
        let (rng, _) = advance(&var, n, PHILOX_SIZE)?;
        Ok(vec![Value::Tensor(draw(
            op, dist, dtype, shape, range, rng,
        )?)])
    }))
}

fn binomial(attrs: &NodeAttrs) -> Result<NodeFn> {
    const OP: &str = "StatefulRandomBinomial";
    let out_type = check_type(attrs, "dtype", NUMBERS)?;
    let param_type = check_type(attrs, "T", FLOATS)?;
    Ok(Arc::new(move |inputs| {
        let [handle, alg, shape_t, counts, probs] = take(OP, inputs)?;
        let [alg, shape_t, counts, probs] =
            [alg, shape_t, counts, probs].map(|v| v.into_tensor(OP));
        let (alg, shape_t, counts, probs) = (alg?, shape_t?, counts?, probs?);
        let (shape, batch_shape) = binomial_shapes(OP, &shape_t, &counts, &probs)?;
        if !alg.shape().is_empty() {
            return Err(invalid(format!(
                "algorithm must be of shape [], not {}",
                debug_shape(alg.shape())
            )));
        }
        let alg = int_values(OP, &alg, "algorithm")?[0];
        let n = tfdata_core::tensor::num_elements(&shape)?;
        super::check_size(OP, out_type, n)?;
        let var = variable_of(OP, &handle)?;
        // The state's dtype and rank are checked before the algorithm, its
        // size after; auto-select is not taken here.
        {
            let guard = var.lock();
            let t = guard.as_ref().ok_or_else(uninitialized)?;
            if t.dtype() != DType::Int64 || t.shape().len() != 1 {
                state_of(Some(t), "For Philox algorithm")?;
            }
        }
        if alg != PHILOX {
            return Err(invalid(format!("Unsupported algorithm id: {alg}")));
        }
        let batches = tfdata_core::tensor::num_elements(&batch_shape)?;
        let sample_dims = shape.len() - batch_shape.len();
        let samples = shape[..sample_dims]
            .iter()
            .fold(1i64, |a, &d| a.wrapping_mul(d));
        // TensorFlow's reservation, in its int64 arithmetic.
        let reserved = (batches as i64)
            .wrapping_mul(200)
            .wrapping_mul(samples.wrapping_add(3))
            / 4;
        let (rng, _) = advance(&var, reserved as u64, "For Philox algorithm")?;
        let types = (param_type, out_type);
        let out = binomial_samples(OP, types, &shape, &batch_shape, &counts, &probs, rng)?;
        Ok(vec![Value::Tensor(out)])
    }))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tfdata_core::{DType, Tensor};

    use super::super::testing::{node, ty};
    use crate::attrs::NodeAttrs;
    use crate::value::Value;
    use crate::variable::Variable;

    fn state(v: &[i64]) -> Value {
        let var = Variable::new(DType::Int64);
        var.assign(Tensor::vector(v)).unwrap();
        Value::Variable(Arc::new(var))
    }

    fn read_and_skip(var: &Value, delta: u64) -> Vec<i64> {
        let k = super::super::resource_lookup("RngReadAndSkip").unwrap();
        let f = (k.build)(&NodeAttrs::of(&node("RngReadAndSkip", &[]))).unwrap();
        let out = f(vec![
            var.clone(),
            Value::Tensor(Tensor::scalar(1i32)),
            Value::Tensor(Tensor::scalar(delta)),
        ])
        .unwrap();
        out[0].tensor("state").unwrap().to_vec::<i64>().unwrap()
    }

    #[test]
    fn read_and_skip_returns_the_state_and_advances_it_256_blocks_a_delta() {
        let var = state(&[5, -1, 7]);
        assert_eq!(read_and_skip(&var, 3), [5, -1, 7]);
        assert_eq!(read_and_skip(&var, 0), [5 + 768, -1, 7]);
        // TensorFlow's Skip: the high word of 256 * (2^64 - 1) wraps when
        // the low word carries, and nothing reaches the counter's high half.
        read_and_skip(&var, u64::MAX);
        assert_eq!(read_and_skip(&var, 0), [517, -1, 7]);
    }

    #[test]
    fn concurrent_callers_get_successive_states() {
        let var = state(&[0, 0, 1]);
        let seen: Vec<i64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (0..50)
                            .map(|_| read_and_skip(&var, 1)[0])
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        let mut sorted = seen.clone();
        sorted.sort_unstable();
        let want: Vec<i64> = (0..200).map(|i| i * 256).collect();
        assert_eq!(sorted, want);
    }

    #[test]
    fn stateful_uniform_draws_what_the_stateless_op_draws_from_the_state() {
        let var = state(&[11, 22, 33]);
        let k = super::super::resource_lookup("StatefulUniform").unwrap();
        let attrs = [
            ("dtype", ty(DType::Float)),
            ("shape_dtype", ty(DType::Int32)),
        ];
        let f = (k.build)(&NodeAttrs::of(&node("StatefulUniform", &attrs))).unwrap();
        let got = f(vec![
            var.clone(),
            Value::Tensor(Tensor::scalar(1i64)),
            Value::Tensor(Tensor::vector(&[5i32])),
        ])
        .unwrap();
        let want = super::super::testing::run(
            "StatelessRandomUniformV2",
            &[("dtype", ty(DType::Float)), ("Tshape", ty(DType::Int32))],
            vec![
                Tensor::vector(&[5i32]),
                Tensor::vector(&[33u64]),
                Tensor::vector(&[11u64, 22]),
                Tensor::scalar(1i32),
            ],
        )
        .unwrap();
        assert_eq!(got[0].tensor("out").unwrap(), &want[0]);
        assert_eq!(read_and_skip(&var, 0), [11 + 5 * 256, 22, 33]);
    }

    #[test]
    fn refuses_what_tensorflow_cannot_run() {
        let k = super::super::resource_lookup("RngReadAndSkip").unwrap();
        let f = (k.build)(&NodeAttrs::of(&node("RngReadAndSkip", &[]))).unwrap();
        let call = |var: Value, alg: i32| {
            f(vec![
                var,
                Value::Tensor(Tensor::scalar(alg)),
                Value::Tensor(Tensor::scalar(1u64)),
            ])
            .unwrap_err()
            .to_string()
        };
        // TensorFlow copies a longer state past its 3-element output.
        assert!(call(state(&[1, 2, 3, 4]), 1).contains("4 elements"));
        assert!(call(state(&[1, 2]), 1).contains("at least 3; got 2"));
        assert!(call(state(&[1, 2, 3]), 2).contains("ThreeFry"));
        assert!(call(state(&[1, 2, 3]), 9).contains("Unsupported algorithm id: 9"));
        let never_assigned = Value::Variable(Arc::new(Variable::new(DType::Int64)));
        assert!(call(never_assigned, 1).contains("never initialized"));
        assert!(call(Value::Resource, 1).contains("VarHandleOp"));
    }
}
