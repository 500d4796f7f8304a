//! Autocache for TensorFlow graphs (issue 36; docs/operations.md,
//! "Autocache"): the graph twin of `tfdata_dataset::autocache`'s analysis,
//! fingerprint and rewrite, for datasets registered as a `GraphDef`
//! (`DatasetDef.graph`, what TensorFlow's own clients send). The cache
//! layout, profile and choice are the engine's, shared with pipelines.
//!
//! * [`analyse`]: the main chain from the dataset the graph returns (past
//!   the trailing compression map TensorFlow's clients add) down input 0 to
//!   a source; the candidates, bottom first, by the pipelines' two rules
//!   (deterministic: no stateful random op in any function the node
//!   reaches, no Python function, `ShuffleDataset*` only seeded and not
//!   reshuffled; split-independent: sources, element-wise ops and
//!   TensorFlow's pass-through wrappers), each with its prefix graph;
//! * [`fingerprint()`]: a structural SHA-256 of the prefix (ops, attributes,
//!   function bodies and inputs, never node or function names, which carry
//!   per-process counters) and the files its string constants name (path,
//!   size, mtime, through the engine's resolver);
//! * [`rewrite`]: the graph with the candidate node replaced by a
//!   [`LOAD_OP`] node reading the cache, and the nodes only it needed
//!   removed, so serving from the cache opens no source file.
//!
//! [`LOAD_OP`] is tfdata's private op: only tfdata workers run the graphs a
//! dispatcher registers for a cache (TensorFlow workers never get their
//! tasks: [`has_private_ops`] marks such a dataset when it is registered),
//! and the translator compiles it to the engine's `load` of the
//! distributed snapshot the cache is.
//!
//! Architecture invariant: as for pipelines, analysis, fingerprints and
//! rewrites never compile or run the graph; only the worker's profile does.

mod analyse;
mod fingerprint;
mod graph_view;
mod rewrite;

#[cfg(test)]
mod tests;

pub use analyse::{
    ACROSS_ELEMENTS, ELEMENT_WISE, GraphAnalysis, GraphCandidate, IN_MEMORY_SOURCES,
    MAX_CANDIDATES, PYTHON_FUNCTION_OPS, SOURCES, analyse, is_stateful_random,
};
pub use fingerprint::{MAX_HASH_DEPTH, fingerprint, fingerprints, prefix_fingerprint};
pub use graph_view::prefix_graph;
pub use rewrite::{LOAD_OP, rewrite};

use tfdata_proto::tensorflow::GraphDef;

/// Whether `graph` (or a function of its library) has a [`LOAD_OP`] node:
/// a graph only tfdata workers can run. The dispatcher journals it when it
/// registers a graph, so that a TensorFlow worker that registers later is
/// never handed its tasks.
pub fn has_private_ops(graph: &GraphDef) -> bool {
    graph.node.iter().any(|n| n.op == LOAD_OP)
        || graph.library.as_ref().is_some_and(|library| {
            library
                .function
                .iter()
                .any(|f| f.node_def.iter().any(|n| n.op == LOAD_OP))
        })
}
