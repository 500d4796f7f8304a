//! Elementwise ops on a sparse tensor's values:
//!
//! * `SparseDenseCwiseAdd`/`Mul`/`Div`: the sparse values combined with
//!   the dense tensor's entries at the same indices (the dense side
//!   broadcast to the sparse shape, never the other way round);
//! * `SparseSparseMaximum`/`Minimum`: two sparse tensors merged as sorted
//!   runs, an entry missing from one side meeting an implicit zero;
//! * `SparseSoftmax`: a softmax over the last dimension's entries of each
//!   row (the entries sorted first; the output is in sorted order).
//!
//! Floats follow TensorFlow's CPU arithmetic: subnormals read and written as
//! zeros, max/min propagate a NaN from either side and keep the first
//! operand on a tie (so `max(0, -0)` is `0`, `max(-0, 0)` is `-0`).

use tfdata_core::{DType, Result, Tensor};

use super::super::numeric::{Elem, buffer, dispatch, finish, out_buf, values};
use super::{Indices, indices_of, invalid, shape_str};
use crate::attrs::NodeAttrs;
use crate::kernels::Compute;
use crate::kernels::layout::take;

/// The value types of these ops: TensorFlow's real number types, less the
/// half-precision ones tfdata's math does not run.
pub(super) trait Num: Elem {
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// `None` for an integer overflow TensorFlow's kernel would trap on.
    fn div(self, o: Self) -> Option<Self>;
    fn is_zero(self) -> bool;
    fn is_nan(self) -> bool;
    fn exp(self) -> Self;
}

macro_rules! int_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            fn div(self, o: Self) -> Option<Self> { self.checked_div(o) }
            fn is_zero(self) -> bool { self == 0 }
            fn is_nan(self) -> bool { false }
            fn exp(self) -> Self { self }
        }
    )*};
}
int_num!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            fn add(self, o: Self) -> Self { (self.ftz() + o.ftz()).ftz() }
            fn mul(self, o: Self) -> Self { (self.ftz() * o.ftz()).ftz() }
            fn div(self, o: Self) -> Option<Self> { Some((self.ftz() / o.ftz()).ftz()) }
            fn is_zero(self) -> bool { self.ftz() == 0.0 }
            fn is_nan(self) -> bool { <$t>::is_nan(self) }
            fn exp(self) -> Self { <$t>::exp(self.ftz()).ftz() }
        }
    )*};
}
float_num!(f32, f64);

/// Eigen's NaN-propagating max: a NaN on either side wins, and a tie
/// keeps `a`.
fn max_of<T: Num>(a: T, b: T) -> T {
    if a.is_nan() {
        a
    } else if b.is_nan() || a < b {
        b
    } else {
        a
    }
}

fn min_of<T: Num>(a: T, b: T) -> T {
    if a.is_nan() {
        a
    } else if b.is_nan() || b < a {
        b
    } else {
        a
    }
}

/// The real number types TensorFlow registers these ops for (less half
/// precision).
macro_rules! real {
    ($dt:expr, $op:expr, $f:ident $args:tt) => {
        dispatch!(
            $dt,
            $op,
            [Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64],
            $f $args
        )
    };
}

/// `SparseTensor::Create`'s checks: as many values as indices, and index
/// rows as long as the shape.
pub(super) fn check_create(ind: &Indices, n_values: u64, shape: &[i64]) -> Result<()> {
    if ind.n as u64 != n_values {
        return Err(invalid(format!(
            "Number of elements in indices ({}) and values ({n_values}) do not match",
            ind.n
        )));
    }
    if ind.rank != shape.len() {
        return Err(invalid(format!(
            "Index rank ({}) and shape rank ({}) do not match",
            ind.rank,
            shape.len()
        )));
    }
    Ok(())
}

/// `SparseTensor::IndicesValid` without its order check (the ops here
/// accept any order): every index inside the shape.
pub(super) fn check_bounds(ind: &Indices, shape: &[i64]) -> Result<()> {
    for k in 0..ind.n {
        let row = ind.row(k);
        if row.iter().zip(shape).any(|(&x, &d)| x < 0 || x >= d) {
            let idx: Vec<String> = row.iter().map(i64::to_string).collect();
            return Err(invalid(format!(
                "Sparse index tuple indices[{k}, :] = [{}] is out of bounds",
                idx.join(", ")
            )));
        }
    }
    Ok(())
}

fn matrix_vector_checks(ind: &Tensor, vals: &Tensor, shape: &Tensor) -> Result<()> {
    if ind.shape().len() != 2 {
        return Err(invalid(format!(
            "Input sp_indices should be a matrix but received shape: {}",
            shape_str(ind.shape())
        )));
    }
    if vals.shape().len() != 1 || shape.shape().len() != 1 {
        return Err(invalid(format!(
            "Inputs sp_values and sp_shape should be vectors but received shapes: {} and {}",
            shape_str(vals.shape()),
            shape_str(shape.shape())
        )));
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum DenseOp {
    Add,
    Mul,
    Div,
}

impl DenseOp {
    fn name(self) -> &'static str {
        match self {
            DenseOp::Add => "SparseDenseCwiseAdd",
            DenseOp::Mul => "SparseDenseCwiseMul",
            DenseOp::Div => "SparseDenseCwiseDiv",
        }
    }
}

pub(super) fn dense_add(_: &NodeAttrs) -> Result<Compute> {
    Ok(sparse_dense(DenseOp::Add))
}

pub(super) fn dense_mul(_: &NodeAttrs) -> Result<Compute> {
    Ok(sparse_dense(DenseOp::Mul))
}

pub(super) fn dense_div(_: &NodeAttrs) -> Result<Compute> {
    Ok(sparse_dense(DenseOp::Div))
}

fn sparse_dense(op: DenseOp) -> Compute {
    Box::new(move |inputs| {
        let [ind, vals, shape, dense] = take::<4>(op.name(), inputs)?;
        matrix_vector_checks(&ind, &vals, &shape)?;
        let ind = indices_of(&ind, "Input sp_indices")?;
        let sh = super::int64s(&shape, "Input sp_shape")?;
        if ind.n as u64 != vals.num_elements() {
            return Err(invalid(format!(
                "The first dimension of values and indices should match. ({} vs. {})",
                vals.num_elements(),
                ind.n
            )));
        }
        if sh.len() != ind.rank {
            return Err(invalid(format!(
                "Number of dimensions must match second dimension of indices. Got {} dimensions, indices shape: [{},{}]",
                sh.len(),
                ind.n,
                ind.rank
            )));
        }
        if sh.is_empty() {
            return Err(invalid("The shape argument requires at least one element."));
        }
        if let Some(&d) = sh.iter().find(|&&d| d < 0) {
            return Err(invalid(format!(
                "Expected shape dimensions to be non-negative, got {d}"
            )));
        }
        if vals.dtype() != dense.dtype() {
            return Err(invalid(format!(
                "{}: sp_values and dense must have one dtype, got {} and {}",
                op.name(),
                vals.dtype(),
                dense.dtype()
            )));
        }
        // The dense side broadcasts to the sparse shape only: no more
        // dimensions, and each (from the right) 1 or the sparse one.
        let dd = dense.shape();
        let fits = dd.len() <= sh.len()
            && dd
                .iter()
                .rev()
                .zip(sh.iter().rev())
                .all(|(&x, &s)| x == s || x == 1);
        if !fits {
            return Err(invalid(format!(
                "SparseDenseBinaryOpShared broadcasts dense to sparse only; got incompatible shapes: {} vs. {}",
                shape_str(&sh),
                shape_str(dd)
            )));
        }
        if sh.len() > 5 {
            return Err(invalid(format!(
                "Only tensors with ranks between 1 and 5 are currently supported.  Tensor rank: {}",
                sh.len()
            )));
        }
        let out = real!(
            vals.dtype(),
            op.name(),
            dense_typed(op, &ind, &vals, &sh, &dense)
        )?;
        Ok(vec![out])
    })
}

fn dense_typed<T: Num>(
    op: DenseOp,
    ind: &Indices,
    vals: &Tensor,
    sh: &[i64],
    dense: &Tensor,
) -> Result<Tensor> {
    let db = buffer(op.name(), dense)?;
    let dvals: Vec<T> = values(db).collect();
    // The dense strides seen from the sparse dimensions: 0 where the dense
    // side has no such dimension or broadcasts a 1.
    let dd = dense.shape();
    let lead = sh.len() - dd.len();
    let mut strides = vec![0i64; sh.len()];
    let mut s = 1i64;
    for d in (0..dd.len()).rev() {
        if dd[d] != 1 {
            strides[lead + d] = s;
        }
        s = s.saturating_mul(dd[d]);
    }
    let sv: Vec<T> = values(buffer(op.name(), vals)?).collect();
    let mut out = out_buf::<T>(ind.n);
    for (k, &v) in sv.iter().enumerate().take(ind.n) {
        let row = ind.row(k);
        if row.iter().zip(sh).any(|(&x, &d)| x < 0 || x >= d) {
            return Err(invalid(
                "Provided indices are out-of-bounds w.r.t. dense side with broadcasted shape",
            ));
        }
        let at: i64 = row.iter().zip(&strides).map(|(&x, &st)| x * st).sum();
        let d = dvals[at as usize];
        // Only the dense values an index reaches must be nonzero.
        if matches!(op, DenseOp::Div) && d.is_zero() {
            return Err(invalid(
                "SparseDenseCwiseDiv cannot divide by zero,but input dense tensor contains zero ",
            ));
        }
        let r = match op {
            DenseOp::Add => v.add(d),
            DenseOp::Mul => v.mul(d),
            DenseOp::Div => v.div(d).ok_or_else(|| {
                invalid("SparseDenseCwiseDiv: integer division overflows (TensorFlow traps)")
            })?,
        };
        r.put(&mut out);
    }
    finish(vals.dtype(), vec![ind.n as i64], out)
}

pub(super) fn sparse_maximum(_: &NodeAttrs) -> Result<Compute> {
    Ok(sparse_sparse("SparseSparseMaximum", true))
}

pub(super) fn sparse_minimum(_: &NodeAttrs) -> Result<Compute> {
    Ok(sparse_sparse("SparseSparseMinimum", false))
}

fn sparse_sparse(op: &'static str, max: bool) -> Compute {
    Box::new(move |inputs| {
        let [ai, av, ash, bi, bv, bsh] = take::<6>(op, inputs)?;
        if ai.shape().len() != 2 || bi.shape().len() != 2 {
            return Err(invalid(format!(
                "Inputs a_indices and b_indices should be matrices but received shapes: {}, {}",
                shape_str(ai.shape()),
                shape_str(bi.shape())
            )));
        }
        if av.shape().len() != 1 || bv.shape().len() != 1 {
            return Err(invalid(format!(
                "Inputs a_values and b_values should be vectors but received shapes: {} and {}",
                shape_str(av.shape()),
                shape_str(bv.shape())
            )));
        }
        if ash.shape().len() != 1 || bsh.shape().len() != 1 {
            return Err(invalid(format!(
                "Input shapes should be a vector but received shapes {} and {}",
                shape_str(ash.shape()),
                shape_str(bsh.shape())
            )));
        }
        let a = indices_of(&ai, "Input a_indices")?;
        let b = indices_of(&bi, "Input b_indices")?;
        let ad = super::int64s(&ash, "Input a_shape")?;
        let bd = super::int64s(&bsh, "Input b_shape")?;
        check_create(&a, av.num_elements(), &ad)?;
        check_create(&b, bv.num_elements(), &bd)?;
        if ad.len() != bd.len() {
            let join = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(" ");
            return Err(invalid(format!(
                "Operands do not have the same ranks; got shapes: {} and {}",
                join(&ad),
                join(&bd)
            )));
        }
        if let Some(d) = (0..ad.len()).find(|&d| ad[d] != bd[d]) {
            return Err(invalid(format!(
                "Operands' shapes do not match: got {} and {} for dimension {d}",
                ad[d], bd[d]
            )));
        }
        check_bounds(&a, &ad)?;
        check_bounds(&b, &bd)?;
        if av.dtype() != bv.dtype() {
            return Err(invalid(format!(
                "{op}: a_values and b_values must have one dtype"
            )));
        }
        let (flat, vals) = real!(av.dtype(), op, union_typed(op, max, &a, &av, &b, &bv))?;
        let n = vals.num_elements() as usize;
        Ok(vec![Indices::tensor(flat, n, a.rank)?, vals])
    })
}

/// The union of two index runs taken as sorted (as TensorFlow's merge
/// does, without checking): equal rows pair up, the rest meet a zero.
fn union_typed<T: Num>(
    op: &str,
    max: bool,
    a: &Indices,
    av: &Tensor,
    b: &Indices,
    bv: &Tensor,
) -> Result<(Vec<i64>, Tensor)> {
    let av: Vec<T> = values(buffer(op, av)?).collect();
    let bv: Vec<T> = values(buffer(op, bv)?).collect();
    let f = |x: T, y: T| if max { max_of(x, y) } else { min_of(x, y) };
    super::super::check_size(op, T::DTYPE, (a.n + b.n) as u64)?;
    let mut flat = Vec::with_capacity((a.n + b.n) * a.rank);
    let mut out = out_buf::<T>(a.n + b.n);
    let (mut i, mut j) = (0, 0);
    while i < a.n || j < b.n {
        let order = if i >= a.n {
            std::cmp::Ordering::Greater
        } else if j >= b.n {
            std::cmp::Ordering::Less
        } else {
            a.row(i).cmp(b.row(j))
        };
        let v = match order {
            std::cmp::Ordering::Less => {
                flat.extend_from_slice(a.row(i));
                i += 1;
                f(av[i - 1], T::ZERO)
            }
            std::cmp::Ordering::Equal => {
                flat.extend_from_slice(a.row(i));
                i += 1;
                j += 1;
                f(av[i - 1], bv[j - 1])
            }
            std::cmp::Ordering::Greater => {
                flat.extend_from_slice(b.row(j));
                j += 1;
                f(T::ZERO, bv[j - 1])
            }
        };
        v.ftz().put(&mut out);
    }
    let n = out.len() / T::SIZE;
    Ok((flat, finish(T::DTYPE, vec![n as i64], out)?))
}

pub(super) fn softmax(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [ind, vals, shape] = take::<3>("SparseSoftmax", inputs)?;
        matrix_vector_checks(&ind, &vals, &shape)?;
        if shape.num_elements() < 2 {
            let v = super::int64s(&shape, "Input sp_shape")?;
            let s: Vec<String> = v.iter().map(i64::to_string).collect();
            return Err(invalid(format!(
                "Input should have rank >= 2, but received shape: {}",
                s.join(" ")
            )));
        }
        let ind = indices_of(&ind, "Input sp_indices")?;
        let sh = super::int64s(&shape, "Input sp_shape")?;
        if ind.n as u64 != vals.num_elements() {
            return Err(invalid(format!(
                "indices and values rows (indexing dimension) must match. (indices = {}, values = {})",
                ind.n,
                vals.num_elements()
            )));
        }
        if ind.rank != sh.len() {
            return Err(invalid("Order length must be SparseTensor rank."));
        }
        if let Some(&d) = sh.iter().find(|&&d| d < 0) {
            return Err(invalid(format!(
                "Expected shape dimensions to be non-negative, got {d}"
            )));
        }
        let out = match vals.dtype() {
            DType::Float => softmax_typed::<f32>(&ind, &vals)?,
            DType::Double => softmax_typed::<f64>(&ind, &vals)?,
            other => {
                return Err(super::super::numeric::unsupported("SparseSoftmax", other));
            }
        };
        Ok(vec![out])
    }))
}

fn softmax_typed<T: Num + std::ops::Sub<Output = T> + std::ops::Div<Output = T> + From<u8>>(
    ind: &Indices,
    vals: &Tensor,
) -> Result<Tensor> {
    let v: Vec<T> = values(buffer("SparseSoftmax", vals)?).collect();
    // Sorted by index (stable, so repeated indices keep their order, as
    // TensorFlow's sort does for the short runs it sorts by insertion).
    let mut order: Vec<usize> = (0..ind.n).collect();
    order.sort_by(|&x, &y| ind.row(x).cmp(ind.row(y)));
    let prefix = ind.rank - 1;
    let mut out = out_buf::<T>(ind.n);
    let mut start = 0;
    while start < order.len() {
        let key = &ind.row(order[start])[..prefix];
        let mut end = start + 1;
        while end < order.len() && &ind.row(order[end])[..prefix] == key {
            end += 1;
        }
        let group: Vec<T> = order[start..end].iter().map(|&k| v[k].ftz()).collect();
        // Eigen's max reduction: NaN-propagating.
        let mut m = group[0];
        for &x in &group[1..] {
            m = max_of(m, x);
        }
        let exps: Vec<T> = group.iter().map(|&x| (x - m).ftz().exp()).collect();
        let mut sum = T::ZERO;
        for &e in &exps {
            sum = sum.add(e);
        }
        // TensorFlow multiplies by the sum's inverse rather than dividing.
        let inv = (T::from(1u8) / sum).ftz();
        for e in exps {
            e.mul(inv).put(&mut out);
        }
        start = end;
    }
    finish(vals.dtype(), vec![ind.n as i64], out)
}
