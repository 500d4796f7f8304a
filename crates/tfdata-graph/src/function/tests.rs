//! The executor on hand-made bodies: results, control flow, and the bodies
//! a hostile graph could send.

use std::collections::HashMap;

use tfdata_core::{Error, Tensor};
use tfdata_proto::tensorflow::{
    AttrValue, FunctionDef, FunctionDefLibrary, GraphDef, NameAttrList, NodeDef, OpDef, attr_value,
    op_def::ArgDef,
};

use super::{CompiledNode, Compiler, NodeCompiler};
use crate::graph::Library;
use crate::kernels::testing::{node, ty};
use crate::value::Value;

struct NoNodes;
impl NodeCompiler for NoNodes {
    fn compile_node(
        &self,
        _: &NodeDef,
        _: &mut Compiler<'_>,
    ) -> Option<tfdata_core::Result<CompiledNode>> {
        None
    }
    fn handles(&self, _: &str) -> bool {
        false
    }
}

fn with_inputs(mut n: NodeDef, name: &str, inputs: &[&str]) -> NodeDef {
    n.name = name.to_string();
    n.input = inputs.iter().map(|s| s.to_string()).collect();
    n
}

fn constant(name: &str, t: &Tensor) -> NodeDef {
    let value = AttrValue {
        value: Some(attr_value::Value::Tensor(
            tfdata_core::element::tensor_to_proto(t),
        )),
    };
    with_inputs(
        node("Const", &[("value", value), ("dtype", ty(t.dtype()))]),
        name,
        &[],
    )
}

fn func_attr(name: &str) -> AttrValue {
    AttrValue {
        value: Some(attr_value::Value::Func(NameAttrList {
            name: name.to_string(),
            attr: HashMap::new(),
        })),
    }
}

fn function(name: &str, args: &[&str], rets: &[(&str, &str)], nodes: Vec<NodeDef>) -> FunctionDef {
    let arg = |n: &str| ArgDef {
        name: n.to_string(),
        r#type: 9,
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

fn library(functions: Vec<FunctionDef>) -> Library {
    Library::of(&GraphDef {
        library: Some(FunctionDefLibrary {
            function: functions,
        }),
        ..Default::default()
    })
    .unwrap()
}

fn call(lib: &Library, name: &str, args: Vec<Tensor>) -> tfdata_core::Result<Vec<Tensor>> {
    let f = Compiler::new(lib, &NoNodes).function(name)?;
    f.call(args.into_iter().map(Value::Tensor).collect())?
        .into_iter()
        .map(|v| v.into_tensor("result"))
        .collect()
}

#[test]
fn results_follow_identities_output_indices_and_calls() {
    let lib = library(vec![
        function(
            "inner",
            &["x"],
            &[("a", "id:output:0"), ("b", "c:output:0")],
            vec![
                with_inputs(node("Identity", &[]), "id", &["x"]),
                constant("c", &Tensor::scalar(7i64)),
            ],
        ),
        function(
            "outer",
            &["x", "y"],
            &[
                ("first", "n:output:1"),
                ("second", "call:output:0"),
                ("third", "y"),
            ],
            vec![
                with_inputs(node("IdentityN", &[]), "n", &["y", "x", "^call"]),
                with_inputs(
                    node("PartitionedCall", &[("f", func_attr("inner"))]),
                    "call",
                    &["x"],
                ),
            ],
        ),
    ]);
    let out = call(
        &lib,
        "outer",
        vec![Tensor::scalar(1i64), Tensor::scalar(2i64)],
    )
    .unwrap();
    assert_eq!(
        out,
        vec![
            Tensor::scalar(1i64),
            Tensor::scalar(1i64),
            Tensor::scalar(2i64)
        ]
    );
}

#[test]
fn if_and_case_pick_their_branch_by_tensorflow_truthiness() {
    let lib = library(vec![
        function(
            "one",
            &["x"],
            &[("r", "c:output:0")],
            vec![constant("c", &Tensor::scalar(1i64))],
        ),
        function(
            "two",
            &["x"],
            &[("r", "c:output:0")],
            vec![constant("c", &Tensor::scalar(2i64))],
        ),
        function(
            "pick",
            &["p", "x"],
            &[("r", "if:output:0")],
            vec![with_inputs(
                node(
                    "StatelessIf",
                    &[
                        ("then_branch", func_attr("one")),
                        ("else_branch", func_attr("two")),
                    ],
                ),
                "if",
                &["p", "x"],
            )],
        ),
    ]);
    let pick = |p: Tensor| call(&lib, "pick", vec![p, Tensor::scalar(0i64)]).unwrap()[0].clone();
    assert_eq!(pick(Tensor::scalar(true)), Tensor::scalar(1i64));
    assert_eq!(pick(Tensor::scalar(false)), Tensor::scalar(2i64));
    assert_eq!(pick(Tensor::scalar(3i64)), Tensor::scalar(1i64));
    assert_eq!(pick(Tensor::scalar_string("")), Tensor::scalar(2i64));
    assert_eq!(pick(Tensor::vector::<i64>(&[])), Tensor::scalar(2i64));
    assert_eq!(pick(Tensor::vector(&[0i64])), Tensor::scalar(1i64));
}

#[test]
fn hostile_bodies_are_refused_while_compiling() {
    let compile = |fns: Vec<FunctionDef>, name: &str| {
        let lib = library(fns);
        Compiler::new(&lib, &NoNodes)
            .function(name)
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    // A cycle.
    let err = compile(
        vec![function(
            "f",
            &["x"],
            &[("r", "a:output:0")],
            vec![
                with_inputs(node("Identity", &[]), "a", &["b:output:0"]),
                with_inputs(node("Identity", &[]), "b", &["a:output:0"]),
            ],
        )],
        "f",
    );
    assert!(err.contains("cycle"), "{err}");
    // A missing node, a missing output, a missing argument.
    for (input, want) in [
        ("nowhere:output:0", "no node"),
        ("a:z:0", "output \"z\""),
        ("a:output:3", "has 1"),
        ("y", "neither an argument"),
    ] {
        let err = compile(
            vec![function(
                "f",
                &["x"],
                &[("r", "b:output:0")],
                vec![
                    with_inputs(node("Identity", &[]), "a", &["x"]),
                    with_inputs(node("Identity", &[]), "b", &[input]),
                ],
            )],
            "f",
        );
        assert!(err.contains(want), "{input}: {err}");
    }
    // Two nodes of one name.
    let err = compile(
        vec![function(
            "f",
            &["x"],
            &[("r", "a:output:0")],
            vec![
                with_inputs(node("Identity", &[]), "a", &["x"]),
                with_inputs(node("Identity", &[]), "a", &["x"]),
            ],
        )],
        "f",
    );
    assert!(err.contains("two nodes"), "{err}");
    // A function calling itself, directly and through another.
    let calls = |me: &str, other: &str| {
        function(
            me,
            &["x"],
            &[("r", "c:output:0")],
            vec![with_inputs(
                node("PartitionedCall", &[("f", func_attr(other))]),
                "c",
                &["x"],
            )],
        )
    };
    let err = compile(vec![calls("f", "f")], "f");
    assert!(err.contains("calls itself"), "{err}");
    let err = compile(vec![calls("f", "g"), calls("g", "f")], "f");
    assert!(
        err.contains("calls itself") && err.contains("f -> g"),
        "{err}"
    );
    // An op nobody runs, by name.
    let err = compile(
        vec![function(
            "f",
            &["x"],
            &[("r", "p:output:0")],
            vec![with_inputs(node("EagerPyFunc", &[]), "p", &["x"])],
        )],
        "f",
    );
    assert!(err.contains("EagerPyFunc"), "{err}");
}

/// `f0` … `f{depth}`: each `f_i` calls `f_{i+1}` twice, the second call
/// reached (through a control input) only if `both_reached`.
fn doubling(depth: usize, both_reached: bool) -> Library {
    let first_inputs: &[&str] = if both_reached { &["x", "^b"] } else { &["x"] };
    library(
        (0..depth)
            .map(|i| {
                let next = format!("f{}", i + 1);
                let call = |name: &str, inputs: &[&str]| {
                    with_inputs(
                        node("PartitionedCall", &[("f", func_attr(&next))]),
                        name,
                        inputs,
                    )
                };
                function(
                    &format!("f{i}"),
                    &["x"],
                    &[("r", "a:output:0")],
                    vec![call("a", first_inputs), call("b", &["x"])],
                )
            })
            .chain([function(
                &format!("f{depth}"),
                &["x"],
                &[("r", "x")],
                vec![],
            )])
            .collect(),
    )
}

#[test]
fn doubled_edges_compile_each_function_once() {
    // 2^100 call paths, deeper than the nesting limit: refused, quickly.
    let lib = doubling(100, true);
    let err = Compiler::new(&lib, &NoNodes).function("f0").unwrap_err();
    assert!(err.to_string().contains("nest deeper"), "{err}");
    // Within the nesting limit, 2^30 calls per element would never finish:
    // refused by its cost.
    let lib = doubling(30, true);
    let err = Compiler::new(&lib, &NoNodes).function("f0").unwrap_err();
    assert!(err.to_string().contains("more than"), "{err}");
    // A few levels run, every call made.
    let lib = doubling(5, true);
    // Each level: two calls of the next (2 × (1 + its cost)): 2^6 − 2.
    assert_eq!(
        Compiler::new(&lib, &NoNodes).function("f0").unwrap().cost(),
        62
    );
    let out = call(&lib, "f0", vec![Tensor::scalar(5i64)]).unwrap();
    assert_eq!(out, vec![Tensor::scalar(5i64)]);
    // Pruned calls cost nothing.
    let lib = doubling(30, false);
    let out = call(&lib, "f0", vec![Tensor::scalar(5i64)]).unwrap();
    assert_eq!(out, vec![Tensor::scalar(5i64)]);
}

#[test]
fn wrong_argument_counts_are_errors() {
    let lib = library(vec![function("f", &["x"], &[("r", "x")], vec![])]);
    let err = call(&lib, "f", vec![]).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}
