//! Dataset pipelines: what a worker runs for a task and what a user builds
//! before `distribute`.
//!
//! * [`Dataset`]: an immutable op graph with TensorFlow's op names and
//!   argument semantics, iterable locally with [`Dataset::iter`];
//! * [`functions`]: user functions registered by name, so a pipeline that
//!   names them can be serialised and run by any process that links them;
//! * [`pipeline`]: conversion to and from the `PipelineDef` that travels in
//!   `DatasetDef`, validated on the way in.
//!
//! This crate knows nothing of gRPC, dispatchers or workers.

pub mod array_record;
pub mod attrs;
pub mod autocache;
pub mod autoshard;
pub mod builtins;
pub mod columnar;
pub mod dataset;
pub mod example;
pub mod functions;
pub mod fusion;
pub mod io;
mod iterators;
pub mod json;
pub mod kernels;
pub mod ops;
pub mod philox;
pub mod pipeline;
pub mod random;
pub mod snapshot;
pub mod spec;
pub mod spec_coder;
pub mod splits;
pub mod webdataset;

pub use attrs::{Attr, Attrs, FunctionRef, InlineBody};
pub use dataset::{Dataset, DatasetOp, INFINITE_CARDINALITY, IterContext, UNKNOWN_CARDINALITY};
pub use functions::{
    DatasetFnFactory, Inline, MapFactory, MapFn, PredicateFactory, register_dataset_fn_factory,
    register_dataset_function, register_function, register_function_with_spec,
    register_map_factory, register_predicate, register_predicate_factory,
};
pub use iterators::{ElementIterator, StackedRows};
pub use spec::{Shape, Structure, TensorSpec};
