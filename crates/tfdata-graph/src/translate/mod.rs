//! TensorFlow dataset graphs to tfdata datasets.
//!
//! The graph is compiled like a function of no arguments ([`Compiler::graph`])
//! whose dataset nodes ([`ops`]) build the engine's ops from their input
//! values, and run once: constants flow into `RangeDataset`, datasets into
//! `MapDataset`, and so on up to the `_Retval`. Functions that dataset nodes
//! call are compiled once and carried by the engine's ops as inline
//! functions ([`inline`]), so a `flat_map` function that builds datasets
//! runs the same dataset nodes per element.
//!
//! TensorFlow's clients end the graph with a map whose function is just
//! `CompressElement` when `compression="AUTO"`; that map is cut off and the
//! worker compresses served elements itself ([`Translated::compressed`]),
//! as it does for tfdata pipelines.

mod assert_next;
mod assert_prev;
mod auto_shard;
mod autocache_load;
mod bernoulli;
mod choose_branch;
mod compression;
mod consume;
mod csv;
mod dataset_from_graph;
mod element_at;
mod files;
mod global_shuffle;
mod index_flat_map;
mod inline;
mod iterator_handles;
mod iterators;
mod lmdb;
mod map_defun;
mod multi_device;
mod node;
mod older;
mod one_shot;
mod ops;
mod parse_dataset;
mod random_access;
mod sampling;
mod save_load;
mod seeds;
mod select;
mod sinks;
mod sparse_datasets;
mod sql;
mod table_init;
mod weighted_flat_map;
mod window_op;
mod windows;
mod wrap_variant;
mod wrappers;

use std::collections::HashMap;
use tfdata_core::{Error, Result};

use tfdata_dataset::{Attr, Dataset, InlineBody};
use tfdata_proto::tensorflow::{AttrValue, GraphDef, NodeDef};
use tfdata_proto::tfdata::pipeline as wire;

use crate::function::{CompiledNode, Compiler, NodeCompiler};
use crate::graph::{InputRef, Library, parse_input, retval};
use crate::value::Value;

pub use ops::DATASET_OPS;

/// A translated graph.
pub struct Translated {
    /// The pipeline, without TensorFlow's trailing compression map.
    pub dataset: Dataset,
    /// The graph ended in the `CompressElement` map TensorFlow's clients
    /// add for `compression="AUTO"`: serve its elements compressed.
    pub compressed: bool,
    /// The served components TensorFlow declares `DT_VARIANT` (each a
    /// SparseTensor or a RaggedTensor), which the pipeline carries in string
    /// form: the worker serves them as TensorFlow's variants, telling the two
    /// apart by the carried bytes (`tfdata_core::element::served_variant_proto`).
    pub sparse_variants: Vec<usize>,
}

impl Translated {
    /// The pipeline rewritten on its wire form by `rewrite` (the static
    /// sharding rewrite) and built again, its inline functions attached by
    /// name.
    pub fn rewritten(
        &self,
        rewrite: impl FnOnce(&wire::OpDef) -> Result<wire::OpDef>,
    ) -> Result<Dataset> {
        let def = tfdata_dataset::pipeline::to_pipeline_def(&self.dataset, self.compressed)?;
        let root = def
            .root
            .as_ref()
            .ok_or_else(|| Error::Internal("a serialised pipeline has no root".into()))?;
        let rewritten = wire::PipelineDef {
            root: Some(rewrite(root)?),
            ..def
        };
        let mut bodies = HashMap::new();
        collect_inline(&self.dataset, &mut bodies);
        tfdata_dataset::pipeline::from_pipeline_def_with(&rewritten, &|name| {
            bodies.get(name).cloned()
        })
    }
}

/// Refuses a pipeline of more than [`crate::MAX_PIPELINE_OPS`] ops counted
/// per path, or deeper than [`crate::MAX_PIPELINE_DEPTH`], in time linear
/// in its distinct ops.
pub(crate) fn check_pipeline_size(ds: &Dataset) -> Result<()> {
    fn size(ds: &Dataset, depth: usize, memo: &mut HashMap<usize, u64>) -> Result<u64> {
        if depth > crate::MAX_PIPELINE_DEPTH {
            return Err(Error::InvalidArgument(format!(
                "dataset graph: the pipeline nests more than {} ops deep",
                crate::MAX_PIPELINE_DEPTH
            )));
        }
        if let Some(&n) = memo.get(&ds.op_key()) {
            return Ok(n);
        }
        let mut n = 1u64;
        for input in ds.op().inputs() {
            n = n.saturating_add(size(&input, depth + 1, memo)?);
        }
        let n = n.min(crate::MAX_PIPELINE_OPS + 1);
        memo.insert(ds.op_key(), n);
        Ok(n)
    }
    if size(ds, 0, &mut HashMap::new())? > crate::MAX_PIPELINE_OPS {
        return Err(Error::InvalidArgument(format!(
            "dataset graph: the pipeline has more than {} ops, counting each path to a shared \
             input (zip(a, a) reads a twice)",
            crate::MAX_PIPELINE_OPS
        )));
    }
    Ok(())
}

/// The inline functions of `ds`'s ops, by name.
fn collect_inline(ds: &Dataset, out: &mut HashMap<String, InlineBody>) {
    fn from_attr(a: &Attr, out: &mut HashMap<String, InlineBody>) {
        match a {
            Attr::Function(f) => {
                if let Some(body) = &f.inline {
                    out.insert(f.name.clone(), body.clone());
                }
            }
            Attr::List(items) => items.iter().for_each(|a| from_attr(a, out)),
            Attr::Map(m) => m.values().for_each(|a| from_attr(a, out)),
            _ => {}
        }
    }
    ds.op().attrs().0.values().for_each(|a| from_attr(a, out));
    for input in ds.op().inputs() {
        collect_inline(&input, out);
    }
}

/// Translates a serialized `GraphDef` (`DatasetDef.graph`).
pub fn translate_bytes(graph: &[u8]) -> Result<Translated> {
    translate(&crate::graph::decode_graph(graph)?)
}

/// Translates a dataset graph into a tfdata pipeline.
pub fn translate(graph: &GraphDef) -> Result<Translated> {
    let library = Library::of(graph)?;
    assert_prev::check(graph)?;
    let (result, compressed) = pipeline_result(graph, &library)?;
    assert_next::check(graph, &library, &result, compressed)?;
    let sparse_variants = served_variants(graph, &library)?;
    let nodes = DatasetNodes;
    let mut compiler = Compiler::new(&library, &nodes);
    let function = compiler.graph_result(graph, &result)?;
    let mut out = function.call(Vec::new())?;
    let dataset = match (out.pop(), out.is_empty()) {
        (Some(Value::Dataset(d)), true) => d,
        _ => {
            return Err(Error::InvalidArgument(
                "dataset graph: the _Retval node's input is not a dataset".into(),
            ));
        }
    };
    check_pipeline_size(&dataset)?;
    dataset.validate()?;
    Ok(Translated {
        dataset,
        compressed,
        sparse_variants,
    })
}

/// The graph's pipeline: the `_Retval`'s input, or that node's input when
/// it is TensorFlow's compression map.
pub(crate) fn pipeline_result(graph: &GraphDef, library: &Library) -> Result<(String, bool)> {
    let ret = retval(graph)?;
    let result = ret.input.first().ok_or_else(|| {
        Error::InvalidArgument("dataset graph: the _Retval node has no input".into())
    })?;
    match compression_map(graph, library)?.and_then(|n| n.input.first()) {
        Some(input) => Ok((input.clone(), true)),
        None => Ok((result.clone(), false)),
    }
}

/// The served components (what the pipeline's last node yields) that
/// TensorFlow declares `DT_VARIANT`: SparseTensors and RaggedTensors, the
/// only variants besides nested datasets that tfdata's kernels make.
pub(crate) fn served_variants(graph: &GraphDef, library: &Library) -> Result<Vec<usize>> {
    let (result, _) = pipeline_result(graph, library)?;
    let name = match parse_input(&result, false)? {
        InputRef::Output { node, .. } => node,
        _ => return Ok(Vec::new()),
    };
    let find = |name: &str| graph.node.iter().find(|n| n.name == name);
    let Some(node) = find(name) else {
        return Ok(Vec::new());
    };
    let attrs = crate::attrs::NodeAttrs::of(node);
    let declared = inline::declared_variants(&attrs);
    if !declared.is_empty() || !after_unbatch(node, &find) {
        return Ok(declared);
    }
    // Scalar variants that an unbatch made (RaggedTensors), passed on by
    // ops that keep their input's structure (`take`, `prefetch`, ...).
    Ok(attrs
        .dtype_codes("output_types")
        .unwrap_or_default()
        .iter()
        .enumerate()
        .filter(|(_, c)| **c == 21)
        .map(|(i, _)| i)
        .collect())
}

/// Whether `node`'s elements come from an unbatch through ops declaring the
/// same structure (followed by first input, a bounded number of steps).
fn after_unbatch<'g>(node: &'g NodeDef, find: &dyn Fn(&str) -> Option<&'g NodeDef>) -> bool {
    fn structure(n: &NodeDef) -> (Option<&AttrValue>, Option<&AttrValue>) {
        (n.attr.get("output_types"), n.attr.get("output_shapes"))
    }
    let mut at = node;
    for _ in 0..crate::MAX_PIPELINE_DEPTH {
        if inline::UNBATCH_OPS.contains(&at.op.as_str()) {
            return true;
        }
        let Some(next) = at
            .input
            .first()
            .and_then(|i| parse_input(i, false).ok())
            .and_then(|i| match i {
                InputRef::Output { node, .. } => find(node),
                _ => None,
            })
        else {
            return false;
        };
        if structure(next) != structure(node) && !inline::UNBATCH_OPS.contains(&next.op.as_str()) {
            return false;
        }
        at = next;
    }
    false
}

/// The graph's trailing compression map, if it has one.
pub(crate) fn compression_map<'g>(
    graph: &'g GraphDef,
    library: &Library,
) -> Result<Option<&'g NodeDef>> {
    let ret = retval(graph)?;
    let Some(result) = ret.input.first() else {
        return Ok(None);
    };
    let node_name = match parse_input(result, false)? {
        InputRef::Output { node, .. } => node,
        _ => return Ok(None),
    };
    Ok(graph
        .node
        .iter()
        .find(|n| n.name == node_name)
        .filter(|n| is_compression_map(n, library)))
}

/// A `MapDataset`/`ParallelMapDatasetV2` whose function only compresses
/// its arguments into one `CompressElement` variant (SparseTensor and
/// RaggedTensor arguments read and encoded back on the way), capturing
/// nothing.
fn is_compression_map(node: &NodeDef, library: &Library) -> bool {
    if !matches!(node.op.as_str(), "MapDataset" | "ParallelMapDatasetV2") {
        return false;
    }
    let attrs = crate::attrs::NodeAttrs::of(node);
    let Ok(f) = attrs.func("f") else { return false };
    let Some(def) = library.get(&f.name) else {
        return false;
    };
    let captured = attrs.dtype_codes("Targuments").map_or(1, |t| t.len());
    let ops: Vec<&str> = def.node_def.iter().map(|n| n.op.as_str()).collect();
    captured == 0
        && ops.contains(&"CompressElement")
        // A SparseTensor (RaggedTensor) component is read into a
        // SparseTensor (RaggedTensor) and encoded back to its variant before
        // compression. A batch of ragged variants comes back as one variant
        // of the whole batch, which TensorFlow's client decodes to the same
        // RaggedTensor as the batch it replaces.
        && ops.iter().all(|op| {
            matches!(
                *op,
                "CompressElement"
                    | "Identity"
                    | "DeserializeSparse"
                    | "SerializeSparse"
                    | "RaggedTensorFromVariant"
                    | "RaggedTensorToVariant"
            )
        })
        && def
            .signature
            .as_ref()
            .is_some_and(|s| s.output_arg.len() == 1)
}

/// The dataset nodes, for the compiler.
pub(crate) struct DatasetNodes;

impl NodeCompiler for DatasetNodes {
    fn compile_node(
        &self,
        node: &NodeDef,
        compiler: &mut Compiler<'_>,
    ) -> Option<Result<CompiledNode>> {
        if !self.handles(&node.op) {
            return None;
        }
        Some(ops::compile(node, compiler))
    }

    fn handles(&self, op: &str) -> bool {
        DATASET_OPS.contains(&op)
    }
}

/// The dataset nodes (and the nodes consuming datasets: `ReduceDataset`,
/// iterators) as a [`NodeCompiler`], for running a function body that
/// builds or reads datasets outside a pipeline.
pub fn dataset_nodes() -> impl NodeCompiler {
    DatasetNodes
}
