//! `AssertNextDataset` (`tf.data.experimental.assert_next`): the
//! transformations after the node, nearest first, must be the ones named
//! (any version of each name matches).
//!
//! TensorFlow checks the names of the iterators its pipeline makes after its
//! default static rewrites (seen in TensorFlow 2.21): a `map` whose function
//! is stateless becomes `ParallelMapV2` (`map_parallelization`), a `prefetch`
//! is injected at the end unless the pipeline already ends asynchronously
//! (`inject_prefetch`), the iterator's root is `Root`, and an iterator is
//! named by its dataset type (`BatchV2`, `Filter`, ...), not by its op. The
//! worker runs the graph as written, so it works out those names from the
//! graph for the transformations whose rewrite it knows (maps, parallel
//! maps, filters, batches, prefetches), and refuses the node
//! (`Unimplemented`) when another one follows it (a fusion or a no-op
//! elimination could rename or remove it), when a map returns its arguments
//! (`noop_elimination` removes an identity map) or when the pipeline sets
//! options (which can turn the rewrites off), rather than let a check pass
//! or fail that TensorFlow would not.

use std::collections::HashMap;

use tfdata_core::{Error, Result};
use tfdata_proto::tensorflow::{GraphDef, NodeDef, attr_value};

use super::assert_prev::{asserted_texts, matches_any_version, node_name};
use crate::attrs::NodeAttrs;
use crate::graph::Library;

/// The ops TensorFlow 2.21 registers as stateful (`OpDef.is_stateful`), one
/// a line, sorted: what `map_parallelization` reads to leave a map alone.
const STATEFUL_OPS: &str = include_str!("stateful_ops.txt");

const OPS: [&str; 2] = ["AssertNextDataset", "ExperimentalAssertNextDataset"];

/// Checks every `AssertNextDataset` node of `graph`; `result` is the node
/// the pipeline ends with, `compressed` whether the data service's
/// compression map follows it.
pub(super) fn check(
    graph: &GraphDef,
    library: &Library,
    result: &str,
    compressed: bool,
) -> Result<()> {
    let nested = graph
        .library
        .iter()
        .flat_map(|l| &l.function)
        .flat_map(|f| &f.node_def)
        .any(|n| OPS.contains(&n.op.as_str()));
    let top: Vec<&NodeDef> = graph
        .node
        .iter()
        .filter(|n| OPS.contains(&n.op.as_str()))
        .collect();
    if nested {
        return Err(unknown(
            "an AssertNextDataset inside a function: TensorFlow names its iterators after the \
             dataset that made the function's dataset",
        ));
    }
    if top.is_empty() {
        return Ok(());
    }
    // Options anywhere in the pipeline can turn rewrites off (autotune off:
    // no map parallelization, no injected prefetch) or on.
    if let Some(n) = graph.node.iter().find(|n| {
        matches!(
            n.op.as_str(),
            "OptionsDataset" | "OptimizeDataset" | "OptimizeDatasetV2"
        )
    }) {
        return Err(unknown(&format!("the pipeline sets options ({})", n.op)));
    }
    let by_name: HashMap<&str, &NodeDef> =
        graph.node.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut consumers: HashMap<&str, Vec<&NodeDef>> = HashMap::new();
    for n in &graph.node {
        if let Some(input) = n.input.first() {
            consumers.entry(node_name(input)).or_default().push(n);
        }
    }
    let view = View {
        library,
        by_name,
        consumers,
        result: node_name(result),
        compressed,
    };
    for node in top {
        let asserted = asserted(node, &view.by_name)?;
        let names = view.iterators_after(node)?;
        if asserted.len() > names.len() {
            return Err(Error::InvalidArgument(format!(
                "Asserted next {} transformations but encountered only {}.",
                asserted.len(),
                names.len()
            )));
        }
        for (offset, (want, got)) in asserted.iter().zip(&names).enumerate() {
            if !matches_any_version(want, got) {
                return Err(Error::InvalidArgument(format!(
                    "Asserted transformation matching {want} at offset {offset} but encountered \
                     {got} transformation instead."
                )));
            }
        }
    }
    Ok(())
}

fn unknown(why: &str) -> Error {
    Error::Unimplemented(format!(
        "AssertNextDataset: the worker cannot tell which transformations TensorFlow's rewrites \
         put after it ({why})"
    ))
}

/// The node's `transformations` input, a constant vector of names.
fn asserted(node: &NodeDef, by_name: &HashMap<&str, &NodeDef>) -> Result<Vec<String>> {
    let texts = asserted_texts("AssertNextDataset", node, by_name)?;
    Ok(texts
        .iter()
        .map(|t| String::from_utf8_lossy(t).into_owned())
        .collect())
}

struct View<'g> {
    library: &'g Library,
    by_name: HashMap<&'g str, &'g NodeDef>,
    consumers: HashMap<&'g str, Vec<&'g NodeDef>>,
    result: &'g str,
    compressed: bool,
}

/// How a transformation runs after TensorFlow's rewrites: its iterator's
/// name, and whether it is asynchronous (no `prefetch` is injected after a
/// pipeline ending with it).
struct Iterator {
    name: &'static str,
    asynchronous: bool,
}

impl<'g> View<'g> {
    /// The names of the iterators TensorFlow makes after `node`, nearest
    /// first, up to `Root`.
    fn iterators_after(&self, node: &'g NodeDef) -> Result<Vec<&'static str>> {
        let mut names = Vec::new();
        let mut last_async = None;
        let mut at = node;
        for _ in 0..crate::MAX_PIPELINE_DEPTH {
            if at.name == self.result {
                if self.compressed {
                    return Err(unknown("the data service's compression map follows"));
                }
                // `inject_prefetch`: the pipeline's last transformation (the
                // node's input when nothing follows it) decides.
                let ends_async = match last_async {
                    Some(a) => a,
                    None => self.before(node)?,
                };
                if !ends_async {
                    names.push("Prefetch");
                }
                names.push("Root");
                return Ok(names);
            }
            let next = match self.consumers.get(at.name.as_str()).map(Vec::as_slice) {
                Some([one]) => *one,
                _ => return Err(unknown("its output is not one transformation's input")),
            };
            let it = self.rewritten(next)?;
            names.push(it.name);
            last_async = Some(it.asynchronous);
            at = next;
        }
        Err(unknown("the pipeline is too deep"))
    }

    /// Whether the transformation before an assertion that ends the pipeline
    /// ends it asynchronously (TensorFlow looks past the assertion).
    fn before(&self, node: &NodeDef) -> Result<bool> {
        let input = node
            .input
            .first()
            .and_then(|i| self.by_name.get(node_name(i)))
            .ok_or_else(|| unknown("it has no input dataset"))?;
        match input.op.as_str() {
            "RangeDataset" | "TensorSliceDataset" | "TensorDataset" => Ok(false),
            _ => Ok(self.rewritten(input)?.asynchronous),
        }
    }

    /// `node`'s iterator after TensorFlow's default rewrites, for the ops
    /// whose rewrite is known; the others are refused.
    fn rewritten(&self, node: &NodeDef) -> Result<Iterator> {
        let batch_follows = || {
            self.consumers
                .get(node.name.as_str())
                .is_some_and(|c| c.iter().any(|n| n.op.starts_with("BatchDataset")))
        };
        let it = |name, asynchronous| Ok(Iterator { name, asynchronous });
        match node.op.as_str() {
            // `map_and_batch_fusion` makes a map and a batch one
            // `MapAndBatch`, under conditions not modelled here.
            "MapDataset" | "ParallelMapDatasetV2" if batch_follows() => {
                Err(unknown("a map followed by a batch"))
            }
            // `noop_elimination` removes a map that returns its arguments.
            "MapDataset" | "ParallelMapDatasetV2" if self.forwards_its_arguments(node)? => {
                Err(unknown("a map returning its arguments"))
            }
            "MapDataset" => {
                let forced = node
                    .attr
                    .get("force_synchronous")
                    .and_then(|a| a.value.as_ref())
                    == Some(&attr_value::Value::B(true));
                if forced || self.map_function_stateful(node)? {
                    it("Map", false)
                } else {
                    it("ParallelMapV2", true)
                }
            }
            "ParallelMapDatasetV2" => it("ParallelMapV2", true),
            "FilterDataset" => it("Filter", false),
            "BatchDatasetV2" => it("BatchV2", false),
            // `noop_elimination` removes a `prefetch(0)`.
            "PrefetchDataset" if self.constant_int(node, 1) == Some(0) => {
                Err(unknown("a prefetch of 0"))
            }
            "PrefetchDataset" if self.constant_int(node, 1).is_some() => it("Prefetch", true),
            op => Err(unknown(&format!(
                "a {op} follows it, whose rewrite is not modelled"
            ))),
        }
    }

    fn constant_int(&self, node: &NodeDef, input: usize) -> Option<i64> {
        let c = node
            .input
            .get(input)
            .and_then(|i| self.by_name.get(node_name(i)))
            .filter(|n| n.op == "Const")?;
        let t = NodeAttrs::of(c).tensor("value").ok()?;
        t.to_scalar::<i64>().ok()
    }

    /// The map's function (`f`), which the graph's library must hold.
    fn map_function(&self, node: &NodeDef) -> Result<&'g tfdata_proto::tensorflow::FunctionDef> {
        let name = match node.attr.get("f").and_then(|a| a.value.as_ref()) {
            Some(attr_value::Value::Func(f)) => f.name.as_str(),
            _ => return Err(unknown("a map without a function")),
        };
        self.library
            .get(name)
            .ok_or_else(|| unknown("a map whose function is missing"))
    }

    /// Whether every output of the map's function is one of its arguments
    /// (through `Identity` nodes): TensorFlow eliminates an identity map, and
    /// a permutation is refused with it rather than told apart.
    fn forwards_its_arguments(&self, node: &NodeDef) -> Result<bool> {
        let f = self.map_function(node)?;
        let Some(signature) = f.signature.as_ref() else {
            return Ok(false);
        };
        let is_arg = |name: &str| signature.input_arg.iter().any(|a| a.name == name);
        let by_name: HashMap<&str, &NodeDef> =
            f.node_def.iter().map(|n| (n.name.as_str(), n)).collect();
        let forwarded = |start: &'g str| {
            let mut at = start;
            for _ in 0..=f.node_def.len() {
                let name = at.split(':').next().unwrap_or(at);
                if is_arg(name) {
                    return true;
                }
                match by_name.get(name) {
                    Some(n) if n.op == "Identity" => match n.input.first() {
                        Some(i) => at = i,
                        None => return false,
                    },
                    _ => return false,
                }
            }
            false
        };
        Ok(!signature.output_arg.is_empty()
            && signature
                .output_arg
                .iter()
                .all(|o| f.ret.get(&o.name).is_some_and(|r| forwarded(r.as_str()))))
    }

    /// TensorFlow's `IsFunctionStateful(.., skip_assert = true)` for the
    /// map's function: stateless when its signature says so, else when none
    /// of its nodes is a stateful op (`Assert` aside). A node calling a
    /// library function (TensorFlow finds no registered op: stateful) is
    /// stateful; `If` and `While` (whose branches TensorFlow inspects) are
    /// refused.
    fn map_function_stateful(&self, node: &NodeDef) -> Result<bool> {
        let f = self.map_function(node)?;
        if !f.signature.as_ref().is_some_and(|s| s.is_stateful) {
            return Ok(false);
        }
        for n in &f.node_def {
            match n.op.as_str() {
                "Assert" => {}
                "If" | "While" => return Err(unknown("a map function with If or While")),
                op if self.library.get(op).is_some() => return Ok(true),
                op if STATEFUL_OPS.lines().any(|s| s == op) => return Ok(true),
                _ => {}
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use tfdata_proto::tensorflow::{AttrValue, TensorProto, TensorShapeProto, tensor_shape_proto};

    use super::*;

    fn node(name: &str, op: &str, inputs: &[&str]) -> NodeDef {
        NodeDef {
            name: name.into(),
            op: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    /// range → AssertNextDataset(`names`) → the `after` ops, each fed by
    /// the one before; the pipeline ends with the last.
    fn graph(names: &[&str], after: &[&str]) -> (GraphDef, String) {
        let mut names_node = node("names", "Const", &[]);
        let value = TensorProto {
            dtype: 7,
            tensor_shape: Some(TensorShapeProto {
                dim: vec![tensor_shape_proto::Dim {
                    size: names.len() as i64,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            string_val: names.iter().map(|n| n.as_bytes().to_vec().into()).collect(),
            ..Default::default()
        };
        names_node.attr.insert(
            "value".into(),
            AttrValue {
                value: Some(attr_value::Value::Tensor(value)),
            },
        );
        let mut nodes = vec![
            node("range", "RangeDataset", &[]),
            names_node,
            node("assert", "AssertNextDataset", &["range", "names"]),
        ];
        let mut last = "assert".to_string();
        for (i, op) in after.iter().enumerate() {
            let name = format!("n{i}");
            nodes.push(node(&name, op, &[&last]));
            last = name;
        }
        let g = GraphDef {
            node: nodes,
            ..Default::default()
        };
        (g, last)
    }

    fn run(names: &[&str], after: &[&str]) -> Result<()> {
        let (g, last) = graph(names, after);
        check(&g, &Library::of(&g)?, &last, false)
    }

    #[test]
    fn an_assertion_ending_the_pipeline_sees_the_injected_prefetch_and_root() {
        run(&["Prefetch", "Root"], &[]).unwrap();
        run(&["Prefetch"], &[]).unwrap();
        let err = run(&["Prefetch", "Root", "Range"], &[]).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m)
                if m == "Asserted next 3 transformations but encountered only 2."),
            "{err:?}"
        );
        let err = run(&["Root"], &[]).unwrap_err();
        assert!(
            err.to_string().contains(
                "Asserted transformation matching Root at offset 0 but encountered Prefetch"
            ),
            "{err}"
        );
    }

    #[test]
    fn transformations_whose_rewrite_is_not_modelled_are_refused() {
        for after in [
            &["TakeDataset"][..],
            &["RepeatDataset"],
            &["OptionsDataset"],
        ] {
            let err = run(&["Anything"], after).unwrap_err();
            assert!(matches!(err, Error::Unimplemented(_)), "{after:?}: {err:?}");
        }
        // A filter is modelled, what follows it is not: refused all the same.
        let err = run(&["Filter"], &["FilterDataset", "TakeDataset"]).unwrap_err();
        assert!(matches!(err, Error::Unimplemented(_)), "{err:?}");
        run(
            &["Filter", "BatchV2", "Prefetch", "Root"],
            &["FilterDataset", "BatchDatasetV2"],
        )
        .unwrap();
    }

    #[test]
    fn a_compressed_pipeline_is_refused() {
        let (g, last) = graph(&["Prefetch"], &[]);
        let err = check(&g, &Library::of(&g).unwrap(), &last, true).unwrap_err();
        assert!(matches!(err, Error::Unimplemented(_)), "{err:?}");
    }
}
