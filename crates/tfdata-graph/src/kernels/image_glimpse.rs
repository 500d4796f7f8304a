//! `ExtractGlimpse` and `ExtractGlimpseV2` (`tf.image.extract_glimpse`): a
//! `[height, width]` window of each image, placed by an offset (normalised
//! and/or centred, as the attrs say; V1 and V2 differ in how a
//! non-normalised centred offset is read), the part outside the image
//! filled with noise.
//!
//! Only the "zero" noise is deterministic. TensorFlow's "uniform" and
//! "gaussian" noise come from an unseeded generator, so a glimpse that
//! reaches outside its image with those modes is refused as unimplemented
//! rather than filled with values TensorFlow would not give; glimpses
//! wholly inside the image need no noise and are exact in every mode.

use tfdata_core::{DType, Error, Result, Tensor};

use super::strings::{int_values, shape_string};
use super::{Compute, KernelDef, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "ExtractGlimpse",
        outputs: |_| Ok(vec![("glimpse", 1)]),
        build: |a| build(a, 1),
    },
    KernelDef {
        op: "ExtractGlimpseV2",
        outputs: |_| Ok(vec![("glimpse", 1)]),
        build: |a| build(a, 2),
    },
];

fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

/// C++'s float-to-int64 conversion on x86 (NaN and out-of-range values
/// become `i64::MIN`).
fn to_index(v: f32) -> i64 {
    if (-9.223_372e18..9.223_372e18).contains(&v) {
        v as i64
    } else {
        i64::MIN
    }
}

/// Where a glimpse of `len` starting at `offset` meets an image of
/// `size`: (first image index, first glimpse index, count copied).
fn overlap(offset: i64, len: i64, size: i64) -> (i64, i64, i64) {
    if offset < 0 {
        let visible = len.saturating_add(offset).max(0);
        (0, len - visible, visible.min(size))
    } else if offset.saturating_add(len) >= size {
        (offset, 0, (size - offset).max(0).min(size))
    } else {
        (offset, 0, len.min(size))
    }
}

fn build(attrs: &NodeAttrs, version: u8) -> Result<Compute> {
    let op = attrs.op.to_string();
    let centered = attrs.bool_or("centered", true)?;
    let normalized = attrs.bool_or("normalized", true)?;
    let uniform_noise = attrs.bool_or("uniform_noise", true)?;
    let noise = attrs.string_or("noise", "uniform")?.to_string();
    if uniform_noise && !noise.is_empty() && noise != "uniform" {
        return Err(attrs.error(
            "The uniform_noise and noise could not be specified at the same time".to_string(),
        ));
    }
    if !matches!(noise.as_str(), "" | "uniform" | "gaussian" | "zero") {
        return Err(attrs.error(format!(
            "The noise could only be uniform, gaussian, or zero, got{noise}"
        )));
    }
    let zero_fill = !uniform_noise && noise == "zero";
    Ok(Box::new(move |inputs| {
        let op = op.as_str();
        expect_inputs(op, &inputs, 3)?;
        let (input, size_t, offsets_t) = (&inputs[0], &inputs[1], &inputs[2]);
        let is = input.shape();
        if is.len() != 4 {
            return Err(invalid(
                op,
                format!(
                    "input must be 4-dimensional (batch_size, height, width, depth){}",
                    shape_string(is)
                ),
            ));
        }
        if input.dtype() != DType::Float {
            return Err(invalid(
                op,
                format!("input must be float32, got {}", input.dtype()),
            ));
        }
        let (b, h, w, c) = (is[0], is[1], is[2], is[3]);
        if size_t.shape().len() != 1 || size_t.shape()[0] != 2 {
            return Err(invalid(
                op,
                format!(
                    "input must be a vector of size 2 (height, width){}",
                    shape_string(size_t.shape())
                ),
            ));
        }
        let size = int_values(op, size_t, "size")?;
        let (gh, gw) = (size[0], size[1]);
        for d in [gh, gw] {
            if d < 0 {
                return Err(invalid(
                    op,
                    format!("Expected a non-negative size, got {d}"),
                ));
            }
        }
        let os = offsets_t.shape();
        if os.len() != 2 {
            return Err(invalid(
                op,
                format!("input must be a matrix{}", shape_string(os)),
            ));
        }
        if os[0] != b {
            return Err(invalid(
                op,
                format!("first dimension should be batch{}", shape_string(os)),
            ));
        }
        if os[1] != 2 {
            return Err(invalid(
                op,
                format!(
                    "second dimension should be of size 2 (y,x){}",
                    shape_string(os)
                ),
            ));
        }
        let total = (b as u64 * c as u64).saturating_mul(gh as u64 * gw as u64);
        check_size(op, DType::Float, total)?;
        let image: Vec<f32> = input.to_vec()?;
        let offsets: Vec<f32> = offsets_t.to_vec()?;
        let (bu, hu, wu, cu) = (b as usize, h as usize, w as usize, c as usize);
        let (ghu, gwu) = (gh as usize, gw as usize);
        let mut out = vec![0f32; bu * ghu * gwu * cu];
        for n in 0..bu {
            let (mut y, mut x) = (offsets[2 * n], offsets[2 * n + 1]);
            let (wf, hf) = (w as f32, h as f32);
            if version == 1 || normalized {
                if normalized {
                    x *= wf;
                    y *= hf;
                }
                if centered {
                    x /= 2.0;
                    y /= 2.0;
                    x += wf / 2.0;
                    y += hf / 2.0;
                }
                if version == 1 || centered {
                    x -= gw as f32 / 2.0;
                    y -= gh as f32 / 2.0;
                }
            } else if centered {
                x += wf / 2.0;
                y += hf / 2.0;
            }
            let (src_x, dst_x, count_x) = overlap(to_index(x), gw, w);
            let (src_y, dst_y, count_y) = overlap(to_index(y), gh, h);
            // Noise shows only where the copy leaves part of the glimpse.
            if (count_x < gw || count_y < gh) && !zero_fill {
                return Err(Error::Unimplemented(format!(
                    "{op}: a glimpse reaching outside its image is filled with TensorFlow's \
                     unseeded random noise, which tfdata does not reproduce; use noise=\"zero\""
                )));
            }
            for gy in 0..count_y.max(0) {
                let (iy, oy) = ((src_y + gy) as usize, (dst_y + gy) as usize);
                for gx in 0..count_x.max(0) {
                    let (ix, ox) = ((src_x + gx) as usize, (dst_x + gx) as usize);
                    let from = ((n * hu + iy) * wu + ix) * cu;
                    let to = ((n * ghu + oy) * gwu + ox) * cu;
                    out[to..to + cu].copy_from_slice(&image[from..from + cu]);
                }
            }
        }
        Ok(vec![Tensor::from_slice(&out, vec![b, gh, gw, c])?])
    }))
}
