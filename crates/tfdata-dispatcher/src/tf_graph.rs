//! Splitting TensorFlow dataset graphs for distributed_epoch: the
//! dispatcher finds the graph's source datasets (depth first from the
//! `_Retval` node, inputs in order: TensorFlow's split-provider order) and
//! builds their split providers from their constant inputs, as TensorFlow's
//! dispatcher does. Supported sources: `RangeDataset` (splits are the range's
//! values) and `TensorSliceDataset` (splits are slice indices) over constants
//! or `MatchingFiles` (which is how `TFRecordDataset(files)` and
//! `list_files` read). Anything else is refused, naming the op.

use std::collections::HashMap;

use prost::Message;
use tfdata_core::{Error, Result};
use tfdata_dataset::splits::{IndexSplitProvider, RangeSplitProvider, SplitProvider};
use tfdata_proto::tensorflow::{GraphDef, NodeDef, attr_value};

/// Bound on graph depth followed, against malicious graphs.
const MAX_DEPTH: usize = 512;

fn node_name(input: &str) -> &str {
    let input = input.trim_start_matches('^');
    input.split(':').next().unwrap_or(input)
}

fn is_dataset(op: &str) -> bool {
    op.contains("Dataset")
}

struct Graph<'a> {
    nodes: HashMap<&'a str, &'a NodeDef>,
}

impl<'a> Graph<'a> {
    fn node(&self, name: &str) -> Result<&'a NodeDef> {
        self.nodes
            .get(node_name(name))
            .copied()
            .ok_or_else(|| Error::InvalidArgument(format!("dataset graph: no node {name:?}")))
    }

    /// A constant input's tensor, following `Identity` nodes.
    fn constant(&self, name: &str, depth: usize) -> Result<tfdata_core::Tensor> {
        let node = self.node(name)?;
        if depth > 16 {
            return Err(Error::InvalidArgument(
                "dataset graph: Identity chain too long".into(),
            ));
        }
        match node.op.as_str() {
            "Const" => match node.attr.get("value").and_then(|a| a.value.as_ref()) {
                Some(attr_value::Value::Tensor(t)) => tfdata_core::element::tensor_from_proto(t),
                _ => Err(Error::InvalidArgument(format!(
                    "Const node {} has no tensor value",
                    node.name
                ))),
            },
            "Identity" => self.constant(node.input.first().map_or("", |s| s.as_str()), depth + 1),
            other => Err(Error::Unimplemented(format!(
                "distributed_epoch: a source input comes from a {other} node ({}); only constant inputs can be split",
                node.name
            ))),
        }
    }

    fn scalar_i64(&self, name: &str) -> Result<i64> {
        self.constant(name, 0)?.to_scalar::<i64>()
    }

    /// Source dataset nodes, depth first.
    fn sources(&self, name: &str, depth: usize, out: &mut Vec<&'a NodeDef>) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(Error::InvalidArgument("dataset graph is too deep".into()));
        }
        let node = self.node(name)?;
        let dataset_inputs: Vec<&String> = node
            .input
            .iter()
            .filter(|i| !i.starts_with('^'))
            .filter(|i| self.node(i).is_ok_and(|n| is_dataset(&n.op)))
            .collect();
        if dataset_inputs.is_empty() {
            out.push(node);
        }
        for input in dataset_inputs {
            self.sources(input, depth + 1, out)?;
        }
        Ok(())
    }

    fn split_provider(&self, source: &NodeDef) -> Result<Box<dyn SplitProvider>> {
        let input = |i: usize| -> Result<&str> {
            source.input.get(i).map(String::as_str).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "{} node {} lacks input {i}",
                    source.op, source.name
                ))
            })
        };
        match source.op.as_str() {
            "RangeDataset" => {
                let (start, stop, step) = (
                    self.scalar_i64(input(0)?)?,
                    self.scalar_i64(input(1)?)?,
                    self.scalar_i64(input(2)?)?,
                );
                if step == 0 {
                    return Err(Error::InvalidArgument("RangeDataset with step 0".into()));
                }
                Ok(Box::new(RangeSplitProvider::new(start, stop, step)))
            }
            "TensorSliceDataset" => {
                let first = self.node(input(0)?)?;
                let rows = if first.op == "MatchingFiles" {
                    let patterns =
                        self.constant(first.input.first().map_or("", |s| s.as_str()), 0)?;
                    let mut files = Vec::new();
                    for p in patterns.string_values()? {
                        files.extend(tfdata_dataset::io::glob(&String::from_utf8_lossy(p))?);
                    }
                    files.len() as u64
                } else {
                    let t = self.constant(input(0)?, 0)?;
                    *t.shape().first().ok_or_else(|| {
                        Error::InvalidArgument("TensorSliceDataset over a scalar".into())
                    })? as u64
                };
                Ok(Box::new(IndexSplitProvider::new(rows)))
            }
            other => Err(Error::InvalidArgument(format!(
                "distributed_epoch: this dispatcher cannot split the TensorFlow source dataset {other} \
                 (node {}); splittable: RangeDataset, TensorSliceDataset (including TFRecordDataset \
                 over file names and list_files)",
                source.name
            ))),
        }
    }
}

/// The split providers of a serialized TensorFlow dataset graph, in
/// TensorFlow's order.
pub fn split_providers(graph: &[u8]) -> Result<Vec<Box<dyn SplitProvider>>> {
    let graph = GraphDef::decode(graph)
        .map_err(|e| Error::InvalidArgument(format!("dataset graph is not a GraphDef: {e}")))?;
    let g = Graph {
        nodes: graph.node.iter().map(|n| (n.name.as_str(), n)).collect(),
    };
    let retval = graph
        .node
        .iter()
        .find(|n| n.op == "_Retval")
        .ok_or_else(|| Error::InvalidArgument("dataset graph has no _Retval node".into()))?;
    let root = retval
        .input
        .first()
        .ok_or_else(|| Error::InvalidArgument("the _Retval node has no input".into()))?;
    let mut sources = Vec::new();
    g.sources(root, 0, &mut sources)?;
    sources.iter().map(|s| g.split_provider(s)).collect()
}
