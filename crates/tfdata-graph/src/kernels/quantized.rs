//! Requantizing 32-bit quantized accumulators: `RequantizationRange` and
//! `QuantizeDownAndShrinkRange`, bit for bit as TensorFlow 2.21 computes them,
//! and the `qint32 -> quint8` fixed-point loop `Requantize` shares.
//!
//! A quantized `qint32` value `q` in the range `[min, max]` stands for
//! `min_rounded + (q - i32::MIN) * (max - min) / (2^32 - 1)`.
//! `QuantizeDownAndShrinkRange` maps it to quint8 with a 16-bit fixed-point
//! loop in 64-bit integers.
//!
//! TF 2.21's compiled kernels read each `qint32` element through Eigen's
//! float conversion (observed: `2^31 - 64` already counts as `2^31`), both
//! in the min/max scan behind the float ranges and in the fixed-point loop;
//! so do these.

use tfdata_core::{DType, Result, Tensor};

use super::numeric::{buffer, expect_dtype, finish, invalid, out_elements};
use super::{Compute, KernelDef};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "RequantizationRange",
        outputs: |_| Ok(vec![("output_min", 1), ("output_max", 1)]),
        build: build_range,
    },
    KernelDef {
        op: "QuantizeDownAndShrinkRange",
        outputs: |_| Ok(vec![("output", 1), ("output_min", 1), ("output_max", 1)]),
        build: build_shrink,
    },
];

/// Checks the `Tinput` attr (TF registers only `qint32`) and returns the
/// `out_type` attr among the `allowed` ones TF registers kernels for.
fn check_types(attrs: &NodeAttrs, allowed_out: &[DType]) -> Result<DType> {
    let op = attrs.op.to_string();
    if attrs.has("Tinput") {
        let t = attrs.dtype("Tinput")?;
        if t != DType::QInt32 {
            return Err(attrs.error(super::numeric::unsupported(&op, t)));
        }
    }
    if allowed_out.is_empty() {
        return Ok(DType::Float);
    }
    let out = attrs.dtype("out_type")?;
    if !allowed_out.contains(&out) {
        return Err(attrs.error(super::numeric::unsupported(&op, out)));
    }
    Ok(out)
}

/// The qint32 values of input 0.
pub(super) fn qint32_values(op: &str, t: &Tensor) -> Result<Vec<i32>> {
    expect_dtype(op, t, 0, DType::QInt32)?;
    Ok(buffer(op, t)?
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// The first float of a range input (TF reads `flat<float>()(0)`).
pub(super) fn first_float(op: &str, t: &Tensor, index: usize, empty_msg: &str) -> Result<f32> {
    expect_dtype(op, t, index, DType::Float)?;
    let b = buffer(op, t)?;
    match b.get(..4) {
        Some(c) => Ok(f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        None => Err(invalid(op, empty_msg)),
    }
}

/// A range input that TF requires to be a scalar.
fn scalar_float(op: &str, t: &Tensor, index: usize, name: &str) -> Result<f32> {
    if !t.shape().is_empty() {
        return Err(invalid(
            op,
            format!("`{name}` must be rank 0 but is rank {}", t.shape().len()),
        ));
    }
    first_float(op, t, index, "empty range")
}

pub(super) fn scalar_out(v: f32) -> Result<Tensor> {
    finish(DType::Float, vec![], v.to_le_bytes().to_vec())
}

/// TF's `QuantizedToFloat<qint32>`: the step is computed in double from the
/// float range, the rounded minimum in float, the sum in double (TF's
/// published formula; TF 2.21's compiled kernel differs from it in the last
/// float bits, see the differential family's declared tolerance).
fn qint32_to_float(q: f64, min: f32, max: f32) -> f32 {
    if min == max {
        return min;
    }
    let steps = 4_294_967_296.0f64;
    let range_adjust = steps / (steps - 1.0);
    let range = f64::from(max - min) * range_adjust;
    let range_scale = range / steps;
    let offset = q - f64::from(i32::MIN);
    let scale_f = range_scale as f32;
    let min_rounded = f64::from((min / scale_f).round() * scale_f);
    (min_rounded + offset * range_scale) as f32
}

/// A `qint32` element as Eigen hands it to TF 2.21's kernels: rounded to
/// `f32` (`2^31 - 1` becomes `2^31`).
pub(super) fn through_float(v: i32) -> f64 {
    f64::from(v as f32)
}

/// The float range a qint32 tensor actually spans, with the minimum no
/// larger than zero (TF's rule for RequantizationRange and
/// QuantizeDownAndShrinkRange). An empty tensor spans from `i32::MAX` down
/// to `i32::MIN`, as TF's min/max scan starts there.
fn actual_range(values: &[i32], min: f32, max: f32) -> (f32, f32) {
    let lo = values.iter().copied().min().unwrap_or(i32::MAX);
    let hi = values.iter().copied().max().unwrap_or(i32::MIN);
    let lo_f = qint32_to_float(through_float(lo), min, max);
    // `std::min(0.0f, x)` returns 0 when x is NaN.
    let lo_f = if lo_f < 0.0 { lo_f } else { 0.0 };
    (lo_f, qint32_to_float(through_float(hi), min, max))
}

/// C++'s `static_cast<int64_t>(double)` as x86-64 executes it: truncation,
/// and the "integer indefinite" value for NaN or out-of-range inputs.
pub(super) fn cast_i64(x: f64) -> i64 {
    // 2^63 is exact in f64; NaN is outside every range.
    let limit = 2f64.powi(63);
    if (-limit..limit).contains(&x) {
        x as i64
    } else {
        i64::MIN
    }
}

/// `std::lround` as glibc computes it: half away from zero, `i64::MIN` when
/// the result does not fit.
fn lround(x: f64) -> i64 {
    cast_i64(x.round())
}

/// TF's fixed-point qint32 -> quint8 requantization (16 fractional bits,
/// 64-bit integers that wrap as TF's do on overflow), on the float-rounded
/// inputs, with `lround` for the output offset.
pub(super) fn requantize_to_quint8(
    values: &[i32],
    in_min: f32,
    in_max: f32,
    out_min: f32,
    out_max: f32,
) -> Vec<u8> {
    const SHIFT: i64 = 16;
    let input_range = in_max - in_min;
    let output_range = out_max - out_min;
    let recip_output_range: f32 = if output_range == 0.0 {
        0.0
    } else {
        (255.0 / f64::from(output_range)) as f32
    };
    let input_rezero = (f64::from(in_min + in_max) / 2.0) as f32;
    let range_scale_fp: i64 = if output_range == 0.0 {
        0
    } else {
        // The ternary's type is double in TF; the int64 round-trips exactly.
        cast_i64(255.0 * 65536.0 * f64::from(input_range) / f64::from(output_range))
    };
    let input_offset_fp = cast_i64(f64::from(input_rezero * recip_output_range * 65536.0));
    let output_offset_fp: i64 = if output_range == 0.0 {
        0
    } else {
        lround(65536.0 * (f64::from(out_min) * 255.0) / f64::from(output_range))
    };
    let bias = input_offset_fp
        .wrapping_sub(output_offset_fp)
        .wrapping_add(1 << (SHIFT - 1));
    values
        .iter()
        .map(|&v| {
            // Exact: the float-rounded value is an integer within +-2^31.
            let v = through_float(v) as i64;
            let product = v.wrapping_mul(range_scale_fp) >> 32;
            (product.wrapping_add(bias) >> SHIFT).clamp(0, 255) as u8
        })
        .collect()
}

fn build_range(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    check_types(attrs, &[])?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 3)?;
        let values = qint32_values(&op, &inputs[0])?;
        let min = first_float(&op, &inputs[1], 1, "Input min must not be empty.")?;
        let max = first_float(&op, &inputs[2], 2, "Input max must not be empty.")?;
        let (lo, hi) = actual_range(&values, min, max);
        Ok(vec![scalar_out(lo)?, scalar_out(hi)?])
    }))
}

fn build_shrink(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    let out = check_types(attrs, &[DType::QUInt8])?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 3)?;
        let values = qint32_values(&op, &inputs[0])?;
        let min = scalar_float(&op, &inputs[1], 1, "input_min")?;
        let max = scalar_float(&op, &inputs[2], 2, "input_max")?;
        let (lo, hi) = actual_range(&values, min, max);
        let shape = inputs[0].shape().to_vec();
        out_elements(&op, out, &shape)?;
        let data = requantize_to_quint8(&values, min, max, lo, hi);
        Ok(vec![
            finish(out, shape, data)?,
            scalar_out(lo)?,
            scalar_out(hi)?,
        ])
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point_matches_observed_tensorflow() {
        // TF's fixed-point loop, as TF 2.21's QuantizeDownAndShrinkRange runs it
        // (range [-10, 10] -> [-1, 1]).
        let v = [
            -5000,
            0,
            123_456,
            i32::MAX,
            i32::MIN,
            7,
            -99_999_999,
            55_555_555,
        ];
        assert_eq!(
            requantize_to_quint8(&v, -10.0, 10.0, -1.0, 1.0),
            [127, 128, 128, 255, 0, 128, 68, 160]
        );
    }
}
