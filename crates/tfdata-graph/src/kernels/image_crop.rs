//! The Inception-style random crop: `SampleDistortedBoundingBox`,
//! `SampleDistortedBoundingBoxV2` and `StatelessSampleDistortedBoundingBox`
//! (what `tf.image.sample_distorted_bounding_box` and its stateless form
//! emit, before a `Slice` or `DecodeAndCropJpeg`).
//!
//! Boxes are TensorFlow's bit for bit because they are drawn from the same
//! Philox stream, one 32-bit word at a time, with the same float and
//! integer steps: per attempt an aspect ratio (`RandFloat`), a height
//! (`Uniform`, rejection-sampled over 32-bit words), a y and an x offset.
//! The stateful ops reserve `max_attempts` Philox blocks per run from the
//! node's generator (seeded by `seed`/`seed2`), as TensorFlow's
//! `ReserveSamples32(4 * max_attempts)`; the stateless op derives its
//! generator from the seed pair as the other stateless ops do. C's
//! `lrintf` rounds half to even, and the double-precision steps of
//! TensorFlow's height correction are kept.

use tfdata_core::{DType, Error, Result, Tensor};

use super::random::unit_f32;
use super::random::{key_counter_of_seed, node_generator, reserve, seed_pair};
use super::strings::shape_string;
use super::{Compute, KernelDef, expect_inputs};
use crate::attrs::NodeAttrs;
use tfdata_dataset::philox::{Philox, Words};

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "SampleDistortedBoundingBox",
        outputs: box_outputs,
        build: |a| build(a, Kind::V1),
    },
    KernelDef {
        op: "SampleDistortedBoundingBoxV2",
        outputs: box_outputs,
        build: |a| build(a, Kind::V2),
    },
    KernelDef {
        op: "StatelessSampleDistortedBoundingBox",
        outputs: box_outputs,
        build: |a| build(a, Kind::Stateless),
    },
];

fn box_outputs(_: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("begin", 1), ("size", 1), ("bboxes", 1)])
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    V1,
    V2,
    Stateless,
}

/// A rectangle in pixels, `[min, max)` on each axis.
#[derive(Clone, Copy, Default)]
struct Rect {
    min_x: i32,
    min_y: i32,
    max_x: i32,
    max_y: i32,
}

impl Rect {
    fn area(&self) -> f32 {
        (self.max_x.wrapping_sub(self.min_x)).wrapping_mul(self.max_y.wrapping_sub(self.min_y))
            as f32
    }

    fn intersect(&self, r: &Rect) -> Rect {
        let (x0, y0) = (self.min_x.max(r.min_x), self.min_y.max(r.min_y));
        let (x1, y1) = (self.max_x.min(r.max_x), self.max_y.min(r.max_y));
        if x0 > x1 || y0 > y1 {
            Rect::default()
        } else {
            Rect {
                min_x: x0,
                min_y: y0,
                max_x: x1,
                max_y: y1,
            }
        }
    }
}

/// C's `lrintf` (round half to even) then `static_cast<int>`.
fn lrintf(x: f32) -> i32 {
    let r = x.round_ties_even();
    if r.is_nan() || !(-9.223_372e18..9.223_372e18).contains(&r) {
        // lrintf's out-of-range result (LONG_MIN), truncated to int.
        0
    } else {
        r as i64 as i32
    }
}

/// `SimplePhilox::Uniform(n)`: exact, by rejection over 32-bit words.
fn uniform(words: &mut Words, n: u32) -> u32 {
    if n == 0 {
        return words.next_word().wrapping_mul(n);
    }
    if n & (n - 1) == 0 {
        return words.next_word() & (n - 1);
    }
    let rem = (u32::MAX % n) + 1;
    loop {
        let r = words.next_word();
        if r >= rem {
            return r % n;
        }
    }
}

/// TensorFlow's `GenerateRandomCrop`: a crop of area within the range and
/// the given aspect ratio, placed uniformly; `None` when the constraints
/// cannot be met.
fn random_crop(
    width: i32,
    height: i32,
    (min_rel, max_rel): (f32, f32),
    aspect: f32,
    words: &mut Words,
) -> Option<Rect> {
    if max_rel <= 0.0 || aspect <= 0.0 || width <= 0 || height <= 0 || min_rel > max_rel {
        return None;
    }
    let min_area = min_rel * width as f32 * height as f32;
    let max_area = max_rel * width as f32 * height as f32;
    let mut h = lrintf((min_area / aspect).sqrt());
    let mut max_h = lrintf((max_area / aspect).sqrt());
    if lrintf(max_h as f32 * aspect) > width {
        let eps = f64::from(0.000_000_1f32);
        max_h = ((f64::from(width) + 0.5 - eps) / f64::from(aspect)) as i32;
        if lrintf(max_h as f32 * aspect) > width {
            max_h -= 1;
        }
    }
    max_h = max_h.min(height);
    if h >= max_h {
        h = max_h;
    }
    if h < max_h {
        h += uniform(words, (max_h - h + 1) as u32) as i32;
    }
    let mut w = lrintf(h as f32 * aspect);
    let mut area = w.wrapping_mul(h) as f32;
    if area < min_area {
        h += 1;
        w = lrintf(h as f32 * aspect);
        area = w.wrapping_mul(h) as f32;
    }
    if area > max_area {
        h -= 1;
        w = lrintf(h as f32 * aspect);
        area = w.wrapping_mul(h) as f32;
    }
    if area < min_area || area > max_area || w > width || h > height || w <= 0 || h <= 0 {
        return None;
    }
    let y = if h < height {
        uniform(words, (height - h) as u32) as i32
    } else {
        0
    };
    let x = if w < width {
        uniform(words, (width - w) as u32) as i32
    } else {
        0
    };
    Some(Rect {
        min_x: x,
        min_y: y,
        max_x: x + w,
        max_y: y + h,
    })
}

/// Whether `crop` covers at least `min_covered` of one (non-empty) box.
fn covers(crop: &Rect, min_covered: f32, boxes: &[Rect]) -> bool {
    if crop.area() < 1.0 {
        return false;
    }
    boxes.iter().any(|b| {
        let a = b.area();
        a >= 1.0 && crop.intersect(b).area() / a >= min_covered
    })
}

struct Params {
    min_covered: f32,
    use_image: bool,
    aspect: [f32; 2],
    area: [f32; 2],
    attempts: i32,
}

fn two_floats(attrs: &NodeAttrs, key: &str, default: [f32; 2], what: &str) -> Result<[f32; 2]> {
    let v = if attrs.has(key) {
        attrs.floats(key)?.to_vec()
    } else {
        default.to_vec()
    };
    match v.as_slice() {
        [a, b] => Ok([*a, *b]),
        _ => Err(attrs.error(format!("{what} field must specify 2 dimensions"))),
    }
}

fn build(attrs: &NodeAttrs, kind: Kind) -> Result<Compute> {
    let op = attrs.op.to_string();
    let min_covered = if kind == Kind::V1 {
        let m = attrs.float_or("min_object_covered", 0.1)?;
        if m.is_nan() || m < 0.0 {
            return Err(attrs.error(format!("Min object covered must be non-negative: {m}")));
        }
        m
    } else {
        0.0
    };
    let aspect = two_floats(
        attrs,
        "aspect_ratio_range",
        [0.75, 1.33],
        "Aspect ratio range",
    )?;
    if aspect.iter().any(|&a| a.is_nan() || a <= 0.0) {
        return Err(attrs.error(format!(
            "Aspect ratio range must be non-negative: [{}, {}]",
            aspect[0], aspect[1]
        )));
    }
    let area = two_floats(attrs, "area_range", [0.05, 1.0], "Area range")?;
    if area.iter().any(|&a| a.is_nan() || a <= 0.0) {
        return Err(attrs.error(format!(
            "Area range must be non-negative: [{}, {}]",
            area[0], area[1]
        )));
    }
    if area.iter().any(|&a| a > 1.0) {
        return Err(attrs.error(format!(
            "Area range must be less then or equal to 1.0: [{}, {}]",
            area[0], area[1]
        )));
    }
    let attempts = attrs.int_or("max_attempts", 100)?;
    if attempts <= 0 || attempts > i64::from(i32::MAX) {
        return Err(attrs.error(format!("Max attempts must be non-negative: {attempts}")));
    }
    let params = Params {
        min_covered,
        use_image: attrs.bool_or("use_image_if_no_bounding_boxes", false)?,
        aspect,
        area,
        attempts: attempts as i32,
    };
    let generator = if kind == Kind::Stateless {
        None
    } else {
        Some(node_generator(attrs)?)
    };
    Ok(Box::new(move |inputs| {
        let op = op.as_str();
        let n = match kind {
            Kind::V1 => 2,
            Kind::V2 => 3,
            Kind::Stateless => 4,
        };
        expect_inputs(op, &inputs, n)?;
        let rng: Philox = match &generator {
            Some(g) => reserve(g, params.attempts as u64),
            None => {
                let (s0, s1) = seed_pair(op, &inputs[3])?;
                key_counter_of_seed(s0, s1)
            }
        };
        sample(op, &inputs, &params, rng)
    }))
}

fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

fn sample(op: &str, inputs: &[Tensor], p: &Params, rng: Philox) -> Result<Vec<Tensor>> {
    let size_t = &inputs[0];
    if size_t.shape().len() != 1 {
        return Err(invalid(
            op,
            format!(
                "image_size must be 1-dimensional{}",
                shape_string(size_t.shape())
            ),
        ));
    }
    if size_t.shape()[0] != 3 {
        return Err(invalid(
            op,
            format!(
                "image_size must contain 3 elements{}",
                shape_string(size_t.shape())
            ),
        ));
    }
    let dtype = size_t.dtype();
    let dims: Vec<i64> = tfdata_dataset::kernels::cast(size_t, DType::Int64)
        .and_then(|t| t.to_vec())
        .map_err(|_| {
            invalid(
                op,
                format!("image_size must be an integer tensor, got {dtype}"),
            )
        })?;
    // TensorFlow reads the values as unsigned: negatives are huge.
    let bound = |v: i64, what: &str| {
        if v < 0 || v >= i64::from(i32::MAX) {
            Err(invalid(op, format!("image {what} cannot be >= int32 max")))
        } else {
            Ok(v as i32)
        }
    };
    let height = bound(dims[0], "height")?;
    let width = bound(dims[1], "width")?;
    let boxes_t = &inputs[1];
    if boxes_t.shape().len() != 3 {
        return Err(invalid(
            op,
            format!(
                "input boxes must be 3-dimensional [batch, num_boxes, coords]: {}",
                shape_string(boxes_t.shape())
            ),
        ));
    }
    if boxes_t.shape()[2] != 4 {
        return Err(invalid(
            op,
            format!(
                "bounding boxes must have shape [4] or [*, 4], got {}",
                shape_string(boxes_t.shape())
            ),
        ));
    }
    let min_covered = if inputs.len() >= 3 {
        let m = &inputs[2];
        if !m.shape().is_empty() {
            return Err(invalid(
                op,
                format!(
                    "min_object_covered must be 0-D, got shape {}",
                    shape_string(m.shape())
                ),
            ));
        }
        let v: f32 = m.to_scalar()?;
        if v.is_nan() || v < 0.0 {
            return Err(invalid(
                op,
                format!("Min object covered must be non-negative: {v}"),
            ));
        }
        v
    } else {
        p.min_covered
    };
    let coords: Vec<f32> = boxes_t.to_vec()?;
    let mut boxes = Vec::with_capacity(coords.len() / 4);
    for b in coords.chunks_exact(4) {
        if let Some(bad) = b.iter().find(|&&c| !(0.0..=1.0).contains(&c)) {
            return Err(invalid(
                op,
                format!(
                    "All bounding box coordinates must be in [0.0, 1.0]: {}",
                    if bad.is_nan() {
                        "nan".to_string()
                    } else {
                        bad.to_string()
                    }
                ),
            ));
        }
        // float * int, truncated (the values are within [0, size]).
        let px = |c: f32, n: i32| (c * n as f32) as i32;
        boxes.push(Rect {
            min_x: px(b[1], width),
            min_y: px(b[0], height),
            max_x: px(b[3], width),
            max_y: px(b[2], height),
        });
    }
    let image = Rect {
        min_x: 0,
        min_y: 0,
        max_x: width,
        max_y: height,
    };
    if boxes.is_empty() {
        if !p.use_image {
            return Err(invalid(
                op,
                "No bounding boxes provided as input. One must enable \
                 use_image_if_no_bounding_boxes if you wish to not provide any bounding boxes.",
            ));
        }
        boxes.push(image);
    }
    let mut words = Words::new(rng);
    let mut crop = None;
    for _ in 0..p.attempts {
        let aspect = unit_f32(words.next_word()) * (p.aspect[1] - p.aspect[0]) + p.aspect[0];
        let c = random_crop(width, height, (p.area[0], p.area[1]), aspect, &mut words);
        if let Some(c) = c.filter(|c| covers(c, min_covered, &boxes)) {
            crop = Some(c);
            break;
        }
    }
    let c = crop.unwrap_or(image);
    let (tw, th) = (c.max_x - c.min_x, c.max_y - c.min_y);
    let begin = [i64::from(c.min_y), i64::from(c.min_x), 0];
    let size = [i64::from(th), i64::from(tw), -1];
    let int_tensor = |v: [i64; 3]| -> Result<Tensor> {
        let t = Tensor::vector(&v);
        if dtype == DType::Int64 {
            Ok(t)
        } else {
            tfdata_dataset::kernels::cast(&t, dtype)
        }
    };
    let bbox = [
        c.min_y as f32 / height as f32,
        c.min_x as f32 / width as f32,
        c.max_y as f32 / height as f32,
        c.max_x as f32 / width as f32,
    ];
    Ok(vec![
        int_tensor(begin)?,
        int_tensor(size)?,
        Tensor::from_slice(&bbox, vec![1, 1, 4])?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lrintf_rounds_half_to_even() {
        assert_eq!(lrintf(2.5), 2);
        assert_eq!(lrintf(3.5), 4);
        assert_eq!(lrintf(-0.5), 0);
    }

    #[test]
    fn crops_stay_inside_the_image() {
        let mut words = Words::new(key_counter_of_seed(1, 2));
        for _ in 0..200 {
            let aspect = unit_f32(words.next_word()) * 0.58 + 0.75;
            if let Some(c) = random_crop(37, 23, (0.05, 1.0), aspect, &mut words) {
                assert!(c.min_x >= 0 && c.max_x <= 37 && c.min_y >= 0 && c.max_y <= 23);
                assert!(c.max_x > c.min_x && c.max_y > c.min_y);
            }
        }
    }
}
