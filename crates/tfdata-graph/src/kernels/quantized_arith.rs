//! Eight-bit quantized arithmetic into `qint32`: `QuantizedAdd`,
//! `QuantizedMul` and `QuantizedMatMul`, with TensorFlow 2.21's x86 kernels'
//! arithmetic (TF registers them for `quint8` inputs only).
//!
//! A `quint8` value `q` in `[min, max]` stands for a float; the kernels map
//! inputs into a common `qint32` range with TF's `QuantizedToFloat` /
//! `FloatToQuantizedUnclamped` (double arithmetic on float ranges), or
//! subtract each input's zero point (`QuantizedMul`, `QuantizedMatMul`), and
//! accumulate in 32-bit integers that wrap as TF's do.
//!
//! TF's add and multiply handle three broadcast patterns only (scalar,
//! same size, and a smaller operand repeated over a larger one, indexed
//! `i % len` whatever the broadcast axis is); a broadcast where neither
//! operand holds the output's size leaves TF's output partly unwritten, so
//! it is refused here.

use std::cmp::Ordering;

use tfdata_core::{DType, Result, Tensor};

use super::numeric::{
    broadcast_shape, buffer, expect_dtype, finish, invalid, out_elements, shape_str,
};
use super::{Compute, KernelDef};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "QuantizedAdd",
        outputs: |_| Ok(vec![("z", 1), ("min_z", 1), ("max_z", 1)]),
        build: build_add,
    },
    KernelDef {
        op: "QuantizedMul",
        outputs: |_| Ok(vec![("z", 1), ("min_z", 1), ("max_z", 1)]),
        build: build_mul,
    },
    KernelDef {
        op: "QuantizedMatMul",
        outputs: |_| Ok(vec![("out", 1), ("min_out", 1), ("max_out", 1)]),
        build: build_matmul,
    },
];

/// C++'s `static_cast<int64_t>(double)` on x86-64: truncation, `i64::MIN`
/// for NaN or out of range.
fn cast_i64(x: f64) -> i64 {
    let limit = 2f64.powi(63);
    if (-limit..limit).contains(&x) {
        x as i64
    } else {
        i64::MIN
    }
}

/// TF's `QuantizedToFloat<quint8>`.
pub(super) fn quint8_to_float(q: u8, min: f32, max: f32) -> f32 {
    if min == max {
        return min;
    }
    let range = f64::from(max - min) * (256.0 / 255.0);
    let range_scale = range / 256.0;
    let scale_f = range_scale as f32;
    let min_rounded = f64::from((min / scale_f).round() * scale_f);
    (min_rounded + f64::from(q) * range_scale) as f32
}

/// TF's `FloatToQuantizedUnclamped<T>` for a type of `bits` bits, before
/// its lowest value is added: `None` for an empty range (the result is then
/// the lowest value itself).
fn quantized_offset_from_lowest(input: f32, min: f32, max: f32, bits: u32) -> Option<i64> {
    if min == max {
        return None;
    }
    let steps = 2f64.powi(bits as i32);
    let range = f64::from(max - min) * (steps / (steps - 1.0));
    let range_scale = steps / range;
    Some(cast_i64(
        (f64::from(input) * range_scale).round() - (f64::from(min) * range_scale).round(),
    ))
}

/// TF's `FloatToQuantizedUnclamped<T>` (the sum wraps, as the compiled
/// kernel's does when the value is passed on unclamped).
fn float_to_quantized_unclamped(input: f32, min: f32, max: f32, bits: u32, lowest: i64) -> i64 {
    quantized_offset_from_lowest(input, min, max, bits).map_or(lowest, |q| q.wrapping_add(lowest))
}

fn to_qint32_unclamped(input: f32, min: f32, max: f32) -> i64 {
    float_to_quantized_unclamped(input, min, max, 32, i64::from(i32::MIN))
}

/// TF's `FloatToQuantized<qint32>`: clamped. Where the cast above gave
/// `i64::MIN` (NaN or out of range), the compiled kernel's clamp does not
/// wrap the sum (observed: the result is `i32::MIN`), so it is taken
/// without wrapping here.
fn to_qint32_clamped(input: f32, min: f32, max: f32) -> i32 {
    let lowest = i128::from(i32::MIN);
    let q = quantized_offset_from_lowest(input, min, max, 32)
        .map_or(lowest, |q| i128::from(q) + lowest);
    q.clamp(lowest, i128::from(i32::MAX)) as i32
}

/// The zero point of a `quint8` range, as the `int32` TF keeps of it.
fn quint8_offset(min: f32, max: f32) -> i32 {
    float_to_quantized_unclamped(0.0, min, max, 8, 0) as i32
}

fn clamp_i32(v: i64) -> i32 {
    v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

/// TF's `QuantizationRangeForMultiplication<quint8, quint8, qint32>`.
fn multiplication_range(min_a: f32, max_a: f32, min_b: f32, max_b: f32) -> (f32, f32) {
    let level = ((max_a - min_a) / 255.0) * ((max_b - min_b) / 255.0);
    (level * -2_147_483_648.0, level * 2_147_483_647i64 as f32)
}

/// `std::min` / `std::max` on floats (the first argument unless the
/// comparison says otherwise, so NaN handling follows C++).
fn cpp_min(a: f32, b: f32) -> f32 {
    if b < a { b } else { a }
}
fn cpp_max(a: f32, b: f32) -> f32 {
    if a < b { b } else { a }
}

fn quint8_values<'a>(op: &str, t: &'a Tensor, index: usize) -> Result<&'a [u8]> {
    expect_dtype(op, t, index, DType::QUInt8)?;
    buffer(op, t)
}

/// The first float of a range input whose rank has been checked.
fn range_value(op: &str, t: &Tensor, index: usize) -> Result<f32> {
    expect_dtype(op, t, index, DType::Float)?;
    let b = buffer(op, t)?;
    b.get(..4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .ok_or_else(|| invalid(op, format!("input {index} is empty")))
}

fn scalar_out(v: f32) -> Result<Tensor> {
    finish(DType::Float, vec![], v.to_le_bytes().to_vec())
}

fn qint32_out(shape: Vec<i64>, values: &[i32]) -> Result<Tensor> {
    finish(
        DType::QInt32,
        shape,
        values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    )
}

/// The number of dimensions TensorFlow's `BCast` reduces two shapes to:
/// dimensions where both are 1 drop out, and neighbours with the same
/// pattern of which operand is 1 merge.
fn bcast_rank(x: &[i64], y: &[i64]) -> usize {
    let rank = x.len().max(y.len());
    let dim = |s: &[i64], i: usize| {
        let pad = rank - s.len();
        if i < pad { 1 } else { s[i - pad] }
    };
    let mut runs = 0;
    let mut previous: Option<(bool, bool)> = None;
    for i in (0..rank).rev() {
        let ones = (dim(x, i) == 1, dim(y, i) == 1);
        if ones == (true, true) {
            continue;
        }
        if previous != Some(ones) {
            runs += 1;
            previous = Some(ones);
        }
    }
    runs.max(1)
}

/// How TF pairs the elements of `x` and `y` for an elementwise op.
enum Pairing {
    /// `x` (or `y`) has one element, applied to every element of the other.
    ScalarX,
    ScalarY,
    /// Element `i` with element `i`.
    Same,
    /// The smaller operand (`y` on a tie), indexed `i % len`.
    Repeat {
        x_is_vector: bool,
    },
}

/// How TF pairs the elements of two broadcast-compatible shapes, with its
/// error for broadcasts it does not implement.
fn pairing(op: &str, x: &[i64], y: &[i64]) -> Result<Pairing> {
    let (nx, ny) = (elements(x), elements(y));
    Ok(match bcast_rank(x, y) {
        0 | 1 if nx == 1 => Pairing::ScalarX,
        0 | 1 if ny == 1 => Pairing::ScalarY,
        0 | 1 => Pairing::Same,
        2 => Pairing::Repeat {
            x_is_vector: nx < ny,
        },
        _ => {
            return Err(tfdata_core::Error::Unimplemented(format!(
                "{op}: Broadcast between {} and {} is not supported yet.",
                shape_str(x),
                shape_str(y)
            )));
        }
    })
}

fn elements(shape: &[i64]) -> u64 {
    shape
        .iter()
        .map(|&d| u64::try_from(d).unwrap_or(0))
        .product()
}

/// Applies `f(x_element, y_element)` under TF's pairing; `empty_vector` is
/// TF's message when the repeated operand is empty.
fn elementwise(
    op: &str,
    x: &[u8],
    y: &[u8],
    pairing: &Pairing,
    out_len: usize,
    empty_vector: &str,
    f: impl Fn(u8, u8) -> i32,
) -> Result<Vec<i32>> {
    let values = match *pairing {
        Pairing::ScalarX => y.iter().map(|&b| f(x[0], b)).collect(),
        Pairing::ScalarY => x.iter().map(|&a| f(a, y[0])).collect(),
        Pairing::Same => x.iter().zip(y).map(|(&a, &b)| f(a, b)).collect(),
        Pairing::Repeat { x_is_vector } => {
            let (vector, tensor) = if x_is_vector { (x, y) } else { (y, x) };
            if vector.is_empty() {
                return Err(invalid(op, empty_vector));
            }
            if tensor.len() != out_len {
                return Err(invalid(
                    op,
                    "this broadcast leaves part of TensorFlow's output unwritten; refused",
                ));
            }
            tensor
                .iter()
                .enumerate()
                .map(|(i, &t)| {
                    let v = vector[i % vector.len()];
                    if x_is_vector { f(v, t) } else { f(t, v) }
                })
                .collect()
        }
    };
    Ok(values)
}

fn check_quint8_attrs(attrs: &NodeAttrs, op: &str) -> Result<()> {
    for (key, want) in [
        ("T1", DType::QUInt8),
        ("T2", DType::QUInt8),
        ("Toutput", DType::QInt32),
    ] {
        if attrs.has(key) {
            let t = attrs.dtype(key)?;
            if t != want {
                return Err(attrs.error(super::numeric::unsupported(op, t)));
            }
        }
    }
    Ok(())
}

/// A `quint8` input mapped into the output's `qint32` range with TF's
/// "value of code 0 plus value times one code's step" shortcut.
struct IntoRange {
    code0: i64,
    step: i32,
}

impl IntoRange {
    fn new(min: f32, max: f32, out_min: f32, out_max: f32) -> Self {
        let code0 = to_qint32_unclamped(quint8_to_float(0, min, max), out_min, out_max);
        let code1 = to_qint32_unclamped(quint8_to_float(1, min, max), out_min, out_max);
        IntoRange {
            code0,
            step: code1.wrapping_sub(code0) as i32,
        }
    }

    fn map(&self, q: u8) -> i32 {
        clamp_i32(self.code0.wrapping_add(i64::from(q) * i64::from(self.step)))
    }
}

/// TF's `RequantizeInNewRange<quint8, qint32>` for the single value of a
/// scalar operand: through float, clamped.
fn scalar_into_range(q: u8, min: f32, max: f32, out_min: f32, out_max: f32) -> i32 {
    to_qint32_clamped(quint8_to_float(q, min, max), out_min, out_max)
}

fn build_add(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    check_quint8_attrs(attrs, &op)?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 6)?;
        let names = ["min_x", "max_x", "min_y", "max_y"];
        for (i, name) in names.iter().enumerate() {
            let rank = inputs[i + 2].shape().len();
            if rank != 0 {
                return Err(invalid(
                    &op,
                    format!("`{name}` must be rank 0 but is rank {rank}"),
                ));
            }
        }
        let x = quint8_values(&op, &inputs[0], 0)?;
        let y = quint8_values(&op, &inputs[1], 1)?;
        let [min_x, max_x, min_y, max_y] = [2, 3, 4, 5].map(|i| range_value(&op, &inputs[i], i));
        let (min_x, max_x, min_y, max_y) = (min_x?, max_x?, min_y?, max_y?);
        let shape = broadcast_shape(&op, inputs[0].shape(), inputs[1].shape())?;
        let n = out_elements(&op, DType::QInt32, &shape)?;
        if !matches!(max_x.partial_cmp(&min_x), Some(Ordering::Greater)) {
            return Err(invalid(&op, "max_x must be larger than min_x."));
        }
        if !matches!(max_y.partial_cmp(&min_y), Some(Ordering::Greater)) {
            return Err(invalid(&op, "max_y must be larger than min_y."));
        }
        let pairing = pairing(&op, inputs[0].shape(), inputs[1].shape())?;
        let biggest = cpp_max(cpp_min(min_x, min_y).abs(), cpp_max(max_x, max_y).abs());
        let out_max = biggest * 16384.0;
        let out_min = -out_max;
        let values = match pairing {
            Pairing::ScalarX | Pairing::ScalarY => {
                let (full, full_range, s, s_range) = if matches!(pairing, Pairing::ScalarX) {
                    (y, (min_y, max_y), x[0], (min_x, max_x))
                } else {
                    (x, (min_x, max_x), y[0], (min_y, max_y))
                };
                let s = scalar_into_range(s, s_range.0, s_range.1, out_min, out_max);
                let map = IntoRange::new(full_range.0, full_range.1, out_min, out_max);
                full.iter().map(|&q| map.map(q).wrapping_add(s)).collect()
            }
            _ => {
                let mx = IntoRange::new(min_x, max_x, out_min, out_max);
                let my = IntoRange::new(min_y, max_y, out_min, out_max);
                elementwise(
                    &op,
                    x,
                    y,
                    &pairing,
                    n,
                    "Must have some elements to add",
                    |a, b| mx.map(a).wrapping_add(my.map(b)),
                )?
            }
        };
        Ok(vec![
            qint32_out(shape, &values)?,
            scalar_out(out_min)?,
            scalar_out(out_max)?,
        ])
    }))
}

fn build_mul(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    check_quint8_attrs(attrs, &op)?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 6)?;
        let names = ["min_x", "max_x", "min_y", "max_y"];
        let mut r = [0f32; 4];
        for (i, name) in names.iter().enumerate() {
            if !inputs[i + 2].shape().is_empty() {
                return Err(invalid(&op, format!("{name} must be a scalar")));
            }
            r[i] = range_value(&op, &inputs[i + 2], i + 2)?;
        }
        let [min_x, max_x, min_y, max_y] = r;
        let x = quint8_values(&op, &inputs[0], 0)?;
        let y = quint8_values(&op, &inputs[1], 1)?;
        let shape = broadcast_shape(&op, inputs[0].shape(), inputs[1].shape())?;
        let n = out_elements(&op, DType::QInt32, &shape)?;
        // TF's messages, typos included.
        if !matches!(max_x.partial_cmp(&min_x), Some(Ordering::Greater)) {
            return Err(invalid(&op, "max_x must be larger than min_a."));
        }
        if !matches!(max_y.partial_cmp(&min_y), Some(Ordering::Greater)) {
            return Err(invalid(&op, "max_x must be larger than min_b."));
        }
        let pairing = pairing(&op, inputs[0].shape(), inputs[1].shape())?;
        let (off_x, off_y) = (quint8_offset(min_x, max_x), quint8_offset(min_y, max_y));
        let values = elementwise(
            &op,
            x,
            y,
            &pairing,
            n,
            "vector must have at least 1 element",
            |a, b| {
                (i32::from(a).wrapping_sub(off_x)).wrapping_mul(i32::from(b).wrapping_sub(off_y))
            },
        )?;
        let (out_min, out_max) = multiplication_range(min_x, max_x, min_y, max_y);
        Ok(vec![
            qint32_out(shape, &values)?,
            scalar_out(out_min)?,
            scalar_out(out_max)?,
        ])
    }))
}

fn build_matmul(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    check_quint8_attrs(attrs, &op)?;
    let transpose_a = attrs.bool_or("transpose_a", false)?;
    let transpose_b = attrs.bool_or("transpose_b", false)?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 6)?;
        let names = ["min_a", "max_a", "min_b", "max_b"];
        let mut r = [0f32; 4];
        for (i, name) in names.iter().enumerate() {
            let t = &inputs[i + 2];
            // TF checks the rank of `min_a` and the element count of the others.
            let bad = if i == 0 {
                !t.shape().is_empty()
            } else {
                elements(t.shape()) != 1
            };
            if bad {
                return Err(invalid(
                    &op,
                    format!(
                        "{name} must be a scalar, but got shape{}",
                        shape_str(t.shape())
                    ),
                ));
            }
            r[i] = range_value(&op, t, i + 2)?;
        }
        let [min_a, max_a, min_b, max_b] = r;
        if !matches!(max_a.partial_cmp(&min_a), Some(Ordering::Greater)) {
            return Err(invalid(&op, "max_a must be larger than min_a."));
        }
        if !matches!(max_b.partial_cmp(&min_b), Some(Ordering::Greater)) {
            return Err(invalid(&op, "max_b must be larger than min_b."));
        }
        let (a_t, b_t) = (&inputs[0], &inputs[1]);
        if a_t.shape().len() != 2 {
            return Err(invalid(&op, "In[0] is not a matrix"));
        }
        if b_t.shape().len() != 2 {
            return Err(invalid(&op, "In[1] is not a matrix"));
        }
        let (ka, kb) = (
            a_t.shape()[usize::from(!transpose_a)],
            b_t.shape()[usize::from(transpose_b)],
        );
        if ka != kb {
            return Err(invalid(
                &op,
                format!(
                    "Matrix size-incompatible: In[0]: {}, In[1]: {}",
                    shape_str(a_t.shape()),
                    shape_str(b_t.shape())
                ),
            ));
        }
        let a = quint8_values(&op, a_t, 0)?;
        let b = quint8_values(&op, b_t, 1)?;
        let m = a_t.shape()[usize::from(transpose_a)] as usize;
        let n = b_t.shape()[usize::from(!transpose_b)] as usize;
        let k = ka as usize;
        let shape = vec![m as i64, n as i64];
        out_elements(&op, DType::QInt32, &shape)?;
        if k == 0 && m * n > 0 {
            // gemmlowp writes nothing for an empty inner dimension, so TF
            // returns uninitialized memory.
            return Err(invalid(
                &op,
                "an empty inner dimension leaves TensorFlow's output unwritten; refused",
            ));
        }
        let (off_a, off_b) = (quint8_offset(min_a, max_a), quint8_offset(min_b, max_b));
        let a_at = |i: usize, p: usize| a[if transpose_a { p * m + i } else { i * k + p }];
        let b_at = |p: usize, j: usize| b[if transpose_b { j * k + p } else { p * n + j }];
        let mut values = Vec::with_capacity(m * n);
        for i in 0..m {
            for j in 0..n {
                // gemmlowp accumulates in int32; the sum wraps the same
                // whatever order it is taken in.
                let sum = (0..k).fold(0i32, |acc, p| {
                    let da = i32::from(a_at(i, p)).wrapping_sub(off_a);
                    let db = i32::from(b_at(p, j)).wrapping_sub(off_b);
                    acc.wrapping_add(da.wrapping_mul(db))
                });
                values.push(sum);
            }
        }
        let (out_min, out_max) = multiplication_range(min_a, max_a, min_b, max_b);
        Ok(vec![
            qint32_out(shape, &values)?,
            scalar_out(out_min)?,
            scalar_out(out_max)?,
        ])
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bcast_rank_merges_runs() {
        assert_eq!(bcast_rank(&[2, 3], &[3]), 2);
        assert_eq!(bcast_rank(&[2, 3], &[2, 3]), 1);
        assert_eq!(bcast_rank(&[1, 1], &[5]), 1);
        assert_eq!(bcast_rank(&[2, 1, 3], &[2, 4, 3]), 3);
        assert_eq!(bcast_rank(&[], &[]), 1);
    }

    #[test]
    fn zero_point_of_symmetric_range() {
        // TF 2.21: [-1, 1] puts zero at code 128.
        assert_eq!(quint8_offset(-1.0, 1.0), 128);
    }
}
