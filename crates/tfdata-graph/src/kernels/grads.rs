//! The gradient kernels of the elementwise functions that TensorFlow's
//! autodiff puts in graphs: `TanhGrad`, `SigmoidGrad`, `InvGrad` (and its
//! alias `ReciprocalGrad`), `SqrtGrad` and `RsqrtGrad`, each `(y, dy)` with
//! `y` the forward op's output. float and double (TF's half, bfloat16 and
//! complex kernels are refused: tfdata has no such arithmetic).
//!
//! Bit for bit with TensorFlow 2.21: Eigen evaluates these with two
//! formulas, one in its SIMD packets (8 floats or 4 doubles wide in TF's
//! AVX build) and one for the elements past the last whole packet, and
//! they round differently (`SqrtGrad`'s packet path is `(0.5 / y) * dy`,
//! its scalar path `(0.5 * dy) / y`). So each element is computed with
//! the formula of the path TF takes for its position: measured against TF,
//! the scalar path is exactly the last `n % width` elements, at every size
//! (TF's thread blocks are whole packets).

use tfdata_core::{Result, Tensor};

use super::numeric::{Elem, buffer, dispatch, expect_dtype, finish, invalid, out_elements};
use super::{Compute, KernelDef};
use crate::attrs::NodeAttrs;

#[derive(Clone, Copy)]
enum Grad {
    Tanh,
    Sigmoid,
    Inverse,
    Sqrt,
    Rsqrt,
}

macro_rules! kernel {
    ($op:literal, $g:expr) => {
        KernelDef {
            op: $op,
            outputs: z_output,
            build: |a| build(a, $g),
        }
    };
}

pub(super) const KERNELS: &[KernelDef] = &[
    kernel!("TanhGrad", Grad::Tanh),
    kernel!("SigmoidGrad", Grad::Sigmoid),
    kernel!("InvGrad", Grad::Inverse),
    kernel!("ReciprocalGrad", Grad::Inverse),
    kernel!("SqrtGrad", Grad::Sqrt),
    kernel!("RsqrtGrad", Grad::Rsqrt),
];

fn z_output(_: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("z", 1)])
}

/// The two evaluations of a gradient, as Eigen's packet and scalar paths
/// write them (products in their order, each rounded).
trait GradFloat: Elem {
    fn packet(self, dy: Self, g: Grad) -> Self;
    fn scalar(self, dy: Self, g: Grad) -> Self;
}

macro_rules! grad_float {
    ($t:ty) => {
        impl GradFloat for $t {
            // InvGrad is `-y * y * dy`, but as TF's compiled code has it: a
            // NaN comes out with the sign it went in with, which measured
            // against TF is `(y * y) * (0 - dy)` (x86 passes a NaN operand
            // through; zeros still get the product's sign).
            fn packet(self, dy: Self, g: Grad) -> Self {
                let y = self;
                let (m, s, d) = (mul::<$t>, sub::<$t>, div::<$t>);
                // TF's mul_no_nan: a zero right operand gives +0, whatever
                // the left (NaN and infinities included).
                let mul_no_nan = |a: $t, b: $t| if b == 0.0 { 0.0 } else { m(a, b) };
                match g {
                    Grad::Tanh => m(dy, s(1.0, m(y, y))),
                    Grad::Sigmoid => m(dy, m(y, s(1.0, y))),
                    Grad::Inverse => mul_no_nan(m(y, y), s(0.0, dy)),
                    Grad::Sqrt => mul_no_nan(d(0.5, y), dy),
                    Grad::Rsqrt => mul_no_nan(m(-0.5, m(y, y)), mul_no_nan(y, dy)),
                }
            }
            fn scalar(self, dy: Self, g: Grad) -> Self {
                let y = self;
                let (m, s, d) = (mul::<$t>, sub::<$t>, div::<$t>);
                match g {
                    Grad::Tanh => m(dy, s(1.0, m(y, y))),
                    Grad::Sigmoid => m(m(dy, y), s(1.0, y)),
                    _ if dy == 0.0 => 0.0,
                    Grad::Inverse => m(m(y, y), s(0.0, dy)),
                    Grad::Sqrt => d(m(0.5, dy), y),
                    Grad::Rsqrt => m(m(-0.5, m(dy, y)), m(y, y)),
                }
            }
        }
    };
}

// Each operation rounded and its denormal result flushed, as under TF's
// FTZ mode.
fn mul<T: Elem + std::ops::Mul<Output = T>>(a: T, b: T) -> T {
    (a * b).ftz()
}
fn sub<T: Elem + std::ops::Sub<Output = T>>(a: T, b: T) -> T {
    (a - b).ftz()
}
fn div<T: Elem + std::ops::Div<Output = T>>(a: T, b: T) -> T {
    (a / b).ftz()
}
grad_float!(f32);
grad_float!(f64);

fn build(attrs: &NodeAttrs, g: Grad) -> Result<Compute> {
    let op = attrs.op.to_string();
    super::numeric::float_or_double_t(attrs)?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 2)?;
        let d = inputs[0].dtype();
        let out = dispatch!(d, &op, [Float, Double], run(&op, g, &inputs[0], &inputs[1]))?;
        Ok(vec![out])
    }))
}

/// `z[i] = grad(y[i], dy[i])`; TF's SimpleBinaryOp wants equal element
/// counts (no broadcasting) and gives `z` the shape of `y`.
fn run<T: GradFloat>(op: &str, g: Grad, y: &Tensor, dy: &Tensor) -> Result<Tensor> {
    expect_dtype(op, y, 0, T::DTYPE)?;
    expect_dtype(op, dy, 1, T::DTYPE)?;
    if y.num_elements() != dy.num_elements() {
        return Err(invalid(
            op,
            format!(
                "The two arguments to a cwise op must have same number of elements, got {} and {}",
                y.num_elements(),
                dy.num_elements()
            ),
        ));
    }
    let n = out_elements(op, T::DTYPE, y.shape())?;
    let width = 32 / T::SIZE;
    let packets = n - n % width;
    let (yb, db) = (buffer(op, y)?, buffer(op, dy)?);
    let mut out = vec![0u8; n * T::SIZE];
    for (i, ((o, a), b)) in out
        .chunks_exact_mut(T::SIZE)
        .zip(yb.chunks_exact(T::SIZE))
        .zip(db.chunks_exact(T::SIZE))
        .enumerate()
    {
        let (a, b) = (T::get(a).ftz(), T::get(b).ftz());
        let z = if i < packets {
            a.packet(b, g)
        } else {
            a.scalar(b, g)
        };
        z.ftz().set(o);
    }
    finish(T::DTYPE, y.shape().to_vec(), out)
}

#[cfg(test)]
mod tests {
    use super::super::testing::run;
    use tfdata_core::Tensor;

    #[test]
    fn packet_and_tail_round_as_tensorflow() {
        // 9 floats: one packet of 8, one tail element.
        let y = Tensor::vector(&[3.0f32; 9]);
        let dy = Tensor::vector(&[0.7f32; 9]);
        let out = run("SqrtGrad", &[], vec![y, dy]).unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(out[0], (0.5f32 / 3.0) * 0.7);
        assert_eq!(out[8], (0.5f32 * 0.7) / 3.0);
        let bad = run(
            "TanhGrad",
            &[],
            vec![Tensor::vector(&[1.0f64, 2.0]), Tensor::vector(&[1.0f64])],
        );
        assert!(bad.is_err());
    }
}
