//! Non-max suppression: `NonMaxSuppression` (V1: the IoU threshold an
//! attr) and `V2` (no score threshold), `V3`, `V4` (padded, with the
//! count), `V5` (soft-NMS with a Gaussian weight, and the scores), what
//! `tf.image.non_max_suppression[_padded|_with_scores]` emit, and
//! `NonMaxSuppressionWithOverlaps` (the similarity of two boxes given as a
//! matrix instead of computed as IoU).
//!
//! TensorFlow's greedy selection, replayed: candidates above the score
//! threshold in a priority queue (higher score first, lower index on
//! ties); each candidate is compared with the boxes selected since its last
//! visit, newest first, and either dropped (IoU above the threshold, hard
//! NMS), put back with a reduced score (soft NMS), or selected. IoU is
//! TensorFlow's float expression on corner-normalised boxes, zero for a
//! box without area.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use tfdata_core::{DType, Error, Result, Tensor};

use super::strings::shape_string;
use super::{Compute, KernelDef, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "NonMaxSuppression",
        outputs: |_| Ok(vec![("selected_indices", 1)]),
        build: |a| build(a, Version::V1),
    },
    KernelDef {
        op: "NonMaxSuppressionV2",
        outputs: |_| Ok(vec![("selected_indices", 1)]),
        build: |a| build(a, Version::V2),
    },
    KernelDef {
        op: "NonMaxSuppressionV3",
        outputs: |_| Ok(vec![("selected_indices", 1)]),
        build: |a| build(a, Version::V3),
    },
    KernelDef {
        op: "NonMaxSuppressionWithOverlaps",
        outputs: |_| Ok(vec![("selected_indices", 1)]),
        build: |a| build(a, Version::Overlaps),
    },
    KernelDef {
        op: "NonMaxSuppressionV4",
        outputs: |_| Ok(vec![("selected_indices", 1), ("valid_outputs", 1)]),
        build: |a| build(a, Version::V4),
    },
    KernelDef {
        op: "NonMaxSuppressionV5",
        outputs: |_| {
            Ok(vec![
                ("selected_indices", 1),
                ("selected_scores", 1),
                ("valid_outputs", 1),
            ])
        },
        build: |a| build(a, Version::V5),
    },
];

/// Which op: what its inputs are and what it returns.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Version {
    /// `iou_threshold` an attr; no score threshold.
    V1,
    /// `iou_threshold` an input; no score threshold.
    V2,
    V3,
    /// V3 and the count, optionally padded.
    V4,
    /// V4 (unpadded unless asked), the scores, soft NMS.
    V5,
    /// V3's inputs with an `[n, n]` similarity matrix for the boxes.
    Overlaps,
}

fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

#[derive(Clone, Copy)]
struct Candidate {
    index: usize,
    score: f32,
    begin: usize,
}

impl PartialEq for Candidate {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Candidate {
    /// TensorFlow's queue order: a is below b when its score is lower, or
    /// equal with a higher index.
    fn cmp(&self, o: &Self) -> Ordering {
        let less = |a: &Candidate, b: &Candidate| {
            (a.score == b.score && a.index > b.index) || a.score < b.score
        };
        if less(self, o) {
            Ordering::Less
        } else if less(o, self) {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }
}

fn iou(b: &[f32], i: usize, j: usize) -> f32 {
    let corners = |k: usize| {
        let r = &b[4 * k..4 * k + 4];
        (
            r[0].min(r[2]),
            r[1].min(r[3]),
            r[0].max(r[2]),
            r[1].max(r[3]),
        )
    };
    let (y0i, x0i, y1i, x1i) = corners(i);
    let (y0j, x0j, y1j, x1j) = corners(j);
    let area_i = (y1i - y0i) * (x1i - x0i);
    let area_j = (y1j - y0j) * (x1j - x0j);
    if area_i <= 0.0 || area_j <= 0.0 {
        return 0.0;
    }
    let ih = (y1i.min(y1j) - y0i.max(y0j)).max(0.0);
    let iw = (x1i.min(x1j) - x0i.max(x0j)).max(0.0);
    let inter = ih * iw;
    inter / (area_i + area_j - inter)
}

fn scalar_f32(op: &str, t: &Tensor, what: &str) -> Result<f32> {
    if !t.shape().is_empty() {
        return Err(invalid(
            op,
            format!("{what} must be 0-D, got shape {}", shape_string(t.shape())),
        ));
    }
    t.to_scalar::<f32>()
        .map_err(|_| invalid(op, format!("{what} must be float32, got {}", t.dtype())))
}

fn build(attrs: &NodeAttrs, version: Version) -> Result<Compute> {
    let op = attrs.op.to_string();
    let pad = matches!(version, Version::V4 | Version::V5)
        && attrs.bool_or("pad_to_max_output_size", false)?;
    for key in ["T", "T_threshold"] {
        if attrs.has(key) && attrs.dtype(key)? != DType::Float {
            return Err(Error::Unimplemented(format!(
                "{op}: {key}={} is not supported by tfdata (float32)",
                attrs.dtype(key)?
            )));
        }
    }
    let attr_iou = if version == Version::V1 {
        attrs.float_or("iou_threshold", 0.5)?
    } else {
        0.0
    };
    Ok(Box::new(move |inputs| {
        let op = op.as_str();
        let wanted = match version {
            Version::V1 => 3,
            Version::V2 => 4,
            Version::V5 => 6,
            _ => 5,
        };
        expect_inputs(op, &inputs, wanted)?;
        let (boxes_t, scores_t) = (&inputs[0], &inputs[1]);
        let max_t = &inputs[2];
        if !max_t.shape().is_empty() {
            let rank_note = if version == Version::Overlaps {
                String::new()
            } else {
                format!(
                    " (Shape must be rank 0 but is rank {})",
                    max_t.shape().len()
                )
            };
            return Err(invalid(
                op,
                format!(
                    "max_output_size must be 0-D, got shape {}{rank_note}",
                    shape_string(max_t.shape())
                ),
            ));
        }
        let max_out = max_t.to_scalar::<i32>()?;
        let threshold_name = if version == Version::Overlaps {
            "overlap_threshold"
        } else {
            "iou_threshold"
        };
        let iou_threshold = match version {
            Version::V1 => attr_iou,
            _ => scalar_f32(op, &inputs[3], threshold_name)?,
        };
        // V1 and V2 take every box (TensorFlow's lowest float, so a box
        // scored -inf is still left out).
        let score_threshold = match version {
            Version::V1 | Version::V2 => f32::MIN,
            _ => scalar_f32(op, &inputs[4], "score_threshold")?,
        };
        let sigma = if version == Version::V5 {
            scalar_f32(op, &inputs[5], "soft_nms_sigma")?
        } else {
            0.0
        };
        if version != Version::Overlaps && !(0.0..=1.0).contains(&iou_threshold) {
            return Err(invalid(op, "iou_threshold must be in [0, 1]"));
        }
        if version == Version::V5 && sigma < 0.0 {
            return Err(invalid(op, "soft_nms_sigma must be non-negative"));
        }
        let n = if version == Version::Overlaps {
            check_overlaps(op, boxes_t)?
        } else {
            check_boxes(op, boxes_t)?
        };
        if scores_t.shape().len() != 1 {
            return Err(invalid(
                op,
                format!(
                    "scores must be 1-D{} (Shape must be rank 1 but is rank {})",
                    shape_string(scores_t.shape()),
                    scores_t.shape().len()
                ),
            ));
        }
        if scores_t.shape()[0] as usize != n {
            return Err(invalid(
                op,
                format!(
                    "scores has incompatible shape (Dimensions must be equal, but are {n} and {})",
                    scores_t.shape()[0]
                ),
            ));
        }
        if max_out < 0 {
            return Err(invalid(op, "output size must be non-negative"));
        }
        let boxes: Vec<f32> = boxes_t.to_vec()?;
        let scores: Vec<f32> = scores_t.to_vec()?;
        // The similarity of a candidate to a selected box.
        let similarity = |candidate: usize, chosen: usize| {
            if version == Version::Overlaps {
                boxes[candidate * n + chosen]
            } else {
                iou(&boxes, candidate, chosen)
            }
        };
        let limit = max_out as usize;
        let mut heap: BinaryHeap<Candidate> = scores
            .iter()
            .enumerate()
            .filter(|&(_, &s)| s > score_threshold)
            .map(|(index, &score)| Candidate {
                index,
                score,
                begin: 0,
            })
            .collect();
        let soft = sigma > 0.0;
        let scale = if soft { -0.5 / sigma } else { 0.0 };
        let weight = |sim: f32| {
            let w = (scale * sim * sim).exp();
            if soft || sim <= iou_threshold { w } else { 0.0 }
        };
        let mut selected: Vec<usize> = Vec::new();
        let mut selected_scores: Vec<f32> = Vec::new();
        while selected.len() < limit {
            let Some(mut c) = heap.pop() else { break };
            let original = c.score;
            let mut hard = false;
            for j in (c.begin..selected.len()).rev() {
                let sim = similarity(c.index, selected[j]);
                c.score *= weight(sim);
                if !soft && sim > iou_threshold {
                    hard = true;
                    break;
                }
                if c.score <= score_threshold {
                    break;
                }
            }
            c.begin = selected.len();
            if !hard {
                if c.score == original {
                    selected.push(c.index);
                    selected_scores.push(c.score);
                    continue;
                }
                if c.score > score_threshold {
                    heap.push(c);
                }
            }
        }
        let valid = selected.len() as i32;
        let mut indices: Vec<i32> = selected.iter().map(|&i| i as i32).collect();
        if pad {
            indices.resize(limit, 0);
            selected_scores.resize(limit, 0.0);
        }
        let mut out = vec![Tensor::vector(&indices)];
        if version == Version::V5 {
            out.push(Tensor::vector(&selected_scores));
        }
        if matches!(version, Version::V4 | Version::V5) {
            out.push(Tensor::scalar(valid));
        }
        Ok(out)
    }))
}

/// `boxes` must be `[n, 4]`; returns n.
fn check_boxes(op: &str, boxes: &Tensor) -> Result<usize> {
    if boxes.shape().len() != 2 {
        return Err(invalid(
            op,
            format!(
                "boxes must be 2-D{} (Shape must be rank 2 but is rank {})",
                shape_string(boxes.shape()),
                boxes.shape().len()
            ),
        ));
    }
    if boxes.shape()[1] != 4 {
        return Err(invalid(
            op,
            format!(
                "boxes must have 4 columns (Dimension must be 4 but is {})",
                boxes.shape()[1]
            ),
        ));
    }
    Ok(boxes.shape()[0] as usize)
}

/// `overlaps` must be `[n, n]`; returns n.
fn check_overlaps(op: &str, overlaps: &Tensor) -> Result<usize> {
    let s = overlaps.shape();
    if s.len() != 2 {
        return Err(invalid(
            op,
            format!("overlaps must be 2-D{}", shape_string(s)),
        ));
    }
    if s[0] != s[1] {
        return Err(invalid(
            op,
            format!("overlaps must be square{}", shape_string(s)),
        ));
    }
    Ok(s[0] as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iou_of_overlapping_boxes() {
        let b = [0.0, 0.0, 1.0, 1.0, 0.0, 0.5, 1.0, 1.5, 1.0, 1.0, 0.0, 0.0];
        assert_eq!(iou(&b, 0, 1), 0.5 / 1.5);
        assert_eq!(iou(&b, 0, 2), 1.0, "flipped corners");
    }
}
