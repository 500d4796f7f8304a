//! Malformed and hostile dataset graphs are refused with a clear error, in
//! bounded time, by the translator and by the dispatcher's support check.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use prost::Message;
use tfdata_core::Tensor;
use tfdata_proto::tensorflow::{AttrValue, GraphDef, NodeDef, attr_value};

fn constant(name: &str, t: Tensor) -> NodeDef {
    let mut attr = HashMap::new();
    attr.insert(
        "value".to_string(),
        AttrValue {
            value: Some(attr_value::Value::Tensor(
                tfdata_core::element::tensor_to_proto(&t),
            )),
        },
    );
    attr.insert(
        "dtype".to_string(),
        AttrValue {
            value: Some(attr_value::Value::Type(t.dtype().code())),
        },
    );
    NodeDef {
        name: name.into(),
        op: "Const".into(),
        attr,
        ..Default::default()
    }
}

fn op(name: &str, op: &str, inputs: &[&str]) -> NodeDef {
    NodeDef {
        name: name.into(),
        op: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn graph(mut nodes: Vec<NodeDef>, result: &str) -> GraphDef {
    nodes.push(op("dataset", "_Retval", &[result]));
    GraphDef {
        node: nodes,
        ..Default::default()
    }
}

fn range(n: i64) -> Vec<NodeDef> {
    vec![
        constant("start", Tensor::scalar(0i64)),
        constant("stop", Tensor::scalar(n)),
        constant("step", Tensor::scalar(1i64)),
        op("range", "RangeDataset", &["start", "stop", "step"]),
    ]
}

fn translate_err(g: &GraphDef) -> String {
    let started = Instant::now();
    let err = match tfdata_graph::translate(g) {
        Ok(_) => panic!("translated"),
        Err(e) => e.to_string(),
    };
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    err
}

#[test]
fn a_plain_graph_translates_and_runs() {
    let mut nodes = range(7);
    nodes.push(constant("size", Tensor::scalar(3i64)));
    nodes.push(constant("drop", Tensor::scalar(false)));
    nodes.push(op("batch", "BatchDatasetV2", &["range", "size", "drop"]));
    let t = tfdata_graph::translate_bytes(&graph(nodes, "batch").encode_to_vec()).unwrap();
    assert!(!t.compressed);
    let batches: Vec<_> = t
        .dataset
        .iter()
        .unwrap()
        .map(|e| e.unwrap().components[0].to_vec::<i64>().unwrap())
        .collect();
    assert_eq!(batches, vec![vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
    assert!(
        tfdata_graph::unsupported_ops(&graph(range(1), "range"))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn malformed_graphs_are_refused() {
    let cases: Vec<(GraphDef, &str)> = vec![
        (GraphDef::default(), "no _Retval"),
        (graph(range(3), "nowhere"), "no node \"nowhere\""),
        (
            graph(
                vec![
                    op("a", "RepeatDataset", &["b", "c"]),
                    op("b", "RepeatDataset", &["a", "c"]),
                    constant("c", Tensor::scalar(1i64)),
                ],
                "a",
            ),
            "cycle",
        ),
        (
            graph(
                vec![
                    op("a", "RangeDataset", &["x"]),
                    constant("x", Tensor::scalar(1i64)),
                ],
                "a",
            ),
            "missing",
        ),
        (
            graph(vec![constant("x", Tensor::scalar(1i64))], "x"),
            "not a dataset",
        ),
        (
            graph(
                vec![
                    op("a", "RangeDataset", &["x", "x", "x"]),
                    constant("x", Tensor::scalar_string("s")),
                ],
                "a",
            ),
            "integer",
        ),
        (graph(range(3), "range:7"), "has 1"),
    ];
    for (g, want) in cases {
        let err = translate_err(&g);
        assert!(err.contains(want), "want {want:?}: {err}");
    }
    let err = tfdata_graph::translate_bytes(b"\xff\xff\xff")
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("does not decode"), "{err}");
}

#[test]
fn doubled_edges_and_deep_chains_are_refused_quickly() {
    // zip(zip(zip(a, a), ...)): 2^40 paths.
    let mut nodes = range(2);
    let mut prev = "range".to_string();
    for i in 0..40 {
        let name = format!("zip{i}");
        nodes.push(op(&name, "ZipDataset", &[&prev, &prev]));
        prev = name;
    }
    let err = translate_err(&graph(nodes.clone(), &prev));
    assert!(err.contains("counting each path"), "{err}");
    // The support check walks each node once.
    let started = Instant::now();
    assert!(
        tfdata_graph::unsupported_ops(&graph(nodes, &prev))
            .unwrap()
            .is_empty()
    );
    assert!(started.elapsed() < Duration::from_secs(5));

    // 1000 nested repeats.
    let mut nodes = range(2);
    nodes.push(constant("count", Tensor::scalar(1i64)));
    let mut prev = "range".to_string();
    for i in 0..1000 {
        let name = format!("repeat{i}");
        nodes.push(op(&name, "RepeatDataset", &[&prev, "count"]));
        prev = name;
    }
    let err = translate_err(&graph(nodes.clone(), &prev));
    assert!(err.contains("deep"), "{err}");
    // More dataset nodes than any pipeline has.
    let mut nodes = range(2);
    nodes.push(constant("count", Tensor::scalar(1i64)));
    for i in 0..1100 {
        nodes.push(op(&format!("r{i}"), "RepeatDataset", &["range", "count"]));
    }
    let mut zip_inputs: Vec<String> = (0..1100).map(|i| format!("r{i}")).collect();
    zip_inputs.push("range".into());
    let refs: Vec<&str> = zip_inputs.iter().map(String::as_str).collect();
    nodes.push(op("zip", "ZipDataset", &refs));
    let err = translate_err(&graph(nodes, "zip"));
    assert!(err.contains("dataset nodes"), "{err}");
}

#[test]
fn absurd_sizes_in_attributes_are_refused() {
    // A Const claiming a huge shape with no data.
    let mut huge = tfdata_core::element::tensor_to_proto(&Tensor::scalar(0i64));
    huge.tensor_shape = Some(tfdata_proto::tensorflow::TensorShapeProto {
        dim: vec![
            tfdata_proto::tensorflow::tensor_shape_proto::Dim {
                size: 1 << 40,
                name: String::new(),
            },
            tfdata_proto::tensorflow::tensor_shape_proto::Dim {
                size: 1 << 40,
                name: String::new(),
            },
        ],
        unknown_rank: false,
    });
    let mut c = constant("c", Tensor::scalar(0i64));
    c.attr.insert(
        "value".into(),
        AttrValue {
            value: Some(attr_value::Value::Tensor(huge)),
        },
    );
    let g = graph(vec![c, op("t", "TensorDataset", &["c"])], "t");
    let err = translate_err(&g);
    assert!(
        err.contains("Const node \"c\"") && err.contains("too large"),
        "{err}"
    );
    // A padded batch declaring 10^6 components.
    let mut nodes = range(3);
    let mut pb = op("pb", "PaddedBatchDatasetV2", &["range"]);
    pb.attr.insert(
        "N".into(),
        AttrValue {
            value: Some(attr_value::Value::I(1 << 40)),
        },
    );
    nodes.push(pb);
    let err = translate_err(&graph(nodes, "pb"));
    assert!(err.contains("outside"), "{err}");
}

/// A `FixedLengthRecordDatasetV2` graph becomes the engine's own
/// `fixed_length_record_dataset`, so a worker's static FILE sharding (the
/// rewrite on the wire form) can shard and rebuild it.
#[test]
fn fixed_length_record_graphs_are_statically_sharded() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for f in 0..4 {
        let path = dir.path().join(format!("f{f}.bin"));
        std::fs::write(&path, format!("HH{f}a{f}bF")).unwrap();
        files.push(bytes::Bytes::from(path.display().to_string()));
    }
    let nodes = vec![
        constant("filenames", Tensor::strings(files, vec![4]).unwrap()),
        constant("header_bytes", Tensor::scalar(2i64)),
        constant("record_bytes", Tensor::scalar(2i64)),
        constant("footer_bytes", Tensor::scalar(1i64)),
        constant("buffer_size", Tensor::scalar(256i64)),
        constant("compression_type", Tensor::scalar_string("")),
        op(
            "records",
            "FixedLengthRecordDatasetV2",
            &[
                "filenames",
                "header_bytes",
                "record_bytes",
                "footer_bytes",
                "buffer_size",
                "compression_type",
            ],
        ),
    ];
    let t = tfdata_graph::translate(&graph(nodes, "records")).unwrap();
    let read = |ds: &tfdata_dataset::Dataset| -> Vec<String> {
        ds.iter()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                String::from_utf8(e.components[0].string_values().unwrap()[0].to_vec()).unwrap()
            })
            .collect()
    };
    assert_eq!(
        read(&t.dataset),
        ["0a", "0b", "1a", "1b", "2a", "2b", "3a", "3b"]
    );
    let sharded = t
        .rewritten(|root| {
            tfdata_dataset::autoshard::auto_shard(
                root,
                tfdata_dataset::autoshard::StaticPolicy::File,
                2,
                1,
            )
        })
        .unwrap();
    assert_eq!(read(&sharded), ["1a", "1b", "3a", "3b"]);
}

/// Bad sizes in a graph are refused when it is translated, naming the node.
#[test]
fn fixed_length_record_graphs_with_bad_sizes_are_refused() {
    let nodes = vec![
        constant("filenames", Tensor::scalar_string("x.bin")),
        constant("header_bytes", Tensor::scalar(0i64)),
        constant("record_bytes", Tensor::scalar(0i64)),
        constant("footer_bytes", Tensor::scalar(0i64)),
        constant("buffer_size", Tensor::scalar(256i64)),
        op(
            "records",
            "FixedLengthRecordDataset",
            &[
                "filenames",
                "header_bytes",
                "record_bytes",
                "footer_bytes",
                "buffer_size",
            ],
        ),
    ];
    let err = translate_err(&graph(nodes, "records"));
    assert!(err.contains("`record_bytes` must be > 0"), "{err}");
}

/// `AssertCardinalityDataset` is the engine's `assert_cardinality`, with
/// TensorFlow's error and the asserted cardinality.
#[test]
fn assert_cardinality_graphs_translate() {
    let mut nodes = range(3);
    nodes.push(constant("cardinality", Tensor::scalar(5i64)));
    nodes.push(op(
        "asserted",
        "AssertCardinalityDataset",
        &["range", "cardinality"],
    ));
    let t = tfdata_graph::translate(&graph(nodes, "asserted")).unwrap();
    assert_eq!(t.dataset.cardinality(), 5);
    let def = tfdata_dataset::pipeline::to_pipeline_def(&t.dataset, false).unwrap();
    assert_eq!(def.root.as_ref().unwrap().op, "assert_cardinality");
    let mut it = t.dataset.iter().unwrap();
    for _ in 0..3 {
        it.next_element().unwrap().unwrap();
    }
    let err = it.next_element().unwrap_err().to_string();
    assert!(
        err.contains(
            "Input dataset was expected to contain 5 elements but contained only 3 elements."
        ),
        "{err}"
    );
}
