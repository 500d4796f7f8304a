//! Elementwise special functions and the guarded products: `Erf`, `Erfc`,
//! `Erfinv`, `Ndtri`, `Lgamma`, `Digamma` (unary), `Xlogy`, `Xlog1py`,
//! `MulNoNan`, `NextAfter`
//! (binary, numpy broadcasting), for float and double (TensorFlow's half,
//! bfloat16 and complex kernels are refused: tfdata has no such arithmetic).
//!
//! Exactness, measured against TensorFlow 2.21: `MulNoNan`, `NextAfter` are
//! bit for bit; the others declare ulp tolerances in their differential
//! cases: TensorFlow evaluates them with Eigen's float and double
//! polynomials (`Erf`, `Erfc`, and the packet `log`/`log1p` of `Xlogy` and
//! `Xlog1py`) or Cephes-style algorithms run in float for float tensors,
//! where ours call fdlibm (`libm`) and evaluate the Cephes algorithms in
//! double ([`super::special_fns`]), rounding float results once.
//! TensorFlow's own quirks are kept: double `Erf` of ±inf is NaN (Eigen's
//! polynomial), `Xlogy(-0, y)` is -0 in Eigen's 8-float (4-double) packets
//! and +0 in the tail past the last whole packet.

use tfdata_core::{Result, Tensor};

use super::numeric::{
    Elem, Plan, broadcast_shape, buffer, dispatch, expect_dtype, finish, out_elements, unary,
    zeroed,
};
use super::special_fns as sf;
use super::{Compute, KernelDef, y_output, z_output};
use crate::attrs::NodeAttrs;

#[derive(Clone, Copy, PartialEq)]
enum F {
    Erf,
    Erfc,
    Erfinv,
    Ndtri,
    Lgamma,
    Digamma,
    Xlogy,
    Xlog1py,
    MulNoNan,
    NextAfter,
}

impl F {
    fn arity(self) -> usize {
        use F::*;
        match self {
            Erf | Erfc | Erfinv | Ndtri | Lgamma | Digamma => 1,
            _ => 2,
        }
    }
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
    kernel!("Erf", F::Erf, y_output),
    kernel!("Erfc", F::Erfc, y_output),
    kernel!("Erfinv", F::Erfinv, y_output),
    kernel!("Ndtri", F::Ndtri, y_output),
    kernel!("Lgamma", F::Lgamma, y_output),
    kernel!("Digamma", F::Digamma, y_output),
    kernel!("Xlogy", F::Xlogy, z_output),
    kernel!("Xlog1py", F::Xlog1py, z_output),
    kernel!("MulNoNan", F::MulNoNan, z_output),
    kernel!("NextAfter", F::NextAfter, super::one_output),
];

/// The functions on one float type. Float tensors go through double where
/// the algorithm is ours ([`sf`]), and are rounded once.
trait Special: Elem {
    fn unary(self, f: F) -> Self;
    /// `packet`: whether TensorFlow computes this element in a SIMD packet
    /// (the few results that depend on it).
    fn binary(self, o: Self, f: F, packet: bool) -> Self;
}

macro_rules! special {
    ($t:ty, $erf:path, $erfc:path, $lgamma:path, $double_erf_inf:expr) => {
        impl Special for $t {
            fn unary(self, f: F) -> Self {
                let x = self;
                let d = f64::from(x);
                match f {
                    F::Erf if x.is_infinite() && $double_erf_inf => <$t>::NAN,
                    F::Erf => $erf(x),
                    F::Erfc => $erfc(x),
                    // glibc's lgamma is +inf at -inf (fdlibm's too).
                    F::Lgamma => $lgamma(x).0,
                    // Eigen's (x + 1) / 2 rounds in the tensor's precision.
                    F::Erfinv => sf::erfinv_of_half_sum(f64::from((x + 1.0) / 2.0)) as $t,
                    F::Ndtri => sf::ndtri(d) as $t,
                    F::Digamma => sf::digamma(d) as $t,
                    _ => <$t>::NAN,
                }
            }
            fn binary(self, o: Self, f: F, packet: bool) -> Self {
                let (x, y) = (self, o);
                match f {
                    // A zero x gives zero whatever y: the packet path
                    // selects x itself (so -0 stays), the tail a +0.
                    F::Xlogy | F::Xlog1py if x == 0.0 => {
                        if packet {
                            x
                        } else {
                            0.0
                        }
                    }
                    F::Xlogy => x * y.ln(),
                    F::Xlog1py => x * y.ln_1p(),
                    F::MulNoNan => {
                        if y == 0.0 {
                            0.0
                        } else {
                            x * y
                        }
                    }
                    F::NextAfter => next_after(x, y, x.ftz() == y.ftz()),
                    _ => <$t>::NAN,
                }
            }
        }
    };
}
special!(f32, libm::erff, libm::erfcf, libm::lgammaf_r, false);
special!(f64, libm::erf, libm::erfc, libm::lgamma_r, true);

/// C's `nextafter`: the neighbour of `x` towards `y` (`y` when equal, NaN
/// when either is; the step off zero is the smallest denormal, which
/// TensorFlow returns unflushed).
/// glibc's compares under TF's DAZ (`equal`: a denormal equals zero) but
/// steps the raw bits.
fn next_after<T: Bits>(x: T, y: T, equal: bool) -> T {
    if x.nan() || y.nan() {
        return T::from_f64(f64::NAN);
    }
    if equal {
        return y;
    }
    if x.zero() {
        // The smallest denormal, with y's sign.
        return T::tiny(y < x);
    }
    // Away from zero the magnitude's bits grow by one, towards it shrink.
    let away = (y > x) == (x > T::from_f64(0.0));
    x.step(away)
}

trait Bits: Copy + PartialOrd {
    fn nan(self) -> bool;
    fn zero(self) -> bool;
    fn tiny(negative: bool) -> Self;
    fn step(self, away: bool) -> Self;
    fn from_f64(v: f64) -> Self;
}

macro_rules! bits {
    ($t:ty) => {
        impl Bits for $t {
            fn nan(self) -> bool {
                self.is_nan()
            }
            fn zero(self) -> bool {
                self == 0.0
            }
            fn tiny(negative: bool) -> Self {
                let t = <$t>::from_bits(1);
                if negative { -t } else { t }
            }
            fn step(self, away: bool) -> Self {
                let b = self.to_bits();
                <$t>::from_bits(if away { b + 1 } else { b - 1 })
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
        }
    };
}
bits!(f32);
bits!(f64);

fn build(attrs: &NodeAttrs, f: F) -> Result<Compute> {
    let op = attrs.op.to_string();
    super::numeric::float_or_double_t(attrs)?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, f.arity())?;
        let d = inputs[0].dtype();
        let out = dispatch!(d, &op, [Float, Double], run(&op, f, &inputs))?;
        Ok(vec![out])
    }))
}

fn run<T: Special + Bits>(op: &str, f: F, inputs: &[Tensor]) -> Result<Tensor> {
    match inputs {
        [x] => unary(op, x, |a: T| a.unary(f)),
        [x, y] => binary_lanes::<T>(op, x, y, f),
        _ => Err(super::numeric::invalid(op, "wrong number of inputs")),
    }
}

/// A broadcast binary op that knows each output element's place: Eigen
/// computes whole packets of 32 bytes, then the tail one by one. Inputs are
/// flushed as under TF's DAZ; results too, except `NextAfter`'s (glibc's
/// works on the bits, not by the FPU).
fn binary_lanes<T: Special>(op: &str, x: &Tensor, y: &Tensor, f: F) -> Result<Tensor> {
    expect_dtype(op, x, 0, T::DTYPE)?;
    expect_dtype(op, y, 1, T::DTYPE)?;
    let shape = broadcast_shape(op, x.shape(), y.shape())?;
    let n = out_elements(op, T::DTYPE, &shape)?;
    let packets = n - n % (32 / T::SIZE);
    let (xb, yb) = (buffer(op, x)?, buffer(op, y)?);
    let mut out = zeroed::<T>(n);
    let mut k = 0usize;
    Plan::new(&shape, [x.shape(), y.shape()]).walk(|[i, j]| {
        let (mut a, mut b) = (
            super::numeric::at::<T>(xb, i),
            super::numeric::at::<T>(yb, j),
        );
        if f != F::NextAfter {
            (a, b) = (a.ftz(), b.ftz());
        }
        let mut z = a.binary(b, f, k < packets);
        if f != F::NextAfter {
            z = z.ftz();
        }
        if let Some(slot) = out.get_mut(k * T::SIZE..) {
            z.set(slot);
        }
        k += 1;
    });
    finish(T::DTYPE, shape, out)
}

#[cfg(test)]
mod tests {
    use super::super::testing::run;
    use tfdata_core::Tensor;

    #[test]
    fn evaluates() {
        let x = Tensor::vector(&[0.0f32, 1.0, -1.0]);
        let y = Tensor::vector(&[f32::NAN, f32::NAN, 0.0]);
        let out = run("MulNoNan", &[], vec![x.clone(), y]).unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        assert!(out[0].is_nan() && out[1].is_nan() && out[2] == 0.0);
        let out = run("NextAfter", &[], vec![x, Tensor::scalar(1.0f32)]).unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(out, vec![f32::from_bits(1), 1.0, -0.999_999_94]);
        assert!(run("Erf", &[], vec![Tensor::vector(&[1i32])]).is_err());
    }
}
