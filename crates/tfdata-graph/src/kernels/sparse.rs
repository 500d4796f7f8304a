//! `SparseToDense`: what `tf.sparse.to_dense` (and so a densified
//! `VarLenFeature`) emits.

use tfdata_core::{Result, Tensor};

use super::layout::{Out, Src, err, ints, take};
use super::{Compute, KernelDef};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "SparseToDense",
    outputs: |_| Ok(vec![("dense", 1)]),
    build: sparse_to_dense,
}];

const OP: &str = "SparseToDense";

fn sparse_to_dense(attrs: &NodeAttrs) -> Result<Compute> {
    let validate = attrs.bool_or("validate_indices", true)?;
    Ok(Box::new(move |inputs| {
        let [indices, shape, values, default] = take::<4>(OP, inputs)?;
        dense(&indices, &shape, &values, &default, validate).map(|t| vec![t])
    }))
}

/// Scatters `values` (one per index row, or one scalar for all) into a
/// tensor of `shape` filled with `default`. With `validate`, indices must be
/// in bounds, sorted and unique, as TensorFlow checks them; without,
/// bounds are still checked and a repeated index keeps its last value.
fn dense(
    indices: &Tensor,
    shape: &Tensor,
    values: &Tensor,
    default: &Tensor,
    validate: bool,
) -> Result<Tensor> {
    let dims = ints(OP, "output_shape", shape)?;
    if shape.shape().len() > 1 {
        return Err(err(OP, "output_shape must be rank 0 or 1"));
    }
    if dims.iter().any(|&d| d < 0) {
        return Err(err(
            OP,
            format!("output_shape has a negative dimension: {dims:?}"),
        ));
    }
    let rank = dims.len();
    let flat = ints(OP, "sparse_indices", indices)?;
    let rows = match indices.shape() {
        [] => 1,
        [n] => *n as usize,
        [n, d] if *d as usize == rank => *n as usize,
        other => {
            return Err(err(
                OP,
                format!(
                    "sparse_indices should be a scalar, vector, or matrix of {rank} columns, got shape {other:?}"
                ),
            ));
        }
    };
    let per_row = if indices.shape().len() == 2 { rank } else { 1 };
    if (indices.shape().len() < 2 && rank != 1 && rows > 0) || flat.len() != rows * per_row {
        return Err(err(
            OP,
            format!(
                "sparse_indices has shape {:?}, which does not index a rank-{rank} output",
                indices.shape()
            ),
        ));
    }
    let scalar_values = values.shape().is_empty();
    if !scalar_values && (values.shape().len() != 1 || values.shape()[0] as usize != rows) {
        return Err(err(
            OP,
            format!(
                "sparse_values has incorrect shape {:?}, should be [] or [{rows}]",
                values.shape()
            ),
        ));
    }
    if !default.shape().is_empty() {
        return Err(err(OP, "default_value should be a scalar"));
    }
    if values.dtype() != default.dtype() {
        return Err(err(
            OP,
            "sparse_values and default_value must have the same dtype",
        ));
    }
    let total = dims
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d as u64))
        .ok_or_else(|| err(OP, "output_shape is too large"))?;
    let mut out = Out::new(OP, values.dtype(), total)?;
    // Which value lands at each output position: checked up front, so the
    // output is written once, in order.
    let mut source: Vec<u32> = vec![u32::MAX; total as usize];
    if rows > u32::MAX as usize {
        return Err(err(OP, "too many sparse values"));
    }
    let mut previous: Option<u64> = None;
    for r in 0..rows {
        let index = &flat[r * per_row..(r + 1) * per_row];
        let mut position: u64 = 0;
        for (d, (&i, &n)) in index.iter().zip(&dims).enumerate() {
            if i < 0 || i >= n {
                return Err(err(
                    OP,
                    format!(
                        "indices[{r}] = {index:?} is out of bounds: need 0 <= index < {dims:?} (dimension {d})"
                    ),
                ));
            }
            position = position * n as u64 + i as u64;
        }
        if validate {
            match previous {
                Some(p) if p == position => {
                    return Err(err(OP, format!("indices[{r}] = {index:?} is repeated")));
                }
                Some(p) if p > position => {
                    return Err(err(OP, format!("indices[{r}] = {index:?} is out of order")));
                }
                _ => {}
            }
        }
        previous = Some(position);
        source[position as usize] = r as u32;
    }
    let (values_src, default_src) = (Src::of(values), Src::of(default));
    for s in source {
        match s {
            u32::MAX => out.push(&default_src, 0, 1)?,
            r if scalar_values => {
                let _ = r;
                out.push(&values_src, 0, 1)?
            }
            r => out.push(&values_src, r as usize, 1)?,
        }
    }
    out.finish(values.dtype(), dims)
}

#[cfg(test)]
mod tests {
    use super::super::testing::run;
    use tfdata_core::Tensor;

    #[test]
    fn scatters_like_tensorflow() {
        // tf.raw_ops.SparseToDense(sparse_indices=[[0,1],[2,0]], output_shape=[3,2],
        //     sparse_values=[5,6], default_value=-1) == [[-1,5],[-1,-1],[6,-1]]
        let out = run(
            "SparseToDense",
            &[],
            vec![
                Tensor::from_slice(&[0i64, 1, 2, 0], vec![2, 2]).unwrap(),
                Tensor::vector(&[3i64, 2]),
                Tensor::vector(&[5i64, 6]),
                Tensor::scalar(-1i64),
            ],
        )
        .unwrap();
        assert_eq!(
            out[0],
            Tensor::from_slice(&[-1i64, 5, -1, -1, 6, -1], vec![3, 2]).unwrap()
        );
        // Vector indices, strings, a scalar value for all.
        let out = run(
            "SparseToDense",
            &[],
            vec![
                Tensor::vector(&[1i32, 3]),
                Tensor::vector(&[4i32]),
                Tensor::scalar_string("x"),
                Tensor::scalar_string(""),
            ],
        )
        .unwrap();
        assert_eq!(
            out[0],
            Tensor::strings(vec!["".into(), "x".into(), "".into(), "x".into()], vec![4]).unwrap()
        );
    }

    #[test]
    fn bad_indices_are_errors() {
        let call = |indices: Tensor| {
            run(
                "SparseToDense",
                &[],
                vec![
                    indices,
                    Tensor::vector(&[3i64]),
                    Tensor::scalar(1i64),
                    Tensor::scalar(0i64),
                ],
            )
            .unwrap_err()
            .to_string()
        };
        assert!(call(Tensor::vector(&[5i64])).contains("out of bounds"));
        assert!(call(Tensor::vector(&[1i64, 1])).contains("repeated"));
        assert!(call(Tensor::vector(&[2i64, 1])).contains("out of order"));
        assert!(call(Tensor::vector(&[-1i64])).contains("out of bounds"));
        let huge = run(
            "SparseToDense",
            &[],
            vec![
                Tensor::vector::<i64>(&[]),
                Tensor::vector(&[1i64 << 40, 1 << 40]),
                Tensor::vector::<i64>(&[]),
                Tensor::scalar(0i64),
            ],
        );
        assert!(huge.is_err());
    }
}
