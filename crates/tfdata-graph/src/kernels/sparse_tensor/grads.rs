//! The gradients of sparse ops, as TensorFlow's autodiff calls them:
//!
//! * `SparseAddGrad`: the sum's value gradients routed back to the entries
//!   of `a` and `b` (all three index runs walked as sorted, as TensorFlow
//!   does without checking; an operand entry missing from the sum gets 0);
//! * `SparseFillEmptyRowsGrad`: each input value's gradient from its output
//!   position, and the default value's gradient as the sum (in output
//!   order) of the gradients of the filled-in entries;
//! * `SparseSliceGrad`: the slice's gradients put back at the input entries
//!   they came from (both runs in one order), 0 elsewhere.

use tfdata_core::{DType, Error, Result, Tensor};

use super::super::numeric::{buffer, dispatch, finish, out_buf, values};
use super::cwise::Num;
use super::{Indices, indices_of, int64s, invalid, shape_str};
use crate::attrs::NodeAttrs;
use crate::kernels::Compute;
use crate::kernels::layout::take;

/// Copies of chosen elements of a fixed-size vector, zero where none is
/// chosen: the grads only move values, so they work on element bytes.
fn scatter(op: &str, src: &Tensor, picks: &[Option<usize>]) -> Result<Tensor> {
    let dtype = src.dtype();
    let size = dtype
        .size()
        .ok_or_else(|| invalid(format!("{op}: no kernel for {dtype} tensors")))?;
    if dtype == DType::Bool {
        return Err(invalid(format!("{op}: no kernel for {dtype} tensors")));
    }
    let b = buffer(op, src)?;
    let mut out = vec![0u8; picks.len() * size];
    for (slot, p) in out.chunks_exact_mut(size).zip(picks) {
        if let Some(i) = p {
            slot.copy_from_slice(&b[i * size..(i + 1) * size]);
        }
    }
    finish(dtype, vec![picks.len() as i64], out)
}

fn vector_check(t: &Tensor, what: &str) -> Result<()> {
    if t.shape().len() != 1 {
        return Err(invalid(format!(
            "Input {what} should be a vector but received shape: {}",
            shape_str(t.shape())
        )));
    }
    Ok(())
}

pub(super) fn sparse_add_grad(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [grad, ai, bi, si] = take::<4>("SparseAddGrad", inputs)?;
        vector_check(&grad, "backprop_val_grad")?;
        let a = indices_of(&ai, "Input a_indices")?;
        let b = indices_of(&bi, "Input b_indices")?;
        let s = indices_of(&si, "Input sum_indices")?;
        if grad.num_elements() != s.n as u64 {
            return Err(invalid(format!(
                "# elements of backprop_val_grad and # rows of sum_indices should match (#nnz of sum): got {} and {}",
                grad.num_elements(),
                s.n
            )));
        }
        if a.rank != b.rank || b.rank != s.rank {
            return Err(invalid(format!(
                "The densified operands should have the same ndims; for A, B, sum got: {}{}{}",
                a.rank, b.rank, s.rank
            )));
        }
        let mut a_picks = vec![None; a.n];
        let mut b_picks = vec![None; b.n];
        // One sum entry per step; an operand's cursor moves past entries
        // that sort before it and takes the one equal to it.
        let step = |ind: &Indices, at: &mut usize, picks: &mut [Option<usize>], k: usize| match ind
            .row(*at)
            .cmp(s.row(k))
        {
            std::cmp::Ordering::Equal => {
                picks[*at] = Some(k);
                *at += 1;
            }
            std::cmp::Ordering::Less => *at += 1,
            std::cmp::Ordering::Greater => {}
        };
        let (mut i, mut j, mut k) = (0, 0, 0);
        while i < a.n && j < b.n && k < s.n {
            step(&a, &mut i, &mut a_picks, k);
            step(&b, &mut j, &mut b_picks, k);
            k += 1;
        }
        while i < a.n && k < s.n {
            step(&a, &mut i, &mut a_picks, k);
            k += 1;
        }
        while j < b.n && k < s.n {
            step(&b, &mut j, &mut b_picks, k);
            k += 1;
        }
        Ok(vec![
            scatter("SparseAddGrad", &grad, &a_picks)?,
            scatter("SparseAddGrad", &grad, &b_picks)?,
        ])
    }))
}

pub(in crate::kernels) fn fill_empty_rows_grad(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [rev, grad] = take::<2>("SparseFillEmptyRowsGrad", inputs)?;
        if rev.shape().len() != 1 {
            return Err(invalid(format!(
                "reverse_index_map must be a vector, saw: {}",
                shape_str(rev.shape())
            )));
        }
        if grad.shape().len() != 1 {
            return Err(invalid(format!(
                "grad_values must be a vector, saw: {}",
                shape_str(grad.shape())
            )));
        }
        let rev = int64s(&rev, "reverse_index_map")?;
        let n = grad.num_elements() as i64;
        if let Some(&bad) = rev.iter().find(|&&r| r < 0 || r >= n) {
            return Err(invalid(format!(
                "Elements in reverse index must be in [0, {n}) but got {bad}"
            )));
        }
        let picks: Vec<Option<usize>> = rev.iter().map(|&r| Some(r as usize)).collect();
        let d_values = scatter("SparseFillEmptyRowsGrad", &grad, &picks)?;
        let mut visited = vec![false; n as usize];
        for &r in &rev {
            visited[r as usize] = true;
        }
        let d_default = dispatch!(
            grad.dtype(),
            "SparseFillEmptyRowsGrad",
            [
                Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
            ],
            unvisited_sum(&grad, &visited)
        )?;
        Ok(vec![d_values, d_default])
    }))
}

fn unvisited_sum<T: Num>(grad: &Tensor, visited: &[bool]) -> Result<Tensor> {
    let mut sum = T::ZERO;
    for (v, &seen) in values::<T>(buffer("SparseFillEmptyRowsGrad", grad)?).zip(visited) {
        if !seen {
            sum = sum.add(v);
        }
    }
    let mut out = out_buf::<T>(1);
    sum.put(&mut out);
    finish(T::DTYPE, vec![], out)
}

pub(super) fn slice_grad(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [grad, ii, start, oi] = take::<4>("SparseSliceGrad", inputs)?;
        vector_check(&grad, "backprop_val_grad")?;
        let input = indices_of(&ii, "Input input_indices")?;
        let output = indices_of(&oi, "Input output_indices")?;
        let start = int64s(&start, "Input input_start")?;
        if grad.num_elements() != output.n as u64 {
            return Err(invalid(format!(
                "# elements of backprop_val_grad and # rows of output_indices should match (#nnz of sum): got {} and {}",
                grad.num_elements(),
                output.n
            )));
        }
        if input.rank != output.rank {
            return Err(invalid(format!(
                "The input and output should have the same ndims: got: {} and {}",
                input.rank, output.rank
            )));
        }
        if start.len() != input.rank {
            return Err(invalid(format!(
                "Expected input_start to be a vector of length {} but got length {}",
                input.rank,
                start.len()
            )));
        }
        let mut picks = vec![None; input.n];
        let mut j = 0;
        for (i, pick) in picks.iter_mut().enumerate() {
            if j >= output.n {
                break;
            }
            let same = input
                .row(i)
                .iter()
                .zip(output.row(j))
                .zip(&start)
                .all(|((&a, &b), &o)| Some(a) == b.checked_add(o));
            if same {
                *pick = Some(j);
                j += 1;
            }
        }
        if j != output.n {
            return Err(Error::Internal(format!(
                "Elements of backprop_val_grad aren't all propagated. Num elements:{}, used: {j}",
                output.n
            )));
        }
        Ok(vec![scatter("SparseSliceGrad", &grad, &picks)?])
    }))
}
