//! The element encodings checked against bytes TensorFlow 2.21 produced.
//!
//! `tests/fixtures/generate.py` wrote, for each element below, TensorFlow's
//! serialized `CompressedElement` (`<name>.compressed.pb`) and each component's
//! `tf.io.serialize_tensor` (`<name>.component<i>.tensorproto.pb`). The
//! expected elements are written out here independently of the script.
//!
//! For every fixture:
//! 1. `uncompress` of TensorFlow's `CompressedElement` is the expected element;
//! 2. our `compress` of the element has TensorFlow's version and component
//!    metadata, and its Snappy block decompresses to TensorFlow's payload (the
//!    Snappy bytes themselves may legitimately differ between encoders);
//! 3. `tensor_from_proto` of each TensorFlow `TensorProto` is the expected
//!    component, and `tensor_to_proto` re-encodes it exactly as TensorFlow did.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::path::PathBuf;

use bytes::Bytes;
use tfdata_core::element::{
    compress, from_uncompressed, tensor_from_proto, tensor_to_proto, to_uncompressed, uncompress,
};
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Element, Tensor};
use tfdata_proto::data::{CompressedElement, UncompressedElement};
use tfdata_proto::prost::Message;
use tfdata_proto::tensorflow::TensorProto;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn fixture(file: &str) -> std::io::Result<Vec<u8>> {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "fixtures", file]
        .iter()
        .collect();
    std::fs::read(&path).map_err(|e| std::io::Error::new(e.kind(), format!("{path:?}: {e}")))
}

fn snappy_payload(data: &[u8]) -> Result<Vec<u8>, snap::Error> {
    snap::raw::Decoder::new().decompress_vec(data)
}

/// Checks one fixture against the element TensorFlow was given.
fn check(name: &str, expected: Element) -> TestResult {
    // 1. TensorFlow's CompressedElement decodes to the element.
    let tf_bytes = fixture(&format!("{name}.compressed.pb"))?;
    let tf_compressed = CompressedElement::decode(tf_bytes.as_slice())?;
    let uncompressed = uncompress(&tf_compressed)?;
    assert_eq!(
        uncompressed, expected,
        "{name}: uncompress(TF CompressedElement)"
    );

    // 2. Ours matches TensorFlow's in everything but the Snappy encoder's choices.
    let ours = compress(&expected)?;
    assert_eq!(ours.version, tf_compressed.version, "{name}: version");
    assert_eq!(
        ours.component_metadata, tf_compressed.component_metadata,
        "{name}: component_metadata"
    );
    let tf_payload = snappy_payload(&tf_compressed.data)?;
    let our_payload = snappy_payload(&ours.data)?;
    assert!(
        our_payload == tf_payload,
        "{name}: payloads differ ({} bytes ours, {} bytes TensorFlow's)",
        our_payload.len(),
        tf_payload.len()
    );
    // With TensorFlow's Snappy block in place, the serialization is TensorFlow's.
    let with_tf_data = CompressedElement {
        data: tf_compressed.data.clone(),
        ..ours.clone()
    };
    assert!(
        with_tf_data.encode_to_vec() == tf_bytes,
        "{name}: CompressedElement serializes differently"
    );
    assert_eq!(uncompress(&ours)?, expected, "{name}: round trip");

    // 3. TensorFlow's TensorProtos ("AsProtoTensorContent") and ours.
    let mut tf_protos = Vec::new();
    for (i, component) in expected.components.iter().enumerate() {
        let file = format!("{name}.component{i}.tensorproto.pb");
        let tf_proto_bytes = fixture(&file)?;
        let tf_proto = TensorProto::decode(tf_proto_bytes.as_slice())?;
        let decoded = tensor_from_proto(&tf_proto)?;
        assert_eq!(&decoded, component, "{file}: tensor_from_proto");
        assert_eq!(decoded, uncompressed.components[i], "{file}: vs uncompress");
        let ours = tensor_to_proto(component);
        assert_eq!(ours, tf_proto, "{file}: tensor_to_proto");
        assert!(
            ours.encode_to_vec() == tf_proto_bytes,
            "{file}: TensorProto serializes differently"
        );
        tf_protos.push(tf_proto);
    }
    let n = expected.components.len();
    assert!(
        fixture(&format!("{name}.component{n}.tensorproto.pb")).is_err(),
        "{name}: TensorFlow's element has more than {n} components"
    );
    let tf_uncompressed = UncompressedElement {
        components: tf_protos,
    };
    assert_eq!(
        from_uncompressed(&tf_uncompressed)?,
        expected,
        "{name}: from_uncompressed"
    );
    assert_eq!(
        to_uncompressed(&expected),
        tf_uncompressed,
        "{name}: to_uncompressed"
    );
    Ok(())
}

fn strings(values: &[&[u8]], shape: Vec<i64>) -> tfdata_core::Result<Tensor> {
    Tensor::strings(
        values.iter().map(|s| Bytes::copy_from_slice(s)).collect(),
        shape,
    )
}

/// A tensor of a dtype without a native Rust type, from its little-endian bytes.
fn raw(dtype: DType, shape: Vec<i64>, bytes: Vec<u8>) -> tfdata_core::Result<Tensor> {
    Tensor::new(dtype, shape, TensorData::Buffer(bytes.into()))
}

/// `n` float32 values in [-8, 8) from xorshift32, as `xorshift_f32` in
/// generate.py makes them.
fn xorshift_f32(n: usize, seed: u32) -> Vec<f32> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            ((x >> 8) as i32 - (1 << 23)) as f32 * (-20f32).exp2()
        })
        .collect()
}

#[test]
fn a_int64_scalar() -> TestResult {
    check("a_int64_scalar", Element::single(Tensor::scalar(42i64)))
}

#[test]
fn b_float32_matrix() -> TestResult {
    let t = Tensor::from_slice(&[1.5f32, -2.0, 3.25, 0.0], vec![2, 2])?;
    check("b_float32_matrix", Element::single(t))
}

#[test]
fn c_tuple() -> TestResult {
    check(
        "c_tuple",
        Element::new(vec![
            strings(&[b"ab", b"", b"xyz"], vec![3])?,
            Tensor::from_slice::<i32>(&[], vec![0, 4])?,
            Tensor::from_slice(&[true, false], vec![2])?,
        ]),
    )
}

#[test]
fn d_float32_random() -> TestResult {
    let values = xorshift_f32(256 * 256, 2_463_534_242);
    // Spot values, so a generator drift is told apart from an encoding bug.
    assert_eq!(values[..3], [-5.304858, 1.3034163, -0.310462]);
    let t = Tensor::from_slice(&values, vec![256, 256])?;
    check("d_float32_random", Element::single(t))
}

#[test]
fn e_uint8_image() -> TestResult {
    let pixels: Vec<u8> = (0..48u32).map(|i| (i * 5 % 256) as u8).collect();
    let t = Tensor::from_slice(&pixels, vec![4, 4, 3])?;
    check("e_uint8_image", Element::single(t))
}

#[test]
fn f_scalars() -> TestResult {
    check(
        "f_scalars",
        Element::new(vec![
            Tensor::scalar(std::f64::consts::E),
            Tensor::scalar(-12345i16),
            Tensor::scalar(65535u16),
            Tensor::scalar_string(&b"tf.data \x00\xff"[..]),
        ]),
    )
}

#[test]
fn g_misc_dtypes() -> TestResult {
    let le32 = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let le16 = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let complex128: Vec<u8> = [0.25f64, -1.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    check(
        "g_misc_dtypes",
        Element::new(vec![
            Tensor::vector(&[-128i8, 0, 127]),
            Tensor::vector(&[0u32, u32::MAX]),
            Tensor::vector(&[0u64, u64::MAX]),
            raw(DType::Complex64, vec![2], le32(&[1.0, 2.0, -3.5, 0.0]))?,
            raw(DType::Complex128, vec![1], complex128)?,
            // IEEE half 1.0, -2.5, 65504 (its largest finite value).
            raw(DType::Half, vec![3], le16(&[0x3C00, 0xC100, 0x7BFF]))?,
            // bfloat16 1.0, -2.5.
            raw(DType::BFloat16, vec![2], le16(&[0x3F80, 0xC020]))?,
        ]),
    )
}

#[test]
fn h_empty() -> TestResult {
    check(
        "h_empty",
        Element::new(vec![
            Tensor::from_slice::<f32>(&[], vec![0])?,
            strings(&[], vec![2, 0])?,
            Tensor::scalar_string(""),
        ]),
    )
}
