//! A pipeline whose served elements hold a RaggedTensor beside a
//! SparseTensor, both `DT_VARIANT` components to TensorFlow's clients.
//! Inside the pipeline tfdata carries each ragged variant entry as its
//! serialized `RaggedTensorVariant` and a SparseTensor in its `[..., 3]`
//! string form; the worker must serve each as its own kind of variant
//! (`tfdata_core::element::served_variant_proto`; TensorFlow's client reads
//! them in `interop/test_tf_graphs_on_tfdata_workers.py`'s
//! `ragged_elements_served` cases).
//!
//! `tests/data/ragged_elements.graph.pb` is TensorFlow 2.21's serialized
//! graph (deterministic) of
//!
//! ```python
//! lines = tf.constant(["a bc", "d", "", "e f g h"])
//! (tf.data.Dataset.from_tensor_slices(lines).batch(2)
//!  .map(lambda s: (tf.strings.split(tf.strings.split(s), "c"),
//!                  tf.strings.split(s).to_sparse()))
//!  .unbatch().take(3))
//! ```
//!
//! where the unbatched ragged rows are scalar variants TensorFlow declares
//! with a known (scalar) shape, the shape it also gives nested datasets.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use tfdata_core::element::{self, Element, tensor_from_proto};

#[test]
fn ragged_elements_are_served_as_ragged_variants() {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/ragged_elements.graph.pb"
    ))
    .unwrap();
    let graph = tfdata_graph::decode_graph(&bytes).unwrap();
    assert!(tfdata_graph::unsupported_ops(&graph).unwrap().is_empty());
    let translated = tfdata_graph::translate(&graph).unwrap();
    assert_eq!(translated.sparse_variants, vec![0, 1]);
    let mut it = translated.dataset.iter().unwrap();
    let first: Element = it.next_element().unwrap().expect("an element");
    let plain =
        element::to_uncompressed_with_variants(&first, &translated.sparse_variants).unwrap();
    let compressed = element::compress_with_variants(&first, &translated.sparse_variants).unwrap();

    // The ragged row [["a"], ["b", ""]]: a scalar RaggedTensorVariant of its
    // row splits and its values.
    let ragged = &plain.components[0];
    assert_eq!(ragged.dtype, 21);
    assert!(ragged.tensor_shape.as_ref().unwrap().dim.is_empty());
    assert_eq!(ragged.variant_val.len(), 1);
    let v = &ragged.variant_val[0];
    assert_eq!(v.type_name, "RaggedTensorVariant");
    assert_eq!(v.tensors.len(), 2);
    let splits = tensor_from_proto(&v.tensors[0]).unwrap();
    assert_eq!(splits.to_vec::<i64>().unwrap(), vec![0, 1, 3]);
    let values = tensor_from_proto(&v.tensors[1]).unwrap();
    let values: Vec<&[u8]> = values
        .string_values()
        .unwrap()
        .iter()
        .map(|b| b.as_ref())
        .collect();
    assert_eq!(values, vec![&b"a"[..], b"b", b""]);

    // The SparseTensor beside it keeps TensorFlow's sparse variant form.
    let sparse = &plain.components[1];
    assert_eq!(sparse.dtype, 21);
    assert_eq!(sparse.tensor_shape.as_ref().unwrap().dim.len(), 1);
    assert!(
        sparse
            .variant_val
            .iter()
            .all(|v| v.type_name == "tensorflow::Tensor" && v.tensors.len() == 1)
    );
    for i in [0, 1] {
        assert_eq!(compressed.component_metadata[i].dtype, 21);
    }
}
