//! Shape and layout ops: shape queries, reshapes, transposes, stacking,
//! concatenation and splitting. Tiling, filling, padding, reversing,
//! broadcasting and the pass-through ops are in `fill.rs`; slicing and
//! gathering in `slice.rs`.
//!
//! Every op here moves elements without reading them, over element bytes
//! or string handles ([`super::layout`]); the few that do read values
//! (`Range`, `Where`, `CheckNumerics`, `OnesLike`) do so by dtype tables,
//! not per-dtype copies of the op.

use tfdata_core::{DType, Result, Tensor};

use super::layout::{
    Axis, Out, Src, axis, checked_elements, err, int_tensor, ints, reshaped, scalar_int, shape_str,
    strides, take, vector_ints, view,
};
use super::{Compute, KernelDef, one_output, y_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "Shape",
        outputs: one_output,
        build: build_shape,
    },
    KernelDef {
        op: "ShapeN",
        outputs: n_outputs,
        build: build_shape_n,
    },
    KernelDef {
        op: "Size",
        outputs: one_output,
        build: build_size,
    },
    KernelDef {
        op: "Rank",
        outputs: one_output,
        build: build_rank,
    },
    KernelDef {
        op: "Reshape",
        outputs: one_output,
        build: build_reshape,
    },
    KernelDef {
        op: "ExpandDims",
        outputs: one_output,
        build: build_expand_dims,
    },
    KernelDef {
        op: "Squeeze",
        outputs: one_output,
        build: build_squeeze,
    },
    KernelDef {
        op: "Transpose",
        outputs: y_output,
        build: build_transpose,
    },
    KernelDef {
        op: "Pack",
        outputs: one_output,
        build: build_pack,
    },
    KernelDef {
        op: "Unpack",
        outputs: unpack_outputs,
        build: build_unpack,
    },
    KernelDef {
        op: "ConcatV2",
        outputs: one_output,
        build: build_concat_v2,
    },
    KernelDef {
        op: "Concat",
        outputs: one_output,
        build: build_concat,
    },
    KernelDef {
        op: "Split",
        outputs: split_outputs,
        build: build_split,
    },
    KernelDef {
        op: "SplitV",
        outputs: split_outputs,
        build: build_split_v,
    },
];

fn n_outputs(a: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("output", a.count("N")?)])
}

fn unpack_outputs(a: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("output", a.count("num")?)])
}

fn split_outputs(a: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("output", a.count("num_split")?)])
}

/// A dtype attribute that must be int32 or int64 (int32 if absent).
fn index_type(a: &NodeAttrs, key: &str) -> Result<DType> {
    let t = if a.has(key) {
        a.dtype(key)?
    } else {
        DType::Int32
    };
    match t {
        DType::Int32 | DType::Int64 => Ok(t),
        other => Err(a.error(format!(
            "attribute `{key}` must be int32 or int64, got {other}"
        ))),
    }
}

/// Elements of a part of a tensor's shape. Saturating: with a 0 elsewhere
/// in the shape the product can overflow, and then nothing is addressed.
pub(super) fn product(shape: &[i64]) -> i64 {
    shape.iter().fold(1i64, |n, &d| n.saturating_mul(d))
}

fn build_shape(a: &NodeAttrs) -> Result<Compute> {
    let out = index_type(a, "out_type")?;
    Ok(Box::new(move |inputs| {
        let [x] = take("Shape", inputs)?;
        let dims = x.shape();
        Ok(vec![int_tensor(
            "Shape",
            out,
            dims,
            vec![dims.len() as i64],
        )?])
    }))
}

fn build_shape_n(a: &NodeAttrs) -> Result<Compute> {
    let out = index_type(a, "out_type")?;
    let n = a.count("N")?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs("ShapeN", &inputs, n)?;
        inputs
            .iter()
            .map(|x| int_tensor("ShapeN", out, x.shape(), vec![x.shape().len() as i64]))
            .collect()
    }))
}

fn build_size(a: &NodeAttrs) -> Result<Compute> {
    let out = index_type(a, "out_type")?;
    Ok(Box::new(move |inputs| {
        let [x] = take("Size", inputs)?;
        let n = i64::try_from(x.num_elements()).map_err(|_| err("Size", "too many elements"))?;
        Ok(vec![int_tensor("Size", out, &[n], vec![])?])
    }))
}

fn build_rank(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [x] = take("Rank", inputs)?;
        Ok(vec![Tensor::scalar(x.shape().len() as i32)])
    }))
}

/// TensorFlow's `Reshape` size rules: one -1 inferred, zero dims allowed.
fn reshape_dims(op: &str, input: &[i64], sizes: &[i64]) -> Result<Vec<i64>> {
    let total: i64 = product(input);
    let mut shape = Vec::with_capacity(sizes.len());
    let mut known: i64 = 1;
    let mut unknown = None;
    let mut has_zero = false;
    for (d, &size) in sizes.iter().enumerate() {
        match size {
            -1 => {
                if let Some(u) = unknown {
                    return Err(err(
                        op,
                        format!("Only one input size may be -1, not both {u} and {d}"),
                    ));
                }
                unknown = Some(d);
                shape.push(1);
            }
            s if s < 0 => return Err(err(op, format!("Size {d} must be non-negative, not {s}"))),
            0 => {
                has_zero = true;
                shape.push(0);
            }
            s => {
                known = known.checked_mul(s).ok_or_else(|| {
                    err(
                        op,
                        format!("the requested shape {} is too large", shape_str(sizes)),
                    )
                })?;
                shape.push(s);
            }
        }
    }
    if let Some(u) = unknown {
        // Zero dims are left out of both counts (when the requested shape has
        // one) so the other dims can still be inferred, as TensorFlow does.
        let counted = input
            .iter()
            .filter(|&&d| d > 0 || !has_zero)
            .try_fold(1i64, |n, &d| n.checked_mul(d))
            .ok_or_else(|| {
                err(
                    op,
                    format!("the input shape {} is too large", shape_str(input)),
                )
            })?;
        let missing = counted / known;
        if missing * known != counted {
            return Err(err(
                op,
                format!(
                    "Input to reshape is a tensor with {total} values, but the requested shape requires a multiple of {known}"
                ),
            ));
        }
        shape[u] = missing;
    }
    let n = shape.iter().try_fold(1i64, |n, &d| n.checked_mul(d));
    if n != Some(total) {
        return Err(err(
            op,
            format!(
                "Input to reshape is a tensor with {total} values, but the requested shape has {}",
                n.map_or_else(|| "too many".to_string(), |n| n.to_string())
            ),
        ));
    }
    Ok(shape)
}

fn build_reshape(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [x, sizes] = take("Reshape", inputs)?;
        let sizes = vector_ints("Reshape", "sizes input", &sizes)?;
        let shape = reshape_dims("Reshape", x.shape(), &sizes)?;
        Ok(vec![reshaped(x, shape)?])
    }))
}

fn build_expand_dims(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [x, dim] = take("ExpandDims", inputs)?;
        let dim = match ints("ExpandDims", "dim", &dim)?.as_slice() {
            [d] => *d,
            _ => {
                return Err(err(
                    "ExpandDims",
                    "'dim' must be a tensor with a single value",
                ));
            }
        };
        let rank = x.shape().len() as i64;
        if dim < -1 - rank || dim > rank {
            return Err(err(
                "ExpandDims",
                format!("Tried to expand dim index {dim} for tensor with {rank} dimensions."),
            ));
        }
        let at = if dim < 0 { dim + rank + 1 } else { dim } as usize;
        let mut shape = x.shape().to_vec();
        shape.insert(at, 1);
        Ok(vec![reshaped(x, shape)?])
    }))
}

fn build_squeeze(a: &NodeAttrs) -> Result<Compute> {
    let dims = if a.has("squeeze_dims") {
        a.ints("squeeze_dims")?.to_vec()
    } else {
        Vec::new()
    };
    Ok(Box::new(move |inputs| {
        let [x] = take("Squeeze", inputs)?;
        let rank = x.shape().len() as i64;
        let mut wrapped = Vec::with_capacity(dims.len());
        for &d in &dims {
            if d < -rank || d >= rank {
                return Err(err(
                    "Squeeze",
                    format!("Tried to squeeze dim index {d} for tensor with {rank} dimensions."),
                ));
            }
            wrapped.push(if d < 0 { d + rank } else { d });
        }
        let mut shape = Vec::with_capacity(x.shape().len());
        for (i, &size) in x.shape().iter().enumerate() {
            if wrapped.contains(&(i as i64)) {
                if size != 1 {
                    return Err(err(
                        "Squeeze",
                        format!("Can not squeeze dim[{i}], expected a dimension of 1, got {size}"),
                    ));
                }
            } else if !(wrapped.is_empty() && size == 1) {
                shape.push(size);
            }
        }
        Ok(vec![reshaped(x, shape)?])
    }))
}

fn build_transpose(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [x, perm] = take("Transpose", inputs)?;
        let perm = vector_ints("Transpose", "perm", &perm)?;
        let rank = x.shape().len();
        if perm.len() != rank {
            return Err(err(
                "Transpose",
                format!(
                    "transpose expects a vector of size {rank}. But input(1) is a vector of size {}",
                    perm.len()
                ),
            ));
        }
        let mut seen = vec![false; rank];
        for &p in &perm {
            let Some(s) = usize::try_from(p).ok().and_then(|p| seen.get_mut(p)) else {
                return Err(err(
                    "Transpose",
                    format!("{p} is out of range [0 .. {rank})"),
                ));
            };
            *s = true;
        }
        if let Some(missing) = seen.iter().position(|&s| !s) {
            let shown: Vec<String> = perm.iter().map(i64::to_string).collect();
            return Err(err(
                "Transpose",
                format!("{missing} is missing from {{{}}}.", shown.join(",")),
            ));
        }
        let in_strides = strides(x.shape());
        let axes: Vec<Axis> = perm
            .iter()
            .map(|&p| Axis {
                n: x.shape()[p as usize],
                stride: in_strides[p as usize],
            })
            .collect();
        let shape = axes.iter().map(|a| a.n).collect();
        Ok(vec![view("Transpose", &x, 0, &axes, shape)?])
    }))
}

/// Checks that all `values` have `first`'s dtype.
fn same_dtype(op: &str, values: &[Tensor]) -> Result<DType> {
    let dtype = values.first().map_or(DType::Float, Tensor::dtype);
    if let Some(v) = values.iter().find(|v| v.dtype() != dtype) {
        return Err(err(op, format!("inputs mix {dtype} and {}", v.dtype())));
    }
    Ok(dtype)
}

fn build_pack(a: &NodeAttrs) -> Result<Compute> {
    let n = a.count("N")?;
    let axis_attr = a.int_or("axis", 0)?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs("Pack", &inputs, n)?;
        let Some(first) = inputs.first() else {
            return Err(err("Pack", "needs at least one input"));
        };
        let dtype = same_dtype("Pack", &inputs)?;
        let r = first.shape().len() as i64;
        if axis_attr < -r - 1 || axis_attr > r {
            return Err(err(
                "Pack",
                format!("axis = {axis_attr} not in [{}, {})", -r - 1, r + 1),
            ));
        }
        let at = if axis_attr < 0 {
            axis_attr + r + 1
        } else {
            axis_attr
        } as usize;
        if let Some((i, v)) = inputs
            .iter()
            .enumerate()
            .find(|(_, v)| v.shape() != first.shape())
        {
            return Err(err(
                "Pack",
                format!(
                    "Shapes of all inputs must match: values[0].shape = {} != values[{i}].shape = {}",
                    shape_str(first.shape()),
                    shape_str(v.shape())
                ),
            ));
        }
        let mut shape = first.shape().to_vec();
        shape.insert(at, n as i64);
        let total = checked_elements("Pack", dtype, &shape)?;
        // An empty output walks no rows (its other dims may be huge).
        let outer = if total == 0 {
            0
        } else {
            product(&first.shape()[..at]) as usize
        };
        let inner = product(&first.shape()[at..]) as usize;
        let srcs: Vec<Src> = inputs.iter().map(Src::of).collect();
        let mut out = Out::new("Pack", dtype, total)?;
        for o in 0..outer {
            for s in &srcs {
                out.push(s, o * inner, inner)?;
            }
        }
        Ok(vec![out.finish(dtype, shape)?])
    }))
}

fn build_unpack(a: &NodeAttrs) -> Result<Compute> {
    let num = a.count("num")?;
    let axis_attr = a.int_or("axis", 0)?;
    Ok(Box::new(move |inputs| {
        let [x] = take("Unpack", inputs)?;
        let r = x.shape().len() as i64;
        if axis_attr < -r || axis_attr >= r {
            return Err(err(
                "Unpack",
                format!("axis = {axis_attr} not in [{}, {r})", -r),
            ));
        }
        let at = if axis_attr < 0 {
            axis_attr + r
        } else {
            axis_attr
        } as usize;
        let dim = x.shape()[at];
        if dim != num as i64 {
            return Err(err(
                "Unpack",
                format!(
                    "Input shape axis {at} must equal {num}, got shape {}",
                    shape_str(x.shape())
                ),
            ));
        }
        let mut shape = x.shape().to_vec();
        shape.remove(at);
        let outer = product(&x.shape()[..at]);
        let inner = product(&x.shape()[at + 1..]);
        let axes = [
            Axis {
                n: outer,
                stride: dim.saturating_mul(inner),
            },
            Axis {
                n: inner,
                stride: 1,
            },
        ];
        (0..num as i64)
            .map(|i| view("Unpack", &x, i.saturating_mul(inner), &axes, shape.clone()))
            .collect()
    }))
}

fn concat(op: &str, axis_value: i64, values: &[Tensor]) -> Result<Tensor> {
    let Some(first) = values.first() else {
        return Err(err(op, "needs at least one input"));
    };
    let dtype = same_dtype(op, values)?;
    let rank = first.shape().len();
    if rank == 0 {
        return Err(err(
            op,
            "ConcatOp : Can't concatenate scalars (use tf.stack instead)",
        ));
    }
    let r = rank as i64;
    if axis_value < -r || axis_value >= r {
        return Err(err(
            op,
            format!(
                "ConcatOp : Expected concatenating dimensions in the range [{}, {r}), but got {axis_value}",
                -r
            ),
        ));
    }
    let at = if axis_value < 0 {
        axis_value + r
    } else {
        axis_value
    } as usize;
    let mut shape = first.shape().to_vec();
    shape[at] = 0;
    for (i, v) in values.iter().enumerate() {
        let show = || {
            format!(
                "shape[0] = {} vs. shape[{i}] = {}",
                shape_str(first.shape()),
                shape_str(v.shape())
            )
        };
        if v.shape().len() != rank {
            return Err(err(
                op,
                format!(
                    "ConcatOp : Ranks of all input tensors should match: {}",
                    show()
                ),
            ));
        }
        for (j, (&a, &b)) in first.shape().iter().zip(v.shape()).enumerate() {
            if j != at && a != b {
                return Err(err(
                    op,
                    format!(
                        "ConcatOp : Dimension {j} in both shapes must be equal: {}",
                        show()
                    ),
                ));
            }
        }
        shape[at] = shape[at]
            .checked_add(v.shape()[at])
            .ok_or_else(|| err(op, "the output is too large"))?;
    }
    let total = checked_elements(op, dtype, &shape)?;
    // An empty output walks no rows (its other dims may be huge).
    let outer = if total == 0 {
        0
    } else {
        product(&shape[..at]) as usize
    };
    let runs: Vec<(Src, usize)> = values
        .iter()
        .map(|v| (Src::of(v), product(&v.shape()[at..]) as usize))
        .collect();
    let mut out = Out::new(op, dtype, total)?;
    for o in 0..outer {
        for (src, inner) in &runs {
            out.push(src, o * inner, *inner)?;
        }
    }
    out.finish(dtype, shape)
}

fn build_concat_v2(a: &NodeAttrs) -> Result<Compute> {
    let n = a.count("N")?;
    Ok(Box::new(move |mut inputs| {
        super::expect_inputs("ConcatV2", &inputs, n + 1)?;
        let axis_t = inputs
            .pop()
            .ok_or_else(|| err("ConcatV2", "missing axis"))?;
        let axis_value = scalar_int("ConcatV2", "axis", &axis_t)?;
        Ok(vec![concat("ConcatV2", axis_value, &inputs)?])
    }))
}

fn build_concat(a: &NodeAttrs) -> Result<Compute> {
    let n = a.count("N")?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs("Concat", &inputs, n + 1)?;
        let (axis_t, values) = inputs
            .split_first()
            .ok_or_else(|| err("Concat", "missing axis"))?;
        let axis_value = scalar_int("Concat", "concat_dim", axis_t)?;
        Ok(vec![concat("Concat", axis_value, values)?])
    }))
}

/// Splits `x` along `dim` into pieces of `sizes`.
fn split(op: &str, x: &Tensor, dim_value: i64, sizes: &[i64]) -> Result<Vec<Tensor>> {
    let at = axis(op, dim_value, x.shape().len())?;
    let dim = x.shape()[at];
    let outer = product(&x.shape()[..at]);
    let inner = product(&x.shape()[at + 1..]);
    let mut start = 0i64;
    sizes
        .iter()
        .map(|&size| {
            let mut shape = x.shape().to_vec();
            shape[at] = size;
            let axes = [
                Axis {
                    n: outer,
                    stride: dim.saturating_mul(inner),
                },
                Axis {
                    n: size.saturating_mul(inner),
                    stride: 1,
                },
            ];
            let piece = view(op, x, start.saturating_mul(inner), &axes, shape);
            start += size;
            piece
        })
        .collect()
}

fn build_split(a: &NodeAttrs) -> Result<Compute> {
    let num = a.count("num_split")?;
    if num == 0 {
        return Err(a.error("num_split must be at least 1"));
    }
    Ok(Box::new(move |inputs| {
        let [dim_t, x] = take("Split", inputs)?;
        let dim_value = scalar_int("Split", "split_dim", &dim_t)?;
        let at = axis("Split", dim_value, x.shape().len())?;
        let size = x.shape()[at];
        if size % num as i64 != 0 {
            return Err(err(
                "Split",
                format!(
                    "Number of ways to split should evenly divide the split dimension, but got split_dim {dim_value} (size = {size}) and num_split {num}"
                ),
            ));
        }
        split("Split", &x, dim_value, &vec![size / num as i64; num])
    }))
}

fn build_split_v(a: &NodeAttrs) -> Result<Compute> {
    let num = a.count("num_split")?;
    Ok(Box::new(move |inputs| {
        let [x, sizes_t, dim_t] = take("SplitV", inputs)?;
        let dim_value = scalar_int("SplitV", "split_dim", &dim_t)?;
        let at = axis("SplitV", dim_value, x.shape().len())?;
        let dim = x.shape()[at];
        let mut sizes = vector_ints("SplitV", "size_splits", &sizes_t)?;
        if sizes.len() != num {
            return Err(err(
                "SplitV",
                format!(
                    "Length of size_splits should be equal to num_outputs: {} vs. {num}",
                    sizes.len()
                ),
            ));
        }
        let mut unknown = None;
        let mut known: i64 = 0;
        for (i, &s) in sizes.iter().enumerate() {
            if s == -1 {
                if unknown.is_some() {
                    return Err(err("SplitV", "There can only be one -1 in the input."));
                }
                unknown = Some(i);
            } else if s < 0 {
                return Err(err(
                    "SplitV",
                    format!("Split size at index {i} must be >= 0. Got: {s}"),
                ));
            } else {
                known = known.saturating_add(s);
            }
        }
        if (unknown.is_none() && known != dim) || (unknown.is_some() && known > dim) {
            return Err(err(
                "SplitV",
                format!(
                    "Determined shape must either match input shape along split_dim exactly if fully specified, or be less than the size of the input along split_dim if not fully specified.  Got: {known}"
                ),
            ));
        }
        if let Some(u) = unknown {
            sizes[u] = dim - known;
        }
        split("SplitV", &x, dim_value, &sizes)
    }))
}

#[cfg(test)]
#[path = "shape_tests.rs"]
pub(super) mod tests;
