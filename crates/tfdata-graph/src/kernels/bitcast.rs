//! `Bitcast`: a tensor's bytes read as another numeric type, as
//! `tf.random.Generator`'s methods read its int64 state as the uint64 key
//! and counter of the stateless ops.
//!
//! Same-size types keep the shape; a wider input gains a last dimension of
//! `in_size / out_size` values each; a narrower one must end in a dimension
//! of `out_size / in_size`, which it loses. Values are little-endian, as
//! TensorFlow's on the platforms it runs on.

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};

use super::{Compute, KernelDef, expect_inputs, one_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "Bitcast",
    outputs: one_output,
    build,
}];

/// The types TensorFlow's `Bitcast` takes (numbers, not bool or string).
const NUMERIC: &[DType] = &[
    DType::BFloat16,
    DType::Half,
    DType::Float,
    DType::Double,
    DType::Int64,
    DType::Int32,
    DType::UInt8,
    DType::UInt16,
    DType::UInt32,
    DType::UInt64,
    DType::Int8,
    DType::Int16,
    DType::Complex64,
    DType::Complex128,
    DType::QInt8,
    DType::QUInt8,
    DType::QInt16,
    DType::QUInt16,
    DType::QInt32,
];

fn build(attrs: &NodeAttrs) -> Result<Compute> {
    let (from, to) = (attrs.dtype("T")?, attrs.dtype("type")?);
    for d in [from, to] {
        if !NUMERIC.contains(&d) {
            return Err(attrs.error(format!("Bitcast does not take dtype {d}")));
        }
    }
    let size = |d: DType| d.size().unwrap_or(1) as i64;
    let (in_size, out_size) = (size(from), size(to));
    Ok(Box::new(move |inputs| {
        expect_inputs("Bitcast", &inputs, 1)?;
        let t = &inputs[0];
        if t.dtype() != from {
            return Err(Error::InvalidArgument(format!(
                "Bitcast: input is {}, the node's T is {}",
                t.dtype(),
                from
            )));
        }
        let mut shape = t.shape().to_vec();
        let last = shape.last().copied();
        if in_size > out_size {
            shape.push(in_size / out_size);
        } else if in_size < out_size {
            if last != Some(out_size / in_size) {
                // TensorFlow names the types by their enum codes here.
                return Err(Error::InvalidArgument(format!(
                    "Cannot bitcast from {} to {}",
                    from.code(),
                    to.code()
                )));
            }
            shape.pop();
        }
        let bytes = match t.data() {
            TensorData::Buffer(b) => b.clone(),
            TensorData::Strings(_) => Bytes::new(),
        };
        Ok(vec![Tensor::new(to, shape, TensorData::Buffer(bytes))?])
    }))
}
