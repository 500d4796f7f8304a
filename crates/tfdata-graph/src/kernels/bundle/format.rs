//! TensorFlow's tensor bundle (the V2 checkpoint format), reimplemented
//! from its documented layout and checked byte for byte against files
//! TensorFlow 2.21 writes:
//!
//! * `<prefix>.index`: a [`super::table`] whose `""` key holds a
//!   `BundleHeaderProto` (shard count, endianness, version) and every other
//!   key, sorted, a tensor's `BundleEntryProto` (dtype, shape, data shard,
//!   offset, size, masked CRC-32C of its bytes);
//! * `<prefix>.data-0000k-of-0000n`: the tensors' bytes one after another.
//!   A numeric tensor is its little-endian buffer. A string tensor is its
//!   lengths as varint64s, a masked CRC-32C of those lengths (each taken as
//!   a little-endian u32, or u64 past 4 GiB), then the strings' bytes; its
//!   entry's CRC covers the lengths (as taken), that CRC and the bytes.

use bytes::Bytes;
use prost::Message;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_proto::tensorflow::TensorShapeProto;
use tfdata_proto::tensorflow::tensor_shape_proto::Dim;

use super::table::{get_varint, put_varint};
use crate::kernels::check_size;

/// `BundleHeaderProto`.
#[derive(Clone, PartialEq, Message)]
pub(super) struct Header {
    #[prost(int32, tag = "1")]
    pub num_shards: i32,
    /// 0 little-endian, 1 big-endian.
    #[prost(int32, tag = "2")]
    pub endianness: i32,
    #[prost(message, optional, tag = "3")]
    pub version: Option<Version>,
}

/// `VersionDef`.
#[derive(Clone, PartialEq, Message)]
pub(super) struct Version {
    #[prost(int32, tag = "1")]
    pub producer: i32,
    #[prost(int32, tag = "2")]
    pub min_consumer: i32,
    #[prost(int32, repeated, tag = "3")]
    pub bad_consumers: Vec<i32>,
}

/// `BundleEntryProto`.
#[derive(Clone, PartialEq, Message)]
pub(super) struct Entry {
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
    #[prost(int32, tag = "3")]
    pub shard_id: i32,
    #[prost(int64, tag = "4")]
    pub offset: i64,
    #[prost(int64, tag = "5")]
    pub size: i64,
    #[prost(fixed32, tag = "6")]
    pub crc32c: u32,
    /// A partitioned variable's slices (`TensorSliceProto`s), kept as
    /// bytes: merging copies them, restoring refuses them.
    #[prost(bytes = "vec", repeated, tag = "7")]
    pub slices: Vec<Vec<u8>>,
}

/// The bundle format version this writes (`kTensorBundleVersion`).
pub(super) const VERSION: i32 = 1;

pub(super) fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

pub(super) fn index_name(prefix: &str) -> String {
    format!("{prefix}.index")
}

pub(super) fn data_name(prefix: &str, shard: i64, shards: i64) -> String {
    String::from_utf8_lossy(&crate::kernels::file_write::shard_name(
        format!("{prefix}.data").as_bytes(),
        shard,
        shards,
    ))
    .into_owned()
}

pub(super) fn header(num_shards: i32) -> Header {
    Header {
        num_shards,
        endianness: 0,
        version: Some(Version {
            producer: VERSION,
            ..Version::default()
        }),
    }
}

/// Appends `t`'s bytes to `data` and returns its entry.
pub(super) fn encode(t: &Tensor, data: &mut Vec<u8>) -> Entry {
    let offset = data.len();
    let crc = match t.data() {
        TensorData::Buffer(b) => {
            data.extend_from_slice(b);
            crc32c::crc32c(b)
        }
        TensorData::Strings(strings) => {
            let mut crc = 0;
            for s in strings {
                put_varint(data, s.len() as u64);
                crc = extend_len(crc, s.len() as u64);
            }
            let lengths_crc = mask(crc);
            data.extend_from_slice(&lengths_crc.to_le_bytes());
            crc = crc32c::crc32c_append(crc, &lengths_crc.to_le_bytes());
            for s in strings {
                data.extend_from_slice(s);
                crc = crc32c::crc32c_append(crc, s);
            }
            crc
        }
    };
    Entry {
        dtype: t.dtype().code(),
        shape: Some(TensorShapeProto {
            dim: t
                .shape()
                .iter()
                .map(|&size| Dim {
                    size,
                    ..Dim::default()
                })
                .collect(),
            unknown_rank: false,
        }),
        shard_id: 0,
        offset: offset as i64,
        size: (data.len() - offset) as i64,
        crc32c: mask(crc),
        slices: Vec::new(),
    }
}

/// A string's length as the checksum takes it: a u32 when it fits (what
/// older checkpoints stored), else a u64.
fn extend_len(crc: u32, len: u64) -> u32 {
    match u32::try_from(len) {
        Ok(l) => crc32c::crc32c_append(crc, &l.to_le_bytes()),
        Err(_) => crc32c::crc32c_append(crc, &len.to_le_bytes()),
    }
}

fn loss(key: &str, reason: impl Into<String>) -> Error {
    Error::DataLoss {
        location: format!("checkpoint tensor {key}"),
        reason: reason.into(),
    }
}

/// The entry's shape, checked (no unknown or negative dimension, a size
/// within the output limit).
pub(super) fn entry_shape(key: &str, entry: &Entry, dtype: DType) -> Result<Vec<i64>> {
    let shape = entry.shape.clone().unwrap_or_default();
    if shape.unknown_rank || shape.dim.iter().any(|d| d.size < 0) {
        return Err(loss(key, "Invalid tensor shape"));
    }
    let dims: Vec<i64> = shape.dim.iter().map(|d| d.size).collect();
    let n = dims
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d as u64))
        .ok_or_else(|| loss(key, "Invalid tensor shape"))?;
    check_size(key, dtype, n)?;
    Ok(dims)
}

/// The tensor `entry` describes, from `bytes` (its `size` bytes of the
/// data file), its size and checksums checked.
pub(super) fn decode(key: &str, entry: &Entry, dtype: DType, bytes: &[u8]) -> Result<Tensor> {
    let shape = entry_shape(key, entry, dtype)?;
    let n = tfdata_core::tensor::num_elements(&shape)?;
    let (data, crc) = match dtype.size() {
        Some(size) => {
            if bytes.len() as u128 != n as u128 * size as u128 {
                return Err(loss(
                    key,
                    format!(
                        "Invalid size in bundle entry: key {key}; stored size {}; expected size {}",
                        bytes.len(),
                        n as u128 * size as u128
                    ),
                ));
            }
            (
                TensorData::Buffer(Bytes::copy_from_slice(bytes)),
                crc32c::crc32c(bytes),
            )
        }
        None => decode_strings(key, n, bytes)?,
    };
    if mask(crc) != entry.crc32c {
        return Err(loss(
            key,
            format!(
                "Checksum does not match: stored {} vs. calculated on the restored bytes {}",
                entry.crc32c,
                mask(crc)
            ),
        ));
    }
    Tensor::new(dtype, shape, data)
}

fn decode_strings(key: &str, n: u64, bytes: &[u8]) -> Result<(TensorData, u32)> {
    let mut at = 0;
    let mut lengths = Vec::new();
    let mut crc = 0;
    // Each length takes at least one byte: `n` is bounded by the bytes.
    if n > bytes.len() as u64 {
        return Err(loss(key, "more strings than bytes"));
    }
    for _ in 0..n {
        let len =
            get_varint(bytes, &mut at).ok_or_else(|| loss(key, "truncated string lengths"))?;
        crc = extend_len(crc, len);
        lengths.push(len);
    }
    let stored = bytes
        .get(at..at + 4)
        .ok_or_else(|| loss(key, "truncated string lengths"))?;
    let stored_crc = u32::from_le_bytes(stored.try_into().unwrap_or_default());
    if stored_crc != mask(crc) {
        return Err(loss(key, "The length checksum does not match"));
    }
    crc = crc32c::crc32c_append(crc, stored);
    at += 4;
    let mut strings = Vec::with_capacity(lengths.len());
    for len in lengths {
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| at.checked_add(l))
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| loss(key, "string past the end of its entry"))?;
        crc = crc32c::crc32c_append(crc, &bytes[at..end]);
        strings.push(Bytes::copy_from_slice(&bytes[at..end]));
        at = end;
    }
    if at != bytes.len() {
        return Err(loss(key, "bytes after the entry's strings"));
    }
    Ok((TensorData::Strings(strings), crc))
}

/// Parses an entry or the header (`what` names it in errors).
pub(super) fn parse<M: Message + Default>(key: &[u8], value: &[u8]) -> Result<M> {
    M::decode(value).map_err(|_| Error::DataLoss {
        location: "checkpoint index".into(),
        reason: format!(
            "Entry for key {} not parseable.",
            String::from_utf8_lossy(key)
        ),
    })
}
