//! `ScaleAndTranslate`: what `tf.image.resize` runs for `lanczos3`,
//! `lanczos5`, `gaussian` and `mitchellcubic`, and for every method with
//! `antialias=True`.
//!
//! Bit-identical to TensorFlow's CPU kernel because it keeps its steps:
//! per output row and column a span of input samples with kernel weights
//! (the kernel widened by `1/scale` when antialiasing a downscale, the
//! weights normalised by their float sum unless it is tiny), computed with
//! TensorFlow's mixed float/double expressions (`1.0 / scale` in double;
//! the Gaussian's exponent in double; `sinf` for Lanczos); then rows are
//! gathered first, into a `[out_height, in_width]` buffer, and columns
//! second, each output a running float sum over its span in order.

use tfdata_core::{DType, Error, Result, Tensor};

use super::image::{batch_dims, floats};
use super::strings::shape_string;
use super::{Compute, KernelDef, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "ScaleAndTranslate",
    outputs: |_| Ok(vec![("resized_images", 1)]),
    build: scale_and_translate,
}];

const OP: &str = "ScaleAndTranslate";

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{OP}: {message}"))
}

#[derive(Clone, Copy)]
pub(super) enum Kernel {
    Lanczos(f32),
    Gaussian,
    Box,
    Triangle,
    KeysCubic,
    MitchellCubic,
}

impl Kernel {
    pub(super) fn parse(s: &str) -> Option<Kernel> {
        Some(match s {
            "lanczos1" => Kernel::Lanczos(1.0),
            "lanczos3" => Kernel::Lanczos(3.0),
            "lanczos5" => Kernel::Lanczos(5.0),
            "gaussian" => Kernel::Gaussian,
            "box" => Kernel::Box,
            "triangle" => Kernel::Triangle,
            "keyscubic" => Kernel::KeysCubic,
            "mitchellcubic" => Kernel::MitchellCubic,
            _ => return None,
        })
    }

    fn radius(self) -> f32 {
        match self {
            Kernel::Lanczos(r) => r,
            Kernel::Gaussian => 1.5,
            Kernel::Box | Kernel::Triangle => 1.0,
            Kernel::KeysCubic | Kernel::MitchellCubic => 2.0,
        }
    }

    fn weight(self, x: f32) -> f32 {
        let x = x.abs();
        match self {
            Kernel::Lanczos(r) => {
                // TensorFlow's 3.14159265359f rounds to this float.
                const PI: f32 = std::f32::consts::PI;
                if x > r {
                    0.0
                } else if f64::from(x) <= 1e-3 {
                    1.0
                } else {
                    r * (PI * x).sin() * (PI * x / r).sin() / (PI * PI * x * x)
                }
            }
            Kernel::Gaussian => {
                let (radius, sigma) = (1.5f32, 1.5f32 / 3.0);
                if x >= radius {
                    0.0
                } else {
                    let s = f64::from(sigma);
                    (f64::from(-x * x) / (2.0 * s * s)).exp() as f32
                }
            }
            Kernel::Box => {
                if x < 0.5 {
                    1.0
                } else if x == 0.5 {
                    0.5
                } else {
                    0.0
                }
            }
            Kernel::Triangle => {
                if x < 1.0 {
                    1.0 - x
                } else {
                    0.0
                }
            }
            Kernel::KeysCubic => {
                if x >= 2.0 {
                    0.0
                } else if x >= 1.0 {
                    ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0
                } else {
                    ((1.5 * x - 2.5) * x) * x + 1.0
                }
            }
            Kernel::MitchellCubic => {
                if x >= 2.0 {
                    0.0
                } else if x >= 1.0 {
                    (((-7.0f32 / 18.0) * x + 2.0) * x - 10.0f32 / 3.0) * x + 16.0f32 / 9.0
                } else {
                    (((7.0f32 / 6.0) * x - 2.0) * x) * x + 8.0f32 / 9.0
                }
            }
        }
    }
}

/// One axis's spans: each output's first input sample and `size` weights.
pub(super) struct Spans {
    pub(super) size: usize,
    pub(super) starts: Vec<usize>,
    pub(super) weights: Vec<f32>,
}

pub(super) fn spans(
    kernel: Kernel,
    out: usize,
    input: usize,
    scale: f32,
    translate: f32,
    aa: bool,
) -> Spans {
    let inv_scale = (1.0 / f64::from(scale)) as f32;
    let inv_translate = -inv_scale * translate;
    let kernel_scale = if aa { inv_scale.max(1.0) } else { 1.0 };
    let reach = kernel.radius() * kernel_scale;
    let size = (2 * (reach.ceil() as i32) + 1).min(input as i32).max(0) as usize;
    let mut starts = vec![0; out];
    let mut weights = vec![0.0f32; size * out];
    let one_over = 1.0 / kernel_scale;
    let mut temp = Vec::new();
    for (x, start) in starts.iter_mut().enumerate() {
        let sample = (x as f32 + 0.5) * inv_scale + inv_translate;
        if sample < 0.0 || sample > input as f32 {
            continue;
        }
        let last = input as i64 - 1;
        let lo = ((sample - reach - 0.5).ceil() as i64).clamp(0, last);
        let hi = ((sample + reach - 0.5).floor() as i64).clamp(0, last) + 1;
        let mut total = 0.0f32;
        temp.clear();
        for source in lo..hi {
            let pos = source as f32 + 0.5 - sample;
            let w = kernel.weight((pos * one_over).abs());
            total += w;
            temp.push(w);
        }
        if total.abs() >= 1000.0 * f32::MIN_POSITIVE {
            let inv = 1.0 / total;
            for (i, w) in temp.iter().take(size).enumerate() {
                weights[x * size + i] = w * inv;
            }
        }
        *start = lo as usize;
    }
    Spans {
        size,
        starts,
        weights,
    }
}

/// Resamples `[b, h, w, c]` values to `[b, oh, ow, c]`: rows first into an
/// intermediate, then columns (TensorFlow's `GatherSpans`; its summation
/// order, each output the weighted sum over its span from the first tap).
pub(super) fn gather(
    rows: &Spans,
    cols: &Spans,
    v: &[f32],
    [b, h, w, c]: [usize; 4],
    oh: usize,
    ow: usize,
) -> Vec<f32> {
    let mut out = vec![0.0f32; b * oh * ow * c];
    let mut mid = vec![0.0f32; oh * w * c];
    let (in_row, mid_row, out_row) = (w * c, w * c, ow * c);
    for n in 0..b {
        let img = &v[n * h * in_row..(n + 1) * h * in_row];
        // Rows: each output row a weighted sum of input rows.
        mid.fill(0.0);
        for y in 0..oh {
            let start = rows.starts[y];
            let real = (start + rows.size).min(h) - start;
            let dst = &mut mid[y * mid_row..(y + 1) * mid_row];
            for k in 0..real {
                let wgt = rows.weights[y * rows.size + k];
                let src = &img[(start + k) * in_row..(start + k + 1) * in_row];
                for (d, s) in dst.iter_mut().zip(src) {
                    *d += wgt * s;
                }
            }
        }
        // Columns: each output pixel a weighted sum along its row.
        let dst_img = &mut out[n * oh * out_row..(n + 1) * oh * out_row];
        for y in 0..oh {
            let src_row = &mid[y * mid_row..(y + 1) * mid_row];
            for x in 0..ow {
                let start = cols.starts[x];
                let real = (start + cols.size).min(w) - start;
                let px = &mut dst_img[y * out_row + x * c..y * out_row + (x + 1) * c];
                for k in 0..real {
                    let wgt = cols.weights[x * cols.size + k];
                    let s = &src_row[(start + k) * c..(start + k + 1) * c];
                    for (d, s) in px.iter_mut().zip(s) {
                        *d += wgt * s;
                    }
                }
            }
        }
    }
    out
}

pub(super) fn two_floats(t: &Tensor) -> Result<[f32; 2]> {
    if t.shape().len() != 1 {
        return Err(invalid(format!(
            "t must be 1-dimensional{}",
            shape_string(t.shape())
        )));
    }
    match t.to_vec::<f32>()?.as_slice() {
        [a, b] => Ok([*a, *b]),
        _ => Err(invalid(format!(
            "t must have two elements{}",
            shape_string(t.shape())
        ))),
    }
}

fn scale_and_translate(attrs: &NodeAttrs) -> Result<Compute> {
    let aa = attrs.bool_or("antialias", true)?;
    let name = attrs.string_or("kernel_type", "lanczos3")?;
    let kernel = Kernel::parse(name)
        .ok_or_else(|| attrs.error(format!("Unrecognized kernel type: {name}")))?;
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 4)?;
        let image = &inputs[0];
        let [b, h, w, c] = batch_dims(OP, image)?;
        let size_t = &inputs[1];
        if size_t.shape().len() != 1 {
            return Err(invalid(format!(
                "output_shape_t must be 1-dimensional{}",
                shape_string(size_t.shape())
            )));
        }
        let size = super::strings::int_values(OP, size_t, "size")?;
        let [oh, ow] = size[..] else {
            return Err(invalid(format!(
                "output_shape_t must have two elements{}",
                shape_string(size_t.shape())
            )));
        };
        if oh <= 0 || ow <= 0 {
            return Err(invalid("output dimensions must be positive"));
        }
        if c == 0 {
            return Err(invalid("image must have at least one channel"));
        }
        if h == 0 || w == 0 {
            return Err(invalid("input image must be of non-zero size"));
        }
        let [row_scale, col_scale] = two_floats(&inputs[2])?;
        if !(row_scale > 0.0 && col_scale > 0.0) {
            return Err(invalid("Scale must be greater than zero."));
        }
        let [row_t, col_t] = two_floats(&inputs[3])?;
        let (oh, ow) = (oh as usize, ow as usize);
        let total = (b as u64 * c as u64).saturating_mul(oh as u64 * (ow.max(w)) as u64);
        check_size(OP, DType::Float, total)?;
        let v = floats(OP, image)?;
        let cols = spans(kernel, ow, w, col_scale, col_t, aa);
        let rows = spans(kernel, oh, h, row_scale, row_t, aa);
        let out = gather(&rows, &cols, &v, [b, h, w, c], oh, ow);
        Ok(vec![Tensor::from_slice(
            &out,
            vec![b as i64, oh as i64, ow as i64, c as i64],
        )?])
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_scale_keeps_pixels() {
        let s = spans(Kernel::Triangle, 4, 4, 1.0, 0.0, true);
        for x in 0..4 {
            let row = &s.weights[x * s.size..(x + 1) * s.size];
            assert_eq!(row.iter().sum::<f32>(), 1.0);
        }
        assert_eq!(Kernel::Lanczos(3.0).weight(0.0), 1.0);
        assert_eq!(Kernel::KeysCubic.weight(2.5), 0.0);
    }
}
