//! A pipeline whose served elements are SparseTensors: TensorFlow gives its
//! clients a `DT_VARIANT` component (indices, values and dense shape, one
//! tensor each). Inside the pipeline tfdata carries a SparseTensor in its
//! string form; the translation names the served components that are such
//! variants, so the worker sends them as TensorFlow's variants
//! (`tfdata_core::element::sparse_variant_proto`; TensorFlow's client reads
//! them in `interop/test_tf_graphs_on_tfdata_workers.py`'s
//! `sparse_elements_served` cases).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use tfdata_core::element::{self, Element};

#[test]
fn sparse_elements_are_served_as_variants() {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/sparse_elements.graph.pb"
    ))
    .unwrap();
    let graph = tfdata_graph::decode_graph(&bytes).unwrap();
    assert!(tfdata_graph::unsupported_ops(&graph).unwrap().is_empty());
    let translated = tfdata_graph::translate(&graph).unwrap();
    assert!(!translated.sparse_variants.is_empty());
    let mut it = translated.dataset.iter().unwrap();
    let first: Element = it.next_element().unwrap().expect("an element");
    // Each served SparseTensor becomes a DT_VARIANT of tensors, both wire forms.
    let plain =
        element::to_uncompressed_with_variants(&first, &translated.sparse_variants).unwrap();
    let compressed = element::compress_with_variants(&first, &translated.sparse_variants).unwrap();
    for &i in &translated.sparse_variants {
        let proto = &plain.components[i];
        assert_eq!(proto.dtype, 21);
        assert_eq!(
            proto
                .tensor_shape
                .as_ref()
                .unwrap()
                .dim
                .last()
                .unwrap()
                .size,
            3
        );
        assert!(
            proto
                .variant_val
                .iter()
                .all(|v| v.type_name == "tensorflow::Tensor" && v.tensors.len() == 1)
        );
        assert_eq!(compressed.component_metadata[i].dtype, 21);
    }
}
