//! The gamma-family special functions of two or three tensors: `Igamma`,
//! `Igammac`, `IgammaGradA` (∂/∂a of `Igamma`), `RandomGammaGrad` (the
//! derivative of a Gamma(α, 1) sample in α), `Zeta`, `Polygamma` (binary,
//! numpy broadcasting) and `Betainc` (ternary: the inputs agree in shape or
//! are scalars, no other broadcasting), for float and double as TensorFlow
//! registers them. The math is [`super::special_gamma_fns`] (`Betainc`'s
//! [`super::special_betainc`]), run in the tensor's precision.
//!
//! TensorFlow runs CPU kernels with denormals flushed (FTZ/DAZ): inputs, and
//! every intermediate and final result ([`Flushed`]), are flushed likewise;
//! the one place a subnormal input still counts is the libm `log` that
//! `Igammac` takes of its x ([`sg::Real::ln_of_subnormal`]).

use tfdata_core::{Result, Tensor};

use super::numeric::{
    Elem, Plan, broadcast_shape, buffer, dispatch, expect_dtype, finish, invalid, out_elements,
    shape_str, zeroed,
};
use super::special_betainc::betainc;
use super::special_gamma_fns::{self as sg, Flushed, Mode, Real};
use super::{Compute, KernelDef, z_output};
use crate::attrs::NodeAttrs;

#[derive(Clone, Copy)]
enum F {
    Igamma,
    Igammac,
    IgammaGradA,
    RandomGammaGrad,
    Zeta,
    Polygamma,
    Betainc,
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
    kernel!("Igamma", F::Igamma, z_output),
    kernel!("Igammac", F::Igammac, z_output),
    kernel!("IgammaGradA", F::IgammaGradA, z_output),
    kernel!("RandomGammaGrad", F::RandomGammaGrad, super::one_output),
    kernel!("Zeta", F::Zeta, z_output),
    kernel!("Polygamma", F::Polygamma, z_output),
    kernel!("Betainc", F::Betainc, z_output),
];

/// A tensor element type and its arithmetic under FTZ/DAZ.
trait Gamma: Elem {
    type R: Real;
    fn to_real(self) -> Self::R;
    fn from_real(r: Self::R) -> Self;
}

macro_rules! gamma {
    ($t:ty) => {
        impl Gamma for $t {
            type R = Flushed<$t>;
            fn to_real(self) -> Self::R {
                Flushed(self.ftz())
            }
            fn from_real(r: Self::R) -> Self {
                r.0
            }
        }
    };
}
gamma!(f32);
gamma!(f64);

/// One element (`None`: zeta's sum would take too many steps, see
/// [`sg::zeta`]); `subnormal`: the second argument was a positive subnormal
/// (now flushed).
fn eval<R: Real>(f: F, args: [R; 3], subnormal: bool) -> Option<R> {
    let [p, q, r] = args;
    Some(match f {
        F::Igamma => sg::igamma(p, q, Mode::Value),
        F::IgammaGradA => sg::igamma(p, q, Mode::Derivative),
        F::RandomGammaGrad => sg::igamma(p, q, Mode::SampleDerivative),
        F::Igammac => sg::igammac(p, q, subnormal),
        F::Zeta => sg::zeta(p, q)?,
        F::Polygamma => sg::polygamma(p, q)?,
        F::Betainc => betainc(p, q, r),
    })
}

fn build(attrs: &NodeAttrs, f: F) -> Result<Compute> {
    let op = attrs.op.to_string();
    super::numeric::float_or_double_t(attrs)?;
    let arity = if matches!(f, F::Betainc) { 3 } else { 2 };
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, arity)?;
        let d = inputs[0].dtype();
        let out = dispatch!(d, &op, [Float, Double], run(&op, f, &inputs))?;
        Ok(vec![out])
    }))
}

fn run<T: Gamma>(op: &str, f: F, inputs: &[Tensor]) -> Result<Tensor> {
    for (i, t) in inputs.iter().enumerate() {
        expect_dtype(op, t, i, T::DTYPE)?;
    }
    match inputs {
        [x, y] => {
            let shape = broadcast_shape(op, x.shape(), y.shape())?;
            // A binary op's third operand: a scalar stand-in, never read.
            let scalar: &[i64] = &[];
            evaluate::<T>(op, f, &shape, [x, y, x], [x.shape(), y.shape(), scalar])
        }
        [a, b, x] => {
            let shape = betainc_shape(op, a.shape(), b.shape(), x.shape())?;
            evaluate::<T>(op, f, &shape, [a, b, x], [a.shape(), b.shape(), x.shape()])
        }
        _ => Err(invalid(op, "wrong number of inputs")),
    }
}

/// Betainc's shapes: each pair of non-scalars must agree exactly; the
/// output takes the non-scalar shape (scalars stand for every element).
fn betainc_shape(op: &str, a: &[i64], b: &[i64], x: &[i64]) -> Result<Vec<i64>> {
    for ((n, p), (m, q)) in [
        (("a", a), ("b", b)),
        (("a", a), ("x", x)),
        (("b", b), ("x", x)),
    ] {
        if !p.is_empty() && !q.is_empty() && p != q {
            return Err(invalid(
                op,
                format!(
                    "Shapes of {n} and {m} are inconsistent: {} vs. {}",
                    shape_str(p),
                    shape_str(q)
                ),
            ));
        }
    }
    Ok([x, b, a]
        .into_iter()
        .find(|s| !s.is_empty())
        .unwrap_or(a)
        .to_vec())
}

/// Runs `f` over the broadcast elements (a binary op's third operand is a
/// scalar stand-in that is never read).
fn evaluate<T: Gamma>(
    op: &str,
    f: F,
    shape: &[i64],
    tensors: [&Tensor; 3],
    shapes: [&[i64]; 3],
) -> Result<Tensor> {
    let n = out_elements(op, T::DTYPE, shape)?;
    let bufs = [
        buffer(op, tensors[0])?,
        buffer(op, tensors[1])?,
        buffer(op, tensors[2])?,
    ];
    let mut out = zeroed::<T>(n);
    let mut k = 0usize;
    let mut too_far = false;
    Plan::new(shape, shapes).walk(|idx| {
        let raw: [T; 3] = std::array::from_fn(|i| super::numeric::at::<T>(bufs[i], idx[i]));
        let subnormal = raw[1] > T::ZERO && raw[1].ftz() == T::ZERO;
        let z = eval(f, raw.map(T::to_real), subnormal).map_or_else(
            || {
                too_far = true;
                T::ZERO
            },
            T::from_real,
        );
        if let Some(slot) = out.get_mut(k * T::SIZE..) {
            z.set(slot);
        }
        k += 1;
    });
    if too_far {
        // Only Zeta and Polygamma (whose x is zeta's q) get here.
        let what = if matches!(f, F::Zeta) {
            "q (non-integer, with an integer x)"
        } else {
            "x (non-integer)"
        };
        return Err(invalid(
            op,
            format!(
                "a double {what} below -{} needs more series steps than tfdata takes",
                sg::ZETA_STEPS
            ),
        ));
    }
    finish(T::DTYPE, shape.to_vec(), out)
}

#[cfg(test)]
mod tests {
    use super::super::testing::run;
    use tfdata_core::Tensor;

    #[test]
    fn evaluates_and_checks_shapes() {
        let a = Tensor::vector(&[1.0f64, -1.0]);
        let x = Tensor::scalar(0.0f64);
        let out = run("Igamma", &[], vec![a.clone(), x]).unwrap()[0]
            .to_vec::<f64>()
            .unwrap();
        assert_eq!(out, vec![0.0, 0.0]);
        let err = run("Igamma", &[], vec![a.clone(), Tensor::vector(&[1.0f64; 3])]).unwrap_err();
        assert!(err.to_string().contains("Incompatible shapes: [2] vs. [3]"));
        let err = run(
            "Betainc",
            &[],
            vec![a.clone(), Tensor::scalar(1.0f64), Tensor::vector(&[0.5f64])],
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("Shapes of a and x are inconsistent: [2] vs. [1]")
        );
        let out = run(
            "Betainc",
            &[],
            vec![
                Tensor::scalar(1.0f32),
                Tensor::scalar(1.0f32),
                Tensor::vector(&[0.25f32]),
            ],
        )
        .unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(out, vec![0.25]);
        let err = run(
            "Zeta",
            &[],
            vec![Tensor::scalar(2.0f64), Tensor::scalar(-1e9 + 0.5)],
        )
        .unwrap_err();
        assert!(err.to_string().contains("series steps"));
    }
}
