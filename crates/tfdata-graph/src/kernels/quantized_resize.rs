//! `QuantizedResizeBilinear`: TensorFlow 2.21's bilinear resize of `quint8`,
//! `qint32` and `float` images, which interpolates in fixed point (7
//! fractional bits in 16-bit integers for `quint8`, 30 bits in 64-bit
//! integers for `qint32`) and in float for `float`. The range inputs pass
//! through unchanged. As in TF's compiled kernel, a `qint32` pixel is read
//! through `f32` (Eigen's conversion), and 16-bit intermediates wrap.

use tfdata_core::{DType, Result, Tensor};

use super::image::{batch_dims, resize_scale};
use super::numeric::{buffer, expect_dtype, finish, invalid};
use super::strings::shape_string;
use super::{Compute, KernelDef, check_size};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "QuantizedResizeBilinear",
    outputs: |_| Ok(vec![("resized_images", 1), ("out_min", 1), ("out_max", 1)]),
    build,
}];

/// One output coordinate's source rows (or columns) and weights.
struct Lerp {
    lower: usize,
    upper: usize,
    /// The float weight and its fixed-point form at the kernel's resolution.
    weight: f32,
    fixed: i64,
}

/// TF's `ComputeInterpolationWeights` (with the lower index clamped to the
/// upper one).
fn lerps(
    out_size: usize,
    in_size: usize,
    scale: f32,
    half_pixel: bool,
    resolution: u32,
) -> Vec<Lerp> {
    (0..out_size)
        .map(|i| {
            let x = if half_pixel {
                (i as f32 + 0.5) * scale - 0.5
            } else {
                i as f32 * scale
            };
            let floor = x.floor();
            let upper = (x.ceil() as i64).min(in_size as i64 - 1).max(0) as usize;
            let lower = ((floor as i64).max(0) as usize).min(upper);
            let weight = x - floor;
            Lerp {
                lower,
                upper,
                weight,
                fixed: (weight * (1u32 << resolution) as f32) as i64,
            }
        })
        .collect()
}

/// The four neighbours of an output pixel.
struct Corners<T> {
    top_left: T,
    top_right: T,
    bottom_left: T,
    bottom_right: T,
}

/// TF's `ComputeLerp<7, quint8, int16, int16>`: every intermediate is stored
/// in an `int16` (wrapping), divisions truncate toward zero.
fn lerp_quint8(c: Corners<u8>, x: i64, y: i64) -> u8 {
    let (x, y) = (i32::from(x as i16), i32::from(y as i16));
    let v = |q: u8| i32::from(q);
    let mul_offset = |a: u8, b: u8| (v(a) - v(b)).wrapping_mul(x) as i16;
    let top = (v(c.top_left) * 128 + i32::from(mul_offset(c.top_right, c.top_left))) as i16;
    let bottom =
        (v(c.bottom_left) * 128 + i32::from(mul_offset(c.bottom_right, c.bottom_left))) as i16;
    let diff = i32::from(bottom) - i32::from(top);
    let out = (i32::from(top) + diff / 128 * y) as i16;
    ((i32::from(out) + 64) / 128) as u8
}

/// TF's `ComputeLerp<30, qint32, int32, int64>`.
fn lerp_qint32(c: Corners<i32>, x: i64, y: i64) -> i32 {
    const MULT: i64 = 1 << 30;
    // Eigen hands the kernel each qint32 through f32.
    let v = |q: i32| (q as f32) as i64;
    let top = v(c.top_left) * MULT + (v(c.top_right) - v(c.top_left)) * x;
    let bottom = v(c.bottom_left) * MULT + (v(c.bottom_right) - v(c.bottom_left)) * x;
    let out = top + (bottom - top) / MULT * y;
    ((out + MULT / 2) / MULT) as i32
}

fn lerp_float(c: Corners<f32>, x: f32, y: f32) -> f32 {
    let top = c.top_left + (c.top_right - c.top_left) * x;
    let bottom = c.bottom_left + (c.bottom_right - c.bottom_left) * x;
    top + (bottom - top) * y
}

/// Resizes a `[batch, height, width, channels]` buffer of `T`.
fn resize_with<T: Copy>(
    src: &[T],
    [b, h, w, c]: [usize; 4],
    ys: &[Lerp],
    xs: &[Lerp],
    mut f: impl FnMut(Corners<T>, &Lerp, &Lerp) -> T,
) -> Vec<T> {
    let mut out = Vec::with_capacity(b * ys.len() * xs.len() * c);
    for image in src.chunks_exact(h * w * c).take(b) {
        for y in ys {
            let (top, bottom) = (&image[y.lower * w * c..], &image[y.upper * w * c..]);
            for x in xs {
                for k in 0..c {
                    let corners = Corners {
                        top_left: top[x.lower * c + k],
                        top_right: top[x.upper * c + k],
                        bottom_left: bottom[x.lower * c + k],
                        bottom_right: bottom[x.upper * c + k],
                    };
                    out.push(f(corners, x, y));
                }
            }
        }
    }
    out
}

fn scalar_range(op: &str, t: &Tensor, index: usize, name: &str) -> Result<f32> {
    if !t.shape().is_empty() {
        return Err(invalid(op, format!("{name} must be a scalar")));
    }
    expect_dtype(op, t, index, DType::Float)?;
    let b = buffer(op, t)?;
    b.get(..4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .ok_or_else(|| invalid(op, format!("{name} is empty")))
}

fn build(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    let dtype = attrs.dtype("T")?;
    if !matches!(dtype, DType::QUInt8 | DType::QInt32 | DType::Float) {
        return Err(attrs.error(super::numeric::unsupported(&op, dtype)));
    }
    let align = attrs.bool_or("align_corners", false)?;
    let half = attrs.bool_or("half_pixel_centers", false)?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 4)?;
        let min = scalar_range(&op, &inputs[2], 2, "min")?;
        let max = scalar_range(&op, &inputs[3], 3, "max")?;
        let (image, size) = (&inputs[0], &inputs[1]);
        expect_dtype(&op, image, 0, dtype)?;
        let dims @ [b, h, w, c] = batch_dims(&op, image)?;
        if size.shape().len() != 1 {
            return Err(invalid(
                &op,
                format!(
                    "shape_t must be 1-dimensional{}",
                    shape_string(size.shape())
                ),
            ));
        }
        let size = super::strings::int_values(&op, size, "size")?;
        let [oh, ow] = size[..] else {
            return Err(invalid(
                &op,
                format!(
                    "shape_t must have two elements{}",
                    shape_string(inputs[1].shape())
                ),
            ));
        };
        if oh <= 0 || ow <= 0 || oh > i64::from(i32::MAX) || ow > i64::from(i32::MAX) {
            return Err(invalid(&op, "output dimensions must be positive"));
        }
        if h == 0 || w == 0 {
            return Err(invalid(&op, "input image must be of non-zero size"));
        }
        let (oh, ow) = (oh as usize, ow as usize);
        let n = (b * c) as u64 * oh as u64 * ow as u64;
        check_size(&op, dtype, n)?;
        if n == 0 {
            // TF returns before writing its range outputs.
            return Err(invalid(
                &op,
                "an empty output leaves TensorFlow's range outputs unset; refused",
            ));
        }
        let shape = vec![b as i64, oh as i64, ow as i64, c as i64];
        let data = buffer(&op, image)?;
        let resized = if oh == h && ow == w {
            data.to_vec()
        } else {
            let (sy, sx) = (resize_scale(h, oh, align), resize_scale(w, ow, align));
            let resolution = match dtype {
                DType::QUInt8 => 7,
                DType::QInt32 => 30,
                _ => 0,
            };
            let ys = lerps(oh, h, sy, half, resolution);
            let xs = lerps(ow, w, sx, half, resolution);
            match dtype {
                DType::QUInt8 => resize_with(data, dims, &ys, &xs, |c, x, y| {
                    lerp_quint8(c, x.fixed, y.fixed)
                }),
                DType::QInt32 => {
                    let v: Vec<i32> = data
                        .chunks_exact(4)
                        .map(|q| i32::from_le_bytes([q[0], q[1], q[2], q[3]]))
                        .collect();
                    resize_with(&v, dims, &ys, &xs, |c, x, y| {
                        lerp_qint32(c, x.fixed, y.fixed)
                    })
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect()
                }
                _ => {
                    let v: Vec<f32> = data
                        .chunks_exact(4)
                        .map(|q| f32::from_le_bytes([q[0], q[1], q[2], q[3]]))
                        .collect();
                    resize_with(&v, dims, &ys, &xs, |c, x, y| {
                        lerp_float(c, x.weight, y.weight)
                    })
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect()
                }
            }
        };
        Ok(vec![
            finish(dtype, shape, resized)?,
            finish(DType::Float, vec![], min.to_le_bytes().to_vec())?,
            finish(DType::Float, vec![], max.to_le_bytes().to_vec())?,
        ])
    }))
}
