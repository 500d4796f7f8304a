//! Ops that pick elements by comparing values: `TopKV2` (the `k` largest
//! along the last axis; TensorFlow 2.21 refuses the old `TopK` in graphs) and `Unique`, `UniqueV2`,
//! `UniqueWithCounts`, `UniqueWithCountsV2` (first occurrences, in order),
//! with TensorFlow 2.21's CPU semantics. Values are compared, never
//! computed: outputs copy the input's bytes, so float16 and bfloat16 are
//! taken too.
//!
//! `TopKV2`: larger values first, equal values (0.0 and -0.0 are equal) by
//! lower index. Differences from TensorFlow: with `sorted=false` this
//! returns the sorted order (TensorFlow returns the same elements in the
//! order of its selection heap, which its docs leave unspecified); NaN is
//! taken as larger than every number, where TensorFlow's comparisons make
//! NaN's place depend on its algorithm (and on `k`).
//!
//! `Unique`: elements (or slices along `axis`) are equal when every value
//! compares equal, as C++'s `==` under TF's denormals-are-zero: for float
//! and double, 0.0, -0.0 and denormals are one value (the first seen is
//! kept); float16 and bfloat16 are hashed by their bits, so there -0.0 and
//! 0.0 stay apart. A NaN never equals anything, so each NaN (each slice
//! holding one) is its own unique value. `TopKV2` compares float, double
//! and bfloat16 with denormals as zero too.

use std::cmp::Ordering;
use std::collections::HashMap;

use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Result, Tensor};

use super::layout::{Out, Src, err, int_tensor, shape_str, take};
use super::{Compute, KernelDef, OutputArgs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "TopKV2",
        outputs: topk_outputs,
        build: build_topk,
    },
    KernelDef {
        op: "Unique",
        outputs: unique_outputs,
        build: |a| build_unique(a, false, false),
    },
    KernelDef {
        op: "UniqueV2",
        outputs: unique_outputs,
        build: |a| build_unique(a, true, false),
    },
    KernelDef {
        op: "UniqueWithCounts",
        outputs: counted_outputs,
        build: |a| build_unique(a, false, true),
    },
    KernelDef {
        op: "UniqueWithCountsV2",
        outputs: counted_outputs,
        build: |a| build_unique(a, true, true),
    },
];

fn topk_outputs(_: &NodeAttrs) -> Result<OutputArgs> {
    Ok(vec![("values", 1), ("indices", 1)])
}

fn unique_outputs(_: &NodeAttrs) -> Result<OutputArgs> {
    Ok(vec![("y", 1), ("idx", 1)])
}

fn counted_outputs(_: &NodeAttrs) -> Result<OutputArgs> {
    Ok(vec![("y", 1), ("idx", 1), ("count", 1)])
}

/// The dtypes TensorFlow registers both kernels for (its real number types).
fn real(d: DType) -> bool {
    use DType::*;
    matches!(
        d,
        Float
            | Double
            | Half
            | BFloat16
            | Int8
            | Int16
            | Int32
            | Int64
            | UInt8
            | UInt16
            | UInt32
            | UInt64
    )
}

/// One element's value for ordering: floats widened exactly to f64,
/// integers to i128.
#[derive(Clone, Copy, PartialEq)]
enum Key {
    F(f64),
    I(i128),
}

fn half_to_f64(h: u16) -> f64 {
    let (sign, exp, man) = ((h >> 15) & 1, (h >> 10) & 0x1f, h & 0x3ff);
    let v = match exp {
        0 => f64::from(man) * 2f64.powi(-24),
        31 if man == 0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + f64::from(man) / 1024.0) * 2f64.powi(i32::from(e) - 15),
    };
    if sign == 1 { -v } else { v }
}

/// Every element of a real-number tensor as a [`Key`].
fn keys(t: &Tensor) -> Vec<Key> {
    let TensorData::Buffer(b) = t.data() else {
        return Vec::new();
    };
    let size = t.dtype().size().unwrap_or(1);
    b.chunks_exact(size)
        .map(|c| {
            let mut raw = [0u8; 8];
            raw[..size].copy_from_slice(c);
            let u = u64::from_le_bytes(raw);
            // TF compares float, double and bfloat16 (as float) with
            // denormals taken as zero; a float16's converts to a normal float.
            let daz = |v: f64| if v.is_subnormal() { 0.0 } else { v };
            let daz32 = |v: f32| f64::from(if v.is_subnormal() { 0.0 } else { v });
            match t.dtype() {
                DType::Float => Key::F(daz32(f32::from_bits(u as u32))),
                DType::Double => Key::F(daz(f64::from_bits(u))),
                DType::Half => Key::F(half_to_f64(u as u16)),
                DType::BFloat16 => Key::F(daz32(f32::from_bits((u as u32) << 16))),
                DType::Int8 => Key::I(i128::from(u as u8 as i8)),
                DType::Int16 => Key::I(i128::from(u as u16 as i16)),
                DType::Int32 => Key::I(i128::from(u as u32 as i32)),
                DType::Int64 => Key::I(i128::from(u as i64)),
                _ => Key::I(i128::from(u)),
            }
        })
        .collect()
}

/// Descending order, NaN first; `Equal` for equal values (0.0 and -0.0).
fn descending(a: Key, b: Key) -> Ordering {
    match (a, b) {
        (Key::I(x), Key::I(y)) => y.cmp(&x),
        (Key::F(x), Key::F(y)) => match (x.is_nan(), y.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            _ => y.partial_cmp(&x).unwrap_or(Ordering::Equal),
        },
        _ => Ordering::Equal,
    }
}

fn build_topk(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    let index_type = if attrs.has("index_type") {
        attrs.dtype("index_type")?
    } else {
        DType::Int32
    };
    if !matches!(index_type, DType::Int16 | DType::Int32 | DType::Int64) {
        return Err(attrs.error(format!(
            "index_type must be int16, int32 or int64, got {index_type}"
        )));
    }
    if attrs.has("T") {
        let t = attrs.dtype("T")?;
        if !real(t) {
            return Err(attrs.error(super::numeric::unsupported(&op, t)));
        }
    }
    // `sorted` changes only the order TensorFlow leaves unspecified.
    attrs.bool_or("sorted", true)?;
    Ok(Box::new(move |inputs| {
        let [input, k] = take::<2>(&op, inputs)?;
        if !k.shape().is_empty() {
            return Err(err(
                &op,
                format!("k must be scalar, got shape {}", shape_str(k.shape())),
            ));
        }
        let k = super::layout::ints(&op, "k", &k)?
            .first()
            .copied()
            .unwrap_or(0);
        topk(&op, &input, k, index_type)
    }))
}

fn topk(op: &str, input: &Tensor, k: i64, index_type: DType) -> Result<Vec<Tensor>> {
    if !real(input.dtype()) {
        return Err(super::numeric::unsupported(op, input.dtype()));
    }
    if k < 0 {
        return Err(err(op, format!("Need k >= 0, got {k}")));
    }
    let Some(&cols) = input.shape().last() else {
        return Err(err(
            op,
            format!(
                "input must be >= 1-D, got shape {}",
                shape_str(input.shape())
            ),
        ));
    };
    if cols < k {
        return Err(err(
            op,
            format!("input must have at least k columns. Had {cols}, needed {k}"),
        ));
    }
    let mut shape = input.shape().to_vec();
    if let Some(last) = shape.last_mut() {
        *last = k;
    }
    let (cols, k) = (cols as usize, k as usize);
    let rows = (input.num_elements() as usize)
        .checked_div(cols)
        .unwrap_or(0);
    let elements = super::layout::checked_elements(op, input.dtype(), &shape)?;
    let src = Src::of(input);
    let mut values = Out::new(op, input.dtype(), elements)?;
    let mut indices: Vec<i64> = Vec::with_capacity(elements as usize);
    if k > 0 {
        let all = keys(input);
        let mut order: Vec<usize> = Vec::with_capacity(cols);
        for r in 0..rows {
            let row = &all[r * cols..(r + 1) * cols];
            order.clear();
            order.extend(0..cols);
            // Stable: equal values keep index order.
            order.sort_by(|&a, &b| descending(row[a], row[b]));
            for &c in &order[..k] {
                values.push(&src, r * cols + c, 1)?;
                indices.push(c as i64);
            }
        }
    }
    let values = values.finish(input.dtype(), shape.clone())?;
    let indices = match index_type {
        DType::Int16 => {
            let narrow: Vec<i16> = indices.iter().map(|&i| i as i16).collect();
            Tensor::from_slice(&narrow, shape)?
        }
        d => int_tensor(op, d, &indices, shape)?,
    };
    Ok(vec![values, indices])
}

fn build_unique(attrs: &NodeAttrs, v2: bool, counts: bool) -> Result<Compute> {
    let op = attrs.op.to_string();
    let out_idx = if attrs.has("out_idx") {
        attrs.dtype("out_idx")?
    } else {
        DType::Int32
    };
    if !matches!(out_idx, DType::Int32 | DType::Int64) {
        return Err(attrs.error(format!("out_idx must be int32 or int64, got {out_idx}")));
    }
    Ok(Box::new(move |inputs| {
        let (x, axis) = if v2 {
            let [x, axis] = take::<2>(&op, inputs)?;
            (x, Some(axis))
        } else {
            let [x] = take::<1>(&op, inputs)?;
            (x, None)
        };
        unique(&op, &x, axis.as_ref(), out_idx, counts)
    }))
}

/// The axis to deduplicate along, as TensorFlow reads `UniqueV2`'s `axis`.
fn unique_axis(op: &str, x: &Tensor, axis: Option<&Tensor>) -> Result<usize> {
    let vector = || {
        if x.shape().len() == 1 {
            Ok(0)
        } else {
            Err(err(op, "unique expects a 1D vector."))
        }
    };
    let Some(axis) = axis else {
        return vector();
    };
    if axis.shape().len() != 1 {
        return Err(err(op, "axis expects a 1D vector."));
    }
    if axis.num_elements() > 1 {
        return Err(err(
            op,
            "axis does not support input tensors larger than 1 elements",
        ));
    }
    if axis.num_elements() == 0 {
        return vector();
    }
    if !matches!(axis.dtype(), DType::Int32 | DType::Int64) {
        return Err(err(
            op,
            format!(
                "axis tensor should be int32 or int64, but got {}",
                axis.dtype()
            ),
        ));
    }
    let rank = x.shape().len() as i64;
    let a = super::layout::ints(op, "axis", axis)?
        .first()
        .copied()
        .unwrap_or(0);
    let a = if a < 0 { a + rank } else { a };
    if !(0..rank).contains(&a) {
        return Err(err(op, format!("axis has to be between [0, {rank})")));
    }
    Ok(a as usize)
}

/// A slice's identity under C++ `==`: its values' canonical bytes (-0.0 as
/// 0.0), or `None` when it holds a NaN (equal to nothing).
fn slice_key(x: &Tensor, src: &Src, elems: &mut dyn Iterator<Item = usize>) -> Option<Vec<u8>> {
    let mut key = Vec::new();
    match src {
        Src::Strings(s) => {
            for i in elems {
                let b = s.get(i).map_or(&[][..], |b| &b[..]);
                key.extend_from_slice(&(b.len() as u64).to_le_bytes());
                key.extend_from_slice(b);
            }
        }
        Src::Fixed { bytes, size } => {
            for i in elems {
                let c = bytes.get(i * size..(i + 1) * size).unwrap_or(&[]);
                let mut raw = [0u8; 8];
                raw[..c.len()].copy_from_slice(c);
                let u = u64::from_le_bytes(raw);
                // float and double hash and compare as C++ does under DAZ:
                // -0.0, 0.0 and denormals are one value. float16 and bfloat16
                // hash their bits, so those stay apart.
                let (nan, zero) = match x.dtype() {
                    DType::Float => {
                        let v = f32::from_bits(u as u32);
                        (v.is_nan(), v == 0.0 || v.is_subnormal())
                    }
                    DType::Double => {
                        let v = f64::from_bits(u);
                        (v.is_nan(), v == 0.0 || v.is_subnormal())
                    }
                    DType::Half => (u & 0x7c00 == 0x7c00 && u & 0x3ff != 0, false),
                    DType::BFloat16 => (u & 0x7f80 == 0x7f80 && u & 0x7f != 0, false),
                    _ => (false, false),
                };
                if nan {
                    return None;
                }
                if zero {
                    key.extend(std::iter::repeat_n(0u8, *size));
                } else {
                    key.extend_from_slice(c);
                }
            }
        }
    }
    Some(key)
}

fn unique(
    op: &str,
    x: &Tensor,
    axis: Option<&Tensor>,
    out_idx: DType,
    counts: bool,
) -> Result<Vec<Tensor>> {
    if !real(x.dtype()) && !matches!(x.dtype(), DType::String | DType::Bool) {
        return Err(super::numeric::unsupported(op, x.dtype()));
    }
    let axis = unique_axis(op, x, axis)?;
    let shape = x.shape();
    let dim = |s: &[i64]| s.iter().map(|&d| d.max(0) as usize).product::<usize>();
    let (outer, n, inner) = (
        dim(&shape[..axis]),
        shape[axis].max(0) as usize,
        dim(&shape[axis + 1..]),
    );
    let src = Src::of(x);
    let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut firsts: Vec<usize> = Vec::new();
    let mut idx: Vec<i64> = Vec::with_capacity(n);
    for j in 0..n {
        let mut elems = (0..outer).flat_map(|o| (0..inner).map(move |i| (o * n + j) * inner + i));
        let u = match slice_key(x, &src, &mut elems) {
            Some(key) => *seen.entry(key).or_insert_with(|| {
                firsts.push(j);
                firsts.len() - 1
            }),
            None => {
                firsts.push(j);
                firsts.len() - 1
            }
        };
        idx.push(u as i64);
    }
    let mut out_shape = shape.to_vec();
    out_shape[axis] = firsts.len() as i64;
    let elements = super::layout::checked_elements(op, x.dtype(), &out_shape)?;
    let mut y = Out::new(op, x.dtype(), elements)?;
    if inner > 0 {
        for o in 0..outer {
            for &j in &firsts {
                y.push(&src, (o * n + j) * inner, inner)?;
            }
        }
    }
    let mut out = vec![
        y.finish(x.dtype(), out_shape)?,
        int_tensor(op, out_idx, &idx, vec![n as i64])?,
    ];
    if counts {
        let mut c = vec![0i64; firsts.len()];
        for &u in &idx {
            c[u as usize] += 1;
        }
        out.push(int_tensor(op, out_idx, &c, vec![firsts.len() as i64])?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testing::run;
    use bytes::Bytes;
    use tfdata_core::Tensor;

    #[test]
    fn top_k_breaks_ties_by_index() {
        let x = Tensor::vector(&[1.0f32, 3.0, -0.0, 3.0, 0.0]);
        let out = run("TopKV2", &[], vec![x.clone(), Tensor::scalar(4i32)]).unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![3.0, 3.0, 1.0, -0.0]);
        assert_eq!(out[1].to_vec::<i32>().unwrap(), vec![1, 3, 0, 2]);
        let out = run("TopKV2", &[], vec![x, Tensor::scalar(6i64)]);
        assert!(out.is_err());
    }

    #[test]
    fn unique_keeps_first_occurrences() {
        let x = Tensor::vector(&[-0.0f32, 0.0, f32::NAN, f32::NAN, 2.0]);
        let out = run("UniqueWithCounts", &[], vec![x]).unwrap();
        assert_eq!(out[0].num_elements(), 4);
        assert_eq!(out[1].to_vec::<i32>().unwrap(), vec![0, 0, 1, 2, 3]);
        assert_eq!(out[2].to_vec::<i32>().unwrap(), vec![2, 1, 1, 1]);
        let s = Tensor::strings(
            vec![Bytes::from("b"), Bytes::from("a"), Bytes::from("b")],
            vec![3],
        )
        .unwrap();
        let out = run("Unique", &[], vec![s]).unwrap();
        assert_eq!(out[1].to_vec::<i32>().unwrap(), vec![0, 1, 0]);
    }
}
