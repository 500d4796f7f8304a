//! A pipeline whose served elements are SparseTensors: TensorFlow gives its
//! clients a `DT_VARIANT` component, which tfdata's dense tensors cannot
//! hold (inside a pipeline a SparseTensor is carried in its string form and
//! read back by the next map, as the differential cases check). Such a graph
//! is reported unsupported, so the dispatcher routes it to TensorFlow
//! workers, and a tfdata worker handed it fails instead of serving strings.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

#[test]
fn sparse_elements_are_not_served() {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/sparse_elements.graph.pb"
    ))
    .unwrap();
    let graph = tfdata_graph::decode_graph(&bytes).unwrap();
    let missing = tfdata_graph::unsupported_ops(&graph).unwrap();
    assert!(
        missing.iter().any(|m| m.contains("DT_VARIANT")),
        "{missing:?}"
    );
    let err = tfdata_graph::translate(&graph).err().expect("refused");
    assert_eq!(err.code(), tonic::Code::Unimplemented, "{err}");
}
