//! Prefix graphs (what a cache holds, and what its snapshot writer runs)
//! and the graph served from a cache: the candidate node replaced by a
//! [`LOAD_OP`] node, the nodes only it needed removed.

use tfdata_core::{Error, Result};
use tfdata_proto::tensorflow::{AttrValue, GraphDef, NodeDef, attr_value};

use super::GraphCandidate;
use super::graph_view::{Nodes, prefix_graph, reachable};
use crate::graph::retval;

/// tfdata's private op reading an autocache: attribute `path` (the cache,
/// a distributed snapshot), and `output_types`/`output_shapes` copied from
/// the node it replaces, so the graph stays well-typed for anything that
/// reads the structure of the nodes above it. Only tfdata workers run the
/// graphs a dispatcher registers for a cache; the translator compiles the
/// op to the engine's `load` of the snapshot (its splits are the chunks,
/// as for `tf.data.Dataset.load`). Its name ends in `Dataset`, as every
/// dataset op's does, so code finding datasets by name finds it.
pub const LOAD_OP: &str = "TfdataAutocacheLoadDataset";

/// `graph` reading `candidate`'s output from the complete cache at
/// `cache_path`; the nodes above it unchanged (TensorFlow's compression
/// map included). An error if `candidate` is not a point of `graph` (an
/// analysis of another graph).
pub fn rewrite(graph: &GraphDef, candidate: &GraphCandidate, cache_path: &str) -> Result<GraphDef> {
    let mismatch = || {
        Error::InvalidArgument(format!(
            "autocache candidate {} is not a point of this graph",
            candidate.label
        ))
    };
    if prefix_graph(graph, &candidate.node).map_err(|_| mismatch())? != candidate.prefix {
        return Err(mismatch());
    }
    let original = Nodes::of(graph).get(&candidate.node)?;
    let mut attr = std::collections::HashMap::new();
    attr.insert(
        "path".to_string(),
        AttrValue {
            value: Some(attr_value::Value::S(cache_path.as_bytes().to_vec().into())),
        },
    );
    for key in ["output_types", "output_shapes"] {
        if let Some(value) = original.attr.get(key) {
            attr.insert(key.to_string(), value.clone());
        }
    }
    let load = NodeDef {
        name: candidate.node.clone(),
        op: LOAD_OP.to_string(),
        attr,
        ..Default::default()
    };
    let replaced = GraphDef {
        node: graph
            .node
            .iter()
            .map(|n| {
                if n.name == candidate.node {
                    load.clone()
                } else {
                    n.clone()
                }
            })
            .collect(),
        ..graph.clone()
    };
    // Only what the result still needs: the source nodes (and the file
    // names they read) go, so nothing opens them.
    let ret = retval(&replaced)?;
    let keep = reachable(&replaced, &ret.name)?;
    let kept = replaced
        .node
        .iter()
        .filter(|n| keep.contains(n.name.as_str()))
        .cloned()
        .collect();
    Ok(GraphDef {
        node: kept,
        ..graph.clone()
    })
}
