//! A sparse tensor as three serialized `TensorProto`s, and back.
//!
//! `SerializeSparse` with `out_type = string` is TensorFlow's own bytes:
//! each of `indices`, `values`, `dense_shape` in the "tensor content" form
//! (`tensor_content` holding the little-endian values, or a string list).
//! With `out_type = variant` TensorFlow holds the three tensors in a
//! `DT_VARIANT` tensor, which tfdata's dense tensors cannot: the same
//! string form is carried instead (see the module docs of `super`), and
//! the deserializers read it whichever type the graph declares.

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;
use tfdata_core::element::{shape_proto, tensor_from_proto};
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Result, Tensor};
use tfdata_proto::tensorflow::{TensorProto, VariantTensorDataProto};

use super::{Indices, gather, indices_of, int64s, invalid, shape_str, vector_of};
use crate::attrs::NodeAttrs;
use crate::kernels::Compute;
use crate::kernels::layout::take;

/// `t` as TensorFlow's `AsProtoTensorContent` serializes it.
pub(super) fn proto_bytes(t: &Tensor) -> Bytes {
    let content = match t.data() {
        TensorData::Buffer(b) => b.clone(),
        TensorData::Strings(s) => {
            let mut out = BytesMut::new();
            for v in s {
                let mut n = v.len() as u64;
                while n >= 0x80 {
                    out.put_u8((n as u8) | 0x80);
                    n >>= 7;
                }
                out.put_u8(n as u8);
            }
            for v in s {
                out.put_slice(v);
            }
            out.freeze()
        }
    };
    let proto = TensorProto {
        dtype: t.dtype().code(),
        tensor_shape: Some(shape_proto(t.shape())),
        tensor_content: content,
        ..Default::default()
    };
    Bytes::from(proto.encode_to_vec())
}

/// The `out_type` attribute: string or variant (carried as strings).
fn out_type(attrs: &NodeAttrs) -> Result<()> {
    match attrs.dtype_code("out_type") {
        Ok(7 | 21) | Err(_) => Ok(()),
        Ok(other) => Err(attrs.error(format!("out_type {other} is not string or variant"))),
    }
}

pub(super) fn checked_triple<'a>(
    indices: &'a Tensor,
    values: &'a Tensor,
    shape: &'a Tensor,
) -> Result<Indices> {
    let ind = indices_of(indices, "Input indices")?;
    vector_of(values, "Input values")?;
    vector_of(shape, "Input shape")?;
    Ok(ind)
}

pub(super) fn serialize_sparse(attrs: &NodeAttrs) -> Result<Compute> {
    out_type(attrs)?;
    Ok(Box::new(|inputs| {
        let [indices, values, shape] = take::<3>("SerializeSparse", inputs)?;
        checked_triple(&indices, &values, &shape)?;
        let out = vec![
            proto_bytes(&indices),
            proto_bytes(&values),
            proto_bytes(&shape),
        ];
        Ok(vec![Tensor::strings(out, vec![3])?])
    }))
}

/// TensorFlow's `SparseTensor::IndicesValid`: in bounds, in row-major
/// order, no index twice.
pub(super) fn indices_valid(ind: &Indices, shape: &[i64]) -> Result<()> {
    let show = |row: &[i64]| {
        let v: Vec<String> = row.iter().map(i64::to_string).collect();
        format!("[{}]", v.join(","))
    };
    for i in 0..ind.n {
        let row = ind.row(i);
        if row.iter().zip(shape).any(|(&x, &d)| x < 0 || x >= d) {
            return Err(invalid(format!(
                "indices[{i}] = {} is out of bounds: need 0 <= index < {}",
                show(row),
                show(shape)
            )));
        }
        if i > 0 {
            let prev = ind.row(i - 1);
            if row < prev {
                return Err(invalid(format!(
                    "indices[{i}] = {} is out of order. Many sparse ops require sorted indices.\n    Use `tf.sparse.reorder` to create a correctly ordered copy.\n\n",
                    show(row)
                )));
            }
            if row == prev {
                return Err(invalid(format!("indices[{i}] = {} is repeated", show(row))));
            }
        }
    }
    Ok(())
}

pub(super) fn serialize_many_sparse(attrs: &NodeAttrs) -> Result<Compute> {
    out_type(attrs)?;
    Ok(Box::new(|inputs| {
        let [indices, values, shape] = take::<3>("SerializeManySparse", inputs)?;
        let ind = checked_triple(&indices, &values, &shape)?;
        let dims = int64s(&shape, "Input shape")?;
        if dims.len() < 2 {
            return Err(invalid(format!(
                "Rank of input SparseTensor should be > 1, but saw rank: {}",
                dims.len()
            )));
        }
        if ind.rank != dims.len() || values.num_elements() as usize != ind.n {
            return Err(invalid(format!(
                "indices {} and values {} do not match shape {}",
                shape_str(indices.shape()),
                shape_str(values.shape()),
                shape_str(&dims)
            )));
        }
        if let Some(d) = dims.iter().find(|&&d| d < 0) {
            return Err(invalid(format!(
                "Input shape {} has a negative dimension {d}",
                shape_str(&dims)
            )));
        }
        indices_valid(&ind, &dims)?;
        crate::kernels::check_size(
            "SerializeManySparse",
            DType::String,
            (dims[0] as u64).saturating_mul(3),
        )?;
        let rows = dims[0] as usize;
        let inner_shape = Tensor::from_slice(&dims[1..], vec![dims.len() as i64 - 1])?;
        let shape_bytes = proto_bytes(&inner_shape);
        let mut out = Vec::with_capacity(rows * 3);
        let mut at = 0;
        for r in 0..rows {
            let start = at;
            while at < ind.n && ind.row(at)[0] == r as i64 {
                at += 1;
            }
            let flat: Vec<i64> = (start..at).flat_map(|i| ind.row(i)[1..].to_vec()).collect();
            let sub = Indices::tensor(flat, at - start, ind.rank - 1)?;
            let picks: Vec<Option<usize>> = (start..at).map(Some).collect();
            let vals = gather(&values, &picks, None)?;
            out.extend([proto_bytes(&sub), proto_bytes(&vals), shape_bytes.clone()]);
        }
        Ok(vec![Tensor::strings(out, vec![rows as i64, 3])?])
    }))
}

/// One serialized sparse tensor's three tensors.
fn parse_one(strings: &[Bytes], i: usize, dtype: DType) -> Result<(Indices, Tensor, Vec<i64>)> {
    let parse = |b: &Bytes| -> Result<Tensor> {
        let proto = TensorProto::decode(b.clone())
            .map_err(|e| invalid(format!("Could not parse serialized sparse tensor: {e}")))?;
        tensor_from_proto(&proto)
    };
    let (ind, vals, shape) = (
        parse(&strings[3 * i])?,
        parse(&strings[3 * i + 1])?,
        parse(&strings[3 * i + 2])?,
    );
    if vals.dtype() != dtype {
        return Err(invalid(format!(
            "Requested SparseTensor of type {} but SparseTensor[{i}].values.dtype() == {}",
            super::super::lookup::tf_name(dtype),
            super::super::lookup::tf_name(vals.dtype())
        )));
    }
    let ind = indices_of(&ind, &format!("SparseTensor[{i}].indices"))?;
    let dims = int64s(&shape, &format!("SparseTensor[{i}].shape"))?;
    vector_of(&vals, &format!("SparseTensor[{i}].values"))?;
    if ind.rank != dims.len() || vals.num_elements() as usize != ind.n {
        return Err(invalid(format!(
            "SparseTensor[{i}]: indices {}, values {} and shape {} do not match",
            shape_str(&[ind.n as i64, ind.rank as i64]),
            shape_str(vals.shape()),
            shape_str(&dims)
        )));
    }
    Ok((ind, vals, dims))
}

/// Serialized sparse tensors of shape `[d..., 3]` as one sparse tensor of
/// rank `len(d) + R`: each one's indices behind its position, in order, the
/// dense shape the largest of each dimension.
fn deserialize(serialized: &Tensor, dtype: DType) -> Result<Vec<Tensor>> {
    let strings = serialized
        .string_values()
        .map_err(|_| invalid("serialized_sparse must be a string or variant tensor"))?;
    let outer = serialized.shape();
    if outer.last() != Some(&3) {
        return Err(invalid(format!(
            "Serialized sparse should have 3 as the last dimension {}",
            shape_str(outer)
        )));
    }
    let batch = &outer[..outer.len() - 1];
    let count = strings.len() / 3;
    if batch.is_empty() {
        let (ind, vals, dims) = parse_one(strings, 0, dtype)?;
        return Ok(vec![
            Indices::tensor(ind.flat, ind.n, ind.rank)?,
            vals,
            Tensor::vector(&dims),
        ]);
    }
    let mut parts = Vec::with_capacity(count);
    let mut rank = None;
    for i in 0..count {
        let part = parse_one(strings, i, dtype)?;
        match rank {
            None => rank = Some(part.2.len()),
            Some(r) if r != part.2.len() => {
                return Err(invalid(format!(
                    "Inconsistent shape across SparseTensors: rank prior to SparseTensor[{i}] was: {r} but rank of SparseTensor[{i}] is: {}",
                    part.2.len()
                )));
            }
            _ => {}
        }
        parts.push(part);
    }
    let rank = rank.unwrap_or(0);
    let mut dims: Vec<i64> = batch.to_vec();
    dims.extend(std::iter::repeat_n(0, rank));
    let total: usize = parts.iter().map(|p| p.0.n).sum();
    let out_rank = batch.len() + rank;
    crate::kernels::check_size("DeserializeSparse", DType::Int64, (total * out_rank) as u64)?;
    let mut flat = Vec::with_capacity(total * out_rank);
    let mut values: Vec<&Tensor> = Vec::with_capacity(count);
    for (i, (ind, vals, shape)) in parts.iter().enumerate() {
        for (d, &s) in shape.iter().enumerate() {
            dims[batch.len() + d] = dims[batch.len() + d].max(s);
        }
        // The position of element i in the batch dimensions.
        let mut pos = vec![0i64; batch.len()];
        let mut rest = i as i64;
        for d in (0..batch.len()).rev() {
            pos[d] = rest % batch[d].max(1);
            rest /= batch[d].max(1);
        }
        for k in 0..ind.n {
            flat.extend_from_slice(&pos);
            flat.extend_from_slice(ind.row(k));
        }
        values.push(vals);
    }
    Ok(vec![
        Indices::tensor(flat, total, out_rank)?,
        super::concat_values(&values, dtype)?,
        Tensor::vector(&dims),
    ])
}

pub(super) fn deserialize_sparse(attrs: &NodeAttrs) -> Result<Compute> {
    let dtype = attrs.dtype("dtype")?;
    Ok(Box::new(move |inputs| {
        let [serialized] = take::<1>("DeserializeSparse", inputs)?;
        if serialized.shape().is_empty() {
            return Err(invalid(format!(
                "Serialized sparse should have at least 1 dimension, got shape {}",
                shape_str(serialized.shape())
            )));
        }
        deserialize(&serialized, dtype)
    }))
}

pub(super) fn deserialize_many_sparse(attrs: &NodeAttrs) -> Result<Compute> {
    let dtype = attrs.dtype("dtype")?;
    Ok(Box::new(move |inputs| {
        let [serialized] = take::<1>("DeserializeManySparse", inputs)?;
        if serialized.shape().len() != 2 || serialized.shape()[1] != 3 {
            return Err(invalid(format!(
                "Serialized sparse should be a matrix with 3 columns, got shape {}",
                shape_str(serialized.shape())
            )));
        }
        deserialize(&serialized, dtype)
    }))
}

/// A `DT_VARIANT` constant whose every element holds one tensor (what
/// TensorFlow folds `SerializeManySparse(out_type=variant)` of a constant
/// SparseTensor into: `from_tensor_slices(sparse)`), in the string form the
/// deserializers read; `None` for any other variant.
pub fn variant_constant(proto: &TensorProto) -> Option<Tensor> {
    let shape: Vec<i64> = proto
        .tensor_shape
        .as_ref()?
        .dim
        .iter()
        .map(|d| d.size)
        .collect();
    let n = usize::try_from(shape.iter().try_fold(1i64, |a, &d| a.checked_mul(d))?).ok()?;
    let elements: Vec<VariantTensorDataProto> = if !proto.variant_val.is_empty() {
        proto.variant_val.clone()
    } else {
        decode_variant_list(&proto.tensor_content, n)?
    };
    if elements.len() != n {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    for e in &elements {
        if e.type_name != "tensorflow::Tensor" || e.tensors.len() != 1 {
            return None;
        }
        out.push(proto_bytes(&tensor_from_proto(&e.tensors[0]).ok()?));
    }
    Tensor::strings(out, shape).ok()
}

/// TensorFlow's encoding of a variant tensor's `tensor_content`: `n`
/// varint sizes, then the `n` `VariantTensorDataProto`s.
pub(crate) fn decode_variant_list(
    content: &Bytes,
    n: usize,
) -> Option<Vec<VariantTensorDataProto>> {
    let mut pos = 0usize;
    let mut sizes = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        let mut v: u64 = 0;
        let mut shift = 0;
        loop {
            let b = *content.get(pos)?;
            pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
        sizes.push(usize::try_from(v).ok()?);
    }
    let mut out = Vec::with_capacity(sizes.len());
    for size in sizes {
        let end = pos.checked_add(size).filter(|&e| e <= content.len())?;
        out.push(VariantTensorDataProto::decode(content.slice(pos..end)).ok()?);
        pos = end;
    }
    (pos == content.len()).then_some(out)
}
