//! SparseTensor kernels: a sparse tensor is three tensors, `indices`
//! (int64 `[N, R]`), `values` (`[N]`) and `dense_shape` (int64 `[R]`).
//!
//! * [`serialize`]: `SerializeSparse`, `SerializeManySparse`,
//!   `DeserializeSparse`, `DeserializeManySparse`: how a sparse tensor
//!   crosses a dataset boundary. TensorFlow makes it one `DT_VARIANT`
//!   tensor of shape `[3]` (batched: `[B, 3]`) holding the three tensors;
//!   tfdata's elements hold dense tensors only, so a variant-typed
//!   serialization is carried as the string form TensorFlow's `out_type =
//!   string` gives (each of the three a serialized `TensorProto`), which
//!   batches, shuffles and caches like any string tensor and which
//!   `DeserializeSparse` reads back.
//! * [`ops`]: `SparseReorder`, `SparseReshape`, `SparseSlice`,
//!   `SparseConcat`, `SparseFillEmptyRows`, `SparseTensorDenseMatMul`.
//! * [`arith`]: `SparseAdd`, `SparseTensorDenseAdd`.
//! * [`cwise`]: `SparseDenseCwiseAdd`/`Mul`/`Div`, `SparseSparseMaximum`/
//!   `Minimum`, `SparseSoftmax`.
//! * [`split`]: `SparseSplit`, one tensor cut in pieces along a dimension.
//! * [`grads`]: the gradients `SparseAddGrad`, `SparseFillEmptyRowsGrad`, `SparseSliceGrad`.
//! * [`reduce`]: `SparseReduceSum`, `SparseReduceMax` and their `...Sparse` forms.

mod arith;
mod cwise;
mod grads;
mod ops;
mod reduce;
mod serialize;
mod split;
pub(super) mod tensors_map;

pub(crate) use serialize::decode_variant_list;
pub use serialize::variant_constant;
// Shared with `RaggedFillEmptyRows` and its gradient, which are these on row ids.
pub(super) use grads::fill_empty_rows_grad;
pub(super) use ops::fill_empty_rows;

use tfdata_core::{DType, Error, Result, Tensor};

use super::layout::{Out, Src};
use super::{KernelDef, one_output};

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "SerializeSparse",
        outputs: |_| Ok(vec![("serialized_sparse", 1)]),
        build: serialize::serialize_sparse,
    },
    KernelDef {
        op: "SerializeManySparse",
        outputs: |_| Ok(vec![("serialized_sparse", 1)]),
        build: serialize::serialize_many_sparse,
    },
    KernelDef {
        op: "DeserializeSparse",
        outputs: |_| {
            Ok(vec![
                ("sparse_indices", 1),
                ("sparse_values", 1),
                ("sparse_shape", 1),
            ])
        },
        build: serialize::deserialize_sparse,
    },
    KernelDef {
        op: "DeserializeManySparse",
        outputs: |_| {
            Ok(vec![
                ("sparse_indices", 1),
                ("sparse_values", 1),
                ("sparse_shape", 1),
            ])
        },
        build: serialize::deserialize_many_sparse,
    },
    KernelDef {
        op: "SparseReorder",
        outputs: |_| Ok(vec![("output_indices", 1), ("output_values", 1)]),
        build: ops::reorder,
    },
    KernelDef {
        op: "SparseReshape",
        outputs: |_| Ok(vec![("output_indices", 1), ("output_shape", 1)]),
        build: ops::reshape,
    },
    KernelDef {
        op: "SparseSlice",
        outputs: |_| {
            Ok(vec![
                ("output_indices", 1),
                ("output_values", 1),
                ("output_shape", 1),
            ])
        },
        build: ops::slice,
    },
    KernelDef {
        op: "SparseConcat",
        outputs: |_| {
            Ok(vec![
                ("output_indices", 1),
                ("output_values", 1),
                ("output_shape", 1),
            ])
        },
        build: ops::concat,
    },
    KernelDef {
        op: "SparseFillEmptyRows",
        outputs: |_| {
            Ok(vec![
                ("output_indices", 1),
                ("output_values", 1),
                ("empty_row_indicator", 1),
                ("reverse_index_map", 1),
            ])
        },
        build: ops::fill_empty_rows,
    },
    KernelDef {
        op: "SparseReduceSum",
        outputs: |_| Ok(vec![("output", 1)]),
        build: reduce::reduce_sum,
    },
    KernelDef {
        op: "SparseReduceMax",
        outputs: |_| Ok(vec![("output", 1)]),
        build: reduce::reduce_max,
    },
    KernelDef {
        op: "SparseReduceSumSparse",
        outputs: |_| {
            Ok(vec![
                ("output_indices", 1),
                ("output_values", 1),
                ("output_shape", 1),
            ])
        },
        build: reduce::reduce_sum_sparse,
    },
    KernelDef {
        op: "SparseReduceMaxSparse",
        outputs: |_| {
            Ok(vec![
                ("output_indices", 1),
                ("output_values", 1),
                ("output_shape", 1),
            ])
        },
        build: reduce::reduce_max_sparse,
    },
    KernelDef {
        op: "SparseAdd",
        outputs: |_| {
            Ok(vec![
                ("sum_indices", 1),
                ("sum_values", 1),
                ("sum_shape", 1),
            ])
        },
        build: arith::sparse_add,
    },
    KernelDef {
        op: "SparseTensorDenseAdd",
        outputs: |_| Ok(vec![("output", 1)]),
        build: arith::dense_add,
    },
    KernelDef {
        op: "SparseTensorDenseMatMul",
        outputs: |_| Ok(vec![("product", 1)]),
        build: ops::dense_matmul,
    },
    KernelDef {
        op: "SparseDenseCwiseAdd",
        outputs: one_output,
        build: cwise::dense_add,
    },
    KernelDef {
        op: "SparseDenseCwiseMul",
        outputs: one_output,
        build: cwise::dense_mul,
    },
    KernelDef {
        op: "SparseDenseCwiseDiv",
        outputs: one_output,
        build: cwise::dense_div,
    },
    KernelDef {
        op: "SparseSparseMaximum",
        outputs: |_| Ok(vec![("output_indices", 1), ("output_values", 1)]),
        build: cwise::sparse_maximum,
    },
    KernelDef {
        op: "SparseSparseMinimum",
        outputs: |_| Ok(vec![("output_indices", 1), ("output_values", 1)]),
        build: cwise::sparse_minimum,
    },
    KernelDef {
        op: "SparseSoftmax",
        outputs: one_output,
        build: cwise::softmax,
    },
    KernelDef {
        op: "SparseSplit",
        outputs: split::outputs,
        build: split::sparse_split,
    },
    KernelDef {
        op: "SparseAddGrad",
        outputs: |_| Ok(vec![("a_val_grad", 1), ("b_val_grad", 1)]),
        build: grads::sparse_add_grad,
    },
    KernelDef {
        op: "SparseFillEmptyRowsGrad",
        outputs: |_| Ok(vec![("d_values", 1), ("d_default_value", 1)]),
        build: grads::fill_empty_rows_grad,
    },
    KernelDef {
        op: "SparseSliceGrad",
        outputs: |_| Ok(vec![("val_grad", 1)]),
        build: grads::slice_grad,
    },
];

fn invalid(msg: impl Into<String>) -> Error {
    Error::InvalidArgument(msg.into())
}

/// TensorFlow's `TensorShape::DebugString`.
fn shape_str(shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
}

/// A sparse tensor's indices, read and checked.
struct Indices {
    /// Row-major, `n * rank` values.
    flat: Vec<i64>,
    n: usize,
    rank: usize,
}

impl Indices {
    fn row(&self, i: usize) -> &[i64] {
        &self.flat[i * self.rank..(i + 1) * self.rank]
    }

    fn tensor(flat: Vec<i64>, n: usize, rank: usize) -> Result<Tensor> {
        Tensor::from_slice(&flat, vec![n as i64, rank as i64])
    }
}

/// `indices` as an int64 matrix (`what` names it in TensorFlow's words).
fn indices_of(t: &Tensor, what: &str) -> Result<Indices> {
    if t.shape().len() != 2 {
        return Err(invalid(format!(
            "{what} should be a matrix but received shape {}",
            shape_str(t.shape())
        )));
    }
    if t.dtype() != DType::Int64 {
        return Err(invalid(format!("{what} must be int64, got {}", t.dtype())));
    }
    Ok(Indices {
        flat: t.to_vec::<i64>()?,
        n: t.shape()[0] as usize,
        rank: t.shape()[1] as usize,
    })
}

/// A vector (`what` names it in TensorFlow's words).
fn vector_of<'a>(t: &'a Tensor, what: &str) -> Result<&'a Tensor> {
    if t.shape().len() != 1 {
        return Err(invalid(format!(
            "{what} should be a vector but received shape {}",
            shape_str(t.shape())
        )));
    }
    Ok(t)
}

/// An int64 vector's values.
fn int64s(t: &Tensor, what: &str) -> Result<Vec<i64>> {
    vector_of(t, what)?;
    if t.dtype() != DType::Int64 {
        return Err(invalid(format!("{what} must be int64, got {}", t.dtype())));
    }
    t.to_vec::<i64>()
}

/// The elements of `values` at `picks` (`None` picks `extra`'s first
/// element: a default value), as a vector.
fn gather(values: &Tensor, picks: &[Option<usize>], extra: Option<&Tensor>) -> Result<Tensor> {
    let src = Src::of(values);
    let extra_src = extra.map(Src::of);
    let mut out = Out::new("sparse", values.dtype(), picks.len() as u64)?;
    for p in picks {
        match (p, &extra_src) {
            (Some(i), _) => out.push(&src, *i, 1)?,
            (None, Some(e)) => out.push(e, 0, 1)?,
            (None, None) => return Err(Error::Internal("sparse gather without a default".into())),
        }
    }
    out.finish(values.dtype(), vec![picks.len() as i64])
}

/// Values of several tensors of one dtype, concatenated as a vector.
fn concat_values(parts: &[&Tensor], dtype: DType) -> Result<Tensor> {
    let total: usize = parts.iter().map(|t| t.num_elements() as usize).sum();
    let mut out = Out::new("SparseConcat", dtype, total as u64)?;
    for t in parts {
        out.push(&Src::of(t), 0, t.num_elements() as usize)?;
    }
    out.finish(dtype, vec![total as i64])
}

#[cfg(test)]
mod tests;
