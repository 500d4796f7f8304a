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

pub mod dataset;
pub mod functions;
mod iterators;
pub mod pipeline;

pub use dataset::{Dataset, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY};
pub use functions::{MapFn, register_function};
pub use iterators::ElementIterator;
