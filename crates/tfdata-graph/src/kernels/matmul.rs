//! `MatMul`, for the small products input pipelines trace:
//! `tf.image.rgb_to_grayscale` is a `tensordot` of the pixels with three
//! weights, which is a `MatMul` of `[pixels, 3]` by `[3, 1]`.
//!
//! Each output is summed over the inner dimension in order, from zero, one
//! product at a time (no fused multiply-add), as Eigen's contraction does
//! for TensorFlow's CPU wheels on inner dimensions this small; longer inner
//! dimensions may differ from Eigen's blocked sums in the last bits.

use tfdata_core::{DType, Error, Result, Tensor};

use super::strings::shape_string;
use super::{Compute, KernelDef, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "MatMul",
    outputs: |_| Ok(vec![("product", 1)]),
    build: matmul,
}];

trait Elem: tfdata_core::tensor::NativeType + Default {
    fn mul_add(acc: Self, a: Self, b: Self) -> Self;
}

impl Elem for f32 {
    fn mul_add(acc: Self, a: Self, b: Self) -> Self {
        acc + a * b
    }
}
impl Elem for f64 {
    fn mul_add(acc: Self, a: Self, b: Self) -> Self {
        acc + a * b
    }
}
impl Elem for i32 {
    fn mul_add(acc: Self, a: Self, b: Self) -> Self {
        acc.wrapping_add(a.wrapping_mul(b))
    }
}
impl Elem for i64 {
    fn mul_add(acc: Self, a: Self, b: Self) -> Self {
        acc.wrapping_add(a.wrapping_mul(b))
    }
}

fn matmul(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "MatMul";
    let ta = attrs.bool_or("transpose_a", false)?;
    let tb = attrs.bool_or("transpose_b", false)?;
    let t = attrs.dtype("T")?;
    if !matches!(
        t,
        DType::Float | DType::Double | DType::Int32 | DType::Int64
    ) {
        return Err(Error::Unimplemented(format!(
            "{OP}: T={t} is not supported by tfdata (float32, float64, int32, int64)"
        )));
    }
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 2)?;
        let (a, b) = (&inputs[0], &inputs[1]);
        for (i, x) in [a, b].iter().enumerate() {
            if x.shape().len() != 2 {
                return Err(Error::InvalidArgument(format!(
                    "{OP}: In[{i}] is not a matrix. Instead it has shape {}",
                    shape_string(x.shape())
                )));
            }
        }
        let (sa, sb) = (a.shape(), b.shape());
        let (m, k) = if ta { (sa[1], sa[0]) } else { (sa[0], sa[1]) };
        let (k2, n) = if tb { (sb[1], sb[0]) } else { (sb[0], sb[1]) };
        if k != k2 {
            return Err(Error::InvalidArgument(format!(
                "{OP}: Matrix size-incompatible: In[0]: {}, In[1]: {}",
                shape_string(sa),
                shape_string(sb)
            )));
        }
        check_size(OP, a.dtype(), (m as u64).saturating_mul(n as u64))?;
        fn run<T: Elem>(
            a: &Tensor,
            b: &Tensor,
            (m, k, n): (usize, usize, usize),
            (ta, tb): (bool, bool),
        ) -> Result<Tensor> {
            let (x, y): (Vec<T>, Vec<T>) = (a.to_vec()?, b.to_vec()?);
            let at = |i: usize, p: usize| if ta { x[p * m + i] } else { x[i * k + p] };
            let bt = |p: usize, j: usize| if tb { y[j * k + p] } else { y[p * n + j] };
            let mut out = Vec::with_capacity(m * n);
            for i in 0..m {
                for j in 0..n {
                    let mut acc = T::default();
                    for p in 0..k {
                        acc = T::mul_add(acc, at(i, p), bt(p, j));
                    }
                    out.push(acc);
                }
            }
            Tensor::from_slice(&out, vec![m as i64, n as i64])
        }
        let dims = (m as usize, k as usize, n as usize);
        let out = match a.dtype() {
            DType::Float => run::<f32>(a, b, dims, (ta, tb))?,
            DType::Double => run::<f64>(a, b, dims, (ta, tb))?,
            DType::Int32 => run::<i32>(a, b, dims, (ta, tb))?,
            DType::Int64 => run::<i64>(a, b, dims, (ta, tb))?,
            d => {
                return Err(Error::InvalidArgument(format!(
                    "{OP}: expected {t} inputs, got {d}"
                )));
            }
        };
        Ok(vec![out])
    }))
}

#[cfg(test)]
mod tests {
    use tfdata_core::{DType, Tensor};

    use super::super::testing::{boolean, run, ty};

    #[test]
    fn products_and_transposes() {
        let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], vec![2, 3]).unwrap();
        let b = Tensor::from_slice(&[1.0f32, 0.5, 2.0], vec![3, 1]).unwrap();
        let z = run("MatMul", &[("T", ty(DType::Float))], vec![a.clone(), b]).unwrap();
        assert_eq!(z[0].shape(), &[2, 1]);
        assert_eq!(z[0].to_vec::<f32>().unwrap(), [8.0, 18.5]);
        let z = run(
            "MatMul",
            &[("T", ty(DType::Float)), ("transpose_b", boolean(true))],
            vec![a.clone(), a.clone()],
        )
        .unwrap();
        assert_eq!(z[0].to_vec::<f32>().unwrap(), [14.0, 32.0, 32.0, 77.0]);
        assert!(run("MatMul", &[("T", ty(DType::Float))], vec![a.clone(), a]).is_err());
    }
}
