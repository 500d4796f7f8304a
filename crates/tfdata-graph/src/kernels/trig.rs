//! Inverse trigonometric and hyperbolic functions and `Atan2`, for float
//! and double (TensorFlow's float16, bfloat16 and complex kernels are
//! refused: tfdata has no such arithmetic). Inputs and results are flushed
//! as under TF's FTZ/DAZ.
//!
//! Exactness, measured against TensorFlow 2.21: `Sinh` and `Cosh` call the
//! platform libm as Eigen's scalar path does, and agree bit for bit (glibc);
//! so do double `Asin` and `Acos`. Eigen approximates the rest with its own
//! vectorized polynomials (float `Asin`/`Acos`, `Atan`, `Atan2`) where we
//! call libm, and `Asinh`, `Acosh`, `Atanh` use the textbook `log1p`
//! forms where TensorFlow calls glibc or Eigen: those differ by a few ulp,
//! which the differential cases declare (`docs/compatibility.md`). `Atan2`
//! of a zero and a denormal differs: Eigen, under DAZ, answers pi/4.

use tfdata_core::{Result, Tensor};

use super::numeric::{binary, dispatch, unary, unary_raw};
use super::{Compute, KernelDef, y_output, z_output};
use crate::attrs::NodeAttrs;

#[derive(Clone, Copy)]
enum F {
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Atan2,
}

macro_rules! kernel {
    ($op:literal, $f:expr, $out:expr) => {
        KernelDef {
            op: $op,
            outputs: $out,
            build: |a| build(a, $f),
        }
    };
}

pub(super) const KERNELS: &[KernelDef] = &[
    kernel!("Asin", F::Asin, y_output),
    kernel!("Acos", F::Acos, y_output),
    kernel!("Atan", F::Atan, y_output),
    kernel!("Sinh", F::Sinh, y_output),
    kernel!("Cosh", F::Cosh, y_output),
    kernel!("Asinh", F::Asinh, y_output),
    kernel!("Acosh", F::Acosh, y_output),
    kernel!("Atanh", F::Atanh, y_output),
    kernel!("Atan2", F::Atan2, z_output),
];

/// The float functions, through `std` (libm for the ones glibc has).
trait Trig: super::numeric::Elem {
    fn apply(self, f: F) -> Self;
    fn atan2(self, x: Self) -> Self;
}

// The inverse hyperbolic functions in the forms that keep their accuracy
// near 0 and 1 (where `log(x + sqrt(x*x - 1))` and friends cancel): the
// textbook rewrites through `log1p`, with the large-argument limits.
macro_rules! trig {
    ($t:ty) => {
        impl Trig for $t {
            fn apply(self, f: F) -> Self {
                const BIG: $t = 268_435_456.0; // 2^28
                let ln2 = std::f64::consts::LN_2 as $t;
                match f {
                    F::Asin => self.asin(),
                    F::Acos => self.acos(),
                    F::Atan => self.atan(),
                    F::Sinh => self.sinh(),
                    F::Cosh => self.cosh(),
                    F::Asinh => {
                        let a = self.abs();
                        let r = if !a.is_finite() || a < 1.0 / BIG {
                            a
                        } else if a > BIG {
                            a.ln() + ln2
                        } else if a > 2.0 {
                            (2.0 * a + 1.0 / ((a * a + 1.0).sqrt() + a)).ln()
                        } else {
                            let s = a * a;
                            (a + s / (1.0 + (1.0 + s).sqrt())).ln_1p()
                        };
                        r.copysign(self)
                    }
                    F::Acosh => {
                        if self.is_nan() || self < 1.0 {
                            <$t>::NAN
                        } else if self > BIG {
                            if self.is_infinite() {
                                self
                            } else {
                                self.ln() + ln2
                            }
                        } else if self > 2.0 {
                            (2.0 * self - 1.0 / (self + (self * self - 1.0).sqrt())).ln()
                        } else {
                            let t = self - 1.0;
                            (t + (2.0 * t + t * t).sqrt()).ln_1p()
                        }
                    }
                    F::Atanh => {
                        let a = self.abs();
                        let r = if a < 0.5 {
                            let d = a + a;
                            0.5 * (d + d * a / (1.0 - a)).ln_1p()
                        } else {
                            0.5 * ((a + a) / (1.0 - a)).ln_1p()
                        };
                        r.copysign(self)
                    }
                    F::Atan2 => self,
                }
            }
            fn atan2(self, x: Self) -> Self {
                <$t>::atan2(self, x)
            }
        }
    };
}
trig!(f32);
trig!(f64);

fn build(attrs: &NodeAttrs, f: F) -> Result<Compute> {
    let op = attrs.op.to_string();
    super::numeric::float_or_double_t(attrs)?;
    let arity = if matches!(f, F::Atan2) { 2 } else { 1 };
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, arity)?;
        let d = inputs[0].dtype();
        let out = dispatch!(d, &op, [Float, Double], run(&op, f, &inputs))?;
        Ok(vec![out])
    }))
}

fn run<T: Trig>(op: &str, f: F, inputs: &[Tensor]) -> Result<Tensor> {
    match (f, inputs) {
        (F::Atan2, [y, x]) => binary(op, y, x, |a: T, b: T| a.atan2(b)),
        // glibc's sinh and asinh return a denormal argument as it is, and
        // TensorFlow calls them without flushing.
        (F::Sinh | F::Asinh, [x]) => unary_raw(op, x, |a: T| a.apply(f)),
        (_, [x]) => unary(op, x, |a: T| a.apply(f)),
        _ => Err(super::numeric::invalid(op, "wrong number of inputs")),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::run;
    use tfdata_core::Tensor;

    #[test]
    fn evaluates() {
        let x = Tensor::vector(&[0.5f64, -0.25]);
        let out = run("Asin", &[], vec![x.clone()]).unwrap();
        assert_eq!(
            out[0].to_vec::<f64>().unwrap(),
            vec![0.5f64.asin(), (-0.25f64).asin()]
        );
        let out = run("Atan2", &[], vec![x.clone(), Tensor::scalar(-1.0f64)]).unwrap();
        assert_eq!(out[0].to_vec::<f64>().unwrap()[0], 0.5f64.atan2(-1.0));
        assert!(run("Atan2", &[], vec![x, Tensor::vector(&[1.0f64, 2.0, 3.0])]).is_err());
    }
}
