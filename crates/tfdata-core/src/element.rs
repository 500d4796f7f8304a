//! [`Element`] and its two wire forms (spec §4.8):
//!
//! * `CompressedElement`: all components' pieces (raw buffers, or each
//!   string's bytes) concatenated and compressed as one raw Snappy block, with
//!   per-component metadata to cut them apart again;
//! * `UncompressedElement`: one `TensorProto` per component, fixed-size dtypes
//!   in `tensor_content` form, strings in `string_val`.
//!
//! Both decoders accept anything a TensorFlow 2.21 worker sends for the dtypes
//! tfdata supports and reject malformed input with an error, never a panic.

use std::fmt;

use bytes::{Bytes, BytesMut};
use prost::Message;
use tfdata_proto::data::{CompressedComponentMetadata, CompressedElement, UncompressedElement};
use tfdata_proto::tensorflow::{
    TensorProto, TensorShapeProto, VariantTensorDataProto, tensor_shape_proto,
};

use crate::lineage::Lineage;
use crate::tensor::{TensorData, num_elements};
use crate::{DType, Error, Result, Tensor};

/// The version TensorFlow writes and requires in `CompressedElement.version`.
pub const COMPRESSED_ELEMENT_VERSION: i32 = 0;

/// One element of a dataset: its component tensors, in order (a tuple or the
/// flattened leaves of a nested structure), and the dynamic-sharding splits
/// it was made from (see [`crate::lineage`]; not part of its value: equality
/// and the wire forms ignore it).
#[derive(Clone, Default)]
pub struct Element {
    pub components: Vec<Tensor>,
    pub lineage: Lineage,
}

impl PartialEq for Element {
    fn eq(&self, other: &Self) -> bool {
        self.components == other.components
    }
}

impl Eq for Element {}

impl Element {
    pub fn new(components: Vec<Tensor>) -> Element {
        Element {
            components,
            lineage: Lineage::default(),
        }
    }

    /// An element of one component.
    pub fn single(tensor: Tensor) -> Element {
        Element::new(vec![tensor])
    }

    /// The same element tagged with `lineage`'s splits as well.
    pub fn with_lineage(mut self, lineage: Lineage) -> Element {
        self.lineage.extend(lineage);
        self
    }

    /// Takes the lineage out (to move it to an element made from this one).
    pub fn take_lineage(&mut self) -> Lineage {
        std::mem::take(&mut self.lineage)
    }

    pub fn byte_size(&self) -> usize {
        self.components.iter().map(Tensor::byte_size).sum()
    }
}

impl From<Tensor> for Element {
    fn from(t: Tensor) -> Self {
        Element::single(t)
    }
}

impl fmt::Debug for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.components).finish()
    }
}

/// A single component prints as itself, several as a tuple.
impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.components.as_slice() {
            [one] => write!(f, "{one}"),
            many => {
                f.write_str("(")?;
                for (i, c) in many.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{c}")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// A shape as TensorFlow's `TensorShapeProto` (known rank, unnamed dims).
pub fn shape_proto(shape: &[i64]) -> TensorShapeProto {
    TensorShapeProto {
        dim: shape
            .iter()
            .map(|&size| tensor_shape_proto::Dim {
                size,
                name: String::new(),
            })
            .collect(),
        unknown_rank: false,
    }
}

fn shape_from_proto(shape: Option<&TensorShapeProto>) -> Result<Vec<i64>> {
    let Some(shape) = shape else {
        return Ok(vec![]);
    };
    if shape.unknown_rank {
        return Err(Error::InvalidArgument(
            "tensor shape has unknown rank".into(),
        ));
    }
    let dims: Vec<i64> = shape.dim.iter().map(|d| d.size).collect();
    num_elements(&dims)?;
    Ok(dims)
}

/// A tensor as TensorFlow's "AsProtoTensorContent" form.
pub fn tensor_to_proto(t: &Tensor) -> TensorProto {
    let mut proto = TensorProto {
        dtype: t.dtype().code(),
        tensor_shape: Some(shape_proto(t.shape())),
        ..Default::default()
    };
    match t.data() {
        TensorData::Buffer(b) => proto.tensor_content = b.clone(),
        TensorData::Strings(s) => proto.string_val = s.clone(),
    }
    proto
}

/// The largest tensor [`tensor_from_proto`] builds by padding a typed value
/// list to its shape: 2 GiB, protobuf's limit on a whole message.
pub const MAX_PADDED_TENSOR_BYTES: u64 = i32::MAX as u64;

/// A tensor from a `TensorProto` in either content form. As in TensorFlow, a
/// value list shorter than the shape is padded with its last value (a
/// single value fills the whole tensor; none is zeros or empty strings), up
/// to [`MAX_PADDED_TENSOR_BYTES`].
pub fn tensor_from_proto(proto: &TensorProto) -> Result<Tensor> {
    let dtype = DType::from_code(proto.dtype)?;
    let shape = shape_from_proto(proto.tensor_shape.as_ref())?;
    let n = num_elements(&shape)? as usize;
    let Some(size) = dtype.size() else {
        if proto.string_val.is_empty() && n > 0 && !proto.tensor_content.is_empty() {
            // TensorFlow's "AsProtoTensorContent" form of strings, which its
            // workers use in UncompressedElement.
            return Tensor::strings(decode_string_list(&proto.tensor_content, n)?, shape);
        }
        if proto.string_val.len() > n {
            return Err(Error::InvalidArgument(format!(
                "string TensorProto of shape {shape:?} has {} values",
                proto.string_val.len()
            )));
        }
        // Padded with the last value, or empty strings when there is none,
        // as TensorFlow pads (each padding string shares the last's bytes).
        let per = std::mem::size_of::<Bytes>() as u64;
        if proto.string_val.len() < n && (n as u64).saturating_mul(per) > MAX_PADDED_TENSOR_BYTES {
            return Err(Error::InvalidArgument(format!(
                "string TensorProto of shape {shape:?} pads {} values to more than 2 GiB",
                proto.string_val.len()
            )));
        }
        let mut values = proto.string_val.clone();
        let last = values.last().cloned().unwrap_or_default();
        values.resize(n, last);
        return Tensor::strings(values, shape);
    };
    if !proto.tensor_content.is_empty() || n == 0 {
        return Tensor::new(
            dtype,
            shape,
            TensorData::Buffer(proto.tensor_content.clone()),
        );
    }
    // Typed value lists, each element encoded to `size` little-endian bytes.
    let mut values: Vec<Vec<u8>> = Vec::new();
    let push_all = |values: &mut Vec<Vec<u8>>, iter: &mut dyn Iterator<Item = Vec<u8>>| {
        values.extend(iter);
    };
    use DType::*;
    match dtype {
        Float => push_all(
            &mut values,
            &mut proto.float_val.iter().map(|v| v.to_le_bytes().to_vec()),
        ),
        Double => push_all(
            &mut values,
            &mut proto.double_val.iter().map(|v| v.to_le_bytes().to_vec()),
        ),
        Int64 => push_all(
            &mut values,
            &mut proto.int64_val.iter().map(|v| v.to_le_bytes().to_vec()),
        ),
        UInt32 => push_all(
            &mut values,
            &mut proto.uint32_val.iter().map(|v| v.to_le_bytes().to_vec()),
        ),
        UInt64 => push_all(
            &mut values,
            &mut proto.uint64_val.iter().map(|v| v.to_le_bytes().to_vec()),
        ),
        Bool => push_all(
            &mut values,
            &mut proto.bool_val.iter().map(|v| vec![*v as u8]),
        ),
        Half | BFloat16 => push_all(
            &mut values,
            &mut proto
                .half_val
                .iter()
                .map(|v| (*v as u16).to_le_bytes().to_vec()),
        ),
        Complex64 => {
            let pairs = proto.scomplex_val.chunks_exact(2);
            push_all(
                &mut values,
                &mut pairs.map(|p| [p[0].to_le_bytes(), p[1].to_le_bytes()].concat()),
            )
        }
        Complex128 => {
            let pairs = proto.dcomplex_val.chunks_exact(2);
            push_all(
                &mut values,
                &mut pairs.map(|p| [p[0].to_le_bytes(), p[1].to_le_bytes()].concat()),
            )
        }
        // int_val carries every integer type of 32 bits or fewer.
        Int32 | QInt32 | Int16 | UInt16 | QInt16 | QUInt16 | Int8 | UInt8 | QInt8 | QUInt8 => {
            push_all(
                &mut values,
                &mut proto
                    .int_val
                    .iter()
                    .map(|v| v.to_le_bytes()[..size].to_vec()),
            )
        }
        Float8E5M2 | Float8E4M3FN | Float8E4M3FNUZ | Float8E4M3B11FNUZ | Float8E5M2FNUZ => {
            push_all(&mut values, &mut proto.float8_val.iter().map(|v| vec![*v]))
        }
        String => unreachable!("strings handled above"),
    }
    // Fewer values than elements repeat the last; none at all are zeros
    // (TensorFlow's `Tensor::FromProto`: a default-valued scalar `Const`
    // may carry no value).
    let last = values.last().cloned().unwrap_or_else(|| vec![0u8; size]);
    if values.len() > n {
        return Err(Error::InvalidArgument(format!(
            "{dtype} TensorProto of shape {shape:?} carries {} values",
            values.len()
        )));
    }
    // Padding makes a few bytes of message ask for any size: refuse more
    // than a message could have carried explicitly (protobuf's 2 GiB).
    let padded_bytes = (n as u64)
        .checked_mul(size as u64)
        .filter(|&bytes| bytes <= MAX_PADDED_TENSOR_BYTES)
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{dtype} TensorProto of shape {shape:?} pads {} values to more than 2 GiB, \
                 the most a protobuf message can carry",
                values.len()
            ))
        })?;
    let mut buf = Vec::with_capacity(padded_bytes as usize);
    for v in &values {
        buf.extend_from_slice(v);
    }
    for _ in values.len()..n {
        buf.extend_from_slice(&last);
    }
    Tensor::new(dtype, shape, TensorData::Buffer(buf.into()))
}

/// TensorFlow's `EncodeStringList`: `n` varint32 lengths, then the bytes of
/// every string, concatenated.
fn decode_string_list(content: &Bytes, n: usize) -> Result<Vec<Bytes>> {
    let bad =
        |reason: &str| Error::InvalidArgument(format!("malformed string tensor_content: {reason}"));
    let mut pos = 0usize;
    let mut lengths = Vec::with_capacity(n.min(1 << 20));
    for _ in 0..n {
        let mut value: u64 = 0;
        let mut shift = 0;
        loop {
            let byte = *content
                .get(pos)
                .ok_or_else(|| bad("lengths run past the end"))?;
            pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 35 {
                return Err(bad("length varint too long"));
            }
        }
        lengths.push(value as usize);
    }
    let mut strings = Vec::with_capacity(lengths.len());
    for len in lengths {
        let end = pos
            .checked_add(len)
            .filter(|&e| e <= content.len())
            .ok_or_else(|| bad("strings run past the end"))?;
        strings.push(content.slice(pos..end));
        pos = end;
    }
    if pos != content.len() {
        return Err(bad("trailing bytes"));
    }
    Ok(strings)
}

pub fn to_uncompressed(element: &Element) -> UncompressedElement {
    UncompressedElement {
        components: element.components.iter().map(tensor_to_proto).collect(),
    }
}

/// TensorFlow's `DT_VARIANT` code.
const DT_VARIANT: i32 = 21;
/// The type name TensorFlow gives a variant holding one tensor.
const TENSOR_VARIANT: &str = "tensorflow::Tensor";

/// A SparseTensor component as TensorFlow serves it: a `DT_VARIANT` tensor
/// of shape `[..., 3]` each of whose entries holds one tensor (indices,
/// values, dense shape). tfdata pipelines carry it in the string form of
/// `SerializeSparse(out_type=string)`, each string a serialized
/// `TensorProto`; this wraps those tensors as the variant's entries.
pub fn sparse_variant_proto(t: &Tensor) -> Result<TensorProto> {
    let strings = t.string_values().map_err(|_| {
        Error::InvalidArgument(format!(
            "a SparseTensor component to serve as a variant is a {} tensor, not the string form",
            t.dtype()
        ))
    })?;
    if t.shape().last() != Some(&3) {
        return Err(Error::InvalidArgument(format!(
            "a SparseTensor component to serve as a variant has shape {:?}, not [..., 3]",
            t.shape()
        )));
    }
    let variant_val = strings
        .iter()
        .map(|s| {
            let tensor = TensorProto::decode(s.as_ref()).map_err(|e| {
                Error::InvalidArgument(format!(
                    "a SparseTensor component's string is not a serialized TensorProto: {e}"
                ))
            })?;
            Ok(VariantTensorDataProto {
                type_name: TENSOR_VARIANT.into(),
                tensors: vec![tensor],
                ..Default::default()
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(TensorProto {
        dtype: DT_VARIANT,
        tensor_shape: Some(shape_proto(t.shape())),
        variant_val,
        ..Default::default()
    })
}

/// The type name TensorFlow gives a variant holding a RaggedTensor (its
/// row splits, outermost first, then its flat values).
pub const RAGGED_VARIANT: &str = "RaggedTensorVariant";

/// A RaggedTensor component as TensorFlow serves it: a `DT_VARIANT` tensor
/// each of whose entries is a `RaggedTensorVariant`. tfdata pipelines carry
/// it as strings of the same shape, each a serialized
/// `VariantTensorDataProto` (what `RaggedTensorToVariant` makes); this
/// checks each one and places it in the variant tensor. `None` when `t` is
/// not in that form (a SparseTensor's string form).
pub fn ragged_variant_proto(t: &Tensor) -> Option<Result<TensorProto>> {
    let strings = t.string_values().ok()?;
    let first = strings.first()?;
    let is_ragged = |s: &Bytes| {
        VariantTensorDataProto::decode(s.as_ref()).is_ok_and(|v| v.type_name == RAGGED_VARIANT)
    };
    if !is_ragged(first) {
        return None;
    }
    let variant_val = strings
        .iter()
        .map(|s| match VariantTensorDataProto::decode(s.as_ref()) {
            Ok(v) if v.type_name == RAGGED_VARIANT && !v.tensors.is_empty() => Ok(v),
            _ => Err(Error::InvalidArgument(
                "a RaggedTensor component to serve mixes RaggedTensorVariants with other bytes"
                    .into(),
            )),
        })
        .collect::<Result<Vec<_>>>();
    Some(variant_val.map(|variant_val| TensorProto {
        dtype: DT_VARIANT,
        tensor_shape: Some(shape_proto(t.shape())),
        variant_val,
        ..Default::default()
    }))
}

/// A variant component as TensorFlow serves it: a RaggedTensor's
/// ([`ragged_variant_proto`]) or a SparseTensor's ([`sparse_variant_proto`]),
/// told apart by the carried bytes. An empty one is the same empty variant
/// tensor either way.
pub fn served_variant_proto(t: &Tensor) -> Result<TensorProto> {
    if t.num_elements() == 0 && t.dtype() == DType::String {
        return Ok(TensorProto {
            dtype: DT_VARIANT,
            tensor_shape: Some(shape_proto(t.shape())),
            ..Default::default()
        });
    }
    match ragged_variant_proto(t) {
        Some(proto) => proto,
        None => sparse_variant_proto(t),
    }
}

/// [`to_uncompressed`], the components at `sparse_variants` served as
/// TensorFlow's variants ([`served_variant_proto`]).
pub fn to_uncompressed_with_variants(
    element: &Element,
    sparse_variants: &[usize],
) -> Result<UncompressedElement> {
    let components = element
        .components
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if sparse_variants.contains(&i) {
                served_variant_proto(t)
            } else {
                Ok(tensor_to_proto(t))
            }
        })
        .collect::<Result<_>>()?;
    Ok(UncompressedElement { components })
}

pub fn from_uncompressed(element: &UncompressedElement) -> Result<Element> {
    element
        .components
        .iter()
        .map(tensor_from_proto)
        .collect::<Result<_>>()
        .map(Element::new)
}

/// TensorFlow rejects elements whose pieces add up to 4 GiB or more.
const MAX_UNCOMPRESSED_BYTES: usize = u32::MAX as usize;

/// Compresses an element as TensorFlow's `CompressElement` does.
pub fn compress(element: &Element) -> Result<CompressedElement> {
    compress_with_variants(element, &[])
}

/// [`compress`], the components at `sparse_variants` served as TensorFlow's
/// variants (SparseTensors or RaggedTensors): each one piece, its serialized `TensorProto`, as
/// TensorFlow compresses a variant.
pub fn compress_with_variants(
    element: &Element,
    sparse_variants: &[usize],
) -> Result<CompressedElement> {
    let variants: Vec<(usize, Vec<u8>)> = sparse_variants
        .iter()
        .filter_map(|&i| element.components.get(i).map(|t| (i, t)))
        .map(|(i, t)| Ok((i, served_variant_proto(t)?.encode_to_vec())))
        .collect::<Result<_>>()?;
    let total = element.byte_size();
    if total > MAX_UNCOMPRESSED_BYTES {
        return Err(Error::InvalidArgument(format!(
            "element of {total} bytes exceeds the 4 GiB limit of a compressed element"
        )));
    }
    let mut pieces: Vec<&[u8]> = Vec::new();
    let mut metadata = Vec::with_capacity(element.components.len());
    for (i, t) in element.components.iter().enumerate() {
        let mut uncompressed_bytes = Vec::new();
        if let Some((_, proto)) = variants.iter().find(|(v, _)| *v == i) {
            pieces.push(proto);
            metadata.push(CompressedComponentMetadata {
                dtype: DT_VARIANT,
                tensor_shape: Some(shape_proto(t.shape())),
                uncompressed_bytes: vec![proto.len() as u64],
            });
            continue;
        }
        match t.data() {
            TensorData::Buffer(b) => {
                // A tensor without a buffer contributes no piece and no entry.
                if !b.is_empty() {
                    pieces.push(b);
                    uncompressed_bytes.push(b.len() as u64);
                }
            }
            TensorData::Strings(s) => {
                for piece in s {
                    pieces.push(piece);
                    uncompressed_bytes.push(piece.len() as u64);
                }
            }
        }
        metadata.push(CompressedComponentMetadata {
            dtype: t.dtype().code(),
            tensor_shape: Some(shape_proto(t.shape())),
            uncompressed_bytes,
        });
    }
    // One Snappy block of the pieces' concatenation, as TensorFlow writes.
    let data = crate::snappy::compress_pieces(&pieces)?;
    Ok(CompressedElement {
        data: data.into(),
        component_metadata: metadata,
        version: COMPRESSED_ELEMENT_VERSION,
    })
}

/// Decompresses a `CompressedElement` from a tfdata or TensorFlow worker.
pub fn uncompress(compressed: &CompressedElement) -> Result<Element> {
    let corrupt = |reason: String| Error::DataLoss {
        location: "compressed element".into(),
        reason,
    };
    if compressed.version != COMPRESSED_ELEMENT_VERSION {
        return Err(Error::InvalidArgument(format!(
            "unsupported compressed element version {} (expected {COMPRESSED_ELEMENT_VERSION})",
            compressed.version
        )));
    }
    let expected: u64 = compressed
        .component_metadata
        .iter()
        .flat_map(|m| m.uncompressed_bytes.iter())
        .try_fold(0u64, |acc, &n| acc.checked_add(n))
        .ok_or_else(|| corrupt("piece sizes overflow".into()))?;
    let actual = snap::raw::decompress_len(&compressed.data)
        .map_err(|e| corrupt(format!("bad snappy header: {e}")))?;
    if actual as u64 != expected {
        return Err(corrupt(format!(
            "snappy block holds {actual} bytes but the metadata describes {expected}"
        )));
    }
    let mut raw = BytesMut::zeroed(actual);
    snap::raw::Decoder::new()
        .decompress(&compressed.data, &mut raw)
        .map_err(|e| corrupt(format!("snappy decompression failed: {e}")))?;
    let mut raw: Bytes = raw.freeze();

    let mut components = Vec::with_capacity(compressed.component_metadata.len());
    for meta in &compressed.component_metadata {
        let dtype = DType::from_code(meta.dtype)?;
        let shape = shape_from_proto(meta.tensor_shape.as_ref())?;
        let n = num_elements(&shape)?;
        let tensor = match dtype.size() {
            None => {
                if meta.uncompressed_bytes.len() as u64 != n {
                    return Err(corrupt(format!(
                        "string component of shape {shape:?} has {} pieces",
                        meta.uncompressed_bytes.len()
                    )));
                }
                let strings = meta
                    .uncompressed_bytes
                    .iter()
                    .map(|&len| raw.split_to(len as usize))
                    .collect();
                Tensor::strings(strings, shape)?
            }
            Some(_) => {
                let len: u64 = meta.uncompressed_bytes.iter().sum();
                if meta.uncompressed_bytes.len() > 1 {
                    return Err(corrupt(format!(
                        "{dtype} component has {} pieces",
                        meta.uncompressed_bytes.len()
                    )));
                }
                Tensor::new(dtype, shape, TensorData::Buffer(raw.split_to(len as usize)))
                    .map_err(|e| corrupt(e.to_string()))?
            }
        };
        components.push(tensor);
    }
    Ok(Element::new(components))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_variants_wrap_tensors_and_refuse_other_forms() {
        let part = |t: &Tensor| Bytes::from(tensor_to_proto(t).encode_to_vec());
        let indices = Tensor::from_slice(&[0i64, 2], vec![2, 1]).unwrap();
        let values = Tensor::from_slice(&[7i64, 9], vec![2]).unwrap();
        let shape = Tensor::from_slice(&[4i64], vec![1]).unwrap();
        let sparse =
            Tensor::strings(vec![part(&indices), part(&values), part(&shape)], vec![3]).unwrap();
        let el = Element::new(vec![Tensor::scalar(1i64), sparse.clone()]);
        let plain = to_uncompressed_with_variants(&el, &[1]).unwrap();
        assert_eq!(plain.components[0], tensor_to_proto(&el.components[0]));
        let v = &plain.components[1];
        assert_eq!((v.dtype, v.variant_val.len()), (21, 3));
        assert_eq!(
            tensor_from_proto(&v.variant_val[1].tensors[0]).unwrap(),
            values
        );
        let compressed = compress_with_variants(&el, &[1]).unwrap();
        assert_eq!(compressed.component_metadata[1].dtype, 21);
        assert_eq!(
            compressed.component_metadata[1].uncompressed_bytes,
            [v.encode_to_vec().len() as u64]
        );
        // Not the string form: a clear error, never a wrong value.
        for bad in [
            Tensor::from_slice(&[1i64, 2, 3], vec![3]).unwrap(),
            Tensor::strings(vec![part(&indices), part(&values)], vec![2]).unwrap(),
            Tensor::strings(vec![Bytes::from_static(b"\xff\xff"); 3], vec![3]).unwrap(),
        ] {
            let el = Element::new(vec![bad]);
            assert!(to_uncompressed_with_variants(&el, &[0]).is_err());
            assert!(compress_with_variants(&el, &[0]).is_err());
        }
    }

    fn sample() -> Element {
        Element::new(vec![
            Tensor::scalar(42i64),
            Tensor::from_slice(&[1.5f32, -2.0, 3.25, 0.0], vec![2, 2]).unwrap(),
            Tensor::strings(
                vec![Bytes::from("ab"), Bytes::new(), Bytes::from("xyz")],
                vec![3],
            )
            .unwrap(),
            Tensor::from_slice::<i32>(&[], vec![0, 4]).unwrap(),
            Tensor::from_slice(&[true, false], vec![2]).unwrap(),
        ])
    }

    #[test]
    fn compressed_round_trip() {
        let e = sample();
        let c = compress(&e).unwrap();
        assert_eq!(c.version, 0);
        // Strings: one entry per string; the empty numeric tensor: none.
        assert_eq!(c.component_metadata[2].uncompressed_bytes, vec![2, 0, 3]);
        assert!(c.component_metadata[3].uncompressed_bytes.is_empty());
        assert_eq!(uncompress(&c).unwrap(), e);
    }

    #[test]
    fn uncompressed_round_trip() {
        let e = sample();
        assert_eq!(from_uncompressed(&to_uncompressed(&e)).unwrap(), e);
    }

    #[test]
    fn strings_in_tensor_content_decode() {
        // ["ab", "", "xyz"]: lengths 2, 0, 3 then the bytes.
        let proto = TensorProto {
            dtype: DType::String.code(),
            tensor_shape: Some(shape_proto(&[3])),
            tensor_content: Bytes::from_static(b"\x02\x00\x03abxyz"),
            ..Default::default()
        };
        let t = tensor_from_proto(&proto).unwrap();
        let values: Vec<&[u8]> = t
            .string_values()
            .unwrap()
            .iter()
            .map(|b| b.as_ref())
            .collect();
        assert_eq!(values, vec![&b"ab"[..], b"", b"xyz"]);
        let mut bad = proto.clone();
        bad.tensor_content = Bytes::from_static(b"\x09ab");
        assert!(tensor_from_proto(&bad).is_err());
    }

    #[test]
    fn typed_value_lists_broadcast_like_tensorflow() {
        let proto = TensorProto {
            dtype: DType::Int32.code(),
            tensor_shape: Some(shape_proto(&[3])),
            int_val: vec![7],
            ..Default::default()
        };
        let t = tensor_from_proto(&proto).unwrap();
        assert_eq!(t.to_vec::<i32>().unwrap(), vec![7, 7, 7]);
    }

    #[test]
    fn corrupt_compressed_elements_are_errors() {
        let mut c = compress(&sample()).unwrap();
        c.version = 1;
        assert!(uncompress(&c).is_err());
        let mut c = compress(&sample()).unwrap();
        c.component_metadata[0].uncompressed_bytes = vec![9];
        assert!(matches!(uncompress(&c), Err(Error::DataLoss { .. })));
        let mut c = compress(&sample()).unwrap();
        c.data = Bytes::from_static(b"\xff\xff\xff\xff\xff garbage");
        assert!(uncompress(&c).is_err());
    }
}
