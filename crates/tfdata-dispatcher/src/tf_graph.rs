//! Splitting TensorFlow dataset graphs for distributed_epoch: the
//! dispatcher finds the graph's source datasets (depth first from the
//! `_Retval` node, inputs in order: TensorFlow's split-provider order) and
//! builds their split providers from their constant inputs, as TensorFlow's
//! dispatcher does. Supported sources: `RangeDataset` (splits are the range's
//! values), `TensorDataset` (one split) and `TensorSliceDataset` (splits are
//! slice indices) over constants
//! or `MatchingFiles` (which is how `TFRecordDataset(files)` and
//! `list_files` read), and `RandomDataset`, whose provider of endless index
//! splits its iterator never reads (TensorFlow's: each worker draws the
//! whole random stream), and tfdata's `TfdataAutocacheLoadDataset` (a
//! cache: one split per chunk). Anything else is refused, naming the op.

use std::collections::HashMap;

use prost::Message;
use tfdata_core::{Error, Result};
use tfdata_dataset::splits::{IndexSplitProvider, RangeSplitProvider, SplitProvider};
use tfdata_proto::tensorflow::{GraphDef, NodeDef, attr_value};

/// Bound on graph depth followed, against malicious graphs.
const MAX_DEPTH: usize = 512;
/// Bound on the sources one graph may list. A node reached along several
/// paths counts once per path (zip(a, a) reads `a` twice, as TensorFlow's
/// split providers do), so a graph of 41 nodes each naming the previous one
/// twice would list 2^40 sources: it is refused instead.
const MAX_SOURCES: usize = 1024;

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

    /// Source dataset nodes, depth first, each node's list worked out once
    /// (`memo`), so shared inputs cost nothing more than their listing.
    fn sources(
        &self,
        name: &str,
        depth: usize,
        memo: &mut HashMap<&'a str, Vec<&'a NodeDef>>,
    ) -> Result<Vec<&'a NodeDef>> {
        if depth > MAX_DEPTH {
            return Err(Error::InvalidArgument("dataset graph is too deep".into()));
        }
        let node = self.node(name)?;
        if let Some(known) = memo.get(node.name.as_str()) {
            return Ok(known.clone());
        }
        let dataset_inputs: Vec<&String> = node
            .input
            .iter()
            .filter(|i| !i.starts_with('^'))
            .filter(|i| self.node(i).is_ok_and(|n| is_dataset(&n.op)))
            .collect();
        let mut out = Vec::new();
        if dataset_inputs.is_empty() {
            out.push(node);
        }
        for input in dataset_inputs {
            out.extend(self.sources(input, depth + 1, memo)?);
            if out.len() > MAX_SOURCES {
                return Err(Error::InvalidArgument(format!(
                    "dataset graph reads more than {MAX_SOURCES} sources (counting each path to a \
                     shared input); distributed_epoch cannot split it"
                )));
            }
        }
        memo.insert(node.name.as_str(), out.clone());
        Ok(out)
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
            // TensorFlow's RandomDataset: endless splits nobody reads, so
            // dispatchers and workers count the same providers.
            "RandomDataset" | "RandomDatasetV2" | "ExperimentalRandomDataset" => {
                Ok(Box::new(IndexSplitProvider::unbounded()))
            }
            // tfdata's private op reading an autocache (a complete
            // distributed snapshot): one split per chunk, as `load`'s.
            op if op == tfdata_graph::autocache::LOAD_OP => {
                let path = match source.attr.get("path").and_then(|a| a.value.as_ref()) {
                    Some(attr_value::Value::S(path)) if !path.is_empty() => {
                        String::from_utf8_lossy(path).into_owned()
                    }
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "{op} node {} has no path",
                            source.name
                        )));
                    }
                };
                tfdata_dataset::Dataset::load(&path, false)
                    .op()
                    .split_provider()
                    .unwrap_or_else(|| Err(Error::Internal("load has no split provider".into())))
            }
            // One split, the element (TensorFlow's TensorDataset).
            "TensorDataset" => Ok(Box::new(IndexSplitProvider::new(1))),
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
                 (node {}); splittable: RangeDataset, TensorDataset, TensorSliceDataset (including \
                 TFRecordDataset over file names and list_files), RandomDataset",
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
    let sources = g.sources(root, 0, &mut HashMap::new())?;
    sources.iter().map(|s| g.split_provider(s)).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tfdata_proto::tensorflow::AttrValue;

    fn node(name: &str, op: &str, inputs: &[&str]) -> NodeDef {
        NodeDef {
            name: name.into(),
            op: op.into(),
            input: inputs.iter().map(|i| i.to_string()).collect(),
            ..Default::default()
        }
    }

    fn constant(name: &str, value: i64) -> NodeDef {
        let tensor = tfdata_core::element::tensor_to_proto(&tfdata_core::Tensor::scalar(value));
        let mut n = node(name, "Const", &[]);
        n.attr.insert(
            "value".into(),
            AttrValue {
                value: Some(attr_value::Value::Tensor(tensor)),
            },
        );
        n
    }

    /// `range(10)`, then `layers` zips each naming the layer below twice
    /// (what `Dataset.zip((ds, ds))` applied `layers` times gives).
    pub(crate) fn doubled(layers: usize) -> Vec<u8> {
        let mut nodes = vec![
            constant("start", 0),
            constant("stop", 10),
            constant("step", 1),
            node("n0", "RangeDataset", &["start", "stop", "step"]),
        ];
        for i in 1..=layers {
            let below = format!("n{}", i - 1);
            nodes.push(node(&format!("n{i}"), "ZipDataset", &[&below, &below]));
        }
        let top = format!("n{layers}");
        nodes.push(node("out", "_Retval", &[&top]));
        GraphDef {
            node: nodes,
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn random_sources_get_endless_unread_splits() {
        // zip(range(10), random()): two providers, as TensorFlow's
        // dispatcher makes; the random one never ends.
        let nodes = vec![
            constant("start", 0),
            constant("stop", 10),
            constant("step", 1),
            node("range", "RangeDataset", &["start", "stop", "step"]),
            constant("seed", 1),
            constant("seed2", 2),
            node("random", "RandomDataset", &["seed", "seed2"]),
            node("zip", "ZipDataset", &["range", "random"]),
            node("out", "_Retval", &["zip"]),
        ];
        let graph = |nodes: &[NodeDef]| {
            GraphDef {
                node: nodes.to_vec(),
                ..Default::default()
            }
            .encode_to_vec()
        };
        let providers = split_providers(&graph(&nodes)).unwrap();
        assert_eq!(providers.len(), 2);
        assert_eq!(providers[0].cardinality(), 10);
        assert_eq!(
            providers[1].cardinality(),
            tfdata_dataset::INFINITE_CARDINALITY
        );
    }

    #[test]
    fn an_autocache_load_is_split_by_chunk() {
        // map(TfdataAutocacheLoadDataset(path)): the graph a dispatcher
        // serves a cache with; its splits are the cache's chunks.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache");
        let path = path.to_str().unwrap();
        let elements: Vec<tfdata_core::Element> = (0..10i64)
            .map(|i| tfdata_core::Element::new(vec![tfdata_core::Tensor::scalar(i)]))
            .collect();
        let spec = tfdata_dataset::Dataset::range(1)
            .element_spec()
            .unwrap()
            .unwrap();
        tfdata_dataset::snapshot::testing::write_snapshot(
            &tfdata_dataset::io::LocalFileSystem,
            path,
            &spec,
            tfdata_dataset::snapshot::layout::SnapshotCompression::Snappy,
            &elements,
            2,
            1,
        )
        .unwrap();
        let mut load = node("cached", tfdata_graph::autocache::LOAD_OP, &[]);
        load.attr.insert(
            "path".into(),
            AttrValue {
                value: Some(attr_value::Value::S(path.as_bytes().to_vec().into())),
            },
        );
        let graph = GraphDef {
            node: vec![
                load,
                node("map", "MapDataset", &["cached"]),
                node("out", "_Retval", &["map"]),
            ],
            ..Default::default()
        };
        let providers = split_providers(&graph.encode_to_vec()).unwrap();
        assert_eq!(providers.len(), 1);
        let mut chunks = 0;
        while let Some(split) = providers[0].get_next().unwrap() {
            let chunk = String::from_utf8(split.string_values().unwrap()[0].to_vec()).unwrap();
            assert!(chunk.contains("/chunks/chunk_"), "{chunk}");
            chunks += 1;
        }
        assert_eq!(chunks, 5);
        // A load without a path is refused, naming the node.
        let mut bad = graph.clone();
        bad.node[0].attr.clear();
        let err = split_providers(&bad.encode_to_vec())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("node cached has no path"), "{err}");
    }

    #[test]
    fn a_shared_input_counts_once_per_path() {
        // zip(zip(r, r), zip(r, r)): four providers, as TensorFlow makes.
        assert_eq!(split_providers(&doubled(2)).unwrap().len(), 4);
    }

    #[test]
    fn doubled_edges_are_refused_quickly_not_walked_exponentially() {
        // 41 nodes naming the previous one twice: 2^40 paths. Walked
        // without memory this never returns.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(split_providers(&doubled(40)).map(|p| p.len()));
        });
        let result = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the graph walk did not finish in 20 s");
        let err = result.unwrap_err();
        assert!(err.to_string().contains("more than 1024 sources"), "{err}");
    }
}
