//! `DrawBoundingBoxes` and `DrawBoundingBoxesV2`
//! (`tf.image.draw_bounding_boxes`): one-pixel box outlines in a colour per
//! box, cycling through the given colours or TensorFlow's ten defaults.
//!
//! TensorFlow's rules, kept: corners scale by `size - 1` in float and
//! truncate to integers (x86's conversion, so NaN lands far outside);
//! inverted boxes and boxes wholly outside are skipped; each side is drawn
//! only where its line lies inside the image, clamped to it.

use tfdata_core::{DType, Error, Result, Tensor};

use super::strings::shape_string;
use super::{Compute, KernelDef, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "DrawBoundingBoxes",
        outputs: super::one_output,
        build: |a| build(a, false),
    },
    KernelDef {
        op: "DrawBoundingBoxesV2",
        outputs: super::one_output,
        build: |a| build(a, true),
    },
];

fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

const DEFAULT_COLORS: [[f32; 4]; 10] = [
    [1.0, 1.0, 0.0, 1.0],
    [0.0, 0.0, 1.0, 1.0],
    [1.0, 0.0, 0.0, 1.0],
    [0.0, 1.0, 0.0, 1.0],
    [0.5, 0.0, 0.5, 1.0],
    [0.5, 0.5, 0.0, 1.0],
    [0.5, 0.0, 0.0, 1.0],
    [0.0, 0.0, 0.5, 1.0],
    [0.0, 1.0, 1.0, 1.0],
    [1.0, 0.0, 1.0, 1.0],
];

/// C++'s float-to-int64 conversion on x86: truncation, `i64::MIN` for NaN
/// and out-of-range values.
fn to_i64(x: f32) -> i64 {
    if x.is_nan() || !(-9.223_372e18..9.223_372e18).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

fn build(attrs: &NodeAttrs, v2: bool) -> Result<Compute> {
    let op = attrs.op.to_string();
    if attrs.has("T") && attrs.dtype("T")? != DType::Float {
        return Err(Error::Unimplemented(format!(
            "{op}: T={} is not supported by tfdata (float32)",
            attrs.dtype("T")?
        )));
    }
    Ok(Box::new(move |inputs| {
        let op = op.as_str();
        expect_inputs(op, &inputs, if v2 { 3 } else { 2 })?;
        let (images, boxes_t) = (&inputs[0], &inputs[1]);
        let &[b, h, w, depth] = images.shape() else {
            return Err(invalid(op, "The rank of the images should be 4"));
        };
        let &[bb, n, coords] = boxes_t.shape() else {
            return Err(invalid(op, "The rank of the boxes tensor should be 3"));
        };
        if b != bb {
            return Err(invalid(op, "The batch sizes should be the same"));
        }
        if !matches!(depth, 1 | 3 | 4) {
            return Err(invalid(
                op,
                "Channel depth should be either 1 (GRY), 3 (RGB), or 4 (RGBA)",
            ));
        }
        if coords != 4 {
            return Err(invalid(
                op,
                format!("The size of the third dimension of the box must be 4. Received: {coords}"),
            ));
        }
        let depth = depth as usize;
        let mut colors: Vec<Vec<f32>> = Vec::new();
        if v2 {
            let c = &inputs[2];
            if c.shape().len() != 2 {
                return Err(invalid(
                    op,
                    format!("colors must be a 2-D matrix{}", shape_string(c.shape())),
                ));
            }
            if (c.shape()[1] as usize) < depth {
                return Err(invalid(
                    op,
                    format!(
                        "colors must have equal or more channels than the image provided: {}",
                        shape_string(c.shape())
                    ),
                ));
            }
            let cols = c.shape()[1] as usize;
            let v: Vec<f32> = c.to_vec()?;
            colors = v
                .chunks_exact(cols.max(1))
                .map(|r| r[..depth].to_vec())
                .collect();
        }
        if colors.is_empty() {
            colors = DEFAULT_COLORS
                .iter()
                .map(|c| {
                    let mut c = c[..depth].to_vec();
                    if depth == 1 {
                        c[0] = 1.0;
                    }
                    c
                })
                .collect();
        }
        let mut canvas: Vec<f32> = images.to_vec()?;
        let boxes: Vec<f32> = boxes_t.to_vec()?;
        let (hu, wu) = (h as usize, w as usize);
        for img in 0..b as usize {
            let pixels = &mut canvas[img * hu * wu * depth..(img + 1) * hu * wu * depth];
            for k in 0..n as usize {
                let color = &colors[k % colors.len()];
                let c = &boxes[(img * n as usize + k) * 4..][..4];
                let row0 = to_i64(c[0] * (h - 1) as f32);
                let row1 = to_i64(c[2] * (h - 1) as f32);
                let col0 = to_i64(c[1] * (w - 1) as f32);
                let col1 = to_i64(c[3] * (w - 1) as f32);
                if row0 > row1 || col0 > col1 {
                    continue;
                }
                if row0 >= h || row1 < 0 || col0 >= w || col1 < 0 {
                    continue;
                }
                let (r0c, r1c) = (row0.max(0), row1.min(h - 1));
                let (c0c, c1c) = (col0.max(0), col1.min(w - 1));
                let mut paint = |r: i64, col: i64| {
                    let at = ((r as usize) * wu + col as usize) * depth;
                    pixels[at..at + depth].copy_from_slice(color);
                };
                if row0 >= 0 {
                    (c0c..=c1c).for_each(|j| paint(row0, j));
                }
                if row1 < h {
                    (c0c..=c1c).for_each(|j| paint(row1, j));
                }
                if col0 >= 0 {
                    (r0c..=r1c).for_each(|i| paint(i, col0));
                }
                if col1 < w {
                    (r0c..=r1c).for_each(|i| paint(i, col1));
                }
            }
        }
        Ok(vec![Tensor::from_slice(&canvas, images.shape().to_vec())?])
    }))
}
