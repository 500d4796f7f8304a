//! Which points of a TensorFlow dataset graph autocache may cache.
//!
//! The main chain is the dataset the graph returns (the input of the
//! trailing compression map when TensorFlow's client added one), then
//! each node's dataset input while it has exactly one, as input 0. Walking
//! up from the bottom, a node is a candidate while every node so far is
//! deterministic and split-independent (the rules of
//! `tfdata_dataset::autocache::analyse`, in TensorFlow's op names). The
//! first node that breaks one ends the walk, named in one sentence.

use std::collections::HashSet;

use tfdata_core::{Error, Result};
use tfdata_proto::tensorflow::{GraphDef, NodeDef, attr_value};

use super::graph_view::{Nodes, function_names, is_dataset, prefix_graph};
use crate::attrs::NodeAttrs;
use crate::graph::{Library, parse_input};
use crate::{MAX_CALL_DEPTH, MAX_PIPELINE_DEPTH};

/// One point of the graph's main chain that may be cached.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphCandidate {
    /// Position on the main chain counted from its bottom (0: the source).
    pub index: usize,
    /// `"2: ParallelMapDatasetV2(Dataset_map_lambda)"`: the index, the op
    /// and its function's name without TensorFlow's counters.
    pub label: String,
    /// The node whose output the point is.
    pub node: String,
    /// The graph returning that node's output: what the cache holds.
    pub prefix: GraphDef,
    /// An in-memory source alone (`RangeDataset`, `TensorDataset`,
    /// `TensorSliceDataset`): profiled, never cached.
    pub in_memory: bool,
}

/// What [`analyse`] found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GraphAnalysis {
    /// The candidates, bottom first.
    pub candidates: Vec<GraphCandidate>,
    /// Why the points above the last candidate are not candidates (`None`:
    /// the whole pipeline is one).
    pub stopped: Option<String>,
}

/// Candidates of one graph at most: each carries its prefix graph (the
/// library included), so a deep graph from the network cannot make the
/// analysis hold hundreds of copies of it. Real pipelines have a handful.
pub const MAX_CANDIDATES: usize = 32;

/// Sources: they read constants or files the same way every time.
pub const SOURCES: &[&str] = &[
    "RangeDataset",
    "TensorDataset",
    "TensorSliceDataset",
    "TFRecordDataset",
    "TFRecordDatasetV2",
    "TextLineDataset",
    "FixedLengthRecordDataset",
    "FixedLengthRecordDatasetV2",
];

/// Sources whose elements are in the graph itself (or counted).
pub const IN_MEMORY_SOURCES: &[&str] = &["RangeDataset", "TensorDataset", "TensorSliceDataset"];

/// Ops that turn each element into zero, one or several elements on its
/// own, and TensorFlow's wrappers that change no element (options,
/// threading, autotuning): their output's multiset does not depend on
/// which worker saw which split.
pub const ELEMENT_WISE: &[&str] = &[
    "MapDataset",
    "ParallelMapDataset",
    "ParallelMapDatasetV2",
    "FilterDataset",
    "FlatMapDataset",
    "InterleaveDataset",
    "ParallelInterleaveDatasetV2",
    "ParallelInterleaveDatasetV3",
    "ParallelInterleaveDatasetV4",
    "LegacyParallelInterleaveDatasetV2",
    "PrefetchDataset",
    "IgnoreErrorsDataset",
    "ExperimentalIgnoreErrorsDataset",
    "UnbatchDataset",
    "ExperimentalUnbatchDataset",
    "ModelDataset",
    "OptimizeDataset",
    "OptimizeDatasetV2",
    "OptionsDataset",
    "FinalizeDataset",
    "MaxIntraOpParallelismDataset",
    "ExperimentalMaxIntraOpParallelismDataset",
    "PrivateThreadPoolDataset",
    "ExperimentalPrivateThreadPoolDataset",
];

/// Ops whose output depends on how many elements came before or beside an
/// element: a cache written by several workers would hold other groups.
pub const ACROSS_ELEMENTS: &[&str] = &[
    "BatchDataset",
    "BatchDatasetV2",
    "ParallelBatchDataset",
    "PaddedBatchDataset",
    "PaddedBatchDatasetV2",
    "MapAndBatchDataset",
    "RebatchDataset",
    "RebatchDatasetV2",
    "TakeDataset",
    "SkipDataset",
    "RepeatDataset",
    "WindowDataset",
    "ScanDataset",
    "ExperimentalScanDataset",
    "ShardDataset",
    "CacheDataset",
    "CacheDatasetV2",
    "AssertCardinalityDataset",
    "GroupByWindowDataset",
    "ExperimentalGroupByWindowDataset",
    "GroupByReducerDataset",
    "ExperimentalGroupByReducerDataset",
    "UniqueDataset",
    "ExperimentalUniqueDataset",
    "TakeWhileDataset",
    "ExperimentalTakeWhileDataset",
    "ShuffleAndRepeatDataset",
    "ShuffleAndRepeatDatasetV2",
    "SlidingWindowDataset",
];

/// Ops that call into Python: what they compute is invisible in the graph
/// (and tfdata workers cannot run them anyway).
pub const PYTHON_FUNCTION_OPS: &[&str] = &["PyFunc", "PyFuncStateless", "EagerPyFunc"];

/// The shuffles whose seeds are inputs 2 and 3 (`ShuffleDatasetV2` takes a
/// seed generator resource instead).
const SHUFFLES_WITH_SEED_INPUTS: &[&str] = &["ShuffleDataset", "ShuffleDatasetV3"];

/// The ops TensorFlow 2.21 registers as stateful, one a line.
const STATEFUL_OPS: &str = include_str!("../translate/stateful_ops.txt");

/// Whether `op` draws from a random state that advances per call (so its
/// output depends on how many calls came before: on which worker ran which
/// element). TensorFlow's stateless random ops (`StatelessRandom*`) are
/// not stateful and so not among them.
pub fn is_stateful_random(op: &str) -> bool {
    let random = op.contains("Random")
        || op.starts_with("Stateful")
        || op.starts_with("Rng")
        || op.contains("Multinomial")
        || op.contains("TruncatedNormal")
        || op.starts_with("SampleDistortedBoundingBox")
        || op.ends_with("CandidateSampler")
        || op == "NonDeterministicInts";
    random && STATEFUL_OPS.lines().any(|s| s == op)
}

/// The candidate points of `graph` (see the module docs). A graph that
/// cannot be read (no `_Retval`, a missing node, a bad library) is no
/// analysis at all: an error, which the service shows as the reason.
pub fn analyse(graph: &GraphDef) -> Result<GraphAnalysis> {
    let library = Library::of(graph)?;
    let nodes = Nodes::of(graph);
    let (result, _compressed) = crate::translate::pipeline_result(graph, &library)?;
    let root = nodes.get(parse_input(&result, false)?.source())?;
    let chain = main_chain(&nodes, root)?;
    let mut candidates = Vec::new();
    for (index, node) in chain.iter().rev().enumerate() {
        let label = label(index, node);
        if index == MAX_CANDIDATES {
            return Ok(GraphAnalysis {
                candidates,
                stopped: Some(format!(
                    "autocache considers at most {MAX_CANDIDATES} points of a graph; nothing \
                     from {label} on is cached"
                )),
            });
        }
        if let Err(rule) = check(&nodes, &library, node) {
            return Ok(GraphAnalysis {
                candidates,
                stopped: Some(format!(
                    "{rule} at {label}; nothing from there on is cached"
                )),
            });
        }
        candidates.push(GraphCandidate {
            index,
            label,
            node: node.name.clone(),
            prefix: prefix_graph(graph, &node.name)?,
            in_memory: index == 0 && IN_MEMORY_SOURCES.contains(&node.op.as_str()),
        });
    }
    Ok(GraphAnalysis {
        candidates,
        stopped: None,
    })
}

/// The main chain, root first: the dataset input while a node has exactly
/// one and it is input 0; at most [`MAX_PIPELINE_DEPTH`] nodes.
fn main_chain<'g>(nodes: &Nodes<'g>, root: &'g NodeDef) -> Result<Vec<&'g NodeDef>> {
    let mut chain = vec![root];
    let mut node = root;
    loop {
        let inputs = nodes.data_inputs(node)?;
        let datasets: Vec<usize> = (0..inputs.len())
            .filter(|i| is_dataset(&inputs[*i].op))
            .collect();
        if datasets != [0] {
            return Ok(chain);
        }
        if chain.len() >= MAX_PIPELINE_DEPTH {
            return Err(Error::InvalidArgument(format!(
                "dataset graph: the pipeline is deeper than {MAX_PIPELINE_DEPTH} ops"
            )));
        }
        node = inputs[0];
        chain.push(node);
    }
}

/// `"2: MapDataset(Dataset_map_lambda)"`.
fn label(index: usize, node: &NodeDef) -> String {
    let function = ["f", "predicate"].iter().find_map(|key| {
        match node.attr.get(*key).and_then(|a| a.value.as_ref()) {
            Some(attr_value::Value::Func(f)) => Some(short_function_name(&f.name)),
            _ => None,
        }
    });
    match function {
        Some(f) => format!("{index}: {}({f})", node.op),
        None => format!("{index}: {}", node.op),
    }
}

/// A traced function's name without TensorFlow's decorations:
/// `__inference_Dataset_map_lambda_22` is `Dataset_map_lambda`.
fn short_function_name(name: &str) -> String {
    let name = name.strip_prefix("__inference_").unwrap_or(name);
    match name.rsplit_once('_') {
        Some((stem, counter))
            if !stem.is_empty()
                && !counter.is_empty()
                && counter.bytes().all(|b| b.is_ascii_digit()) =>
        {
            stem.to_string()
        }
        _ => name.to_string(),
    }
}

/// Whether `node` (whose inputs passed already) keeps its output
/// cacheable; the rule it breaks otherwise.
fn check(nodes: &Nodes<'_>, library: &Library, node: &NodeDef) -> std::result::Result<(), String> {
    let op = node.op.as_str();
    let inputs = nodes.data_inputs(node).map_err(|e| e.to_string())?;
    let datasets = inputs.iter().filter(|n| is_dataset(&n.op)).count();
    if datasets > 1 {
        return Err(format!(
            "`{op}` combines {datasets} datasets, whose splits the snapshot writer cannot pair up"
        ));
    }
    deterministic(nodes, library, node)?;
    match op {
        _ if SOURCES.contains(&op) || ELEMENT_WISE.contains(&op) => Ok(()),
        // Seeded and not reshuffled, as `deterministic` checked: it only
        // orders elements, which a multiset does not see.
        _ if SHUFFLES_WITH_SEED_INPUTS.contains(&op) => Ok(()),
        _ if op == super::LOAD_OP => Err(format!(
            "`{op}` reads a cache already; caching its output again saves nothing"
        )),
        "RandomDataset" | "RandomDatasetV2" | "ExperimentalRandomDataset" => Err(format!(
            "`{op}` is an infinite stream; a cache of it would never end"
        )),
        _ if ACROSS_ELEMENTS.contains(&op) => Err(format!(
            "`{op}` groups or counts elements across splits, so a cache written by several \
             workers would not hold what it outputs"
        )),
        _ => Err(format!(
            "`{op}` is not an op autocache knows to be element-wise"
        )),
    }
}

/// The determinism rule for one node of the main chain: its own
/// randomness, and every function it names, at any depth.
fn deterministic(
    nodes: &Nodes<'_>,
    library: &Library,
    node: &NodeDef,
) -> std::result::Result<(), String> {
    let op = node.op.as_str();
    if op.starts_with("Shuffle") && !op.contains("Repeat") {
        if !SHUFFLES_WITH_SEED_INPUTS.contains(&op) {
            return Err(format!(
                "`{op}` takes its seeds from a seed generator autocache cannot read, so it is \
                 treated as an unseeded random op"
            ));
        }
        let attrs = NodeAttrs::of(node);
        if attrs
            .bool_or("reshuffle_each_iteration", true)
            .unwrap_or(true)
        {
            return Err(format!(
                "`{op}` with reshuffle_each_iteration (a cache would fix one order)"
            ));
        }
        // TensorFlow's rule: seeds (0, 0) mean "unseeded".
        let seed = |i: usize| -> std::result::Result<i64, String> {
            let name = node
                .input
                .get(i)
                .ok_or_else(|| format!("`{op}` lacks input {i}"))?;
            constant_int(nodes, name).ok_or_else(|| {
                format!("`{op}` takes its seed from a node autocache cannot read (not a constant)")
            })
        };
        if seed(2)? == 0 && seed(3)? == 0 {
            return Err(format!("unseeded random op `{op}`"));
        }
    }
    let mut seen = HashSet::new();
    for name in function_names(node) {
        function_deterministic(library, name, 0, &mut seen)?;
    }
    Ok(())
}

/// A scalar integer constant, through `Identity` nodes.
fn constant_int(nodes: &Nodes<'_>, input: &str) -> Option<i64> {
    let mut name = parse_input(input, false).ok()?.source().to_string();
    for _ in 0..16 {
        let node = nodes.get(&name).ok()?;
        match node.op.as_str() {
            "Const" => {
                return NodeAttrs::of(node)
                    .tensor("value")
                    .ok()?
                    .to_scalar::<i64>()
                    .ok();
            }
            "Identity" => {
                name = parse_input(node.input.first()?, false)
                    .ok()?
                    .source()
                    .to_string()
            }
            _ => return None,
        }
    }
    None
}

/// No stateful random op and no Python function in `name`'s body or any
/// function it calls (by op or attribute), at most [`MAX_CALL_DEPTH`] deep.
fn function_deterministic(
    library: &Library,
    name: &str,
    depth: usize,
    seen: &mut HashSet<String>,
) -> std::result::Result<(), String> {
    if !seen.insert(name.to_string()) {
        return Ok(());
    }
    let short = short_function_name(name);
    if depth > MAX_CALL_DEPTH {
        return Err(format!(
            "functions nest more than {MAX_CALL_DEPTH} deep (at {short}), past what autocache \
             analyses"
        ));
    }
    let Some(def) = library.get(name) else {
        return Err(format!("function {short} is not in the graph's library"));
    };
    for node in &def.node_def {
        let op = node.op.as_str();
        if PYTHON_FUNCTION_OPS.contains(&op) {
            return Err(format!(
                "`{op}` (a Python function) in function {short}: autocache cannot see what it \
                 computes, so it is not known to be deterministic"
            ));
        }
        if is_stateful_random(op) {
            return Err(format!("unseeded random op `{op}` in function {short}"));
        }
        if op.starts_with("Shuffle") || op.starts_with("Random") && is_dataset(op) {
            return Err(format!(
                "random dataset op `{op}` in function {short} (its draw would be frozen)"
            ));
        }
        if library.contains(op) {
            function_deterministic(library, op, depth + 1, seen)?;
        }
        for called in function_names(node) {
            function_deterministic(library, called, depth + 1, seen)?;
        }
    }
    Ok(())
}
