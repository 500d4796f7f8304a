//! Sparse transformations (`tf.sparse.reorder`, `reshape`, `slice`,
//! `concat`, `fill_empty_rows`, `sparse_dense_matmul`), in TensorFlow's
//! output order.

use tfdata_core::{DType, Result, Tensor};

use super::{Indices, concat_values, gather, indices_of, int64s, invalid, shape_str, vector_of};
use crate::attrs::NodeAttrs;
use crate::kernels::layout::take;
use crate::kernels::{Compute, check_size};

/// Checks a triple's parts agree: `n` values, `rank` dims.
fn agree(ind: &Indices, values: &Tensor, shape: &[i64]) -> Result<()> {
    if values.num_elements() as usize != ind.n {
        return Err(invalid(format!(
            "Number of elements in input_indices ({}) and input_values ({}) do not match",
            ind.n,
            values.num_elements()
        )));
    }
    if shape.len() != ind.rank {
        return Err(invalid(format!(
            "Number of dimensions in input_indices ({}) and input_shape ({}) do not match",
            ind.rank,
            shape.len()
        )));
    }
    Ok(())
}

/// Entry order by index, row-major; equal indices keep their order.
fn sorted_order(ind: &Indices) -> Vec<usize> {
    let mut order: Vec<usize> = (0..ind.n).collect();
    order.sort_by(|&a, &b| ind.row(a).cmp(ind.row(b)));
    order
}

pub(super) fn reorder(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [indices, values, shape] = take::<3>("SparseReorder", inputs)?;
        let ind = indices_of(&indices, "Input indices")?;
        vector_of(&values, "Input values")?;
        let dims = int64s(&shape, "Input shape")?;
        agree(&ind, &values, &dims)?;
        let order = sorted_order(&ind);
        let flat: Vec<i64> = order.iter().flat_map(|&i| ind.row(i).to_vec()).collect();
        let picks: Vec<Option<usize>> = order.into_iter().map(Some).collect();
        Ok(vec![
            Indices::tensor(flat, ind.n, ind.rank)?,
            gather(&values, &picks, None)?,
        ])
    }))
}

/// Product of `dims`, `None` on overflow.
fn product(dims: &[i64]) -> Option<i64> {
    dims.iter().try_fold(1i64, |a, &d| a.checked_mul(d))
}

pub(super) fn reshape(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [indices, shape, new_shape] = take::<3>("SparseReshape", inputs)?;
        let ind = indices_of(&indices, "Input indices")?;
        let dims = int64s(&shape, "Input shape")?;
        let target = int64s(&new_shape, "Target shape")?;
        if ind.rank != dims.len() {
            return Err(invalid(format!(
                "Input tensor rank must match input shape length: {} vs. {}",
                ind.rank,
                dims.len()
            )));
        }
        if let Some(d) = dims.iter().find(|&&d| d < 0) {
            return Err(invalid(format!(
                "Input shape {} has a negative dimension {d}",
                shape_str(&dims)
            )));
        }
        let dense = product(&dims).ok_or_else(|| invalid("input shape overflows"))?;
        let mut out = target.clone();
        let mut unknown = None;
        let mut known: i64 = 1;
        for (d, &size) in target.iter().enumerate() {
            if size == -1 {
                if let Some(u) = unknown {
                    return Err(invalid(format!(
                        "only one output dimension may be -1, not both {u} and {d}"
                    )));
                }
                unknown = Some(d);
            } else if size < 0 {
                return Err(invalid(format!(
                    "size {d} must be non-negative, not {size}"
                )));
            } else {
                known = known
                    .checked_mul(size)
                    .ok_or_else(|| invalid("target shape overflows"))?;
            }
        }
        if let Some(u) = unknown {
            if known == 0 || dense % known != 0 {
                out[u] = if known == 0 { 0 } else { dense / known };
                return Err(invalid(format!(
                    "Input to reshape is a SparseTensor with {dense} dense values, but the requested shape requires a multiple of {known}. input_shape={} output_shape={}",
                    shape_str(&dims),
                    shape_str(&out)
                )));
            }
            out[u] = dense / known;
        }
        let total = product(&out).ok_or_else(|| invalid("target shape overflows"))?;
        if total != dense {
            return Err(invalid(format!(
                "Input to reshape is a tensor with {dense} dense values, but the requested shape has {total}. input_shape={} output_shape={}",
                shape_str(&dims),
                shape_str(&out)
            )));
        }
        let strides = |d: &[i64]| {
            let mut s = vec![1i64; d.len()];
            for k in (0..d.len().saturating_sub(1)).rev() {
                s[k] = s[k + 1].saturating_mul(d[k + 1]);
            }
            s
        };
        let (from, to) = (strides(&dims), strides(&out));
        check_size("SparseReshape", DType::Int64, (ind.n * out.len()) as u64)?;
        let mut flat = Vec::with_capacity(ind.n * out.len());
        for i in 0..ind.n {
            let mut linear: i64 = ind
                .row(i)
                .iter()
                .zip(&from)
                .fold(0i64, |a, (&x, &s)| a.wrapping_add(x.wrapping_mul(s)));
            for &s in &to {
                flat.push(if s == 0 { 0 } else { linear / s });
                if s != 0 {
                    linear %= s;
                }
            }
        }
        Ok(vec![
            Indices::tensor(flat, ind.n, out.len())?,
            Tensor::vector(&out),
        ])
    }))
}

pub(super) fn slice(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [indices, values, shape, start, size] = take::<5>("SparseSlice", inputs)?;
        let ind = indices_of(&indices, "Input indices")?;
        vector_of(&values, "Input values")?;
        let dims = int64s(&shape, "Input shape")?;
        let start = int64s(&start, "Input start")?;
        let size = int64s(&size, "Input size")?;
        agree(&ind, &values, &dims)?;
        if start.len() != dims.len() || size.len() != dims.len() {
            return Err(invalid(format!(
                "Expected start and size to have {} elements, got {} and {}",
                dims.len(),
                start.len(),
                size.len()
            )));
        }
        let out_shape: Vec<i64> = (0..dims.len())
            .map(|d| size[d].min(dims[d].saturating_sub(start[d])).max(0))
            .collect();
        let mut flat = Vec::new();
        let mut picks = Vec::new();
        for i in 0..ind.n {
            let row = ind.row(i);
            let inside = (0..dims.len())
                .all(|d| row[d] >= start[d] && row[d] < start[d].saturating_add(size[d]));
            if inside {
                flat.extend(row.iter().zip(&start).map(|(&x, &s)| x - s));
                picks.push(Some(i));
            }
        }
        Ok(vec![
            Indices::tensor(flat, picks.len(), dims.len())?,
            gather(&values, &picks, None)?,
            Tensor::vector(&out_shape),
        ])
    }))
}

pub(super) fn concat(attrs: &NodeAttrs) -> Result<Compute> {
    let n = attrs.count("N")?;
    let axis = attrs.int("concat_dim")?;
    Ok(Box::new(move |inputs| {
        if inputs.len() != 3 * n || n == 0 {
            return Err(invalid(format!(
                "SparseConcat: expected {} inputs, got {}",
                3 * n,
                inputs.len()
            )));
        }
        let mut parts = Vec::with_capacity(n);
        for i in 0..n {
            let ind = indices_of(&inputs[i], &format!("Input indices[{i}]"))?;
            vector_of(&inputs[n + i], &format!("Input values[{i}]"))?;
            let dims = int64s(&inputs[2 * n + i], &format!("Input shapes[{i}]"))?;
            agree(&ind, &inputs[n + i], &dims)?;
            parts.push((ind, dims));
        }
        let rank = parts[0].1.len() as i64;
        if axis < -rank || axis >= rank {
            return Err(invalid(format!(
                "Concat dimension must be in range [{}, {rank}), got {axis}",
                -rank
            )));
        }
        let axis = if axis < 0 { axis + rank } else { axis } as usize;
        let mut out_shape = parts[0].1.clone();
        for (i, (_, dims)) in parts.iter().enumerate().skip(1) {
            if dims.len() != out_shape.len() {
                return Err(invalid(format!(
                    "Ranks of all input tensors must match: expected {} but got {} at position {i}",
                    out_shape.len(),
                    dims.len()
                )));
            }
            for d in 0..dims.len() {
                if d != axis && dims[d] != out_shape[d] {
                    return Err(invalid(format!(
                        "Input shapes must match: expected {} for dimension {d} but got {} at position {i}",
                        out_shape[d], dims[d]
                    )));
                }
            }
            out_shape[axis] = out_shape[axis].wrapping_add(dims[axis]);
        }
        let dtype = inputs[n].dtype();
        let total: usize = parts.iter().map(|p| p.0.n).sum();
        let mut all = Indices {
            flat: Vec::with_capacity(total * rank as usize),
            n: total,
            rank: rank as usize,
        };
        let mut offset = 0i64;
        for (ind, dims) in &parts {
            for k in 0..ind.n {
                let mut row = ind.row(k).to_vec();
                row[axis] = row[axis].wrapping_add(offset);
                all.flat.extend(row);
            }
            offset = offset.wrapping_add(dims[axis]);
        }
        let values: Vec<&Tensor> = inputs[n..2 * n].iter().collect();
        if values.iter().any(|v| v.dtype() != dtype) {
            return Err(invalid("SparseConcat: values of different dtypes"));
        }
        let values = concat_values(&values, dtype)?;
        // TensorFlow's output is in row-major order.
        let order = sorted_order(&all);
        let flat: Vec<i64> = order.iter().flat_map(|&i| all.row(i).to_vec()).collect();
        let picks: Vec<Option<usize>> = order.into_iter().map(Some).collect();
        Ok(vec![
            Indices::tensor(flat, total, rank as usize)?,
            gather(&values, &picks, None)?,
            Tensor::vector(&out_shape),
        ])
    }))
}

pub(in crate::kernels) fn fill_empty_rows(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [indices, values, shape, default] = take::<4>("SparseFillEmptyRows", inputs)?;
        let ind = indices_of(&indices, "indices")?;
        vector_of(&values, "values")?;
        let dims = int64s(&shape, "dense_shape")?;
        if !default.shape().is_empty() {
            return Err(invalid(format!(
                "default_value must be a scalar, saw: {}",
                shape_str(default.shape())
            )));
        }
        if values.num_elements() as usize != ind.n {
            return Err(invalid(format!(
                "Expected values.shape[0] == indices.shape[0] ({}), got {}",
                ind.n,
                values.num_elements()
            )));
        }
        let Some(&rows) = dims.first() else {
            return Err(invalid("dense_shape must not be empty"));
        };
        if ind.rank != dims.len() {
            return Err(invalid(format!(
                "indices have {} columns but dense_shape has {} dimensions",
                ind.rank,
                dims.len()
            )));
        }
        if rows < 0 {
            return Err(invalid(format!(
                "Dense shape rows must be >= 0, got {rows}"
            )));
        }
        // Three counters a row besides the indicator.
        check_size(
            "SparseFillEmptyRows",
            DType::Int64,
            (rows as u64).saturating_mul(3),
        )?;
        let rows = rows as usize;
        let mut counts = vec![0usize; rows];
        for i in 0..ind.n {
            let r = ind.row(i).first().copied().unwrap_or(0);
            if r < 0 || r as usize >= rows {
                return Err(invalid(format!(
                    "indices({i}, 0) is invalid: {r} >= {rows}"
                )));
            }
            counts[r as usize] += 1;
        }
        // Each row's first output slot: its entries, or one default.
        let mut first = vec![0usize; rows];
        let mut total = 0usize;
        for r in 0..rows {
            first[r] = total;
            total += counts[r].max(1);
        }
        check_size(
            "SparseFillEmptyRows",
            DType::Int64,
            (total * ind.rank.max(1)) as u64,
        )?;
        let rank = ind.rank;
        let mut flat = vec![0i64; total * rank];
        let mut picks: Vec<Option<usize>> = vec![None; total];
        let mut next = first.clone();
        let mut reverse = Vec::with_capacity(ind.n);
        for i in 0..ind.n {
            let r = ind.row(i)[0] as usize;
            let slot = next[r];
            next[r] += 1;
            flat[slot * rank..(slot + 1) * rank].copy_from_slice(ind.row(i));
            picks[slot] = Some(i);
            reverse.push(slot as i64);
        }
        let mut empty = vec![false; rows];
        for r in 0..rows {
            if counts[r] == 0 {
                empty[r] = true;
                if rank > 0 {
                    flat[first[r] * rank] = r as i64;
                }
            }
        }
        let default = default.clone();
        Ok(vec![
            Indices::tensor(flat, total, rank)?,
            gather(&values, &picks, Some(&default))?,
            Tensor::from_slice(&empty, vec![rows as i64])?,
            Tensor::vector(&reverse),
        ])
    }))
}

/// The matmul's accumulation `acc + a * b` in `T` (integers wrap, as
/// TensorFlow's do).
trait Num: Copy + Default {
    fn madd(self, a: Self, b: Self) -> Self;
}
impl Num for f32 {
    fn madd(self, a: Self, b: Self) -> Self {
        self + a * b
    }
}
impl Num for f64 {
    fn madd(self, a: Self, b: Self) -> Self {
        self + a * b
    }
}
impl Num for i32 {
    fn madd(self, a: Self, b: Self) -> Self {
        self.wrapping_add(a.wrapping_mul(b))
    }
}
impl Num for i64 {
    fn madd(self, a: Self, b: Self) -> Self {
        self.wrapping_add(a.wrapping_mul(b))
    }
}

fn matmul_typed<T: Num + tfdata_core::NativeType>(
    ind: &Indices,
    a: &Tensor,
    a_shape: [i64; 2],
    b: &Tensor,
    adjoint: (bool, bool),
) -> Result<Tensor> {
    let (adj_a, adj_b) = adjoint;
    let av = a.to_vec::<T>()?;
    let bv = b.to_vec::<T>()?;
    let (b_rows, b_cols) = (b.shape()[0], b.shape()[1]);
    let (m, k) = if adj_a {
        (a_shape[1], a_shape[0])
    } else {
        (a_shape[0], a_shape[1])
    };
    let (bk, n) = if adj_b {
        (b_cols, b_rows)
    } else {
        (b_rows, b_cols)
    };
    if k != bk {
        return Err(invalid(format!(
            "Cannot multiply A and B because inner dimension does not match: {k} vs. {bk}.  Did you forget a transpose?  Dimensions of A: [{}, {}).  Dimensions of B: {}",
            a_shape[0],
            a_shape[1],
            shape_str(b.shape())
        )));
    }
    if m < 0 || n < 0 {
        return Err(invalid("negative dimensions"));
    }
    check_size(
        "SparseTensorDenseMatMul",
        a.dtype(),
        (m as u64).saturating_mul(n as u64),
    )?;
    let (m, n, k) = (m as usize, n as usize, k as usize);
    let mut out = vec![T::default(); m * n];
    for (i, &a_value) in av.iter().enumerate().take(ind.n) {
        let row = ind.row(i);
        let (r, c) = if adj_a {
            (row[1], row[0])
        } else {
            (row[0], row[1])
        };
        if c < 0 || c as usize >= k {
            return Err(invalid(format!(
                "k ({c}) from index[{i},{}] out of bounds (>={k})",
                usize::from(!adj_a)
            )));
        }
        if r < 0 || r as usize >= m {
            return Err(invalid(format!(
                "m ({r}) from index[{i},{}] out of bounds (>={m})",
                usize::from(adj_a)
            )));
        }
        let (r, c) = (r as usize, c as usize);
        for j in 0..n {
            let bval = if adj_b {
                bv[j * bk as usize + c]
            } else {
                bv[c * n + j]
            };
            out[r * n + j] = out[r * n + j].madd(a_value, bval);
        }
    }
    Tensor::from_slice(&out, vec![m as i64, n as i64])
}

pub(super) fn dense_matmul(attrs: &NodeAttrs) -> Result<Compute> {
    let adjoint = (
        attrs.bool_or("adjoint_a", false)?,
        attrs.bool_or("adjoint_b", false)?,
    );
    Ok(Box::new(move |inputs| {
        let [indices, values, shape, b] = take::<4>("SparseTensorDenseMatMul", inputs)?;
        let ind = indices_of(&indices, "Tensor 'a_indices'")?;
        vector_of(&values, "Tensor 'a_values'")?;
        let dims = int64s(&shape, "Tensor 'a_shape'")?;
        if dims.len() != 2 || ind.rank != 2 {
            return Err(invalid(format!(
                "Tensor 'a_shape' must have 2 elements, got {}",
                dims.len()
            )));
        }
        if b.shape().len() != 2 {
            return Err(invalid(format!(
                "Tensor 'b' is not a matrix, got shape {}",
                shape_str(b.shape())
            )));
        }
        if values.num_elements() as usize != ind.n {
            return Err(invalid(format!(
                "Number of rows of a_indices does not match number of entries in a_values: {} vs {}",
                ind.n,
                values.num_elements()
            )));
        }
        if values.dtype() != b.dtype() {
            return Err(invalid("a_values and b must have one dtype"));
        }
        let a_shape = [dims[0], dims[1]];
        let out = match b.dtype() {
            DType::Float => matmul_typed::<f32>(&ind, &values, a_shape, &b, adjoint)?,
            DType::Double => matmul_typed::<f64>(&ind, &values, a_shape, &b, adjoint)?,
            DType::Int32 => matmul_typed::<i32>(&ind, &values, a_shape, &b, adjoint)?,
            DType::Int64 => matmul_typed::<i64>(&ind, &values, a_shape, &b, adjoint)?,
            other => {
                return Err(invalid(format!(
                    "SparseTensorDenseMatMul on {other} values is not supported"
                )));
            }
        };
        Ok(vec![out])
    }))
}
