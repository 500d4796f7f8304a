//! Layout ops that make or reshape a tensor's contents: tiling, filling
//! (`Fill`, `Range`, `ZerosLike`, `OnesLike`), reversing, `Where`, and
//! broadcasting. Like `shape.rs`, they move elements over bytes or string
//! handles ([`super::layout`]); the few that read values do so by dtype
//! tables. Padding has its own module ([`super::pad`]), and so do the ops
//! that pass their input through ([`super::pass_through`]).

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, NativeType, Result, Tensor};

use super::layout::{
    Axis, Out, Src, checked_elements, err, int_tensor, ints, shape_str, strides, take, vector_ints,
    view,
};
use super::{Compute, KernelDef, check_size, one_output, y_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "Tile",
        outputs: one_output,
        build: build_tile,
    },
    KernelDef {
        op: "Fill",
        outputs: one_output,
        build: build_fill,
    },
    KernelDef {
        op: "Range",
        outputs: one_output,
        build: build_range,
    },
    KernelDef {
        op: "ZerosLike",
        outputs: y_output,
        build: build_zeros_like,
    },
    KernelDef {
        op: "OnesLike",
        outputs: y_output,
        build: build_ones_like,
    },
    KernelDef {
        op: "ReverseV2",
        outputs: one_output,
        build: build_reverse_v2,
    },
    KernelDef {
        op: "Reverse",
        outputs: one_output,
        build: build_reverse,
    },
    KernelDef {
        op: "Where",
        outputs: where_outputs,
        build: build_where,
    },
    KernelDef {
        op: "BroadcastTo",
        outputs: one_output,
        build: build_broadcast_to,
    },
    KernelDef {
        op: "BroadcastArgs",
        outputs: r0_output,
        build: build_broadcast_args,
    },
];

fn build_tile(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [x, multiples] = take("Tile", inputs)?;
        let multiples = vector_ints("Tile", "multiples", &multiples)?;
        let rank = x.shape().len();
        if multiples.len() != rank {
            return Err(err(
                "Tile",
                format!(
                    "Expected multiples argument to be a vector of length {rank} but got length {}",
                    multiples.len()
                ),
            ));
        }
        let in_strides = strides(x.shape());
        let mut axes = Vec::with_capacity(2 * rank);
        let mut shape = Vec::with_capacity(rank);
        for (d, &m) in multiples.iter().enumerate() {
            if m < 0 {
                return Err(err(
                    "Tile",
                    format!("Expected multiples[{d}] >= 0, but got {m}"),
                ));
            }
            let size = x.shape()[d];
            shape.push(
                size.checked_mul(m)
                    .ok_or_else(|| err("Tile", "the output is too large"))?,
            );
            // Repeating the whole dimension `m` times is a stride-0 axis
            // outside it.
            axes.push(Axis { n: m, stride: 0 });
            axes.push(Axis {
                n: size,
                stride: in_strides[d],
            });
        }
        Ok(vec![view("Tile", &x, 0, &axes, shape)?])
    }))
}

/// Dims from a shape input, which must be a vector of non-negative values.
fn dims_input(op: &str, what: &str, t: &Tensor) -> Result<Vec<i64>> {
    if t.shape().len() != 1 {
        return Err(err(
            op,
            format!(
                "{what} must be a vector, got shape {}",
                shape_str(t.shape())
            ),
        ));
    }
    let dims = ints(op, what, t)?;
    if let Some(d) = dims.iter().find(|&&d| d < 0) {
        return Err(err(op, format!("Dimension {d} must be >= 0")));
    }
    Ok(dims)
}

fn build_fill(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [dims, value] = take("Fill", inputs)?;
        let dims = dims_input("Fill", "dims", &dims)?;
        if !value.shape().is_empty() {
            return Err(err(
                "Fill",
                format!(
                    "value must represent a scalar, got shape {}",
                    shape_str(value.shape())
                ),
            ));
        }
        let n = checked_elements("Fill", value.dtype(), &dims)?;
        let mut out = Out::new("Fill", value.dtype(), n)?;
        out.repeat(&Src::of(&value), 0, n as usize)?;
        Ok(vec![out.finish(value.dtype(), dims)?])
    }))
}

fn range_scalar<T: NativeType>(name: &str, t: &Tensor) -> Result<T> {
    if !t.shape().is_empty() {
        return Err(err(
            "Range",
            format!(
                "{name} must be a scalar, not shape {}",
                shape_str(t.shape())
            ),
        ));
    }
    t.to_scalar::<T>()
        .map_err(|e| err("Range", format!("{name}: {e}")))
}

fn range_check<T: PartialOrd + Default + std::fmt::Display>(
    start: T,
    limit: T,
    delta: T,
) -> Result<()> {
    let zero = T::default();
    if delta == zero {
        return Err(err("Range", format!("Requires delta != 0: {delta}")));
    }
    if delta > zero && start > limit {
        return Err(err(
            "Range",
            format!("Requires start <= limit when delta > 0: {start}/{limit}"),
        ));
    }
    if delta < zero && start < limit {
        return Err(err(
            "Range",
            format!("Requires start >= limit when delta < 0: {start}/{limit}"),
        ));
    }
    Ok(())
}

macro_rules! range_ints {
    ($s:expr, $l:expr, $d:expr, $($dt:ident => $t:ty),*) => {
        match $s.dtype() {
            $(DType::$dt => {
                let (start, limit, delta) = (
                    range_scalar::<$t>("start", $s)?,
                    range_scalar::<$t>("limit", $l)?,
                    range_scalar::<$t>("delta", $d)?,
                );
                range_check(start, limit, delta)?;
                let (s, l, d) = (i128::from(start), i128::from(limit), i128::from(delta));
                // TensorFlow's integer size: ceil(|limit - start| / |delta|).
                let size = ((l - s).abs() + d.abs() - 1) / d.abs();
                let size = u64::try_from(size).map_err(|_| err("Range", "the output is too large"))?;
                check_size("Range", DType::$dt, size)?;
                // Every value lies between start and limit, so it fits the
                // dtype, and the dtype's wrapping arithmetic computes it
                // exactly even where `i * delta` alone would overflow.
                let values: Vec<$t> = (0..size)
                    .map(|i| start.wrapping_add((i as $t).wrapping_mul(delta)))
                    .collect();
                return Tensor::from_slice(&values, vec![size as i64]);
            })*
            _ => {}
        }
    };
}

macro_rules! range_floats {
    ($s:expr, $l:expr, $d:expr, $($dt:ident => $t:ty),*) => {
        match $s.dtype() {
            $(DType::$dt => {
                let (start, limit, delta) = (
                    range_scalar::<$t>("start", $s)?,
                    range_scalar::<$t>("limit", $l)?,
                    range_scalar::<$t>("delta", $d)?,
                );
                range_check(start, limit, delta)?;
                // TensorFlow's float size: ceil(|(limit - start) / delta|),
                // computed in the dtype; values are start + i * delta.
                let size = ((limit - start) / delta).abs().ceil();
                if size.is_nan() || size >= 9.2e18 {
                    return Err(err("Range", format!("Requires ((limit - start) / delta) <= {}", i64::MAX)));
                }
                let size = size as u64;
                check_size("Range", DType::$dt, size)?;
                let values: Vec<$t> = (0..size).map(|i| start + (i as $t) * delta).collect();
                return Tensor::from_slice(&values, vec![size as i64]);
            })*
            _ => {}
        }
    };
}

fn range(start: &Tensor, limit: &Tensor, delta: &Tensor) -> Result<Tensor> {
    if start.dtype() != limit.dtype() || start.dtype() != delta.dtype() {
        return Err(err(
            "Range",
            "start, limit and delta must have the same dtype",
        ));
    }
    range_ints!(start, limit, delta, Int8 => i8, Int16 => i16, Int32 => i32, Int64 => i64,
        UInt16 => u16, UInt32 => u32, UInt64 => u64);
    range_floats!(start, limit, delta, Float => f32, Double => f64);
    Err(err("Range", format!("unsupported dtype {}", start.dtype())))
}

fn build_range(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [start, limit, delta] = take("Range", inputs)?;
        Ok(vec![range(&start, &limit, &delta)?])
    }))
}

/// A tensor of `shape` with every element `one`'s bytes (or `string`).
fn constant_like(op: &str, x: &Tensor, one: &[u8], string: Bytes) -> Result<Tensor> {
    let n = checked_elements(op, x.dtype(), x.shape())?;
    let value = match x.dtype() {
        DType::String => Tensor::scalar_string(string),
        d => Tensor::new(d, vec![], TensorData::Buffer(Bytes::copy_from_slice(one)))?,
    };
    let mut out = Out::new(op, x.dtype(), n)?;
    out.repeat(&Src::of(&value), 0, n as usize)?;
    out.finish(x.dtype(), x.shape().to_vec())
}

fn build_zeros_like(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [x] = take("ZerosLike", inputs)?;
        let zero = vec![0u8; x.dtype().size().unwrap_or(0)];
        Ok(vec![constant_like("ZerosLike", &x, &zero, Bytes::new())?])
    }))
}

/// The little-endian bytes of one, for the dtypes `OnesLike` allows.
fn one_bytes(dtype: DType) -> Option<Vec<u8>> {
    use DType::*;
    Some(match dtype {
        Float => 1f32.to_le_bytes().to_vec(),
        Double => 1f64.to_le_bytes().to_vec(),
        Half => 0x3C00u16.to_le_bytes().to_vec(),
        BFloat16 => 0x3F80u16.to_le_bytes().to_vec(),
        Complex64 => [1f32.to_le_bytes(), 0f32.to_le_bytes()].concat(),
        Complex128 => [1f64.to_le_bytes(), 0f64.to_le_bytes()].concat(),
        Int8 | UInt8 | Int16 | UInt16 | Int32 | UInt32 | Int64 | UInt64 | Bool => {
            let mut b = vec![0u8; dtype.size()?];
            b[0] = 1;
            b
        }
        _ => return None,
    })
}

fn build_ones_like(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [x] = take("OnesLike", inputs)?;
        let one = one_bytes(x.dtype())
            .ok_or_else(|| err("OnesLike", format!("unsupported dtype {}", x.dtype())))?;
        Ok(vec![constant_like("OnesLike", &x, &one, Bytes::new())?])
    }))
}

/// `x` reversed along the dimensions flagged in `flip`.
fn reverse(op: &str, x: &Tensor, flip: &[bool]) -> Result<Tensor> {
    let in_strides = strides(x.shape());
    let mut base = 0i64;
    let axes: Vec<Axis> = x
        .shape()
        .iter()
        .zip(&in_strides)
        .zip(flip)
        .map(|((&n, &s), &f)| {
            if f && n > 0 {
                base = base.saturating_add((n - 1).saturating_mul(s));
                Axis { n, stride: -s }
            } else {
                Axis { n, stride: s }
            }
        })
        .collect();
    view(op, x, base, &axes, x.shape().to_vec())
}

fn build_reverse_v2(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [x, axes] = take("ReverseV2", inputs)?;
        let axes = vector_ints("ReverseV2", "axis", &axes)?;
        let rank = x.shape().len() as i64;
        let mut flip = vec![false; x.shape().len()];
        for (i, &a) in axes.iter().enumerate() {
            if a < -rank || a >= rank {
                return Err(err(
                    "ReverseV2",
                    format!("'axis'[{i}] = {a} is out of valid range [0, {}", rank - 1),
                ));
            }
            let a = if a < 0 { a + rank } else { a };
            if std::mem::replace(&mut flip[a as usize], true) {
                return Err(err(
                    "ReverseV2",
                    format!("axis {a} specified more than once."),
                ));
            }
        }
        Ok(vec![reverse("ReverseV2", &x, &flip)?])
    }))
}

fn build_reverse(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [x, dims] = take("Reverse", inputs)?;
        let flip = match (dims.dtype(), dims.data()) {
            (DType::Bool, TensorData::Buffer(b)) if dims.shape().len() == 1 => {
                b.iter().map(|&v| v != 0).collect::<Vec<_>>()
            }
            _ => {
                return Err(err(
                    "Reverse",
                    format!(
                        "'dims' must be 1-dimension, not {}",
                        shape_str(dims.shape())
                    ),
                ));
            }
        };
        if flip.len() != x.shape().len() {
            return Err(err(
                "Reverse",
                format!(
                    "'dims' must have the same number of values as 'input' has dimensions. 'input' has {}'dims' has {} values",
                    x.shape().len(),
                    flip.len()
                ),
            ));
        }
        Ok(vec![reverse("Reverse", &x, &flip)?])
    }))
}

/// How `Where` tells zero from non-zero over an element's bytes: floating
/// point components ignore their sign bit (-0.0 is zero; NaN is not).
fn float_component(dtype: DType) -> Option<usize> {
    use DType::*;
    match dtype {
        Half | BFloat16 => Some(2),
        Float | Complex64 => Some(4),
        Double | Complex128 => Some(8),
        _ => None,
    }
}

fn build_where(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [x] = take("Where", inputs)?;
        let (Some(size), TensorData::Buffer(bytes)) = (x.dtype().size(), x.data()) else {
            return Err(err("Where", format!("unsupported dtype {}", x.dtype())));
        };
        let component = float_component(x.dtype());
        let nonzero = |e: &[u8]| match component {
            Some(c) => e.chunks_exact(c).any(|f| {
                f.iter()
                    .enumerate()
                    .any(|(i, &b)| if i + 1 == c { b & 0x7f != 0 } else { b != 0 })
            }),
            None => e.iter().any(|&b| b != 0),
        };
        let rank = x.shape().len();
        if rank == 0 {
            return Err(err("Where", "WhereOp : Unhandled input dimensions: 0"));
        }
        let count = bytes.chunks_exact(size).filter(|e| nonzero(e)).count() as u64;
        check_size("Where", DType::Int64, count.saturating_mul(rank as u64))?;
        let mut coords: Vec<u8> = Vec::with_capacity(count as usize * rank * 8);
        let mut index = vec![0i64; rank];
        for e in bytes.chunks_exact(size) {
            if nonzero(e) {
                for &i in &index {
                    coords.extend_from_slice(&i.to_le_bytes());
                }
            }
            for d in (0..rank).rev() {
                index[d] += 1;
                if index[d] < x.shape()[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        Ok(vec![Tensor::new(
            DType::Int64,
            vec![count as i64, rank as i64],
            TensorData::Buffer(coords.into()),
        )?])
    }))
}

/// NumPy broadcasting of two shapes, or `None` if they are incompatible.
fn broadcast_shapes(a: &[i64], b: &[i64]) -> Option<Vec<i64>> {
    let rank = a.len().max(b.len());
    let at = |s: &[i64], i: usize| {
        if i < rank - s.len() {
            1
        } else {
            s[i - (rank - s.len())]
        }
    };
    (0..rank)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

fn build_broadcast_to(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [x, shape_t] = take("BroadcastTo", inputs)?;
        let shape = dims_input("BroadcastTo", "shape", &shape_t)?;
        let (in_shape, rank) = (x.shape(), shape.len());
        if in_shape.len() > rank {
            return Err(err(
                "BroadcastTo",
                format!(
                    "Rank of input ({}) must be no greater than rank of output shape ({rank}).",
                    in_shape.len()
                ),
            ));
        }
        let lead = rank - in_shape.len();
        let in_strides = strides(in_shape);
        let mut axes: Vec<Axis> = shape[..lead]
            .iter()
            .map(|&n| Axis { n, stride: 0 })
            .collect();
        for (i, (&have, &want)) in in_shape.iter().zip(&shape[lead..]).enumerate() {
            if have != want && have != 1 {
                return Err(err(
                    "BroadcastTo",
                    format!(
                        "Incompatible shapes: {} vs. {}",
                        shape_str(in_shape),
                        shape_str(&shape)
                    ),
                ));
            }
            axes.push(Axis {
                n: want,
                stride: if have == want { in_strides[i] } else { 0 },
            });
        }
        Ok(vec![view("BroadcastTo", &x, 0, &axes, shape)?])
    }))
}

fn build_broadcast_args(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [s0, s1] = take("BroadcastArgs", inputs)?;
        if s0.dtype() != s1.dtype() {
            return Err(err("BroadcastArgs", "s0 and s1 must have the same dtype"));
        }
        let a = vector_ints("BroadcastArgs", "s0", &s0)?;
        let b = vector_ints("BroadcastArgs", "s1", &s1)?;
        let r = broadcast_shapes(&a, &b).ok_or_else(|| {
            err(
                "BroadcastArgs",
                format!(
                    "Incompatible shapes: {} vs. {}",
                    shape_str(&a),
                    shape_str(&b)
                ),
            )
        })?;
        Ok(vec![int_tensor(
            "BroadcastArgs",
            s0.dtype(),
            &r,
            vec![r.len() as i64],
        )?])
    }))
}

fn where_outputs(_: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("index", 1)])
}

fn r0_output(_: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("r0", 1)])
}
