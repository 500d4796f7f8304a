//! Datasets consumed inside functions, on the inputs TensorFlow's Python
//! never writes: an infinite dataset reduced (TensorFlow runs forever; ours
//! refuses at once) and iterators read before they are made or after they
//! are deleted.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tfdata_core::Tensor;
use tfdata_graph::Library;
use tfdata_graph::function::Compiler;
use tfdata_graph::value::Value;
use tfdata_proto::tensorflow::{
    AttrValue, FunctionDef, FunctionDefLibrary, GraphDef, NameAttrList, NodeDef, OpDef,
    TensorShapeProto, attr_value, op_def::ArgDef,
};
use tonic::Code;

const INT64: i32 = 9;

fn attr(v: attr_value::Value) -> AttrValue {
    AttrValue { value: Some(v) }
}

fn types(codes: &[i32]) -> AttrValue {
    attr(attr_value::Value::List(attr_value::ListValue {
        r#type: codes.to_vec(),
        ..Default::default()
    }))
}

fn scalar_shapes(n: usize) -> AttrValue {
    attr(attr_value::Value::List(attr_value::ListValue {
        shape: vec![TensorShapeProto::default(); n],
        ..Default::default()
    }))
}

fn node(name: &str, op: &str, inputs: &[&str], attrs: Vec<(&str, AttrValue)>) -> NodeDef {
    NodeDef {
        name: name.into(),
        op: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        attr: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        ..Default::default()
    }
}

fn constant(name: &str, t: Tensor) -> NodeDef {
    node(
        name,
        "Const",
        &[],
        vec![
            (
                "value",
                attr(attr_value::Value::Tensor(
                    tfdata_core::element::tensor_to_proto(&t),
                )),
            ),
            ("dtype", attr(attr_value::Value::Type(t.dtype().code()))),
        ],
    )
}

fn function(name: &str, args: &[&str], rets: &[(&str, &str)], nodes: Vec<NodeDef>) -> FunctionDef {
    let arg = |n: &str| ArgDef {
        name: n.to_string(),
        r#type: INT64,
        ..Default::default()
    };
    FunctionDef {
        signature: Some(OpDef {
            name: name.to_string(),
            input_arg: args.iter().map(|a| arg(a)).collect(),
            output_arg: rets.iter().map(|(r, _)| arg(r)).collect(),
            ..Default::default()
        }),
        node_def: nodes,
        ret: rets
            .iter()
            .map(|(r, v)| (r.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    }
}

/// Calls `main(n)` of `functions`, with the dataset nodes compiled.
fn call(functions: Vec<FunctionDef>, n: i64) -> tfdata_core::Result<Vec<Value>> {
    let graph = GraphDef {
        library: Some(FunctionDefLibrary {
            function: functions,
        }),
        ..Default::default()
    };
    let library = Library::of(&graph)?;
    let nodes = tfdata_graph::translate::dataset_nodes();
    let f = Compiler::new(&library, &nodes).function("main")?;
    f.call(vec![Value::Tensor(Tensor::scalar(n))])
}

fn range_nodes() -> Vec<NodeDef> {
    vec![
        constant("start", Tensor::scalar(0i64)),
        constant("step", Tensor::scalar(1i64)),
        node(
            "range",
            "RangeDataset",
            &["start:output:0", "n", "step:output:0"],
            vec![
                ("output_types", types(&[INT64])),
                ("output_shapes", scalar_shapes(1)),
            ],
        ),
    ]
}

fn getter(name: &str, inputs: &[&str]) -> NodeDef {
    node(
        name,
        "IteratorGetNext",
        inputs,
        vec![
            ("output_types", types(&[INT64])),
            ("output_shapes", scalar_shapes(1)),
        ],
    )
}

#[test]
fn reducing_an_infinite_dataset_is_refused_at_once() {
    let keep = function("keep", &["state", "x"], &[("out", "state")], vec![]);
    let mut nodes = range_nodes();
    nodes.push(constant("forever", Tensor::scalar(-1i64)));
    nodes.push(node(
        "repeat",
        "RepeatDataset",
        &["range:handle:0", "forever:output:0"],
        vec![],
    ));
    nodes.push(constant("zero", Tensor::scalar(0i64)));
    nodes.push(node(
        "reduce",
        "ReduceDataset",
        &["repeat:handle:0", "zero:output:0"],
        vec![
            (
                "f",
                attr(attr_value::Value::Func(NameAttrList {
                    name: "keep".into(),
                    attr: HashMap::new(),
                })),
            ),
            ("Tstate", types(&[INT64])),
            ("Targuments", types(&[])),
            ("output_types", types(&[INT64])),
            ("output_shapes", scalar_shapes(1)),
        ],
    ));
    let main = function("main", &["n"], &[("out", "reduce:components:0")], nodes);
    let started = Instant::now();
    let err = call(vec![main.clone(), keep.clone()], 3).unwrap_err();
    assert!(err.to_string().contains("infinite"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));

    // The same reduce of a finite dataset keeps its state.
    let mut finite = main;
    for n in &mut finite.node_def {
        if n.name == "forever" {
            *n = constant("forever", Tensor::scalar(2i64));
        }
    }
    let out = call(vec![finite, keep], 3).unwrap();
    let [Value::Tensor(t)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(t.to_scalar::<i64>().unwrap(), 0);
}

#[test]
fn an_iterator_read_before_it_is_made_or_after_it_is_deleted_fails() {
    let unbound = function(
        "main",
        &["n"],
        &[("out", "next:components:0")],
        vec![
            node("it", "AnonymousIteratorV3", &[], vec![]),
            getter("next", &["it:handle:0"]),
        ],
    );
    let err = call(vec![unbound], 3).unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err}");
    assert!(
        err.to_string().contains("has not been initialized"),
        "{err}"
    );

    let mut nodes = range_nodes();
    nodes.push(node("it", "AnonymousIteratorV2", &[], vec![]));
    nodes.push(node(
        "make",
        "MakeIterator",
        &["range:handle:0", "it:handle:0"],
        vec![],
    ));
    nodes.push(getter("first", &["it:handle:0", "^make"]));
    nodes.push(node(
        "delete",
        "DeleteIterator",
        &["it:handle:0", "it:deleter:0", "^first"],
        vec![],
    ));
    nodes.push(getter("second", &["it:handle:0", "^delete"]));
    let first = function(
        "main",
        &["n"],
        &[("out", "first:components:0")],
        nodes.clone(),
    );
    let out = call(vec![first], 3).unwrap();
    let [Value::Tensor(t)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(t.to_scalar::<i64>().unwrap(), 0);
    let deleted = function("main", &["n"], &[("out", "second:components:0")], nodes);
    let err = call(vec![deleted], 3).unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err}");
}
