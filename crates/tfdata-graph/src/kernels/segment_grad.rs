//! The gradients of the sparse segment reductions (`segment.rs` has the
//! forward ops): `SparseSegmentSumGrad`, `SparseSegmentMeanGrad`,
//! `SparseSegmentSqrtNGrad` scatter row `segment_ids[i]` of `grad`, scaled
//! (1, 1/count or 1/sqrt(count) of its segment, computed in double and
//! cast, as TF does), into row `indices[i]` of an `output_dim0`-row output,
//! summing in input order. The `V2` forms return only the rows some index
//! names, in sorted order, with those indices as a second output.
//! float and double (TF's half and bfloat16 kernels are refused).

use tfdata_core::{DType, Result, Tensor};

use super::numeric::{Elem, buffer, dispatch, expect_dtype, finish, index_values, invalid};
use super::{Compute, KernelDef};
use crate::attrs::NodeAttrs;

#[derive(Clone, Copy, PartialEq)]
enum Scale {
    Sum,
    Mean,
    SqrtN,
}

macro_rules! kernel {
    ($op:literal, $s:expr, $v2:expr) => {
        KernelDef {
            op: $op,
            outputs: if $v2 { v2_outputs } else { super::one_output },
            build: |a| build(a, $s, $v2),
        }
    };
}

pub(super) const KERNELS: &[KernelDef] = &[
    kernel!("SparseSegmentSumGrad", Scale::Sum, false),
    kernel!("SparseSegmentMeanGrad", Scale::Mean, false),
    kernel!("SparseSegmentSqrtNGrad", Scale::SqrtN, false),
    kernel!("SparseSegmentSumGradV2", Scale::Sum, true),
    kernel!("SparseSegmentMeanGradV2", Scale::Mean, true),
    kernel!("SparseSegmentSqrtNGradV2", Scale::SqrtN, true),
];

fn v2_outputs(_: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("output", 1), ("sorted_unique_indices", 1)])
}

fn build(attrs: &NodeAttrs, scale: Scale, v2: bool) -> Result<Compute> {
    let op = attrs.op.to_string();
    super::numeric::float_or_double_t(attrs)?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 4)?;
        dispatch!(
            inputs[0].dtype(),
            &op,
            [Float, Double],
            run(&op, scale, v2, &inputs)
        )
    }))
}

trait Real: Elem + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> {
    fn from_f64(v: f64) -> Self;
}
impl Real for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}
impl Real for f64 {
    fn from_f64(v: f64) -> Self {
        v
    }
}

fn run<T: Real>(op: &str, scale: Scale, v2: bool, v: &[Tensor]) -> Result<Vec<Tensor>> {
    let (grad, indices_t, segments_t, dim0_t) = (&v[0], &v[1], &v[2], &v[3]);
    expect_dtype(op, grad, 0, T::DTYPE)?;
    expect_dtype(op, dim0_t, 3, DType::Int32)?;
    if !dim0_t.shape().is_empty() {
        return Err(invalid(op, "output_dim0 should be a scalar."));
    }
    let indices = index_values(op, "indices", indices_t)?;
    let segments = index_values(op, "segment_ids", segments_t)?;
    if indices_t.shape().len() != 1 {
        return Err(invalid(op, "indices should be a vector."));
    }
    if segments_t.shape().len() != 1 {
        return Err(invalid(op, "segment_ids should be a vector."));
    }
    if indices.len() != segments.len() {
        return Err(invalid(
            op,
            "segment_ids and indices should have same size.",
        ));
    }
    if grad.shape().is_empty() {
        return Err(invalid(op, "grad must be at least rank 1"));
    }
    let dim0 = index_values(op, "output_dim0", dim0_t)?[0];
    let rows_in = grad.shape()[0];
    let row: usize = grad.shape()[1..]
        .iter()
        .map(|&d| d.max(0) as usize)
        .product();
    // TF checks the last id (the ids are meant to be sorted) first.
    if segments.last().is_some_and(|&s| s >= rows_in) {
        return Err(invalid(op, "Invalid number of segments"));
    }
    for &s in &segments {
        if s < 0 || s >= rows_in {
            return Err(invalid(
                op,
                format!("Segment id {s} out of range [0, {rows_in})."),
            ));
        }
    }
    for &i in &indices {
        if i < 0 || i >= dim0 {
            return Err(invalid(op, format!("Index {i} out of range [0, {dim0}).")));
        }
    }
    // Each segment's scale: 1, 1/count or 1/sqrt(count), in double.
    let mut counts = vec![
        0f64;
        if scale == Scale::Sum {
            0
        } else {
            rows_in as usize
        }
    ];
    for &s in &segments {
        if let Some(c) = counts.get_mut(s as usize) {
            *c += 1.0;
        }
    }
    let factor = |s: usize| -> T {
        let c = counts.get(s).copied().unwrap_or(1.0).max(1.0);
        match scale {
            Scale::Sum => T::from_f64(1.0),
            Scale::Mean => T::from_f64(1.0 / c),
            Scale::SqrtN => T::from_f64(1.0 / c.sqrt()),
        }
    };
    // Output rows: all of them, or (V2) the sorted distinct indices.
    let (rows_out, slot_of): (Vec<i64>, Box<dyn Fn(i64) -> usize>) = if v2 {
        let mut unique = indices.clone();
        unique.sort_unstable();
        unique.dedup();
        let lookup = unique.clone();
        (
            unique,
            Box::new(move |i| lookup.binary_search(&i).unwrap_or(0)),
        )
    } else {
        ((0..dim0).collect(), Box::new(|i| i as usize))
    };
    let mut shape = grad.shape().to_vec();
    shape[0] = rows_out.len() as i64;
    let n = super::numeric::out_elements(op, T::DTYPE, &shape)?;
    let gb = buffer(op, grad)?;
    let mut out = vec![T::ZERO; n];
    let mut written = vec![false; rows_out.len()];
    for (&i, &s) in indices.iter().zip(&segments) {
        let slot = slot_of(i);
        let f = factor(s as usize);
        let first = !written.get(slot).copied().unwrap_or(true);
        for c in 0..row {
            let g = super::numeric::at::<T>(gb, s as usize * row + c).ftz();
            let x = if scale == Scale::Sum {
                g
            } else {
                (g * f).ftz()
            };
            if let Some(o) = out.get_mut(slot * row + c) {
                *o = if first { x } else { (*o + x).ftz() };
            }
        }
        if let Some(w) = written.get_mut(slot) {
            *w = true;
        }
    }
    let mut data = Vec::with_capacity(n * T::SIZE);
    for x in out {
        x.put(&mut data);
    }
    let output = finish(T::DTYPE, shape, data)?;
    if !v2 {
        return Ok(vec![output]);
    }
    let unique = super::layout::int_tensor(
        op,
        indices_t.dtype(),
        &rows_out,
        vec![rows_out.len() as i64],
    )?;
    Ok(vec![output, unique])
}

#[cfg(test)]
mod tests {
    use super::super::testing::run;
    use tfdata_core::Tensor;

    #[test]
    fn scatters_scaled_rows() {
        let grad = Tensor::vector(&[2.0f32, 6.0]);
        let args = vec![
            grad,
            Tensor::vector(&[0i32, 2, 2]),
            Tensor::vector(&[0i32, 0, 1]),
            Tensor::scalar(3i32),
        ];
        let out = run("SparseSegmentMeanGrad", &[], args.clone()).unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![1.0, 0.0, 7.0]);
        let out = run("SparseSegmentSumGradV2", &[], args).unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![2.0, 8.0]);
        assert_eq!(out[1].to_vec::<i32>().unwrap(), vec![0, 2]);
    }
}
