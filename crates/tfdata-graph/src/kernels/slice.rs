//! Slicing and gathering: `StridedSlice` (Python's `x[...]`), `Slice`,
//! `GatherV2` and `Gather`, over element bytes like the rest of the layout
//! kernels ([`super::layout`]).

use tfdata_core::{Result, Tensor};

use super::layout::{
    Axis, Out, Src, checked_elements, err, ints, scalar_int, shape_str, strides, take, vector_ints,
    view,
};
use super::{Compute, KernelDef, one_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "StridedSlice",
        outputs: one_output,
        build: build_strided_slice,
    },
    KernelDef {
        op: "Slice",
        outputs: one_output,
        build: build_slice,
    },
    KernelDef {
        op: "GatherV2",
        outputs: one_output,
        build: build_gather_v2,
    },
    KernelDef {
        op: "Gather",
        outputs: one_output,
        build: build_gather,
    },
];

/// The five masks of a `StridedSlice` node.
#[derive(Clone, Copy, Default)]
struct Masks {
    begin: i64,
    end: i64,
    ellipsis: i64,
    new_axis: i64,
    shrink: i64,
}

fn bit(mask: i64, i: usize) -> bool {
    i < 64 && (mask >> i) & 1 == 1
}

/// One dimension of the input as the slice spec sees it once the ellipsis
/// and new axes are resolved (TensorFlow's "dense spec").
#[derive(Clone, Copy, Default)]
struct DenseDim {
    begin: i64,
    end: i64,
    stride: i64,
    begin_masked: bool,
    end_masked: bool,
    shrink: bool,
}

/// `x[begin:end:strides]` with TensorFlow's mask rules
/// (`ValidateStridedSliceOp`).
fn strided_slice(
    x: &Tensor,
    begin: &[i64],
    end: &[i64],
    strides_in: &[i64],
    m: Masks,
) -> Result<Tensor> {
    const OP: &str = "StridedSlice";
    if begin.len() != end.len() || begin.len() != strides_in.len() {
        return Err(err(
            OP,
            format!(
                "Expected begin, end, and strides to be 1D equal size tensors, but got shapes [{}], [{}], and [{}] instead.",
                begin.len(),
                end.len(),
                strides_in.len()
            ),
        ));
    }
    // Masks are 32-bit in TensorFlow; a longer spec cannot address its
    // later entries' bits.
    if begin.len() > 32 {
        return Err(err(
            OP,
            format!("a slice spec of {} entries exceeds 32", begin.len()),
        ));
    }
    let mut ellipsis = m.ellipsis & 0xffff_ffff;
    if ellipsis & (ellipsis - 1) != 0 {
        return Err(err(OP, "Multiple ellipses in slice spec not allowed"));
    }
    let mut sparse_dims = begin.len();
    let mut new_axes_after_ellipsis = 0i64;
    let mut ellipsis_seen = false;
    for i in 0..sparse_dims {
        if ellipsis_seen && bit(m.new_axis, i) {
            new_axes_after_ellipsis += 1;
        }
        if bit(ellipsis, i) {
            ellipsis_seen = true;
        }
    }
    // Without an ellipsis, one is implied at the end: unmentioned trailing
    // dimensions are taken whole.
    if !ellipsis_seen {
        ellipsis |= 1 << sparse_dims;
        sparse_dims += 1;
    }

    let shape = x.shape();
    let rank = shape.len();
    let mut dense = vec![
        DenseDim {
            stride: 1,
            ..DenseDim::default()
        };
        rank
    ];
    // Output dimensions: `Some(d)` is dense dimension `d`, `None` a new axis.
    let mut final_dims: Vec<Option<usize>> = Vec::with_capacity(rank + sparse_dims);
    let mut full = 0usize;
    for i in 0..sparse_dims {
        if bit(ellipsis, i) {
            let next = (rank as i64 - (sparse_dims - i) as i64 + 1 + new_axes_after_ellipsis)
                .min(rank as i64);
            while (full as i64) < next {
                dense[full] = DenseDim {
                    begin_masked: true,
                    end_masked: true,
                    stride: 1,
                    ..DenseDim::default()
                };
                final_dims.push(Some(full));
                full += 1;
            }
        } else if bit(m.new_axis, i) {
            final_dims.push(None);
        } else {
            if full == rank {
                return Err(err(
                    OP,
                    format!(
                        "Index out of range using input dim {full}; input has only {rank} dims"
                    ),
                ));
            }
            let (Some(&b), Some(&e), Some(&s)) = (begin.get(i), end.get(i), strides_in.get(i))
            else {
                return Err(err(OP, "slice spec shorter than its masks"));
            };
            let shrink = bit(m.shrink, i);
            dense[full] = DenseDim {
                begin: b,
                end: e,
                stride: s,
                begin_masked: bit(m.begin, i),
                end_masked: bit(m.end, i),
                shrink,
            };
            if !shrink {
                final_dims.push(Some(full));
            }
            full += 1;
        }
    }

    let in_strides = strides(shape);
    let mut base = 0i64;
    let mut axes = Vec::with_capacity(rank);
    for (i, d) in dense.iter().enumerate() {
        let dim = shape[i];
        let stride = d.stride;
        if stride == 0 {
            return Err(err(OP, format!("strides[{i}] must be non-zero")));
        }
        let (b, e) = if d.shrink {
            if stride < 0 {
                return Err(err(OP, "only stride 1 allowed on non-range indexing."));
            }
            let at = if d.begin < 0 {
                dim.saturating_add(d.begin)
            } else {
                d.begin
            };
            if at < 0 || at >= dim {
                return Err(err(
                    OP,
                    format!("slice index {at} of dimension {i} out of bounds."),
                ));
            }
            (at, at + 1)
        } else {
            // Masked ends are the extremes in the stride's direction;
            // explicit ones count from the back when negative and are
            // clamped into the range the stride can reach.
            let (lo, hi) = if stride > 0 { (0, dim) } else { (-1, dim - 1) };
            let canonical = |v: i64, masked: bool, is_end: bool| {
                if masked {
                    if (stride > 0) != is_end { lo } else { hi }
                } else {
                    let fwd = if v < 0 { dim.saturating_add(v) } else { v };
                    fwd.clamp(lo, hi)
                }
            };
            (
                canonical(d.begin, d.begin_masked, false),
                canonical(d.end, d.end_masked, true),
            )
        };
        let step = if d.shrink { 1 } else { stride };
        let interval = e - b;
        let size = if interval == 0 || ((interval < 0) != (step < 0)) {
            0
        } else {
            interval / step + i64::from(interval % step != 0)
        };
        if size > 0 {
            base = base.saturating_add(b.saturating_mul(in_strides[i]));
        }
        axes.push(Axis {
            n: size,
            stride: step.saturating_mul(in_strides[i]),
        });
    }
    let out_shape: Vec<i64> = final_dims
        .iter()
        .map(|f| f.and_then(|d| axes.get(d)).map_or(1, |a| a.n))
        .collect();
    view(OP, x, base, &axes, out_shape)
}

fn build_strided_slice(a: &NodeAttrs) -> Result<Compute> {
    let masks = Masks {
        begin: a.int_or("begin_mask", 0)?,
        end: a.int_or("end_mask", 0)?,
        ellipsis: a.int_or("ellipsis_mask", 0)?,
        new_axis: a.int_or("new_axis_mask", 0)?,
        shrink: a.int_or("shrink_axis_mask", 0)?,
    };
    Ok(Box::new(move |inputs| {
        let [x, begin, end, strides] = take("StridedSlice", inputs)?;
        for (t, what) in [(&begin, "begin"), (&end, "end"), (&strides, "strides")] {
            if t.shape().len() != 1 {
                return Err(err(
                    "StridedSlice",
                    format!(
                        "Expected begin, end, and strides to be 1D equal size tensors, but got shapes {}, {}, and {} instead. ({what})",
                        shape_str(begin.shape()),
                        shape_str(end.shape()),
                        shape_str(strides.shape())
                    ),
                ));
            }
        }
        let b = ints("StridedSlice", "begin", &begin)?;
        let e = ints("StridedSlice", "end", &end)?;
        let s = ints("StridedSlice", "strides", &strides)?;
        Ok(vec![strided_slice(&x, &b, &e, &s, masks)?])
    }))
}

fn build_slice(_: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "Slice";
    Ok(Box::new(|inputs| {
        let [x, begin_t, size_t] = take(OP, inputs)?;
        let rank = x.shape().len();
        let begin = vector_ints(OP, "begin", &begin_t)?;
        let size = vector_ints(OP, "size", &size_t)?;
        if begin.len() != rank || size.len() != rank {
            return Err(err(
                OP,
                format!(
                    "Expected begin and size arguments to be 1-D tensors of size {rank}, but got shapes {} and {} instead.",
                    shape_str(begin_t.shape()),
                    shape_str(size_t.shape())
                ),
            ));
        }
        let in_strides = strides(x.shape());
        let mut base = 0i64;
        let mut axes = Vec::with_capacity(rank);
        for (i, (&b, &s)) in begin.iter().zip(&size).enumerate() {
            let dim = x.shape()[i];
            let s = if s == -1 { dim.saturating_sub(b) } else { s };
            if dim == 0 {
                if b != 0 || s != 0 {
                    return Err(err(
                        OP,
                        format!(
                            "Expected begin[{i}] == 0 (got {b}) and size[{i}] == 0 (got {s}) when input.dim_size({i}) == 0"
                        ),
                    ));
                }
            } else {
                if !(0..=dim).contains(&b) {
                    return Err(err(
                        OP,
                        format!("Expected begin[{i}] in [0, {dim}], but got {b}"),
                    ));
                }
                if s < 0 || s > dim.saturating_sub(b) {
                    return Err(err(
                        OP,
                        format!("Expected size[{i}] in [0, {}], but got {s}", dim - b),
                    ));
                }
            }
            base = base.saturating_add(b.saturating_mul(in_strides[i]));
            axes.push(Axis {
                n: s,
                stride: in_strides[i],
            });
        }
        let shape = axes.iter().map(|a| a.n).collect();
        Ok(vec![view(OP, &x, base, &axes, shape)?])
    }))
}

/// TensorFlow's `SliceDebugString`: the multi-index of flat index `i`.
fn index_str(shape: &[i64], mut i: i64) -> String {
    if shape.is_empty() {
        return String::new();
    }
    let mut index = vec![0i64; shape.len()];
    for d in (0..shape.len()).rev() {
        if shape[d] > 0 {
            index[d] = i % shape[d];
            i /= shape[d];
        }
    }
    shape_str(&index)
}

fn gather(
    op: &str,
    params: &Tensor,
    indices: &Tensor,
    axis_value: i64,
    batch_dims: i64,
) -> Result<Tensor> {
    let p = params.shape();
    let q = indices.shape();
    let rank = p.len() as i64;
    if axis_value < -rank || axis_value >= rank {
        return Err(err(
            op,
            format!(
                "Expected axis in the range [{}, {rank}), but got {axis_value}",
                -rank
            ),
        ));
    }
    let at = if axis_value < 0 {
        axis_value + rank
    } else {
        axis_value
    } as usize;
    let q_rank = q.len() as i64;
    if batch_dims < -q_rank || batch_dims > q_rank {
        return Err(err(
            op,
            format!(
                "Expected batch_dims in the range [{}, {q_rank}], but got {batch_dims}",
                -q_rank
            ),
        ));
    }
    let bd = if batch_dims < 0 {
        batch_dims + q_rank
    } else {
        batch_dims
    } as usize;
    if bd > at {
        return Err(err(
            op,
            format!("batch_dims ({bd}) must be less than or equal to axis ({at})."),
        ));
    }
    for i in 0..bd {
        if p[i] != q[i] {
            return Err(err(
                op,
                format!(
                    "params.shape[{i}]: {} should be equal to indices.shape[{i}]: {}",
                    p[i], q[i]
                ),
            ));
        }
    }
    let mut shape = p[..at].to_vec();
    shape.extend_from_slice(&q[bd..]);
    shape.extend_from_slice(&p[at + 1..]);
    let total = checked_elements(op, params.dtype(), &shape)?;
    let mut out = Out::new(op, params.dtype(), total)?;
    if total > 0 {
        let index = ints(op, "indices", indices)?;
        let limit = p[at];
        if let Some((bad, v)) = index
            .iter()
            .enumerate()
            .find(|&(_, &v)| v < 0 || v >= limit)
        {
            return Err(err(
                op,
                format!(
                    "indices{} = {v} is not in [0, {limit})",
                    index_str(q, bad as i64)
                ),
            ));
        }
        let product = |s: &[i64]| s.iter().product::<i64>() as usize;
        let (outer, inner) = (product(&p[bd..at]), product(&p[at + 1..]));
        let per_batch = product(&q[bd..]);
        let src = Src::of(params);
        let limit = limit as usize;
        for (b, batch) in index.chunks(per_batch.max(1)).enumerate() {
            for o in 0..outer {
                let row = (b * outer + o) * limit;
                for &j in batch {
                    out.push(&src, (row + j as usize) * inner, inner)?;
                }
            }
        }
    }
    out.finish(params.dtype(), shape)
}

fn build_gather_v2(a: &NodeAttrs) -> Result<Compute> {
    let batch_dims = a.int_or("batch_dims", 0)?;
    Ok(Box::new(move |inputs| {
        let [params, indices, axis_t] = take("GatherV2", inputs)?;
        let axis_value = scalar_int("GatherV2", "axis", &axis_t)?;
        Ok(vec![gather(
            "GatherV2", &params, &indices, axis_value, batch_dims,
        )?])
    }))
}

fn build_gather(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [params, indices] = take("Gather", inputs)?;
        Ok(vec![gather("Gather", &params, &indices, 0, 0)?])
    }))
}

#[cfg(test)]
#[path = "slice_tests.rs"]
mod tests;
