//! Complex numbers: `Complex`, `Real`, `Imag`, `ComplexAbs`, `Angle` and
//! `Conj`, the ops `tf.signal` pipelines put around their FFTs
//! (`tf.abs(tf.signal.stft(...))` is a `ComplexAbs`), and complex `AddV2`,
//! `Sub` and `Mul` (built here for `math`'s kernels).
//!
//! A complex64 tensor is TensorFlow's layout: each element two float32
//! (real, then imaginary), little-endian; complex128 two float64. These
//! kernels only move parts around, except `ComplexAbs` and `Angle`, which
//! are the C library's `hypot` and `atan2` as in TensorFlow (measured equal
//! to TF 2.21 on 20 000 random float32 pairs across 17 decades).

use tfdata_core::{DType, Result, Tensor};

use super::numeric::{
    Elem, Num, Plan, broadcast_shape, buffer, finish, invalid, out_buf, out_elements, take,
};
use super::{Compute, KernelDef, one_output};
use crate::attrs::NodeAttrs;

/// A part of a complex number: float32 or float64.
pub(super) trait Part: Num {
    const COMPLEX: DType;
    fn hypot(self, o: Self) -> Self;
    fn atan2(self, o: Self) -> Self;
}

impl Part for f32 {
    const COMPLEX: DType = DType::Complex64;
    fn hypot(self, o: Self) -> Self {
        f32::hypot(self, o)
    }
    fn atan2(self, o: Self) -> Self {
        f32::atan2(self, o)
    }
}

impl Part for f64 {
    const COMPLEX: DType = DType::Complex128;
    fn hypot(self, o: Self) -> Self {
        f64::hypot(self, o)
    }
    fn atan2(self, o: Self) -> Self {
        f64::atan2(self, o)
    }
}

/// The dtype of a complex dtype's parts.
pub(super) fn part_of(d: DType) -> Option<DType> {
    match d {
        DType::Complex64 => Some(DType::Float),
        DType::Complex128 => Some(DType::Double),
        _ => None,
    }
}

/// The complex dtype whose parts are `d`.
pub(super) fn complex_of(d: DType) -> Option<DType> {
    match d {
        DType::Float => Some(DType::Complex64),
        DType::Double => Some(DType::Complex128),
        _ => None,
    }
}

/// The (real, imaginary) pairs of a complex tensor of parts `T`.
pub(super) fn pairs<T: Part>(b: &[u8]) -> impl Iterator<Item = (T, T)> + '_ {
    b.chunks_exact(2 * T::SIZE)
        .map(|c| (T::get(c), T::get(&c[T::SIZE..])))
}

/// A complex tensor from its pairs.
pub(super) fn from_pairs<T: Part>(
    shape: Vec<i64>,
    pairs: impl Iterator<Item = (T, T)>,
) -> Result<Tensor> {
    let mut out = Vec::new();
    for (re, im) in pairs {
        re.put(&mut out);
        im.put(&mut out);
    }
    finish(T::COMPLEX, shape, out)
}

/// TensorFlow's "Signature mismatch" for a node whose attributes name
/// dtypes that no kernel of `op` pairs.
fn mismatch(op: &str, input: DType, output: DType) -> tfdata_core::Error {
    let name = |d: DType| match d {
        DType::Float => "float".to_string(),
        DType::Double => "double".to_string(),
        other => other.name().to_string(),
    };
    invalid(
        op,
        format!(
            "no kernel for {}->{} (TensorFlow registers complex64->float and \
             complex128->double)",
            name(input),
            name(output)
        ),
    )
}

/// `Complex(real, imag)`: broadcast pairs.
fn build_complex(attrs: &NodeAttrs) -> Result<Compute> {
    let t = attrs.dtype("T")?;
    let tout = attrs.dtype_code("Tout").map_or(complex_of(t), |c| {
        DType::from_code(c)
            .ok()
            .filter(|&d| complex_of(t) == Some(d))
    });
    if tout.is_none() {
        return Err(attrs.error(format!("Complex: no kernel for T={t}")));
    }
    Ok(Box::new(move |inputs| {
        let [re, im] = take::<2>("Complex", inputs)?;
        for (i, x) in [&re, &im].into_iter().enumerate() {
            super::numeric::expect_dtype("Complex", x, i, t)?;
        }
        Ok(vec![match t {
            DType::Float => complex::<f32>(&re, &im)?,
            _ => complex::<f64>(&re, &im)?,
        }])
    }))
}

fn complex<T: Part>(re: &Tensor, im: &Tensor) -> Result<Tensor> {
    let op = "Complex";
    let shape = broadcast_shape(op, re.shape(), im.shape())?;
    let n = out_elements(op, T::COMPLEX, &shape)?;
    let (a, b) = (buffer(op, re)?, buffer(op, im)?);
    let mut out = out_buf::<T>(n * 2);
    Plan::new(&shape, [re.shape(), im.shape()]).walk(|[i, j]| {
        super::numeric::at::<T>(a, i).put(&mut out);
        super::numeric::at::<T>(b, j).put(&mut out);
    });
    finish(T::COMPLEX, shape, out)
}

/// A complex-to-real op (`Real`, `Imag`, `ComplexAbs`, `Angle`): `T` the
/// input's complex dtype, `Tout` its part dtype.
fn build_to_real(
    attrs: &NodeAttrs,
    f32_fn: fn(f32, f32) -> f32,
    f64_fn: fn(f64, f64) -> f64,
) -> Result<Compute> {
    let op = attrs.op.to_string();
    let t = attrs.dtype("T")?;
    let part = part_of(t).ok_or_else(|| attrs.error(format!("{op}: no kernel for {t} inputs")))?;
    if let Ok(code) = attrs.dtype_code("Tout")
        && DType::from_code(code).ok() != Some(part)
    {
        let got = DType::from_code(code).unwrap_or(DType::Float);
        return Err(attrs.error(mismatch(&op, t, got)));
    }
    Ok(Box::new(move |inputs| {
        let [x] = take::<1>(&op, inputs)?;
        super::numeric::expect_dtype(&op, &x, 0, t)?;
        let b = buffer(&op, &x)?;
        let shape = x.shape().to_vec();
        let out = match t {
            DType::Complex64 => {
                let mut out = out_buf::<f32>(b.len() / 8);
                pairs::<f32>(b).for_each(|(re, im)| f32_fn(re, im).put(&mut out));
                finish(DType::Float, shape, out)?
            }
            _ => {
                let mut out = out_buf::<f64>(b.len() / 16);
                pairs::<f64>(b).for_each(|(re, im)| f64_fn(re, im).put(&mut out));
                finish(DType::Double, shape, out)?
            }
        };
        Ok(vec![out])
    }))
}

/// TensorFlow runs its CPU kernels with denormals flushed to zero: the C
/// library sees a subnormal part as zero, and a subnormal result is zero.
fn abs<T: Part>(re: T, im: T) -> T {
    re.ftz().hypot(im.ftz()).ftz()
}

fn angle<T: Part>(re: T, im: T) -> T {
    im.ftz().atan2(re.ftz()).ftz()
}

fn build_conj(attrs: &NodeAttrs) -> Result<Compute> {
    let t = attrs.dtype("T")?;
    if part_of(t).is_none() {
        return Err(attrs.error(format!("Conj: no kernel for {t} inputs")));
    }
    Ok(Box::new(move |inputs| {
        let [x] = take::<1>("Conj", inputs)?;
        super::numeric::expect_dtype("Conj", &x, 0, t)?;
        let b = buffer("Conj", &x)?;
        let shape = x.shape().to_vec();
        // The imaginary part's sign bit flips (NaN and zero too).
        Ok(vec![match t {
            DType::Complex64 => from_pairs::<f32>(shape, pairs::<f32>(b).map(|(r, i)| (r, -i)))?,
            _ => from_pairs::<f64>(shape, pairs::<f64>(b).map(|(r, i)| (r, -i)))?,
        }])
    }))
}

/// Complex `AddV2`, `Sub` and `Mul` (numpy broadcasting): `math`'s
/// kernels hand a node over when its `T` is complex. The product is the
/// textbook one, each product rounded then summed, as Eigen's SIMD packets
/// compute it.
pub(super) fn build_arith(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    let t = attrs.dtype("T")?;
    let f: fn(f64, f64, f64, f64) -> (f64, f64) = match op.as_str() {
        "AddV2" | "Add" => |a, b, c, d| (a + c, b + d),
        "Sub" => |a, b, c, d| (a - c, b - d),
        _ => |a, b, c, d| (a * c - b * d, a * d + b * c),
    };
    Ok(Box::new(move |inputs| {
        let [x, y] = take::<2>(&op, inputs)?;
        super::numeric::expect_dtype(&op, &x, 0, t)?;
        super::numeric::expect_dtype(&op, &y, 1, t)?;
        Ok(vec![match t {
            DType::Complex64 => arith::<f32>(&op, &x, &y, f)?,
            _ => arith::<f64>(&op, &x, &y, f)?,
        }])
    }))
}

fn arith<T: Part>(
    op: &str,
    x: &Tensor,
    y: &Tensor,
    f: fn(f64, f64, f64, f64) -> (f64, f64),
) -> Result<Tensor> {
    let shape = broadcast_shape(op, x.shape(), y.shape())?;
    let n = out_elements(op, T::COMPLEX, &shape)?;
    let (a, b) = (buffer(op, x)?, buffer(op, y)?);
    let get = |buf: &[u8], i: usize| {
        let at = |k: usize| super::numeric::at::<T>(buf, k).ftz();
        (at(2 * i), at(2 * i + 1))
    };
    let mut out = out_buf::<T>(n * 2);
    Plan::new(&shape, [x.shape(), y.shape()]).walk(|[i, j]| {
        let ((p, q), (r, s)) = (get(a, i), get(b, j));
        // In the parts' own precision: f32 products rounded to f32 before
        // the sum, as Eigen does.
        let (re, im) = if T::SIZE == 4 {
            let g = |u: T, v: T| T::from_f64(u.to_f64() * v.to_f64());
            match op {
                "Mul" => (
                    g(p, r).to_f64() - g(q, s).to_f64(),
                    g(p, s).to_f64() + g(q, r).to_f64(),
                ),
                _ => f(p.to_f64(), q.to_f64(), r.to_f64(), s.to_f64()),
            }
        } else {
            f(p.to_f64(), q.to_f64(), r.to_f64(), s.to_f64())
        };
        T::from_f64(re).ftz().put(&mut out);
        T::from_f64(im).ftz().put(&mut out);
    });
    finish(T::COMPLEX, shape, out)
}

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "Complex",
        outputs: |_| Ok(vec![("out", 1)]),
        build: build_complex,
    },
    KernelDef {
        op: "Real",
        outputs: one_output,
        build: |a| build_to_real(a, |re, _| re, |re, _| re),
    },
    KernelDef {
        op: "Imag",
        outputs: one_output,
        build: |a| build_to_real(a, |_, im| im, |_, im| im),
    },
    KernelDef {
        op: "ComplexAbs",
        outputs: |_| Ok(vec![("y", 1)]),
        build: |a| build_to_real(a, abs::<f32>, abs::<f64>),
    },
    KernelDef {
        op: "Angle",
        outputs: one_output,
        build: |a| build_to_real(a, angle::<f32>, angle::<f64>),
    },
    KernelDef {
        op: "Conj",
        outputs: one_output,
        build: build_conj,
    },
];

#[cfg(test)]
mod tests {
    use super::super::testing::{run, ty};
    use tfdata_core::{DType, Tensor};

    fn c64(v: &[(f32, f32)], shape: &[i64]) -> Tensor {
        super::from_pairs::<f32>(shape.to_vec(), v.iter().copied()).unwrap()
    }

    #[test]
    fn parts_round_trip() {
        let re = Tensor::from_slice(&[1.0f32, -2.0], vec![2]).unwrap();
        let im = Tensor::scalar(3.0f32);
        let z = run(
            "Complex",
            &[("T", ty(DType::Float)), ("Tout", ty(DType::Complex64))],
            vec![re, im],
        )
        .unwrap()
        .remove(0);
        assert_eq!(z.dtype(), DType::Complex64);
        assert_eq!(z, c64(&[(1.0, 3.0), (-2.0, 3.0)], &[2]));
        let attrs = [("T", ty(DType::Complex64)), ("Tout", ty(DType::Float))];
        let imag = run("Imag", &attrs, vec![z.clone()]).unwrap().remove(0);
        assert_eq!(imag.to_vec::<f32>().unwrap(), vec![3.0, 3.0]);
        let abs = run("ComplexAbs", &attrs, vec![c64(&[(3.0, 4.0)], &[])]).unwrap();
        assert_eq!(abs[0].to_vec::<f32>().unwrap(), vec![5.0]);
        let conj = run("Conj", &[("T", ty(DType::Complex64))], vec![z]).unwrap();
        assert_eq!(conj[0], c64(&[(1.0, -3.0), (-2.0, -3.0)], &[2]));
        let bad = [("T", ty(DType::Complex128)), ("Tout", ty(DType::Float))];
        assert!(run("Real", &bad, vec![]).is_err());
    }
}
