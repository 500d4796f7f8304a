//! `SerializeTensor` and `ParseTensor`: a tensor to and from the bytes of
//! its `TensorProto` (`tf.io.serialize_tensor`, `tf.io.parse_tensor`),
//! with TensorFlow 2.21's encoding and its reading rules.
//!
//! Serializing writes TensorFlow's "tensor content" form: the dtype, the
//! shape (present even when empty) and the raw little-endian values, or
//! `string_val` for strings; bytes equal TensorFlow's.
//!
//! Parsing takes every form TensorFlow reads: raw content, or a typed
//! value list, which is cut to the shape when too long, padded with its
//! last value when short, and zeros (empty strings) when absent; an
//! unknown-rank shape reads as a scalar, and a shape without elements
//! ignores what the proto carries, as in TensorFlow. Malformed bytes,
//! invalid dtypes or shapes and content of the wrong size fail with
//! TensorFlow's errors, then a dtype other than `out_type`. A tensor larger
//! than tfdata's output limit is refused as one TensorFlow cannot allocate
//! (its limit is memory); dtypes tfdata cannot hold (resources, variants,
//! 4-bit integers) are refused.

use bytes::Bytes;
use prost::Message;
use tfdata_core::element::{tensor_from_proto, tensor_to_proto};
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_proto::tensorflow::{DataType, TensorProto};

use super::layout::{err, shape_str, take};
use super::{Compute, KernelDef, OutputArgs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "SerializeTensor",
        outputs: serialized_output,
        build: build_serialize,
    },
    KernelDef {
        op: "ParseTensor",
        outputs: super::one_output,
        build: build_parse,
    },
];

fn serialized_output(_: &NodeAttrs) -> Result<OutputArgs> {
    Ok(vec![("serialized", 1)])
}

fn build_serialize(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    Ok(Box::new(move |inputs| {
        let [t] = take::<1>(&op, inputs)?;
        let bytes = tensor_to_proto(&t).encode_to_vec();
        super::check_size(&op, DType::UInt8, bytes.len() as u64)?;
        Ok(vec![Tensor::scalar_string(Bytes::from(bytes))])
    }))
}

fn build_parse(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    let out_type = attrs.dtype_code("out_type")?;
    Ok(Box::new(move |inputs| {
        let [s] = take::<1>(&op, inputs)?;
        if !s.shape().is_empty() {
            return Err(err(
                &op,
                format!(
                    "Expected `serialized` to be a scalar, got shape: {}",
                    shape_str(s.shape())
                ),
            ));
        }
        let TensorData::Strings(v) = s.data() else {
            return Err(err(&op, "`serialized` must be a string tensor"));
        };
        let bytes = v.first().cloned().unwrap_or_default();
        Ok(vec![parse(&op, &bytes, out_type)?])
    }))
}

/// TensorFlow's `DataTypeString` for a dtype code: `float`, `int32`, `half`,
/// `resource`, ...
fn type_name(code: i32) -> String {
    DataType::try_from(code).map_or_else(
        |_| format!("unknown dtype enum ({code})"),
        |d| {
            d.as_str_name()
                .trim_start_matches("DT_")
                .to_ascii_lowercase()
        },
    )
}

/// Standard base64 with padding, as TensorFlow quotes unparsable bytes.
fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for chunk in b.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &x)| acc | (u32::from(x) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(A[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn cannot(op: &str, why: impl std::fmt::Display) -> Error {
    // TensorFlow's text (it goes on with a redacted dump of the proto).
    err(op, format!("Cannot parse tensor from proto: {why}"))
}

fn parse(op: &str, bytes: &[u8], out_type: i32) -> Result<Tensor> {
    let mut proto = TensorProto::decode(bytes).map_err(|_| {
        err(
            op,
            format!(
                "Could not parse `serialized` as TensorProto, base64: {}",
                base64(bytes)
            ),
        )
    })?;
    let code = proto.dtype;
    if code == 0 || DataType::try_from(code).is_err() {
        return Err(cannot(op, format!("invalid dtype {code}")));
    }
    // The shape: unknown rank reads as a scalar; dimensions must be
    // non-negative and their product fit in 63 bits.
    let mut shape: Vec<i64> = Vec::new();
    if let Some(s) = proto.tensor_shape.as_mut() {
        if s.unknown_rank {
            s.dim.clear();
            s.unknown_rank = false;
        }
        shape = s.dim.iter().map(|d| d.size).collect();
    }
    if shape.iter().any(|&d| d < 0) {
        return Err(cannot(
            op,
            format!("negative dimension in {}", shape_str(&shape)),
        ));
    }
    let n = shape
        .iter()
        .try_fold(1u64, |acc, &d| {
            acc.checked_mul(d as u64).filter(|&x| x <= i64::MAX as u64)
        })
        .ok_or_else(|| cannot(op, format!("shape {} is too large", shape_str(&shape))))?;
    let Ok(dtype) = DType::from_code(code) else {
        if code != out_type {
            return Err(mismatch(op, code, out_type));
        }
        return Err(Error::Unimplemented(format!(
            "{op}: tensors of {} are not supported by tfdata",
            type_name(code)
        )));
    };
    if super::check_size(op, dtype, n).is_err() {
        return Err(cannot(
            op,
            format!(
                "{n} {} values exceed tfdata's limit of {} bytes",
                type_name(code),
                crate::MAX_TENSOR_BYTES
            ),
        ));
    }
    let t = if n == 0 {
        // No elements: whatever content or values the proto carries.
        Tensor::new(
            dtype,
            shape,
            match dtype.size() {
                Some(_) => TensorData::Buffer(Bytes::new()),
                None => TensorData::Strings(Vec::new()),
            },
        )?
    } else if proto.tensor_content.is_empty() {
        typed(&mut proto, dtype, shape, n as usize)?
    } else {
        tensor_from_proto(&proto).map_err(|e| cannot(op, e))?
    };
    if code != out_type {
        return Err(mismatch(op, code, out_type));
    }
    Ok(t)
}

fn mismatch(op: &str, parsed: i32, want: i32) -> Error {
    err(
        op,
        format!(
            "Type mismatch between parsed tensor ({}) and dtype ({})",
            type_name(parsed),
            type_name(want)
        ),
    )
}

/// A tensor from a typed value list: cut to `n` values, zeros when there
/// are none (tfdata-core pads a short list with its last value).
fn typed(proto: &mut TensorProto, dtype: DType, shape: Vec<i64>, n: usize) -> Result<Tensor> {
    use DType::*;
    // How many values the list for `dtype` holds, in elements.
    let have = match dtype {
        Float => proto.float_val.len(),
        Double => proto.double_val.len(),
        Int64 => proto.int64_val.len(),
        UInt32 => proto.uint32_val.len(),
        UInt64 => proto.uint64_val.len(),
        Bool => proto.bool_val.len(),
        Half | BFloat16 => proto.half_val.len(),
        Complex64 => proto.scomplex_val.len() / 2,
        Complex128 => proto.dcomplex_val.len() / 2,
        String => proto.string_val.len(),
        Float8E5M2 | Float8E4M3FN | Float8E4M3FNUZ | Float8E4M3B11FNUZ | Float8E5M2FNUZ => {
            proto.float8_val.len()
        }
        _ => proto.int_val.len(),
    };
    if have == 0 {
        return match dtype.size() {
            Some(size) => Tensor::new(dtype, shape, TensorData::Buffer(vec![0u8; n * size].into())),
            None => Tensor::strings(vec![Bytes::new(); n], shape),
        };
    }
    if have > n {
        proto.float_val.truncate(n);
        proto.double_val.truncate(n);
        proto.int64_val.truncate(n);
        proto.uint32_val.truncate(n);
        proto.uint64_val.truncate(n);
        proto.bool_val.truncate(n);
        proto.half_val.truncate(n);
        proto.scomplex_val.truncate(2 * n);
        proto.dcomplex_val.truncate(2 * n);
        proto.string_val.truncate(n);
        proto.float8_val.truncate(n);
        proto.int_val.truncate(n);
    }
    if dtype == String && proto.string_val.len() < n {
        // Padded with the last string, as TensorFlow does.
        let last = proto.string_val.last().cloned().unwrap_or_default();
        proto.string_val.resize(n, last);
    }
    tensor_from_proto(proto)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{run, ty};
    use bytes::Bytes;
    use tfdata_core::{DType, Tensor};

    #[test]
    fn round_trips_and_refuses() {
        let t = Tensor::from_slice(&[1.5f32, -2.0], vec![2, 1]).unwrap();
        let s = run(
            "SerializeTensor",
            &[("T", ty(DType::Float))],
            vec![t.clone()],
        )
        .unwrap();
        let back = run("ParseTensor", &[("out_type", ty(DType::Float))], s.clone()).unwrap();
        assert_eq!(back[0], t);
        assert!(run("ParseTensor", &[("out_type", ty(DType::Int32))], s).is_err());
        let junk = Tensor::scalar_string(Bytes::from_static(b"\xff\xff\x01abc"));
        let e = run("ParseTensor", &[("out_type", ty(DType::Float))], vec![junk]).unwrap_err();
        assert!(e.to_string().contains("base64: //8BYWJj"), "{e}");
    }
}
