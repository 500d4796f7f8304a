//! Requantizing `qint32` accumulators into eight bits with caller-given
//! ranges: `Requantize`, `RequantizePerChannel` and
//! `RequantizationRangePerChannel`, bit for bit as TensorFlow 2.21's x86
//! kernels compute them.
//!
//! Two details of TF 2.21's compiled kernels are not in its published
//! formulas, and were found by observing it:
//! - Eigen reads a `qint32` element through its float conversion, so the
//!   integer the fixed-point loop and the per-channel range scan see is the
//!   value rounded to `f32` (`2^31 - 1` becomes `2^31`): widened to 64 bits
//!   in the loop, converted back to an `int32` as x86 does (out of range ->
//!   `i32::MIN`) in the per-channel scan.
//! - `RequantizationRangePerChannel` takes `max(|min|, |max|)` of those
//!   integers as an unsigned maximum, so a channel holding a value whose
//!   magnitude rounds to `2^31` gets a negative range and drops out.

use std::cmp::Ordering;

use tfdata_core::{DType, Result, Tensor};

use super::numeric::{buffer, expect_dtype, finish, invalid, out_elements};
use super::quantized::{qint32_values, requantize_to_quint8, scalar_out};
use super::strings_more::float_text;
use super::{Compute, KernelDef};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "Requantize",
        outputs: |_| Ok(vec![("output", 1), ("output_min", 1), ("output_max", 1)]),
        build: build_requantize,
    },
    KernelDef {
        op: "RequantizePerChannel",
        outputs: |_| Ok(vec![("output", 1), ("output_min", 1), ("output_max", 1)]),
        build: build_per_channel,
    },
    KernelDef {
        op: "RequantizationRangePerChannel",
        outputs: |_| Ok(vec![("output_min", 1), ("output_max", 1)]),
        build: build_range_per_channel,
    },
];

/// TensorFlow's `StrCat` of a float, for error messages.
fn ftext(v: f32) -> String {
    float_text(f64::from(v), false)
}

/// A `qint32` element as Eigen hands it to TF 2.21's kernels (through `f32`),
/// back in an `int32` with x86's conversion (`i32::MIN` when the float is out
/// of range, i.e. `2^31`).
fn through_float_i32(v: i32) -> i32 {
    let f = v as f32;
    if f >= 2_147_483_648.0 {
        i32::MIN
    } else {
        f as i32
    }
}

/// A float input TensorFlow requires to be a scalar.
fn scalar(op: &str, t: &Tensor, index: usize, name: &str) -> Result<f32> {
    expect_dtype(op, t, index, DType::Float)?;
    if !t.shape().is_empty() {
        return Err(invalid(
            op,
            format!("`{name}` must be rank 0 but is rank {}", t.shape().len()),
        ));
    }
    float_values(op, t)?
        .first()
        .copied()
        .ok_or_else(|| invalid(op, format!("`{name}` is empty")))
}

fn float_values(op: &str, t: &Tensor) -> Result<Vec<f32>> {
    Ok(buffer(op, t)?
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// TF's generic Eigen path (`qint32 -> qint8`): dequantize in float with a
/// float step, requantize with a float scale, round half away from zero,
/// clamp; NaN converts to `i32::MIN`, whose low byte is 0.
fn requantize_qint8(
    values: &[i32],
    in_min: f32,
    in_max: f32,
    out_min: f32,
    out_max: f32,
) -> Vec<u8> {
    let in_scale = (f64::from(in_max - in_min) / 4_294_967_295.0) as f32;
    let in_min_rounded = if in_max == in_min {
        in_min
    } else {
        (in_min / in_scale).round() * in_scale
    };
    let in_base = in_min_rounded - (-2_147_483_648.0f32 * in_scale);
    let out_scale: f32 = if out_max == out_min {
        0.0
    } else {
        (255.0 / f64::from(out_max - out_min)) as f32
    };
    let out_min_scaled = (out_min * out_scale).round();
    let offset = out_min_scaled - (-128.0);
    values
        .iter()
        .map(|&v| {
            let x = in_base + v as f32 * in_scale;
            let q = (x * out_scale).round() - offset;
            if q.is_nan() {
                0
            } else {
                (q.clamp(-128.0, 127.0) as i8) as u8
            }
        })
        .collect()
}

fn build_requantize(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    if attrs.has("Tinput") && attrs.dtype("Tinput")? != DType::QInt32 {
        return Err(attrs.error(super::numeric::unsupported(&op, attrs.dtype("Tinput")?)));
    }
    let out = attrs.dtype("out_type")?;
    if !matches!(out, DType::QUInt8 | DType::QInt8) {
        return Err(attrs.error(super::numeric::unsupported(&op, out)));
    }
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 5)?;
        let values = qint32_values(&op, &inputs[0])?;
        let in_min = scalar(&op, &inputs[1], 1, "input_min")?;
        let in_max = scalar(&op, &inputs[2], 2, "input_max")?;
        let out_min = scalar(&op, &inputs[3], 3, "requested_output_min")?;
        let out_max = scalar(&op, &inputs[4], 4, "requested_output_max")?;
        if !matches!(
            out_min.partial_cmp(&0.0),
            Some(Ordering::Less | Ordering::Equal)
        ) {
            return Err(invalid(
                &op,
                format!(
                    "requested_output_min must be <= 0, but got {}",
                    ftext(out_min)
                ),
            ));
        }
        if !matches!(
            out_max.partial_cmp(&out_min),
            Some(Ordering::Greater | Ordering::Equal)
        ) {
            return Err(invalid(
                &op,
                format!(
                    "requested_output_max must be >= requested_output_min, but got {} and {}",
                    ftext(out_max),
                    ftext(out_min)
                ),
            ));
        }
        let shape = inputs[0].shape().to_vec();
        out_elements(&op, out, &shape)?;
        let data = if out == DType::QUInt8 {
            requantize_to_quint8(&values, in_min, in_max, out_min, out_max)
        } else {
            requantize_qint8(&values, in_min, in_max, out_min, out_max)
        };
        Ok(vec![
            finish(out, shape, data)?,
            scalar_out(out_min)?,
            scalar_out(out_max)?,
        ])
    }))
}

/// `std::max(a, b)` for floats: `b` only when `a < b` (a NaN `a` stays).
fn cpp_max(a: f32, b: f32) -> f32 {
    if a < b { b } else { a }
}

fn check_qint32_attr(attrs: &NodeAttrs, op: &str) -> Result<()> {
    if attrs.has("T") && attrs.dtype("T")? != DType::QInt32 {
        return Err(attrs.error(super::numeric::unsupported(op, attrs.dtype("T")?)));
    }
    Ok(())
}

/// `RequantizePerChannel` (TF's oneDNN reorder): each channel's scale is
/// `factor * (max(|min_c|, |max_c|) / max(|out_min|, |out_max|) / 2^31)` in
/// float, the value is `f32(q) * scale` rounded half to even and saturated;
/// NaN saturates to the type's lowest value.
fn build_per_channel(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    check_qint32_attr(attrs, &op)?;
    let out = attrs.dtype("out_type")?;
    if !matches!(out, DType::QUInt8 | DType::QInt8) {
        return Err(attrs.error(invalid(
            &op,
            format!("out_type must be qint8 or quint8, but got: {out}"),
        )));
    }
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 5)?;
        let input = &inputs[0];
        let values = qint32_values(&op, input)?;
        if input.shape().len() != 4 {
            return Err(invalid(
                &op,
                "Current RequantizePerChannel operatorsupports 4D tensors only.",
            ));
        }
        for (i, t) in inputs.iter().enumerate().skip(1) {
            expect_dtype(&op, t, i, DType::Float)?;
        }
        let mins = float_values(&op, &inputs[1])?;
        let maxs = float_values(&op, &inputs[2])?;
        if maxs.len() != mins.len() {
            return Err(invalid(
                &op,
                format!(
                    "input_max has incorrect size, expected {} was {}",
                    mins.len(),
                    maxs.len()
                ),
            ));
        }
        let req_min = float_values(&op, &inputs[3])?;
        let req_max = float_values(&op, &inputs[4])?;
        let (&[req_min], &[req_max]) = (req_min.as_slice(), req_max.as_slice()) else {
            let which = if req_min.len() != 1 { "min" } else { "max" };
            return Err(invalid(
                &op,
                format!("requested_output_{which} must be a scalar"),
            ));
        };
        if out == DType::QInt8 && !matches!(req_min.partial_cmp(&0.0), Some(Ordering::Less)) {
            return Err(invalid(
                &op,
                format!(
                    "If out_type is QINT8, requested_output_max must be non negative, got {}",
                    ftext(req_min)
                ),
            ));
        }
        let channels = usize::try_from(input.shape()[3]).unwrap_or(0);
        // TF hands oneDNN one scale per channel without checking the count
        // (fewer would be read past the end), nor an empty tensor (which
        // crashes TF); refuse both.
        if mins.len() < channels {
            return Err(invalid(
                &op,
                format!(
                    "input_min has {} elements, fewer than the input's {channels} channels",
                    mins.len()
                ),
            ));
        }
        if values.is_empty() {
            return Err(invalid(&op, "input must not be empty"));
        }
        let shape = input.shape().to_vec();
        out_elements(&op, out, &shape)?;
        let factor: f32 = if out == DType::QInt8 { 127.0 } else { 255.0 };
        let requested = cpp_max(req_min.abs(), req_max.abs());
        let scales: Vec<f32> = (0..channels)
            .map(|c| {
                let range = cpp_max(mins[c].abs(), maxs[c].abs());
                factor * (range / requested / 2_147_483_648.0)
            })
            .collect();
        let (lo, hi) = if out == DType::QInt8 {
            (-128.0, 127.0)
        } else {
            (0.0, 255.0)
        };
        let data = values
            .iter()
            .zip(scales.iter().cycle())
            .map(|(&v, &scale)| {
                let x = (v as f32 * scale).round_ties_even();
                let q = if x.is_nan() { lo } else { x.clamp(lo, hi) };
                // In range by the clamp; the byte pattern of the 8-bit type.
                (q as i32) as u8
            })
            .collect();
        Ok(vec![
            finish(out, shape, data)?,
            scalar_out(req_min)?,
            scalar_out(req_max)?,
        ])
    }))
}

/// `RequantizationRangePerChannel`: the largest channel range
/// `max(|min_c|, |max_c|) * max|q| / 2^31`, clipped to `clip_value_max`,
/// with a minimum of 0 when no element is negative.
fn build_range_per_channel(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    check_qint32_attr(attrs, &op)?;
    let clip = attrs.float("clip_value_max")?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 3)?;
        let input = &inputs[0];
        let values = qint32_values(&op, input)?;
        expect_dtype(&op, &inputs[1], 1, DType::Float)?;
        expect_dtype(&op, &inputs[2], 2, DType::Float)?;
        let mins = float_values(&op, &inputs[1])?;
        let maxs = float_values(&op, &inputs[2])?;
        let depth = maxs.len();
        let first_dim = |t: &Tensor| t.shape().first().copied().unwrap_or(1);
        for (name, t) in [("input_min", &inputs[1]), ("input_max", &inputs[2])] {
            if usize::try_from(first_dim(t)).ok() != Some(depth) {
                return Err(invalid(
                    &op,
                    format!(
                        "{name} has incorrect size, expected {depth} was {}",
                        first_dim(t)
                    ),
                ));
            }
        }
        if mins.len() != depth {
            return Err(invalid(
                &op,
                format!(
                    "input_min must have the same number of elements as input_max, got {} and {depth}",
                    mins.len()
                ),
            ));
        }
        if values.is_empty() {
            return Err(invalid(&op, "input must not be empty"));
        }
        if input.shape().len() != 4 {
            return Err(invalid(&op, "input must be in NHWC format"));
        }
        if usize::try_from(input.shape()[3]).ok() != Some(depth) {
            return Err(invalid(
                &op,
                format!(
                    "input must have same number of channels as length of input_min: {} vs {depth}",
                    input.shape()[3]
                ),
            ));
        }
        let mut out_max = f32::MIN_POSITIVE;
        let mut non_negative = true;
        for c in 0..depth {
            let channel = values.iter().skip(c).step_by(depth).copied();
            let (lo, hi) = channel.fold((i32::MAX, i32::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
            let (lo, hi) = (through_float_i32(lo), through_float_i32(hi));
            let abs_max = lo.unsigned_abs().max(hi.unsigned_abs()) as i32;
            let scale = cpp_max(mins[c].abs(), maxs[c].abs());
            let range = scale * abs_max as f32 / 2_147_483_648.0;
            if lo < 0 {
                non_negative = false;
            }
            out_max = cpp_max(out_max, range);
        }
        if out_max > clip {
            out_max = clip;
        }
        let out_min = if non_negative { 0.0 } else { -out_max };
        Ok(vec![scalar_out(out_min)?, scalar_out(out_max)?])
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quint8_reads_values_through_float() {
        // TF 2.21: [5, 5.5] -> [0, 255] maps 2^31 - 64 (rounds to 2^31) to 6,
        // 2^31 - 65 to 5.
        let got = requantize_to_quint8(&[2_147_483_583, 2_147_483_584, 0], 5.0, 5.5, 0.0, 255.0);
        assert_eq!(got, [5, 6, 5]);
    }

    #[test]
    fn qint8_nan_range_gives_zero() {
        assert_eq!(requantize_qint8(&[1, 2], f32::NAN, 1.0, -1.0, 1.0), [0, 0]);
    }

    #[test]
    fn unsigned_abs_max_drops_saturated_channels() {
        assert_eq!(through_float_i32(i32::MAX), i32::MIN);
        assert_eq!(through_float_i32(2_147_483_583), 2_147_483_520);
        let abs_max = i32::MIN.unsigned_abs().max(5) as i32;
        assert!(abs_max < 0);
    }
}
