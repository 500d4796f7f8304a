//! Slicing and stacking tensors along their first dimension: what
//! `from_tensor_slices`, `batch`, `unbatch` and `padded_batch` are made of.

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Element, Error, Result, Tensor};

/// Row `index` of `t` (shape `t.shape()[1..]`).
pub fn slice(t: &Tensor, index: usize) -> Result<Tensor> {
    let data = row_data(t, index..index + 1)?;
    Tensor::new(t.dtype(), t.shape()[1..].to_vec(), data)
}

/// Rows `rows` of `t` (along its first dimension), sharing its buffer.
pub fn slice_rows(t: &Tensor, rows: std::ops::Range<usize>) -> Result<Tensor> {
    let data = row_data(t, rows.clone())?;
    let mut shape = t.shape().to_vec();
    shape[0] = rows.len() as i64;
    Tensor::new(t.dtype(), shape, data)
}

/// The values of rows `rows` of `t`: a slice of its buffer, or a copy of
/// its strings.
fn row_data(t: &Tensor, rows: std::ops::Range<usize>) -> Result<TensorData> {
    let Some((&count, rest)) = t.shape().split_first() else {
        return Err(Error::InvalidArgument("cannot slice a scalar".into()));
    };
    if rows.start >= rows.end || rows.end as i64 > count {
        return Err(Error::InvalidArgument(format!(
            "slice {rows:?} out of range for {count} rows"
        )));
    }
    let row_elems: usize = rest.iter().map(|&d| d as usize).product();
    Ok(match t.data() {
        TensorData::Buffer(b) => {
            let size = t.dtype().size().unwrap_or(1);
            TensorData::Buffer(b.slice(rows.start * row_elems * size..rows.end * row_elems * size))
        }
        TensorData::Strings(s) => {
            TensorData::Strings(s[rows.start * row_elems..rows.end * row_elems].to_vec())
        }
    })
}

/// Stacks same-dtype, same-shape tensors into one with a new first dimension.
pub fn stack(parts: &[&Tensor]) -> Result<Tensor> {
    let Some(first) = parts.first() else {
        return Err(Error::InvalidArgument("cannot stack zero tensors".into()));
    };
    let mut shape = Vec::with_capacity(first.shape().len() + 1);
    shape.push(parts.len() as i64);
    shape.extend_from_slice(first.shape());
    let data = joined_data(parts);
    Tensor::new(first.dtype(), shape, data)
}

/// The tensors' values one after another, in the first one's kind (bytes
/// or strings): the data of a stack or a concatenation along the first
/// dimension, whose shape the caller knows.
pub fn joined_data(parts: &[&Tensor]) -> TensorData {
    match parts.first().map(|t| t.data()) {
        Some(TensorData::Strings(_)) => {
            let n = parts.iter().map(|t| t.num_elements() as usize).sum();
            let mut strings = Vec::with_capacity(n);
            for t in parts {
                if let TensorData::Strings(s) = t.data() {
                    strings.extend(s.iter().cloned());
                }
            }
            TensorData::Strings(strings)
        }
        _ => {
            let total: usize = parts.iter().map(|t| t.byte_size()).sum();
            let mut buf = super::buffer_pool::take(total);
            for t in parts {
                if let TensorData::Buffer(b) = t.data() {
                    buf.extend_from_slice(b);
                }
            }
            TensorData::Buffer(super::buffer_pool::freeze(buf))
        }
    }
}

/// Shape equality without a `memcmp` call per row: batching scalars compares
/// empty shapes a thousand times per batch, and the call was a quarter of
/// the pipeline thread's time.
#[inline]
fn same_shape(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Stacks elements component-wise; every element must have the same
/// structure, and each component the same dtype and shape.
pub fn stack_elements(op: &str, rows: &[Element]) -> Result<Element> {
    let first = &rows[0];
    let mut components = Vec::with_capacity(first.components.len());
    for (c, proto) in first.components.iter().enumerate() {
        let mut parts = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let Some(t) = row
                .components
                .get(c)
                .filter(|_| row.components.len() == first.components.len())
            else {
                return Err(Error::InvalidArgument(format!(
                    "{op}: cannot batch elements with different structures: element 0 has {} \
                     components but element {i} has {}",
                    first.components.len(),
                    row.components.len()
                )));
            };
            if t.dtype() != proto.dtype() {
                return Err(Error::InvalidArgument(format!(
                    "{op}: cannot batch tensors with different dtypes: component {c} of element 0 \
                     is {} {:?} but element {i} has {} {:?}",
                    proto.dtype(),
                    proto.shape(),
                    t.dtype(),
                    t.shape()
                )));
            }
            if !same_shape(t.shape(), proto.shape()) {
                // TensorFlow's words (and its shape notation, `[2,3]`).
                let dims = |s: &[i64]| {
                    let d: Vec<String> = s.iter().map(i64::to_string).collect();
                    format!("[{}]", d.join(","))
                };
                return Err(Error::InvalidArgument(format!(
                    "{op}: Cannot batch tensors with different shapes in component {c}. First \
                     element had shape {} and element {i} had shape {}.",
                    dims(proto.shape()),
                    dims(t.shape())
                )));
            }
            parts.push(t);
        }
        components.push(stack(&parts)?);
    }
    // A batch depends on the splits of every row (and keeps them in row
    // order, so `unbatch` can hand each row's back).
    let lineage = tfdata_core::Lineage::of_rows(rows.iter().map(|row| &row.lineage));
    Ok(Element::new(components).with_lineage(lineage))
}

/// Largest padded component `padded_batch` builds (a malformed or hostile
/// pipeline must not make a worker allocate without bound).
pub const MAX_PADDED_BYTES: u64 = 4 << 30;

/// `t` padded with `pad` (a scalar of its dtype) to `shape`, which must be
/// at least as large in every dimension.
pub fn pad_to(t: &Tensor, shape: &[i64], pad: &Tensor) -> Result<Tensor> {
    if t.shape() == shape {
        return Ok(t.clone());
    }
    if shape.len() != t.shape().len() || t.shape().iter().zip(shape).any(|(a, b)| a > b) {
        return Err(Error::InvalidArgument(format!(
            "padded_batch: component of shape {:?} does not fit the padded shape {shape:?}",
            t.shape()
        )));
    }
    let total = shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
        .filter(|&n| n.saturating_mul(t.dtype().size().unwrap_or(8) as u64) <= MAX_PADDED_BYTES)
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "padded_batch: padded shape {shape:?} is larger than the {MAX_PADDED_BYTES}-byte limit"
            ))
        })? as usize;
    let src_shape: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect();
    let dst_shape: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    // Copy row-major, one innermost run at a time.
    let inner = src_shape.last().copied().unwrap_or(1);
    let outer: usize = src_shape.iter().rev().skip(1).product();
    let dst_index = |flat_outer: usize| -> usize {
        // Map an outer index of the source to the destination's flat offset.
        let mut rem = flat_outer;
        let mut offset = 0usize;
        let mut stride = 1usize;
        let mut strides = vec![0usize; dst_shape.len()];
        for d in (0..dst_shape.len()).rev() {
            strides[d] = stride;
            stride *= dst_shape[d];
        }
        for d in (0..src_shape.len().saturating_sub(1)).rev() {
            let idx = rem % src_shape[d];
            rem /= src_shape[d];
            offset += idx * strides[d];
        }
        offset
    };
    match (t.data(), pad.data()) {
        (TensorData::Buffer(src), TensorData::Buffer(p)) => {
            let size = t.dtype().size().unwrap_or(1);
            let mut out = Vec::with_capacity(total * size);
            for _ in 0..total {
                out.extend_from_slice(p);
            }
            if inner > 0 {
                for o in 0..outer {
                    let dst = dst_index(o) * size;
                    let src_start = o * inner * size;
                    out[dst..dst + inner * size]
                        .copy_from_slice(&src[src_start..src_start + inner * size]);
                }
            }
            Tensor::new(t.dtype(), shape.to_vec(), TensorData::Buffer(out.into()))
        }
        (TensorData::Strings(src), TensorData::Strings(p)) => {
            let fill = p.first().cloned().unwrap_or_default();
            let mut out: Vec<Bytes> = vec![fill; total];
            if inner > 0 {
                for o in 0..outer {
                    let dst = dst_index(o);
                    out[dst..dst + inner].clone_from_slice(&src[o * inner..(o + 1) * inner]);
                }
            }
            Tensor::new(t.dtype(), shape.to_vec(), TensorData::Strings(out))
        }
        _ => Err(Error::InvalidArgument(format!(
            "padded_batch: padding value of dtype {} does not match component dtype {}",
            pad.dtype(),
            t.dtype()
        ))),
    }
}

/// The default padding value of a dtype: zero, or the empty string.
pub fn zero_of(dtype: DType) -> Result<Tensor> {
    match dtype.size() {
        None => Ok(Tensor::scalar_string(Bytes::new())),
        Some(size) => Tensor::new(dtype, vec![], TensorData::Buffer(vec![0u8; size].into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_stack_and_pad() {
        let t = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6], vec![3, 2]).unwrap();
        let row = slice(&t, 1).unwrap();
        assert_eq!(row.to_vec::<i32>().unwrap(), vec![3, 4]);
        let back = stack(&[&slice(&t, 0).unwrap(), &row]).unwrap();
        assert_eq!(back.shape(), &[2, 2]);
        assert_eq!(back.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4]);

        let padded = pad_to(&t, &[4, 3], &Tensor::scalar(-1i32)).unwrap();
        assert_eq!(
            padded.to_vec::<i32>().unwrap(),
            vec![1, 2, -1, 3, 4, -1, 5, 6, -1, -1, -1, -1]
        );
        let s = Tensor::strings(vec!["a".into(), "b".into()], vec![2]).unwrap();
        let p = pad_to(&s, &[3], &zero_of(DType::String).unwrap()).unwrap();
        assert_eq!(p.string_values().unwrap().len(), 3);
        assert!(pad_to(&t, &[2, 2], &Tensor::scalar(0i32)).is_err());
    }
}
