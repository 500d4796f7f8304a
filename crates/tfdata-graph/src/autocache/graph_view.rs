//! The graph as autocache reads it: nodes by name, their data inputs,
//! the functions they name, and prefix graphs (a node with everything it
//! depends on).

use std::collections::{HashMap, HashSet};

use tfdata_core::{Error, Result};
use tfdata_proto::tensorflow::{GraphDef, NodeDef, attr_value};

use crate::graph::{InputRef, parse_input, retval};

/// The graph's nodes by name.
pub(super) struct Nodes<'g> {
    by_name: HashMap<&'g str, &'g NodeDef>,
}

impl<'g> Nodes<'g> {
    pub(super) fn of(graph: &'g GraphDef) -> Self {
        Nodes {
            by_name: graph.node.iter().map(|n| (n.name.as_str(), n)).collect(),
        }
    }

    pub(super) fn get(&self, name: &str) -> Result<&'g NodeDef> {
        self.by_name
            .get(name)
            .copied()
            .ok_or_else(|| Error::InvalidArgument(format!("dataset graph: no node named {name:?}")))
    }

    /// The nodes `node`'s data inputs come from (control inputs left out),
    /// in order.
    pub(super) fn data_inputs(&self, node: &NodeDef) -> Result<Vec<&'g NodeDef>> {
        let mut out = Vec::new();
        for input in &node.input {
            match parse_input(input, false)? {
                InputRef::Control(_) => {}
                other => out.push(self.get(other.source())?),
            }
        }
        Ok(out)
    }
}

/// Whether a node's output is a dataset, by TensorFlow's naming (every
/// dataset op's name ends in `Dataset`, with a version suffix at most).
pub(super) fn is_dataset(op: &str) -> bool {
    op.contains("Dataset")
}

/// The names of the functions `node`'s attributes name (single and list).
pub(super) fn function_names(node: &NodeDef) -> Vec<&str> {
    let mut keys: Vec<&String> = node.attr.keys().collect();
    keys.sort();
    let mut out = Vec::new();
    for key in keys {
        match node.attr[key].value.as_ref() {
            Some(attr_value::Value::Func(f)) => out.push(f.name.as_str()),
            Some(attr_value::Value::List(list)) => {
                out.extend(list.func.iter().map(|f| f.name.as_str()))
            }
            _ => {}
        }
    }
    out
}

/// `graph` returning `node`'s output: the nodes `node` depends on (data
/// and control inputs), in the graph's order, and a copy of the graph's
/// `_Retval` reading `node`; the library and versions unchanged.
pub fn prefix_graph(graph: &GraphDef, node: &str) -> Result<GraphDef> {
    let ret = retval(graph)?;
    let keep = reachable(graph, node)?;
    let mut nodes: Vec<NodeDef> = graph
        .node
        .iter()
        .filter(|n| keep.contains(n.name.as_str()))
        .cloned()
        .collect();
    nodes.push(NodeDef {
        input: vec![node.to_string()],
        ..ret.clone()
    });
    Ok(GraphDef {
        node: nodes,
        ..graph.clone()
    })
}

/// The names of `from` and every node it depends on.
pub(super) fn reachable<'g>(graph: &'g GraphDef, from: &str) -> Result<HashSet<&'g str>> {
    let nodes = Nodes::of(graph);
    let mut keep = HashSet::new();
    let mut todo = vec![nodes.get(from)?];
    while let Some(node) = todo.pop() {
        if !keep.insert(node.name.as_str()) {
            continue;
        }
        for input in &node.input {
            todo.push(nodes.get(parse_input(input, false)?.source())?);
        }
    }
    Ok(keep)
}
