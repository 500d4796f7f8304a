//! `DecodeJSONExample` (`tf.io.decode_json_example`): each proto3 JSON
//! `tf.train.Example` to its binary form, as TensorFlow's protobuf JSON
//! reader writes it.
//!
//! That reader streams: fields are written in the order the JSON gives
//! them (a repeated `features` key writes the field twice), map entries
//! in JSON order, repeated scalars unpacked, a `null` leaves a field out
//! (a `null` map value writes the entry's key alone), and a scalar where
//! a list is expected is a list of one. It is lenient where proto3 JSON is
//! strict, and so is this module, as observed against TensorFlow 2.21:
//! single-quoted strings, trailing commas, integers written as strings
//! (decimal, hexadecimal `0x..`, or a float text with no fraction),
//! `"NaN"`/`"Infinity"` in any case, base64 with or without padding and
//! in either alphabet. Errors are its "Error while parsing JSON: ..."
//! messages with the field path and the position; TensorFlow's message
//! pads some of its words with a varying number of spaces, which the
//! differential cases collapse to one.

use bytes::Bytes;
use tfdata_core::{Error, Result, Tensor};

use super::strings::strings;
use super::{Compute, KernelDef};
use crate::attrs::NodeAttrs;

mod reader;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "DecodeJSONExample",
    outputs: |_| Ok(vec![("binary_examples", 1)]),
    build: decode_json_example,
}];

fn decode_json_example(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        super::expect_inputs("DecodeJSONExample", &inputs, 1)?;
        let json = &inputs[0];
        let records = strings("DecodeJSONExample", json, "json_examples")?;
        let mut out = Vec::with_capacity(records.len());
        for r in records {
            let bytes = reader::example(r)
                .map_err(|m| Error::InvalidArgument(format!("Error while parsing JSON: {m}")))?;
            out.push(Bytes::from(bytes));
        }
        Ok(vec![Tensor::strings(out, json.shape().to_vec())?])
    }))
}

#[cfg(test)]
mod tests {
    use super::reader::example;

    #[test]
    fn writes_fields_in_json_order() {
        let out = example(br#"{"features":{"feature":{"x":{"int64List":{"value":[1]}}}}}"#);
        assert_eq!(out.unwrap(), b"\n\x0b\n\t\n\x01x\x12\x04\x1a\x02\x08\x01");
    }

    /// Every cut and every flipped byte of a JSON Example is decoded or
    /// refused, never a panic.
    #[test]
    fn hostile_json_never_panics() {
        let text: &[u8] = br#"{"features":{"feature":{"b":{"bytesList":{"value":["aGk=",null]}},"f":{"floatList":{"value":[1.5,"NaN",-1e-45]}},"i":{"int64List":{"value":["0x10",-3,1e3]}},"e":{"\u00e9":null}}}}"#;
        for cut in 0..text.len() {
            let _ = example(&text[..cut]);
        }
        for i in 0..text.len() {
            for flip in [0x01u8, 0x20, 0x80] {
                let mut bad = text.to_vec();
                bad[i] ^= flip;
                let _ = example(&bad);
            }
        }
    }
}
