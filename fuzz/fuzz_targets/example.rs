//! `tf.train.Example` parsing (`tfdata_dataset::example`): the bytes of
//! TFRecord files, parsed with feature specs that themselves arrive in a
//! pipeline. The input picks up to four specs and one to four Examples.
//!
//! Input: a byte giving the number of specs (low 2 bits + 1) and whether to
//! parse as a batch (bit 2); per spec: a name byte, a kind and dtype byte,
//! a rank byte, a default byte and one byte per dimension; then the Examples, each a u16-length-prefixed part
//! (the last one takes the rest).
#![no_main]

use std::collections::BTreeMap;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tfdata_core::{DType, Tensor};
use tfdata_dataset::example::{FeatureSpec, parse_example_batch, parse_single_example};
use tfdata_fuzz::Input;

const NAMES: [&str; 4] = ["a", "b", "label", "image"];

fn dim(b: u8) -> i64 {
    match b {
        0xff => 1 << 40,
        0xfe => -1,
        b => i64::from(b % 5),
    }
}

fn spec(input: &mut Input) -> (String, FeatureSpec) {
    let name = NAMES[usize::from(input.u8() & 3)].to_string();
    let kind = input.u8();
    let dtype = match (kind >> 1) % 4 {
        0 => DType::Int64,
        1 => DType::Float,
        2 => DType::String,
        _ => DType::Int32,
    };
    let shape_byte = input.u8();
    let default_byte = input.u8();
    if kind & 1 == 1 {
        return (name, FeatureSpec::var_len(dtype));
    }
    let shape: Vec<i64> = (0..shape_byte % 4).map(|_| dim(input.u8())).collect();
    let spec = FeatureSpec::fixed(dtype, shape.clone());
    if default_byte & 1 == 0 {
        return (name, spec);
    }
    // A default of the spec's size when that is small, else of another size.
    let n = match tfdata_core::tensor::num_elements(&shape) {
        Ok(n) if n <= 64 => n as usize,
        _ => usize::from(default_byte >> 1) % 4,
    };
    let default = match dtype {
        DType::Float => Tensor::from_slice(&vec![1.5f32; n], vec![n as i64]),
        DType::String => Tensor::strings(vec![Bytes::from_static(b"d"); n], vec![n as i64]),
        _ => Tensor::from_slice(&vec![7i64; n], vec![n as i64]),
    };
    match default {
        Ok(default) => (name, spec.with_default(default)),
        Err(_) => (name, spec),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let head = input.u8();
    let mut specs = BTreeMap::new();
    for _ in 0..=(head & 3) {
        let (name, spec) = spec(&mut input);
        specs.insert(name, spec);
    }
    if head & 4 == 0 {
        let example = input.rest();
        if let Ok(out) = parse_single_example(example, &specs) {
            for (name, spec) in &specs {
                let t = &out[name];
                assert_eq!(t.dtype(), spec.dtype(), "{name}");
                if let FeatureSpec::Fixed { shape, .. } = spec {
                    assert_eq!(t.shape(), shape.as_slice(), "{name}");
                }
            }
        }
        return;
    }
    let mut examples = Vec::new();
    while !input.is_empty() && examples.len() < 4 {
        examples.push(Bytes::copy_from_slice(input.part()));
    }
    if let Ok(out) = parse_example_batch(&examples, &specs) {
        for (name, spec) in &specs {
            let t = &out[name];
            assert_eq!(t.dtype(), spec.dtype(), "{name}");
            if let FeatureSpec::Fixed { shape, .. } = spec {
                assert_eq!(t.shape()[0], examples.len() as i64, "{name}");
                assert_eq!(&t.shape()[1..], shape.as_slice(), "{name}");
            }
        }
    }
});
