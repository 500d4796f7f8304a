//! Inputs the fuzz targets (`fuzz/`, docs/fuzzing.md) found to crash the
//! dataset crate's decoders, each minimized and kept here so the bug stays
//! fixed. A test names its target; the hex is the target's whole input.

use prost::Message;
use tfdata_dataset::Dataset;
use tfdata_dataset::pipeline::from_pipeline_def;
use tfdata_proto::tfdata::pipeline::PipelineDef;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// pipeline_def: a `PipelineDef` whose `prefetch` asks for a buffer of
/// ~2^62 elements. Iterating it allocated the whole channel up front: a
/// "capacity overflow" panic (or an allocation failure that aborts the
/// worker) from a pipeline any client can register.
#[test]
fn pipeline_def_huge_prefetch_buffer() {
    let input = hex(concat!(
        "0000080212fe010a0b636f6e636174656e61746512ae010a0870726566657463",
        "681285010a05626174636812540a057368617264122c0a0572616e67651a0b0a",
        "057374617274120208001a0a0a0473746f70120208011a0a0a0473746f701202",
        "080a1a100a0a6e756d5f736861726473120208021a0b0a05696e646578120208",
        "001a100a0a62617463685f73697a65120208021a140a0e64726f705f72656d61",
        "696e646572120220201a1a0a0b6275666665725f73697a65120b08dfffffffff",
        "ffffffff00123e0a0c66726f6d5f74656e736f72731a2e0a0a636f6d706f6e65",
        "6e747312202a1e0a1c3a1a0809120412020802221001000000000002000000007b",
        "7a001801",
    ));
    // The target's first two bytes pick the mode (PipelineDef) and a worker index.
    let def = PipelineDef::decode(&input[2..]).expect("a PipelineDef");
    let ds = from_pipeline_def(&def).expect("a valid pipeline");
    let n = ds.iter().expect("an iterator").count();
    assert_eq!(n as i64, ds.cardinality());

    let elements: Vec<i64> = Dataset::range(3)
        .prefetch(1 << 60)
        .iter()
        .expect("an iterator")
        .map(|e| {
            e.expect("an element").components[0]
                .to_scalar()
                .expect("int64")
        })
        .collect();
    assert_eq!(elements, vec![0, 1, 2]);
}

/// json_pipeline: a float attribute written with 80 digits parsed one ulp
/// off (serde_json's default float parsing is not correctly rounded), so
/// the pipeline's own `to_json` (shortest form of that f64) read back as
/// another value: `from_json(to_json(p)) != p`.
#[test]
fn json_pipeline_long_float_round_trips() {
    use tfdata_dataset::json::{from_json, to_json};
    let text = concat!(
        r#"{"op":"map","function":{"function":"f","args":{"x":"#,
        "12000000000000000000000000000000000000000000000000000000000000000000000000000007.5",
        r#"}},"input":{"op":"range","stop":1}}"#,
    );
    let pipeline = from_json(text).expect("a pipeline");
    let json = to_json(&pipeline.dataset, pipeline.compress).expect("JSON");
    let again = from_json(&json).expect("its own JSON");
    assert_eq!(again.dataset, pipeline.dataset, "{json}");
    // Correctly rounded, as Python's json reads it: 1.2e79.
    assert!(json.contains("1.2e+79"), "{json}");
}
