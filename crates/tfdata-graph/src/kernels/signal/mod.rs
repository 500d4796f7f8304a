//! The FFT ops of `tf.signal`: `FFT`, `IFFT`, `RFFT`, `IRFFT` and their 2D
//! and 3D forms, over the innermost one, two or three dimensions.
//!
//! TensorFlow 2.21's CPU kernels call `ducc0`, which computes in the
//! tensor's own precision with its own factorisation; no other algorithm
//! gives its bits. Ours computes in f64 and rounds once ([`fft`]), so a
//! float32 result differs from TensorFlow's by TensorFlow's own rounding
//! error: measured at most 4.4e-7 of the transformed row's L2 norm (lengths
//! 8 to 4096, powers of two, primes and others), per part of each
//! complex output. A small bin of a large row can therefore differ in
//! relative terms; the differential cases declare `abs` bounds of 1e-6 of
//! the row norm. float64 transforms agree to about 1e-15 of the norm.
//!
//! Shapes, checks and messages are TensorFlow's: the input is cropped to
//! `fft_length` (never padded: a shorter dimension is an error), `RFFT`'s
//! innermost output is `fft_length / 2 + 1`, `IRFFT` reads that many
//! values and ignores the imaginary parts of the zero-frequency (and, for
//! even lengths, the Nyquist) bins. The inverses scale by one over the
//! transform's size. Where TensorFlow leaves an output uninitialised (an
//! empty input with a non-zero `fft_length`) ours is zeros.

mod fft;

use tfdata_core::{DType, Error, Result, Tensor};

use super::complex::{from_pairs, pairs};
use super::numeric::{Elem, buffer, expect_dtype, finish, out_elements, shape_str, take};
use super::{Compute, KernelDef, check_size};
use crate::attrs::NodeAttrs;
use fft::C;

/// What a node computes.
#[derive(Clone, Copy)]
struct Spec {
    rank: usize,
    forward: bool,
    real: bool,
}

fn invalid(msg: String) -> Error {
    Error::InvalidArgument(msg)
}

fn build(attrs: &NodeAttrs, spec: Spec) -> Result<Compute> {
    let op = attrs.op.to_string();
    let complex = attrs.dtype_or_default("Tcomplex", DType::Complex64)?;
    let real = if spec.real {
        Some(attrs.dtype_or_default("Treal", DType::Float)?)
    } else {
        None
    };
    let pair_ok = match real {
        None => matches!(complex, DType::Complex64 | DType::Complex128),
        Some(r) => matches!(
            (r, complex),
            (DType::Float, DType::Complex64) | (DType::Double, DType::Complex128)
        ),
    };
    if !pair_ok {
        return Err(attrs.error(format!(
            "{op}: no kernel for Tcomplex={complex}{}",
            real.map(|r| format!(", Treal={r}")).unwrap_or_default()
        )));
    }
    let (input_dtype, output_dtype) = match real {
        Some(r) if spec.forward => (r, complex),
        Some(r) => (complex, r),
        None => (complex, complex),
    };
    Ok(Box::new(move |inputs| {
        let (x, lengths) = if spec.real {
            let [x, l] = take::<2>(&op, inputs)?;
            expect_dtype(&op, &l, 1, DType::Int32)?;
            (x, Some(l))
        } else {
            let [x] = take::<1>(&op, inputs)?;
            (x, None)
        };
        expect_dtype(&op, &x, 0, input_dtype)?;
        Ok(vec![transform(
            &op,
            spec,
            &x,
            lengths.as_ref(),
            output_dtype,
        )?])
    }))
}

trait AttrsExt {
    fn dtype_or_default(&self, key: &str, default: DType) -> Result<DType>;
}

impl AttrsExt for NodeAttrs<'_> {
    fn dtype_or_default(&self, key: &str, default: DType) -> Result<DType> {
        if self.has(key) {
            self.dtype(key)
        } else {
            Ok(default)
        }
    }
}

/// The output shape and the transform's lengths, as TensorFlow checks them.
fn plan(spec: Spec, shape: &[i64], lengths: Option<&Tensor>) -> Result<(Vec<i64>, Vec<usize>)> {
    let r = spec.rank;
    if shape.len() < r {
        return Err(invalid(format!(
            "Input must have rank of at least {r} but got: {}",
            shape_str(shape)
        )));
    }
    let lead = shape.len() - r;
    let mut out = shape.to_vec();
    let Some(lengths) = lengths else {
        let dims = shape[lead..].iter().map(|&d| d as usize).collect();
        return Ok((out, dims));
    };
    if lengths.shape() != [r as i64] {
        return Err(invalid(format!("fft_length must have shape [{r}]")));
    }
    let mut dims = Vec::with_capacity(r);
    for (i, f) in lengths.to_vec::<i32>()?.into_iter().enumerate() {
        if f < 0 {
            return Err(invalid(format!("fft_length[{i}] must >= 0, but got: {f}")));
        }
        let f = f as i64;
        let inner = i == r - 1;
        let min = if !spec.forward && inner { f / 2 + 1 } else { f };
        let d = shape[lead + i];
        if d != 0 && d < min {
            return Err(invalid(format!(
                "Input dimension {} must have length of at least {min} but got: {d}",
                lead + i
            )));
        }
        out[lead + i] = if spec.forward && inner && f != 0 {
            f / 2 + 1
        } else {
            f
        };
        dims.push(f as usize);
    }
    Ok((out, dims))
}

fn transform(
    op: &str,
    spec: Spec,
    x: &Tensor,
    lengths: Option<&Tensor>,
    out_dtype: DType,
) -> Result<Tensor> {
    let (out_shape, f) = plan(spec, x.shape(), lengths)?;
    let n_out = out_elements(op, out_dtype, &out_shape)?;
    let r = spec.rank;
    let lead = x.shape().len() - r;
    if x.num_elements() != 0 && f.contains(&0) {
        // TensorFlow 2.21 aborts the process here (a ducc0 assertion).
        return Err(invalid(format!(
            "{op}: an fft_length of 0 for a non-empty input (TensorFlow aborts)"
        )));
    }
    if x.num_elements() == 0 || n_out == 0 {
        return zeros(out_dtype, out_shape, n_out);
    }
    // The region of the input the transform reads: `f`, except IRFFT's
    // innermost half spectrum.
    let mut region: Vec<usize> = f.clone();
    if spec.real && !spec.forward {
        region[r - 1] = f[r - 1] / 2 + 1;
    }
    let batch: usize = x.shape()[..lead].iter().map(|&d| d as usize).product();
    let prod = |d: &[usize]| d.iter().fold(1usize, |a, &b| a.saturating_mul(b));
    let work = batch.saturating_mul(prod(&region).max(prod(&f)));
    check_size(op, DType::Complex128, work as u64)?;
    // A Bluestein transform works on up to four times its length.
    let longest = f.iter().copied().max().unwrap_or(0);
    check_size(op, DType::Complex128, (longest as u64).saturating_mul(4))?;
    let mut data = read_region(op, x, &x.shape()[lead..], &region, batch)?;
    let mut shape = vec![batch];
    shape.extend(&region);
    let size: f64 = f.iter().map(|&n| n as f64).product();
    match (spec.forward, spec.real) {
        (true, _) => {
            for axis in 1..=r {
                fft::along(&mut data, &shape, axis, false);
            }
            if spec.real {
                data = crop_last(&data, f[r - 1], f[r - 1] / 2 + 1);
            }
            write(out_dtype, out_shape, &data, 1.0)
        }
        (false, false) => {
            for axis in 1..=r {
                fft::along(&mut data, &shape, axis, true);
            }
            write(out_dtype, out_shape, &data, 1.0 / size)
        }
        (false, true) => {
            for axis in 1..r {
                fft::along(&mut data, &shape, axis, true);
            }
            let reals = half_to_real(&data, f[r - 1]);
            write(out_dtype, out_shape, &reals, 1.0 / size)
        }
    }
}

fn zeros(dtype: DType, shape: Vec<i64>, n: usize) -> Result<Tensor> {
    let size = dtype.size().unwrap_or(0);
    finish(dtype, shape, vec![0u8; n * size])
}

/// The input's values in the leading `region` of its transformed
/// dimensions `dims`, per batch row, as f64 complex numbers (subnormal
/// float32 inputs read as zero, as TensorFlow's flush-to-zero does).
fn read_region(
    op: &str,
    x: &Tensor,
    dims: &[i64],
    region: &[usize],
    batch: usize,
) -> Result<Vec<C>> {
    let b = buffer(op, x)?;
    let all: Vec<C> = match x.dtype() {
        DType::Float => b
            .chunks_exact(4)
            .map(|c| (f64::from(f32::get(c).ftz()), 0.0))
            .collect(),
        DType::Double => b.chunks_exact(8).map(|c| (f64::get(c), 0.0)).collect(),
        DType::Complex64 => pairs::<f32>(b)
            .map(|(r, i)| (f64::from(r.ftz()), f64::from(i.ftz())))
            .collect(),
        _ => pairs::<f64>(b).collect(),
    };
    let dims: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    if dims == region {
        return Ok(all);
    }
    let row: usize = dims.iter().product();
    let count: usize = region.iter().product();
    let mut out = Vec::with_capacity(batch * count);
    let mut index = vec![0usize; region.len()];
    for b in 0..batch {
        for _ in 0..count {
            let offset = index.iter().zip(&dims).fold(0, |acc, (&i, &d)| acc * d + i);
            out.push(all[b * row + offset]);
            for k in (0..region.len()).rev() {
                index[k] += 1;
                if index[k] < region[k] {
                    break;
                }
                index[k] = 0;
            }
        }
    }
    Ok(out)
}

/// Keeps the first `keep` values of each innermost line of length `n`.
fn crop_last(data: &[C], n: usize, keep: usize) -> Vec<C> {
    data.chunks_exact(n)
        .flat_map(|line| line[..keep].iter().copied())
        .collect()
}

/// The inverse real transform of each innermost half spectrum (lines of
/// `n / 2 + 1`): the full spectrum by Hermitian symmetry, the imaginary
/// parts of the zero and Nyquist bins ignored, inverted; the real parts.
fn half_to_real(data: &[C], n: usize) -> Vec<C> {
    let half = n / 2 + 1;
    let plan = fft::Fft::new(n);
    let mut out = Vec::with_capacity(data.len() / half * n);
    let mut full = vec![(0.0, 0.0); n];
    for line in data.chunks_exact(half) {
        full[0] = (line[0].0, 0.0);
        for k in 1..n.div_ceil(2) {
            full[k] = line[k];
            full[n - k] = (line[k].0, -line[k].1);
        }
        if n.is_multiple_of(2) && n > 0 {
            full[n / 2] = (line[n / 2].0, 0.0);
        }
        plan.inverse(&mut full);
        out.extend(full.iter().map(|&(re, _)| (re, 0.0)));
    }
    out
}

/// The output tensor: complex values, or the real parts for real dtypes,
/// each times `scale`, rounded once.
fn write(dtype: DType, shape: Vec<i64>, data: &[C], scale: f64) -> Result<Tensor> {
    let s = |v: f64| v * scale;
    match dtype {
        DType::Complex64 => from_pairs::<f32>(
            shape,
            data.iter()
                .map(|&(r, i)| ((s(r) as f32).ftz(), (s(i) as f32).ftz())),
        ),
        DType::Complex128 => from_pairs::<f64>(shape, data.iter().map(|&(r, i)| (s(r), s(i)))),
        DType::Float => {
            let mut out = Vec::with_capacity(data.len() * 4);
            data.iter()
                .for_each(|&(r, _)| (s(r) as f32).ftz().put(&mut out));
            finish(dtype, shape, out)
        }
        _ => {
            let mut out = Vec::with_capacity(data.len() * 8);
            data.iter().for_each(|&(r, _)| s(r).put(&mut out));
            finish(dtype, shape, out)
        }
    }
}

macro_rules! fft_op {
    ($name:literal, $rank:literal, $forward:literal, $real:literal) => {
        KernelDef {
            op: $name,
            outputs: super::one_output,
            build: |a| {
                build(
                    a,
                    Spec {
                        rank: $rank,
                        forward: $forward,
                        real: $real,
                    },
                )
            },
        }
    };
}

pub(super) const KERNELS: &[KernelDef] = &[
    fft_op!("FFT", 1, true, false),
    fft_op!("IFFT", 1, false, false),
    fft_op!("FFT2D", 2, true, false),
    fft_op!("IFFT2D", 2, false, false),
    fft_op!("FFT3D", 3, true, false),
    fft_op!("IFFT3D", 3, false, false),
    fft_op!("RFFT", 1, true, true),
    fft_op!("IRFFT", 1, false, true),
    fft_op!("RFFT2D", 2, true, true),
    fft_op!("IRFFT2D", 2, false, true),
    fft_op!("RFFT3D", 3, true, true),
    fft_op!("IRFFT3D", 3, false, true),
];

#[cfg(test)]
mod tests {
    use super::super::testing::{run, ty};
    use tfdata_core::{DType, Tensor};

    #[test]
    fn rfft_of_a_cosine_and_back() {
        let n = 8;
        let x: Vec<f32> = (0..n)
            .map(|t| (2.0 * std::f32::consts::PI * t as f32 / n as f32).cos())
            .collect();
        let attrs = [
            ("Treal", ty(DType::Float)),
            ("Tcomplex", ty(DType::Complex64)),
        ];
        let len = Tensor::from_slice(&[n], vec![1]).unwrap();
        let x = Tensor::from_slice(&x, vec![n as i64]).unwrap();
        let y = run("RFFT", &attrs, vec![x.clone(), len.clone()])
            .unwrap()
            .remove(0);
        assert_eq!(y.shape(), &[5]);
        let back = run("IRFFT", &attrs, vec![y, len]).unwrap().remove(0);
        for (a, b) in back
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .zip(x.to_vec::<f32>().unwrap())
        {
            assert!((a - b).abs() < 1e-6);
        }
        let short = Tensor::from_slice(&[16i32], vec![1]).unwrap();
        let err = run("RFFT", &attrs, vec![x.clone(), short])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("Input dimension 0 must have length of at least 16 but got: 8"),
            "{err}"
        );
        let zero = Tensor::from_slice(&[0i32], vec![1]).unwrap();
        assert!(run("RFFT", &attrs, vec![x, zero]).is_err());
    }
}
