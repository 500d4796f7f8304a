//! Analysis, fingerprint and rewrite of real TensorFlow 2.21 graphs
//! (`tests/data/autocache/`, written by `make_autocache_graphs.py` there).

use std::collections::BTreeMap;
use std::sync::Arc;

use prost::Message;
use tfdata_core::{Element, Result, Tensor};
use tfdata_dataset::autocache::Resolver;
use tfdata_dataset::io::fs::FileSystem;
use tfdata_dataset::snapshot::layout::SnapshotCompression;
use tfdata_proto::tensorflow::{GraphDef, attr_value};

use super::*;

fn corpus(name: &str) -> GraphDef {
    let path = format!(
        "{}/tests/data/autocache/{name}.pb",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    GraphDef::decode(bytes.as_slice()).unwrap()
}

fn resolver() -> impl Fn(&str) -> Result<Arc<dyn FileSystem>> {
    |path: &str| tfdata_dataset::io::file_system(path)
}

fn labels(a: &GraphAnalysis) -> Vec<String> {
    a.candidates.iter().map(|c| c.label.clone()).collect()
}

/// `graph` with its file-name constants (the corpus' `/nonexistent/...`)
/// pointed at `files`, in order.
fn with_files(mut graph: GraphDef, files: &[String]) -> GraphDef {
    let strings = files.iter().map(|f| f.clone().into()).collect();
    let tensor = Tensor::strings(strings, vec![files.len() as i64]).unwrap();
    for node in &mut graph.node {
        // TensorFlow packs string constants into `tensor_content`.
        let is_files = node.op == "Const"
            && matches!(
                node.attr.get("value").and_then(|a| a.value.as_ref()),
                Some(attr_value::Value::Tensor(t))
                    if tfdata_core::element::tensor_from_proto(t).is_ok_and(|t| {
                        t.string_values()
                            .is_ok_and(|v| v.iter().any(|s| s.starts_with(b"/nonexistent/")))
                    })
            );
        if is_files {
            node.attr.get_mut("value").unwrap().value = Some(attr_value::Value::Tensor(
                tfdata_core::element::tensor_to_proto(&tensor),
            ));
        }
    }
    graph
}

fn temp_files(dir: &std::path::Path) -> Vec<String> {
    (0..2)
        .map(|i| {
            let path = dir.join(format!("images-{i}.tfrecord"));
            std::fs::write(&path, vec![i as u8; 10 + i]).unwrap();
            path.to_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn the_chain_of_a_decode_and_resize_pipeline_stops_at_batch() {
    let a = analyse(&corpus("decode_a")).unwrap();
    assert_eq!(
        labels(&a),
        [
            "0: TensorSliceDataset",
            "1: FlatMapDataset(Dataset_flat_map_read_one_file)",
            "2: MapDataset(Dataset_map_f)",
        ]
    );
    assert!(a.candidates[0].in_memory);
    assert!(!a.candidates[1].in_memory && !a.candidates[2].in_memory);
    let stopped = a.stopped.unwrap();
    assert!(
        stopped.contains("`BatchDatasetV2` groups or counts elements across splits")
            && stopped.contains("at 3: BatchDatasetV2"),
        "{stopped}"
    );
    // Each prefix graph returns its own node.
    for c in &a.candidates {
        let ret = crate::graph::retval(&c.prefix).unwrap();
        assert_eq!(ret.input, std::slice::from_ref(&c.node));
        assert!(c.prefix.node.iter().all(|n| n.op != "BatchDatasetV2"));
    }
}

#[test]
fn the_service_clients_compression_map_is_passed_over() {
    let a = analyse(&corpus("distribute")).unwrap();
    assert_eq!(a.candidates.len(), 4, "{:?}", labels(&a));
    assert_eq!(a.candidates[3].label, "3: PrefetchDataset");
    assert_eq!(a.stopped, None);
}

#[test]
fn randomness_ends_the_chain_naming_the_op() {
    let a = analyse(&corpus("random")).unwrap();
    assert_eq!(a.candidates.len(), 3);
    let stopped = a.stopped.unwrap();
    assert!(
        stopped.starts_with("unseeded random op `RandomUniform` in function Dataset_map_lambda")
            && stopped.contains("at 3: MapDataset"),
        "{stopped}"
    );
    // Stateless random ops are a function of their seed and input.
    let a = analyse(&corpus("stateless")).unwrap();
    assert_eq!((a.candidates.len(), a.stopped), (4, None));
}

#[test]
fn shuffles_follow_tensorflows_seed_rule() {
    let a = analyse(&corpus("shuffle_seeded")).unwrap();
    assert_eq!(a.stopped, None);
    assert!(
        a.candidates[2].label.starts_with("2: ShuffleDataset"),
        "{:?}",
        labels(&a)
    );
    let a = analyse(&corpus("shuffle_reshuffled")).unwrap();
    assert_eq!(a.candidates.len(), 2);
    assert!(a.stopped.unwrap().contains("with reshuffle_each_iteration"));
    let a = analyse(&corpus("shuffle_unseeded")).unwrap();
    assert_eq!(a.candidates.len(), 2);
    assert!(
        a.stopped
            .unwrap()
            .starts_with("unseeded random op `ShuffleDataset")
    );
}

#[test]
fn python_functions_and_zips_end_the_chain() {
    let a = analyse(&corpus("py_function")).unwrap();
    assert_eq!(a.candidates.len(), 2);
    let stopped = a.stopped.unwrap();
    assert!(
        stopped.contains("`EagerPyFunc` (a Python function)"),
        "{stopped}"
    );
    let a = analyse(&corpus("zip")).unwrap();
    assert!(a.candidates.is_empty());
    assert!(
        a.stopped
            .unwrap()
            .contains("`ZipDataset` combines 2 datasets")
    );
}

#[test]
fn a_graph_autocache_cannot_read_is_an_error() {
    let mut graph = corpus("decode_a");
    graph.node.retain(|n| n.op != "_Retval");
    assert!(analyse(&graph).unwrap_err().to_string().contains("_Retval"));
}

#[test]
fn fingerprints_ignore_names_and_see_attributes_bodies_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let files = temp_files(dir.path());
    let fs = resolver();
    let fps = |name: &str| {
        let a = analyse(&with_files(corpus(name), &files)).unwrap();
        fingerprints(&a, &fs)
            .into_iter()
            .map(|r| r.unwrap())
            .collect::<Vec<_>>()
    };
    let a = fps("decode_a");
    // The same pipeline from another process: other function names,
    // node names and metadata, the same fingerprints.
    let (raw_a, raw_b) = (corpus("decode_a"), corpus("decode_b"));
    assert_ne!(raw_a, raw_b, "the corpus must differ in names");
    assert_eq!(fps("decode_b"), a);
    // Points differ from one another.
    assert_ne!(a[1].prefix, a[2].prefix);
    assert_eq!(a[1].files, a[2].files);
    // Another resize size: the map's function body differs, the points
    // below it do not.
    let other = fps("decode_other_size");
    assert_eq!(other[..2], a[..2]);
    assert_ne!(other[2].prefix, a[2].prefix);
    // An attribute changed.
    let mut changed = with_files(corpus("decode_a"), &files);
    let map = changed
        .node
        .iter_mut()
        .find(|n| n.op == "MapDataset")
        .unwrap();
    map.attr.get_mut("preserve_cardinality").unwrap().value = Some(attr_value::Value::B(false));
    let changed = fingerprints(&analyse(&changed).unwrap(), &fs);
    assert_ne!(changed[2].as_ref().unwrap().prefix, a[2].prefix);
    assert_eq!(changed[1].as_ref().unwrap(), &a[1]);
    // A file changed: the files part, not the prefix part.
    std::fs::write(&files[1], b"a longer file than before").unwrap();
    let touched = fps("decode_a");
    for (t, a) in touched.iter().zip(&a) {
        assert_eq!(t.prefix, a.prefix);
        assert_ne!(t.files, a.files);
    }
}

#[test]
fn files_named_at_run_time_cannot_be_fingerprinted() {
    let a = analyse(&corpus("matching_files")).unwrap();
    assert_eq!(a.candidates.len(), 3, "{:?}", labels(&a));
    let fs = resolver();
    let err = fingerprint(&a.candidates[1], &fs).unwrap_err().to_string();
    assert!(err.contains("`MatchingFiles`"), "{err}");
    // A named file that does not exist cannot be watched either.
    let a = analyse(&corpus("decode_a")).unwrap();
    let err = fingerprint(&a.candidates[2], &fs).unwrap_err().to_string();
    assert!(
        err.contains("/nonexistent/autocache-corpus/images-0.tfrecord"),
        "{err}"
    );
}

fn elements(graph: &GraphDef) -> Vec<Element> {
    let ds = crate::translate(graph).unwrap().dataset;
    let mut it = ds.iter().unwrap();
    let mut out = Vec::new();
    while let Some(e) = it.next_element().unwrap() {
        out.push(e);
    }
    out
}

#[test]
fn the_rewritten_graph_reads_the_cache_and_nothing_below_it() {
    let graph = corpus("range_map");
    let a = analyse(&graph).unwrap();
    assert_eq!(
        labels(&a),
        ["0: RangeDataset", "1: MapDataset(Dataset_map_lambda)"]
    );
    let point = &a.candidates[1];
    // The cache: the prefix's elements as a distributed snapshot, as the
    // service writes it (reversed, as several workers may order them).
    let mut cached = elements(&point.prefix);
    cached.reverse();
    let spec = crate::translate(&point.prefix)
        .unwrap()
        .dataset
        .element_spec()
        .unwrap()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cache");
    let path = path.to_str().unwrap();
    let fs = tfdata_dataset::io::LocalFileSystem;
    tfdata_dataset::snapshot::testing::write_snapshot(
        &fs,
        path,
        &spec,
        SnapshotCompression::Snappy,
        &cached,
        3,
        2,
    )
    .unwrap();

    let rewritten = rewrite(&graph, point, path).unwrap();
    let ops: BTreeMap<&str, &str> = rewritten
        .node
        .iter()
        .map(|n| (n.name.as_str(), n.op.as_str()))
        .collect();
    assert_eq!(ops[point.node.as_str()], LOAD_OP);
    assert!(
        !ops.values()
            .any(|op| *op == "RangeDataset" || *op == "MapDataset"),
        "{ops:?}"
    );
    assert!(ops.values().any(|op| *op == "BatchDatasetV2"));
    // The batches of the cache's elements, in the cache's order.
    let batches = elements(&rewritten);
    let flat: Vec<i64> = batches
        .iter()
        .flat_map(|b| b.components[0].to_vec::<i64>().unwrap())
        .collect();
    let mut expected: Vec<i64> = cached
        .iter()
        .map(|e| e.components[0].to_scalar::<i64>().unwrap())
        .collect();
    assert_eq!(flat, expected);
    expected.sort();
    assert_eq!(expected, (0..10).map(|x| x * 3).collect::<Vec<i64>>());
    // The op reads nothing but its path: without the cache it fails,
    // naming it.
    let missing = rewrite(&graph, point, "/nonexistent/cache").unwrap();
    let err = crate::translate(&missing).err().unwrap().to_string();
    assert!(err.contains("/nonexistent/cache"), "{err}");
}

#[test]
fn a_candidate_of_another_graph_is_refused() {
    let a = analyse(&corpus("decode_a")).unwrap();
    let err = rewrite(&corpus("range_map"), &a.candidates[2], "/c")
        .unwrap_err()
        .to_string();
    assert!(err.contains("is not a point of this graph"), "{err}");
    let _: Resolver<'_> = &tfdata_dataset::io::file_system;
}

#[test]
fn a_long_chain_stops_at_the_candidate_limit() {
    // range(10) followed by 40 prefetches: past MAX_CANDIDATES points the
    // analysis stops, saying so.
    let mut graph = corpus("range_map");
    let map = graph
        .node
        .iter()
        .find(|n| n.op == "MapDataset")
        .unwrap()
        .name
        .clone();
    let mut below = map;
    for i in 0..40 {
        let name = format!("prefetch_{i}");
        let buffer = format!("buffer_{i}");
        let mut constant = graph.node.iter().find(|n| n.op == "Const").unwrap().clone();
        constant.name = buffer.clone();
        graph.node.push(constant);
        graph.node.push(tfdata_proto::tensorflow::NodeDef {
            name: name.clone(),
            op: "PrefetchDataset".into(),
            input: vec![below.clone(), buffer],
            ..Default::default()
        });
        below = name;
    }
    let batch = graph
        .node
        .iter_mut()
        .find(|n| n.op == "BatchDatasetV2")
        .unwrap();
    batch.input[0] = below;
    let a = analyse(&graph).unwrap();
    assert_eq!(a.candidates.len(), MAX_CANDIDATES);
    assert!(
        a.stopped
            .unwrap()
            .starts_with("autocache considers at most 32 points"),
    );
}
