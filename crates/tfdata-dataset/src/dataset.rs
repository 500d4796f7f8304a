//! [`Dataset`]: an immutable graph of ops, cheap to clone and share.
//!
//! Every op implements [`DatasetOp`]: its name and attributes (what is
//! serialised), its inputs, its element spec and cardinality (what is known
//! without running it), and how to make an iterator. Ops validate their
//! arguments when their element spec is computed, so [`Dataset::validate`]
//! checks a whole pipeline before it is registered or run.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use tfdata_core::{Error, Result, Tensor};

use crate::attrs::{Attrs, FunctionRef};
use crate::iterators::ElementIterator;
use crate::ops;
use crate::spec::Structure;
use crate::splits::SplitProvider;

/// `cardinality()` of an infinite dataset (TensorFlow's `INFINITE`).
pub const INFINITE_CARDINALITY: i64 = -1;
/// `cardinality()` when it cannot be known without running (TensorFlow's `UNKNOWN`).
pub const UNKNOWN_CARDINALITY: i64 = -2;

/// One op of a pipeline.
pub trait DatasetOp: Send + Sync + fmt::Debug {
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
    /// A parallel `map`, which a following parallel `map` may fuse with.
    fn as_parallel_map(&self) -> Option<&ops::map::Map> {
        None
    }
}

/// Per-iterator context. In dynamic sharding, sources read their splits
/// from the providers given here instead of enumerating their own data.
#[derive(Clone, Default)]
pub struct IterContext {
    /// Split providers keyed by source op identity (see [`Dataset::sources`]).
    pub split_providers: HashMap<usize, Arc<dyn SplitProvider>>,
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
/// naming the op.
#[derive(Clone)]
pub struct Dataset {
    pub(crate) op: Arc<dyn DatasetOp>,
}

impl fmt::Debug for Dataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.op.fmt(f)
    }
}

/// Two datasets are equal when they serialise to the same pipeline.
impl PartialEq for Dataset {
    fn eq(&self, other: &Self) -> bool {
        crate::pipeline::op_to_wire(self) == crate::pipeline::op_to_wire(other)
    }
}

impl Dataset {
    pub fn from_op(op: impl DatasetOp + 'static) -> Dataset {
        Dataset { op: Arc::new(op) }
    }

    pub fn op(&self) -> &dyn DatasetOp {
        &*self.op
    }

    // ---- Sources ----

    /// `tf.data.Dataset.range(stop)`: 0, 1, …, stop − 1 as scalar int64.
    pub fn range(stop: i64) -> Dataset {
        Dataset::range_with_step(0, stop, 1)
    }

    /// `tf.data.Dataset.range(start, stop, step)`.
    pub fn range_with_step(start: i64, stop: i64, step: i64) -> Dataset {
        Dataset::from_op(ops::source::Range { start, stop, step })
    }

    /// `from_tensors(components)`: one element.
    pub fn from_tensors(components: Vec<Tensor>) -> Dataset {
        Dataset::from_op(ops::source::FromTensors {
            components,
            names: None,
        })
    }

    /// `from_tensors({name: tensor, ...})`: one dictionary element.
    pub fn from_named_tensors(components: Vec<(String, Tensor)>) -> Dataset {
        let (names, components) = sorted_named(components);
        Dataset::from_op(ops::source::FromTensors {
            components,
            names: Some(names),
        })
    }

    /// `from_tensor_slices(components)`: one element per slice of the
    /// components' first dimension.
    pub fn from_tensor_slices(components: Vec<Tensor>) -> Dataset {
        Dataset::from_op(ops::source::FromTensorSlices {
            components,
            names: None,
        })
    }

    /// `from_tensor_slices({name: tensor, ...})`: dictionary elements.
    pub fn from_named_tensor_slices(components: Vec<(String, Tensor)>) -> Dataset {
        let (names, components) = sorted_named(components);
        Dataset::from_op(ops::source::FromTensorSlices {
            components,
            names: Some(names),
        })
    }

    /// `list_files(file_pattern, shuffle, seed)`: the matching file names
    /// (sorted, then shuffled unless `shuffle` is false, as TensorFlow).
    pub fn list_files(patterns: &[&str], shuffle: bool, seed: Option<u64>) -> Dataset {
        Dataset::from_op(ops::files::ListFiles {
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
            shuffle,
            seed,
        })
    }

    /// `TFRecordDataset(filenames, compression_type)` with `""`, `"GZIP"` or `"ZLIB"`.
    pub fn tfrecord(filenames: &[&str], compression_type: &str) -> Dataset {
        Dataset::from_op(ops::files::FileRecords {
            format: ops::files::RecordFormat::TfRecord,
            filenames: filenames.iter().map(|p| p.to_string()).collect(),
            compression: compression_type.to_string(),
        })
    }

    /// `TextLineDataset(filenames, compression_type)`.
    pub fn text_lines(filenames: &[&str], compression_type: &str) -> Dataset {
        Dataset::from_op(ops::files::FileRecords {
            format: ops::files::RecordFormat::TextLine,
            filenames: filenames.iter().map(|p| p.to_string()).collect(),
            compression: compression_type.to_string(),
        })
    }

    // ---- Transformations ----

    /// `map(f)` with a function registered (or built in) under `function`.
    pub fn map(self, function: &str) -> Dataset {
        self.map_with(FunctionRef::named(function), None, true)
    }

    /// `map(f, num_parallel_calls, deterministic)`; `f` may be a built-in
    /// with arguments. `num_parallel_calls = None` runs sequentially; `Some(-1)`
    /// is AUTOTUNE (all cores).
    pub fn map_with(
        self,
        function: FunctionRef,
        num_parallel_calls: Option<i64>,
        deterministic: bool,
    ) -> Dataset {
        Dataset::from_op(ops::map::Map {
            input: self,
            function,
            num_parallel_calls,
            deterministic,
        })
    }

    /// `filter(predicate)` with a registered predicate.
    pub fn filter(self, predicate: &str) -> Dataset {
        self.filter_with(FunctionRef::named(predicate))
    }

    pub fn filter_with(self, predicate: FunctionRef) -> Dataset {
        Dataset::from_op(ops::map::Filter {
            input: self,
            predicate,
        })
    }

    /// `flat_map(f)`: `f` maps each element to a dataset, whose elements are
    /// concatenated.
    pub fn flat_map(self, function: FunctionRef) -> Dataset {
        Dataset::from_op(ops::map::FlatMap {
            input: self,
            function,
        })
    }

    /// `interleave(f, cycle_length, block_length, num_parallel_calls)`.
    pub fn interleave(
        self,
        function: FunctionRef,
        cycle_length: i64,
        block_length: i64,
        num_parallel_calls: Option<i64>,
    ) -> Dataset {
        Dataset::from_op(ops::map::Interleave {
            input: self,
            function,
            cycle_length,
            block_length,
            num_parallel_calls,
        })
    }

    /// `batch(batch_size, drop_remainder)`: stacks consecutive elements
    /// component-wise into tensors with a new leading dimension.
    pub fn batch(self, batch_size: i64, drop_remainder: bool) -> Dataset {
        Dataset::from_op(ops::batch::Batch {
            input: self,
            batch_size,
            drop_remainder,
        })
    }

    /// `padded_batch(batch_size, padded_shapes, padding_values, drop_remainder)`.
    /// `padded_shapes[i]` is component i's shape, −1 meaning "longest in the
    /// batch"; `None` pads every dimension to the longest. Padding values
    /// default to 0 / "".
    pub fn padded_batch(
        self,
        batch_size: i64,
        padded_shapes: Option<Vec<Vec<i64>>>,
        padding_values: Option<Vec<Tensor>>,
        drop_remainder: bool,
    ) -> Dataset {
        Dataset::from_op(ops::batch::PaddedBatch {
            input: self,
            batch_size,
            padded_shapes,
            padding_values,
            drop_remainder,
        })
    }

    /// `unbatch()`: splits each element along its first dimension.
    pub fn unbatch(self) -> Dataset {
        Dataset::from_op(ops::batch::Unbatch { input: self })
    }

    /// `shuffle(buffer_size, seed, reshuffle_each_iteration)`.
    pub fn shuffle(
        self,
        buffer_size: i64,
        seed: Option<u64>,
        reshuffle_each_iteration: bool,
    ) -> Dataset {
        Dataset::from_op(ops::control::Shuffle::new(
            self,
            buffer_size,
            seed,
            reshuffle_each_iteration,
        ))
    }

    /// `repeat(count)`; `None` (or −1) repeats forever.
    pub fn repeat(self, count: Option<i64>) -> Dataset {
        Dataset::from_op(ops::control::Repeat {
            input: self,
            count: count.unwrap_or(-1),
        })
    }

    /// `take(count)`: the first `count` elements; −1 takes all.
    pub fn take(self, count: i64) -> Dataset {
        Dataset::from_op(ops::control::Take { input: self, count })
    }

    /// `skip(count)`: all but the first `count` elements; −1 skips all.
    pub fn skip(self, count: i64) -> Dataset {
        Dataset::from_op(ops::control::Skip { input: self, count })
    }

    /// `shard(num_shards, index)`: every `num_shards`-th element from `index`.
    pub fn shard(self, num_shards: i64, index: i64) -> Dataset {
        Dataset::from_op(ops::control::Shard {
            input: self,
            num_shards,
            index,
        })
    }

    /// `prefetch(buffer_size)`: runs the input ahead on its own thread; −1 is AUTOTUNE.
    pub fn prefetch(self, buffer_size: i64) -> Dataset {
        Dataset::from_op(ops::control::Prefetch {
            input: self,
            buffer_size,
        })
    }

    /// `zip((self, others...))`: tuples of corresponding elements.
    pub fn zip(datasets: Vec<Dataset>) -> Dataset {
        Dataset::from_op(ops::structure::Zip { inputs: datasets })
    }

    /// `concatenate(other)`.
    pub fn concatenate(self, other: Dataset) -> Dataset {
        Dataset::from_op(ops::structure::Concatenate {
            first: self,
            second: other,
        })
    }

    /// `enumerate(start)`: `(index, element)` tuples.
    pub fn enumerate(self, start: i64) -> Dataset {
        Dataset::from_op(ops::structure::Enumerate { input: self, start })
    }

    /// `cache(filename)`: the first full pass is kept (in memory when
    /// `filename` is empty, else in that file) and later passes read it.
    pub fn cache(self, filename: &str) -> Dataset {
        Dataset::from_op(ops::control::Cache::new(self, filename))
    }

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

/// Sorts named components by name (TensorFlow's dictionary flattening order).
pub(crate) fn sorted_named(mut named: Vec<(String, Tensor)>) -> (Vec<String>, Vec<Tensor>) {
    named.sort_by(|a, b| a.0.cmp(&b.0));
    named.into_iter().unzip()
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
