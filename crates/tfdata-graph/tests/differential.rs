//! The differential tester: each case TensorFlow 2.21 ran eagerly on CPU
//! (`interop/differential/gen.py` wrote them to `tests/differential/*.json`)
//! replayed through our kernels, without TensorFlow, and compared bit for
//! bit (NaN payloads and -0.0 included) unless the case declares a
//! tolerance with its reason ([`Tolerance`]: floats within N ulps or an
//! absolute bound, or the sign of a zero).
//!
//! A case is one op, run by its `NodeDef` through the kernel table as the
//! executor dispatches it ([`tfdata_graph::kernels::lookup`], then `build`
//! on the node's attributes, then the kernel on the inputs), or a composite:
//! a traced `tf.function` and its library run by our function executor; a
//! pipeline case is the `GraphDef` tf.data serializes, translated and
//! iterated twice (fresh iterators) against TensorFlow's two iterations.
//! Seeded stateful ops carry the outputs of successive runs of one kernel.
//! An error case must fail with TensorFlow's status code and a message
//! containing TensorFlow's; a case TensorFlow refuses with `NotFoundError`
//! (no CPU kernel for those attributes) must be refused by ours too.
//!
//! `tests/differential/known_failures.txt` lists case ids known to fail
//! (one a line, `#` comments): they are reported, not failed, and one that
//! passes fails the test so that the list only shrinks.
//!
//! The committed cases are the bounded budget (hundreds of small cases, well
//! under a second in a debug build); `gen.py --long` writes a longer one
//! (thousands of values a case) for `DIFFERENTIAL_CASES=DIR cargo test -p
//! tfdata-graph --test differential`.
//!
//! Every failure prints the op, the case id, the NodeDef, the inputs, the
//! first differing index and both values' bits; a summary per op gives the
//! pass counts and the largest difference seen.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use bytes::Bytes;
use prost::Message;
use serde_json::Value as Json;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Result, Tensor};
use tfdata_graph::attrs::NodeAttrs;
use tfdata_graph::function::Compiler;
use tfdata_graph::value::Value;
use tfdata_graph::{Library, kernels};
use tfdata_proto::tensorflow::{FunctionDefLibrary, GraphDef, NodeDef};

/// The committed cases, or `DIFFERENTIAL_CASES` (the longer by-hand budget:
/// `gen.py --long` writes its cases there).
fn dir() -> PathBuf {
    std::env::var_os("DIFFERENTIAL_CASES").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/differential"),
        PathBuf::from,
    )
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A stored proto: base64 of its zlib-compressed bytes (gen.py's `blob`).
fn blob(s: &str) -> Vec<u8> {
    let sextet = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("bad base64 byte {c}"),
    };
    let mut z = Vec::with_capacity(s.len() / 4 * 3);
    for quad in s.trim_end_matches('=').as_bytes().chunks(4) {
        let mut acc = 0u32;
        for &c in quad {
            acc = (acc << 6) | u32::from(sextet(c));
        }
        acc <<= 6 * (4 - quad.len() as u32);
        z.extend_from_slice(&acc.to_be_bytes()[1..quad.len()]);
    }
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(&z[..]), &mut out).unwrap();
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `dtype|d0,d1|hex`, as gen.py writes a tensor.
fn tensor(s: &str) -> Tensor {
    let mut parts = s.splitn(3, '|');
    let (code, shape, bytes) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let dtype = DType::from_code(code.parse().unwrap()).unwrap();
    let shape: Vec<i64> = if shape.is_empty() {
        Vec::new()
    } else {
        shape.split(',').map(|d| d.parse().unwrap()).collect()
    };
    if dtype == DType::String {
        // Each string in hex, comma-separated (one empty string is "").
        let n = shape.iter().product::<i64>();
        let values: Vec<Bytes> = if n == 0 {
            Vec::new()
        } else {
            bytes.split(',').map(|h| Bytes::from(unhex(h))).collect()
        };
        assert_eq!(values.len() as i64, n, "string tensor {s:.80}");
        return Tensor::strings(values, shape).unwrap();
    }
    Tensor::new(dtype, shape, TensorData::Buffer(Bytes::from(unhex(bytes)))).unwrap()
}

fn bytes_of(t: &Tensor) -> &[u8] {
    match t.data() {
        TensorData::Buffer(b) => b,
        TensorData::Strings(_) => &[],
    }
}

fn summary(t: &Tensor) -> String {
    if let TensorData::Strings(s) = t.data() {
        let shown: Vec<String> = s
            .iter()
            .take(4)
            .map(|b| format!("{:?}", escaped(b)))
            .collect();
        return format!(
            "{} {:?} [{}{}]",
            t.dtype(),
            t.shape(),
            shown.join(", "),
            if s.len() > 4 { ", ..." } else { "" }
        );
    }
    let b = bytes_of(t);
    let shown = if b.len() > 64 {
        format!("{}...", hex(&b[..64]))
    } else {
        hex(b)
    };
    format!("{} {:?} {shown}", t.dtype(), t.shape())
}

/// One element's bits as a float (for differences), if `dtype` is a float.
fn as_f64(dtype: DType, b: &[u8]) -> Option<f64> {
    Some(match dtype {
        // A complex number's parts are compared one by one.
        DType::Float | DType::Complex64 => f64::from(f32::from_le_bytes(b.try_into().ok()?)),
        DType::Double | DType::Complex128 => f64::from_le_bytes(b.try_into().ok()?),
        DType::BFloat16 => {
            let h = u16::from_le_bytes(b.try_into().ok()?);
            f64::from(f32::from_bits(u32::from(h) << 16))
        }
        DType::Half => {
            let h = u16::from_le_bytes(b.try_into().ok()?);
            let (sign, exp, man) = ((h >> 15) & 1, (h >> 10) & 0x1f, h & 0x3ff);
            let v = match exp {
                0 => f64::from(man) * 2f64.powi(-24),
                31 if man == 0 => f64::INFINITY,
                31 => f64::NAN,
                e => (1.0 + f64::from(man) / 1024.0) * 2f64.powi(i32::from(e) - 15),
            };
            if sign == 1 { -v } else { v }
        }
        DType::Int32 => f64::from(i32::from_le_bytes(b.try_into().ok()?)),
        DType::Int64 => i64::from_le_bytes(b.try_into().ok()?) as f64,
        DType::UInt32 => f64::from(u32::from_le_bytes(b.try_into().ok()?)),
        DType::UInt64 => u64::from_le_bytes(b.try_into().ok()?) as f64,
        _ => return None,
    })
}

/// A string's bytes as text, invalid UTF-8 and controls escaped; long ones cut.
fn escaped(b: &[u8]) -> String {
    let s: String = b
        .iter()
        .take(64)
        .flat_map(|&c| std::ascii::escape_default(c))
        .map(char::from)
        .collect();
    if b.len() > 64 {
        format!("{s}... ({} bytes)", b.len())
    } else {
        s
    }
}

/// How two tensors differ: `None` when bit-identical.
struct Diff {
    text: String,
    /// The largest |ours - TensorFlow's| over elements, when comparable.
    max_abs: Option<f64>,
}

/// How closely a case's outputs must agree: bit for bit, or (float
/// elements only; integers, strings, shapes and dtypes stay exact) within
/// `ulp:N` units in the last place or `abs:X` absolutely. A non-finite
/// value must match exactly, except that any NaN matches any NaN (a sum
/// taken in another order may carry another NaN's payload). A case that
/// declares a tolerance says why in its "reason".
#[derive(Clone, Copy, Debug)]
enum Tolerance {
    Exact,
    Ulp(u64),
    Abs(f64),
    /// `"zero-sign:why"`: equal values, 0.0 and -0.0 one (where
    /// TensorFlow's sign of a zero depends on the element's SIMD lane).
    ZeroSign,
    /// `"unordered-rows:why"`: the first output's rows, and with them the
    /// same rows of every output with as many, may come in any order, the
    /// values exact (a hash table exported in its hash map's order, which
    /// TensorFlow seeds per process).
    UnorderedRows,
}

impl Tolerance {
    /// `"exact"`, `"ulp:N"`, `"abs:X"` (the reason in the case's "reason"
    /// or after a further `:`), or `"zero-sign:why"`.
    fn parse(s: &str) -> Option<Tolerance> {
        if s == "exact" {
            return Some(Tolerance::Exact);
        }
        if s == "zero-sign" || s.starts_with("zero-sign:") {
            return Some(Tolerance::ZeroSign);
        }
        if s.starts_with("unordered-rows:") {
            return Some(Tolerance::UnorderedRows);
        }
        let mut parts = s.splitn(3, ':');
        let (kind, value) = (parts.next()?, parts.next()?);
        match kind {
            "ulp" => value.parse().ok().map(Tolerance::Ulp),
            "abs" => value
                .parse()
                .ok()
                .filter(|x: &f64| x.is_finite() && *x >= 0.0)
                .map(Tolerance::Abs),
            _ => None,
        }
    }

    /// Whether two differing elements of `dtype` are within the tolerance.
    fn admits(self, dtype: DType, a: &[u8], b: &[u8]) -> bool {
        let (Some(x), Some(y)) = (float_value(dtype, a), float_value(dtype, b)) else {
            return false;
        };
        if x.is_nan() || y.is_nan() {
            return !matches!(
                self,
                Tolerance::Exact | Tolerance::ZeroSign | Tolerance::UnorderedRows
            ) && x.is_nan()
                && y.is_nan();
        }
        if !x.is_finite() || !y.is_finite() {
            return false;
        }
        match self {
            Tolerance::Exact | Tolerance::UnorderedRows => false,
            Tolerance::Abs(tol) => (x - y).abs() <= tol,
            Tolerance::Ulp(n) => ordered_bits(a).abs_diff(ordered_bits(b)) <= u128::from(n),
            Tolerance::ZeroSign => x == 0.0 && y == 0.0,
        }
    }
}

/// Row `i` of `t` (along its first dimension) as bytes, for ordering.
fn row_bytes(t: &Tensor, i: usize) -> Vec<u8> {
    let n = t.shape().first().copied().unwrap_or(1).max(1) as usize;
    match t.data() {
        TensorData::Buffer(b) => {
            let w = b.len() / n;
            b[i * w..(i + 1) * w].to_vec()
        }
        TensorData::Strings(v) => {
            let w = v.len() / n;
            let mut out = Vec::new();
            for s in &v[i * w..(i + 1) * w] {
                out.extend_from_slice(&(s.len() as u64).to_le_bytes());
                out.extend_from_slice(s);
            }
            out
        }
    }
}

/// `UnorderedRows`: the outputs with as many rows as the first, their rows
/// sorted together by the first's (then the others') bytes; the rest as is.
fn sorted_rows(outputs: &[Tensor]) -> Vec<Tensor> {
    let Some(n) = outputs.first().and_then(|t| t.shape().first().copied()) else {
        return outputs.to_vec();
    };
    let n = n as usize;
    let rowed: Vec<usize> = (0..outputs.len())
        .filter(|&j| outputs[j].shape().first() == Some(&(n as i64)))
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| {
        rowed
            .iter()
            .map(|&j| row_bytes(&outputs[j], i))
            .collect::<Vec<_>>()
    });
    outputs
        .iter()
        .enumerate()
        .map(|(j, t)| {
            if !rowed.contains(&j) {
                return t.clone();
            }
            let data = match t.data() {
                TensorData::Buffer(_) => {
                    TensorData::Buffer(order.iter().flat_map(|&i| row_bytes(t, i)).collect())
                }
                TensorData::Strings(v) => {
                    let w = v.len() / n.max(1);
                    TensorData::Strings(
                        order
                            .iter()
                            .flat_map(|&i| v[i * w..(i + 1) * w].iter().cloned())
                            .collect(),
                    )
                }
            };
            Tensor::new(t.dtype(), t.shape().to_vec(), data).unwrap()
        })
        .collect()
}

/// A float element's bits as an integer whose order is the values' order
/// (so adjacent floats are one apart, across zero too).
fn ordered_bits(b: &[u8]) -> i128 {
    let mut raw = [0u8; 8];
    raw[..b.len()].copy_from_slice(b);
    let bits = u64::from_le_bytes(raw);
    let sign = 1u64 << (8 * b.len() - 1);
    if bits & sign != 0 {
        -i128::from(bits & !sign)
    } else {
        i128::from(bits)
    }
}

/// One element as a float, for float dtypes only.
fn float_value(dtype: DType, b: &[u8]) -> Option<f64> {
    match dtype {
        DType::Float
        | DType::Double
        | DType::Half
        | DType::BFloat16
        | DType::Complex64
        | DType::Complex128 => as_f64(dtype, b),
        _ => None,
    }
}

/// `None` when `got` is `want` within `tol`; the largest tolerated
/// difference is added to `tolerated`.
fn compare(want: &Tensor, got: &Tensor, tol: Tolerance, tolerated: &mut f64) -> Option<Diff> {
    if want.dtype() != got.dtype() || want.shape() != got.shape() {
        return Some(Diff {
            text: format!(
                "TensorFlow gave {} {:?}, ours {} {:?}",
                want.dtype(),
                want.shape(),
                got.dtype(),
                got.shape()
            ),
            max_abs: None,
        });
    }
    if let (TensorData::Strings(w), TensorData::Strings(g)) = (want.data(), got.data()) {
        let differing = w.iter().zip(g).filter(|(a, b)| a != b).count();
        let i = w.iter().zip(g).position(|(a, b)| a != b)?;
        return Some(Diff {
            text: format!(
                "{differing} of {} strings differ; first at index {i}: TensorFlow {:?}, ours {:?}",
                w.len(),
                escaped(&w[i]),
                escaped(&g[i])
            ),
            max_abs: None,
        });
    }
    let (w, g) = (bytes_of(want), bytes_of(got));
    if w == g {
        return None;
    }
    // Complex numbers are reported part by part (index 2k is element k's
    // real part).
    let size = match want.dtype() {
        DType::Complex64 => 4,
        DType::Complex128 => 8,
        d => d.size().unwrap(),
    };
    let mut first = None;
    let mut differing = 0;
    let mut max_abs: Option<f64> = None;
    for (i, (a, b)) in w.chunks(size).zip(g.chunks(size)).enumerate() {
        if a == b {
            continue;
        }
        if tol.admits(want.dtype(), a, b) {
            if let (Some(x), Some(y)) = (as_f64(want.dtype(), a), as_f64(want.dtype(), b))
                && (x - y).is_finite()
            {
                *tolerated = tolerated.max((x - y).abs());
            }
            continue;
        }
        differing += 1;
        first.get_or_insert(i);
        if let (Some(x), Some(y)) = (as_f64(want.dtype(), a), as_f64(want.dtype(), b)) {
            let d = (x - y).abs();
            max_abs = Some(max_abs.map_or(d, |m: f64| m.max(d)));
        }
    }
    let i = first?;
    let (a, b) = (&w[i * size..(i + 1) * size], &g[i * size..(i + 1) * size]);
    let value =
        |x: &[u8]| as_f64(want.dtype(), x).map_or_else(String::new, |v| format!(" ({v:e})"));
    let le = |x: &[u8]| {
        let mut r = x.to_vec();
        r.reverse();
        hex(&r)
    };
    Some(Diff {
        text: format!(
            "{differing} of {} elements differ; first at index {i}: TensorFlow 0x{}{}, ours 0x{}{}; max |diff| {:?}",
            w.len() / size,
            le(a),
            value(a),
            le(b),
            value(b),
            max_abs
        ),
        max_abs,
    })
}

/// Our outputs for each run of the case (one run unless it has "calls").
fn run_case(
    case: &Json,
    nodes: &[NodeDef],
    inputs: &[Tensor],
    runs: usize,
) -> Result<Vec<Vec<Tensor>>> {
    let op = case["op"].as_str().unwrap();
    if op == "dataset" {
        // Each run: a fresh iterator, its elements' components in order.
        let graph = blob(case["graph"].as_str().unwrap());
        let translated = tfdata_graph::translate_bytes(&graph)?;
        check_known(case, &translated.dataset)?;
        let mut out = Vec::new();
        for _ in 0..runs {
            let mut it = translated.dataset.iter()?;
            let mut run = Vec::new();
            // A bound, in case ours never ends.
            for _ in 0..10_000 {
                match it.next_element()? {
                    Some(el) => run.extend(el.components),
                    None => break,
                }
            }
            out.push(run);
        }
        return Ok(out);
    }
    if op == "function" {
        let lib = FunctionDefLibrary::decode(&blob(case["library"].as_str().unwrap())[..]).unwrap();
        let graph = GraphDef {
            library: Some(lib),
            ..Default::default()
        };
        let library = Library::of(&graph)?;
        // Dataset nodes too: a function may build a dataset and reduce or
        // iterate it.
        let nodes = tfdata_graph::translate::dataset_nodes();
        let mut compiler = Compiler::new(&library, &nodes);
        let f = compiler.function(case["function"].as_str().unwrap())?;
        let args = inputs.iter().cloned().map(Value::Tensor).collect();
        let out = f.call(args)?;
        return Ok(vec![
            out.into_iter()
                .map(|v| v.into_tensor("result"))
                .collect::<Result<_>>()?,
        ]);
    }
    let node = &nodes[case["node"].as_u64().unwrap() as usize];
    let Some(kernel) = kernels::lookup(op) else {
        return Err(tfdata_core::Error::Unimplemented(format!(
            "no kernel for {op}"
        )));
    };
    let compute = (kernel.build)(&NodeAttrs::of(node))?;
    (0..runs).map(|_| compute(inputs.to_vec())).collect()
}

/// What TensorFlow knew of a pipeline without running it, when the case
/// records it: its cardinality, and each component's dtype and shape.
fn check_known(case: &Json, ds: &tfdata_dataset::Dataset) -> Result<()> {
    let mismatch = |what: String| Err(tfdata_core::Error::Internal(what));
    if let Some(want) = case.get("cardinality").and_then(Json::as_i64)
        && ds.cardinality() != want
    {
        return mismatch(format!(
            "cardinality: TensorFlow's {want}, ours {}",
            ds.cardinality()
        ));
    }
    let Some(want) = case.get("spec").and_then(Json::as_array) else {
        return Ok(());
    };
    let Some(ours) = ds.element_spec()? else {
        return mismatch("element spec: ours is unknown".into());
    };
    let ours: Vec<(i64, Option<Vec<Option<i64>>>)> = ours
        .flatten()
        .iter()
        .map(|t| (t.dtype.code() as i64, t.shape.0.clone()))
        .collect();
    let want: Vec<(i64, Option<Vec<Option<i64>>>)> = want
        .iter()
        .map(|c| {
            let dims = c[1]
                .as_array()
                .map(|d| d.iter().map(Json::as_i64).collect());
            (c[0].as_i64().unwrap(), dims)
        })
        .collect();
    if ours != want {
        return mismatch(format!(
            "element spec (dtype, dims): TensorFlow's {want:?}, ours {ours:?}"
        ));
    }
    Ok(())
}

/// A family's cases (not the manifest, not the census).
fn is_case_file(p: &std::path::Path) -> bool {
    p.extension().is_some_and(|e| e == "json")
        && !p.ends_with("manifest.json")
        && !p.ends_with("census.json")
}

#[derive(Default)]
struct OpStats {
    passed: usize,
    failed: usize,
    known: usize,
    max_abs: f64,
    /// The largest difference a declared tolerance admitted, and in how
    /// many cases one was needed.
    tolerated: f64,
    inexact: usize,
}

#[test]
fn kernels_match_tensorflow() {
    let start = Instant::now();
    let known: HashSet<String> = std::fs::read_to_string(dir().join("known_failures.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    let mut families: Vec<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| is_case_file(p))
        .collect();
    families.sort();
    assert!(!families.is_empty(), "no case files in {:?}", dir());
    let mut stats: BTreeMap<String, OpStats> = BTreeMap::new();
    let mut failures = String::new();
    let mut unexpected = 0;
    let mut fixed_known = Vec::new();
    let mut total = 0;
    for path in &families {
        let file: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let nodes: Vec<NodeDef> = file["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| NodeDef::decode(&unhex(h.as_str().unwrap())[..]).unwrap())
            .collect();
        for case in file["cases"].as_array().unwrap() {
            total += 1;
            let id = case["id"].as_str().unwrap();
            let op = case["op"].as_str().unwrap();
            let tolerance = case["tolerance"].as_str().unwrap();
            let tol = Tolerance::parse(tolerance)
                .unwrap_or_else(|| panic!("{id}: unknown tolerance {tolerance}"));
            if !matches!(tol, Tolerance::Exact) {
                // The reason: its own field, or the tolerance's last part
                // (`"ulp:N:why"`).
                assert!(
                    case.get("reason").and_then(Json::as_str).is_some()
                        || tolerance
                            .splitn(3, ':')
                            .nth(2)
                            .is_some_and(|w| !w.trim().is_empty())
                        || tolerance.starts_with("zero-sign:")
                        || tolerance.starts_with("unordered-rows:"),
                    "{id}: tolerance {tolerance} without a reason"
                );
            }
            let inputs: Vec<Tensor> = case
                .get("inputs")
                .map(|i| {
                    i.as_array()
                        .unwrap()
                        .iter()
                        .map(|t| tensor(t.as_str().unwrap()))
                        .collect()
                })
                .unwrap_or_default();
            let want: Option<Vec<Vec<Tensor>>> = if let Some(its) = case.get("iterations") {
                // A pipeline: per iteration, every element's components.
                Some(
                    its.as_array()
                        .unwrap()
                        .iter()
                        .map(|it| {
                            it.as_array()
                                .unwrap()
                                .iter()
                                .flat_map(|el| el.as_array().unwrap())
                                .map(|t| tensor(t.as_str().unwrap()))
                                .collect()
                        })
                        .collect(),
                )
            } else if let Some(calls) = case.get("calls") {
                Some(
                    calls
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|c| {
                            c.as_array()
                                .unwrap()
                                .iter()
                                .map(|t| tensor(t.as_str().unwrap()))
                                .collect()
                        })
                        .collect(),
                )
            } else {
                case.get("outputs").map(|o| {
                    vec![
                        o.as_array()
                            .unwrap()
                            .iter()
                            .map(|t| tensor(t.as_str().unwrap()))
                            .collect(),
                    ]
                })
            };
            let runs = want.as_ref().map_or(1, Vec::len);
            let got = run_case(case, &nodes, &inputs, runs);
            let mut max_abs = 0f64;
            let mut tolerated = 0f64;
            let problem: Option<String> = match (&want, got) {
                (Some(want), Ok(got)) => {
                    let mut p = None;
                    'runs: for (k, (w, g)) in want.iter().zip(&got).enumerate() {
                        let (w, g) = &if matches!(tol, Tolerance::UnorderedRows) {
                            (sorted_rows(w), sorted_rows(g))
                        } else {
                            (w.clone(), g.clone())
                        };
                        if w.len() != g.len() {
                            p = Some(format!(
                                "run {k}: TensorFlow gave {} outputs, ours {}",
                                w.len(),
                                g.len()
                            ));
                            break;
                        }
                        for (j, (wt, gt)) in w.iter().zip(g).enumerate() {
                            if let Some(d) = compare(wt, gt, tol, &mut tolerated) {
                                max_abs = max_abs.max(d.max_abs.unwrap_or(f64::INFINITY));
                                p = Some(format!("run {k} output {j}: {}", d.text));
                                break 'runs;
                            }
                        }
                    }
                    p
                }
                (Some(_), Err(e)) => Some(format!("TensorFlow gave values, ours failed: {e}")),
                (None, got) => {
                    let err = &case["error"];
                    let code = err["code"].as_i64().unwrap();
                    let message = err["message"].as_str().unwrap();
                    match got {
                        Ok(_) => Some(format!(
                            "TensorFlow failed ({} {message:?}), ours gave values",
                            err["class"].as_str().unwrap()
                        )),
                        // No CPU kernel in TensorFlow for these attributes:
                        // any refusal of ours matches.
                        Err(_) if code == 5 => None,
                        Err(e) if e.code() as i64 == code && e.to_string().contains(message) => {
                            None
                        }
                        Err(e) => Some(format!(
                            "TensorFlow failed with {} {message:?}, ours with code {:?}: {e}",
                            err["class"].as_str().unwrap(),
                            e.code()
                        )),
                    }
                }
            };
            let s = stats.entry(op.to_string()).or_default();
            s.tolerated = s.tolerated.max(tolerated);
            s.inexact += usize::from(tolerated > 0.0);
            match problem {
                None if known.contains(id) => fixed_known.push(id.to_string()),
                None => s.passed += 1,
                Some(p) => {
                    s.max_abs = s.max_abs.max(max_abs);
                    if known.contains(id) {
                        s.known += 1;
                    } else {
                        s.failed += 1;
                        unexpected += 1;
                    }
                    if known.contains(id) && std::env::var_os("DIFFERENTIAL_VERBOSE").is_none() {
                        continue;
                    }
                    let node_text = match (case.get("node"), case.get("function")) {
                        (Some(n), _) => format!("{:?}", nodes[n.as_u64().unwrap() as usize]),
                        (None, Some(f)) => format!("function {f}"),
                        (None, None) => "a dataset graph".to_string(),
                    };
                    let _ = writeln!(
                        failures,
                        "\n{op} case {id:?}{}\n  node: {node_text}\n  inputs: {}\n  {p}",
                        if known.contains(id) {
                            " (known failure)"
                        } else {
                            ""
                        },
                        inputs.iter().map(summary).collect::<Vec<_>>().join("; ")
                    );
                }
            }
        }
    }
    let mut table = String::new();
    for (op, s) in &stats {
        let _ = writeln!(
            table,
            "  {op:40} passed {:4}  failed {:4}  known failures {:4}  max |diff| {}{}",
            s.passed,
            s.failed,
            s.known,
            s.max_abs,
            if s.inexact > 0 {
                format!(
                    "  ({} within their tolerance, up to {:e})",
                    s.inexact, s.tolerated
                )
            } else {
                String::new()
            }
        );
    }
    println!(
        "{total} cases from {} files in {:?}:\n{table}",
        families.len(),
        start.elapsed()
    );
    if !failures.is_empty() {
        println!("failures:{failures}");
    }
    assert!(
        fixed_known.is_empty(),
        "these cases pass now: remove them from known_failures.txt: {fixed_known:?}"
    );
    assert_eq!(
        unexpected, 0,
        "{unexpected} cases differ from TensorFlow (see above)"
    );
}

/// How many committed cases run each op: an op case counts for its op; a
/// function or pipeline case for every op its graph and library hold.
fn cases_per_op() -> BTreeMap<String, usize> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/differential");
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| is_case_file(p))
        .collect();
    paths.sort();
    for path in paths {
        let file: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for case in file["cases"].as_array().unwrap() {
            let mut ops = std::collections::BTreeSet::new();
            let library = match case["op"].as_str().unwrap() {
                "function" => Some(
                    FunctionDefLibrary::decode(&blob(case["library"].as_str().unwrap())[..])
                        .unwrap(),
                ),
                "dataset" => {
                    let g = GraphDef::decode(&blob(case["graph"].as_str().unwrap())[..]).unwrap();
                    ops.extend(g.node.iter().map(|n| n.op.clone()));
                    g.library
                }
                op => {
                    ops.insert(op.to_string());
                    None
                }
            };
            for f in library.iter().flat_map(|l| &l.function) {
                ops.extend(f.node_def.iter().map(|n| n.op.clone()));
            }
            for op in ops {
                *counts.entry(op).or_default() += 1;
            }
        }
    }
    counts
}

/// The op census section of docs/compatibility.md, rendered from
/// `tests/differential/census.json` (`interop/differential/census.py` reads
/// it off TensorFlow 2.21), the ops tfdata workers run and the committed
/// differential cases.
fn render_census() -> String {
    let census: Json = serde_json::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/differential/census.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let supported: HashSet<&str> = tfdata_graph::supported_ops().into_iter().collect();
    let cases = cases_per_op();
    let families = census["families"].as_object().unwrap();
    let mut out = String::new();
    let (mut all, mut all_supported, mut all_tested) = (0, 0, 0);
    let mut summary = String::new();
    let mut details = String::new();
    let mut in_census = HashSet::new();
    let mut no_cpu = Vec::new();
    let mut removed = Vec::new();
    let mut refused = Vec::new();
    for (family, entry) in families {
        let ops: Vec<&str> = entry["ops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o.as_str().unwrap())
            .collect();
        no_cpu.extend(
            entry["no_cpu_kernel"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o.as_str().unwrap()),
        );
        refused.extend(
            entry["refused_by_tf"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o.as_str().unwrap()),
        );
        removed.extend(
            entry["removed_from_graphs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o.as_str().unwrap()),
        );
        in_census.extend(ops.iter().copied());
        let n_supported = ops.iter().filter(|o| supported.contains(*o)).count();
        let n_tested = ops
            .iter()
            .filter(|o| supported.contains(*o) && cases.contains_key(**o))
            .count();
        all += ops.len();
        all_supported += n_supported;
        all_tested += n_tested;
        writeln!(
            summary,
            "| {family} | {} | {n_supported} | {:.0}% | {n_tested} |",
            ops.len(),
            100.0 * n_supported as f64 / ops.len().max(1) as f64
        )
        .unwrap();
        writeln!(
            details,
            "<details><summary>{family}: {n_supported} of {} supported</summary>\n\n| Op | tfdata | Differential cases |\n|---|---|---|",
            ops.len()
        )
        .unwrap();
        for op in &ops {
            let yes = if supported.contains(op) { "yes" } else { "no" };
            let n = cases.get(*op).copied().unwrap_or(0);
            writeln!(details, "| `{op}` | {yes} | {n} |").unwrap();
        }
        details.push_str("\n</details>\n\n");
    }
    writeln!(
        out,
        "Generated by `cargo test -p tfdata-graph --test differential` (`TFDATA_BLESS=1` rewrites \
         it) from `crates/tfdata-graph/tests/differential/census.json`, which \
         `interop/differential/census.py` reads off TensorFlow {}: every op TensorFlow registers \
         in these families with a CPU kernel. **{all_supported} of {all} supported ({:.1}%)**, \
         {all_tested} of them with differential cases.\n",
        census["tf"].as_str().unwrap(),
        100.0 * all_supported as f64 / all.max(1) as f64
    )
    .unwrap();
    out.push_str(
        "| Family | Ops | Supported | Share | With differential cases |\n|---|---|---|---|---|\n",
    );
    out.push_str(&summary);
    writeln!(
        out,
        "| **all** | **{all}** | **{all_supported}** | **{:.1}%** | **{all_tested}** |\n",
        100.0 * all_supported as f64 / all.max(1) as f64
    )
    .unwrap();
    out.push_str(&details);
    let mut outside: Vec<&str> = supported
        .iter()
        .copied()
        .filter(|o| !in_census.contains(o))
        .collect();
    outside.sort_unstable();
    writeln!(
        out,
        "Supported outside the census (array, control flow, bitwise, nn): {}.\n",
        outside
            .iter()
            .map(|o| format!("`{o}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
    .unwrap();
    no_cpu.sort_unstable();
    writeln!(
        out,
        "Not counted (no CPU kernel in TensorFlow, so TensorFlow's own workers cannot run them \
         either): {}.\n",
        no_cpu
            .iter()
            .map(|o| format!("`{o}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
    .unwrap();
    refused.sort_unstable();
    writeln!(
        out,
        "Not counted (TensorFlow {}'s kernel refuses every input, as `census.py` checks by \
         running it; tfdata's workers give the same error): {}.\n",
        census["tf"].as_str().unwrap(),
        refused
            .iter()
            .map(|o| format!("`{o}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
    .unwrap();
    removed.sort_unstable();
    writeln!(
        out,
        "Not counted (removed from graphs: TensorFlow {} refuses a graph of its own GraphDef \
         version that uses one, so no TensorFlow client sends them and its workers cannot run \
         them): {}.",
        census["tf"].as_str().unwrap(),
        removed
            .iter()
            .map(|o| {
                if supported.contains(o) {
                    format!("`{o}` (supported)")
                } else {
                    format!("`{o}`")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    )
    .unwrap();
    out
}

/// The table of differential families in docs/compatibility.md: each
/// family's cases, its known failures and the first sentence of its
/// module's docstring (`interop/differential/families/<name>.py`).
fn render_families() -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let known: HashSet<String> =
        std::fs::read_to_string(root.join("tests/differential/known_failures.txt"))
            .unwrap_or_default()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(String::from)
            .collect();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root.join("tests/differential"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| is_case_file(p))
        .collect();
    paths.sort();
    let mut out =
        String::from("| Family | Cases | Known failures | What it holds |\n|---|---|---|---|\n");
    let (mut all, mut all_known) = (0, 0);
    for path in paths {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let file: Json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let cases = file["cases"].as_array().unwrap();
        let failing = cases
            .iter()
            .filter(|c| known.contains(c["id"].as_str().unwrap()))
            .count();
        let source = std::fs::read_to_string(
            root.join(format!("../../interop/differential/families/{name}.py")),
        )
        .unwrap_or_default();
        let doc = source
            .split("\"\"\"")
            .nth(1)
            .unwrap_or("")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let first = doc.split_inclusive(". ").next().unwrap_or("").trim();
        all += cases.len();
        all_known += failing;
        writeln!(out, "| `{name}` | {} | {failing} | {first} |", cases.len()).unwrap();
    }
    writeln!(out, "| **all** | **{all}** | **{all_known}** | |").unwrap();
    out
}

/// Rewrites (`TFDATA_BLESS`) or checks the generated region between
/// `<!-- {marker}: begin -->` and `<!-- {marker}: end -->`.
fn check_generated(marker: &str, want: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/compatibility.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (begin, end) = (
        format!("<!-- {marker}: begin -->\n"),
        format!("<!-- {marker}: end -->"),
    );
    let start = doc
        .find(&begin)
        .unwrap_or_else(|| panic!("the {marker} markers"))
        + begin.len();
    let stop = start
        + doc[start..]
            .find(&end)
            .unwrap_or_else(|| panic!("the {marker} end marker"));
    if doc[start..stop] == *want {
        return;
    }
    if std::env::var_os("TFDATA_BLESS").is_some() {
        std::fs::write(&path, format!("{}{want}{}", &doc[..start], &doc[stop..])).unwrap();
        return;
    }
    panic!(
        "docs/compatibility.md's {marker} is stale: run \
         `TFDATA_BLESS=1 cargo test -p tfdata-graph --test differential` and commit it"
    );
}

#[test]
fn the_op_census_in_the_docs_is_current() {
    check_generated("op census", &render_census());
    check_generated("differential families", &render_families());
}
