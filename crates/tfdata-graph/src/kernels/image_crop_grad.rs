//! `CropAndResizeGradImage`: the gradient of `CropAndResize` with respect
//! to the image (what `tf.image.crop_and_resize`'s gradient runs).
//!
//! Each crop's gradient goes back to the image pixels its sample read, with
//! the forward's sampling (`kernels::image`'s `CropAndResize`): a sample
//! outside the image read the extrapolation value and sends nothing back.
//! TensorFlow visits the boxes, then rows, columns and channels in order,
//! adding `(1 - x_lerp) * ((1 - y_lerp) * grad)` and the like in float32
//! into a zeroed image of the output type; the same order here makes the
//! sums bit-identical.

use tfdata_core::{DType, Error, Result, Tensor};

use super::strings::{int_values, shape_string};
use super::{Compute, KernelDef, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "CropAndResizeGradImage",
    outputs: |_| Ok(vec![("output", 1)]),
    build,
}];

const OP: &str = "CropAndResizeGradImage";

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{OP}: {message}"))
}

fn build(attrs: &NodeAttrs) -> Result<Compute> {
    let nearest = match attrs.string_or("method", "bilinear")? {
        "bilinear" => false,
        "nearest" => true,
        other => {
            return Err(invalid(format!(
                "method must be 'bilinear' or 'nearest', got {other}"
            )));
        }
    };
    let out_dtype = attrs.dtype("T")?;
    if !matches!(out_dtype, DType::Float | DType::Double) {
        return Err(Error::Unimplemented(format!(
            "{OP}: T={out_dtype} is not supported by tfdata (float32, float64)"
        )));
    }
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 4)?;
        let (grads, boxes_t, index_t, size_t) = (&inputs[0], &inputs[1], &inputs[2], &inputs[3]);
        let gs = grads.shape();
        if gs.len() != 4 {
            return Err(invalid(format!(
                "grads image must be 4-D{}",
                shape_string(gs)
            )));
        }
        let (ch, cw) = (gs[1], gs[2]);
        if ch <= 0 || cw <= 0 {
            return Err(invalid("grads dimensions must be positive"));
        }
        let n = check_boxes(boxes_t, index_t)?;
        if gs[0] != n as i64 {
            return Err(invalid("boxes and grads have incompatible shape"));
        }
        let size = int_values(OP, size_t, "image_size")?;
        if size_t.shape().len() != 1 {
            return Err(invalid(format!(
                "image_size must be 1-D{}",
                shape_string(size_t.shape())
            )));
        }
        if size.len() != 4 {
            return Err(invalid(format!(
                "image_size must have 4 elements{}",
                shape_string(size_t.shape())
            )));
        }
        let [batch, h, w, depth] = [size[0], size[1], size[2], size[3]];
        if h <= 0 || w <= 0 {
            return Err(invalid("image dimensions must be positive"));
        }
        if gs[3] != depth {
            return Err(invalid("image_size and grads are incompatible"));
        }
        if batch < 0 {
            return Err(invalid("batch size must be non-negative"));
        }
        let total = [batch, h, w, depth]
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
            .ok_or_else(|| invalid("image_size is too large"))?;
        check_size(OP, out_dtype, total)?;
        let index = int_values(OP, index_t, "box_index")?;
        if index.iter().any(|b| !(0..batch).contains(b)) {
            // TensorFlow's code (see CropAndResize in image.rs).
            return Err(crate::queue::out_of_range(format!(
                "{OP}: box_index has values outside [0, batch_size)"
            )));
        }
        let boxes: Vec<f32> = boxes_t.to_vec()?;
        let g: Vec<f32> = grads.to_vec()?;
        let (h, w, c) = (h as usize, w as usize, depth as usize);
        let (ch, cw) = (ch as usize, cw as usize);
        let shape = size.clone();
        let mut out32 = Vec::new();
        let mut out64 = Vec::new();
        if out_dtype == DType::Float {
            out32 = vec![0f32; total as usize];
        } else {
            out64 = vec![0f64; total as usize];
        }
        let mut add = |at: usize, v: f32| {
            if out_dtype == DType::Float {
                out32[at] += v;
            } else {
                out64[at] += f64::from(v);
            }
        };
        let (hf, wf) = ((h - 1) as f32, (w - 1) as f32);
        for (bi, (bx, &img)) in boxes.chunks_exact(4).zip(&index).enumerate() {
            let base = img as usize * h * w * c;
            let (y1, x1, y2, x2) = (bx[0], bx[1], bx[2], bx[3]);
            let (rows, cols) = (
                super::image::CropAxis::new(y1, y2, hf, ch),
                super::image::CropAxis::new(x1, x2, wf, cw),
            );
            for y in 0..ch {
                let iy = rows.at(y);
                if !(0.0..=hf).contains(&iy) {
                    continue;
                }
                for x in 0..cw {
                    let ix = cols.at(x);
                    if !(0.0..=wf).contains(&ix) {
                        continue;
                    }
                    let at =
                        |yy: f32, xx: f32, k: usize| base + (yy as usize * w + xx as usize) * c + k;
                    let gat = ((bi * ch + y) * cw + x) * c;
                    for k in 0..c {
                        let v = g[gat + k];
                        if nearest {
                            add(at(iy.round(), ix.round(), k), v);
                            continue;
                        }
                        let (ty, by, yl) = (iy.floor(), iy.ceil(), iy - iy.floor());
                        let (lx, rx, xl) = (ix.floor(), ix.ceil(), ix - ix.floor());
                        let dtop = (1.0 - yl) * v;
                        add(at(ty, lx, k), (1.0 - xl) * dtop);
                        add(at(ty, rx, k), xl * dtop);
                        let dbottom = yl * v;
                        add(at(by, lx, k), (1.0 - xl) * dbottom);
                        add(at(by, rx, k), xl * dbottom);
                    }
                }
            }
        }
        let out = if out_dtype == DType::Float {
            Tensor::from_slice(&out32, shape)?
        } else {
            Tensor::from_slice(&out64, shape)?
        };
        Ok(vec![out])
    }))
}

/// `boxes` `[n, 4]` float32 and `box_index` `[n]`; returns n.
pub(super) fn check_boxes(boxes: &Tensor, index: &Tensor) -> Result<usize> {
    let bs = boxes.shape();
    if bs.len() != 2 {
        return Err(invalid(format!("boxes must be 2-D{}", shape_string(bs))));
    }
    if bs[1] != 4 {
        return Err(invalid("boxes must have 4 columns"));
    }
    if index.shape().len() != 1 {
        return Err(invalid(format!(
            "box_index must be 1-D{}",
            shape_string(index.shape())
        )));
    }
    if index.shape()[0] != bs[0] {
        return Err(invalid("box_index has incompatible shape"));
    }
    Ok(bs[0] as usize)
}
