//! The gradients of the resizes: `ResizeBilinearGrad`,
//! `ResizeNearestNeighborGrad` and `ResizeBicubicGrad` (what
//! `tf.image.resize`'s gradient runs).
//!
//! Each spreads every incoming gradient value back onto the source pixels
//! the forward resize read it from, with the forward's weights (the
//! sampling is `kernels::image`'s). TensorFlow accumulates into a zeroed
//! output visiting the gradient in row-major order, one product
//! `grad * weight_y * weight_x` per source pixel, in float32, then adds it
//! in the output's type; the same order here makes the sums bit-identical.
//! The batch and channel counts are the gradient's, only the height and
//! width come from the original image (or the `size` input).

use tfdata_core::tensor::NativeType;
use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_dataset::kernels::interpolation_weights_with;

use super::image::{cubic_table, cubic_weights, nearest_indices, resize_scale};
use super::strings::shape_string;
use super::{Compute, KernelDef, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "ResizeBilinearGrad",
        outputs: |_| Ok(vec![("output", 1)]),
        build: |a| build(a, Kind::Bilinear),
    },
    KernelDef {
        op: "ResizeBicubicGrad",
        outputs: |_| Ok(vec![("output", 1)]),
        build: |a| build(a, Kind::Bicubic),
    },
    KernelDef {
        op: "ResizeNearestNeighborGrad",
        outputs: |_| Ok(vec![("output", 1)]),
        build: |a| build(a, Kind::Nearest),
    },
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bilinear,
    Bicubic,
    Nearest,
}

fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

/// An output value: the weighted resizes add `T(grad * weight_y *
/// weight_x)` (a float32 product) in `T`; the nearest-neighbour gradient
/// adds its own `T` values (integers wrap, as C++ does for the narrow ones
/// and in practice for the wide).
trait Acc: NativeType + Default {
    fn plus(self, v: Self) -> Self;
    fn widen(v: f32) -> Self;
}

impl Acc for f32 {
    fn plus(self, v: f32) -> f32 {
        self + v
    }
    fn widen(v: f32) -> f32 {
        v
    }
}

impl Acc for f64 {
    fn plus(self, v: f64) -> f64 {
        self + v
    }
    fn widen(v: f32) -> f64 {
        f64::from(v)
    }
}

macro_rules! int_acc {
    ($($t:ty),*) => {$(
        impl Acc for $t {
            fn plus(self, v: $t) -> $t {
                self.wrapping_add(v)
            }
            fn widen(v: f32) -> $t {
                v as $t
            }
        }
    )*};
}
int_acc!(i8, i16, i32, i64, u8, u16);

fn build(attrs: &NodeAttrs, kind: Kind) -> Result<Compute> {
    let op = attrs.op.to_string();
    let align = attrs.bool_or("align_corners", false)?;
    let half = attrs.bool_or("half_pixel_centers", false)?;
    if align && half {
        return Err(invalid(
            &op,
            "If half_pixel_centers is True, align_corners must be False.",
        ));
    }
    Ok(Box::new(move |inputs| {
        let op = op.as_str();
        expect_inputs(op, &inputs, 2)?;
        let grads = &inputs[0];
        let gs = grads.shape();
        if gs.len() != 4 {
            let what = if kind == Kind::Nearest {
                "input"
            } else {
                "input_grad"
            };
            return Err(invalid(
                op,
                format!("{what} must be 4-dimensional{}", shape_string(gs)),
            ));
        }
        let (oh, ow, out_dtype) = if kind == Kind::Nearest {
            let size = super::strings::int_values(op, &inputs[1], "size")?;
            let [h, w] = size[..] else {
                return Err(invalid(
                    op,
                    format!(
                        "shape_t must have two elements{}",
                        shape_string(inputs[1].shape())
                    ),
                ));
            };
            if h <= 0 || w <= 0 {
                return Err(invalid(op, "shape_t's elements must be positive"));
            }
            (h, w, grads.dtype())
        } else {
            let original = &inputs[1];
            let os = original.shape();
            if os.len() != 4 {
                return Err(invalid(
                    op,
                    format!("original_image must be 4-dimensional{}", shape_string(os)),
                ));
            }
            if gs[1] <= 0 || gs[2] <= 0 {
                return Err(invalid(op, "resized dimensions must be positive"));
            }
            if os[1] <= 0 || os[2] <= 0 {
                return Err(invalid(op, "original dimensions must be positive"));
            }
            (os[1], os[2], original.dtype())
        };
        if oh > i64::from(i32::MAX) || ow > i64::from(i32::MAX) {
            return Err(invalid(op, "original sizes must be less than 2^31"));
        }
        let [b, gh, gw, c] = [gs[0], gs[1], gs[2], gs[3]].map(|d| d as usize);
        let (oh, ow) = (oh as usize, ow as usize);
        check_size(op, out_dtype, (b * c) as u64 * oh as u64 * ow as u64)?;
        let shape = vec![b as i64, oh as i64, ow as i64, c as i64];
        if kind == Kind::Nearest && (oh >= 1 << 24 || ow >= 1 << 24) {
            return Err(invalid(
                op,
                "nearest neighbor requires max height & width of 2^24",
            ));
        }
        // The weighted gradients scale like the forward resize, except that
        // TensorFlow's gradient keeps the unaligned scale for a source side
        // of one pixel (observed: its sums are the unaligned ones there).
        let scale = |orig: usize, resized: usize| match kind {
            Kind::Nearest => resize_scale(orig, resized, align),
            _ => resize_scale(orig, resized, align && orig > 1),
        };
        let sy = scale(oh, gh);
        let sx = scale(ow, gw);
        let (rows, cols) = match kind {
            Kind::Bilinear => (
                bilinear_taps(oh, gh, sy, half),
                bilinear_taps(ow, gw, sx, half),
            ),
            Kind::Bicubic => (cubic_taps(oh, gh, sy, half), cubic_taps(ow, gw, sx, half)),
            Kind::Nearest => (
                nearest_taps(oh, gh, sy, align, half),
                nearest_taps(ow, gw, sx, align, half),
            ),
        };
        let dims = Dims {
            b,
            gh,
            gw,
            c,
            oh,
            ow,
        };
        let out = match (kind, out_dtype) {
            (Kind::Nearest, DType::Float) => spread_same::<f32>(grads, &dims, &rows, &cols, shape)?,
            (Kind::Nearest, DType::Double) => {
                spread_same::<f64>(grads, &dims, &rows, &cols, shape)?
            }
            (Kind::Nearest, DType::Int32) => spread_same::<i32>(grads, &dims, &rows, &cols, shape)?,
            (Kind::Nearest, DType::Int64) => spread_same::<i64>(grads, &dims, &rows, &cols, shape)?,
            (Kind::Nearest, DType::Int16) => spread_same::<i16>(grads, &dims, &rows, &cols, shape)?,
            (Kind::Nearest, DType::Int8) => spread_same::<i8>(grads, &dims, &rows, &cols, shape)?,
            (Kind::Nearest, DType::UInt8) => spread_same::<u8>(grads, &dims, &rows, &cols, shape)?,
            (Kind::Nearest, DType::UInt16) => {
                spread_same::<u16>(grads, &dims, &rows, &cols, shape)?
            }
            (Kind::Nearest, _) => return Err(unsupported(op, out_dtype)),
            (_, DType::Float) => spread_weighted::<f32>(grads, &dims, &rows, &cols, shape)?,
            // Bicubic widens the gradient value first and multiplies in
            // float64; bilinear multiplies in float32 and widens the product.
            (Kind::Bicubic, DType::Double) => spread_wide(grads, &dims, &rows, &cols, shape)?,
            (_, DType::Double) => spread_weighted::<f64>(grads, &dims, &rows, &cols, shape)?,
            (_, d) => return Err(unsupported(op, d)),
        };
        Ok(vec![out])
    }))
}

struct Dims {
    b: usize,
    gh: usize,
    gw: usize,
    c: usize,
    oh: usize,
    ow: usize,
}

/// Per gradient row (or column), the source indices and weights.
type Axis = Vec<Vec<(usize, f32)>>;

fn bilinear_taps(orig: usize, resized: usize, scale: f32, half: bool) -> Axis {
    interpolation_weights_with(orig, resized, scale, half)
        .into_iter()
        .map(|w| vec![(w.lower, 1.0 - w.lerp), (w.upper, w.lerp)])
        .collect()
}

fn cubic_taps(orig: usize, resized: usize, scale: f32, half: bool) -> Axis {
    let table = cubic_table(half);
    (0..resized)
        .map(|i| {
            let (idx, w) = cubic_weights(&table, scale, i, orig, half);
            idx.into_iter().zip(w).collect()
        })
        .collect()
}

fn nearest_taps(orig: usize, resized: usize, scale: f32, align: bool, half: bool) -> Axis {
    nearest_indices(orig, resized, scale, align, half)
        .into_iter()
        .map(|i| vec![(i, 1.0)])
        .collect()
}

fn unsupported(op: &str, d: DType) -> Error {
    Error::Unimplemented(format!("{op}: T={d} is not supported by tfdata"))
}

/// Visits every gradient value and the source pixels it came from, in
/// TensorFlow's order: `f(gradient index, output index, weight_y, weight_x)`.
fn visit(d: &Dims, rows: &Axis, cols: &Axis, mut f: impl FnMut(usize, usize, f32, f32)) {
    for n in 0..d.b {
        for (y, row) in rows.iter().enumerate().take(d.gh) {
            for (x, col) in cols.iter().enumerate().take(d.gw) {
                let at = ((n * d.gh + y) * d.gw + x) * d.c;
                for k in 0..d.c {
                    for &(sy, wy) in row {
                        for &(sx, wx) in col {
                            f(at + k, ((n * d.oh + sy) * d.ow + sx) * d.c + k, wy, wx);
                        }
                    }
                }
            }
        }
    }
}

/// Bilinear and bicubic: a float32 gradient, a float32 product per source
/// pixel, added in the output's type.
fn spread_weighted<T: Acc>(
    grads: &Tensor,
    d: &Dims,
    rows: &Axis,
    cols: &Axis,
    shape: Vec<i64>,
) -> Result<Tensor> {
    let g: Vec<f32> = grads.to_vec()?;
    let mut out = vec![T::default(); d.b * d.oh * d.ow * d.c];
    visit(d, rows, cols, |i, o, wy, wx| {
        out[o] = out[o].plus(T::widen(g[i] * wy * wx));
    });
    Tensor::from_slice(&out, shape)
}

/// Bicubic into float64: `double(grad) * weight_y * weight_x` in float64.
fn spread_wide(
    grads: &Tensor,
    d: &Dims,
    rows: &Axis,
    cols: &Axis,
    shape: Vec<i64>,
) -> Result<Tensor> {
    let g: Vec<f32> = grads.to_vec()?;
    let mut out = vec![0f64; d.b * d.oh * d.ow * d.c];
    visit(d, rows, cols, |i, o, wy, wx| {
        out[o] += f64::from(g[i]) * f64::from(wy) * f64::from(wx);
    });
    Tensor::from_slice(&out, shape)
}

/// Nearest neighbour: the gradient's own values summed.
fn spread_same<T: Acc>(
    grads: &Tensor,
    d: &Dims,
    rows: &Axis,
    cols: &Axis,
    shape: Vec<i64>,
) -> Result<Tensor> {
    let g: Vec<T> = grads.to_vec()?;
    let mut out = vec![T::default(); d.b * d.oh * d.ow * d.c];
    visit(d, rows, cols, |i, o, _, _| out[o] = out[o].plus(g[i]));
    Tensor::from_slice(&out, shape)
}
