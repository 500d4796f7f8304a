//! Reductions (`Sum`, `Mean`, `Max`, `Min`, `Prod`, `EuclideanNorm`, `All`,
//! `Any`), `ArgMax`/`ArgMin`, the scans `Cumsum`/`Cumprod`, and `OneHot`,
//! with TensorFlow 2.21's CPU semantics.
//!
//! Differences from TensorFlow: float `Sum`, `Mean`, `Prod` and
//! `EuclideanNorm` add in input order where Eigen adds in vector lanes and
//! trees, so sums of more than a few float elements can differ in the last
//! bits (integers agree exactly). float16/bfloat16 are refused.

use tfdata_core::{DType, Result, Tensor};

use super::numeric::{
    Elem, Num, Picker, Plan, at, attr_dtype, buffer, check_attr_dtype, dispatch, expect_dtype,
    finish, index_values, invalid, out_buf, out_elements, scalar_index, shape_str, split_at_axis,
    take, values,
};
use super::{Compute, KernelDef};
use crate::attrs::NodeAttrs;

/// The reduced dimensions (a mask over the input's) for an axes tensor,
/// checked as TF does: in range, negative from the back, no duplicates.
fn reduction_mask(op: &str, rank: usize, axes: &Tensor) -> Result<Vec<bool>> {
    let mut mask = vec![false; rank];
    for a in index_values(op, "reduction_indices", axes)? {
        let r = rank as i64;
        if a < -r || a >= r {
            return Err(invalid(
                op,
                format!("Invalid reduction dimension ({a} for input with {rank} dimension(s)"),
            ));
        }
        let d = if a < 0 { a + r } else { a } as usize;
        match mask.get_mut(d) {
            Some(slot) if !*slot => *slot = true,
            _ => {
                return Err(invalid(
                    op,
                    format!("Invalid reduction arguments: Axes contains duplicate dimension: {d}"),
                ));
            }
        }
    }
    Ok(mask)
}

#[derive(Clone, Copy)]
enum Red {
    Sum,
    Prod,
    Max,
    Min,
    Mean,
    Norm,
}

/// One pass over the input in order, accumulating into the output slot its
/// kept coordinates name.
fn fold<T: Elem, A: Copy>(
    op: &str,
    x: &Tensor,
    mask: &[bool],
    init: A,
    f: impl Fn(A, T) -> A,
) -> Result<(Vec<A>, Vec<i64>, u64)> {
    let keep: Vec<i64> = x
        .shape()
        .iter()
        .zip(mask)
        .map(|(&d, &m)| if m { 1 } else { d })
        .collect();
    let outputs = out_elements(op, T::DTYPE, &keep)?;
    let count = x
        .shape()
        .iter()
        .zip(mask)
        .filter(|&(_, &m)| m)
        .map(|(&d, _)| d.max(0) as u64)
        .product();
    let mut acc = vec![init; outputs];
    let xb = buffer(op, x)?;
    if x.num_elements() > 0 {
        if mask.iter().all(|&m| !m) {
            for (a, v) in acc.iter_mut().zip(values::<T>(xb)) {
                *a = f(*a, v.ftz());
            }
        } else if outputs == 1 {
            let a = values::<T>(xb).fold(init, |a, v| f(a, v.ftz()));
            acc.fill(a);
        } else {
            let mut i = 0;
            Plan::new(x.shape(), [&keep]).walk(|[j]| {
                if let Some(a) = acc.get_mut(j) {
                    *a = f(*a, at::<T>(xb, i).ftz());
                }
                i += 1;
            });
        }
    }
    Ok((acc, keep, count))
}

fn reduce<T: Num>(op: &str, r: Red, keep_dims: bool, v: &[Tensor]) -> Result<Tensor> {
    let [x, axes] = v else {
        return Err(invalid(op, format!("expected 2 inputs, got {}", v.len())));
    };
    expect_dtype(op, x, 0, T::DTYPE)?;
    let mask = reduction_mask(op, x.shape().len(), axes)?;
    if !mask.contains(&true) {
        return Ok(x.clone());
    }
    let (acc, keep, _) = match r {
        Red::Mean => {
            let (acc, keep, count) = fold(op, x, &mask, T::Wide::ZERO, |a: T::Wide, v: T| {
                a.add(v.widen()).ftz()
            })?;
            let acc = acc
                .into_iter()
                .map(|a| T::narrow(a.div_count(count)).ftz())
                .collect();
            (acc, keep, count)
        }
        Red::Sum => fold(op, x, &mask, T::ZERO, |a: T, v: T| a.add(v).ftz())?,
        Red::Prod => fold(op, x, &mask, T::ONE, |a: T, v: T| a.mul(v).ftz())?,
        Red::Max => fold(op, x, &mask, T::MAX_IDENTITY, T::maximum)?,
        Red::Min => fold(op, x, &mask, T::MIN_IDENTITY, T::minimum)?,
        Red::Norm => {
            let (acc, keep, count) = fold(op, x, &mask, T::ZERO, |a: T, v: T| {
                a.add(v.mul(v).ftz()).ftz()
            })?;
            // Integer norms truncate the square root of the (wrapped) sum.
            let acc = acc
                .into_iter()
                .map(|a| T::from_f64(a.to_f64().sqrt()).ftz())
                .collect();
            (acc, keep, count)
        }
    };
    let shape = reduced_shape(keep, &mask, keep_dims);
    let mut out = out_buf::<T>(acc.len());
    for a in acc {
        a.put(&mut out);
    }
    finish(T::DTYPE, shape, out)
}

fn logical(op: &str, all: bool, keep_dims: bool, v: &[Tensor]) -> Result<Tensor> {
    let [x, axes] = v else {
        return Err(invalid(op, format!("expected 2 inputs, got {}", v.len())));
    };
    expect_dtype(op, x, 0, DType::Bool)?;
    let mask = reduction_mask(op, x.shape().len(), axes)?;
    if !mask.contains(&true) {
        return Ok(x.clone());
    }
    let (acc, keep, _) = if all {
        fold(op, x, &mask, true, |a, v: bool| a && v)?
    } else {
        fold(op, x, &mask, false, |a, v: bool| a || v)?
    };
    let shape = reduced_shape(keep, &mask, keep_dims);
    let mut out = out_buf::<bool>(acc.len());
    for a in acc {
        a.put(&mut out);
    }
    finish(DType::Bool, shape, out)
}

fn reduced_shape(keep: Vec<i64>, mask: &[bool], keep_dims: bool) -> Vec<i64> {
    if keep_dims {
        keep
    } else {
        keep.into_iter()
            .zip(mask)
            .filter(|&(_, &m)| !m)
            .map(|(d, _)| d)
            .collect()
    }
}

fn build_reduce(attrs: &NodeAttrs, r: Option<Red>, all: bool) -> Result<Compute> {
    let keep_dims = attrs.bool_or("keep_dims", false)?;
    let want = attr_dtype(attrs, "T")?;
    let op = attrs.op.to_string();
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 2)?;
        let out = match (r, inputs.first()) {
            (Some(r), Some(x)) => {
                check_attr_dtype(&op, want, x, 0)?;
                dispatch!(
                    x.dtype(),
                    &op,
                    [
                        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
                    ],
                    reduce(&op, r, keep_dims, &inputs)
                )?
            }
            _ => logical(&op, all, keep_dims, &inputs)?,
        };
        Ok(vec![out])
    }))
}

/// Where ArgMax and ArgMin start (Eigen's `lowest()`/`highest()`: a NaN or
/// -inf never beats them, so an all-NaN row answers 0).
trait Extreme: Elem {
    const LOWEST: Self;
    const HIGHEST: Self;
}

macro_rules! extreme {
    ($($t:ty),*) => {$(
        impl Extreme for $t {
            const LOWEST: Self = <$t as Num>::LOWEST;
            const HIGHEST: Self = <$t as Num>::HIGHEST;
        }
    )*};
}
extreme!(f32, f64, i8, i16, i32, i64, u8, u16, u32, u64);

impl Extreme for bool {
    const LOWEST: Self = false;
    const HIGHEST: Self = true;
}

/// Checks a scalar axis input and resolves it against `rank` (TF's
/// ArgMax and scan ops name the problems in their own words).
pub(super) fn scalar_axis(
    op: &str,
    what: &str,
    t: &Tensor,
    rank: usize,
    prefix: &str,
) -> Result<usize> {
    if !t.shape().is_empty() {
        return Err(invalid(op, format!("{what}{}", shape_str(t.shape()))));
    }
    let a = scalar_index(op, "axis", t)?;
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(invalid(
            op,
            format!(
                "{prefix}Expected {} in the range [{}, {r}), but got {a}",
                if prefix.is_empty() {
                    "dimension"
                } else {
                    "scan axis"
                },
                -r
            ),
        ));
    }
    Ok(if a < 0 { a + r } else { a } as usize)
}

fn arg_extreme<T: Extreme>(op: &str, max: bool, out_type: DType, v: &[Tensor]) -> Result<Tensor> {
    let [x, dim] = v else {
        return Err(invalid(op, format!("expected 2 inputs, got {}", v.len())));
    };
    expect_dtype(op, x, 0, T::DTYPE)?;
    let axis = scalar_axis(
        op,
        "dim must be a scalar, but received tensor of shape: ",
        dim,
        x.shape().len(),
        "",
    )?;
    let (before, len, after) = split_at_axis(x.shape(), axis);
    if len == 0 {
        return Err(invalid(
            op,
            format!(
                "Reduction axis {axis} is empty in shape {}",
                shape_str(x.shape())
            ),
        ));
    }
    let mut shape = x.shape().to_vec();
    shape.remove(axis);
    let n = out_elements(op, out_type, &shape)?;
    let xb = buffer(op, x)?;
    let mut out = Vec::with_capacity(n.saturating_mul(out_type.size().unwrap_or(8)));
    for b in 0..before {
        for a in 0..after {
            let (mut best, mut at_k) = (if max { T::LOWEST } else { T::HIGHEST }, 0usize);
            for k in 0..len {
                let v = at::<T>(xb, (b * len + k) * after + a).ftz();
                // Strict comparisons: ties keep the first index, NaN never wins.
                if (max && v > best) || (!max && v < best) {
                    best = v;
                    at_k = k;
                }
            }
            match out_type {
                DType::Int32 => (at_k as i32).put(&mut out),
                DType::Int16 => (at_k as i16).put(&mut out),
                DType::UInt16 => (at_k as u16).put(&mut out),
                _ => (at_k as i64).put(&mut out),
            }
        }
    }
    finish(out_type, shape, out)
}

fn build_arg(attrs: &NodeAttrs, max: bool) -> Result<Compute> {
    let out_type = if attrs.has("output_type") {
        attrs.dtype("output_type")?
    } else {
        DType::Int64
    };
    if !matches!(
        out_type,
        DType::Int16 | DType::UInt16 | DType::Int32 | DType::Int64
    ) {
        return Err(attrs.error(format!(
            "output_type {out_type} is not one of int16, uint16, int32, int64"
        )));
    }
    let want = attr_dtype(attrs, "T")?;
    let op = attrs.op.to_string();
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 2)?;
        let dtype = inputs.first().map_or(DType::Bool, Tensor::dtype);
        if let Some(x) = inputs.first() {
            check_attr_dtype(&op, want, x, 0)?;
        }
        Ok(vec![dispatch!(
            dtype,
            &op,
            [
                Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Bool
            ],
            arg_extreme(&op, max, out_type, &inputs)
        )?])
    }))
}

#[derive(Clone, Copy)]
struct Scan {
    prod: bool,
    exclusive: bool,
    reverse: bool,
}

fn scan<T: Num>(op: &str, s: Scan, v: &[Tensor]) -> Result<Tensor> {
    let [x, axis] = v else {
        return Err(invalid(op, format!("expected 2 inputs, got {}", v.len())));
    };
    expect_dtype(op, x, 0, T::DTYPE)?;
    let axis = scalar_axis(
        op,
        "ScanOp: axis must be a scalar, not ",
        axis,
        x.shape().len(),
        "ScanOp: ",
    )?;
    let n = out_elements(op, T::DTYPE, x.shape())?;
    let (before, len, after) = split_at_axis(x.shape(), axis);
    let xb = buffer(op, x)?;
    let mut out = vec![0u8; n.saturating_mul(T::SIZE)];
    for b in 0..before {
        for a in 0..after {
            let mut acc = if s.prod { T::ONE } else { T::ZERO };
            for step in 0..len {
                let k = if s.reverse { len - 1 - step } else { step };
                let i = (b * len + k) * after + a;
                let v = at::<T>(xb, i).ftz();
                let next = if s.prod { acc.mul(v) } else { acc.add(v) }.ftz();
                let r = if s.exclusive { acc } else { next };
                acc = next;
                if let Some(slot) = out.get_mut(i * T::SIZE..) {
                    r.set(slot);
                }
            }
        }
    }
    finish(T::DTYPE, x.shape().to_vec(), out)
}

fn build_scan(attrs: &NodeAttrs, prod: bool) -> Result<Compute> {
    let s = Scan {
        prod,
        exclusive: attrs.bool_or("exclusive", false)?,
        reverse: attrs.bool_or("reverse", false)?,
    };
    let want = attr_dtype(attrs, "T")?;
    let op = attrs.op.to_string();
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 2)?;
        let dtype = inputs.first().map_or(DType::Bool, Tensor::dtype);
        if let Some(x) = inputs.first() {
            check_attr_dtype(&op, want, x, 0)?;
        }
        Ok(vec![dispatch!(
            dtype,
            &op,
            [
                Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
            ],
            scan(&op, s, &inputs)
        )?])
    }))
}

/// `OneHot`: the depth axis inserted at `axis`; indices outside
/// `0..depth` (negative ones included) give all-off rows.
fn one_hot(op: &str, axis: i64, inputs: Vec<Tensor>) -> Result<Tensor> {
    let [indices, depth, on, off] = take::<4>(op, inputs)?;
    let rank = indices.shape().len();
    if axis < -1 || axis > rank as i64 {
        return Err(invalid(
            op,
            format!(
                "Expected axis to be -1 or between [0, {}).  But received: {axis}",
                rank + 1
            ),
        ));
    }
    for (name, t) in [("depth", &depth), ("on_value", &on), ("off_value", &off)] {
        if !t.shape().is_empty() {
            return Err(invalid(
                op,
                format!("{name} must be a scalar, but got: {}", shape_str(t.shape())),
            ));
        }
    }
    expect_dtype(op, &off, 3, on.dtype())?;
    let d = scalar_index(op, "depth", &depth)?;
    if d < 0 {
        return Err(invalid(op, format!("depth must be non-negative, got: {d}")));
    }
    let idx: Vec<i64> = {
        let b = buffer(op, &indices)?;
        match indices.dtype() {
            DType::UInt8 => values::<u8>(b).map(i64::from).collect(),
            DType::Int8 => values::<i8>(b).map(i64::from).collect(),
            _ => index_values(op, "indices", &indices)?,
        }
    };
    let axis = if axis == -1 { rank } else { axis as usize };
    let mut shape = indices.shape().to_vec();
    shape.insert(axis, d);
    let n = out_elements(op, on.dtype(), &shape)?;
    let (before, _, _) = split_at_axis(indices.shape(), axis);
    let after = idx.len().checked_div(before).unwrap_or(0);
    let mut picker = Picker::new(&on, &off, n);
    for b in 0..before {
        for k in 0..d {
            for a in 0..after {
                picker.push(idx.get(b * after + a) == Some(&k), 0);
            }
        }
    }
    picker.finish(on.dtype(), shape)
}

fn build_one_hot(attrs: &NodeAttrs) -> Result<Compute> {
    let axis = attrs.int_or("axis", -1)?;
    let op = attrs.op.to_string();
    Ok(Box::new(move |inputs| {
        Ok(vec![one_hot(&op, axis, inputs)?])
    }))
}

fn out_output(_: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("out", 1)])
}

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "Sum",
        outputs: super::one_output,
        build: |a| build_reduce(a, Some(Red::Sum), false),
    },
    KernelDef {
        op: "Mean",
        outputs: super::one_output,
        build: |a| build_reduce(a, Some(Red::Mean), false),
    },
    KernelDef {
        op: "Max",
        outputs: super::one_output,
        build: |a| build_reduce(a, Some(Red::Max), false),
    },
    KernelDef {
        op: "Min",
        outputs: super::one_output,
        build: |a| build_reduce(a, Some(Red::Min), false),
    },
    KernelDef {
        op: "Prod",
        outputs: super::one_output,
        build: |a| build_reduce(a, Some(Red::Prod), false),
    },
    KernelDef {
        op: "EuclideanNorm",
        outputs: super::one_output,
        build: |a| build_reduce(a, Some(Red::Norm), false),
    },
    KernelDef {
        op: "All",
        outputs: super::one_output,
        build: |a| build_reduce(a, None, true),
    },
    KernelDef {
        op: "Any",
        outputs: super::one_output,
        build: |a| build_reduce(a, None, false),
    },
    KernelDef {
        op: "ArgMax",
        outputs: super::one_output,
        build: |a| build_arg(a, true),
    },
    KernelDef {
        op: "ArgMin",
        outputs: super::one_output,
        build: |a| build_arg(a, false),
    },
    KernelDef {
        op: "Cumsum",
        outputs: out_output,
        build: |a| build_scan(a, false),
    },
    KernelDef {
        op: "Cumprod",
        outputs: out_output,
        build: |a| build_scan(a, true),
    },
    KernelDef {
        op: "OneHot",
        outputs: super::one_output,
        build: build_one_hot,
    },
];

#[cfg(test)]
mod tests {
    use super::super::testing::{boolean, int, run, ty};
    use tfdata_core::{DType, Tensor};

    fn t<T: tfdata_core::NativeType>(v: &[T], shape: &[i64]) -> Tensor {
        Tensor::from_slice(v, shape.to_vec()).unwrap()
    }

    fn red(op: &str, x: Tensor, axes: Tensor, keep: bool) -> Result<Tensor, String> {
        run(op, &[("keep_dims", boolean(keep))], vec![x, axes])
            .map(|mut v| v.remove(0))
            .map_err(|e| e.to_string())
    }

    fn m23() -> Tensor {
        t(&[1i32, 2, 3, 4, 5, 6], &[2, 3])
    }

    // Expected values from TF 2.21 `tf.raw_ops`.
    #[test]
    fn axes_negative_keep_dims_and_errors() {
        let z = red("Sum", m23(), t(&[0i32], &[1]), false).unwrap();
        assert_eq!(
            (z.shape(), z.to_vec::<i32>().unwrap()),
            (&[3][..], vec![5, 7, 9])
        );
        let z = red("Sum", m23(), t(&[-1i32], &[1]), true).unwrap();
        assert_eq!(
            (z.shape(), z.to_vec::<i32>().unwrap()),
            (&[2, 1][..], vec![6, 15])
        );
        let z = red("Sum", m23(), Tensor::scalar(1i64), false).unwrap();
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![6, 15]);
        let z = red("Sum", m23(), t(&[1i32], &[1, 1]), false).unwrap();
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![6, 15]);
        let z = red(
            "Prod",
            t(&[2i32, 3, 4, 5], &[2, 2]),
            t(&[0i32, 1], &[2]),
            false,
        )
        .unwrap();
        assert_eq!(
            (z.shape(), z.to_vec::<i32>().unwrap()),
            (&[][..], vec![120])
        );
        // No axes: the identity.
        assert_eq!(
            red("Sum", m23(), t::<i32>(&[], &[0]), false).unwrap(),
            m23()
        );
        assert_eq!(
            red("Sum", Tensor::scalar(5i32), t::<i32>(&[], &[0]), false).unwrap(),
            Tensor::scalar(5i32)
        );
        let e = red("Sum", m23(), t(&[0i32, -2], &[2]), false).unwrap_err();
        assert!(
            e.contains("Invalid reduction arguments: Axes contains duplicate dimension: 0"),
            "{e}"
        );
        let e = red("Sum", m23(), t(&[2i32], &[1]), false).unwrap_err();
        assert!(
            e.contains("Invalid reduction dimension (2 for input with 2 dimension(s)"),
            "{e}"
        );
        let e = red("Max", m23(), t(&[-3i32], &[1]), false).unwrap_err();
        assert!(e.contains("(-3 for input with 2"), "{e}");
        assert!(red("Sum", Tensor::scalar(5i32), t(&[0i32], &[1]), false).is_err());
        assert!(red("Sum", m23(), t(&[1.0f32], &[1]), false).is_err());
        assert!(
            red(
                "Sum",
                Tensor::scalar_string("a"),
                t::<i32>(&[], &[0]),
                false
            )
            .is_err()
        );
        // A middle axis of a rank-3 tensor.
        let x = t(&(0..24).collect::<Vec<i64>>(), &[2, 3, 4]);
        let z = red("Sum", x.clone(), t(&[1i32], &[1]), false).unwrap();
        assert_eq!(
            z.to_vec::<i64>().unwrap(),
            vec![12, 15, 18, 21, 48, 51, 54, 57]
        );
        let z = red("Max", x, t(&[0i32, 2], &[2]), true).unwrap();
        assert_eq!(
            (z.shape(), z.to_vec::<i64>().unwrap()),
            (&[1, 3, 1][..], vec![15, 19, 23])
        );
    }

    #[test]
    fn mean_of_integers_divides_like_tf() {
        let mean = |x: Tensor| red("Mean", x, t(&[0i32], &[1]), false).unwrap();
        assert_eq!(mean(t(&[1i32, 1], &[2])).to_vec::<i32>().unwrap(), vec![1]);
        assert_eq!(
            mean(t(&[-3i32, -4], &[2])).to_vec::<i32>().unwrap(),
            vec![-3]
        );
        assert_eq!(
            mean(t(&[i32::MAX, i32::MAX], &[2]))
                .to_vec::<i32>()
                .unwrap(),
            vec![i32::MAX]
        );
        assert_eq!(
            mean(t(&[i64::MAX, i64::MAX], &[2]))
                .to_vec::<i64>()
                .unwrap(),
            vec![-1]
        );
        assert_eq!(
            mean(t(&[255u8; 300], &[300])).to_vec::<u8>().unwrap(),
            vec![255]
        );
        assert_eq!(
            mean(t(&[-100i8; 3], &[3])).to_vec::<i8>().unwrap(),
            vec![-100]
        );
        assert_eq!(
            mean(t(&[u32::MAX; 3], &[3])).to_vec::<u32>().unwrap(),
            vec![u32::MAX]
        );
        assert_eq!(
            mean(t(&[1.0f32, 2.0, 3.0, 4.0], &[4]))
                .to_vec::<f32>()
                .unwrap(),
            vec![2.5]
        );
        let z = red(
            "Mean",
            t(&[1i32, 2, 4, 4], &[2, 2]),
            t(&[1i32], &[1]),
            false,
        )
        .unwrap();
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![1, 4]);
        // Sums wrap where means do not.
        let z = red("Sum", t(&[200u8, 200], &[2]), t(&[0i32], &[1]), false).unwrap();
        assert_eq!(z.to_vec::<u8>().unwrap(), vec![144]);
    }

    #[test]
    fn empty_reductions_give_identities() {
        let e = || t::<f32>(&[], &[0, 2]);
        let ax = || t(&[0i32], &[1]);
        let got = |op| red(op, e(), ax(), false).unwrap().to_vec::<f32>().unwrap();
        assert!(got("Mean").iter().all(|v| v.is_nan()));
        assert_eq!(got("Sum"), vec![0.0, 0.0]);
        assert_eq!(got("Prod"), vec![1.0, 1.0]);
        assert_eq!(got("Max"), vec![f32::NEG_INFINITY; 2]);
        assert_eq!(got("Min"), vec![f32::INFINITY; 2]);
        let z = red("Max", t::<i32>(&[], &[0, 2]), ax(), false).unwrap();
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![i32::MIN; 2]);
        let z = red("Min", t::<u8>(&[], &[0, 2]), ax(), false).unwrap();
        assert_eq!(z.to_vec::<u8>().unwrap(), vec![255; 2]);
        let z = red("Mean", t::<i32>(&[], &[0, 2]), ax(), false).unwrap();
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![0; 2]);
        let z = red("Any", t::<bool>(&[], &[0]), ax(), false).unwrap();
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![false]);
        let z = red("All", t::<bool>(&[], &[0]), ax(), false).unwrap();
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![true]);
    }

    #[test]
    fn max_min_propagate_nan() {
        let ax = || t(&[0i32], &[1]);
        for x in [
            [1.0f32, f32::NAN, 3.0],
            [f32::NAN, 1.0, 3.0],
            [1.0, 3.0, f32::NAN],
        ] {
            for op in ["Max", "Min"] {
                let z = red(op, t(&x, &[3]), ax(), false)
                    .unwrap()
                    .to_vec::<f32>()
                    .unwrap();
                assert!(z[0].is_nan(), "{op} {x:?}");
            }
        }
    }

    #[test]
    fn all_any_and_norm() {
        let z = red(
            "All",
            t(&[true, false, true, true], &[2, 2]),
            t(&[1i32], &[1]),
            false,
        )
        .unwrap();
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![false, true]);
        let z = red(
            "Any",
            t(&[true, false, false, false], &[2, 2]),
            t(&[-1i32], &[1]),
            true,
        )
        .unwrap();
        assert_eq!(
            (z.shape(), z.to_vec::<bool>().unwrap()),
            (&[2, 1][..], vec![true, false])
        );
        let ax = || t(&[1i32], &[1]);
        let z = red(
            "EuclideanNorm",
            t(&[3.0f32, 4.0, 6.0, 8.0], &[2, 2]),
            ax(),
            false,
        )
        .unwrap();
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![5.0, 10.0]);
        let z = red("EuclideanNorm", t(&[3i32, 4, 1, 1], &[2, 2]), ax(), false).unwrap();
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![5, 1]);
        let z = red("EuclideanNorm", t(&[200u8, 200], &[1, 2]), ax(), false).unwrap();
        assert_eq!(z.to_vec::<u8>().unwrap(), vec![11]);
        assert!(red("All", t(&[1i32], &[1]), t(&[0i32], &[1]), false).is_err());
    }

    fn arg(op: &str, x: Tensor, dim: Tensor, out: Option<DType>) -> Result<Tensor, String> {
        let attrs: Vec<_> = out.map(|d| ("output_type", ty(d))).into_iter().collect();
        run(op, &attrs, vec![x, dim])
            .map(|mut v| v.remove(0))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn arg_max_min_ties_nan_and_errors() {
        let idx = |op, x: &[f32]| {
            arg(op, t(x, &[x.len() as i64]), Tensor::scalar(0i32), None)
                .unwrap()
                .to_vec::<i64>()
                .unwrap()[0]
        };
        let nan = f32::NAN;
        assert_eq!(idx("ArgMax", &[1.0, nan, 3.0]), 2);
        assert_eq!(idx("ArgMax", &[nan, 1.0, 3.0]), 2);
        assert_eq!(idx("ArgMax", &[1.0, 3.0, nan]), 1);
        assert_eq!(idx("ArgMax", &[5.0, nan, 2.0]), 0);
        assert_eq!(idx("ArgMax", &[nan, nan]), 0);
        assert_eq!(idx("ArgMax", &[nan, -f32::MAX]), 0);
        assert_eq!(idx("ArgMax", &[f32::NEG_INFINITY, f32::NEG_INFINITY]), 0);
        assert_eq!(idx("ArgMax", &[f32::NEG_INFINITY, 5.0]), 1);
        assert_eq!(idx("ArgMin", &[1.0, nan, 0.0]), 2);
        assert_eq!(idx("ArgMin", &[nan, nan, 1.0]), 2);
        let mut long = vec![1.0f32; 20];
        long.push(nan);
        long.extend([2.0; 20]);
        assert_eq!(idx("ArgMax", &long), 21);
        let m = t(&[1i32, 3, 3, 5, 5, 0], &[2, 3]);
        let z = arg("ArgMax", m.clone(), Tensor::scalar(1i32), None).unwrap();
        assert_eq!(
            (z.dtype(), z.to_vec::<i64>().unwrap()),
            (DType::Int64, vec![1, 0])
        );
        let z = arg(
            "ArgMax",
            m.clone(),
            Tensor::scalar(-1i64),
            Some(DType::Int32),
        )
        .unwrap();
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![1, 0]);
        let z = arg(
            "ArgMin",
            t(&[1i32, 3, 3, 1, 0, 0], &[2, 3]),
            Tensor::scalar(0i32),
            None,
        )
        .unwrap();
        assert_eq!(z.to_vec::<i64>().unwrap(), vec![0, 1, 1]);
        let z = arg(
            "ArgMax",
            t(&[false, true, true], &[3]),
            Tensor::scalar(0i32),
            Some(DType::Int16),
        )
        .unwrap();
        assert_eq!(z.to_vec::<i16>().unwrap(), vec![1]);
        let e = arg("ArgMax", t::<i32>(&[], &[2, 0]), Tensor::scalar(1i32), None).unwrap_err();
        assert!(
            e.contains("Reduction axis 1 is empty in shape [2,0]"),
            "{e}"
        );
        let z = arg("ArgMax", t::<i32>(&[], &[0, 2]), Tensor::scalar(1i32), None).unwrap();
        assert_eq!(z.shape(), &[0]);
        let e = arg("ArgMax", Tensor::scalar(5i32), Tensor::scalar(0i32), None).unwrap_err();
        assert!(
            e.contains("Expected dimension in the range [0, 0), but got 0"),
            "{e}"
        );
        let e = arg("ArgMax", t(&[1i32, 2], &[2]), Tensor::scalar(1i32), None).unwrap_err();
        assert!(
            e.contains("Expected dimension in the range [-1, 1), but got 1"),
            "{e}"
        );
        let e = arg("ArgMax", t(&[1i32, 2], &[2]), t(&[0i32], &[1]), None).unwrap_err();
        assert!(
            e.contains("dim must be a scalar, but received tensor of shape: [1]"),
            "{e}"
        );
        assert!(
            arg(
                "ArgMax",
                t(&[1i32], &[1]),
                Tensor::scalar(0i32),
                Some(DType::Float)
            )
            .is_err()
        );
    }

    fn scan(
        op: &str,
        x: Tensor,
        axis: Tensor,
        exclusive: bool,
        reverse: bool,
    ) -> Result<Tensor, String> {
        let attrs = [
            ("exclusive", boolean(exclusive)),
            ("reverse", boolean(reverse)),
        ];
        run(op, &attrs, vec![x, axis])
            .map(|mut v| v.remove(0))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn cumulative_scans() {
        let c = |op, axis: i32, ex, rev| {
            scan(op, m23(), Tensor::scalar(axis), ex, rev)
                .unwrap()
                .to_vec::<i32>()
                .unwrap()
        };
        assert_eq!(c("Cumsum", 1, false, false), vec![1, 3, 6, 4, 9, 15]);
        assert_eq!(c("Cumsum", 0, true, false), vec![0, 0, 0, 1, 2, 3]);
        assert_eq!(c("Cumsum", -1, false, true), vec![6, 5, 3, 15, 11, 6]);
        assert_eq!(c("Cumsum", 1, true, true), vec![5, 3, 0, 11, 6, 0]);
        assert_eq!(c("Cumprod", 1, true, true), vec![6, 3, 1, 30, 6, 1]);
        assert_eq!(c("Cumprod", 0, false, false), vec![1, 2, 3, 4, 10, 18]);
        let z = scan(
            "Cumsum",
            t(&[1.0f32, f32::NAN, 2.0], &[3]),
            Tensor::scalar(0i64),
            false,
            false,
        )
        .unwrap();
        let z = z.to_vec::<f32>().unwrap();
        assert!(z[0] == 1.0 && z[1].is_nan() && z[2].is_nan());
        assert_eq!(
            scan(
                "Cumsum",
                t::<i32>(&[], &[2, 0]),
                Tensor::scalar(1i32),
                false,
                false
            )
            .unwrap()
            .shape(),
            &[2, 0]
        );
        let e = scan("Cumsum", m23(), Tensor::scalar(2i32), false, false).unwrap_err();
        assert!(
            e.contains("ScanOp: Expected scan axis in the range [-2, 2), but got 2"),
            "{e}"
        );
        let e = scan(
            "Cumsum",
            Tensor::scalar(5i32),
            Tensor::scalar(0i32),
            false,
            false,
        )
        .unwrap_err();
        assert!(e.contains("range [0, 0), but got 0"), "{e}");
        let e = scan("Cumsum", m23(), t(&[0i32], &[1]), false, false).unwrap_err();
        assert!(e.contains("ScanOp: axis must be a scalar, not [1]"), "{e}");
    }

    fn hot(indices: Tensor, depth: i32, axis: Option<i64>) -> Result<Tensor, String> {
        let attrs: Vec<_> = axis.map(|a| ("axis", int(a))).into_iter().collect();
        run(
            "OneHot",
            &attrs,
            vec![
                indices,
                Tensor::scalar(depth),
                Tensor::scalar(5.0f32),
                Tensor::scalar(-1.0f32),
            ],
        )
        .map(|mut v| v.remove(0))
        .map_err(|e| e.to_string())
    }

    #[test]
    fn one_hot_axes_and_out_of_range() {
        let z = hot(t(&[0i32, 2, -1, 5], &[4]), 3, None).unwrap();
        assert_eq!(z.shape(), &[4, 3]);
        assert_eq!(
            z.to_vec::<f32>().unwrap(),
            vec![5., -1., -1., -1., -1., 5., -1., -1., -1., -1., -1., -1.]
        );
        let z = hot(t(&[0i32, 2, -1], &[3]), 3, Some(0)).unwrap();
        assert_eq!(
            z.to_vec::<f32>().unwrap(),
            vec![5., -1., -1., -1., -1., -1., -1., 5., -1.]
        );
        let z = hot(t(&[0i64, 2, 1, 1], &[2, 2]), 3, Some(1)).unwrap();
        assert_eq!(z.shape(), &[2, 3, 2]);
        assert_eq!(
            z.to_vec::<f32>().unwrap(),
            vec![5., -1., -1., -1., -1., 5., -1., -1., 5., 5., -1., -1.]
        );
        let z = hot(Tensor::scalar(1i32), 3, Some(0)).unwrap();
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![-1., 5., -1.]);
        let z = hot(t(&[1u8, 200], &[2]), 3, None).unwrap();
        assert_eq!(
            z.to_vec::<f32>().unwrap(),
            vec![-1., 5., -1., -1., -1., -1.]
        );
        let z = hot(t(&[1i8, -1], &[2]), 3, None).unwrap();
        assert_eq!(
            z.to_vec::<f32>().unwrap(),
            vec![-1., 5., -1., -1., -1., -1.]
        );
        assert_eq!(hot(t(&[1i32], &[1]), 0, None).unwrap().shape(), &[1, 0]);
        let e = hot(Tensor::scalar(1i32), 3, Some(1)).unwrap_err();
        assert!(
            e.contains("Expected axis to be -1 or between [0, 1).  But received: 1"),
            "{e}"
        );
        let e = hot(t(&[1i32], &[1]), 3, Some(-2)).unwrap_err();
        assert!(e.contains("between [0, 2).  But received: -2"), "{e}");
        let e = hot(t(&[1i32], &[1]), -1, None).unwrap_err();
        assert!(e.contains("depth must be non-negative, got: -1"), "{e}");
        // A huge depth is refused before anything is allocated.
        let e = hot(t(&[1i32, 2], &[2]), i32::MAX, None).unwrap_err();
        assert!(e.contains("exceeds the limit"), "{e}");
        let on = Tensor::scalar_string("on");
        let z = run(
            "OneHot",
            &[],
            vec![
                t(&[1i32], &[1]),
                Tensor::scalar(2i32),
                on,
                Tensor::scalar_string("off"),
            ],
        )
        .unwrap();
        assert_eq!(z[0].string_values().unwrap(), &["off", "on"]);
        let e = run(
            "OneHot",
            &[],
            vec![
                t(&[1i32], &[1]),
                t(&[3i32], &[1]),
                Tensor::scalar(1.0f32),
                Tensor::scalar(0.0f32),
            ],
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("depth must be a scalar, but got: [1]"),
            "{e}"
        );
        let e = run(
            "OneHot",
            &[],
            vec![
                t(&[1i32], &[1]),
                Tensor::scalar(3i32),
                t(&[1.0f32], &[1]),
                Tensor::scalar(0.0f32),
            ],
        )
        .unwrap_err();
        assert!(e.to_string().contains("on_value must be a scalar"), "{e}");
        let e = run(
            "OneHot",
            &[],
            vec![
                t(&[1i32], &[1]),
                Tensor::scalar(3i32),
                Tensor::scalar(1.0f32),
                Tensor::scalar(0.0f64),
            ],
        )
        .unwrap_err();
        assert!(e.to_string().contains("float64"), "{e}");
        assert!(
            run(
                "OneHot",
                &[],
                vec![
                    t(&[1.0f32], &[1]),
                    Tensor::scalar(3i32),
                    Tensor::scalar(1.0f32),
                    Tensor::scalar(0.0f32)
                ]
            )
            .is_err()
        );
    }

    #[test]
    fn huge_reduction_outputs_are_refused() {
        // A kept dimension too large for the accumulators.
        let x = Tensor::new(
            DType::Int8,
            vec![1 << 31, 0],
            tfdata_core::tensor::TensorData::Buffer(Default::default()),
        )
        .unwrap();
        let z = red("Sum", x, t(&[1i32], &[1]), false);
        assert!(z.unwrap_err().contains("exceeds the limit"));
    }
}
