//! Shared machinery of the math and reduction kernels: typed access to
//! little-endian tensor buffers, dtype dispatch, numpy-style broadcasting
//! and the elementwise loops.
//!
//! Values are read straight out of the input buffers and written once into
//! the output buffer, so an elementwise op allocates exactly its output.
//! The arithmetic on those values, in TensorFlow's semantics, is [`Num`]'s
//! ([`num`]).

use crate::attrs::NodeAttrs;
use bytes::{Bytes, BytesMut};
use tfdata_core::tensor::{DType, Tensor, TensorData};
use tfdata_core::{Error, Result};

mod num;

pub(super) use num::Num;

/// A fixed-size element type stored little-endian in a tensor buffer.
pub(super) trait Elem: Copy + PartialEq + PartialOrd + Send + Sync + 'static {
    const DTYPE: DType;
    const SIZE: usize;
    const ZERO: Self;
    /// Reads the value at the front of `b` (`ZERO` if `b` is short, which the
    /// shape checks of [`Tensor::new`] rule out).
    fn get(b: &[u8]) -> Self;
    fn put(self, out: &mut Vec<u8>);
    /// Overwrites the value at the front of `b`.
    fn set(self, b: &mut [u8]);
    /// TF runs its CPU kernels with denormals flushed to zero (FTZ and DAZ):
    /// float arithmetic sees and produces a subnormal as a zero of its sign.
    #[inline(always)]
    fn ftz(self) -> Self {
        self
    }
}

macro_rules! elem {
    ($t:ty, $d:ident, $n:literal, float) => {
        elem!($t, $d, $n, {
            #[inline(always)]
            fn ftz(self) -> Self {
                if self.is_subnormal() { (0.0 as $t).copysign(self) } else { self }
            }
        });
    };
    ($t:ty, $d:ident, $n:literal) => {
        elem!($t, $d, $n, {});
    };
    ($t:ty, $d:ident, $n:literal, {$($extra:item)*}) => {
        impl Elem for $t {
            const DTYPE: DType = DType::$d;
            const SIZE: usize = $n;
            const ZERO: Self = 0 as $t;
            #[inline(always)]
            fn get(b: &[u8]) -> Self {
                b.first_chunk::<$n>()
                    .map_or(Self::ZERO, |a| <$t>::from_le_bytes(*a))
            }
            #[inline(always)]
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            #[inline(always)]
            fn set(self, b: &mut [u8]) {
                if let Some(dst) = b.first_chunk_mut::<$n>() {
                    *dst = self.to_le_bytes();
                }
            }
            $($extra)*
        }
    };
}
elem!(f32, Float, 4, float);
elem!(f64, Double, 8, float);
elem!(i8, Int8, 1);
elem!(i16, Int16, 2);
elem!(i32, Int32, 4);
elem!(i64, Int64, 8);
elem!(u8, UInt8, 1);
elem!(u16, UInt16, 2);
elem!(u32, UInt32, 4);
elem!(u64, UInt64, 8);

impl Elem for bool {
    const DTYPE: DType = DType::Bool;
    const SIZE: usize = 1;
    const ZERO: Self = false;
    #[inline(always)]
    fn get(b: &[u8]) -> Self {
        b.first().is_some_and(|&v| v != 0)
    }
    #[inline(always)]
    fn put(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
    #[inline(always)]
    fn set(self, b: &mut [u8]) {
        if let Some(dst) = b.first_mut() {
            *dst = self as u8;
        }
    }
}

/// The Rust type of a dtype name, for the dispatch macros.
macro_rules! native {
    (Float) => {
        f32
    };
    (Double) => {
        f64
    };
    (Int8) => {
        i8
    };
    (Int16) => {
        i16
    };
    (Int32) => {
        i32
    };
    (Int64) => {
        i64
    };
    (UInt8) => {
        u8
    };
    (UInt16) => {
        u16
    };
    (UInt32) => {
        u32
    };
    (UInt64) => {
        u64
    };
    (Bool) => {
        bool
    };
}
pub(super) use native;

/// `dispatch!(dtype, op, [Float, Int32, ...], f(args))` calls the generic
/// `f::<T>(args)` for the listed dtype the tensor has, or errors naming the
/// op and the dtype (the lists are TensorFlow's CPU kernel registrations).
macro_rules! dispatch {
    ($dt:expr, $op:expr, [$($d:ident),* $(,)?], $f:ident [$pre:ty] $args:tt) => {
        match $dt {
            $( tfdata_core::DType::$d => $f::<$pre, $crate::kernels::numeric::native!($d)> $args, )*
            other => Err($crate::kernels::numeric::unsupported($op, other)),
        }
    };
    ($dt:expr, $op:expr, [$($d:ident),* $(,)?], $f:ident $args:tt) => {
        match $dt {
            $( tfdata_core::DType::$d => $f::<$crate::kernels::numeric::native!($d)> $args, )*
            other => Err($crate::kernels::numeric::unsupported($op, other)),
        }
    };
}
pub(super) use dispatch;

/// Checks a `T` attribute (when the node has one) names float or double,
/// the types TensorFlow registers these float-only kernels for.
pub(super) fn float_or_double_t(attrs: &NodeAttrs) -> Result<()> {
    if attrs.has("T") {
        let t = attrs.dtype("T")?;
        if !matches!(t, DType::Float | DType::Double) {
            return Err(attrs.error(unsupported(attrs.op, t)));
        }
    }
    Ok(())
}

/// An unsupported-dtype error; half-precision types are named as refused by
/// tfdata (TensorFlow has kernels for them, tfdata's math does not).
pub(super) fn unsupported(op: &str, dtype: DType) -> Error {
    match dtype {
        DType::Half | DType::BFloat16 => Error::Unimplemented(format!(
            "{op}: {dtype} tensors are not supported by tfdata's math kernels"
        )),
        _ => Error::InvalidArgument(format!(
            "{op}: no kernel for {dtype} tensors (TensorFlow registers none)"
        )),
    }
}

pub(super) fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

/// A shape as TensorFlow prints it in errors: `[2,3]`.
pub(super) fn shape_str(shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
}

/// The little-endian buffer of a fixed-size tensor.
pub(super) fn buffer<'a>(op: &str, t: &'a Tensor) -> Result<&'a [u8]> {
    match t.data() {
        TensorData::Buffer(b) => Ok(b),
        TensorData::Strings(_) => Err(invalid(op, "expected a numeric tensor, got strings")),
    }
}

/// Checks input `index` has dtype `want`, in TensorFlow's words.
pub(super) fn expect_dtype(op: &str, t: &Tensor, index: usize, want: DType) -> Result<()> {
    if t.dtype() != want {
        return Err(invalid(
            op,
            format!(
                "input #{index}(zero-based) was expected to be a {want} tensor but is a {} tensor",
                t.dtype()
            ),
        ));
    }
    Ok(())
}

/// Elements of `shape`, refused by `check_size` when the output would be too
/// large for `dtype`.
pub(super) fn out_elements(op: &str, dtype: DType, shape: &[i64]) -> Result<usize> {
    let mut n: u64 = 1;
    for &d in shape {
        let d = u64::try_from(d).map_err(|_| invalid(op, format!("bad shape {shape:?}")))?;
        n = n.saturating_mul(d);
    }
    super::check_size(op, dtype, n)?;
    usize::try_from(n).map_err(|_| invalid(op, "output too large"))
}

/// A tensor from a freshly written buffer.
pub(super) fn finish(dtype: DType, shape: Vec<i64>, data: Vec<u8>) -> Result<Tensor> {
    Tensor::new(dtype, shape, TensorData::Buffer(Bytes::from(data)))
}

/// An output buffer for `n` values of `T`.
pub(super) fn out_buf<T: Elem>(n: usize) -> Vec<u8> {
    Vec::with_capacity(n.saturating_mul(T::SIZE))
}

/// The value at element index `i` of a buffer of `T`.
#[inline(always)]
pub(super) fn at<T: Elem>(b: &[u8], i: usize) -> T {
    b.get(i * T::SIZE..).map_or(T::ZERO, T::get)
}

/// Iterates a buffer's values in order.
pub(super) fn values<T: Elem>(b: &[u8]) -> impl Iterator<Item = T> + '_ {
    b.chunks_exact(T::SIZE).map(T::get)
}

/// numpy's broadcast of two shapes, with TensorFlow's error message.
pub(super) fn broadcast_shape(op: &str, a: &[i64], b: &[i64]) -> Result<Vec<i64>> {
    broadcast_shape_opt(a, b).ok_or_else(|| {
        invalid(
            op,
            format!("Incompatible shapes: {} vs. {}", shape_str(a), shape_str(b)),
        )
    })
}

pub(super) fn broadcast_shape_opt(a: &[i64], b: &[i64]) -> Option<Vec<i64>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0i64; rank];
    for (i, slot) in out.iter_mut().enumerate() {
        let da = dim_from_back(a, rank - 1 - i);
        let db = dim_from_back(b, rank - 1 - i);
        *slot = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return None;
        };
    }
    Some(out)
}

fn dim_from_back(shape: &[i64], k: usize) -> i64 {
    shape
        .len()
        .checked_sub(k + 1)
        .and_then(|i| shape.get(i))
        .copied()
        .unwrap_or(1)
}

/// How to walk a broadcast output in order: coalesced dimensions and, per
/// input, the element stride along each (0 where the input is broadcast).
pub(super) struct Plan<const K: usize> {
    dims: Vec<usize>,
    strides: [Vec<usize>; K],
}

impl<const K: usize> Plan<K> {
    /// `out` must be the broadcast of `inputs` (each no longer than it).
    pub(super) fn new(out: &[i64], inputs: [&[i64]; K]) -> Self {
        let rank = out.len();
        let mut dims: Vec<usize> = Vec::with_capacity(rank);
        let mut strides: [Vec<usize>; K] = std::array::from_fn(|_| Vec::with_capacity(rank));
        // Row-major strides of each input, aligned to the output's rank.
        let mut full: [Vec<usize>; K] = std::array::from_fn(|_| vec![0; rank]);
        for (k, shape) in inputs.iter().enumerate() {
            let mut stride = 1usize;
            for i in (0..rank).rev() {
                let d = dim_from_back(shape, rank - 1 - i) as usize;
                full[k][i] = if d == 1 { 0 } else { stride };
                stride = stride.saturating_mul(d);
            }
        }
        for (i, &d) in out.iter().enumerate() {
            let d = d as usize;
            if d == 1 {
                continue;
            }
            // Merging a dimension into the previous one keeps the walk's
            // inner loop long: [N,C]+[C] becomes one run per row, and equal
            // shapes become a single run.
            let mergeable = !dims.is_empty()
                && (0..K).all(|k| {
                    strides[k].last().copied().unwrap_or(0) == full[k][i].saturating_mul(d)
                });
            if mergeable {
                if let Some(last) = dims.last_mut() {
                    *last *= d;
                }
                for k in 0..K {
                    if let Some(s) = strides[k].last_mut() {
                        *s = full[k][i];
                    }
                }
            } else {
                dims.push(d);
                for k in 0..K {
                    strides[k].push(full[k][i]);
                }
            }
        }
        Plan { dims, strides }
    }

    /// Calls `f` with each output element's input indices, in output order.
    pub(super) fn walk(&self, mut f: impl FnMut([usize; K])) {
        let Some((&inner, outer)) = self.dims.split_last() else {
            f([0; K]);
            return;
        };
        if self.dims.contains(&0) {
            return;
        }
        let inner_strides: [usize; K] =
            std::array::from_fn(|k| self.strides[k].last().copied().unwrap_or(0));
        let mut counter = vec![0usize; outer.len()];
        let mut base = [0usize; K];
        loop {
            let mut idx = base;
            for _ in 0..inner {
                f(idx);
                for (i, s) in idx.iter_mut().zip(inner_strides) {
                    *i += s;
                }
            }
            // Odometer step over the outer dimensions.
            let mut d = outer.len();
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                counter[d] += 1;
                for (b, s) in base.iter_mut().zip(&self.strides) {
                    *b += s[d];
                }
                if counter[d] < outer[d] {
                    break;
                }
                for (b, s) in base.iter_mut().zip(&self.strides) {
                    *b -= s[d] * outer[d];
                }
                counter[d] = 0;
            }
        }
    }
}

/// An elementwise binary op on two `T` tensors with broadcasting.
pub(super) fn binary<T: Elem, U: Elem>(
    op: &str,
    x: &Tensor,
    y: &Tensor,
    f: impl Fn(T, T) -> U,
) -> Result<Tensor> {
    expect_dtype(op, x, 0, T::DTYPE)?;
    expect_dtype(op, y, 1, T::DTYPE)?;
    let shape = broadcast_shape(op, x.shape(), y.shape())?;
    binary_into(op, x, y, shape, f)
}

/// [`binary`] once the output shape is known to be the broadcast shape.
pub(super) fn binary_into<T: Elem, U: Elem>(
    op: &str,
    x: &Tensor,
    y: &Tensor,
    shape: Vec<i64>,
    f: impl Fn(T, T) -> U,
) -> Result<Tensor> {
    let n = out_elements(op, U::DTYPE, &shape)?;
    let (xb, yb) = (buffer(op, x)?, buffer(op, y)?);
    if x.shape() == y.shape() {
        let mut out = zeroed::<U>(n);
        zip_into(&mut out, xb, yb, |a: T, b: T| f(a.ftz(), b.ftz()).ftz());
        return finish(U::DTYPE, shape, out);
    }
    if x.num_elements() == 1 {
        let a = at::<T>(xb, 0).ftz();
        let mut out = zeroed::<U>(n);
        map_into(&mut out, yb, |b: T| f(a, b.ftz()).ftz());
        return finish(U::DTYPE, shape, out);
    }
    if y.num_elements() == 1 {
        let b = at::<T>(yb, 0).ftz();
        let mut out = zeroed::<U>(n);
        map_into(&mut out, xb, |a: T| f(a.ftz(), b).ftz());
        return finish(U::DTYPE, shape, out);
    }
    let mut out = out_buf::<U>(n);
    Plan::new(&shape, [x.shape(), y.shape()]).walk(|[i, j]| {
        f(at::<T>(xb, i).ftz(), at::<T>(yb, j).ftz())
            .ftz()
            .put(&mut out)
    });
    finish(U::DTYPE, shape, out)
}

/// [`binary`] on inputs the caller owns: when the output has the dtype and
/// shape of an input whose buffer nobody else holds (the executor moves a
/// value into its last use), the result is written over that input's
/// buffer instead of a fresh one. A chain of elementwise ops then works in
/// one buffer that stays in cache, and allocates and faults in nothing.
pub(super) fn binary_owned<T: Elem, U: Elem>(
    op: &str,
    x: Tensor,
    y: Tensor,
    f: impl Fn(T, T) -> U,
) -> Result<Tensor> {
    expect_dtype(op, &x, 0, T::DTYPE)?;
    expect_dtype(op, &y, 1, T::DTYPE)?;
    let shape = broadcast_shape(op, x.shape(), y.shape())?;
    binary_into_owned(op, x, y, shape, f)
}

/// [`binary_owned`] once the output shape is known to be the broadcast shape.
pub(super) fn binary_into_owned<T: Elem, U: Elem>(
    op: &str,
    x: Tensor,
    y: Tensor,
    shape: Vec<i64>,
    f: impl Fn(T, T) -> U,
) -> Result<Tensor> {
    if U::DTYPE != T::DTYPE {
        return binary_into(op, &x, &y, shape, f);
    }
    let x = match unique_buffer(x, &shape) {
        Ok(mut out) => {
            let yb = buffer(op, &y)?;
            if y.num_elements() == 1 {
                let b = at::<T>(yb, 0).ftz();
                update_in_place(&mut out, |a: T| f(a.ftz(), b).ftz());
            } else if y.shape() == shape.as_slice() {
                zip_in_place(&mut out, yb, |a: T, b: T| f(a.ftz(), b.ftz()).ftz());
            } else {
                Plan::new(&shape, [shape.as_slice(), y.shape()]).walk(|[i, j]| {
                    if let Some(slot) = out.get_mut(i * U::SIZE..) {
                        f(at::<T>(slot, 0).ftz(), at::<T>(yb, j).ftz())
                            .ftz()
                            .set(slot);
                    }
                });
            }
            return finish_bytes(U::DTYPE, shape, out);
        }
        Err(x) => x,
    };
    // The second operand's buffer, when it has the output's shape and x is
    // a scalar (`c - x`, `c * x`).
    if x.num_elements() == 1 {
        let a = at::<T>(buffer(op, &x)?, 0).ftz();
        match unique_buffer(y, &shape) {
            Ok(mut out) => {
                update_in_place(&mut out, |b: T| f(a, b.ftz()).ftz());
                return finish_bytes(U::DTYPE, shape, out);
            }
            Err(y) => return binary_into(op, &x, &y, shape, f),
        }
    }
    binary_into(op, &x, &y, shape, f)
}

/// The buffer of `t` to write over, when `t` has `shape` and nobody else
/// holds its buffer; `t` back otherwise. (Callers check the dtype is the
/// output's.)
fn unique_buffer(t: Tensor, shape: &[i64]) -> std::result::Result<BytesMut, Tensor> {
    if t.shape() != shape {
        return Err(t);
    }
    t.try_into_unique_buffer().map(|(_, _, buffer)| buffer)
}

/// A zero-filled output buffer for `n` values of `U`. Large ones come
/// zeroed from the allocator (fresh pages), so the fill costs nothing
/// extra; the kernels then overwrite it in fixed-size chunks, which the
/// compiler vectorizes where appending one value at a time it cannot.
pub(super) fn zeroed<U: Elem>(n: usize) -> Vec<u8> {
    vec![0u8; n.saturating_mul(U::SIZE)]
}

/// `out[i] = f(x[i], y[i])` over equal-length buffers.
#[inline(always)]
fn zip_into<T: Elem, U: Elem>(out: &mut [u8], xb: &[u8], yb: &[u8], f: impl Fn(T, T) -> U) {
    for ((o, a), b) in out
        .chunks_exact_mut(U::SIZE)
        .zip(xb.chunks_exact(T::SIZE))
        .zip(yb.chunks_exact(T::SIZE))
    {
        f(T::get(a), T::get(b)).set(o);
    }
}

/// `out[i] = f(x[i])`.
#[inline(always)]
pub(super) fn map_into<T: Elem, U: Elem>(out: &mut [u8], xb: &[u8], f: impl Fn(T) -> U) {
    for (o, a) in out.chunks_exact_mut(U::SIZE).zip(xb.chunks_exact(T::SIZE)) {
        f(T::get(a)).set(o);
    }
}

/// `buf[i] = f(buf[i], y[i])`, `T` and `U` of one size.
#[inline(always)]
fn zip_in_place<T: Elem, U: Elem>(buf: &mut [u8], yb: &[u8], f: impl Fn(T, T) -> U) {
    for (o, b) in buf.chunks_exact_mut(U::SIZE).zip(yb.chunks_exact(T::SIZE)) {
        f(T::get(o), T::get(b)).set(o);
    }
}

/// `buf[i] = f(buf[i])`, `T` and `U` of one size.
#[inline(always)]
fn update_in_place<T: Elem, U: Elem>(buf: &mut [u8], f: impl Fn(T) -> U) {
    for o in buf.chunks_exact_mut(U::SIZE) {
        f(T::get(o)).set(o);
    }
}

/// A tensor over a buffer written in place.
fn finish_bytes(dtype: DType, shape: Vec<i64>, data: BytesMut) -> Result<Tensor> {
    Tensor::new(dtype, shape, TensorData::Buffer(data.freeze()))
}

/// An elementwise unary op (denormals flushed, see [`Elem::ftz`]).
pub(super) fn unary<T: Elem, U: Elem>(op: &str, x: &Tensor, f: impl Fn(T) -> U) -> Result<Tensor> {
    unary_raw(op, x, |a: T| f(a.ftz()).ftz())
}

/// An elementwise unary op that keeps denormals (sign-bit ops: TF's `Neg`
/// and `Abs` do not flush).
pub(super) fn unary_raw<T: Elem, U: Elem>(
    op: &str,
    x: &Tensor,
    f: impl Fn(T) -> U,
) -> Result<Tensor> {
    expect_dtype(op, x, 0, T::DTYPE)?;
    let n = out_elements(op, U::DTYPE, x.shape())?;
    let mut out = zeroed::<U>(n);
    map_into(&mut out, buffer(op, x)?, f);
    finish(U::DTYPE, x.shape().to_vec(), out)
}

/// The single value of an integer (int32 or int64) input such as an axis or
/// a depth; callers check it is a scalar, each in its op's words.
pub(super) fn scalar_index(op: &str, what: &str, t: &Tensor) -> Result<i64> {
    index_values(op, what, t)?
        .first()
        .copied()
        .ok_or_else(|| invalid(op, format!("{what} is empty")))
}

/// The values of an int32 or int64 tensor, widened.
pub(super) fn index_values(op: &str, what: &str, t: &Tensor) -> Result<Vec<i64>> {
    let b = buffer(op, t)?;
    match t.dtype() {
        DType::Int32 => Ok(values::<i32>(b).map(i64::from).collect()),
        DType::Int64 => Ok(values::<i64>(b).collect()),
        other => Err(invalid(
            op,
            format!("{what} must be int32 or int64, got {other}"),
        )),
    }
}

/// Reads the dtype attribute `key` if the node has it and checks the input
/// agrees (graphs always carry it; hand-built test nodes may not).
pub(super) fn attr_dtype(attrs: &crate::attrs::NodeAttrs, key: &str) -> Result<Option<DType>> {
    if attrs.has(key) {
        attrs.dtype(key).map(Some)
    } else {
        Ok(None)
    }
}

pub(super) fn check_attr_dtype(
    op: &str,
    want: Option<DType>,
    t: &Tensor,
    index: usize,
) -> Result<()> {
    match want {
        Some(d) => expect_dtype(op, t, index, d),
        None => Ok(()),
    }
}

/// The inputs of a kernel as a fixed-size array, or TF's arity error.
pub(super) fn take<const N: usize>(op: &str, inputs: Vec<Tensor>) -> Result<[Tensor; N]> {
    inputs
        .try_into()
        .map_err(|v: Vec<Tensor>| invalid(op, format!("expected {N} inputs, got {}", v.len())))
}

/// Builds an output of any dtype by copying elements of one of two tensors
/// of that dtype (Select, SelectV2, OneHot): bytes for fixed-size dtypes,
/// shared strings otherwise.
pub(super) enum Picker<'a> {
    Fixed {
        a: &'a [u8],
        b: &'a [u8],
        size: usize,
        out: Vec<u8>,
    },
    Strings {
        a: &'a [Bytes],
        b: &'a [Bytes],
        out: Vec<Bytes>,
    },
}

impl<'a> Picker<'a> {
    /// `a` and `b` must have one dtype; `n` is the (size-checked) output
    /// element count.
    pub(super) fn new(a: &'a Tensor, b: &'a Tensor, n: usize) -> Self {
        match (a.data(), b.data(), a.dtype().size()) {
            (TensorData::Buffer(x), TensorData::Buffer(y), Some(size)) => Picker::Fixed {
                a: x,
                b: y,
                size,
                out: Vec::with_capacity(n.saturating_mul(size)),
            },
            (TensorData::Strings(x), TensorData::Strings(y), _) => Picker::Strings {
                a: x,
                b: y,
                out: Vec::with_capacity(n),
            },
            _ => Picker::Strings {
                a: &[],
                b: &[],
                out: Vec::new(),
            },
        }
    }

    /// Appends element `i` of `a` (if `first`) or of `b`.
    #[inline(always)]
    pub(super) fn push(&mut self, first: bool, i: usize) {
        match self {
            Picker::Fixed { a, b, size, out } => {
                let src = if first { a } else { b };
                if let Some(v) = src.get(i * *size..i * *size + *size) {
                    out.extend_from_slice(v);
                }
            }
            Picker::Strings { a, b, out } => {
                let src = if first { a } else { b };
                out.push(src.get(i).cloned().unwrap_or_default());
            }
        }
    }

    pub(super) fn finish(self, dtype: DType, shape: Vec<i64>) -> Result<Tensor> {
        match self {
            Picker::Fixed { out, .. } => finish(dtype, shape, out),
            Picker::Strings { out, .. } => Tensor::new(dtype, shape, TensorData::Strings(out)),
        }
    }
}

/// A shape seen around `axis`: elements before it, its length, elements
/// after it.
pub(super) fn split_at_axis(shape: &[i64], axis: usize) -> (usize, usize, usize) {
    let prod = |s: &[i64]| s.iter().map(|&d| d.max(0) as usize).product::<usize>();
    let before = shape.get(..axis).map_or(1, prod);
    let len = shape.get(axis).map_or(1, |&d| d.max(0) as usize);
    let after = shape.get(axis + 1..).map_or(1, prod);
    (before, len, after)
}
