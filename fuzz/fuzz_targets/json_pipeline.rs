//! JSON pipelines (`tfdata_dataset::json`, what `tfdata register` reads):
//! parse, build and validate; what parses must round-trip through
//! `to_json`, and pipelines of pure ops with small cardinalities are
//! iterated to the end (at most 64 elements per op).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tfdata_dataset::json::{from_json, function_from_json, to_json};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = function_from_json(text);
    let Ok(pipeline) = from_json(text) else {
        return;
    };
    let json = to_json(&pipeline.dataset, pipeline.compress).expect("a parsed pipeline serialises");
    let again = from_json(&json).expect("our own JSON parses");
    assert_eq!(again.dataset, pipeline.dataset, "JSON round trip: {json}");
    assert_eq!(again.compress, pipeline.compress);
    tfdata_fuzz::iterate_bounded(&pipeline.dataset);
});
