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
