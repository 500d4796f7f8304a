//! Golden tests: tfdata's Example parser against TensorFlow 2.21's
//! `tf.io.parse_single_example` and `tf.io.parse_example`, on fixtures written
//! by `fixtures/example/generate.py` (see there for the file formats).
//!
//! Tensors must be equal bit for bit (NaN included). Errors must be
//! `InvalidArgument` with TensorFlow's message, except where TensorFlow's
//! single-Example wording for a wrong value count ("Some int64_list slice was
//! not parsed") says less than its batch wording, which tfdata uses for both:
//! there the feature name and the kind of fault must agree.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::PathBuf;

use bytes::Bytes;
use prost::Message;
use tfdata_core::element::tensor_from_proto;
use tfdata_core::tfrecord::read_file;
use tfdata_core::{DType, Error, Tensor};
use tfdata_dataset::example::{
    ExampleBuilder, FeatureSpec, parse_example_batch, parse_single_example,
};
use tfdata_proto::tensorflow::TensorProto;

struct Fixtures {
    examples: Vec<Bytes>,
    example_names: BTreeMap<String, usize>,
    tensors: Vec<Tensor>,
    specs: BTreeMap<String, BTreeMap<String, FeatureSpec>>,
    cases: Vec<Case>,
}

struct Case {
    id: String,
    batch: bool,
    examples: Vec<usize>,
    spec_set: String,
    expected: Expected,
}

enum Expected {
    Ok(BTreeMap<String, usize>),
    Error { kind: String, message: String },
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/example")
}

fn dtype(name: &str) -> DType {
    match name {
        "int64" => DType::Int64,
        "float" => DType::Float,
        "string" => DType::String,
        other => panic!("unknown dtype {other}"),
    }
}

fn indices(field: &str) -> Vec<usize> {
    if field == "-" || field.is_empty() {
        return vec![];
    }
    field.split(',').map(|s| s.parse().unwrap()).collect()
}

fn load() -> Fixtures {
    let examples = read_file(&dir().join("examples.tfrecord")).unwrap();
    let tensors = read_file(&dir().join("tensors.tfrecord"))
        .unwrap()
        .into_iter()
        .map(|r| tensor_from_proto(&TensorProto::decode(r).unwrap()).unwrap())
        .collect::<Vec<_>>();
    let text = std::fs::read_to_string(dir().join("cases.txt")).unwrap();
    let mut fixtures = Fixtures {
        examples,
        example_names: BTreeMap::new(),
        tensors,
        specs: BTreeMap::new(),
        cases: vec![],
    };
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split('\t').collect();
        match f[0] {
            "example" => {
                fixtures
                    .example_names
                    .insert(f[2].to_string(), f[1].parse().unwrap());
            }
            "spec" => {
                let spec = match f[3] {
                    "varlen" => FeatureSpec::var_len(dtype(f[4])),
                    "fixed" => {
                        let spec = FeatureSpec::fixed(
                            dtype(f[4]),
                            indices(f[5])
                                .into_iter()
                                .map(|d| d as i64)
                                .collect::<Vec<_>>(),
                        );
                        match f[6] {
                            "-" => spec,
                            i => spec.with_default(
                                fixtures.tensors[i.parse::<usize>().unwrap()].clone(),
                            ),
                        }
                    }
                    other => panic!("unknown spec kind {other}"),
                };
                fixtures
                    .specs
                    .entry(f[1].to_string())
                    .or_default()
                    .insert(f[2].to_string(), spec);
            }
            "case" => {
                let expected = match f[5] {
                    "ok" => Expected::Ok(
                        f[6..]
                            .iter()
                            .map(|kv| {
                                let (k, v) = kv.split_once('=').unwrap();
                                (k.to_string(), v.parse().unwrap())
                            })
                            .collect(),
                    ),
                    "error" => Expected::Error {
                        kind: f[6].to_string(),
                        message: f[7].to_string(),
                    },
                    other => panic!("unknown outcome {other}"),
                };
                fixtures.cases.push(Case {
                    id: f[1].to_string(),
                    batch: f[2] == "batch",
                    examples: indices(f[3]),
                    spec_set: f[4].to_string(),
                    expected,
                });
            }
            other => panic!("unknown line kind {other}: {line}"),
        }
    }
    assert_eq!(fixtures.examples.len(), fixtures.example_names.len());
    fixtures
}

/// The text after TensorFlow's "Key: x." or "Name: ..., Index: i." locator.
fn locator(message: &str) -> &str {
    message.split(".  ").next().unwrap_or(message)
}

/// Compares one case; returns what differs, if anything.
fn check(fx: &Fixtures, case: &Case) -> Option<String> {
    let specs = &fx.specs[&case.spec_set];
    let got = if case.batch {
        let batch: Vec<Bytes> = case
            .examples
            .iter()
            .map(|&i| fx.examples[i].clone())
            .collect();
        parse_example_batch(&batch, specs)
    } else {
        parse_single_example(&fx.examples[case.examples[0]], specs)
    };
    match (&case.expected, got) {
        (Expected::Ok(want), Ok(got)) => {
            if !want.keys().eq(got.keys()) {
                return Some(format!("features {:?} vs {:?}", want.keys(), got.keys()));
            }
            let diffs: Vec<String> = want
                .iter()
                .filter(|&(name, &i)| got[name] != fx.tensors[i])
                .map(|(name, &i)| {
                    format!(
                        "{name}: TensorFlow {:?}, tfdata {:?}",
                        fx.tensors[i], got[name]
                    )
                })
                .collect();
            (!diffs.is_empty()).then(|| diffs.join("; "))
        }
        (Expected::Ok(_), Err(e)) => Some(format!("TensorFlow parsed it, tfdata: {e}")),
        (Expected::Error { message, .. }, Ok(got)) => {
            Some(format!("TensorFlow: {message}; tfdata parsed it: {got:?}"))
        }
        (Expected::Error { kind, message }, Err(err)) => {
            let Error::InvalidArgument(ours) = &err else {
                return Some(format!(
                    "TensorFlow InvalidArgument: {message}; tfdata {err:?}"
                ));
            };
            let same = match kind.as_str() {
                "required" | "dtype" => ours == message,
                "parse" => ours.starts_with(message.as_str()),
                // TensorFlow's batch wording is tfdata's wording everywhere.
                "size" if message.contains("values != expected") => ours == message,
                "size" => locator(ours) == locator(message) && ours.contains("values != expected"),
                other => panic!("unknown error kind {other}"),
            };
            (!same).then(|| format!("TensorFlow: {message}\n    tfdata:     {ours}"))
        }
    }
}

#[test]
fn parse_results_and_errors_match_tensorflow() {
    let fx = load();
    assert!(fx.cases.iter().any(|c| c.batch) && fx.cases.iter().any(|c| !c.batch));
    let failures: Vec<String> = fx
        .cases
        .iter()
        .filter_map(|c| check(&fx, c).map(|why| format!("{} ({}): {why}", c.id, c.spec_set)))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from TensorFlow:\n  {}",
        failures.len(),
        fx.cases.len(),
        failures.join("\n  ")
    );
}

/// Where a single-Example case succeeds with fixed features only, the batch
/// parser on that one Example must give the same tensors under a leading 1.
#[test]
fn batch_of_one_agrees_with_single_example() {
    let fx = load();
    let mut checked = 0;
    for case in fx.cases.iter().filter(|c| !c.batch) {
        let specs = &fx.specs[&case.spec_set];
        if specs
            .values()
            .any(|s| matches!(s, FeatureSpec::VarLen { .. }))
        {
            continue;
        }
        let example = &fx.examples[case.examples[0]];
        let single = parse_single_example(example, specs);
        let batch = parse_example_batch(std::slice::from_ref(example), specs);
        match (single, batch) {
            (Ok(single), Ok(batch)) => {
                for (name, t) in &single {
                    let b = &batch[name];
                    assert_eq!(b.shape()[0], 1, "{}: {name}", case.id);
                    assert_eq!(&b.shape()[1..], t.shape(), "{}: {name}", case.id);
                    assert!(b.data() == t.data(), "{}: {name}", case.id);
                }
                checked += 1;
            }
            (Err(_), Err(_)) => {}
            (s, b) => panic!("{}: single {s:?} but batch {b:?}", case.id),
        }
    }
    assert!(checked >= 5, "only {checked} cases had fixed features only");
}

/// `ExampleBuilder` writes what TensorFlow's deterministic serializer writes.
#[test]
fn builder_writes_tensorflows_bytes() {
    let fx = load();
    let unicode = "héllo wörld ✓ 日本語 🙂".as_bytes();
    let built = ExampleBuilder::new()
        .int64("label", &[3, -4])
        .bytes("image", &[&b"\x89PNG\r\n"[..], unicode])
        .float("weights", &[0.25, -1.5])
        .int64("none", &[])
        .build();
    assert_eq!(built, fx.examples[fx.example_names["built"]]);
}
