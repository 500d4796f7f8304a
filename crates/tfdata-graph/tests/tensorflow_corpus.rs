//! TensorFlow 2.21 dataset graphs, exactly as TensorFlow's client registers
//! them, translated and run on tfdata's engine, against TensorFlow's own
//! elements for the same pipelines.
//!
//! The fixtures (`tests/fixtures/`, written by `fixtures/generate.py` from the
//! cases of `interop/tf_graph_corpus.py` that need no files) are, per case,
//! `<name>.graph.pb` (the `GraphDef` of the `DatasetDef` a TensorFlow client
//! registered on our dispatcher), `<name>.elements.pb` (TensorFlow's local
//! elements: a TFRecord file; per element a record with its component count in
//! ASCII, then one serialized `TensorProto` record per component) and a line
//! of `cases.txt` (`name compare rtol atol compressed finite elements dataset_ops`).
//!
//! Each case must translate, report `compressed` as the graph says (the
//! trailing `CompressElement` map of compression="AUTO" is stripped), and
//! yield TensorFlow's elements: same count, dtypes and shapes; values bit for
//! bit (`exact`), float components within `rtol`/`atol` (`float`), or the
//! same sorted multiset of exact elements (`multiset`: random ops, whose
//! streams are not TensorFlow's). Infinite cases compare their first
//! `elements` elements.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use prost::Message;
use tfdata_core::element::tensor_from_proto;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Tensor, tfrecord};
use tfdata_proto::tensorflow::TensorProto;

/// How long one case may take (an op that never ends is a failure, not a hang).
const CASE_TIMEOUT: Duration = Duration::from_secs(30);

/// At most this many element mismatches are listed per case.
const MAX_DIFFS: usize = 4;

struct Case {
    name: String,
    compare: String,
    rtol: f64,
    atol: f64,
    compressed: bool,
    finite: bool,
    elements: usize,
    ops: String,
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(fixtures().join("cases.txt")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            assert!(f.len() >= 7, "cases.txt: bad line {line:?}");
            Case {
                name: f[0].to_string(),
                compare: f[1].to_string(),
                rtol: f[2].parse().unwrap(),
                atol: f[3].parse().unwrap(),
                compressed: f[4] == "1",
                finite: f[5] == "1",
                elements: f[6].parse().unwrap(),
                ops: f.get(7).unwrap_or(&"").to_string(),
            }
        })
        .collect()
}

/// TensorFlow's elements of a case (see the module comment for the format).
fn expected(name: &str) -> Vec<Vec<Tensor>> {
    let records = tfrecord::read_file(&fixtures().join(format!("{name}.elements.pb"))).unwrap();
    let mut records = records.into_iter();
    let mut out = Vec::new();
    while let Some(count) = records.next() {
        let n: usize = std::str::from_utf8(&count).unwrap().parse().unwrap();
        let element = (0..n)
            .map(|_| {
                let proto =
                    TensorProto::decode(records.next().expect("a component record")).unwrap();
                tensor_from_proto(&proto).unwrap()
            })
            .collect();
        out.push(element);
    }
    out
}

/// Translates and iterates a graph: at most `limit` elements (one more than
/// TensorFlow's count for finite cases, to see extra elements).
fn run_ours(graph: Vec<u8>, limit: usize) -> Result<(bool, Vec<Vec<Tensor>>), String> {
    let translated =
        tfdata_graph::translate_bytes(&graph).map_err(|e| format!("translate: {e}"))?;
    let mut it = translated
        .dataset
        .iter()
        .map_err(|e| format!("iter: {e}"))?;
    let mut out = Vec::new();
    while out.len() < limit {
        match it.next_element() {
            Ok(Some(el)) => out.push(el.components),
            Ok(None) => break,
            Err(e) => return Err(format!("element {}: {e}", out.len())),
        }
    }
    Ok((translated.compressed, out))
}

fn run_with_timeout(graph: Vec<u8>, limit: usize) -> Result<(bool, Vec<Vec<Tensor>>), String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(run_ours(graph, limit));
    });
    match rx.recv_timeout(CASE_TIMEOUT) {
        Ok(out) => out,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            Err(format!("did not finish within {CASE_TIMEOUT:?}"))
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("panicked".into()),
    }
}

fn describe(t: &Tensor) -> String {
    let values = match (t.dtype(), t.data()) {
        (_, TensorData::Strings(s)) => format!("{s:?}"),
        (DType::Float, _) => format!("{:?}", t.to_vec::<f32>().unwrap()),
        (DType::Double, _) => format!("{:?}", t.to_vec::<f64>().unwrap()),
        (DType::Int64, _) => format!("{:?}", t.to_vec::<i64>().unwrap()),
        (DType::Int32, _) => format!("{:?}", t.to_vec::<i32>().unwrap()),
        (_, TensorData::Buffer(b)) => format!("bytes {:?}", &b[..]),
    };
    let mut s = format!("{}{:?} {values}", t.dtype().name(), t.shape());
    if s.len() > 300 {
        s.truncate(300);
        s.push('…');
    }
    s
}

fn floats(t: &Tensor) -> Option<Vec<f64>> {
    match t.dtype() {
        DType::Float => Some(
            t.to_vec::<f32>()
                .unwrap()
                .into_iter()
                .map(f64::from)
                .collect(),
        ),
        DType::Double => Some(t.to_vec::<f64>().unwrap()),
        _ => None,
    }
}

/// Why `got` is not `want` under the case's rule, if it is not.
fn tensor_diff(case: &Case, want: &Tensor, got: &Tensor) -> Option<String> {
    if want.dtype() != got.dtype() || want.shape() != got.shape() {
        return Some(format!(
            "dtype/shape {}{:?}, TensorFlow's {}{:?}",
            got.dtype().name(),
            got.shape(),
            want.dtype().name(),
            want.shape()
        ));
    }
    if case.compare == "float"
        && let (Some(w), Some(g)) = (floats(want), floats(got))
    {
        let bad = w.iter().zip(&g).position(|(w, g)| {
            // NaN matches NaN; any other NaN difference is a mismatch.
            let d = (g - w).abs();
            !(w.is_nan() && g.is_nan()) && (d.is_nan() || d > case.atol + case.rtol * w.abs())
        });
        return bad.map(|i| {
            format!(
                "value {i}: {} vs TensorFlow's {} (rtol {}, atol {})",
                g[i], w[i], case.rtol, case.atol
            )
        });
    }
    (want != got).then(|| format!("{} vs TensorFlow's {}", describe(got), describe(want)))
}

/// A sort key for multisets: dtype, shape and bytes of every component.
fn key(element: &[Tensor]) -> Vec<(i32, Vec<i64>, Vec<Vec<u8>>)> {
    element
        .iter()
        .map(|t| {
            let data = match t.data() {
                TensorData::Buffer(b) => vec![b.to_vec()],
                TensorData::Strings(s) => s.iter().map(|b| b.to_vec()).collect(),
            };
            (t.dtype().code(), t.shape().to_vec(), data)
        })
        .collect()
}

fn compare(case: &Case, want: &[Vec<Tensor>], got: &[Vec<Tensor>]) -> Vec<String> {
    let mut diffs = Vec::new();
    if got.len() != want.len() {
        diffs.push(format!(
            "{} elements, TensorFlow has {}",
            got.len(),
            want.len()
        ));
    }
    if case.compare == "multiset" {
        let mut w: Vec<_> = want.iter().map(|e| key(e)).collect();
        let mut g: Vec<_> = got.iter().map(|e| key(e)).collect();
        w.sort();
        g.sort();
        if let Some(i) = w.iter().zip(&g).position(|(a, b)| a != b) {
            diffs.push(format!("sorted multisets differ at position {i}"));
        }
        return diffs;
    }
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        if w.len() != g.len() {
            diffs.push(format!(
                "element {i}: {} components, TensorFlow's {}",
                g.len(),
                w.len()
            ));
            continue;
        }
        for (j, (wt, gt)) in w.iter().zip(g).enumerate() {
            if let Some(d) = tensor_diff(case, wt, gt) {
                diffs.push(format!("element {i} component {j}: {d}"));
            }
        }
        if diffs.len() >= MAX_DIFFS {
            break;
        }
    }
    diffs
}

fn run_case(case: &Case) -> Vec<String> {
    let graph = std::fs::read(fixtures().join(format!("{}.graph.pb", case.name))).unwrap();
    let want = expected(&case.name);
    assert_eq!(
        want.len(),
        case.elements,
        "{}: cases.txt and elements.pb disagree",
        case.name
    );
    // Finite cases: one more than TensorFlow's count, to see extra elements;
    // infinite ones hold their first `elements`.
    let limit = want.len() + 1;
    match run_with_timeout(graph, limit) {
        Err(e) => vec![e],
        Ok((compressed, got)) => {
            let mut diffs = Vec::new();
            if compressed != case.compressed {
                diffs.push(format!(
                    "compressed {compressed}, the graph says {}",
                    case.compressed
                ));
            }
            let got = if case.finite {
                got
            } else {
                // An infinite case: compare its prefix.
                got.into_iter().take(want.len()).collect()
            };
            diffs.extend(compare(case, &want, &got));
            diffs
        }
    }
}

#[test]
fn fixtures_are_well_formed() {
    let cases = cases();
    assert!(cases.len() >= 25, "{} fixtures", cases.len());
    for case in &cases {
        assert!(
            ["exact", "float", "multiset"].contains(&case.compare.as_str()),
            "{}: compare {}",
            case.name,
            case.compare
        );
        assert_eq!(expected(&case.name).len(), case.elements, "{}", case.name);
        assert!(fixtures().join(format!("{}.graph.pb", case.name)).exists());
    }
}

#[test]
fn tensorflow_graphs_run_on_tfdata() {
    let mut failures = Vec::new();
    let cases = cases();
    for case in &cases {
        let diffs = run_case(case);
        if diffs.is_empty() {
            eprintln!("ok   {}", case.name);
        } else {
            eprintln!("FAIL {} ({}): {}", case.name, case.ops, diffs.join("; "));
            failures.push(format!("{}: {}", case.name, diffs.join("; ")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} TensorFlow graphs differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
