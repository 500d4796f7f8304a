//! The element stream as a reader receives it: gRPC-framed messages in
//! HTTP/2 DATA frames cut at arbitrary points, read by
//! `tfdata_rpc::raw_grpc::MessageReader` into ropes, decoded as
//! `ElementBatch`es (`raw_grpc::decode`, slicing the frames) and taken
//! apart by `decode_batch`; and the worker's side of the same stream,
//! reading a reader's `StreamRequest`s.
//!
//! Input: a frame length byte, a flags byte (bit 0: the worker's side;
//! bit 1: end with trailers; bits 2-3: their grpc-status), then the body.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tfdata_core::batch::decode_batch;
use tfdata_fuzz::{Frames, Input};
use tfdata_proto::tfdata::stream::{ElementBatch, StreamRequest};
use tfdata_rpc::raw_grpc::{self, MessageReader};

/// What one message may be (the worker's own limit for requests is 1 MiB;
/// a reader's is larger, but the fuzz input is far smaller anyway).
const MAX_MESSAGE_BYTES: usize = 1 << 20;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let frame_len = usize::from(input.u8()) + 1;
    let flags = input.u8();
    let body = input.rest();
    let status = (flags & 2 != 0).then(|| ["0", "1", "14", "x"][usize::from(flags >> 2) & 3]);
    let frames = Frames::new(body, frame_len, status);
    runtime().block_on(async {
        if flags & 1 != 0 {
            let mut reader = MessageReader::requests(frames, MAX_MESSAGE_BYTES);
            // Every message takes at least its 5-byte prefix.
            for _ in 0..=body.len() / 5 {
                match reader.message().await {
                    Ok(Some(rope)) => {
                        let _ = raw_grpc::decode::<StreamRequest>(rope);
                    }
                    Ok(None) | Err(_) => return,
                }
            }
            panic!("more messages than the body can hold");
        }
        let mut reader = MessageReader::new(frames, MAX_MESSAGE_BYTES);
        for _ in 0..=body.len() / 5 {
            match reader.message().await {
                Ok(Some(rope)) => {
                    if let Ok(batch) = raw_grpc::decode::<ElementBatch>(rope) {
                        let _ = decode_batch(batch);
                    }
                }
                Ok(None) | Err(_) => return,
            }
        }
        panic!("more messages than the body can hold");
    });
});
