//! `SparseReduceSum`, `SparseReduceMax` (dense results) and their
//! `...Sparse` forms (`tf.sparse.reduce_sum`/`reduce_max`).
//!
//! As TensorFlow: entries are ordered by the kept dimensions then the
//! reduced ones, each run of equal kept coordinates is one output value,
//! and outputs no entry reaches are 0 (for the maximum too). A group is
//! summed in that order from 0; TensorFlow's Eigen sums groups of 8 or more
//! float values in vector lanes, so their last bits can differ.

use tfdata_core::{DType, NativeType, Result, Tensor};

use super::{Indices, indices_of, int64s, invalid, shape_str, vector_of};
use crate::attrs::NodeAttrs;
use crate::kernels::layout::take;
use crate::kernels::{Compute, check_size};

trait Reduce: NativeType + Default + PartialOrd {
    fn add(self, other: Self) -> Self;
}
impl Reduce for f32 {
    fn add(self, other: Self) -> Self {
        self + other
    }
}
impl Reduce for f64 {
    fn add(self, other: Self) -> Self {
        self + other
    }
}
impl Reduce for i32 {
    fn add(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
}
impl Reduce for i64 {
    fn add(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
}

/// The reduction's plan: kept dims (ascending), reduced dims, groups.
struct Groups<T> {
    kept: Vec<usize>,
    /// Kept coordinates and reduced value of each group, in order.
    groups: Vec<(Vec<i64>, T)>,
}

fn plan<T: Reduce>(
    ind: &Indices,
    values: &Tensor,
    dims: &[i64],
    axes: &Tensor,
    max: bool,
) -> Result<Groups<T>> {
    let rank = dims.len() as i64;
    let axes: Vec<i64> = match axes.dtype() {
        DType::Int32 => axes.to_vec::<i32>()?.into_iter().map(i64::from).collect(),
        _ => return Err(invalid("reduction_axes must be int32")),
    };
    let mut reduced = vec![false; dims.len()];
    for &a in &axes {
        if a < -rank || a >= rank {
            return Err(invalid(format!(
                "Invalid reduction dimension {a}, for input with {rank} dimensions."
            )));
        }
        reduced[(if a < 0 { a + rank } else { a }) as usize] = true;
    }
    let kept: Vec<usize> = (0..dims.len()).filter(|&d| !reduced[d]).collect();
    let order_dims: Vec<usize> = kept
        .iter()
        .copied()
        .chain((0..dims.len()).filter(|&d| reduced[d]))
        .collect();
    let mut order: Vec<usize> = (0..ind.n).collect();
    order.sort_by(|&a, &b| {
        order_dims
            .iter()
            .map(|&d| ind.row(a)[d].cmp(&ind.row(b)[d]))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let vals = values.to_vec::<T>()?;
    let mut groups: Vec<(Vec<i64>, T)> = Vec::new();
    for i in order {
        let coords: Vec<i64> = kept.iter().map(|&d| ind.row(i)[d]).collect();
        match groups.last_mut() {
            Some((c, acc)) if *c == coords => {
                *acc = if max {
                    if vals[i] > *acc { vals[i] } else { *acc }
                } else {
                    acc.add(vals[i])
                };
            }
            _ => groups.push((
                coords,
                if max {
                    vals[i]
                } else {
                    T::default().add(vals[i])
                },
            )),
        }
    }
    Ok(Groups { kept, groups })
}

fn inputs(inputs: Vec<Tensor>, op: &str) -> Result<(Indices, Tensor, Vec<i64>, Tensor)> {
    let [indices, values, shape, axes] = take::<4>(op, inputs)?;
    if shape.shape().len() != 1 {
        return Err(invalid(format!(
            "Expected input_shape to be a vector; got shape: {}",
            shape_str(shape.shape())
        )));
    }
    if axes.shape().len() > 1 {
        return Err(invalid(format!(
            "Expected reduction_axes to be a scalar or a vector; got shape: {}",
            shape_str(axes.shape())
        )));
    }
    let ind = indices_of(&indices, "Input indices")?;
    vector_of(&values, "Input values")?;
    let dims = int64s(&shape, "Input shape")?;
    if ind.rank != dims.len() || ind.n != values.num_elements() as usize {
        return Err(invalid(format!(
            "indices {}, values {} and shape {} do not match",
            shape_str(indices.shape()),
            shape_str(values.shape()),
            shape_str(&dims)
        )));
    }
    if let Some((i, d)) = (0..ind.n)
        .flat_map(|i| (0..ind.rank).map(move |d| (i, d)))
        .find(|&(i, d)| ind.row(i)[d] < 0 || ind.row(i)[d] >= dims[d])
    {
        return Err(invalid(format!(
            "Sparse index {} of entry {i} is out of bounds for dimension {d} of shape {}",
            ind.row(i)[d],
            shape_str(&dims)
        )));
    }
    Ok((ind, values, dims, axes))
}

fn out_shape(dims: &[i64], kept: &[usize], keep_dims: bool) -> Vec<i64> {
    if keep_dims {
        (0..dims.len())
            .map(|d| if kept.contains(&d) { dims[d] } else { 1 })
            .collect()
    } else {
        kept.iter().map(|&d| dims[d]).collect()
    }
}

fn dense<T: Reduce>(
    ind: &Indices,
    values: &Tensor,
    dims: &[i64],
    axes: &Tensor,
    max: bool,
    keep_dims: bool,
) -> Result<Tensor> {
    let g = plan::<T>(ind, values, dims, axes, max)?;
    let shape = out_shape(dims, &g.kept, keep_dims);
    let kept_dims: Vec<i64> = g.kept.iter().map(|&d| dims[d]).collect();
    let n = kept_dims
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
        .ok_or_else(|| invalid("output shape overflows"))?;
    check_size("SparseReduce", values.dtype(), n)?;
    let mut out = vec![T::default(); n as usize];
    for (coords, v) in g.groups {
        let at = coords
            .iter()
            .zip(&kept_dims)
            .fold(0i64, |a, (&c, &d)| a * d + c);
        out[at as usize] = v;
    }
    Tensor::from_slice(&out, shape)
}

fn sparse<T: Reduce>(
    ind: &Indices,
    values: &Tensor,
    dims: &[i64],
    axes: &Tensor,
    max: bool,
    keep_dims: bool,
) -> Result<Vec<Tensor>> {
    let g = plan::<T>(ind, values, dims, axes, max)?;
    let shape = out_shape(dims, &g.kept, keep_dims);
    let rank = shape.len();
    let mut flat = Vec::with_capacity(g.groups.len() * rank);
    let mut vals = Vec::with_capacity(g.groups.len());
    for (coords, v) in g.groups {
        if keep_dims {
            let mut row = vec![0i64; rank];
            for (j, &d) in g.kept.iter().enumerate() {
                row[d] = coords[j];
            }
            flat.extend(row);
        } else {
            flat.extend(coords);
        }
        vals.push(v);
    }
    Ok(vec![
        Indices::tensor(flat, vals.len(), rank)?,
        Tensor::vector(&vals),
        Tensor::vector(&shape),
    ])
}

macro_rules! by_dtype {
    ($f:ident, $dtype:expr, $($arg:expr),*) => {
        match $dtype {
            DType::Float => $f::<f32>($($arg),*),
            DType::Double => $f::<f64>($($arg),*),
            DType::Int32 => $f::<i32>($($arg),*),
            DType::Int64 => $f::<i64>($($arg),*),
            other => Err(invalid(format!("sparse reductions of {other} values are not supported"))),
        }
    };
}

fn build(attrs: &NodeAttrs, op: &'static str, max: bool, to_sparse: bool) -> Result<Compute> {
    let keep_dims = attrs.bool_or("keep_dims", false)?;
    Ok(Box::new(move |ins| {
        let (ind, values, dims, axes) = inputs(ins, op)?;
        if to_sparse {
            by_dtype!(
                sparse,
                values.dtype(),
                &ind,
                &values,
                &dims,
                &axes,
                max,
                keep_dims
            )
        } else {
            by_dtype!(
                dense,
                values.dtype(),
                &ind,
                &values,
                &dims,
                &axes,
                max,
                keep_dims
            )
            .map(|t| vec![t])
        }
    }))
}

pub(super) fn reduce_sum(a: &NodeAttrs) -> Result<Compute> {
    build(a, "SparseReduceSum", false, false)
}
pub(super) fn reduce_max(a: &NodeAttrs) -> Result<Compute> {
    build(a, "SparseReduceMax", true, false)
}
pub(super) fn reduce_sum_sparse(a: &NodeAttrs) -> Result<Compute> {
    build(a, "SparseReduceSumSparse", false, true)
}
pub(super) fn reduce_max_sparse(a: &NodeAttrs) -> Result<Compute> {
    build(a, "SparseReduceMaxSparse", true, true)
}
