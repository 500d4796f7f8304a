//! `SparseAdd` (`tf.sparse.add` of two sparse tensors) and
//! `SparseTensorDenseAdd` (of a sparse and a dense one).

use tfdata_core::{DType, NativeType, Result, Tensor};

use super::{Indices, indices_of, int64s, invalid, shape_str, vector_of};
use crate::attrs::NodeAttrs;
use crate::kernels::Compute;
use crate::kernels::layout::take;

/// The value types both ops take here, with TensorFlow's arithmetic
/// (integers wrap).
trait Value: NativeType + PartialOrd {
    fn plus(self, other: Self) -> Self;
    fn magnitude_at_least(self, thresh: Self) -> bool;
}

macro_rules! float_value {
    ($t:ty) => {
        impl Value for $t {
            fn plus(self, other: Self) -> Self {
                self + other
            }
            fn magnitude_at_least(self, thresh: Self) -> bool {
                thresh <= self.abs()
            }
        }
    };
}
macro_rules! int_value {
    ($t:ty) => {
        impl Value for $t {
            fn plus(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
            fn magnitude_at_least(self, thresh: Self) -> bool {
                thresh <= self.wrapping_abs()
            }
        }
    };
}
float_value!(f32);
float_value!(f64);
int_value!(i32);
int_value!(i64);

/// Which operand an output entry comes from, and its summed value if both.
enum Entry<T> {
    A(usize),
    B(usize),
    Sum(usize, T),
}

fn merge<T: Value>(
    a: &Indices,
    av: &Tensor,
    b: &Indices,
    bv: &Tensor,
    thresh: &Tensor,
) -> Result<(Vec<i64>, Vec<T>)> {
    let (av, bv) = (av.to_vec::<T>()?, bv.to_vec::<T>()?);
    let thresh = thresh
        .to_vec::<T>()?
        .first()
        .copied()
        .ok_or_else(|| invalid("thresh is empty"))?;
    let mut entries = Vec::with_capacity(a.n + b.n);
    let (mut i, mut j) = (0, 0);
    while i < a.n && j < b.n {
        match a.row(i).cmp(b.row(j)) {
            std::cmp::Ordering::Less => {
                entries.push(Entry::A(i));
                i += 1;
            }
            std::cmp::Ordering::Equal => {
                let s = av[i].plus(bv[j]);
                if s.magnitude_at_least(thresh) {
                    entries.push(Entry::Sum(i, s));
                }
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Greater => {
                entries.push(Entry::B(j));
                j += 1;
            }
        }
    }
    entries.extend((i..a.n).map(Entry::A));
    entries.extend((j..b.n).map(Entry::B));
    let mut flat = Vec::with_capacity(entries.len() * a.rank);
    let mut values = Vec::with_capacity(entries.len());
    for e in entries {
        match e {
            Entry::A(k) => {
                flat.extend_from_slice(a.row(k));
                values.push(av[k]);
            }
            Entry::B(k) => {
                flat.extend_from_slice(b.row(k));
                values.push(bv[k]);
            }
            Entry::Sum(k, s) => {
                flat.extend_from_slice(a.row(k));
                values.push(s);
            }
        }
    }
    Ok((flat, values))
}

pub(super) fn sparse_add(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [ai, av, ash, bi, bv, bsh, thresh] = take::<7>("SparseAdd", inputs)?;
        let a = indices_of(&ai, "Input a_indices")?;
        let b = indices_of(&bi, "Input b_indices")?;
        vector_of(&av, "Input a_values")?;
        vector_of(&bv, "Input b_values")?;
        let (ad, bd) = (
            int64s(&ash, "Input a_shape")?,
            int64s(&bsh, "Input b_shape")?,
        );
        if a.n != av.num_elements() as usize || b.n != bv.num_elements() as usize {
            return Err(invalid(format!(
                "The numbers of indices and values do not match: a {} vs {}, b {} vs {}",
                a.n,
                av.num_elements(),
                b.n,
                bv.num_elements()
            )));
        }
        if a.rank != b.rank {
            return Err(invalid(format!(
                "Input indices must have the same dimension, got {} and {}",
                a.rank, b.rank
            )));
        }
        if ad.len() != bd.len() {
            return Err(invalid(format!(
                "Operands do not have the same ranks; got shapes: {} and {}",
                shape_str(&ad),
                shape_str(&bd)
            )));
        }
        if let Some(d) = (0..ad.len()).find(|&d| ad[d] != bd[d]) {
            return Err(invalid(format!(
                "Operands' shapes do not match: got {} and {} for dimension {d}",
                ad[d], bd[d]
            )));
        }
        if av.dtype() != bv.dtype() || thresh.dtype() != av.dtype() {
            return Err(invalid("SparseAdd: values and thresh must have one dtype"));
        }
        let rank = a.rank;
        let (flat, values) = match av.dtype() {
            DType::Float => {
                let (f, v) = merge::<f32>(&a, &av, &b, &bv, &thresh)?;
                (f, Tensor::vector(&v))
            }
            DType::Double => {
                let (f, v) = merge::<f64>(&a, &av, &b, &bv, &thresh)?;
                (f, Tensor::vector(&v))
            }
            DType::Int32 => {
                let (f, v) = merge::<i32>(&a, &av, &b, &bv, &thresh)?;
                (f, Tensor::vector(&v))
            }
            DType::Int64 => {
                let (f, v) = merge::<i64>(&a, &av, &b, &bv, &thresh)?;
                (f, Tensor::vector(&v))
            }
            other => {
                return Err(invalid(format!(
                    "SparseAdd on {other} values is not supported"
                )));
            }
        };
        let n = values.num_elements() as usize;
        Ok(vec![
            Indices::tensor(flat, n, rank)?,
            values,
            Tensor::vector(&ad),
        ])
    }))
}

fn dense_add_typed<T: Value>(
    ind: &Indices,
    av: &Tensor,
    b: &Tensor,
    strides: &[i64],
) -> Result<Tensor> {
    let av = av.to_vec::<T>()?;
    let mut out = b.to_vec::<T>()?;
    for (k, &v) in av.iter().enumerate().take(ind.n) {
        let at: i64 = ind.row(k).iter().zip(strides).map(|(&x, &s)| x * s).sum();
        let slot = &mut out[at as usize];
        *slot = slot.plus(v);
    }
    Tensor::from_slice(&out, b.shape().to_vec())
}

pub(super) fn dense_add(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [ai, av, ash, b] = take::<4>("SparseTensorDenseAdd", inputs)?;
        let a = indices_of(&ai, "Input a_indices")?;
        vector_of(&av, "Input a_values")?;
        let ad = int64s(&ash, "Input a_shape")?;
        if a.n != av.num_elements() as usize || a.rank != ad.len() {
            return Err(invalid(format!(
                "a_indices {}, a_values {} and a_shape {} do not match",
                shape_str(ai.shape()),
                shape_str(av.shape()),
                shape_str(ash.shape())
            )));
        }
        if ad.len() != b.shape().len() {
            return Err(invalid(format!(
                "Dimension mismatch: sparse side {} vs dense side {}",
                shape_str(&ad),
                shape_str(b.shape())
            )));
        }
        if let Some(d) = (0..ad.len()).find(|&d| ad[d] != b.shape()[d]) {
            return Err(invalid(format!(
                "Dimension {d} does not equal (no broadcasting is supported): sparse side {} vs dense side {}",
                ad[d],
                b.shape()[d]
            )));
        }
        for k in 0..a.n {
            for (d, &x) in a.row(k).iter().enumerate() {
                if x < 0 || x >= ad[d] {
                    let dims: Vec<String> = ad.iter().map(i64::to_string).collect();
                    return Err(invalid(format!(
                        "Sparse tensor has an invalid index on dimension {d}: a_indices({k},{d}) = {x}, dense tensor shape: {}",
                        dims.join(" ")
                    )));
                }
            }
        }
        let mut strides = vec![1i64; ad.len()];
        for d in (0..ad.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * ad[d + 1];
        }
        if av.dtype() != b.dtype() {
            return Err(invalid(
                "SparseTensorDenseAdd: a_values and b must have one dtype",
            ));
        }
        let out = match b.dtype() {
            DType::Float => dense_add_typed::<f32>(&a, &av, &b, &strides)?,
            DType::Double => dense_add_typed::<f64>(&a, &av, &b, &strides)?,
            DType::Int32 => dense_add_typed::<i32>(&a, &av, &b, &strides)?,
            DType::Int64 => dense_add_typed::<i64>(&a, &av, &b, &strides)?,
            other => {
                return Err(invalid(format!(
                    "SparseTensorDenseAdd on {other} values is not supported"
                )));
            }
        };
        Ok(vec![out])
    }))
}
