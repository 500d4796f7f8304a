//! `CompressedElement` / `UncompressedElement` decoding, as a reader gets
//! them in `GetElementResponse` from a tfdata or TensorFlow worker
//! (`tfdata_core::element::{uncompress, from_uncompressed}`). What decodes
//! must survive a round trip through the encoders.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use tfdata_core::{Element, Result, element};
use tfdata_proto::data::{
    CompressedElement, GetElementResponse, UncompressedElement, get_element_response,
};

fn check(decoded: Result<Element>) {
    let Ok(e) = decoded else { return };
    let compressed = element::compress(&e).expect("a decoded element compresses");
    assert_eq!(
        element::uncompress(&compressed).expect("our own compression decodes"),
        e,
        "compressed round trip"
    );
    assert_eq!(
        element::from_uncompressed(&element::to_uncompressed(&e))
            .expect("our own uncompressed form decodes"),
        e,
        "uncompressed round trip"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&kind, bytes)) = data.split_first() else {
        return;
    };
    match kind % 3 {
        0 => {
            if let Ok(c) = CompressedElement::decode(bytes) {
                check(element::uncompress(&c));
            }
        }
        1 => {
            if let Ok(u) = UncompressedElement::decode(bytes) {
                check(element::from_uncompressed(&u));
            }
        }
        _ => {
            // The whole response, as the client's GetElement path decodes it.
            if let Ok(r) = GetElementResponse::decode(bytes) {
                match r.element {
                    Some(get_element_response::Element::Compressed(c)) => {
                        check(element::uncompress(&c))
                    }
                    Some(get_element_response::Element::Uncompressed(u)) => {
                        check(element::from_uncompressed(&u))
                    }
                    None => {}
                }
            }
        }
    }
});
