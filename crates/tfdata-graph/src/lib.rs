//! TensorFlow dataset graphs on tfdata's engine, so tfdata workers run what
//! TensorFlow trainers register.
//!
//! A TensorFlow client registers its pipeline as a `GraphDef`: dataset
//! nodes (`RangeDataset`, `ParallelMapDatasetV2`, ...) whose `_Retval` is
//! the pipeline, plus a `library` of `FunctionDef`s that `map`, `filter`,
//! `flat_map` and friends call. This crate
//!
//! * [`translate`]s the graph into a [`tfdata_dataset::Dataset`] built from
//!   the engine's own ops (which already match TensorFlow's semantics), so
//!   everything the worker does with pipelines (dynamic and static
//!   sharding, coordinated reads, caches) works on it unchanged;
//! * runs `FunctionDef` bodies ([`function`]) over a kernel set
//!   ([`kernels`]): node inputs with output indices, control dependencies,
//!   constants, nested calls and functional control flow;
//! * tells, without running anything, which ops of a graph it cannot run
//!   ([`unsupported_ops`]), for the dispatcher's routing decision.
//!
//! Graphs come from the network: every walk is bounded ([`MAX_NODES`],
//! [`MAX_FUNCTIONS`], [`MAX_CALL_DEPTH`], ...), cycles and self-calls are
//! refused, and sizes read from attributes are checked before anything is
//! allocated ([`MAX_TENSOR_BYTES`]).

pub mod attrs;
pub mod autocache;
pub mod function;
pub mod graph;
pub mod iterator;
pub mod kernels;
pub mod list;
pub mod multi_device;
pub mod queue;
pub mod reader;
mod support;
pub mod table;
pub mod translate;
pub mod value;
pub mod variable;

pub use graph::{Library, decode_graph};
pub use support::{supported_ops, unsupported_ops};
pub use translate::{Translated, translate, translate_bytes};

/// Nodes in one graph or function body.
pub const MAX_NODES: usize = 100_000;
/// Functions in a graph's library.
pub const MAX_FUNCTIONS: usize = 10_000;
/// Nesting of function calls (calls, branches, loop bodies, dataset
/// functions) followed when compiling.
pub const MAX_CALL_DEPTH: usize = 64;
/// Nodes one call of a function may run, counting the bodies it calls
/// (an `If` its larger branch, a `While` one iteration): a body whose
/// calls double at every level runs exponentially many nodes per element.
pub const MAX_CALL_COST: u64 = 1 << 24;
/// Ops of one translated pipeline, counting a shared input once per path
/// to it (`zip(a, a)` iterates `a` twice): nested zips of one input would
/// otherwise make exponentially many iterators.
pub const MAX_PIPELINE_OPS: u64 = 100_000;
/// Nesting of one translated pipeline's ops (`map(batch(range))` is 3),
/// as the engine's own wire form allows: its ops recurse over inputs.
pub const MAX_PIPELINE_DEPTH: usize = 256;
/// Nodes one body may hand to the [`function::NodeCompiler`] (dataset
/// ops): real pipelines have tens; this bounds how deep a pipeline gets
/// before [`MAX_PIPELINE_DEPTH`] is checked.
pub const MAX_DATASET_NODES: usize = 1024;
/// Outputs one node may declare (a list attribute's length).
pub const MAX_NODE_OUTPUTS: usize = 65_536;
/// Bytes of one tensor a kernel may produce (1 GiB).
pub const MAX_TENSOR_BYTES: usize = 1 << 30;
/// Iterations of one `While` loop for one element.
pub const MAX_WHILE_ITERATIONS: u64 = 100_000_000;
