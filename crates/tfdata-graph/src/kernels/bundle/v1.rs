//! Reading V1 checkpoints (`tf.raw_ops.Restore`, `RestoreSlice`): the
//! files TensorFlow's `Save`/`SaveSlices` write, reimplemented from the
//! format's protos. A V1 checkpoint is one or more [`super::table`] files
//! (a glob pattern names them) whose `""` key holds a
//! `SavedTensorSliceMeta` (each tensor's name, shape, dtype and slices) and
//! whose other keys (the tensor name and slice in TensorFlow's ordered
//! code, which the reader need not decode) each hold a `SavedSlice`: the
//! name, the slice and the values as a `TensorProto` with typed value lists.
//!
//! Only whole tensors are read: a tensor stored as partial slices (a
//! partitioned variable) and a `shape_and_slice` asking for part of one
//! are refused with `Unimplemented`, not assembled.

use prost::Message;
use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_proto::tensorflow::{TensorProto, TensorShapeProto};

use super::format::Version;
use super::table::read_table;

/// `TensorSliceProto.Extent`: `length` absent means the whole dimension.
#[derive(Clone, PartialEq, Message)]
struct Extent {
    #[prost(int64, tag = "1")]
    start: i64,
    #[prost(int64, optional, tag = "2")]
    length: Option<i64>,
}

/// `TensorSliceProto`.
#[derive(Clone, PartialEq, Message)]
struct Slice {
    #[prost(message, repeated, tag = "1")]
    extent: Vec<Extent>,
}

impl Slice {
    /// Whether the slice covers every element of `shape`.
    fn is_full(&self, shape: &[i64]) -> bool {
        self.extent.is_empty()
            || (self.extent.len() == shape.len()
                && self
                    .extent
                    .iter()
                    .zip(shape)
                    .all(|(e, &d)| e.length.is_none() || (e.start == 0 && e.length == Some(d))))
    }
}

/// `SavedSliceMeta`.
#[derive(Clone, PartialEq, Message)]
struct SliceMeta {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    shape: Option<TensorShapeProto>,
    #[prost(int32, tag = "3")]
    dtype: i32,
    #[prost(message, repeated, tag = "4")]
    slice: Vec<Slice>,
}

/// `SavedTensorSliceMeta`.
#[derive(Clone, PartialEq, Message)]
struct Meta {
    #[prost(message, repeated, tag = "1")]
    tensor: Vec<SliceMeta>,
    #[prost(message, optional, tag = "2")]
    versions: Option<Version>,
}

/// `SavedSlice`.
#[derive(Clone, PartialEq, Message)]
struct SavedSlice {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    slice: Option<Slice>,
    #[prost(message, optional, tag = "3")]
    data: Option<TensorProto>,
}

/// `SavedTensorSlices`: the meta (under key `""`) or one slice.
#[derive(Clone, PartialEq, Message)]
struct Saved {
    #[prost(message, optional, tag = "1")]
    meta: Option<Meta>,
    #[prost(message, optional, tag = "2")]
    data: Option<SavedSlice>,
}

fn loss(path: &str, reason: impl Into<String>) -> Error {
    Error::DataLoss {
        location: path.to_string(),
        reason: reason.into(),
    }
}

/// The number of values a `TensorProto`'s value lists hold (one list is
/// set in a V1 file; a complex value is two floats).
fn values_in(p: &TensorProto) -> usize {
    p.half_val.len()
        + p.float_val.len()
        + p.double_val.len()
        + p.int_val.len()
        + p.string_val.len()
        + p.scomplex_val.len() / 2
        + p.int64_val.len()
        + p.bool_val.len()
        + p.dcomplex_val.len() / 2
        + p.uint32_val.len()
        + p.uint64_val.len()
}

/// TensorFlow's `DataTypeString`.
fn tf_name(d: DType) -> &'static str {
    super::super::lookup::tf_name(d)
}

/// The whole tensor `name` of dtype `want` from the V1 checkpoint files
/// matching `pattern`.
pub(super) fn restore(pattern: &str, name: &str, want: DType) -> Result<Tensor> {
    let files = tfdata_dataset::io::glob(pattern)?;
    if files.is_empty() {
        return Err(Error::NotFound {
            what: "checkpoint",
            id: format!(
                "(Unsuccessful TensorSliceReader constructor: Failed to find any matching files \
                 for {pattern})"
            ),
        });
    }
    for path in &files {
        let file = super::read_limited(path)?;
        let entries = read_table(path, &file)?;
        let Some((_, meta)) = entries.iter().find(|(k, _)| k.is_empty()) else {
            return Err(loss(path, "no meta entry: not a V1 checkpoint"));
        };
        let meta = Saved::decode(&meta[..])
            .ok()
            .and_then(|s| s.meta)
            .ok_or_else(|| loss(path, "unparsable meta entry"))?;
        let Some(info) = meta.tensor.iter().find(|t| t.name == name) else {
            continue;
        };
        let stored = DType::from_code(info.dtype).map_err(|_| {
            Error::Unimplemented(format!("{name}: restoring dtype code {}", info.dtype))
        })?;
        if stored != want {
            return Err(Error::InvalidArgument(format!(
                "Expected to restore a tensor of type {}, got a tensor of type {} instead: \
                 tensor_name = {name}",
                tf_name(want),
                tf_name(stored)
            )));
        }
        let shape_proto = info.shape.clone().unwrap_or_default();
        if shape_proto.unknown_rank || shape_proto.dim.iter().any(|d| d.size < 0) {
            return Err(loss(path, format!("{name}: invalid shape")));
        }
        let shape: Vec<i64> = shape_proto.dim.iter().map(|d| d.size).collect();
        if info.slice.len() != 1 || !info.slice[0].is_full(&shape) {
            return Err(Error::Unimplemented(format!(
                "{name}: a V1 checkpoint tensor saved as partial slices"
            )));
        }
        let n = tfdata_core::tensor::num_elements(&shape)?;
        super::check_size(name, stored, n)?;
        for (key, value) in &entries {
            if key.is_empty() {
                continue;
            }
            let Some(slice) = Saved::decode(&value[..]).ok().and_then(|s| s.data) else {
                return Err(loss(path, "unparsable slice entry"));
            };
            if slice.name != name {
                continue;
            }
            let mut data = slice.data.unwrap_or_default();
            // The whole tensor's values, no fewer: a short list would be
            // padded by the proto conversion.
            if values_in(&data) as u64 != n || !data.tensor_content.is_empty() {
                return Err(loss(
                    path,
                    format!(
                        "{name}: {} values stored for {n} elements",
                        values_in(&data)
                    ),
                ));
            }
            data.dtype = stored.code();
            data.tensor_shape = Some(shape_proto.clone());
            return tfdata_core::element::tensor_from_proto(&data);
        }
        return Err(loss(path, format!("{name}: its slice's data is missing")));
    }
    Err(Error::NotFound {
        what: "Tensor name",
        id: format!("\"{name}\" (not found in checkpoint files {pattern})"),
    })
}

/// TensorFlow's ordered code (`strings::OrderedCode`), which V1 keys are
/// written in so they sort by tensor name, then slice.
mod ordered_code {
    /// A string: `0x00` and `0xff` escaped (`00 ff`, `ff 00`), ended by `00 01`.
    pub(super) fn string(out: &mut Vec<u8>, s: &[u8]) {
        for &b in s {
            match b {
                0x00 => out.extend_from_slice(&[0x00, 0xff]),
                0xff => out.extend_from_slice(&[0xff, 0x00]),
                b => out.push(b),
            }
        }
        out.extend_from_slice(&[0x00, 0x01]);
    }

    /// An unsigned number: its byte count, then its big-endian bytes.
    pub(super) fn num_increasing(out: &mut Vec<u8>, v: u64) {
        let bytes = v.to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        out.push((8 - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }

    /// A signed number: big-endian two's complement, sign-extended to as
    /// many bytes as it needs (7 bits each, less the header), whose
    /// leading bits say the length (`1`, `11`, ... xored with the sign).
    pub(super) fn signed_num_increasing(out: &mut Vec<u8>, v: i64) {
        // The header bits of each length (`kLengthToHeaderBits`).
        const HEADER: [[u8; 2]; 11] = [
            [0, 0],
            [0x80, 0],
            [0xc0, 0],
            [0xe0, 0],
            [0xf0, 0],
            [0xf8, 0],
            [0xfc, 0],
            [0xfe, 0],
            [0xff, 0],
            [0xff, 0x80],
            [0xff, 0xc0],
        ];
        let x = if v < 0 { !v as u64 } else { v as u64 };
        let bits = if x == 0 {
            0
        } else {
            63 - x.leading_zeros() as usize
        };
        let len = if x < 64 { 1 } else { (bits + 1) / 7 + 1 };
        let sign = if v < 0 { 0xff } else { 0x00 };
        let mut buf = [sign; 10];
        buf[2..].copy_from_slice(&v.to_be_bytes());
        let begin = 10 - len;
        buf[begin] ^= HEADER[len][0];
        if len > 1 {
            buf[begin + 1] ^= HEADER[len][1];
        }
        out.extend_from_slice(&buf[begin..]);
    }
}

/// The key of a whole tensor `name` of rank `rank` (`EncodeTensorNameSlice`):
/// 0, the name, the rank, and each dimension's start 0 and length -1 (all).
fn whole_tensor_key(name: &str, rank: usize) -> Vec<u8> {
    let mut key = Vec::new();
    ordered_code::num_increasing(&mut key, 0);
    ordered_code::string(&mut key, name.as_bytes());
    ordered_code::num_increasing(&mut key, rank as u64);
    for _ in 0..rank {
        ordered_code::signed_num_increasing(&mut key, 0);
        ordered_code::signed_num_increasing(&mut key, -1);
    }
    key
}

/// `t`'s values in the `TensorProto` value list TensorFlow's V1 writer
/// uses for its dtype (no dtype or shape: the meta has them).
fn values_proto(name: &str, t: &Tensor) -> Result<TensorProto> {
    let mut p = TensorProto::default();
    match t.dtype() {
        DType::Float => p.float_val = t.to_vec::<f32>()?,
        DType::Double => p.double_val = t.to_vec::<f64>()?,
        DType::Int32 => p.int_val = t.to_vec::<i32>()?,
        DType::Int64 => p.int64_val = t.to_vec::<i64>()?,
        DType::UInt8 => p.int_val = t.to_vec::<u8>()?.into_iter().map(i32::from).collect(),
        DType::Int8 => p.int_val = t.to_vec::<i8>()?.into_iter().map(i32::from).collect(),
        DType::Int16 => p.int_val = t.to_vec::<i16>()?.into_iter().map(i32::from).collect(),
        DType::UInt16 => p.int_val = t.to_vec::<u16>()?.into_iter().map(i32::from).collect(),
        DType::Bool => p.bool_val = t.to_vec::<bool>()?,
        DType::Half => {
            p.half_val = raw(t)
                .chunks_exact(2)
                .map(|c| i32::from(u16::from_le_bytes([c[0], c[1]])))
                .collect()
        }
        DType::Complex64 => {
            p.scomplex_val = raw(t)
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        }
        DType::Complex128 => {
            p.dcomplex_val = raw(t)
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect()
        }
        DType::String => p.string_val = t.string_values()?.to_vec(),
        other => {
            // TensorFlow's V1 writer has no bfloat16, unsigned 32/64-bit or
            // quantized slices either.
            return Err(Error::Unimplemented(format!(
                "{name}: saving {} in a V1 checkpoint",
                tf_name(other)
            )));
        }
    }
    Ok(p)
}

fn raw(t: &Tensor) -> &[u8] {
    match t.data() {
        tfdata_core::tensor::TensorData::Buffer(b) => b,
        tfdata_core::tensor::TensorData::Strings(_) => &[],
    }
}

/// The V1 checkpoint file of the whole tensors `tensors` (name, tensor),
/// as TensorFlow's `Save` writes it: sorted by name, one meta entry, one
/// slice each.
pub(super) fn file_bytes(tensors: &[(String, &Tensor)]) -> Result<Vec<u8>> {
    let mut sorted: Vec<&(String, &Tensor)> = tensors.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let whole = |rank: usize| Slice {
        extent: vec![Extent::default(); rank],
    };
    let mut meta = Meta {
        tensor: Vec::new(),
        versions: Some(Version {
            producer: 1,
            ..Version::default()
        }),
    };
    let mut data = Vec::new();
    for (name, t) in sorted {
        let shape = TensorShapeProto {
            dim: t
                .shape()
                .iter()
                .map(|&size| tfdata_proto::tensorflow::tensor_shape_proto::Dim {
                    size,
                    ..Default::default()
                })
                .collect(),
            unknown_rank: false,
        };
        meta.tensor.push(SliceMeta {
            name: name.clone(),
            shape: Some(shape),
            dtype: t.dtype().code(),
            slice: vec![whole(t.shape().len())],
        });
        let saved = Saved {
            meta: None,
            data: Some(SavedSlice {
                name: name.clone(),
                slice: Some(whole(t.shape().len())),
                data: Some(values_proto(name, t)?),
            }),
        };
        data.push((
            whole_tensor_key(name, t.shape().len()),
            saved.encode_to_vec(),
        ));
    }
    data.sort_by(|a, b| a.0.cmp(&b.0));
    let mut table = super::table::TableWriter::new();
    let meta = Saved {
        meta: Some(meta),
        data: None,
    };
    table.add(b"", &meta.encode_to_vec());
    for (key, value) in &data {
        table.add(key, value);
    }
    Ok(table.finish())
}

#[cfg(test)]
mod tests {
    use super::ordered_code::signed_num_increasing;

    fn signed(v: i64) -> Vec<u8> {
        let mut out = Vec::new();
        signed_num_increasing(&mut out, v);
        out
    }

    #[test]
    fn signed_numbers_sort_as_their_bytes() {
        assert_eq!(signed(0), [0x80]);
        assert_eq!(signed(-1), [0x7f]);
        assert_eq!(signed(63), [0xbf]);
        assert_eq!(signed(64), [0xc0, 0x40]);
        let values = [
            i64::MIN,
            -1 << 40,
            -65,
            -64,
            -1,
            0,
            1,
            63,
            64,
            8191,
            8192,
            1 << 40,
            i64::MAX,
        ];
        for w in values.windows(2) {
            assert!(signed(w[0]) < signed(w[1]), "{} {}", w[0], w[1]);
        }
    }
}
