//! Shared machinery of the layout kernels (`shape.rs`, `slice.rs`): they
//! move elements without looking at them, so they work on element bytes
//! (`DType::size()` of them) or on string handles, never per dtype.
//!
//! Most of them are one affine view of their input ([`Axis`]: a count and
//! an element stride per output dimension, stride 0 repeating, negative
//! reversing) copied out by [`copy_view`] in runs as long as the innermost
//! dimension is contiguous.

use std::fmt::Display;

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};

use super::check_size;

pub(super) fn err(op: &str, message: impl Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

/// The inputs as an array, or an error if there are not exactly `N`.
pub(super) fn take<const N: usize>(op: &str, inputs: Vec<Tensor>) -> Result<[Tensor; N]> {
    super::expect_inputs(op, &inputs, N)?;
    inputs
        .try_into()
        .map_err(|_| err(op, format!("expected {N} inputs")))
}

/// Row-major element strides of `shape`.
pub(super) fn strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        // Saturating: a shape with a 0 can have an overflowing product
        // elsewhere, and then no element is ever addressed.
        s[d] = s[d + 1].saturating_mul(shape[d + 1]);
    }
    s
}

/// Elements of `shape`, checked against the output limit for `dtype`.
pub(super) fn checked_elements(op: &str, dtype: DType, shape: &[i64]) -> Result<u64> {
    if let Some(d) = shape.iter().find(|&&d| d < 0) {
        return Err(err(
            op,
            format!("dimension {d} of shape {shape:?} is negative"),
        ));
    }
    // A zero anywhere makes an empty tensor, whatever the other dims'
    // product would be.
    if shape.contains(&0) {
        return Ok(0);
    }
    let mut n: u64 = 1;
    for &d in shape {
        n = n.checked_mul(d as u64).ok_or_else(|| {
            err(
                op,
                format!("an output of shape {shape:?} exceeds the size limit"),
            )
        })?;
    }
    check_size(op, dtype, n)?;
    Ok(n)
}

/// TensorFlow's way of printing a shape: `[2,3]`.
pub(super) fn shape_str(shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
}

/// Reads an integer tensor (int8/16/32/64) as i64s.
pub(super) fn ints(op: &str, what: &str, t: &Tensor) -> Result<Vec<i64>> {
    let size = match t.dtype() {
        DType::Int8 | DType::Int16 | DType::Int32 | DType::Int64 => t.dtype().size().unwrap_or(8),
        other => {
            return Err(err(
                op,
                format!("{what} must be an integer tensor, got {other}"),
            ));
        }
    };
    let TensorData::Buffer(b) = t.data() else {
        return Err(err(op, format!("{what} must be an integer tensor")));
    };
    Ok(b.chunks_exact(size)
        .map(|c| {
            let mut buf = [0u8; 8];
            buf[..size].copy_from_slice(c);
            // Sign-extend from the element's width.
            let shift = 64 - 8 * size as u32;
            (i64::from_le_bytes(buf) << shift) >> shift
        })
        .collect())
}

/// An integer input that must be 1-D.
pub(super) fn vector_ints(op: &str, what: &str, t: &Tensor) -> Result<Vec<i64>> {
    if t.shape().len() != 1 {
        return Err(err(
            op,
            format!("{what} must be 1-D, not {}", shape_str(t.shape())),
        ));
    }
    ints(op, what, t)
}

/// An integer input that must hold exactly one value (scalars, and the
/// one-element vectors TensorFlow also accepts for axes).
pub(super) fn scalar_int(op: &str, what: &str, t: &Tensor) -> Result<i64> {
    match ints(op, what, t)?.as_slice() {
        [v] if t.shape().len() <= 1 => Ok(*v),
        _ => Err(err(
            op,
            format!(
                "{what} must be a scalar, got shape {}",
                shape_str(t.shape())
            ),
        )),
    }
}

/// An int32 or int64 tensor (by `dtype`) of `values`.
pub(super) fn int_tensor(
    op: &str,
    dtype: DType,
    values: &[i64],
    shape: Vec<i64>,
) -> Result<Tensor> {
    match dtype {
        DType::Int64 => Tensor::from_slice(values, shape),
        DType::Int32 => {
            let narrow = values
                .iter()
                .map(|&v| {
                    i32::try_from(v).map_err(|_| {
                        err(op, format!("value {v} does not fit the int32 output type"))
                    })
                })
                .collect::<Result<Vec<i32>>>()?;
            Tensor::from_slice(&narrow, shape)
        }
        other => Err(err(
            op,
            format!("output type must be int32 or int64, got {other}"),
        )),
    }
}

/// A normalized axis in `0..rank` from one in `-rank..rank`.
pub(super) fn axis(op: &str, a: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if !(-r..r).contains(&a) {
        return Err(err(
            op,
            format!("axis {a} is out of range [-{r}, {r}) for a tensor of rank {r}"),
        ));
    }
    Ok((if a < 0 { a + r } else { a }) as usize)
}

/// A tensor's elements, read by index.
pub(super) enum Src<'a> {
    Fixed { bytes: &'a [u8], size: usize },
    Strings(&'a [Bytes]),
}

impl<'a> Src<'a> {
    pub(super) fn of(t: &'a Tensor) -> Src<'a> {
        match t.data() {
            TensorData::Buffer(b) => Src::Fixed {
                bytes: b,
                size: t.dtype().size().unwrap_or(1),
            },
            TensorData::Strings(s) => Src::Strings(s),
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Src::Fixed { bytes, size } => bytes.len() / (*size).max(1),
            Src::Strings(s) => s.len(),
        }
    }
}

/// An output being filled in row-major order.
pub(super) enum Out {
    Fixed { bytes: Vec<u8>, size: usize },
    Strings(Vec<Bytes>),
}

fn out_of_bounds(at: usize, n: usize) -> Error {
    Error::Internal(format!(
        "layout kernel read elements {at}..{at}+{n} past its input"
    ))
}

impl Out {
    /// Room for `elements` values of `dtype`, refused beyond the size limit.
    pub(super) fn new(op: &str, dtype: DType, elements: u64) -> Result<Out> {
        check_size(op, dtype, elements)?;
        Ok(match dtype.size() {
            Some(size) => Out::Fixed {
                bytes: Vec::with_capacity(elements as usize * size),
                size,
            },
            None => Out::Strings(Vec::with_capacity(elements as usize)),
        })
    }

    /// Appends `src`'s elements `at..at + n`.
    pub(super) fn push(&mut self, src: &Src, at: usize, n: usize) -> Result<()> {
        match (self, src) {
            (
                Out::Fixed { bytes, size },
                Src::Fixed {
                    bytes: from,
                    size: s,
                },
            ) if size == s => {
                let run = at
                    .checked_mul(*s)
                    .and_then(|a| Some(a..a.checked_add(n.checked_mul(*s)?)?))
                    .and_then(|r| from.get(r))
                    .ok_or_else(|| out_of_bounds(at, n))?;
                bytes.extend_from_slice(run);
            }
            (Out::Strings(out), Src::Strings(from)) => {
                let run = at
                    .checked_add(n)
                    .and_then(|end| from.get(at..end))
                    .ok_or_else(|| out_of_bounds(at, n))?;
                out.extend_from_slice(run);
            }
            _ => return Err(Error::Internal("layout kernel mixed dtypes".into())),
        }
        Ok(())
    }

    /// Appends `src`'s element `at`, `n` times.
    pub(super) fn repeat(&mut self, src: &Src, at: usize, n: usize) -> Result<()> {
        match (self, src) {
            (
                Out::Fixed { bytes, size },
                Src::Fixed {
                    bytes: from,
                    size: s,
                },
            ) if size == s => {
                let one = at
                    .checked_mul(*s)
                    .and_then(|a| from.get(a..a + *s))
                    .ok_or_else(|| out_of_bounds(at, 1))?;
                if one.iter().all(|&b| b == 0) {
                    bytes.resize(bytes.len() + n * *s, 0);
                } else {
                    for _ in 0..n {
                        bytes.extend_from_slice(one);
                    }
                }
            }
            (Out::Strings(out), Src::Strings(from)) => {
                let one = from.get(at).ok_or_else(|| out_of_bounds(at, 1))?;
                out.resize(out.len() + n, one.clone());
            }
            _ => return Err(Error::Internal("layout kernel mixed dtypes".into())),
        }
        Ok(())
    }

    pub(super) fn finish(self, dtype: DType, shape: Vec<i64>) -> Result<Tensor> {
        let data = match self {
            Out::Fixed { bytes, .. } => TensorData::Buffer(bytes.into()),
            Out::Strings(s) => TensorData::Strings(s),
        };
        Tensor::new(dtype, shape, data)
    }
}

/// One output dimension of a view: `n` positions, `stride` input elements
/// apart.
#[derive(Clone, Copy, Debug)]
pub(super) struct Axis {
    pub n: i64,
    pub stride: i64,
}

/// Copies the view `base + Σ i_d · stride_d` of `src` into `out`, row-major
/// over the axes. Offsets are checked against `src` up front.
pub(super) fn copy_view(src: &Src, base: i64, axes: &[Axis], out: &mut Out) -> Result<()> {
    if axes.iter().any(|a| a.n <= 0) {
        return Ok(());
    }
    // Size-1 axes contribute nothing, and an axis whose stride spans the
    // whole next one continues it: merging both makes the copy runs longer.
    let mut merged: Vec<Axis> = Vec::with_capacity(axes.len());
    for a in axes.iter().filter(|a| a.n > 1) {
        match merged.last_mut() {
            Some(last) if a.stride != 0 && Some(last.stride) == a.n.checked_mul(a.stride) => {
                last.n *= a.n;
                last.stride = a.stride;
            }
            _ => merged.push(*a),
        }
    }
    let (lo, hi) = merged
        .iter()
        .fold((base as i128, base as i128), |(lo, hi), a| {
            let span = (a.n as i128 - 1) * a.stride as i128;
            (lo + span.min(0), hi + span.max(0))
        });
    if lo < 0 || hi >= src.len() as i128 {
        return Err(Error::Internal(format!(
            "layout view {base} {axes:?} reaches outside its input of {} elements",
            src.len()
        )));
    }
    let Some((inner, outer)) = merged.split_last() else {
        return out.push(src, base as usize, 1);
    };
    let mut index = vec![0i64; outer.len()];
    loop {
        let start = base
            + outer
                .iter()
                .zip(&index)
                .map(|(a, i)| a.stride * i)
                .sum::<i64>();
        match inner.stride {
            1 => out.push(src, start as usize, inner.n as usize)?,
            0 => out.repeat(src, start as usize, inner.n as usize)?,
            s => {
                for i in 0..inner.n {
                    out.push(src, (start + i * s) as usize, 1)?;
                }
            }
        }
        let mut d = outer.len();
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            index[d] += 1;
            if index[d] < outer[d].n {
                break;
            }
            index[d] = 0;
        }
    }
}

/// The view of `t` as a new tensor of `shape` (which must have as many
/// elements as the axes describe).
pub(super) fn view(
    op: &str,
    t: &Tensor,
    base: i64,
    axes: &[Axis],
    shape: Vec<i64>,
) -> Result<Tensor> {
    let n = checked_elements(op, t.dtype(), &shape)?;
    // A contiguous forward range of a buffer is shared, not copied.
    if let (TensorData::Buffer(b), Some(size)) = (t.data(), t.dtype().size()) {
        let contiguous = axes
            .iter()
            .rev()
            .filter(|a| a.n != 1)
            .try_fold(1i64, |expect, a| {
                (a.stride == expect).then_some(expect.saturating_mul(a.n))
            })
            .is_some();
        let range = usize::try_from(base).ok().and_then(|base| {
            let start = base.checked_mul(size)?;
            Some(start..start.checked_add((n as usize).checked_mul(size)?)?)
        });
        if let Some(range) = range.filter(|r| contiguous && n > 0 && r.end <= b.len()) {
            return Tensor::new(t.dtype(), shape, TensorData::Buffer(b.slice(range)));
        }
    }
    let mut out = Out::new(op, t.dtype(), n)?;
    copy_view(&Src::of(t), base, axes, &mut out)?;
    out.finish(t.dtype(), shape)
}

/// `t` with a new shape of the same element count, sharing its data.
pub(super) fn reshaped(t: Tensor, shape: Vec<i64>) -> Result<Tensor> {
    let (dtype, _, data) = t.into_parts();
    Tensor::new(dtype, shape, data)
}
