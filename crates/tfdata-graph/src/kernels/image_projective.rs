//! `ImageProjectiveTransformV2`/`V3` (what `tf.raw_ops` and Keras's
//! `RandomRotation`/`RandomTranslation`/`RandomZoom` run): each output pixel
//! maps through a projective transform `[a0 a1 a2 b0 b1 b2 c0 c1]` to an
//! input point `((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k)`, `k = c0 x +
//! c1 y + 1`, which is brought inside the image by the fill mode (REFLECT,
//! WRAP, NEAREST; CONSTANT leaves it) and sampled NEAREST or BILINEAR,
//! points outside the image reading `fill_value` (zero in V2).
//!
//! The arithmetic is TensorFlow's, in float32 with its integer conversions
//! (an index from a NaN coordinate is out of range, as on x86), so the
//! pixels are bit-identical. Nearest sampling copies the input value.

use tfdata_core::{DType, Error, Result, Tensor};

use super::image::floats;
use super::strings::{int_values, shape_string};
use super::{Compute, KernelDef, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "ImageProjectiveTransformV2",
        outputs: |_| Ok(vec![("transformed_images", 1)]),
        build: |a| build(a, false),
    },
    KernelDef {
        op: "ImageProjectiveTransformV3",
        outputs: |_| Ok(vec![("transformed_images", 1)]),
        build: |a| build(a, true),
    },
];

#[derive(Clone, Copy, PartialEq)]
enum Fill {
    Reflect,
    Wrap,
    Constant,
    Nearest,
}

/// C++'s `std::min`/`std::max` (NaN stays), as Eigen's clamp uses them.
fn cmin(a: f32, b: f32) -> f32 {
    if b < a { b } else { a }
}
fn cmax(a: f32, b: f32) -> f32 {
    if a < b { b } else { a }
}

/// C++'s float-to-int64 conversion on x86: NaN and out-of-range values
/// become `i64::MIN` (always outside the image).
fn to_index(v: f32) -> i64 {
    if !(-9.223_372e18..9.223_372e18).contains(&v) {
        i64::MIN
    } else {
        v as i64
    }
}

/// TensorFlow's `MapCoordinate`: a coordinate brought into `[0, len - 1]`.
fn map_coordinate(mode: Fill, c: f32, len: i64) -> f32 {
    let last = (len - 1) as f32;
    let clamp = |v: f32| cmin(cmax(v, 0.0), last);
    match mode {
        Fill::Constant => c,
        Fill::Nearest => clamp(c),
        Fill::Reflect => {
            let mut v = c;
            if v < 0.0 {
                if len <= 1 {
                    v = 0.0;
                } else {
                    let sz2 = 2 * len;
                    if v < sz2 as f32 {
                        v += (sz2.wrapping_mul(to_index(-v / sz2 as f32))) as f32;
                    }
                    v = if v < -len as f32 {
                        v + sz2 as f32
                    } else {
                        -v - 1.0
                    };
                }
            } else if v > last {
                if len <= 1 {
                    v = 0.0;
                } else {
                    let sz2 = 2 * len;
                    v -= (sz2.wrapping_mul(to_index(v / sz2 as f32))) as f32;
                    if v >= len as f32 {
                        v = sz2 as f32 - v - 1.0;
                    }
                }
            }
            clamp(v)
        }
        Fill::Wrap => {
            let mut v = c;
            if v < 0.0 {
                if len <= 1 {
                    v = 0.0;
                } else {
                    let sz = len - 1;
                    v += (len.wrapping_mul(to_index(-v / sz as f32).wrapping_add(1))) as f32;
                }
            } else if v > last {
                if len <= 1 {
                    v = 0.0;
                } else {
                    let sz = len - 1;
                    v -= (len.wrapping_mul(to_index(v / sz as f32))) as f32;
                }
            }
            clamp(v)
        }
    }
}

fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

fn build(attrs: &NodeAttrs, v3: bool) -> Result<Compute> {
    let op = attrs.op.to_string();
    let dtype = attrs.dtype("dtype")?;
    if !matches!(
        dtype,
        DType::Float | DType::Double | DType::UInt8 | DType::Int32
    ) {
        return Err(Error::Unimplemented(format!(
            "{op}: dtype={dtype} is not supported by tfdata (uint8, int32, float32, float64)"
        )));
    }
    let bilinear = match attrs.string_or("interpolation", "")? {
        "NEAREST" => false,
        "BILINEAR" => true,
        other => {
            return Err(attrs.error(format!(
                "Invalid interpolation {other}. Supported types: NEAREST, BILINEAR"
            )));
        }
    };
    let mode = match attrs.string_or("fill_mode", "CONSTANT")? {
        "REFLECT" => Fill::Reflect,
        "WRAP" => Fill::Wrap,
        "CONSTANT" => Fill::Constant,
        "NEAREST" => Fill::Nearest,
        other => {
            return Err(attrs.error(format!(
                "Invalid mode {other}. Supported types: REFLECT, WRAP, CONSTANT, NEAREST"
            )));
        }
    };
    Ok(Box::new(move |inputs| {
        let op = op.as_str();
        expect_inputs(op, &inputs, if v3 { 4 } else { 3 })?;
        let (images_t, transforms_t, shape_t) = (&inputs[0], &inputs[1], &inputs[2]);
        let is = images_t.shape();
        if is.len() != 4 {
            return Err(invalid(op, "Input images must have rank 4"));
        }
        let ts = transforms_t.shape();
        if ts.len() != 2 || (ts[0] != is[0] && ts[0] != 1) || ts[1] != 8 {
            return Err(invalid(
                op,
                "Input transform should be num_images x 8 or 1 x 8",
            ));
        }
        if shape_t.shape().len() != 1 {
            return Err(invalid(
                op,
                format!(
                    "output shape must be 1-dimensional{}",
                    shape_string(shape_t.shape())
                ),
            ));
        }
        if shape_t.shape()[0] != 2 {
            return Err(invalid(
                op,
                format!(
                    "output shape must have two elements{}",
                    shape_string(shape_t.shape())
                ),
            ));
        }
        let size = int_values(op, shape_t, "output_shape")?;
        let (oh, ow) = (size[0], size[1]);
        if oh <= 0 || ow <= 0 {
            return Err(invalid(op, "output dimensions must be positive"));
        }
        let fill = if v3 {
            let f = &inputs[3];
            if !f.shape().is_empty() {
                return Err(invalid(
                    op,
                    format!("fill_value must be a scalar{}", shape_string(f.shape())),
                ));
            }
            f.to_scalar::<f32>()?
        } else {
            0.0
        };
        let (b, h, w, c) = (is[0] as usize, is[1], is[2], is[3] as usize);
        let (oh, ow) = (oh as usize, ow as usize);
        let total = (b as u64 * c as u64).saturating_mul(oh as u64 * ow as u64);
        check_size(op, dtype, total)?;
        // Values as T would hold them: the fill value converted to T first.
        let as_t = |v: f64| -> f64 {
            match dtype {
                DType::Float => f64::from(v as f32),
                DType::UInt8 => f64::from(v as u8),
                DType::Int32 => f64::from(v as i32),
                _ => v,
            }
        };
        let fill_t = as_t(f64::from(fill));
        let values: Vec<f64> = if dtype == DType::Double {
            images_t.to_vec()?
        } else {
            floats(op, images_t)?.into_iter().map(f64::from).collect()
        };
        let transforms: Vec<f32> = transforms_t.to_vec()?;
        let one_transform = ts[0] == 1;
        let mut out = vec![0f64; b * oh * ow * c];
        let (hu, wu) = (h as usize, w as usize);
        for n in 0..b {
            let t = if one_transform {
                &transforms[..8]
            } else {
                &transforms[n * 8..n * 8 + 8]
            };
            let read = |y: i64, x: i64, k: usize| -> f64 {
                if (0..h).contains(&y) && (0..w).contains(&x) {
                    values[((n * hu + y as usize) * wu + x as usize) * c + k]
                } else {
                    fill_t
                }
            };
            for oy in 0..oh {
                for ox in 0..ow {
                    let (xf, yf) = (ox as f32, oy as f32);
                    let px =
                        &mut out[((n * oh + oy) * ow + ox) * c..((n * oh + oy) * ow + ox + 1) * c];
                    let projection = t[6] * xf + t[7] * yf + 1.0;
                    if projection == 0.0 {
                        px.fill(fill_t);
                        continue;
                    }
                    let in_x = (t[0] * xf + t[1] * yf + t[2]) / projection;
                    let in_y = (t[3] * xf + t[4] * yf + t[5]) / projection;
                    let x = map_coordinate(mode, in_x, w);
                    let y = map_coordinate(mode, in_y, h);
                    for (k, slot) in px.iter_mut().enumerate() {
                        *slot = if !bilinear {
                            read(to_index(y.round()), to_index(x.round()), k)
                        } else {
                            let (y0, x0) = (y.floor(), x.floor());
                            let (y1, x1) = (y0 + 1.0, x0 + 1.0);
                            let r = |yy: f32, xx: f32| read(to_index(yy), to_index(xx), k) as f32;
                            let top = (x1 - x) * r(y0, x0) + (x - x0) * r(y0, x1);
                            let bottom = (x1 - x) * r(y1, x0) + (x - x0) * r(y1, x1);
                            as_t(f64::from((y1 - y) * top + (y - y0) * bottom))
                        };
                    }
                }
            }
        }
        let shape = vec![b as i64, oh as i64, ow as i64, c as i64];
        let tensor = match dtype {
            DType::Float => {
                Tensor::from_slice(&out.iter().map(|&v| v as f32).collect::<Vec<_>>(), shape)?
            }
            DType::UInt8 => {
                Tensor::from_slice(&out.iter().map(|&v| v as u8).collect::<Vec<_>>(), shape)?
            }
            DType::Int32 => {
                Tensor::from_slice(&out.iter().map(|&v| v as i32).collect::<Vec<_>>(), shape)?
            }
            _ => Tensor::from_slice(&out, shape)?,
        };
        Ok(vec![tensor])
    }))
}
