//! Which ops of a graph tfdata workers cannot run, decided without running
//! or compiling anything: the dispatcher asks when a TensorFlow graph is
//! registered, and routes its tasks by the answer.

use std::collections::{BTreeSet, HashSet};

use tfdata_core::Result;
use tfdata_proto::tensorflow::{GraphDef, NodeDef, attr_value};

use crate::function::EXECUTOR_OPS;
use crate::graph::Library;
use crate::translate::DATASET_OPS;
use crate::{MAX_FUNCTIONS, kernels};

/// Ops the graph uses (in its nodes and every function they reach) that
/// neither the translator, the executor nor the kernel set runs, sorted.
/// Empty means tfdata workers can run the graph. Only the graph's shape is
/// checked: a supported op given bad attributes fails when the worker
/// builds the pipeline, with the node named.
pub fn unsupported_ops(graph: &GraphDef) -> Result<Vec<String>> {
    let library = Library::of(graph)?;
    let mut missing = BTreeSet::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut todo: Vec<String> = Vec::new();
    let visit = |nodes: &mut dyn Iterator<Item = &NodeDef>,
                 todo: &mut Vec<String>,
                 missing: &mut BTreeSet<String>| {
        for node in nodes {
            if node.op == "_Retval" || node.op == "_Arg" {
                continue;
            }
            if library.contains(&node.op) {
                todo.push(node.op.clone());
            } else if !supported(&node.op) {
                missing.insert(node.op.clone());
            }
            for attr in node.attr.values() {
                match &attr.value {
                    Some(attr_value::Value::Func(f)) => todo.push(f.name.clone()),
                    Some(attr_value::Value::List(l)) => {
                        todo.extend(l.func.iter().map(|f| f.name.clone()))
                    }
                    _ => {}
                }
            }
        }
    };
    // TensorFlow's trailing compression map is cut off, not run.
    let compression = crate::translate::compression_map(graph, &library)?;
    let mut nodes = graph
        .node
        .iter()
        .filter(|n| compression.is_none_or(|c| c.name != n.name));
    visit(&mut nodes, &mut todo, &mut missing);
    while let Some(name) = todo.pop() {
        // Each function once: doubled call edges cost nothing more.
        if !seen.insert(name.clone()) || seen.len() > MAX_FUNCTIONS {
            continue;
        }
        match library.get(&name) {
            Some(f) => visit(&mut f.node_def.iter(), &mut todo, &mut missing),
            None => {
                missing.insert(format!("{name} (a function missing from the library)"));
            }
        }
    }
    Ok(missing.into_iter().collect())
}

fn supported(op: &str) -> bool {
    EXECUTOR_OPS.contains(&op) || DATASET_OPS.contains(&op) || kernels::runs(op)
}

/// Every op tfdata workers run in TensorFlow graphs, sorted (for the docs).
pub fn supported_ops() -> Vec<&'static str> {
    let mut all: Vec<&'static str> = EXECUTOR_OPS
        .iter()
        .chain(DATASET_OPS)
        .copied()
        .chain(kernels::supported_ops())
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}
