//! `DecodePaddedRaw` (`tf.io.decode_padded_raw`): each string's bytes as
//! numbers, zero-padded (or cut) to `fixed_length` bytes first, so that
//! strings of different lengths decode to one rectangular tensor.

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};

use super::layout::{err, shape_str, take};
use super::strings::strings;
use super::{Compute, KernelDef, check_size, one_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "DecodePaddedRaw",
    outputs: one_output,
    build: decode_padded_raw,
}];

const OP: &str = "DecodePaddedRaw";

fn decode_padded_raw(attrs: &NodeAttrs) -> Result<Compute> {
    let out_type = attrs.dtype("out_type")?;
    // TensorFlow's op registration allows these types only.
    if !matches!(
        out_type,
        DType::Half
            | DType::Float
            | DType::Double
            | DType::Int32
            | DType::UInt16
            | DType::UInt8
            | DType::Int16
            | DType::Int8
            | DType::Int64
            | DType::BFloat16
    ) {
        return Err(err(
            OP,
            format!(
                "Value for attr 'out_type' of {} is not in the list of allowed values: half, \
                 float, double, int32, uint16, uint8, int16, int8, int64, bfloat16",
                out_type.name()
            ),
        ));
    }
    if out_type == DType::Half {
        // Registered, but TensorFlow 2.21 has no CPU kernel for it.
        return Err(Error::Unimplemented(format!(
            "{OP}: TensorFlow has no CPU kernel for out_type half"
        )));
    }
    let size = out_type.size().unwrap_or(1);
    let little_endian = attrs.bool_or("little_endian", true)?;
    Ok(Box::new(move |inputs| {
        let [input, fixed_length] = take::<2>(OP, inputs)?;
        let values = strings(OP, &input, "input_bytes")?;
        if fixed_length.dtype() != DType::Int32 {
            return Err(err(OP, "fixed_length must be int32"));
        }
        if !fixed_length.shape().is_empty() {
            return Err(err(
                OP,
                format!(
                    "k must be scalar, got shape {}",
                    shape_str(fixed_length.shape())
                ),
            ));
        }
        let width = i64::from(fixed_length.to_scalar::<i32>()?);
        if width <= 0 {
            return Err(err(
                OP,
                format!("fixed_length ({width}) must be greater than zero."),
            ));
        }
        let width = width as usize;
        if !width.is_multiple_of(size) {
            return Err(err(
                OP,
                format!(
                    "fixed_length ({width}) must be a multiple of the size of out_type ({size})"
                ),
            ));
        }
        let per_string = width / size;
        check_size(OP, out_type, (values.len() as u64) * per_string as u64)?;
        let mut buf = vec![0u8; values.len() * width];
        for (row, v) in buf.chunks_exact_mut(width).zip(values) {
            let n = v.len().min(width);
            row[..n].copy_from_slice(&v[..n]);
        }
        // Byte order applies per value, padding included (TensorFlow pads
        // the bytes, then decodes every value in the row).
        if !little_endian && size > 1 {
            for c in buf.chunks_exact_mut(size) {
                c.reverse();
            }
        }
        let mut shape = input.shape().to_vec();
        shape.push(per_string as i64);
        Ok(vec![Tensor::new(
            out_type,
            shape,
            TensorData::Buffer(Bytes::from(buf)),
        )?])
    }))
}
