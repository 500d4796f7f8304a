//! `CropAndResizeGradBoxes`: the gradient of `CropAndResize` (bilinear)
//! with respect to the boxes.
//!
//! Each crop sample read the image bilinearly at a point that moves with
//! the box corners; its gradient is the image's slope there (float32, from
//! the four neighbours) times the incoming gradient, times how far the
//! sample moves per unit of each corner. TensorFlow sums these over boxes,
//! rows, columns and channels in order into float32; the same order here
//! gives the same sums. A one-row or one-column crop samples the box centre,
//! where TensorFlow's `0.5 * ...` is double arithmetic rounded back to
//! float32 on each addition, replayed as such.

use tfdata_core::{DType, Error, Result, Tensor};

use super::image::floats;
use super::strings::{int_values, shape_string};
use super::{Compute, KernelDef, expect_inputs};
use crate::attrs::NodeAttrs;

const OP: &str = "CropAndResizeGradBoxes";

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: OP,
    outputs: |_| Ok(vec![("output", 1)]),
    build,
}];

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{OP}: {message}"))
}

fn build(attrs: &NodeAttrs) -> Result<Compute> {
    let method = attrs.string_or("method", "bilinear")?;
    if method != "bilinear" {
        return Err(invalid(format!("method must be 'bilinear'{method}")));
    }
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 4)?;
        let (grads_t, image_t, boxes_t, index_t) = (&inputs[0], &inputs[1], &inputs[2], &inputs[3]);
        let gs = grads_t.shape();
        if gs.len() != 4 {
            return Err(invalid(format!(
                "grads image must be 4-D{}",
                shape_string(gs)
            )));
        }
        let (ch, cw, depth) = (gs[1], gs[2], gs[3]);
        if ch <= 0 || cw <= 0 {
            return Err(invalid("grads dimensions must be positive"));
        }
        let is = image_t.shape();
        if is.len() != 4 {
            return Err(invalid(format!(
                "input image must be 4-D{}",
                shape_string(is)
            )));
        }
        let (batch, h, w) = (is[0], is[1], is[2]);
        if h <= 0 || w <= 0 {
            return Err(invalid("image dimensions must be positive"));
        }
        if is[3] != depth {
            return Err(invalid("image, grads depth differ"));
        }
        let n = check_boxes(boxes_t, index_t)?;
        if gs[0] != n as i64 {
            return Err(invalid("boxes and grads have incompatible shape"));
        }
        if grads_t.dtype() != DType::Float || boxes_t.dtype() != DType::Float {
            return Err(invalid("grads and boxes must be float32"));
        }
        let index = int_values(OP, index_t, "box_index")?;
        if index.iter().any(|b| !(0..batch).contains(b)) {
            // TensorFlow's code (see CropAndResize in image.rs).
            return Err(crate::queue::out_of_range(format!(
                "{OP}: box_index has values outside [0, batch_size)"
            )));
        }
        let image = floats(OP, image_t)?;
        let grads: Vec<f32> = grads_t.to_vec()?;
        let boxes: Vec<f32> = boxes_t.to_vec()?;
        let (h, w, c) = (h as usize, w as usize, depth as usize);
        let (ch, cw) = (ch as usize, cw as usize);
        let (hf, wf) = ((h - 1) as f32, (w - 1) as f32);
        let height_ratio = if ch > 1 { hf / (ch - 1) as f32 } else { 0.0 };
        let width_ratio = if cw > 1 { wf / (cw - 1) as f32 } else { 0.0 };
        let mut out = vec![0f32; n * 4];
        for (bi, (bx, &img)) in boxes.chunks_exact(4).zip(&index).enumerate() {
            let (y1, x1, y2, x2) = (bx[0], bx[1], bx[2], bx[3]);
            let base = img as usize * h * w * c;
            let hs = if ch > 1 {
                (y2 - y1) * height_ratio
            } else {
                0.0
            };
            let ws = if cw > 1 { (x2 - x1) * width_ratio } else { 0.0 };
            let g = &mut out[bi * 4..bi * 4 + 4];
            for y in 0..ch {
                let iy = if ch > 1 {
                    y1 * hf + y as f32 * hs
                } else {
                    (0.5 * f64::from(y1 + y2) * (h - 1) as f64) as f32
                };
                // Written so NaN is skipped too (TensorFlow would index
                // with an undefined integer).
                if !(0.0..=hf).contains(&iy) {
                    continue;
                }
                let (top, bottom) = (iy.floor() as usize, iy.ceil() as usize);
                let yl = iy - top as f32;
                for x in 0..cw {
                    let ix = if cw > 1 {
                        x1 * wf + x as f32 * ws
                    } else {
                        (0.5 * f64::from(x1 + x2) * (w - 1) as f64) as f32
                    };
                    if !(0.0..=wf).contains(&ix) {
                        continue;
                    }
                    let (left, right) = (ix.floor() as usize, ix.ceil() as usize);
                    let xl = ix - left as f32;
                    let px = |yy: usize, xx: usize, k: usize| image[base + (yy * w + xx) * c + k];
                    let gat = ((bi * ch + y) * cw + x) * c;
                    for k in 0..c {
                        let (tl, tr) = (px(top, left, k), px(top, right, k));
                        let (bl, br) = (px(bottom, left, k), px(bottom, right, k));
                        let top_grad = grads[gat + k];
                        let gy = ((1.0 - xl) * (bl - tl) + xl * (br - tr)) * top_grad;
                        let gx = ((1.0 - yl) * (tr - tl) + yl * (br - bl)) * top_grad;
                        if ch > 1 {
                            g[0] += gy * (hf - y as f32 * height_ratio);
                            g[2] += gy * (y as f32 * height_ratio);
                        } else {
                            let d = f64::from(gy) * 0.5 * (h - 1) as f64;
                            g[0] = (f64::from(g[0]) + d) as f32;
                            g[2] = (f64::from(g[2]) + d) as f32;
                        }
                        if cw > 1 {
                            g[1] += gx * (wf - x as f32 * width_ratio);
                            g[3] += gx * (x as f32 * width_ratio);
                        } else {
                            let d = f64::from(gx) * 0.5 * (w - 1) as f64;
                            g[1] = (f64::from(g[1]) + d) as f32;
                            g[3] = (f64::from(g[3]) + d) as f32;
                        }
                    }
                }
            }
        }
        Ok(vec![Tensor::from_slice(&out, vec![n as i64, 4])?])
    }))
}

/// `boxes` `[n, 4]` and `box_index` `[n]`, as the image gradient checks
/// them, except that both empty passes; returns n.
fn check_boxes(boxes: &Tensor, index: &Tensor) -> Result<usize> {
    if boxes.num_elements() == 0 && index.num_elements() == 0 {
        return Ok(0);
    }
    super::image_crop_grad::check_boxes(boxes, index)
}
