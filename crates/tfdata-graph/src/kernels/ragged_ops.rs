//! Ragged tensors as their row splits and flat values, inside a function:
//!
//! * `RaggedRange` (`tf.ragged.range`): one range per row, the values made
//!   by repeated addition (`v += delta`) as TensorFlow does, so float rows
//!   accumulate its rounding;
//! * `RaggedGather` (`tf.gather` on a ragged tensor): whole rows picked by
//!   a dense index tensor, its outer dimensions becoming uniform splits;
//! * `RaggedTensorToSparse` (`rt.to_sparse()`): the index of every value;
//! * `RaggedFillEmptyRows` and its gradient (`tf.ragged` fill of empty
//!   rows): `SparseFillEmptyRows` on the value row ids.

use tfdata_core::{DType, Error, Result, Tensor};

use super::layout::{Out, Src, int_tensor, ints, shape_str};
use super::{Compute, KernelDef, OutputArgs, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "RaggedRange",
        outputs: |_| Ok(vec![("rt_nested_splits", 1), ("rt_dense_values", 1)]),
        build: ragged_range,
    },
    KernelDef {
        op: "RaggedGather",
        outputs: gather_outputs,
        build: ragged_gather,
    },
    KernelDef {
        op: "RaggedTensorToSparse",
        outputs: |_| {
            Ok(vec![
                ("sparse_indices", 1),
                ("sparse_values", 1),
                ("sparse_dense_shape", 1),
            ])
        },
        build: to_sparse,
    },
    KernelDef {
        op: "RaggedFillEmptyRows",
        outputs: |_| {
            Ok(vec![
                ("output_value_rowids", 1),
                ("output_values", 1),
                ("empty_row_indicator", 1),
                ("reverse_index_map", 1),
            ])
        },
        build: fill_empty_rows,
    },
    KernelDef {
        op: "RaggedFillEmptyRowsGrad",
        outputs: |_| Ok(vec![("d_values", 1), ("d_default_value", 1)]),
        build: super::sparse_tensor::fill_empty_rows_grad,
    },
];

fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidArgument(message.into())
}

// --- RaggedRange -----------------------------------------------------------

/// The value types `RaggedRange` has kernels for.
trait RangeValue: tfdata_core::NativeType + PartialOrd + Copy {
    const ZERO: Self;
    /// The row's length, `None` past int64 (TensorFlow's error).
    fn size(start: Self, limit: Self, delta: Self) -> Option<u64>;
    fn step(self, delta: Self) -> Self;
}

macro_rules! int_range {
    ($($t:ty),*) => {$(
        impl RangeValue for $t {
            const ZERO: Self = 0;
            fn size(start: Self, limit: Self, delta: Self) -> Option<u64> {
                // Exactly, without the wrap the difference could take.
                let span = (i128::from(limit) - i128::from(start)).unsigned_abs();
                let d = i128::from(delta).unsigned_abs();
                u64::try_from(span.div_ceil(d)).ok()
            }
            fn step(self, delta: Self) -> Self { self.wrapping_add(delta) }
        }
    )*};
}
int_range!(i32, i64);

macro_rules! float_range {
    ($($t:ty),*) => {$(
        impl RangeValue for $t {
            const ZERO: Self = 0.0;
            fn size(start: Self, limit: Self, delta: Self) -> Option<u64> {
                let n = ((limit - start) / delta).abs().ceil();
                // NaN and anything past int64 fail the comparison.
                if n <= i64::MAX as $t { Some(n as u64) } else { None }
            }
            fn step(self, delta: Self) -> Self { self + delta }
        }
    )*};
}
float_range!(f32, f64);

fn ragged_range(attrs: &NodeAttrs) -> Result<Compute> {
    let splits_type = attrs.dtype("Tsplits").unwrap_or(DType::Int64);
    Ok(Box::new(move |inputs| {
        expect_inputs("RaggedRange", &inputs, 3)?;
        for (t, name) in inputs.iter().zip(["starts", "limits", "deltas"]) {
            if t.shape().len() > 1 {
                return Err(invalid(format!("{name} must be a scalar or vector")));
            }
        }
        let sizes: Vec<u64> = inputs
            .iter()
            .filter(|t| t.shape().len() == 1)
            .map(Tensor::num_elements)
            .collect();
        if sizes.windows(2).any(|w| w[0] != w[1]) {
            return Err(invalid(
                "starts, limits, and deltas must have the same shape",
            ));
        }
        let nrows = sizes.first().copied().unwrap_or(1) as usize;
        let dtype = inputs[0].dtype();
        if inputs.iter().any(|t| t.dtype() != dtype) {
            return Err(invalid(
                "RaggedRange: starts, limits and deltas must have one dtype",
            ));
        }
        let (splits, values) = match dtype {
            DType::Float => range_typed::<f32>(&inputs, nrows)?,
            DType::Double => range_typed::<f64>(&inputs, nrows)?,
            DType::Int32 => range_typed::<i32>(&inputs, nrows)?,
            DType::Int64 => range_typed::<i64>(&inputs, nrows)?,
            other => return Err(invalid(format!("RaggedRange: no kernel for {other}"))),
        };
        let n = splits.len() as i64;
        Ok(vec![
            int_tensor("RaggedRange", splits_type, &splits, vec![n])?,
            values,
        ])
    }))
}

fn range_typed<T: RangeValue>(inputs: &[Tensor], nrows: usize) -> Result<(Vec<i64>, Tensor)> {
    let cols: Vec<Vec<T>> = inputs
        .iter()
        .map(Tensor::to_vec::<T>)
        .collect::<Result<_>>()?;
    // A scalar broadcasts over the rows.
    let at = |c: usize, row: usize| -> T {
        let v = &cols[c];
        if inputs[c].shape().is_empty() {
            v[0]
        } else {
            v[row]
        }
    };
    let mut splits = Vec::with_capacity(nrows + 1);
    splits.push(0i64);
    let mut total: u64 = 0;
    for row in 0..nrows {
        let (start, limit, delta) = (at(0, row), at(1, row), at(2, row));
        if delta == T::ZERO {
            return Err(invalid("Requires delta != 0"));
        }
        let size = if (delta > T::ZERO && limit < start) || (delta < T::ZERO && limit > start) {
            0
        } else {
            T::size(start, limit, delta).ok_or_else(|| {
                invalid(format!(
                    "Requires ((limit - start) / delta) <= {}",
                    i64::MAX
                ))
            })?
        };
        total = total.saturating_add(size);
        check_size("RaggedRange", T::DTYPE, total)?;
        splits.push(total as i64);
    }
    let mut values = Vec::with_capacity(total as usize);
    for row in 0..nrows {
        let (mut v, delta) = (at(0, row), at(2, row));
        for _ in splits[row]..splits[row + 1] {
            values.push(v);
            v = v.step(delta);
        }
    }
    let n = values.len() as i64;
    Ok((splits, Tensor::from_slice(&values, vec![n])?))
}

// --- RaggedGather ----------------------------------------------------------

fn gather_outputs(a: &NodeAttrs) -> Result<OutputArgs> {
    Ok(vec![
        ("output_nested_splits", a.count("OUTPUT_RAGGED_RANK")?),
        ("output_dense_values", 1),
    ])
}

/// TensorFlow's `SliceDebugString`: the flat position `i` of `shape` as a
/// bracketed index.
fn slice_debug(shape: &[i64], mut i: i64) -> String {
    let mut idx = vec![0i64; shape.len()];
    for d in (0..shape.len()).rev() {
        let n = shape[d].max(1);
        idx[d] = i % n;
        i /= n;
    }
    shape_str(&idx)
}

fn ragged_gather(attrs: &NodeAttrs) -> Result<Compute> {
    let params_rank = attrs.count("PARAMS_RAGGED_RANK")?;
    let output_rank = attrs.count("OUTPUT_RAGGED_RANK")?;
    if params_rank < 1 {
        return Err(attrs.error("PARAMS_RAGGED_RANK must be at least 1"));
    }
    Ok(Box::new(move |inputs| {
        const OP: &str = "RaggedGather";
        expect_inputs(OP, &inputs, params_rank + 2)?;
        let splits_in = &inputs[..params_rank];
        let values = &inputs[params_rank];
        let indices_t = &inputs[params_rank + 1];
        let splits: Vec<Vec<i64>> = splits_in
            .iter()
            .map(|t| ints(OP, "params_nested_splits", t))
            .collect::<Result<_>>()?;
        let splits_type = splits_in[0].dtype();
        let num_params = splits_in[0].shape().first().copied().unwrap_or(1) - 1;
        let indices = ints(OP, "indices", indices_t)?;
        for (i, &index) in indices.iter().enumerate() {
            if index < 0 || index >= num_params {
                return Err(invalid(format!(
                    "indices{} = {index} is not in [0, {num_params})",
                    slice_debug(indices_t.shape(), i as i64)
                )));
            }
        }
        if values.shape().is_empty() {
            return Err(invalid("params.rank must be nonzero"));
        }
        let num_values_in = values.shape()[0];
        for (dim, s) in splits.iter().enumerate() {
            let last = if dim + 1 == splits.len() {
                num_values_in
            } else {
                splits[dim + 1].len() as i64
            };
            if s.is_empty() {
                return Err(invalid("Ragged splits may not be empty"));
            }
            if s[0] < 0 {
                return Err(invalid("Ragged splits must be non-negative"));
            }
            if s[s.len() - 1] > last {
                return Err(invalid("Ragged splits must not point past values"));
            }
            if s.windows(2).any(|w| w[0] > w[1]) {
                return Err(invalid("Ragged splits must be sorted"));
            }
        }
        let idims = indices_t.shape();
        let num_splits = (idims.len() + params_rank).saturating_sub(1);
        if num_splits != output_rank {
            return Err(invalid(format!(
                "RaggedGather: OUTPUT_RAGGED_RANK is {output_rank} but the output has {num_splits} splits"
            )));
        }
        let mut out_splits: Vec<Vec<i64>> = vec![vec![0]; num_splits];
        // The outer dimensions of a dense index tensor are uniform.
        let mut nrows: i64 = 1;
        for dim in 0..idims.len().saturating_sub(1) {
            nrows = nrows.saturating_mul(idims[dim]);
            let row_length = idims[dim + 1];
            check_size(OP, DType::Int64, nrows as u64)?;
            out_splits[dim].extend((1..=nrows).map(|i| i * row_length));
        }
        let mut slices = Vec::new();
        let mut num_values: u64 = 0;
        for &index in &indices {
            let (mut start, mut limit) = (index, index + 1);
            for (dim, s) in splits.iter().enumerate() {
                // An inner split may equal the next level's length (TensorFlow's
                // check allows it, then reads past the end): refused here.
                let at = |i: i64| {
                    s.get(i as usize)
                        .copied()
                        .ok_or_else(|| invalid("Ragged splits must not point past values"))
                };
                let out_dim = dim as i64 + idims.len() as i64 - 1;
                if out_dim >= 0 {
                    let out = &mut out_splits[out_dim as usize];
                    let delta = out[out.len() - 1] - at(start)?;
                    check_size(
                        OP,
                        DType::Int64,
                        (out.len() as u64) + (limit - start) as u64,
                    )?;
                    for j in start..limit {
                        out.push(at(j + 1)? + delta);
                    }
                }
                (start, limit) = (at(start)?, at(limit)?);
            }
            if limit != start {
                slices.push((start, limit));
                num_values += (limit - start) as u64;
            }
        }
        let inner: u64 = values.shape()[1..]
            .iter()
            .map(|&d| d.max(0) as u64)
            .product();
        let mut out = Out::new(OP, values.dtype(), num_values.saturating_mul(inner))?;
        let src = Src::of(values);
        for (start, limit) in slices {
            out.push(
                &src,
                (start as u64 * inner) as usize,
                ((limit - start) as u64 * inner) as usize,
            )?;
        }
        let mut vshape = values.shape().to_vec();
        vshape[0] = num_values as i64;
        let mut result = Vec::with_capacity(num_splits + 1);
        for s in out_splits {
            let n = s.len() as i64;
            result.push(int_tensor(OP, splits_type, &s, vec![n])?);
        }
        result.push(out.finish(values.dtype(), vshape)?);
        Ok(result)
    }))
}

// --- RaggedTensorToSparse --------------------------------------------------

fn to_sparse(attrs: &NodeAttrs) -> Result<Compute> {
    let rank = attrs.count("RAGGED_RANK")?;
    if rank < 1 {
        return Err(attrs.error("RAGGED_RANK must be at least 1"));
    }
    Ok(Box::new(move |inputs| {
        const OP: &str = "RaggedTensorToSparse";
        expect_inputs(OP, &inputs, rank + 1)?;
        let values = &inputs[rank];
        let splits: Vec<Vec<i64>> = inputs[..rank]
            .iter()
            .map(|t| ints(OP, "rt_nested_splits", t))
            .collect::<Result<_>>()?;
        for (dim, s) in splits.iter().enumerate() {
            if s.is_empty() {
                return Err(invalid("ragged splits may not be empty."));
            }
            if s[0] != 0 {
                return Err(invalid("First value of ragged splits must be 0."));
            }
            if let Some(w) = s.windows(2).find(|w| w[0] > w[1]) {
                return Err(invalid(format!(
                    "Ragged splits should be non decreasing, but we got {} followed by {}",
                    w[0], w[1]
                )));
            }
            let last = if dim + 1 == splits.len() {
                values.shape().first().copied()
            } else {
                Some(splits[dim + 1].len() as i64 - 1)
            };
            if Some(s[s.len() - 1]) != last {
                return Err(invalid(
                    "Final value of ragged splits must match the length the corresponding ragged values.",
                ));
            }
        }
        let inner_dims = &values.shape()[1..];
        let inner: usize = inner_dims.iter().map(|&d| d.max(0) as usize).product();
        let out_rank = 1 + rank + inner_dims.len();
        let nvals = values.shape()[0] as usize;
        check_size(OP, DType::Int64, (nvals * inner) as u64 * out_rank as u64)?;
        // Walks the rows depth first: `prefix` holds the index so far (a
        // row, then its position in each ragged level).
        let mut flat: Vec<i64> = Vec::with_capacity(nvals * inner * out_rank);
        let mut max_len = vec![0i64; rank];
        let inner_strides = super::layout::strides(inner_dims);
        let mut prefix = Vec::with_capacity(rank + 1);
        emit(
            &splits,
            0,
            0,
            splits[0].len() - 1,
            &mut prefix,
            &mut max_len,
            &mut |p: &[i64]| {
                for e in 0..inner {
                    flat.extend_from_slice(p);
                    let mut rem = e as i64;
                    for &st in &inner_strides {
                        let s = st.max(1);
                        flat.push(rem / s);
                        rem %= s;
                    }
                }
            },
        );
        let n = flat.len() / out_rank;
        let mut dense_shape = vec![splits[0].len() as i64 - 1];
        dense_shape.extend_from_slice(&max_len);
        dense_shape.extend_from_slice(inner_dims);
        let mut vals_out = Out::new(OP, values.dtype(), (nvals * inner) as u64)?;
        vals_out.push(&Src::of(values), 0, nvals * inner)?;
        Ok(vec![
            Tensor::from_slice(&flat, vec![n as i64, out_rank as i64])?,
            vals_out.finish(values.dtype(), vec![(nvals * inner) as i64])?,
            Tensor::vector(&dense_shape),
        ])
    }))
}

/// Visits rows `lo..hi` of ragged level `level` in order, calling `leaf`
/// with each value's index prefix (row, then the position at each level).
fn emit(
    splits: &[Vec<i64>],
    level: usize,
    lo: usize,
    hi: usize,
    prefix: &mut Vec<i64>,
    max_len: &mut [i64],
    leaf: &mut dyn FnMut(&[i64]),
) {
    let s = &splits[level];
    for row in lo..hi {
        prefix.push((row - lo) as i64);
        let (a, b) = (s[row] as usize, s[row + 1] as usize);
        max_len[level] = max_len[level].max((b - a) as i64);
        if level + 1 == splits.len() {
            for v in a..b {
                prefix.push((v - a) as i64);
                leaf(prefix);
                prefix.pop();
            }
        } else {
            emit(splits, level + 1, a, b, prefix, max_len, leaf);
        }
        prefix.pop();
    }
}

// --- RaggedFillEmptyRows ---------------------------------------------------

fn fill_empty_rows(attrs: &NodeAttrs) -> Result<Compute> {
    let sparse = super::sparse_tensor::fill_empty_rows(attrs)?;
    Ok(Box::new(move |inputs| {
        expect_inputs("RaggedFillEmptyRows", &inputs, 4)?;
        let (rowids, values, nrows, default) = (&inputs[0], &inputs[1], &inputs[2], &inputs[3]);
        let checks = [
            (rowids, 1, "value_rowids must be a vector"),
            (values, 1, "values must be a vector"),
            (nrows, 0, "nrows must be a scalar"),
            (default, 0, "default_value must be a scalar"),
        ];
        for (t, rank, msg) in checks {
            if t.shape().len() != rank {
                return Err(invalid(format!("{msg}, saw: {}", shape_str(t.shape()))));
            }
        }
        if values.num_elements() != rowids.num_elements() {
            return Err(invalid(format!(
                "The length of `values` ({}) must match the first dimension of `value_rowids` ({}).",
                values.num_elements(),
                rowids.num_elements()
            )));
        }
        let rows = ints("RaggedFillEmptyRows", "nrows", nrows)?[0];
        if rows < 0 {
            return Err(invalid(format!(
                "Expected shape dimensions to be non-negative, got {rows}"
            )));
        }
        let ids = ints("RaggedFillEmptyRows", "value_rowids", rowids)?;
        for (i, &r) in ids.iter().enumerate() {
            if r < 0 || r >= rows {
                return Err(invalid(format!(
                    "indices({i}, 0) is invalid: {r} >= {rows}"
                )));
            }
        }
        let n = ids.len() as i64;
        let out = sparse(vec![
            Tensor::from_slice(&ids, vec![n, 1])?,
            values.clone(),
            Tensor::vector(&[rows]),
            default.clone(),
        ])?;
        let mut out = out.into_iter();
        let indices = out
            .next()
            .ok_or_else(|| Error::Internal("no indices".into()))?;
        // TensorFlow returns the row ids as a vector, but as the `[0, 1]`
        // matrix of the sparse form when there are no rows at all.
        let total = indices.shape()[0];
        let rowids_out = if rows == 0 {
            indices
        } else {
            Tensor::from_slice(&indices.to_vec::<i64>()?, vec![total])?
        };
        Ok(std::iter::once(rowids_out).chain(out).collect())
    }))
}

#[cfg(test)]
mod tests {
    use tfdata_core::{DType, Tensor};

    use super::super::testing::{int, run, ty};

    #[test]
    fn gather_refuses_an_inner_split_past_the_next_level() {
        // The outer splits end at 3, the inner splits' length: TensorFlow's
        // check passes it and then reads past the inner splits.
        let err = run(
            "RaggedGather",
            &[
                ("PARAMS_RAGGED_RANK", int(2)),
                ("OUTPUT_RAGGED_RANK", int(2)),
                ("Tvalues", ty(DType::Float)),
                ("Tindices", ty(DType::Int32)),
                ("Tsplits", ty(DType::Int64)),
            ],
            vec![
                Tensor::vector(&[0i64, 3]),
                Tensor::vector(&[0i64, 1, 2]),
                Tensor::vector(&[1.0f32, 2.0]),
                Tensor::vector(&[0i32]),
            ],
        )
        .unwrap_err();
        assert!(err.to_string().contains("point past values"), "{err}");
    }
}
