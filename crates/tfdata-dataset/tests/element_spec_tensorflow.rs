//! Our element-spec encoding against TensorFlow 2.21's bytes
//! (`tests/fixtures/element_spec/generate.py`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;

use prost::Message;
use tfdata_core::{DType, Element, Tensor};
use tfdata_dataset::spec_coder::{from_structured_value, to_structured_value};
use tfdata_dataset::{Dataset, Shape, Structure, TensorSpec};
use tfdata_proto::tensorflow::StructuredValue;

fn cases() -> BTreeMap<String, Vec<u8>> {
    let text = include_str!("fixtures/element_spec/cases.txt");
    text.lines()
        .map(|line| {
            let mut parts = line.splitn(3, ' ');
            let name = parts.next().unwrap().to_string();
            let hex = parts.next().unwrap();
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            (name, bytes)
        })
        .collect()
}

fn t(dtype: DType, shape: Shape) -> Structure {
    Structure::Tensor(TensorSpec::new(dtype, shape))
}

#[test]
fn encodings_are_byte_identical_to_tensorflow() {
    let cases = cases();
    tfdata_dataset::register_function_with_spec(
        "spec_test_pair",
        |_| {
            Ok(Structure::Tuple(vec![
                t(DType::Int64, Shape::scalar()),
                t(DType::String, Shape::scalar()),
            ]))
        },
        |e: Element| Ok(e),
    );
    let ours: Vec<(&str, Structure)> = vec![
        ("range", Dataset::range(3).element_spec().unwrap().unwrap()),
        (
            "batched",
            Dataset::range(3)
                .batch(2, false)
                .element_spec()
                .unwrap()
                .unwrap(),
        ),
        (
            "batched_exact",
            Dataset::range(4)
                .batch(2, true)
                .element_spec()
                .unwrap()
                .unwrap(),
        ),
        (
            "dict",
            Dataset::from_named_tensor_slices(vec![
                (
                    "b".into(),
                    Tensor::from_slice(&[1.0f32, 2.0], vec![1, 2]).unwrap(),
                ),
                (
                    "a".into(),
                    Tensor::strings(vec!["x".into()], vec![1]).unwrap(),
                ),
            ])
            .element_spec()
            .unwrap()
            .unwrap(),
        ),
        (
            "tuple",
            Dataset::range(3)
                .map("spec_test_pair")
                .element_spec()
                .unwrap()
                .unwrap(),
        ),
        (
            "nested",
            Structure::Dict(BTreeMap::from([
                (
                    "z".to_string(),
                    Structure::Tuple(vec![
                        t(DType::Int64, Shape::scalar()),
                        t(DType::Int64, Shape::known(&[2])),
                    ]),
                ),
                ("img".to_string(), t(DType::UInt8, Shape::known(&[2, 3, 3]))),
            ])),
        ),
    ];
    for (name, structure) in ours {
        let tf = &cases[name];
        let ours = to_structured_value(&structure).encode_to_vec();
        // Protobuf map entries have no defined order (TensorFlow's differ
        // run to run), so dictionaries are compared decoded, the rest byte for byte.
        if !matches!(structure, Structure::Dict(_)) {
            assert_eq!(&ours, tf, "case {name}");
        }
        let ours_decoded =
            from_structured_value(&StructuredValue::decode(ours.as_slice()).unwrap()).unwrap();
        assert_eq!(ours_decoded, structure, "case {name}");
        let decoded =
            from_structured_value(&StructuredValue::decode(tf.as_slice()).unwrap()).unwrap();
        assert_eq!(decoded, structure, "case {name}");
    }
}
