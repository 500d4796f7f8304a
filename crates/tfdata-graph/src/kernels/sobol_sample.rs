//! `SobolSample`: points of the Sobol sequence as TensorFlow 2.21 computes
//! them, from Joe and Kuo's direction numbers (`new-joe-kuo-6.21201`, TF's
//! table, of which TF 2.21 accepts the first 21200 dimensions), which the
//! `sobol` crate ships with their recurrence.
//!
//! TF skips the all-zero first point: output row `i` is point `skip + i + 1`.
//! It works in `int` with `d = bits(skip + num_results + 1)` binary digits and
//! scales by `1 / (1 << d)`; for `d = 31` that shift makes the scale
//! negative, and for more than 24 digits (float) the integer rounds on its
//! way to float. TF computes blocks of at least 512 points on its thread
//! pool, each with its own `d`; where those would differ (and so TF's answer
//! depends on its thread count), the op is refused.

use std::sync::OnceLock;

use sobol::Sobol;
use sobol::params::JoeKuoD6;
use tfdata_core::{DType, Result, Tensor};

use super::numeric::{finish, invalid, out_elements, scalar_index};
use super::{Compute, KernelDef};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "SobolSample",
    outputs: |_| Ok(vec![("samples", 1)]),
    build,
}];

/// The dimensions TF accepts (the published table has one more).
const MAX_DIM: usize = 21200;
/// Binary digits TF's `int` arithmetic can use.
const DIGITS: usize = 31;
/// TF's smallest block of points per thread.
const MIN_BLOCK: i64 = 512;

/// The direction numbers `m_k` (odd, below `2^(k+1)`) of every dimension,
/// for `k < 31`, built once.
fn direction_numbers() -> &'static [Vec<u32>] {
    static TABLE: OnceLock<Vec<Vec<u32>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let params = JoeKuoD6::extended();
        // The crate stores `m_k << (32 - (k + 1))` for 32 bits.
        Sobol::<u32>::init_direction_vals::<u32>(MAX_DIM, 32, &params)
            .into_iter()
            .map(|dirs| {
                dirs.iter()
                    .take(DIGITS)
                    .enumerate()
                    .map(|(k, v)| v >> (31 - k))
                    .collect()
            })
            .collect()
    })
}

/// TF's `NumBinaryDigits`: `int(log2(n) + 1)`.
fn binary_digits(n: i64) -> usize {
    ((n as f64).log2() + 1.0) as usize
}

/// The points as TF's `int`s scaled for `digits` digits, then converted by
/// `to_out(int, scale)`.
fn sample<T>(
    dim: usize,
    num_results: usize,
    skip: i64,
    digits: usize,
    to_out: impl Fn(i32, f64) -> T,
) -> Vec<T> {
    let table = direction_numbers();
    // `m_k << (digits - k - 1)` in 32-bit `int`s (the top bit may be set).
    let dirs: Vec<Vec<i32>> = table[..dim]
        .iter()
        .map(|m| {
            (0..digits)
                .map(|k| (m[k] << (digits - k - 1)) as i32)
                .collect()
        })
        .collect();
    // `1. / (1 << digits)` with C's `int` shift: `1 << 31` is `i32::MIN`.
    let scale = 1.0 / f64::from(1i32.wrapping_shl(digits as u32));
    let mut point: Vec<i32> = if skip > 0 {
        // Point `skip + 1` from its Gray code.
        let i = skip + 1;
        let gray = i ^ (i >> 1);
        dirs.iter()
            .map(|d| {
                (0..binary_digits(i))
                    .filter(|k| (gray >> k) & 1 == 1)
                    .fold(0, |acc, k| acc ^ d[k])
            })
            .collect()
    } else {
        dirs.iter().map(|d| d[0]).collect()
    };
    let mut out = Vec::with_capacity(num_results * dim);
    out.extend(point.iter().map(|&v| to_out(v, scale)));
    for i in 1..num_results as i64 {
        // Gray-code order: the next point flips the rightmost zero bit.
        let k = (i + skip).trailing_ones() as usize;
        for (p, d) in point.iter_mut().zip(&dirs) {
            *p ^= d[k];
            out.push(to_out(*p, scale));
        }
    }
    out
}

fn build(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    let dtype = attrs.dtype("dtype")?;
    if !matches!(dtype, DType::Float | DType::Double) {
        return Err(attrs.error(super::numeric::unsupported(&op, dtype)));
    }
    Ok(Box::new(move |inputs: Vec<Tensor>| {
        super::expect_inputs(&op, &inputs, 3)?;
        let dim = scalar_index(&op, "dim", &inputs[0])?;
        let num_results = scalar_index(&op, "num_results", &inputs[1])?;
        let skip = scalar_index(&op, "skip", &inputs[2])?;
        if dim < 1 {
            return Err(invalid(&op, "dim must be at least one"));
        }
        if dim > MAX_DIM as i64 {
            return Err(invalid(&op, format!("dim must be at most {MAX_DIM}")));
        }
        if num_results < 1 {
            return Err(invalid(&op, "num_results must be at least one"));
        }
        if skip < 0 {
            return Err(invalid(&op, "skip must be non-negative"));
        }
        if num_results >= i64::from(i32::MAX) - skip {
            return Err(invalid(
                &op,
                format!("num_results+skip must be less than {}", i32::MAX),
            ));
        }
        let shape = vec![num_results, dim];
        out_elements(&op, dtype, &shape)?;
        let digits = binary_digits(skip + num_results + 1);
        // Exact whatever TF's block split: one block, or every block's
        // integers exact in the output type at the same scale.
        let exact_digits = if dtype == DType::Float { 24 } else { 30 };
        let single_block = num_results <= MIN_BLOCK;
        let same_digits = binary_digits(skip + MIN_BLOCK + 1) == digits;
        if !(single_block || same_digits || digits <= exact_digits) {
            return Err(invalid(
                &op,
                "TensorFlow's result for this skip and num_results depends on its thread \
                 count (its blocks round differently); refused",
            ));
        }
        let (dim, n) = (dim as usize, num_results as usize);
        let data: Vec<u8> = if dtype == DType::Float {
            sample(dim, n, skip, digits, |v, s| v as f32 * s as f32)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect()
        } else {
            sample(dim, n, skip, digits, |v, s| f64::from(v) * s)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect()
        };
        Ok(vec![finish(dtype, shape, data)?])
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_points_match_tensorflow() {
        // TF 2.21: SobolSample(dim=3, num_results=5, skip=0).
        let got = sample(3, 5, 0, binary_digits(6), |v, s| v as f32 * s as f32);
        let want = [
            0.5, 0.5, 0.5, 0.75, 0.25, 0.25, 0.25, 0.75, 0.75, 0.375, 0.375, 0.625, 0.875, 0.875,
            0.125,
        ];
        assert_eq!(got, want);
    }
}
