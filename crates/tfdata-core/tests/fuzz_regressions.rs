//! Inputs that crashed tfdata-core's decoders under the fuzz targets
//! (`fuzz/`, docs/fuzzing.md), kept so the bugs stay fixed. A test names
//! its target; the hex is the target's whole input.

use prost::Message;
use tfdata_core::element;
use tfdata_core::error::Error;
use tfdata_proto::data::UncompressedElement;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// compressed_element: an 18-byte `UncompressedElement` holding an int64
/// `TensorProto` of shape [2^30] with one value in `int64_val`. Padding the
/// value list to the shape allocated and filled 8 GiB (out of memory); a
/// shape of 2^40 aborted the process on the allocation, and 2^62 overflowed
/// the size. The same decoder reads tensors in pipelines (any client's
/// `GetOrRegisterDataset`), GraphDef constants and splits.
#[test]
fn compressed_element_padded_value_list_of_huge_shape() {
    let input = hex("010a0f080912081206088080808004520101");
    // The target's first byte picks the message kind (UncompressedElement).
    let message = UncompressedElement::decode(&input[1..]).expect("an UncompressedElement");
    let err = element::from_uncompressed(&message).expect_err("refused");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("2 GiB"), "{err}");

    for dim in [1i64 << 40, 1 << 62] {
        let mut message = message.clone();
        let shape = message.components[0]
            .tensor_shape
            .as_mut()
            .expect("a shape");
        shape.dim[0].size = dim;
        assert!(
            element::from_uncompressed(&message).is_err(),
            "shape [{dim}]"
        );
    }

    // Padding within the bound still fills the shape, as in TensorFlow.
    let mut message = message;
    message.components[0]
        .tensor_shape
        .as_mut()
        .expect("a shape")
        .dim[0]
        .size = 1000;
    let e = element::from_uncompressed(&message).expect("padded");
    assert_eq!(
        e.components[0].to_vec::<i64>().expect("int64"),
        vec![1; 1000]
    );
}
