//! `SparseSplit` (`tf.sparse.split`): a sparse tensor cut into `num_split`
//! pieces along one dimension, the first `size % num_split` pieces one
//! longer; each piece keeps its entries in input order.

use tfdata_core::{Result, Tensor};

use super::cwise::{check_bounds, check_create};
use super::{Indices, gather, indices_of, int64s, invalid, shape_str};
use crate::attrs::NodeAttrs;
use crate::kernels::Compute;
use crate::kernels::layout::take;

pub(super) fn outputs(a: &NodeAttrs) -> Result<crate::kernels::OutputArgs> {
    let n = a.count("num_split")?;
    Ok(vec![
        ("output_indices", n),
        ("output_values", n),
        ("output_shape", n),
    ])
}

pub(super) fn sparse_split(a: &NodeAttrs) -> Result<Compute> {
    let num_split = a.count("num_split")?;
    if num_split < 1 {
        return Err(a.error("num_split must be at least 1"));
    }
    Ok(Box::new(move |inputs| {
        let [axis, ind, vals, shape] = take::<4>("SparseSplit", inputs)?;
        if !axis.shape().is_empty() {
            return Err(invalid(format!(
                "Input axis should be a scalar but received shape {}",
                shape_str(axis.shape())
            )));
        }
        if ind.shape().len() != 2 {
            return Err(invalid(format!(
                "Input indices should be a matrix but received shape {}",
                shape_str(ind.shape())
            )));
        }
        if vals.shape().len() != 1 {
            return Err(invalid(format!(
                "Input values should be a vector but received shape {}",
                shape_str(vals.shape())
            )));
        }
        if shape.shape().len() != 1 {
            return Err(invalid(format!(
                "Input shape should be a vector but received shape {}",
                shape_str(shape.shape())
            )));
        }
        let axis = super::super::layout::scalar_int("SparseSplit", "split_dim", &axis)?;
        let sh = int64s(&shape, "Input shape")?;
        let rank = sh.len() as i64;
        if axis < -rank || axis >= rank {
            return Err(invalid(format!(
                "Input axis should be in range [{}, {rank}), got {axis}",
                -rank
            )));
        }
        let dim = (if axis < 0 { axis + rank } else { axis }) as usize;
        let size = sh[dim];
        if num_split as i64 > size || size < 1 {
            return Err(invalid(format!(
                "Input num_split should be between 1 and the splitting dimension size ({size}), got {num_split}"
            )));
        }
        let ind = indices_of(&ind, "Input indices")?;
        check_create(&ind, vals.num_elements(), &sh)?;
        check_bounds(&ind, &sh)?;
        let n = num_split as i64;
        let (base, extra) = (size / n, size % n);
        // Piece p starts at p * base + min(p, extra).
        let start = |p: i64| p * base + p.min(extra);
        let piece_of = |x: i64| {
            let long = extra * (base + 1);
            if x < long {
                x / (base + 1)
            } else {
                extra + (x - long) / base
            }
        };
        let mut picks: Vec<Vec<usize>> = vec![Vec::new(); num_split];
        for k in 0..ind.n {
            picks[piece_of(ind.row(k)[dim]) as usize].push(k);
        }
        let mut out_ind = Vec::with_capacity(num_split);
        let mut out_vals = Vec::with_capacity(num_split);
        let mut out_shapes = Vec::with_capacity(num_split);
        for (p, rows) in picks.iter().enumerate() {
            let p = p as i64;
            let mut flat = Vec::with_capacity(rows.len() * ind.rank);
            for &k in rows {
                let at = flat.len();
                flat.extend_from_slice(ind.row(k));
                flat[at + dim] -= start(p);
            }
            out_ind.push(Indices::tensor(flat, rows.len(), ind.rank)?);
            let some: Vec<Option<usize>> = rows.iter().map(|&k| Some(k)).collect();
            out_vals.push(gather(&vals, &some, None)?);
            let mut s = sh.clone();
            s[dim] = start(p + 1) - start(p);
            out_shapes.push(Tensor::vector(&s));
        }
        let mut out = out_ind;
        out.extend(out_vals);
        out.extend(out_shapes);
        Ok(out)
    }))
}
