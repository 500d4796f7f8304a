//! Counting ops: `Bincount` (weighted or not), `HistogramFixedWidth`, and
//! the log-sum-exp scan `CumulativeLogsumexp`, with TensorFlow 2.21's
//! dtypes, arithmetic and errors.
//!
//! `Bincount` and `HistogramFixedWidth` are exact (TF sums weights in
//! input order, and bins a value as `min((max(v, lo) - lo) / step,
//! nbins - 1)` with the difference in the value's type and the division in
//! double). `CumulativeLogsumexp` steps `max + log1p(exp(min - max))` as TF
//! does, with libm's `exp` and `log1p` where TF's scan calls Eigen's (within
//! a few ulp, declared by the differential cases).

use tfdata_core::{DType, Result, Tensor};

use super::numeric::{
    Elem, at, buffer, dispatch, expect_dtype, finish, index_values, invalid, out_elements,
    shape_str, split_at_axis, values,
};
use super::{Compute, KernelDef};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "Bincount",
        outputs: |_| Ok(vec![("bins", 1)]),
        build: build_bincount,
    },
    KernelDef {
        op: "HistogramFixedWidth",
        outputs: |_| Ok(vec![("out", 1)]),
        build: build_histogram,
    },
    KernelDef {
        op: "CumulativeLogsumexp",
        outputs: |_| Ok(vec![("out", 1)]),
        build: build_logsumexp,
    },
];

fn check_t(attrs: &NodeAttrs, op: &str, key: &str, allowed: &[DType]) -> Result<()> {
    if attrs.has(key) {
        let t = attrs.dtype(key)?;
        if !allowed.contains(&t) {
            return Err(attrs.error(super::numeric::unsupported(op, t)));
        }
    }
    Ok(())
}

/// Elements TF sums weights in.
pub(super) trait Weight: Elem {
    fn plus(self, o: Self) -> Self;
    fn one() -> Self;
}
macro_rules! weight {
    ($t:ty, $one:expr, $add:expr) => {
        impl Weight for $t {
            fn plus(self, o: Self) -> Self {
                $add(self, o)
            }
            fn one() -> Self {
                $one
            }
        }
    };
}
weight!(i32, 1, i32::wrapping_add);
weight!(i64, 1, i64::wrapping_add);
weight!(f32, 1.0, |a: f32, b: f32| (a + b).ftz());
weight!(f64, 1.0, |a: f64, b: f64| (a + b).ftz());

fn build_bincount(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    use DType::*;
    check_t(attrs, &op, "T", &[Int32, Int64, Float, Double])?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 3)?;
        let weights = &inputs[2];
        let out = dispatch!(
            weights.dtype(),
            &op,
            [Int32, Int64, Float, Double],
            bincount(&op, &inputs)
        )?;
        Ok(vec![out])
    }))
}

fn bincount<T: Weight>(op: &str, v: &[Tensor]) -> Result<Tensor> {
    let (arr, size, weights) = (&v[0], &v[1], &v[2]);
    expect_dtype(op, arr, 0, DType::Int32)?;
    expect_dtype(op, size, 1, DType::Int32)?;
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
    let bins = out_elements(op, T::DTYPE, &[n])?;
    let indices = index_values(op, "arr", arr)?;
    if indices.iter().any(|&i| i < 0) {
        return Err(invalid(op, "Input arr must be non-negative!"));
    }
    let weighted = weights.num_elements() > 0;
    if weighted && weights.num_elements() != arr.num_elements() {
        return Err(invalid(
            op,
            "Input indices and weights must have the same size.",
        ));
    }
    let wb = buffer(op, weights)?;
    let mut out = vec![T::ZERO; bins];
    for (k, &i) in indices.iter().enumerate() {
        // Values past the last bin are dropped, as TF's CPU kernel does.
        if let Some(slot) = out.get_mut(i as usize) {
            let w = if weighted {
                at::<T>(wb, k).ftz()
            } else {
                T::one()
            };
            *slot = slot.plus(w);
        }
    }
    let mut data = Vec::with_capacity(bins * T::SIZE);
    for x in out {
        x.put(&mut data);
    }
    finish(T::DTYPE, vec![n], data)
}

fn build_histogram(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    use DType::*;
    check_t(attrs, &op, "T", &[Int32, Int64, Float, Double])?;
    let out_type = if attrs.has("dtype") {
        attrs.dtype("dtype")?
    } else {
        Int32
    };
    if !matches!(out_type, Int32 | Int64) {
        return Err(attrs.error(super::numeric::unsupported(&op, out_type)));
    }
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 3)?;
        let out = dispatch!(
            inputs[0].dtype(),
            &op,
            [Int32, Int64, Float, Double],
            histogram(&op, out_type, &inputs)
        )?;
        Ok(vec![out])
    }))
}

/// The value types of a histogram: a value's offset from the low end
/// (integers in double: TF's full-range histograms do not wrap).
trait Binned: Elem {
    fn offset(self, lo: Self) -> f64;
    fn is_nan(self) -> bool;
}
macro_rules! binned_int {
    ($t:ty) => {
        impl Binned for $t {
            fn offset(self, lo: Self) -> f64 {
                self.max(lo) as f64 - lo as f64
            }
            fn is_nan(self) -> bool {
                false
            }
        }
    };
}
binned_int!(i32);
binned_int!(i64);
macro_rules! binned_float {
    ($t:ty) => {
        impl Binned for $t {
            fn offset(self, lo: Self) -> f64 {
                let v = if self < lo { lo } else { self };
                f64::from((v - lo).ftz())
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    };
}
binned_float!(f32);
binned_float!(f64);

fn histogram<T: Binned + std::fmt::Display>(
    op: &str,
    out_type: DType,
    v: &[Tensor],
) -> Result<Tensor> {
    let (x, range, nbins) = (&v[0], &v[1], &v[2]);
    expect_dtype(op, range, 1, T::DTYPE)?;
    expect_dtype(op, nbins, 2, DType::Int32)?;
    if range.shape().len() != 1 {
        return Err(invalid(op, "value_range should be a vector."));
    }
    if range.num_elements() != 2 {
        return Err(invalid(
            op,
            format!(
                "value_range should be a vector of 2 elements, but got {}",
                range.num_elements()
            ),
        ));
    }
    if !nbins.shape().is_empty() {
        return Err(invalid(
            op,
            format!(
                "nbins should be a scalar, but got {}",
                shape_str(nbins.shape())
            ),
        ));
    }
    let rb = buffer(op, range)?;
    let (lo, hi) = (at::<T>(rb, 0).ftz(), at::<T>(rb, 1).ftz());
    let n = index_values(op, "nbins", nbins)?[0];
    if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
        return Err(invalid(
            op,
            format!(
                "value_range should satisfy value_range[0] < value_range[1], but got '[{}, {}]'",
                lo, hi
            ),
        ));
    }
    if n <= 0 {
        return Err(invalid(
            op,
            format!("nbins should be a positive number, but got '{n}'"),
        ));
    }
    let bins = out_elements(op, out_type, &[n])?;
    let xb = buffer(op, x)?;
    let mut counts = vec![0i64; bins];
    let step = hi.offset(lo) / n as f64;
    let last = (n - 1) as f64;
    for value in values::<T>(xb) {
        let value = value.ftz();
        if value.is_nan() {
            return Err(invalid(op, "Histogram values must not contain NaN"));
        }
        let bin = (value.offset(lo) / step).min(last) as i32;
        if let Some(c) = counts.get_mut(bin.max(0) as usize) {
            *c += 1;
        }
    }
    super::layout::int_tensor(op, out_type, &counts, vec![n])
}

fn build_logsumexp(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    check_t(attrs, &op, "T", &[DType::Float, DType::Double])?;
    let exclusive = attrs.bool_or("exclusive", false)?;
    let reverse = attrs.bool_or("reverse", false)?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 2)?;
        let out = dispatch!(
            inputs[0].dtype(),
            &op,
            [Float, Double],
            logsumexp(&op, exclusive, reverse, &inputs)
        )?;
        Ok(vec![out])
    }))
}

trait LogAdd: Elem {
    /// TF 2.21's step (`self` the running value): `max` when it is -inf
    /// (below lowest), else `log1p(exp(min - max)) + max`, with C++'s
    /// `std::min`/`std::max`, which return the running value when the
    /// other is NaN (so a NaN element counts as a copy of it).
    fn log_add(self, o: Self) -> Self;
    const START: Self;
}
macro_rules! log_add {
    ($t:ty) => {
        impl LogAdd for $t {
            const START: Self = <$t>::NEG_INFINITY;
            fn log_add(self, o: Self) -> Self {
                let mi = if o < self { o } else { self };
                let ma = if self < o { o } else { self };
                if ma < <$t>::MIN {
                    return ma;
                }
                ((mi - ma).ftz().exp().ftz().ln_1p().ftz() + ma).ftz()
            }
        }
    };
}
log_add!(f32);
log_add!(f64);

fn logsumexp<T: LogAdd>(op: &str, exclusive: bool, reverse: bool, v: &[Tensor]) -> Result<Tensor> {
    let (x, axis) = (&v[0], &v[1]);
    expect_dtype(op, x, 0, T::DTYPE)?;
    let axis = super::reduce::scalar_axis(
        op,
        "ScanOp: axis must be a scalar, not ",
        axis,
        x.shape().len(),
        "ScanOp: ",
    )?;
    let n = out_elements(op, T::DTYPE, x.shape())?;
    let (before, len, after) = split_at_axis(x.shape(), axis);
    let xb = buffer(op, x)?;
    let mut out = vec![0u8; n * T::SIZE];
    for b in 0..before {
        for a in 0..after {
            let mut acc = T::START;
            for step in 0..len {
                let k = if reverse { len - 1 - step } else { step };
                let i = (b * len + k) * after + a;
                let next = acc.log_add(at::<T>(xb, i).ftz());
                let r = if exclusive { acc } else { next };
                acc = next;
                if let Some(slot) = out.get_mut(i * T::SIZE..) {
                    r.set(slot);
                }
            }
        }
    }
    finish(T::DTYPE, x.shape().to_vec(), out)
}

#[cfg(test)]
mod tests {
    use super::super::testing::run;
    use tfdata_core::Tensor;

    #[test]
    fn counts() {
        let arr = Tensor::vector(&[1i32, 1, 3, 7, 0]);
        let out = run(
            "Bincount",
            &[],
            vec![arr, Tensor::scalar(5i32), Tensor::vector::<f32>(&[])],
        )
        .unwrap();
        assert_eq!(
            out[0].to_vec::<f32>().unwrap(),
            vec![1.0, 2.0, 0.0, 1.0, 0.0]
        );
        let out = run(
            "HistogramFixedWidth",
            &[],
            vec![
                Tensor::vector(&[-1i32, 0, 1, 2, 5, 7]),
                Tensor::vector(&[0i32, 5]),
                Tensor::scalar(3i32),
            ],
        )
        .unwrap();
        assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![3, 1, 2]);
    }
}
