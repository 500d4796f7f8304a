//! Bincounts of sparse and ragged inputs: `SparseBincount` and
//! `RaggedBincount`, with TensorFlow 2.21's shapes, dtypes, sums (in input
//! order, as TF's CPU kernels add) and error messages.
//!
//! TF misbehaves on some malformed inputs, and those are refused here with
//! a clear `InvalidArgument` instead of copying the misbehaviour:
//! - `RaggedBincount` with decreasing `splits` (TF silently files values
//!   under the wrong rows) or `weights` whose size differs from `values`'
//!   (TF reads past the end of a short weights buffer);
//! - `SparseBincount` with a rank-0 `dense_shape` (TF's process crashes).

use tfdata_core::{DType, Result, Tensor};

use super::counting::Weight;
use super::numeric::{
    at, buffer, dispatch, expect_dtype, finish, index_values, invalid, out_elements, shape_str,
};
use super::{Compute, KernelDef};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "SparseBincount",
        outputs: |_| Ok(vec![("output", 1)]),
        build: build_sparse,
    },
    KernelDef {
        op: "RaggedBincount",
        outputs: |_| Ok(vec![("output", 1)]),
        build: build_ragged,
    },
];

/// Checks the `Tidx` and `T` attrs against the dtypes TF registers, and
/// reads `binary_output`.
fn check_attrs(attrs: &NodeAttrs) -> Result<bool> {
    use DType::*;
    let op = attrs.op.to_string();
    for (key, allowed) in [
        ("Tidx", &[Int32, Int64][..]),
        ("T", &[Int32, Int64, Float, Double]),
    ] {
        if attrs.has(key) {
            let t = attrs.dtype(key)?;
            if !allowed.contains(&t) {
                return Err(attrs.error(super::numeric::unsupported(&op, t)));
            }
        }
    }
    attrs.bool_or("binary_output", false)
}

/// The bin count `size`: a non-negative scalar of the values' dtype.
fn read_size(op: &str, size: &Tensor, values: &Tensor, index: usize) -> Result<i64> {
    expect_dtype(op, size, index, values.dtype())?;
    if !size.shape().is_empty() {
        return Err(invalid(
            op,
            format!("Shape must be rank 0 but is rank {}", size.shape().len()),
        ));
    }
    let n = index_values(op, "size", size)?[0];
    if n < 0 {
        return Err(invalid(op, format!("size ({n}) must be non-negative")));
    }
    Ok(n)
}

/// Adds each value into `(row, value)` of a `[rows, size]` table, dropping
/// values at or past `size`; `binary` sets present bins to one instead.
fn accumulate<T: Weight>(
    rows: usize,
    size: usize,
    entries: impl Iterator<Item = (usize, usize, usize)>,
    weights: Option<&[u8]>,
    binary: bool,
) -> Vec<u8> {
    let mut out = vec![T::ZERO; rows * size];
    for (k, row, value) in entries {
        if value >= size {
            continue;
        }
        let slot = &mut out[row * size + value];
        *slot = if binary {
            T::one()
        } else {
            match weights {
                Some(w) => slot.plus(at::<T>(w, k).ftz()),
                None => slot.plus(T::one()),
            }
        };
    }
    let mut data = Vec::with_capacity(out.len() * T::SIZE);
    for x in out {
        x.put(&mut data);
    }
    data
}

fn build_sparse(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    let binary = check_attrs(attrs)?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 5)?;
        let out = dispatch!(
            inputs[4].dtype(),
            &op,
            [Int32, Int64, Float, Double],
            sparse(&op, &inputs, binary)
        )?;
        Ok(vec![out])
    }))
}

fn sparse<T: Weight>(op: &str, v: &[Tensor], binary: bool) -> Result<Tensor> {
    let (indices, values, dense_shape, size, weights) = (&v[0], &v[1], &v[2], &v[3], &v[4]);
    expect_dtype(op, indices, 0, DType::Int64)?;
    expect_dtype(op, dense_shape, 2, DType::Int64)?;
    let n = read_size(op, size, values, 3)?;
    if indices.shape().len() != 2 {
        return Err(invalid(
            op,
            format!(
                "Sparse indices must be rank 2 but is rank {}",
                indices.shape().len()
            ),
        ));
    }
    if values.shape().len() != 1 {
        return Err(invalid(
            op,
            format!(
                "Sparse values must be rank 1 but is rank {}",
                values.shape().len()
            ),
        ));
    }
    if dense_shape.shape().len() != 1 {
        return Err(invalid(
            op,
            format!(
                "Sparse shape must be rank 1 but is rank {}",
                dense_shape.shape().len()
            ),
        ));
    }
    let shape = index_values(op, "dense_shape", dense_shape)?;
    let rank = shape.len();
    if rank == 0 {
        // TF 2.21's process crashes here; refused instead.
        return Err(invalid(op, "dense_shape must have at least one dimension"));
    }
    let (nnz, index_rank) = (indices.shape()[0], indices.shape()[1]);
    if index_rank != rank as i64 {
        return Err(invalid(
            op,
            format!("Index rank ({index_rank}) and shape rank ({rank}) do not match"),
        ));
    }
    if nnz != values.shape()[0] {
        return Err(invalid(
            op,
            format!(
                "Number of elements in indices ({nnz}) and values ({}) do not match",
                values.shape()[0]
            ),
        ));
    }
    let weighted = weights.num_elements() > 0;
    if weighted && weights.num_elements() != values.num_elements() {
        return Err(invalid(
            op,
            "Input indices and weights must have the same size.",
        ));
    }
    let idx = index_values(op, "indices", indices)?;
    for (i, tuple) in idx.chunks_exact(rank).enumerate() {
        if tuple.iter().zip(&shape).any(|(&x, &d)| x < 0 || x >= d) {
            let shown: Vec<String> = tuple.iter().map(i64::to_string).collect();
            return Err(invalid(
                op,
                format!(
                    "Sparse index tuple indices[{i}, :] = [{}] is out of bounds",
                    shown.join(", ")
                ),
            ));
        }
    }
    let vals = index_values(op, "values", values)?;
    if vals.iter().any(|&x| x < 0) {
        return Err(invalid(op, "Input arr must be non-negative!"));
    }
    let out_shape = if rank == 1 {
        vec![n]
    } else {
        vec![shape[0], n]
    };
    out_elements(op, T::DTYPE, &out_shape)?;
    let rows = if rank == 1 { 1 } else { shape[0] as usize };
    let wb = if weighted {
        Some(buffer(op, weights)?)
    } else {
        None
    };
    let entries = idx
        .chunks_exact(rank)
        .zip(&vals)
        .enumerate()
        .map(|(k, (tuple, &value))| {
            let row = if rank == 1 { 0 } else { tuple[0] as usize };
            (k, row, usize::try_from(value).unwrap_or(usize::MAX))
        });
    let data = accumulate::<T>(rows, n as usize, entries, wb, binary);
    finish(T::DTYPE, out_shape, data)
}

fn build_ragged(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    let binary = check_attrs(attrs)?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 4)?;
        let out = dispatch!(
            inputs[3].dtype(),
            &op,
            [Int32, Int64, Float, Double],
            ragged(&op, &inputs, binary)
        )?;
        Ok(vec![out])
    }))
}

fn ragged<T: Weight>(op: &str, v: &[Tensor], binary: bool) -> Result<Tensor> {
    let (splits, values, size, weights) = (&v[0], &v[1], &v[2], &v[3]);
    expect_dtype(op, splits, 0, DType::Int64)?;
    let n = read_size(op, size, values, 2)?;
    let splits = index_values(op, "splits", splits)?;
    let vals = index_values(op, "values", values)?;
    let Some((&first, &last)) = splits.first().zip(splits.last()) else {
        return Err(invalid(op, "Splits must be non-empty"));
    };
    if first != 0 {
        return Err(invalid(
            op,
            format!("Splits must start with 0, not with {first}"),
        ));
    }
    if last != vals.len() as i64 {
        return Err(invalid(
            op,
            format!(
                "Splits must end with the number of values, got {last} instead of {}",
                vals.len()
            ),
        ));
    }
    if splits.windows(2).any(|w| w[1] < w[0]) {
        // TF 2.21 files values under the wrong rows here; refused instead.
        return Err(invalid(
            op,
            format!("Splits must be non-decreasing, got {}", shape_str(&splits)),
        ));
    }
    let weighted = weights.num_elements() > 0;
    if weighted && weights.num_elements() != vals.len() as u64 {
        // TF 2.21 reads past the end of short weights; refused instead.
        return Err(invalid(
            op,
            format!(
                "weights must have as many elements as values ({}), got {}",
                vals.len(),
                weights.num_elements()
            ),
        ));
    }
    if vals.iter().any(|&x| x < 0) {
        return Err(invalid(op, "Input must be non-negative"));
    }
    let rows = splits.len() - 1;
    let out_shape = vec![rows as i64, n];
    out_elements(op, T::DTYPE, &out_shape)?;
    let wb = if weighted {
        Some(buffer(op, weights)?)
    } else {
        None
    };
    let entries = splits
        .windows(2)
        .enumerate()
        .flat_map(|(row, w)| (w[0] as usize..w[1] as usize).map(move |k| (row, k)));
    let entries = entries.map(|(row, k)| (k, row, usize::try_from(vals[k]).unwrap_or(usize::MAX)));
    let data = accumulate::<T>(rows, n as usize, entries, wb, binary);
    finish(T::DTYPE, out_shape, data)
}

#[cfg(test)]
mod tests {
    use super::super::testing::run;
    use tfdata_core::{Error, Tensor};

    fn refused(op: &str, inputs: Vec<Tensor>, needle: &str) {
        match run(op, &[], inputs) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains(needle), "{m}"),
            other => panic!("{op} not refused: {other:?}"),
        }
    }

    #[test]
    fn refuses_inputs_tensorflow_mishandles() {
        let empty = Tensor::vector::<f32>(&[]);
        refused(
            "RaggedBincount",
            vec![
                Tensor::vector(&[0i64, 2, 1, 2]),
                Tensor::vector(&[1i32, 3]),
                Tensor::scalar(4i32),
                empty.clone(),
            ],
            "non-decreasing",
        );
        refused(
            "RaggedBincount",
            vec![
                Tensor::vector(&[0i64, 2]),
                Tensor::vector(&[1i32, 3]),
                Tensor::scalar(4i32),
                Tensor::vector(&[1.0f32]),
            ],
            "as many elements",
        );
        refused(
            "SparseBincount",
            vec![
                Tensor::from_slice::<i64>(&[], vec![1, 0]).unwrap(),
                Tensor::vector(&[1i32]),
                Tensor::vector::<i64>(&[]),
                Tensor::scalar(4i32),
                empty,
            ],
            "at least one dimension",
        );
    }
}
