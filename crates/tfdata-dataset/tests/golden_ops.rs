//! Golden tests: every deterministic op (and a sample of built-in functions)
//! against TensorFlow 2.21, on fixtures written by
//! `fixtures/golden/generate.py` from `fixtures/golden/cases.json`.
//!
//! Each case is a pipeline in the JSON text form. For each, tfdata's elements
//! (dtype, shape and values, bit for bit, in order; as a sorted multiset for
//! cases marked `"sorted"`, i.e. shuffles), its `element_spec` text and its
//! cardinality must be TensorFlow's, and it must fail where TensorFlow fails
//! (after the same elements; the stage and message are not compared).
//!
//! Where tfdata is known to differ, the case is listed in
//! [`KNOWN_DIFFERENCES`] with a fragment of the mismatch it reports: the test
//! fails if a listed difference disappears (remove it from the list) or a
//! case differs in any other way.
//!
//! `$FIXTURES` in the cases (and in TensorFlow's recorded strings) stands for
//! the fixture directory's absolute path.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use serde_json::Value;
use tfdata_core::element::{tensor_from_proto, tensor_to_proto};
use tfdata_core::tensor::{NativeType, TensorData};
use tfdata_core::{DType, Tensor};
use tfdata_dataset::json::from_json;
use tfdata_proto::tensorflow::TensorProto;

const PLACEHOLDER: &str = "$FIXTURES";

/// How long one case may run (an op that never ends is a failure, not a hang).
const CASE_TIMEOUT: Duration = Duration::from_secs(10);

/// At most this many element mismatches are listed per case.
const MAX_ELEMENT_DIFFS: usize = 4;

/// Ops with no golden case: `filter` takes only user predicates (there are
/// no built-in ones), which TensorFlow cannot run; `load` reads a snapshot
/// directory, checked against TensorFlow-made snapshots
/// (`fixtures/snapshots`) in `src/snapshot/load.rs` instead.
/// (`parquet_dataset`, `arrow_dataset`, `huggingface_dataset`, `webdataset`
/// and `array_record_dataset` are no TensorFlow ops: their tests are in
/// their modules, against files pyarrow, `datasets`, webdataset's TarWriter
/// and Google's own `array_record` wrote.) The ops TensorFlow graphs bring
/// (`window` and the windows it hands functions, `scan`, `group_by_window`,
/// `group_by_reducer`,
/// `random`, `directed_interleave`, `unique`, `take_while`,
/// `ignore_errors`, `rebatch`) are checked against TensorFlow through the
/// graphs it serialises, by `tfdata-graph`'s differential cases (the
/// `datasets` family), cardinality and element specs included.
const OPS_WITHOUT_CASES: &[&str] = &[
    "filter",
    "load",
    "parquet_dataset",
    "arrow_dataset",
    "huggingface_dataset",
    "webdataset",
    "array_record_dataset",
    "window",
    "window_elements",
    "scan",
    "group_by_window",
    "group_by_reducer",
    "random",
    "directed_interleave",
    "unique",
    "take_while",
    "ignore_errors",
    "rebatch",
];

/// Where tfdata differs from TensorFlow 2.21, knowingly: `(case, fragment)`;
/// some mismatch line of the case must contain the fragment, and every
/// mismatch line of the case must be covered by a listed fragment.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[
    // Where TensorFlow reports an unknown cardinality for what is
    // necessarily empty, tfdata reports 0.
    (
        "take_zero_of_unknown",
        "cardinality: tensorflow -2, tfdata 0",
    ),
    ("zip_with_empty", "cardinality: tensorflow -2, tfdata 0"),
    (
        "interleave_of_empty",
        "cardinality: tensorflow -2, tfdata 0",
    ),
    ("flat_map_of_empty", "cardinality: tensorflow -2, tfdata 0"),
    // `list_files` globs when the dataset is made in TensorFlow (so the
    // count is known), when it is iterated in tfdata (on the worker).
    ("list_files_sorted", "cardinality: tensorflow 3, tfdata -2"),
    (
        "list_files_patterns",
        "cardinality: tensorflow 5, tfdata -2",
    ),
    (
        "list_files_shuffled_multiset",
        "cardinality: tensorflow 3, tfdata -2",
    ),
    // TensorFlow's range cardinality calls any range that stops at
    // int64 max infinite (its `enumerate` is such a range).
    (
        "range_near_int64_max",
        "cardinality: tensorflow -1, tfdata 4",
    ),
];

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden")
}

fn fixtures_str() -> String {
    fixtures().to_str().expect("UTF-8 fixture path").to_string()
}

/// `$FIXTURES` replaced by the fixture directory in every string of `v`.
fn substitute(v: &mut Value, dir: &str) {
    match v {
        Value::String(s) => *s = s.replace(PLACEHOLDER, dir),
        Value::Array(items) => items.iter_mut().for_each(|i| substitute(i, dir)),
        Value::Object(map) => map.values_mut().for_each(|i| substitute(i, dir)),
        _ => {}
    }
}

/// The fixture directory put back as `$FIXTURES` in string components
/// (`list_files` output), as the generator records TensorFlow's.
fn unplace(t: Tensor, dir: &str) -> Tensor {
    let TensorData::Strings(values) = t.data() else {
        return t;
    };
    if !values.iter().any(|v| contains(v, dir.as_bytes())) {
        return t;
    }
    let values = values
        .iter()
        .map(|v| {
            Bytes::from(
                String::from_utf8_lossy(v)
                    .replace(dir, PLACEHOLDER)
                    .into_bytes(),
            )
        })
        .collect();
    Tensor::strings(values, t.shape().to_vec()).unwrap()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// One case of `cases.json`.
struct Case {
    name: String,
    pipeline: Value,
    sorted: bool,
    limit: Option<usize>,
}

/// TensorFlow's outcome for a case (`expected.json` and `outputs.tfrecord`).
struct Expected {
    element_spec: Option<String>,
    cardinality: Option<i64>,
    elements: Vec<Vec<Tensor>>,
    error: Option<String>,
}

/// tfdata's outcome for a case.
#[derive(Default)]
struct Outcome {
    element_spec: Option<String>,
    cardinality: Option<i64>,
    elements: Vec<Vec<Tensor>>,
    error: Option<String>,
}

fn load_cases() -> Vec<Case> {
    let text = std::fs::read_to_string(fixtures().join("cases.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            name: c["name"].as_str().unwrap().to_string(),
            pipeline: c["pipeline"].clone(),
            sorted: c.get("sorted").and_then(Value::as_bool).unwrap_or(false),
            limit: c
                .get("limit")
                .and_then(Value::as_u64)
                .map(|n| usize::try_from(n).unwrap()),
        })
        .collect()
}

fn load_expected(cases: &[Case]) -> Vec<Expected> {
    let text = std::fs::read_to_string(fixtures().join("expected.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let records = tfdata_core::tfrecord::read_file(&fixtures().join("outputs.tfrecord")).unwrap();
    let entries = doc["cases"].as_array().unwrap();
    let names: Vec<&str> = entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    let case_names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names, case_names,
        "expected.json is stale: rerun fixtures/golden/generate.py"
    );
    entries
        .iter()
        .map(|e| {
            let first = e["first_record"].as_u64().unwrap() as usize;
            let n = e["num_elements"].as_u64().unwrap() as usize;
            let k = e["num_components"].as_u64().unwrap_or(0) as usize;
            let elements = (0..n)
                .map(|i| {
                    (0..k)
                        .map(|j| {
                            let proto = TensorProto::decode(&records[first + i * k + j][..])
                                .unwrap_or_else(|err| {
                                    panic!("record {}: {err}", first + i * k + j)
                                });
                            tensor_from_proto(&proto).unwrap()
                        })
                        .collect()
                })
                .collect();
            Expected {
                element_spec: e["element_spec"].as_str().map(str::to_string),
                cardinality: e["cardinality"].as_i64(),
                elements,
                error: e["error"].as_object().map(|err| {
                    format!(
                        "{} at {}: {}",
                        err["type"].as_str().unwrap_or_default(),
                        err["stage"].as_str().unwrap_or_default(),
                        err["message"].as_str().unwrap_or_default()
                    )
                }),
            }
        })
        .collect()
}

/// Runs a case through tfdata: build (from JSON, validating), spec,
/// cardinality, then iterate (at most `limit` elements).
fn run_ours(pipeline: &Value, limit: Option<usize>) -> Outcome {
    let dir = fixtures_str();
    let mut pipeline = pipeline.clone();
    substitute(&mut pipeline, &dir);
    let mut out = Outcome::default();
    let parsed = match from_json(&pipeline.to_string()) {
        Ok(p) => p,
        Err(e) => {
            out.error = Some(format!("at construction: {e}"));
            return out;
        }
    };
    let ds = parsed.dataset;
    match ds.element_spec() {
        Ok(Some(s)) => out.element_spec = Some(s.to_string()),
        Ok(None) => out.element_spec = Some("<unknown structure>".into()),
        Err(e) => {
            out.error = Some(format!("element_spec: {e}"));
            return out;
        }
    }
    out.cardinality = Some(ds.cardinality());
    let mut it = match ds.iter() {
        Ok(it) => it,
        Err(e) => {
            out.error = Some(format!("making the iterator: {e}"));
            return out;
        }
    };
    while limit.is_none_or(|l| out.elements.len() < l) {
        match it.next_element() {
            Ok(Some(e)) => out
                .elements
                .push(e.components.into_iter().map(|t| unplace(t, &dir)).collect()),
            Ok(None) => break,
            Err(e) => {
                out.error = Some(format!("at iteration: {e}"));
                break;
            }
        }
    }
    out
}

/// [`run_ours`] on its own thread, so an op that never ends fails the case.
fn run_ours_with_timeout(pipeline: &Value, limit: Option<usize>) -> Result<Outcome, String> {
    let (tx, rx) = mpsc::channel();
    let pipeline = pipeline.clone();
    std::thread::spawn(move || {
        let _ = tx.send(run_ours(&pipeline, limit));
    });
    match rx.recv_timeout(CASE_TIMEOUT) {
        Ok(out) => Ok(out),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!(
            "tfdata did not finish within {CASE_TIMEOUT:?} (still iterating)"
        )),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("tfdata panicked".into()),
    }
}

fn values<T: NativeType>(t: &Tensor) -> Vec<String> {
    t.to_vec::<T>()
        .unwrap()
        .iter()
        .map(|v| format!("{v:?}"))
        .collect()
}

/// A tensor for humans: dtype, shape and (the first) values.
fn show(t: &Tensor) -> String {
    let vals: Vec<String> = match t.data() {
        TensorData::Strings(s) => s
            .iter()
            .map(|b| format!("\"{}\"", b.escape_ascii()))
            .collect(),
        TensorData::Buffer(b) => match t.dtype() {
            DType::Float => values::<f32>(t),
            DType::Double => values::<f64>(t),
            DType::Int8 => values::<i8>(t),
            DType::Int16 => values::<i16>(t),
            DType::Int32 => values::<i32>(t),
            DType::Int64 => values::<i64>(t),
            DType::UInt8 => values::<u8>(t),
            DType::UInt16 => values::<u16>(t),
            DType::UInt32 => values::<u32>(t),
            DType::UInt64 => values::<u64>(t),
            DType::Bool => values::<bool>(t),
            _ => vec![format!("0x{}", hex(b))],
        },
    };
    const SHOWN: usize = 12;
    let more = if vals.len() > SHOWN {
        format!(", ... ({} values)", vals.len())
    } else {
        String::new()
    };
    format!(
        "{} {:?} [{}{more}]",
        t.dtype(),
        t.shape(),
        vals[..vals.len().min(SHOWN)].join(", ")
    )
}

fn hex(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

fn show_element(e: &[Tensor]) -> String {
    let parts: Vec<String> = e.iter().map(show).collect();
    format!("({})", parts.join(", "))
}

/// Same dtype, shape and values (bit for bit).
fn same_tensor(a: &Tensor, b: &Tensor) -> bool {
    a.dtype() == b.dtype() && a.shape() == b.shape() && a.data() == b.data()
}

/// A total order on elements, for comparing multisets.
fn sort_key(e: &[Tensor]) -> Vec<Vec<u8>> {
    e.iter()
        .map(|t| tensor_to_proto(t).encode_to_vec())
        .collect()
}

/// The differences between TensorFlow's outcome and ours, one line each.
fn compare(case: &Case, expected: &Expected, ours: &Outcome) -> Vec<String> {
    let mut diffs = Vec::new();
    if let Some(tf_spec) = &expected.element_spec
        && ours.element_spec.as_ref() != Some(tf_spec)
    {
        let ours = ours.element_spec.as_deref().unwrap_or("(none: failed)");
        // Spec texts hold no quotes but around dictionary keys.
        let only_quotes = ours.replace('"', "'") == *tf_spec;
        diffs.push(format!(
            "element_spec{}: tensorflow {tf_spec}, tfdata {ours}",
            if only_quotes {
                " (dictionary keys quoted \" where tensorflow uses ')"
            } else {
                ""
            }
        ));
    }
    if let Some(tf_card) = expected.cardinality
        && ours.cardinality != Some(tf_card)
    {
        diffs.push(format!(
            "cardinality: tensorflow {tf_card}, tfdata {}",
            ours.cardinality
                .map_or("(none: failed)".to_string(), |c| c.to_string())
        ));
    }
    match (&expected.error, &ours.error) {
        (Some(tf), None) => diffs.push(format!("error: tensorflow fails ({tf}), tfdata does not")),
        (None, Some(e)) => diffs.push(format!("error: tfdata fails ({e}), tensorflow does not")),
        _ => {}
    }
    let mut tf_elements: Vec<&Vec<Tensor>> = expected.elements.iter().collect();
    let mut our_elements: Vec<&Vec<Tensor>> = ours.elements.iter().collect();
    if case.sorted {
        tf_elements.sort_by_cached_key(|e| sort_key(e));
        our_elements.sort_by_cached_key(|e| sort_key(e));
    }
    if tf_elements.len() != our_elements.len() {
        diffs.push(format!(
            "elements: tensorflow produced {}, tfdata {}",
            tf_elements.len(),
            our_elements.len()
        ));
    }
    let mut element_diffs = 0;
    for (i, (tf, us)) in tf_elements.iter().zip(&our_elements).enumerate() {
        let same = tf.len() == us.len() && tf.iter().zip(us.iter()).all(|(a, b)| same_tensor(a, b));
        if !same {
            element_diffs += 1;
            if element_diffs <= MAX_ELEMENT_DIFFS {
                diffs.push(format!(
                    "element {i}{}: tensorflow {}, tfdata {}",
                    if case.sorted { " (sorted)" } else { "" },
                    show_element(tf),
                    show_element(us)
                ));
            }
        }
    }
    if element_diffs > MAX_ELEMENT_DIFFS {
        diffs.push(format!(
            "elements: {} more differ",
            element_diffs - MAX_ELEMENT_DIFFS
        ));
    }
    if tf_elements.len() != our_elements.len() {
        let (longer, who) = if tf_elements.len() > our_elements.len() {
            (&tf_elements, "tensorflow")
        } else {
            (&our_elements, "tfdata")
        };
        let first_extra = tf_elements.len().min(our_elements.len());
        diffs.push(format!(
            "elements: {who}'s element {first_extra} is {}",
            show_element(longer[first_extra])
        ));
    }
    diffs
}

#[test]
fn every_op_matches_tensorflow() {
    let cases = load_cases();
    let expected = load_expected(&cases);

    // Known differences must name real cases, once.
    let names: BTreeSet<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    for (case, _) in KNOWN_DIFFERENCES {
        assert!(
            names.contains(case),
            "KNOWN_DIFFERENCES names no case {case:?}"
        );
    }

    let mut report = String::new();
    let (mut passed, mut known) = (0, 0);
    let mut failed = Vec::new();
    for (case, expected) in cases.iter().zip(&expected) {
        let diffs = match run_ours_with_timeout(&case.pipeline, case.limit) {
            Ok(ours) => {
                if let (Some(tf), Some(us)) = (&expected.error, &ours.error) {
                    println!(
                        "{}: both fail\n    tensorflow: {tf}\n    tfdata: {us}",
                        case.name
                    );
                }
                compare(case, expected, &ours)
            }
            Err(e) => vec![e],
        };
        let fragments: Vec<&str> = KNOWN_DIFFERENCES
            .iter()
            .filter(|(c, _)| *c == case.name)
            .map(|(_, f)| *f)
            .collect();
        let unexplained: Vec<&String> = diffs
            .iter()
            .filter(|d| !fragments.iter().any(|f| d.contains(f)))
            .collect();
        let vanished: Vec<&&str> = fragments
            .iter()
            .filter(|f| !diffs.iter().any(|d| d.contains(**f)))
            .collect();
        if unexplained.is_empty() && vanished.is_empty() {
            if diffs.is_empty() {
                passed += 1;
            } else {
                known += 1;
            }
            continue;
        }
        failed.push(case.name.clone());
        let _ = writeln!(report, "\n{}:", case.name);
        for d in unexplained {
            let _ = writeln!(report, "    {d}");
        }
        for f in vanished {
            let _ = writeln!(
                report,
                "    known difference {f:?} no longer occurs: remove it from KNOWN_DIFFERENCES"
            );
        }
    }
    println!(
        "{} cases: {passed} match TensorFlow, {known} differ as known, {} fail",
        cases.len(),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{} of {} cases differ from TensorFlow 2.21 ({}):\n{report}",
        failed.len(),
        cases.len(),
        failed.join(", ")
    );
}

/// Every op the engine builds has at least one golden case.
#[test]
fn every_op_has_a_golden_case() {
    let cases = load_cases();
    let mut used = BTreeSet::new();
    fn ops<'a>(v: &'a Value, out: &mut BTreeSet<&'a str>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(op)) = map.get("op") {
                    out.insert(op.as_str());
                }
                map.values().for_each(|v| ops(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| ops(v, out)),
            _ => {}
        }
    }
    for c in &cases {
        ops(&c.pipeline, &mut used);
    }
    let missing: Vec<&&str> = tfdata_dataset::ops::OP_NAMES
        .iter()
        .filter(|op| !used.contains(**op) && !OPS_WITHOUT_CASES.contains(op))
        .collect();
    assert!(
        missing.is_empty(),
        "ops without a golden case in fixtures/golden/cases.json: {missing:?}"
    );
}
