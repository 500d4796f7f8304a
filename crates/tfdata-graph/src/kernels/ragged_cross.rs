//! `RaggedCross` (`tf.ragged.cross`, `tf.ragged.cross_hashed`): the feature
//! cross of rank-2 ragged, sparse and dense columns, as a ragged tensor.
//!
//! The combinations are those of `SparseCross` (one feature per column, the
//! last column varying fastest, a row with an empty column has none), but
//! the columns come in `input_order` (a string of `R`, `S`, `D`), not
//! sparse first, and the result is values plus row splits. A hashed cross
//! is TensorFlow's `FingerprintCat64` chain from `hash_key` (an int64
//! feature is its own value, a string its farmhash `Fingerprint64`), so the
//! buckets match a model trained by TensorFlow bit for bit.

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};

use super::ragged_variant::verify_splits;
use super::sparse_cross::{bucket, fingerprint_cat64};
use super::strings::hash::fingerprint64;
use super::{Compute, KernelDef, check_size};
use crate::attrs::NodeAttrs;

const OP: &str = "RaggedCross";

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: OP,
    outputs: |_| Ok(vec![("output_values", 1), ("output_row_splits", 1)]),
    build: ragged_cross,
}];

fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidArgument(message.into())
}

const RANK2: &str = "tf.ragged.cross only supports inputs with rank=2.";
const SAME_BATCH: &str = "inputs must all have the same batch dimension size.";

/// One column: its flat values and where each batch row's features start
/// (`starts[b]..starts[b + 1]`).
struct Feature<'a> {
    values: &'a Tensor,
    starts: Vec<usize>,
}

impl Feature<'_> {
    fn count(&self, b: usize) -> usize {
        self.starts[b + 1] - self.starts[b]
    }
}

/// The input lists, in the op's argument order.
struct Lists<'a> {
    ragged_values: &'a [Tensor],
    ragged_splits: &'a [Tensor],
    sparse_indices: &'a [Tensor],
    sparse_values: &'a [Tensor],
    sparse_shapes: &'a [Tensor],
    dense: &'a [Tensor],
}

fn int_vec(t: &Tensor) -> Result<Vec<i64>> {
    match t.dtype() {
        DType::Int32 => Ok(t.to_vec::<i32>()?.into_iter().map(i64::from).collect()),
        DType::Int64 => t.to_vec::<i64>(),
        other => Err(invalid(format!(
            "{OP}: expected an int32 or int64 tensor, got {other}"
        ))),
    }
}

/// TensorFlow's `ValidateInput` (shapes, splits, batch sizes); returns the
/// batch size.
fn validate(l: &Lists, splits_type: DType) -> Result<usize> {
    for (values, splits) in l.ragged_values.iter().zip(l.ragged_splits) {
        if values.shape().len() != 1 || splits.shape().len() != 1 {
            return Err(invalid(RANK2));
        }
        if splits.dtype() != splits_type {
            // TensorFlow reads the splits as `out_row_splits_type` and
            // aborts the process when they are not; tf.ragged.cross casts.
            return Err(invalid(format!(
                "{OP}: ragged_row_splits must be {splits_type} (out_row_splits_type), got {}",
                splits.dtype()
            )));
        }
        let num_values =
            i64::try_from(values.num_elements()).map_err(|_| invalid("too many ragged values"))?;
        verify_splits(&int_vec(splits)?, 1, num_values)?;
    }
    for (i, ((ind, val), sh)) in l
        .sparse_indices
        .iter()
        .zip(l.sparse_values)
        .zip(l.sparse_shapes)
        .enumerate()
    {
        if ind.shape().len() != 2 || val.shape().len() != 1 || sh.shape().len() != 1 {
            return Err(invalid(format!("Invalid SparseTensor {i}")));
        }
        if sh.num_elements() != 2 {
            return Err(invalid(RANK2));
        }
    }
    if l.dense.iter().any(|d| d.shape().len() != 2) {
        return Err(invalid(RANK2));
    }
    let batch = if let Some(s) = l.ragged_splits.first() {
        s.num_elements() as i64 - 1
    } else if let Some(d) = l.dense.first() {
        d.shape()[0]
    } else if let Some(s) = l.sparse_shapes.first() {
        int_vec(s)?[0]
    } else {
        0
    };
    for s in l.ragged_splits {
        if s.num_elements() as i64 - 1 != batch {
            return Err(invalid(SAME_BATCH));
        }
    }
    for s in l.sparse_shapes {
        if int_vec(s)?[0] != batch {
            return Err(invalid(SAME_BATCH));
        }
    }
    if l.dense.iter().any(|d| d.shape()[0] != batch) {
        return Err(invalid(SAME_BATCH));
    }
    if batch < 0 {
        // Only a sparse dense_shape can say so; TensorFlow would reserve
        // a negative size.
        return Err(invalid(format!("{OP}: negative batch size {batch}")));
    }
    check_size(OP, DType::Int64, batch as u64 + 1)?;
    Ok(batch as usize)
}

fn feature_dtype(values: &Tensor) -> Result<()> {
    match values.dtype() {
        DType::Int64 | DType::String => Ok(()),
        other => Err(invalid(format!(
            "{OP}: features must be int64 or string, got {other}"
        ))),
    }
}

fn ragged_feature<'a>(values: &'a Tensor, splits: &Tensor) -> Result<Feature<'a>> {
    feature_dtype(values)?;
    // Verified: starts at 0, sorted, ends at the number of values.
    let starts = int_vec(splits)?.into_iter().map(|s| s as usize).collect();
    Ok(Feature { values, starts })
}

/// A sparse column's rows, read as TensorFlow does: row `b` takes the
/// entries, from where the previous row stopped, whose row index is at most
/// `b` (the indices are taken as sorted; a later row's entries past the
/// batch are never read).
fn sparse_feature<'a>(indices: &Tensor, values: &'a Tensor, batch: usize) -> Result<Feature<'a>> {
    feature_dtype(values)?;
    let n = values.num_elements() as usize;
    let width = indices.shape()[1] as usize;
    if n > 0 && (width == 0 || (indices.shape()[0] as usize) < n) {
        // TensorFlow reads past the indices here.
        return Err(invalid(format!(
            "{OP}: sparse indices of shape {:?} do not cover {n} values",
            indices.shape()
        )));
    }
    let flat = indices.to_vec::<i64>()?;
    let mut starts = Vec::with_capacity(batch + 1);
    starts.push(0);
    let mut i = 0usize;
    for row in 0..batch {
        while i < n && flat[i * width] <= row as i64 {
            i += 1;
        }
        starts.push(i);
    }
    Ok(Feature { values, starts })
}

fn dense_feature(values: &Tensor, batch: usize) -> Result<Feature<'_>> {
    feature_dtype(values)?;
    let cols = values.shape()[1] as usize;
    Ok(Feature {
        values,
        starts: (0..=batch).map(|b| b * cols).collect(),
    })
}

/// The columns in `input_order`, with TensorFlow's errors for an order
/// that names more inputs of a kind than there are.
fn features<'a>(l: &Lists<'a>, order: &str, batch: usize) -> Result<Vec<Feature<'a>>> {
    let (mut r, mut s, mut d) = (0usize, 0usize, 0usize);
    let mut out = Vec::with_capacity(order.len());
    for c in order.chars() {
        match c {
            'R' => {
                if r >= l.ragged_values.len() {
                    return Err(invalid(format!(
                        "input_order \"{order}\" specifies reading a ragged tensor value at index \
                         {r} from a list of {} values.",
                        l.ragged_values.len()
                    )));
                }
                out.push(ragged_feature(&l.ragged_values[r], &l.ragged_splits[r])?);
                r += 1;
            }
            'S' => {
                if s >= l.sparse_values.len() {
                    return Err(invalid(format!(
                        "input_order \"{order}\" specifies reading a sparse tensor value at index \
                         {s} from a list of {} values.",
                        l.sparse_values.len()
                    )));
                }
                out.push(sparse_feature(
                    &l.sparse_indices[s],
                    &l.sparse_values[s],
                    batch,
                )?);
                s += 1;
            }
            'D' => {
                if d >= l.dense.len() {
                    return Err(invalid(format!(
                        "input_order \"{order}\" specifies reading a dense tensor at index {d} \
                         from a list of {} tensors.",
                        l.dense.len()
                    )));
                }
                out.push(dense_feature(&l.dense[d], batch)?);
                d += 1;
            }
            _ => return Err(invalid("Unexpected input_order value.")),
        }
    }
    Ok(out)
}

fn int_at(t: &Tensor, i: usize) -> Result<i64> {
    let TensorData::Buffer(b) = t.data() else {
        return Err(invalid(format!("{OP}: expected an int64 feature")));
    };
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i * 8..i * 8 + 8]);
    Ok(i64::from_le_bytes(w))
}

/// The output row splits: row `b` holds the product of its columns'
/// feature counts (none when a column is empty).
fn row_splits(feats: &[Feature], batch: usize) -> Result<Vec<i64>> {
    let mut splits = Vec::with_capacity(batch + 1);
    splits.push(0i64);
    let mut total = 0i64;
    for b in 0..batch {
        let mut count = 1i64;
        for f in feats {
            let c = f.count(b) as i64;
            if c == 0 {
                count = 0;
                break;
            }
            count = count
                .checked_mul(c)
                .ok_or_else(|| invalid(format!("{OP}: too many crosses")))?;
        }
        total = total
            .checked_add(count)
            .ok_or_else(|| invalid(format!("{OP}: too many crosses")))?;
        splits.push(total);
    }
    Ok(splits)
}

/// Calls `emit` with each row's combinations in order (the last column
/// fastest), as the flat positions of the chosen features.
fn for_each_cross(
    feats: &[Feature],
    splits: &[i64],
    mut emit: impl FnMut(&[usize]) -> Result<()>,
) -> Result<()> {
    let mut at = vec![0usize; feats.len()];
    for b in 0..splits.len() - 1 {
        let mut picks = vec![0usize; feats.len()];
        for _ in splits[b]..splits[b + 1] {
            for ((a, f), p) in at.iter_mut().zip(feats).zip(&picks) {
                *a = f.starts[b] + p;
            }
            emit(&at)?;
            for (i, f) in feats.iter().enumerate().rev() {
                picks[i] += 1;
                if picks[i] == f.count(b) {
                    picks[i] = 0;
                } else {
                    break;
                }
            }
        }
    }
    Ok(())
}

fn ragged_cross(attrs: &NodeAttrs) -> Result<Compute> {
    let num_buckets = attrs.int("num_buckets")?;
    let hash_key = attrs.int("hash_key")? as u64;
    let num_sparse = attrs.count("Nsparse")?;
    let n_ragged = attrs.dtypes("ragged_values_types")?.len();
    let n_splits = attrs.dtypes("ragged_splits_types")?.len();
    let n_sparse_values = attrs.dtypes("sparse_values_types")?.len();
    let n_dense = attrs.dtypes("dense_types")?.len();
    let order = String::from_utf8_lossy(attrs.bytes("input_order")?).into_owned();
    let out_type = attrs.dtype("out_values_type")?;
    let splits_type = attrs.dtype("out_row_splits_type")?;
    if n_ragged != n_splits {
        return Err(invalid(
            "ragged values and splits must have the same length",
        ));
    }
    if num_sparse != n_sparse_values {
        return Err(invalid(
            "sparse indices and values must have the same length",
        ));
    }
    if n_ragged + n_sparse_values + n_dense != order.len() {
        return Err(invalid("Invalid length for input_order"));
    }
    if !matches!(out_type, DType::Int64 | DType::String)
        || !matches!(splits_type, DType::Int32 | DType::Int64)
    {
        return Err(attrs.error("unsupported out_values_type or out_row_splits_type"));
    }
    let want = 2 * n_ragged + 3 * num_sparse + n_dense;
    Ok(Box::new(move |inputs| {
        if inputs.len() != want {
            return Err(invalid(format!(
                "{OP}: expected {want} inputs, got {}",
                inputs.len()
            )));
        }
        let (ragged_values, rest) = inputs.split_at(n_ragged);
        let (ragged_splits, rest) = rest.split_at(n_ragged);
        let (sparse_indices, rest) = rest.split_at(num_sparse);
        let (sparse_values, rest) = rest.split_at(num_sparse);
        let (sparse_shapes, dense) = rest.split_at(num_sparse);
        let lists = Lists {
            ragged_values,
            ragged_splits,
            sparse_indices,
            sparse_values,
            sparse_shapes,
            dense,
        };
        let batch = validate(&lists, splits_type)?;
        let feats = features(&lists, &order, batch)?;
        let splits = row_splits(&feats, batch)?;
        let total = *splits.last().unwrap_or(&0) as u64;
        check_size(OP, out_type, total)?;
        let splits_out = if splits_type == DType::Int32 {
            let narrow: Vec<i32> = splits
                .iter()
                .map(|&s| i32::try_from(s))
                .collect::<std::result::Result<_, _>>()
                .map_err(|_| invalid(format!("{OP}: too many crosses for int32 row splits")))?;
            Tensor::vector(&narrow)
        } else {
            Tensor::vector(&splits)
        };
        let values = if out_type == DType::String {
            let mut out = Vec::with_capacity(total as usize);
            for_each_cross(&feats, &splits, |at| {
                let mut s = Vec::new();
                for (i, (f, &p)) in feats.iter().zip(at).enumerate() {
                    if i > 0 {
                        s.extend_from_slice(b"_X_");
                    }
                    match f.values.data() {
                        TensorData::Strings(v) => s.extend_from_slice(&v[p]),
                        TensorData::Buffer(_) => {
                            s.extend_from_slice(int_at(f.values, p)?.to_string().as_bytes())
                        }
                    }
                }
                out.push(Bytes::from(s));
                Ok(())
            })?;
            let n = out.len() as i64;
            Tensor::strings(out, vec![n])?
        } else {
            let mut out = Vec::with_capacity(total as usize);
            for_each_cross(&feats, &splits, |at| {
                let mut h = hash_key;
                for (f, &p) in feats.iter().zip(at) {
                    let v = match f.values.data() {
                        TensorData::Strings(v) => fingerprint64(&v[p]),
                        TensorData::Buffer(_) => int_at(f.values, p)? as u64,
                    };
                    h = fingerprint_cat64(h, v);
                }
                out.push(bucket(h, num_buckets));
                Ok(())
            })?;
            Tensor::vector(&out)
        };
        Ok(vec![values, splits_out])
    }))
}
