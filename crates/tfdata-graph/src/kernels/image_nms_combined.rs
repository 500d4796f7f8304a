//! `CombinedNonMaxSuppression` (`tf.image.combined_non_max_suppression`):
//! hard NMS per batch image and class, then the best `max_total_size`
//! detections of each image across classes, boxes optionally clipped to
//! [0, 1], padded with zeros.
//!
//! TensorFlow ranks candidates by score alone, both in the per-class queue
//! and in the final sort, so tied scores come out in the order libstdc++'s
//! heap and introsort leave them; [`super::libstdcxx_order`] replays those.
//! Per class, a candidate is dropped when its IoU with any box already
//! selected for that class is above the threshold (compared newest first).

use tfdata_core::{DType, Error, Result, Tensor};

use super::libstdcxx_order::{PriorityQueue, sort};
use super::strings::shape_string;
use super::{Compute, KernelDef, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

const OP: &str = "CombinedNonMaxSuppression";

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: OP,
    outputs: |_| {
        Ok(vec![
            ("nmsed_boxes", 1),
            ("nmsed_scores", 1),
            ("nmsed_classes", 1),
            ("valid_detections", 1),
        ])
    },
    build,
}];

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{OP}: {message}"))
}

/// C++'s `std::min`/`std::max` on floats: the first argument unless the
/// comparison says otherwise, so NaN propagates as TensorFlow's does.
fn cmin(a: f32, b: f32) -> f32 {
    if b < a { b } else { a }
}
fn cmax(a: f32, b: f32) -> f32 {
    if a < b { b } else { a }
}

/// TensorFlow's IoU of two `[y1, x1, y2, x2]` boxes, corners normalised,
/// zero when either has no area.
fn iou(i: &[f32], j: &[f32]) -> f32 {
    let (ymin_i, xmin_i) = (cmin(i[0], i[2]), cmin(i[1], i[3]));
    let (ymax_i, xmax_i) = (cmax(i[0], i[2]), cmax(i[1], i[3]));
    let (ymin_j, xmin_j) = (cmin(j[0], j[2]), cmin(j[1], j[3]));
    let (ymax_j, xmax_j) = (cmax(j[0], j[2]), cmax(j[1], j[3]));
    let area_i = (ymax_i - ymin_i) * (xmax_i - xmin_i);
    let area_j = (ymax_j - ymin_j) * (xmax_j - xmin_j);
    if area_i <= 0.0 || area_j <= 0.0 {
        return 0.0;
    }
    let ih = cmax(cmin(ymax_i, ymax_j) - cmax(ymin_i, ymin_j), 0.0);
    let iw = cmax(cmin(xmax_i, xmax_j) - cmax(xmin_i, xmin_j), 0.0);
    let inter = ih * iw;
    inter / (area_i + area_j - inter)
}

#[derive(Clone, Copy)]
struct Detection {
    /// -1 for an empty slot.
    box_index: i32,
    score: f32,
    class: i32,
    coords: [f32; 4],
}

fn scalar<T: tfdata_core::NativeType>(t: &Tensor, what: &str) -> Result<T> {
    if !t.shape().is_empty() {
        return Err(invalid(format!(
            "{what} must be 0-D, got shape {}",
            shape_string(t.shape())
        )));
    }
    t.to_scalar::<T>()
        .map_err(|_| invalid(format!("{what} has the wrong dtype {}", t.dtype())))
}

fn build(attrs: &NodeAttrs) -> Result<Compute> {
    let pad_per_class = attrs.bool_or("pad_per_class", false)?;
    let clip_boxes = attrs.bool_or("clip_boxes", true)?;
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 6)?;
        let (boxes_t, scores_t) = (&inputs[0], &inputs[1]);
        for (t, what) in [(boxes_t, "boxes"), (scores_t, "scores")] {
            if t.dtype() != DType::Float {
                return Err(invalid(format!(
                    "{what} must be float32, got {}",
                    t.dtype()
                )));
            }
        }
        let (bs, ss) = (boxes_t.shape(), scores_t.shape());
        if bs.len() != 4 {
            return Err(invalid(format!("boxes must be 4-D{}", shape_string(bs))));
        }
        // TensorFlow 2.21 does not check this rank (a CHECK failure aborts
        // its process); ours is an InvalidArgument.
        if ss.len() != 3 {
            return Err(invalid(format!(
                "scores must be 3-D [batch, num_boxes, num_classes], got shape {}",
                shape_string(ss)
            )));
        }
        let (num_boxes, num_classes) = (bs[1], ss[2]);
        if bs[2] != 1 && bs[2] != num_classes {
            return Err(invalid(
                "third dimension of boxes must be either 1 or num classes",
            ));
        }
        if bs[3] != 4 {
            return Err(invalid("boxes must have 4 columns"));
        }
        if ss[1] != num_boxes {
            return Err(invalid("scores has incompatible shape"));
        }
        if bs[0] != ss[0] {
            return Err(invalid("boxes and scores must have same batch size"));
        }
        let max_per_class = scalar::<i32>(&inputs[2], "max_size_per_class")?;
        if max_per_class <= 0 {
            return Err(invalid("max_size_per_class must be positive"));
        }
        let max_total = scalar::<i32>(&inputs[3], "max_total_size")?;
        if max_total <= 0 {
            return Err(invalid("max_total_size must be > 0"));
        }
        let iou_threshold = scalar::<f32>(&inputs[4], "iou_threshold")?;
        let score_threshold = scalar::<f32>(&inputs[5], "score_threshold")?;
        if !(0.0..=1.0).contains(&iou_threshold) {
            return Err(invalid("iou_threshold must be in [0, 1]"));
        }
        let (batches, n, q, classes) = (
            bs[0] as usize,
            num_boxes as usize,
            bs[2] as usize,
            num_classes as usize,
        );
        let size_per_class = (max_per_class as usize).min(n);
        let slots = size_per_class as u64 * classes as u64;
        if slots > i32::MAX as u64 {
            return Err(invalid("size_per_class * num_classes causes overflow"));
        }
        let max_total_all = (i64::from(max_per_class) * classes as i64).min(i64::from(i32::MAX));
        let per_batch = if pad_per_class {
            i64::from(max_total).min(max_total_all)
        } else {
            i64::from(max_total)
        } as usize;
        let out_values = batches as u64 * per_batch as u64;
        check_size(OP, DType::Float, out_values.saturating_mul(4))?;
        check_size(OP, DType::Float, slots)?;
        let boxes: Vec<f32> = boxes_t.to_vec()?;
        let scores: Vec<f32> = scores_t.to_vec()?;
        let mut out_boxes = vec![0f32; per_batch * batches * 4];
        let mut out_scores = vec![0f32; per_batch * batches];
        let mut out_classes = vec![0f32; per_batch * batches];
        let mut valid = Vec::with_capacity(batches);
        let empty = Detection {
            box_index: -1,
            score: f32::NEG_INFINITY,
            class: -1,
            coords: [0.0; 4],
        };
        for b in 0..batches {
            let batch_boxes = &boxes[b * n * q * 4..(b + 1) * n * q * 4];
            let batch_scores = &scores[b * n * classes..(b + 1) * n * classes];
            let mut found = vec![empty; slots as usize];
            for class in 0..classes {
                let class_box = if q > 1 { class } else { 0 };
                let coords = |i: usize| {
                    let at = (i * q + class_box) * 4;
                    &batch_boxes[at..at + 4]
                };
                let mut queue = PriorityQueue::new(|a: &(usize, f32), b: &(usize, f32)| a.1 < b.1);
                for i in 0..n {
                    let s = batch_scores[i * classes + class];
                    if s > score_threshold {
                        queue.push((i, s));
                    }
                }
                let mut selected: Vec<usize> = Vec::new();
                while selected.len() < size_per_class {
                    let Some((i, s)) = queue.pop() else { break };
                    let c = coords(i);
                    if selected
                        .iter()
                        .rev()
                        .any(|&j| iou(c, coords(j)) > iou_threshold)
                    {
                        continue;
                    }
                    found[selected.len() + size_per_class * class] = Detection {
                        box_index: i as i32,
                        score: s,
                        class: class as i32,
                        coords: [c[0], c[1], c[2], c[3]],
                    };
                    selected.push(i);
                }
            }
            sort(&mut found, &|a: &Detection, b: &Detection| {
                b.score < a.score
            });
            let count = found.iter().filter(|d| d.box_index > -1).count();
            let take = if pad_per_class {
                per_batch.min(count)
            } else {
                count.min(max_total as usize)
            };
            valid.push(take as i32);
            for (k, d) in found.iter().take(take).enumerate() {
                let at = b * per_batch + k;
                for (slot, &v) in out_boxes[at * 4..at * 4 + 4].iter_mut().zip(&d.coords) {
                    *slot = if clip_boxes {
                        cmax(cmin(v, 1.0), 0.0)
                    } else {
                        v
                    };
                }
                out_scores[at] = d.score;
                out_classes[at] = d.class as f32;
            }
        }
        let (b, p) = (batches as i64, per_batch as i64);
        Ok(vec![
            Tensor::from_slice(&out_boxes, vec![b, p, 4])?,
            Tensor::from_slice(&out_scores, vec![b, p])?,
            Tensor::from_slice(&out_classes, vec![b, p])?,
            Tensor::vector(&valid),
        ])
    }))
}
