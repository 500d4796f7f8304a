//! The element stream's batch form (`tfdata.stream.ElementBatch`), decoded
//! by `tfdata_core::batch::decode_batch` on the reader. What decodes must
//! survive a round trip through `BatchEncoder` in every compression mode.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use tfdata_core::batch::{BatchEncoder, ChunkCompression, Compressor, decode_batch};
use tfdata_proto::tfdata::stream::ElementBatch;

fuzz_target!(|data: &[u8]| {
    let Ok(batch) = ElementBatch::decode(data) else {
        return;
    };
    let Ok(elements) = decode_batch(batch) else {
        return;
    };
    for mode in [
        ChunkCompression::Never,
        ChunkCompression::Always,
        ChunkCompression::Auto,
    ] {
        let mut encoder = BatchEncoder::new();
        for e in &elements {
            encoder.push(e);
        }
        let again = encoder
            .finish(&mut Compressor::new(mode))
            .expect("decoded elements encode");
        let wire = again.encode_to_vec();
        let back = ElementBatch::decode(wire.as_slice()).expect("our own batch parses");
        assert_eq!(
            decode_batch(back).expect("our own batch decodes"),
            elements,
            "{mode:?} round trip"
        );
    }
});
