//! Image kernels: decoding (`DecodeJpeg`, `DecodePng`, `DecodeImage`,
//! `DecodeAndCropJpeg`), resizing (`ResizeBilinear`,
//! `ResizeNearestNeighbor`, `ResizeBicubic`), `CropAndResize` and
//! `AdjustContrastv2`.
//!
//! `DecodeImage` of GIF, WebP and JPEG XL contents is
//! [`super::image_formats`]'s (`expand_animations` honoured). Other
//! decoding is the engine's ([`tfdata_dataset::kernels`]): PNG and JPEG
//! are bit-identical to TensorFlow (JPEG: both libjpeg-turbo; a
//! `DecodeAndCropJpeg` window's last column may differ by a level or two,
//! where TensorFlow's cropped decode upsamples chroma as at an image edge).
//! Of `DecodeJpeg`'s attributes, `channels` and `dct_method` are honoured;
//! `ratio` other than 1 and `dtype=uint16` for PNG are refused
//! (`Unimplemented`); `fancy_upscaling=False` and `acceptable_fraction` are
//! ignored (fancy upsampling always); `try_recover_truncated=True` is
//! ignored too, so a truncated file is still an error.
//!
//! Resizing replays TensorFlow's float32 arithmetic for every combination
//! of `align_corners` and `half_pixel_centers`, so bilinear and nearest are
//! bit-identical; bicubic uses TensorFlow's coefficient table and
//! summation order and agrees to a few float32 ulps (relative 1e-6).

use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_dataset::kernels::{self as engine, ResizeMethod, interpolation_weights_with};

use super::strings::shape_string;
use super::{Compute, KernelDef, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "DecodeJpeg",
        outputs: image_output,
        build: |a| decode(a, "DecodeJpeg"),
    },
    KernelDef {
        op: "DecodePng",
        outputs: image_output,
        build: |a| decode(a, "DecodePng"),
    },
    KernelDef {
        op: "DecodeImage",
        outputs: image_output,
        build: |a| decode(a, "DecodeImage"),
    },
    KernelDef {
        op: "DecodeAndCropJpeg",
        outputs: image_output,
        build: |a| decode(a, "DecodeAndCropJpeg"),
    },
    KernelDef {
        op: "ResizeBilinear",
        outputs: resized_output,
        build: |a| resize(a, Method::Bilinear),
    },
    KernelDef {
        op: "ResizeNearestNeighbor",
        outputs: resized_output,
        build: |a| resize(a, Method::Nearest),
    },
    KernelDef {
        op: "ResizeBicubic",
        outputs: resized_output,
        build: |a| resize(a, Method::Bicubic),
    },
    KernelDef {
        op: "CropAndResize",
        outputs: |_| Ok(vec![("crops", 1)]),
        build: crop_and_resize,
    },
    KernelDef {
        op: "AdjustContrastv2",
        outputs: super::one_output,
        build: |_| Ok(Box::new(adjust_contrast)),
    },
];

fn image_output(_: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("image", 1)])
}

fn resized_output(_: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("resized_images", 1)])
}

/// One axis of a `CropAndResize` box as TensorFlow samples it: output row (or
/// column) `i` of `n` reads source coordinate `at(i)`, for box edges `a`,
/// `b` in normalized coordinates and `span` = the image's size − 1 on that
/// axis (the forward op and its image gradient sample the same points).
#[derive(Clone, Copy)]
pub(super) struct CropAxis {
    a: f32,
    b: f32,
    span: f32,
    n: usize,
    step: f32,
}

impl CropAxis {
    pub(super) fn new(a: f32, b: f32, span: f32, n: usize) -> Self {
        let step = if n > 1 {
            (b - a) * span / (n - 1) as f32
        } else {
            0.0
        };
        CropAxis {
            a,
            b,
            span,
            n,
            step,
        }
    }

    /// The source coordinate of output index `i` (the box's centre when the
    /// output has one row).
    pub(super) fn at(&self, i: usize) -> f32 {
        if self.n > 1 {
            self.a * self.span + i as f32 * self.step
        } else {
            0.5 * (self.a + self.b) * self.span
        }
    }
}

fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

/// Renames an engine error (`decode_jpeg: ...`) after the op.
fn renamed(op: &str, e: Error) -> Error {
    let strip = |m: String| match m.split_once(": ") {
        Some((_, rest)) => format!("{op}: {rest}"),
        None => format!("{op}: {m}"),
    };
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(strip(m)),
        Error::Unimplemented(m) => Error::Unimplemented(strip(m)),
        other => other,
    }
}

fn decode(attrs: &NodeAttrs, op: &'static str) -> Result<Compute> {
    let channels = attrs.int_or("channels", 0)?;
    if !matches!(channels, 0 | 1 | 3 | 4) {
        return Err(invalid(
            op,
            format!("channels must be 0, 1, 3 or 4, got {channels}"),
        ));
    }
    let channels = channels as u8;
    let ratio = attrs.int_or("ratio", 1)?;
    if ratio != 1 {
        return Err(Error::Unimplemented(format!(
            "{op}: ratio={ratio} (scaled JPEG decoding) is not supported by tfdata; decode at \
             full size and resize"
        )));
    }
    // DecodeJpeg and DecodeAndCropJpeg have `dct_method`; TensorFlow
    // refuses values other than "", INTEGER_FAST and INTEGER_ACCURATE.
    let dct = if attrs.has("dct_method") {
        engine::DctMethod::from_tf(attrs.string_or("dct_method", "")?)
            .map_err(|e| renamed(op, e))?
    } else {
        engine::DctMethod::default()
    };
    let dtype = if attrs.has("dtype") {
        attrs.dtype("dtype")?
    } else {
        DType::UInt8
    };
    if !matches!(dtype, DType::UInt8 | DType::Float)
        || (dtype == DType::Float && op != "DecodeImage")
    {
        return Err(Error::Unimplemented(format!(
            "{op}: dtype {dtype} is not supported by tfdata (uint8, and float32 for DecodeImage)"
        )));
    }
    let expand_animations = attrs.bool_or("expand_animations", true)?;
    Ok(Box::new(move |inputs| {
        let crop = op == "DecodeAndCropJpeg";
        expect_inputs(op, &inputs, if crop { 2 } else { 1 })?;
        let contents = &inputs[0];
        // GIF, WebP and JPEG XL contents: the codecs' own modules.
        if op == "DecodeImage"
            && contents.shape().is_empty()
            && let Some(data) = contents.string_values().ok().and_then(|v| v.first())
            && let Some(image) = super::image_formats::decode_image_animated(
                data,
                usize::from(channels),
                expand_animations,
                dtype == DType::Float,
            )?
        {
            return Ok(vec![image]);
        }
        let decoded = match op {
            "DecodePng" => engine::decode_png(contents, channels),
            "DecodeImage" => engine::decode_image(contents, channels),
            "DecodeAndCropJpeg" => {
                let window = super::strings::int_values(op, &inputs[1], "crop_window")?;
                if window.len() != 4 {
                    return Err(invalid(
                        op,
                        format!(
                            "crop_window must be shape [4], got {}",
                            shape_string(inputs[1].shape())
                        ),
                    ));
                }
                engine::decode_and_crop_jpeg(contents, &window, channels, dct)
            }
            _ => engine::decode_jpeg_with(contents, channels, dct),
        }
        .map_err(|e| renamed(op, e))?;
        if dtype == DType::Float {
            // `convert_image_dtype`: x * (1 / 255) in float32.
            let v: Vec<f32> = decoded
                .to_vec::<u8>()?
                .iter()
                .map(|&x| f32::from(x) * (1.0 / 255.0))
                .collect();
            return Ok(vec![Tensor::from_slice(&v, decoded.shape().to_vec())?]);
        }
        Ok(vec![decoded])
    }))
}

#[derive(Clone, Copy, PartialEq)]
enum Method {
    Bilinear,
    Nearest,
    Bicubic,
}

/// A 4-D image batch's dimensions.
pub(super) fn batch_dims(op: &str, t: &Tensor) -> Result<[usize; 4]> {
    match *t.shape() {
        [b, h, w, c] => Ok([b as usize, h as usize, w as usize, c as usize]),
        _ => Err(invalid(
            op,
            format!("input must be 4-dimensional{}", shape_string(t.shape())),
        )),
    }
}

/// The values of a real tensor as float32 (as TensorFlow casts them).
pub(super) fn floats(op: &str, t: &Tensor) -> Result<Vec<f32>> {
    if t.dtype() == DType::Float {
        return t.to_vec();
    }
    engine::cast(t, DType::Float)
        .and_then(|c| c.to_vec())
        .map_err(|e| renamed(op, e))
}

/// TensorFlow's `CalculateResizeScale`.
pub(super) fn resize_scale(in_size: usize, out_size: usize, align_corners: bool) -> f32 {
    if align_corners && out_size > 1 {
        (in_size - 1) as f32 / (out_size - 1) as f32
    } else {
        in_size as f32 / out_size as f32
    }
}

fn resize(attrs: &NodeAttrs, method: Method) -> Result<Compute> {
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
        let (image, size) = (&inputs[0], &inputs[1]);
        let [b, h, w, c] = batch_dims(op, image)?;
        let size = super::strings::int_values(op, size, "size")?;
        let [oh, ow] = size[..] else {
            return Err(invalid(
                op,
                format!(
                    "shape_t must have two elements{}",
                    shape_string(inputs[1].shape())
                ),
            ));
        };
        if oh <= 0 || ow <= 0 || oh > i64::from(i32::MAX) || ow > i64::from(i32::MAX) {
            return Err(invalid(op, "output dimensions must be positive"));
        }
        if h == 0 || w == 0 {
            return Err(invalid(op, "input image must be of non-zero size"));
        }
        let (oh, ow) = (oh as usize, ow as usize);
        let out_dtype = if method == Method::Nearest {
            image.dtype()
        } else {
            DType::Float
        };
        check_size(op, out_dtype, (b * c) as u64 * oh as u64 * ow as u64)?;
        let shape = vec![b as i64, oh as i64, ow as i64, c as i64];
        let sy = resize_scale(h, oh, align);
        let sx = resize_scale(w, ow, align);
        match method {
            // The engine's resize is TensorFlow 2's (half-pixel) bilinear.
            Method::Bilinear if half => {
                engine::resize(image, oh as i64, ow as i64, ResizeMethod::Bilinear).map(|t| vec![t])
            }
            Method::Bilinear => {
                let v = floats(op, image)?;
                let ys = interpolation_weights_with(h, oh, sy, half);
                let xs = interpolation_weights_with(w, ow, sx, half);
                let mut out = Vec::with_capacity(b * oh * ow * c);
                for n in 0..b {
                    let img = &v[n * h * w * c..(n + 1) * h * w * c];
                    for y in &ys {
                        for x in &xs {
                            for k in 0..c {
                                let p = |yy: usize, xx: usize| img[(yy * w + xx) * c + k];
                                let tl = p(y.lower, x.lower);
                                let tr = p(y.lower, x.upper);
                                let bl = p(y.upper, x.lower);
                                let br = p(y.upper, x.upper);
                                let top = tl + (tr - tl) * x.lerp;
                                let bottom = bl + (br - bl) * x.lerp;
                                out.push(top + (bottom - top) * y.lerp);
                            }
                        }
                    }
                }
                Ok(vec![Tensor::from_slice(&out, shape)?])
            }
            Method::Nearest => {
                if h >= 1 << 24 || w >= 1 << 24 {
                    return Err(invalid(
                        op,
                        "nearest neighbor requires max height & width of 2^24",
                    ));
                }
                let ys = nearest_indices(h, oh, sy, align, half);
                let xs = nearest_indices(w, ow, sx, align, half);
                let (TensorData::Buffer(data), Some(size)) = (image.data(), image.dtype().size())
                else {
                    return Err(invalid(
                        op,
                        format!("images must be numeric, got {}", image.dtype()),
                    ));
                };
                let mut out = Vec::with_capacity(b * oh * ow * c * size);
                for n in 0..b {
                    for &y in &ys {
                        for &x in &xs {
                            let at = ((n * h + y) * w + x) * c * size;
                            out.extend_from_slice(&data[at..at + c * size]);
                        }
                    }
                }
                Ok(vec![Tensor::new(
                    image.dtype(),
                    shape,
                    TensorData::Buffer(out.into()),
                )?])
            }
            Method::Bicubic => {
                let v = floats(op, image)?;
                Ok(vec![Tensor::from_slice(
                    &bicubic(&v, [b, h, w, c], oh, ow, sy, sx, half),
                    shape,
                )?])
            }
        }
    }))
}

/// TensorFlow's nearest-neighbour source index (`HalfPixelScalerForNN`:
/// no `- 0.5`; `roundf` with `align_corners`).
pub(super) fn nearest_indices(
    in_size: usize,
    out_size: usize,
    scale: f32,
    align: bool,
    half: bool,
) -> Vec<usize> {
    (0..out_size)
        .map(|i| {
            let x = if half {
                (i as f32 + 0.5) * scale
            } else {
                i as f32 * scale
            };
            let v = if align { x.round() } else { x.floor() } as i64;
            v.clamp(0, in_size as i64 - 1) as usize
        })
        .collect()
}

const TABLE_SIZE: usize = 1024;

/// TensorFlow's bicubic coefficient table (Keys' `a = -0.5` with half-pixel
/// centres, `-0.75` for the legacy kernel).
pub(super) fn cubic_table(keys: bool) -> Vec<f32> {
    // TensorFlow's `a` is a double: x is rounded to float32, the
    // polynomials are evaluated in float64, then stored as float32.
    let a: f64 = if keys { -0.5 } else { -0.75 };
    let mut t = vec![0f32; (TABLE_SIZE + 1) * 2];
    for i in 0..=TABLE_SIZE {
        let mut x = f64::from((i as f64 / TABLE_SIZE as f64) as f32);
        t[i * 2] = (((a + 2.0) * x - (a + 3.0)) * x * x + 1.0) as f32;
        x = f64::from((x + 1.0) as f32);
        t[i * 2 + 1] = (((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a) as f32;
    }
    t
}

/// TensorFlow's `GetWeightsAndIndices`: four source indices and weights.
pub(super) fn cubic_weights(
    table: &[f32],
    scale: f32,
    out: usize,
    limit: usize,
    keys: bool,
) -> ([usize; 4], [f32; 4]) {
    let loc = if keys {
        (out as f32 + 0.5) * scale - 0.5
    } else {
        out as f32 * scale
    };
    let base = loc.floor() as i64;
    let delta = loc - base as f32;
    let offset = (delta * TABLE_SIZE as f32).round_ties_even() as usize;
    let raw = [
        table[offset * 2 + 1],
        table[offset * 2],
        table[(TABLE_SIZE - offset) * 2],
        table[(TABLE_SIZE - offset) * 2 + 1],
    ];
    let mut idx = [0usize; 4];
    let mut w = raw;
    for k in 0..4 {
        let want = base - 1 + k as i64;
        let bound = want.clamp(0, limit as i64 - 1);
        idx[k] = bound as usize;
        if keys && bound != want {
            // Samples outside the image get no weight; the rest are
            // renormalised (the scale_and_translate convention).
            w[k] = 0.0;
        }
    }
    if keys {
        let sum = w[0] + w[1] + w[2] + w[3];
        if sum.abs() >= 1000.0 * f32::MIN_POSITIVE {
            let inv = 1.0 / sum;
            for v in &mut w {
                *v *= inv;
            }
        }
    }
    (idx, w)
}

#[allow(clippy::too_many_arguments)]
fn bicubic(
    v: &[f32],
    [b, h, w, c]: [usize; 4],
    oh: usize,
    ow: usize,
    sy: f32,
    sx: f32,
    keys: bool,
) -> Vec<f32> {
    let table = cubic_table(keys);
    let ys: Vec<_> = (0..oh)
        .map(|y| cubic_weights(&table, sy, y, h, keys))
        .collect();
    let xs: Vec<_> = (0..ow)
        .map(|x| cubic_weights(&table, sx, x, w, keys))
        .collect();
    let interp = |w: &[f32; 4], p: [f32; 4]| w[0] * p[0] + w[1] * p[1] + w[2] * p[2] + w[3] * p[3];
    let mut out = Vec::with_capacity(b * oh * ow * c);
    for n in 0..b {
        let img = &v[n * h * w * c..(n + 1) * h * w * c];
        for (yi, yw) in &ys {
            for (xi, xw) in &xs {
                for k in 0..c {
                    // TensorFlow interpolates each of the four columns
                    // vertically first, then across them.
                    let column = |x: usize| {
                        let p = |r: usize| img[(yi[r] * w + xi[x]) * c + k];
                        interp(yw, [p(0), p(1), p(2), p(3)])
                    };
                    out.push(interp(xw, [column(0), column(1), column(2), column(3)]));
                }
            }
        }
    }
    out
}

fn crop_and_resize(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "CropAndResize";
    let nearest = match attrs.string_or("method", "bilinear")? {
        "bilinear" => false,
        "nearest" => true,
        other => {
            return Err(invalid(
                OP,
                format!("method must be 'bilinear' or 'nearest', got {other}"),
            ));
        }
    };
    let extrapolation = attrs.float_or("extrapolation_value", 0.0)?;
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 4)?;
        let [batch, h, w, c] = batch_dims(OP, &inputs[0])?;
        if h == 0 || w == 0 {
            return Err(invalid(OP, "image dimensions must be positive"));
        }
        let boxes = floats(OP, &inputs[1])?;
        let index = super::strings::int_values(OP, &inputs[2], "box_index")?;
        let crop = super::strings::int_values(OP, &inputs[3], "crop_size")?;
        let n = index.len();
        if inputs[1].shape() != [n as i64, 4] {
            return Err(invalid(
                OP,
                format!(
                    "boxes must be 2-D [{n}, 4], got {}",
                    shape_string(inputs[1].shape())
                ),
            ));
        }
        let [ch, cw] = crop[..] else {
            return Err(invalid(OP, "crop_size must be a length-2 vector"));
        };
        if ch <= 0 || cw <= 0 {
            return Err(invalid(OP, "crop dimensions must be positive"));
        }
        let (ch, cw) = (ch as usize, cw as usize);
        check_size(OP, DType::Float, (n * c) as u64 * ch as u64 * cw as u64)?;
        let image = floats(OP, &inputs[0])?;
        let mut out = Vec::with_capacity(n * ch * cw * c);
        let (hf, wf) = ((h - 1) as f32, (w - 1) as f32);
        for (bx, &bi) in boxes.chunks_exact(4).zip(&index) {
            if !(0..batch as i64).contains(&bi) {
                // TensorFlow's code: a TensorFlow 2 map reports it as
                // InvalidArgument, a TensorFlow 1 map ends there (map.rs).
                return Err(crate::queue::out_of_range(format!(
                    "{OP}: box_index has values outside [0, batch_size) (batch_size {batch})"
                )));
            }
            let img = &image[bi as usize * h * w * c..][..h * w * c];
            let (y1, x1, y2, x2) = (bx[0], bx[1], bx[2], bx[3]);
            let (rows, cols) = (CropAxis::new(y1, y2, hf, ch), CropAxis::new(x1, x2, wf, cw));
            for y in 0..ch {
                let iy = rows.at(y);
                for x in 0..cw {
                    let ix = cols.at(x);
                    if !(0.0..=hf).contains(&iy) || !(0.0..=wf).contains(&ix) {
                        out.extend(std::iter::repeat_n(extrapolation, c));
                        continue;
                    }
                    let p =
                        |yy: f32, xx: f32, k: usize| img[(yy as usize * w + xx as usize) * c + k];
                    for k in 0..c {
                        if nearest {
                            out.push(p(iy.round(), ix.round(), k));
                            continue;
                        }
                        let (ty, by, yl) = (iy.floor(), iy.ceil(), iy - iy.floor());
                        let (lx, rx, xl) = (ix.floor(), ix.ceil(), ix - ix.floor());
                        let top = p(ty, lx, k) + (p(ty, rx, k) - p(ty, lx, k)) * xl;
                        let bottom = p(by, lx, k) + (p(by, rx, k) - p(by, lx, k)) * xl;
                        out.push(top + (bottom - top) * yl);
                    }
                }
            }
        }
        Ok(vec![Tensor::from_slice(
            &out,
            vec![n as i64, ch as i64, cw as i64, c as i64],
        )?])
    }))
}

/// `AdjustContrastv2`: `(x - mean) * factor + mean` per image and channel,
/// the mean over height and width. TensorFlow reduces in float32 in Eigen's
/// order; tfdata sums in float64, so results may differ by a float32 ulp
/// or two.
fn adjust_contrast(inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    const OP: &str = "AdjustContrastv2";
    expect_inputs(OP, &inputs, 2)?;
    let (images, factor) = (&inputs[0], &inputs[1]);
    let shape = images.shape().to_vec();
    if shape.len() < 3 {
        return Err(invalid(
            OP,
            format!(
                "input must be at least 3-D, got shape{}",
                shape_string(&shape)
            ),
        ));
    }
    if !factor.shape().is_empty() {
        return Err(invalid(
            OP,
            format!(
                "contrast_factor must be scalar: {}",
                shape_string(factor.shape())
            ),
        ));
    }
    let f = factor.to_scalar::<f32>().map_err(|e| renamed(OP, e))?;
    let d: Vec<usize> = shape.iter().map(|&x| x as usize).collect();
    let (c, hw) = (d[d.len() - 1], d[d.len() - 3] * d[d.len() - 2]);
    let mut v = floats(OP, images)?;
    if hw > 0 && c > 0 {
        for img in v.chunks_exact_mut(hw * c) {
            for k in 0..c {
                let sum: f64 = img.iter().skip(k).step_by(c).map(|&x| f64::from(x)).sum();
                let mean = (sum / hw as f64) as f32;
                for x in img.iter_mut().skip(k).step_by(c) {
                    *x = (*x - mean) * f + mean;
                }
            }
        }
    }
    Ok(vec![Tensor::from_slice(&v, shape)?])
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use tfdata_core::{DType, Tensor};

    use super::super::testing::{boolean, float, int, run, string, ty};

    /// The reference image of the TensorFlow runs: element `i` is
    /// `(37 i + 11) mod 256`.
    fn image(shape: &[i64]) -> Tensor {
        let n: i64 = shape.iter().product();
        let v: Vec<u8> = (0..n).map(|i| ((i * 37 + 11) % 256) as u8).collect();
        Tensor::from_slice(&v, shape.to_vec()).unwrap()
    }

    /// The float32 bits folded as `acc * 1000003 + bits`, as in the
    /// TensorFlow reference script.
    fn fold(t: &Tensor) -> u64 {
        let v: Vec<f32> = match t.dtype() {
            DType::UInt8 => t
                .to_vec::<u8>()
                .unwrap()
                .into_iter()
                .map(f32::from)
                .collect(),
            _ => t.to_vec().unwrap(),
        };
        v.iter().fold(0u64, |acc, x| {
            acc.wrapping_mul(1000003)
                .wrapping_add(u64::from(x.to_bits()))
        })
    }

    fn resize(
        op: &str,
        t: Tensor,
        size: [i32; 2],
        align: bool,
        half: bool,
    ) -> tfdata_core::Result<Tensor> {
        run(
            op,
            &[
                ("align_corners", boolean(align)),
                ("half_pixel_centers", boolean(half)),
            ],
            vec![t, Tensor::vector(&size)],
        )
        .map(|mut o| o.remove(0))
    }

    #[test]
    fn bilinear_and_nearest_are_bit_identical_to_tensorflow() {
        let cases: &[(bool, bool, [i32; 2], u64, u64)] = &[
            (
                false,
                true,
                [3, 4],
                2881191071727682385,
                15769717344004210688,
            ),
            (
                false,
                true,
                [8, 9],
                14036743011518384374,
                8162367625768730624,
            ),
            (
                true,
                false,
                [3, 4],
                15769717344004210688,
                15769717344004210688,
            ),
            (
                true,
                false,
                [8, 9],
                7522205955105404567,
                13955619140126310400,
            ),
            (
                false,
                false,
                [3, 4],
                16329504876804881359,
                6378495502612758528,
            ),
            (
                false,
                false,
                [8, 9],
                15106556539930625690,
                7669990993663754240,
            ),
        ];
        for &(align, half, size, bilinear, nearest) in cases {
            let b = resize("ResizeBilinear", image(&[1, 5, 7, 2]), size, align, half).unwrap();
            assert_eq!(
                (b.dtype(), fold(&b)),
                (DType::Float, bilinear),
                "{align} {half} {size:?}"
            );
            let n = resize(
                "ResizeNearestNeighbor",
                image(&[1, 5, 7, 2]),
                size,
                align,
                half,
            )
            .unwrap();
            assert_eq!(
                (n.dtype(), fold(&n)),
                (DType::UInt8, nearest),
                "{align} {half} {size:?}"
            );
            assert_eq!(n.shape(), [1, i64::from(size[0]), i64::from(size[1]), 2]);
        }
        let e = resize("ResizeBilinear", image(&[1, 5, 7, 2]), [2, 2], true, true).unwrap_err();
        assert!(
            e.to_string()
                .contains("If half_pixel_centers is True, align_corners must be False.")
        );
        let e = resize("ResizeBilinear", image(&[5, 7, 2]), [2, 2], false, true).unwrap_err();
        assert!(
            e.to_string().contains("input must be 4-dimensional[5,7,2]"),
            "{e}"
        );
        let e = resize(
            "ResizeBilinear",
            image(&[1, 5, 7, 2]),
            [1 << 30, 1 << 30],
            false,
            true,
        )
        .unwrap_err();
        assert!(e.to_string().contains("exceeds the limit"), "{e}");
    }

    #[test]
    #[allow(clippy::excessive_precision)] // TensorFlow's printed values
    fn bicubic_matches_tensorflow() {
        #[rustfmt::skip]
        let cases: &[(bool, [i32; 2], &[f32])] = &[
            (true, [3, 7], &[30.72872, 53.2461, 72.70681, 74.87065, 100.14341, 131.87129, 153.99661, 174.34808, 204.30939, 189.17438, 106.5, 139.20368, 98.81324, 30.27679, 59.166855, 79.36973, 109.58713, 138.12935, 166.95833, 179.78743, 180.40958]),
            (true, [6, 8], &[-3.851797, 10.705802, 38.744888, 73.52397, 102.48631, 124.39648, 150.93361, 166.34045, 99.57293, 121.80345, 136.55145, 66.036766, 41.753685, 74.73162, 111.07509, 133.51064, 196.31335, 223.8008, 229.44272, 86.78823, 28.013847, 68.21304, 73.79521, 73.395767, 137.16747, 154.27934, 177.8939, 177.62122, 197.0814, 221.18086, 96.00701, -0.57847118, 80.57294, 95.22161, 123.10295, 156.63235, 189.51839, 210.73164, 151.52641, 103.674965, 46.65953, 62.066383, 88.63439, 111.75938, 134.31815, 157.54611, 194.78571, 218.06548]),
            (false, [3, 7], &[11.0, 34.174885, 64.50832, 91.8921, 115.10791, 146.37442, 163.04637, 198.1674, 243.64566, 166.02391, 60.322578, 103.11224, 74.66976, 41.211022, 72.38815, 94.00995, 131.86078, 169.83609, 198.32819, 167.03401, 133.57527]),
            (false, [6, 8], &[11.0, 30.602051, 58.984375, 78.85742, 103.5, 128.52197, 151.91797, 163.06494, 145.71338, 187.7212, 147.49214, 30.939054, 12.485038, 62.265472, 104.68924, 125.40564, 198.1674, 240.1752, 199.94614, 83.39307, 76.4842, 101.85147, 61.895855, 41.18206, 125.0, 144.60205, 172.98438, 192.85742, 241.5, 215.77197, 67.91797, -7.0600586, 72.38815, 90.429985, 123.59002, 152.96303, 189.29938, 194.21571, 154.26012, 133.54631, 46.111122, 65.71317, 94.0955, 113.96854, 135.94446, 166.60533, 209.02907, 229.74548]),
        ];
        for &(half, size, want) in cases {
            let out = resize("ResizeBicubic", image(&[1, 4, 5, 1]), size, false, half).unwrap();
            let got: Vec<f32> = out.to_vec().unwrap();
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(want) {
                assert!(
                    (g - w).abs() <= 1e-4 + 1e-6 * w.abs(),
                    "{half} {size:?}: {g} vs {w}"
                );
            }
        }
    }

    #[test]
    fn crop_and_resize_and_contrast_match_tensorflow() {
        let boxes = Tensor::from_slice(
            &[
                0.1f32, 0.2, 0.8, 0.9, -0.2, 0.0, 0.5, 1.3, 0.5, 0.5, 0.5, 0.5,
            ],
            vec![3, 4],
        )
        .unwrap();
        for (method, want, head) in [
            (
                "bilinear",
                15478999184260514312u64,
                [
                    102.200005f32,
                    139.2,
                    205.79999,
                    89.20002,
                    53.4,
                    90.4,
                    156.99997,
                    193.99997,
                ],
            ),
            (
                "nearest",
                6498858795062329344,
                [85.0, 122.0, 233.0, 14.0, 51.0, 88.0, 125.0, 162.0],
            ),
        ] {
            let out = run(
                "CropAndResize",
                &[
                    ("method", string(method)),
                    ("extrapolation_value", float(-1.0)),
                ],
                vec![
                    image(&[1, 5, 7, 2]),
                    boxes.clone(),
                    Tensor::vector(&[0i32, 0, 0]),
                    Tensor::vector(&[3i32, 4]),
                ],
            )
            .unwrap()
            .remove(0);
            assert_eq!(out.shape(), [3, 3, 4, 2]);
            assert_eq!(out.to_vec::<f32>().unwrap()[..8], head);
            assert_eq!(fold(&out), want, "{method}");
        }
        let f = super::super::testing::run(
            "AdjustContrastv2",
            &[],
            vec![
                Tensor::from_slice(
                    &image(&[1, 5, 7, 2])
                        .to_vec::<u8>()
                        .unwrap()
                        .into_iter()
                        .map(f32::from)
                        .collect::<Vec<_>>(),
                    vec![1, 5, 7, 2],
                )
                .unwrap(),
                Tensor::scalar(1.7f32),
            ],
        )
        .unwrap()
        .remove(0);
        let v: Vec<f32> = f.to_vec().unwrap();
        let want = [-70.88001f32, -8.279999, 54.92, 117.52, 180.72, 243.32];
        for (g, w) in v.iter().zip(want) {
            assert!((g - w).abs() <= 1e-4, "{g} vs {w}");
        }
        assert!((v.iter().map(|&x| f64::from(x)).sum::<f64>() - 8973.0).abs() < 1e-2);
    }

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    /// Largest and mean absolute difference between two uint8 images.
    fn diff(a: &[u8], b: &[u8]) -> (u8, f64) {
        assert_eq!(a.len(), b.len());
        let max = a
            .iter()
            .zip(b)
            .map(|(x, y)| x.abs_diff(*y))
            .max()
            .unwrap_or(0);
        let mean = a
            .iter()
            .zip(b)
            .map(|(x, y)| f64::from(x.abs_diff(*y)))
            .sum::<f64>()
            / a.len() as f64;
        (max, mean)
    }

    #[test]
    fn jpeg_decodes_as_tensorflow_does() {
        let jpeg = Tensor::scalar_string(Bytes::from(fixture("gradient.jpg")));
        let out = run("DecodeJpeg", &[("channels", int(3))], vec![jpeg.clone()])
            .unwrap()
            .remove(0);
        assert_eq!(out.shape(), [24, 32, 3]);
        let (max, mean) = diff(
            &out.to_vec::<u8>().unwrap(),
            &fixture("gradient.jpg.tf.bin"),
        );
        // Both libjpeg-turbo with the fast IDCT: bit for bit.
        assert!(max == 0, "max {max} mean {mean}");
        let crop = run(
            "DecodeAndCropJpeg",
            &[("channels", int(3))],
            vec![jpeg.clone(), Tensor::vector(&[3i32, 5, 10, 12])],
        )
        .unwrap()
        .remove(0);
        assert_eq!(crop.shape(), [10, 12, 3]);
        let (max, mean) = diff(
            &crop.to_vec::<u8>().unwrap(),
            &fixture("gradient.crop.tf.bin"),
        );
        // TensorFlow's cropped decode may differ at the window's last column.
        assert!(max <= 2 && mean <= 0.1, "max {max} mean {mean}");
        assert!(matches!(
            run(
                "DecodeJpeg",
                &[("dct_method", string("FLOAT"))],
                vec![jpeg.clone()]
            ),
            Err(tfdata_core::Error::InvalidArgument(_))
        ));
        let e = run(
            "DecodeAndCropJpeg",
            &[],
            vec![jpeg.clone(), Tensor::vector(&[20i32, 5, 10, 12])],
        )
        .unwrap_err();
        assert!(
            e.to_string().contains(
                "DecodeAndCropJpeg: jpeg::Uncompress failed. Invalid JPEG data or crop window"
            ),
            "{e}"
        );
        assert!(matches!(
            run("DecodeJpeg", &[("ratio", int(2))], vec![jpeg.clone()]),
            Err(tfdata_core::Error::Unimplemented(_))
        ));
        // Corrupt and truncated data are errors, never panics.
        let bytes = fixture("gradient.jpg");
        for cut in [3, 20, bytes.len() / 2, bytes.len() - 2] {
            let t = Tensor::scalar_string(Bytes::copy_from_slice(&bytes[..cut]));
            assert!(run("DecodeJpeg", &[], vec![t]).is_err(), "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        for b in flipped.iter_mut().skip(200).step_by(7) {
            *b ^= 0x5a;
        }
        let _ = run(
            "DecodeJpeg",
            &[],
            vec![Tensor::scalar_string(Bytes::from(flipped))],
        );
    }

    #[test]
    fn png_and_decode_image() {
        let png = Tensor::scalar_string(Bytes::from(fixture("small.png")));
        let out = run("DecodePng", &[("channels", int(0))], vec![png.clone()])
            .unwrap()
            .remove(0);
        assert_eq!(out.shape(), [8, 8, 4]);
        let px = out.to_vec::<u8>().unwrap();
        assert_eq!(&px[..8], &[0, 0, 0, 200, 8, 0, 4, 200]);
        let out = run(
            "DecodeImage",
            &[("channels", int(3)), ("dtype", ty(DType::Float))],
            vec![png.clone()],
        )
        .unwrap()
        .remove(0);
        assert_eq!(out.shape(), [8, 8, 3]);
        assert_eq!(out.to_vec::<f32>().unwrap()[3], 8.0 * (1.0 / 255.0));
        assert!(matches!(
            run("DecodePng", &[("dtype", ty(DType::UInt16))], vec![png]),
            Err(tfdata_core::Error::Unimplemented(_))
        ));
        // A PNG header declaring 100000 x 100000 is refused before decoding.
        let mut huge = fixture("small.png");
        huge[16..24].copy_from_slice(&[0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0]);
        assert!(
            run(
                "DecodePng",
                &[],
                vec![Tensor::scalar_string(Bytes::from(huge))]
            )
            .is_err()
        );
    }
}
