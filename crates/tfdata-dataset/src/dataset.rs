//! [`Dataset`]: an immutable graph of ops, cheap to clone and share.
//!
//! Every op implements [`DatasetOp`]: its name and attributes (what is
//! serialised), its inputs, its element spec and cardinality (what is known
//! without running it), and how to make an iterator. Ops validate their
//! arguments when their element spec is computed, so [`Dataset::validate`]
//! checks a whole pipeline before it is registered or run.
//!
//! This module knows no op: the builder methods (`Dataset::range`,
//! [`batch`](Dataset::batch), ...) are defined next to the ops they make,
//! in [`crate::ops`], so ops depend on this module and not the other way.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use tfdata_core::{Error, Result};

use crate::attrs::Attrs;
use crate::iterators::ElementIterator;
use crate::spec::Structure;
use crate::splits::SplitProvider;

/// `cardinality()` of an infinite dataset (TensorFlow's `INFINITE`).
pub const INFINITE_CARDINALITY: i64 = -1;
/// `cardinality()` when it cannot be known without running (TensorFlow's `UNKNOWN`).
pub const UNKNOWN_CARDINALITY: i64 = -2;

/// One op of a pipeline.
///
/// `Any`, so an op can recognise its own kind among its inputs (consecutive
/// parallel `map`s fuse; see [`crate::ops::map`]) without this trait naming
/// any op.
pub trait DatasetOp: Any + Send + Sync + fmt::Debug {
    /// TensorFlow's name for the op (`"range"`, `"batch"`, ...).
    fn name(&self) -> &'static str;
    /// Input datasets, in order.
    fn inputs(&self) -> Vec<Dataset> {
        Vec::new()
    }
    /// Everything besides the inputs that defines the op.
    fn attrs(&self) -> Attrs;
    /// The element structure; `None` when a user function's output is not
    /// declared. Also validates the op's arguments.
    fn element_spec(&self) -> Result<Option<Structure>>;
    /// −1 infinite, −2 unknown, else the number of elements.
    fn cardinality(&self) -> i64;
    /// A fresh iterator.
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>>;
    /// For sources that can be split dynamically: a provider of their splits.
    fn split_provider(&self) -> Option<Result<Box<dyn SplitProvider>>> {
        None
    }
}

/// Per-iterator context. In dynamic sharding, sources read their splits
/// from the providers given here instead of enumerating their own data.
#[derive(Clone, Default)]
pub struct IterContext {
    /// Split providers keyed by source op identity (see [`Dataset::sources`]).
    pub split_providers: HashMap<usize, Arc<dyn SplitProvider>>,
    /// Keep every op's output order, even where the pipeline allows
    /// reordering (`map(deterministic=False)`): a snapshot stream writer
    /// needs the same elements in the same order on every rebuild.
    pub deterministic: bool,
    /// The pass over the data this iterator makes (0 for the first): ops
    /// that reseed each iteration (`shuffle` with
    /// `reshuffle_each_iteration`, `random` with
    /// `rerandomize_each_iteration`) take the seeds of their
    /// `epoch + i`-th iterator instead of their `i`-th. A deterministic
    /// read builds a fresh pipeline per lane and epoch
    /// ([`crate::splits::lanes`]), so its epoch `e` sees what the `e`-th
    /// local `for x in ds` would. Not passed into datasets that user
    /// functions make (`flat_map`, `interleave`): TensorFlow builds those
    /// afresh per element, their seed generators starting over each time.
    pub epoch: u64,
}

impl IterContext {
    pub fn new() -> Self {
        Self::default()
    }

    /// The provider for `op`, if it is a source reading dynamic splits.
    pub fn split_provider_for(&self, op: &dyn DatasetOp) -> Option<Arc<dyn SplitProvider>> {
        self.split_providers.get(&op_key(op)).cloned()
    }
}

pub(crate) fn op_key(op: &dyn DatasetOp) -> usize {
    op as *const dyn DatasetOp as *const () as usize
}

/// A dataset pipeline, built like `tf.data.Dataset`:
///
/// ```
/// use tfdata_dataset::Dataset;
/// let ds = Dataset::range(10).take(4).batch(2, false);
/// let batches: Vec<_> = ds.iter().unwrap().collect::<Result<_, _>>().unwrap();
/// assert_eq!(batches.len(), 2);
/// ```
///
/// Builders never fail; arguments are checked by [`validate`](Self::validate),
/// which iterating and serialising call, with TensorFlow's rules and messages
/// naming the op. Each op module of [`crate::ops`] defines the builders of
/// its ops. Two datasets are equal when they serialise to the same pipeline
/// (see [`crate::pipeline`]).
#[derive(Clone)]
pub struct Dataset {
    pub(crate) op: Arc<dyn DatasetOp>,
}

impl fmt::Debug for Dataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.op.fmt(f)
    }
}

impl Dataset {
    pub fn from_op(op: impl DatasetOp + 'static) -> Dataset {
        Dataset { op: Arc::new(op) }
    }

    pub fn op(&self) -> &dyn DatasetOp {
        &*self.op
    }

    // ---- Building ----

    /// `apply(f)`: `f(self)`.
    pub fn apply(self, f: impl FnOnce(Dataset) -> Dataset) -> Dataset {
        f(self)
    }

    // ---- Queries ----

    /// Checks every op's arguments and the pipeline's structure.
    pub fn validate(&self) -> Result<()> {
        self.element_spec().map(|_| ())
    }

    /// The element structure, `None` if a user function's output is undeclared.
    pub fn element_spec(&self) -> Result<Option<Structure>> {
        self.op.element_spec()
    }

    /// The element structure, which `what` needs known.
    pub(crate) fn known_spec(&self, what: &str) -> Result<Structure> {
        self.element_spec()?.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{what} needs to know its input's element spec, but a user function in the input \
                 does not declare its output (register it with register_function_with_spec)"
            ))
        })
    }

    /// The number of elements, as TensorFlow reports it: −1 infinite, −2 unknown.
    pub fn cardinality(&self) -> i64 {
        self.op.cardinality()
    }

    /// A fresh iterator over the elements, in this thread. Fails at once on
    /// invalid arguments or an unregistered function.
    pub fn iter(&self) -> Result<Box<dyn ElementIterator>> {
        self.iter_with(&IterContext::new())
    }

    pub fn iter_with(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        self.validate()?;
        self.op.make_iterator(ctx)
    }

    /// Source ops that can provide splits, in depth-first order: the order
    /// of split-provider indices in dynamic sharding.
    pub fn sources(&self) -> Vec<Dataset> {
        let mut out = Vec::new();
        self.collect_sources(&mut out);
        out
    }

    fn collect_sources(&self, out: &mut Vec<Dataset>) {
        let inputs = self.op.inputs();
        if inputs.is_empty() {
            out.push(self.clone());
        }
        for input in inputs {
            input.collect_sources(out);
        }
    }

    /// Identity of this dataset's op (for [`IterContext::split_providers`]).
    pub fn op_key(&self) -> usize {
        op_key(&*self.op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cardinality_matches_tensorflow() {
        assert_eq!(Dataset::range(10).cardinality(), 10);
        assert_eq!(Dataset::range_with_step(10, 0, -3).cardinality(), 4);
        assert_eq!(Dataset::range_with_step(0, 10, 3).cardinality(), 4);
        assert_eq!(Dataset::range_with_step(5, 0, 1).cardinality(), 0);
        assert_eq!(Dataset::range(10).batch(3, false).cardinality(), 4);
        assert_eq!(Dataset::range(10).batch(3, true).cardinality(), 3);
        assert_eq!(Dataset::range(10).take(3).cardinality(), 3);
        assert_eq!(Dataset::range(2).take(5).cardinality(), 2);
        assert_eq!(Dataset::range(2).take(-1).cardinality(), 2);
        assert_eq!(Dataset::range(10).skip(3).cardinality(), 7);
        assert_eq!(
            Dataset::range(10).repeat(None).cardinality(),
            INFINITE_CARDINALITY
        );
        assert_eq!(Dataset::range(10).repeat(Some(3)).cardinality(), 30);
        assert_eq!(Dataset::range(0).repeat(None).cardinality(), 0);
        assert_eq!(Dataset::range(10).repeat(None).take(4).cardinality(), 4);
        assert_eq!(Dataset::range(10).shard(3, 1).cardinality(), 3);
        assert_eq!(Dataset::range(10).shard(3, 0).cardinality(), 4);
        assert_eq!(
            Dataset::range(10).filter("p").cardinality(),
            UNKNOWN_CARDINALITY
        );
        assert_eq!(
            Dataset::range(0).filter("p").cardinality(),
            UNKNOWN_CARDINALITY
        );
        assert_eq!(
            Dataset::range(1).repeat(None).filter("p").cardinality(),
            UNKNOWN_CARDINALITY
        );
        assert_eq!(
            Dataset::zip(vec![Dataset::range(3), Dataset::range(5)]).cardinality(),
            3
        );
        assert_eq!(
            Dataset::range(3)
                .concatenate(Dataset::range(4))
                .cardinality(),
            7
        );
    }

    #[test]
    fn bad_arguments_are_named() {
        let err = Dataset::range(3).batch(0, false).iter().err().unwrap();
        assert!(err.to_string().contains("batch_size"), "{err}");
        let err = Dataset::range_with_step(0, 3, 0).iter().err().unwrap();
        assert!(err.to_string().contains("step"), "{err}");
        let err = Dataset::range(3).shard(2, 2).iter().err().unwrap();
        assert!(err.to_string().contains("index"), "{err}");
    }

    #[test]
    fn sources_are_listed_depth_first() {
        let ds = Dataset::zip(vec![Dataset::range(3), Dataset::range(5).map("f")]).batch(2, false);
        let sources = ds.sources();
        assert_eq!(sources.len(), 2);
        assert_eq!(sources[1].cardinality(), 5);
    }
}
