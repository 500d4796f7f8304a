//! `GetElementAtIndex` (`tf.data.experimental.at(dataset, index)`): the
//! dataset's element `index`, read inside a function.
//!
//! TensorFlow asks each op for the element by index (`Get`): an op that
//! cannot answers Unimplemented ("Random access is not implemented for
//! dataset ..."), one of infinite or unknown cardinality FailedPrecondition,
//! an index outside `[0, cardinality)` OutOfRange. The same ops as for a
//! global shuffle answer (plus `batch` keeping its remainder, whose last
//! element is the short batch), and each of their answers is the element
//! at that place in a pass over the dataset, which is how the engine reads
//! it (a `range` is computed directly). A global shuffle is read
//! in order only, as in TensorFlow.

use std::sync::Arc;

use tfdata_core::{Error, Result, Tensor};
use tfdata_dataset::{Attr, Dataset, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY};
use tfdata_proto::tensorflow::NodeDef;

use super::consume::Declared;
use super::node::Inputs;
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;
use crate::value::Value;

/// Elements one `GetElementAtIndex` may read to reach its index: the
/// engine reads in order, so a far index in a huge dataset is refused
/// rather than read for hours.
const MAX_SKIPPED: i64 = 1 << 24;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(node: &NodeDef, attrs: &NodeAttrs) -> Result<Option<CompiledNode>> {
    if node.op != "GetElementAtIndex" {
        return Ok(None);
    }
    let declared = Declared::of(attrs)?;
    let (name, op) = (node.name.clone(), node.op.clone());
    Ok(Some(CompiledNode {
        outputs: vec![("components".into(), declared.types.len())],
        run: Arc::new(move |values| {
            let mut i = Inputs::new(values, &name, &op);
            let dataset = i.dataset()?;
            let index = i.int("index")?;
            let element = element_at(&dataset, index)?;
            declared.check(&element)?;
            Ok(element.into_iter().map(Value::Tensor).collect())
        }),
    }))
}

/// TensorFlow's debug name for the engine's op, as its messages print it.
fn debug_name(ds: &Dataset) -> String {
    let op = ds.op();
    let attrs = op.attrs();
    let int = |k: &str| match attrs.get(k) {
        Some(Attr::Int(v)) => *v,
        _ => 0,
    };
    match op.name() {
        "range" => format!(
            "RangeDatasetOp({}, {}, {})::Dataset",
            int("start"),
            int("stop"),
            int("step")
        ),
        // TensorFlow optimizes the dataset before asking it, and its default
        // `map_parallelization` makes a (stateless) map a parallel one.
        "map" => "ParallelMapDatasetV2Op::Dataset".into(),
        "global_shuffle" => "GlobalShuffleDatasetOp::Dataset".into(),
        "repeat" => "RepeatDatasetOp::Dataset".into(),
        "filter" => "FilterDatasetOp::Dataset".into(),
        "flat_map" => "FlatMapDatasetOp::Dataset".into(),
        "interleave" => "InterleaveDatasetOp::Dataset".into(),
        "take" => "TakeDatasetOp::Dataset".into(),
        "skip" => "SkipDatasetOp::Dataset".into(),
        "batch" => "BatchDatasetOp::Dataset".into(),
        other => other.to_string(),
    }
}

/// Whether the engine's op `name` answers TensorFlow's `Get`.
fn reads_by_index(name: &str) -> bool {
    matches!(
        name,
        "range"
            | "from_tensors"
            | "from_tensor_slices"
            | "listed_files"
            | "map"
            | "batch"
            | "prefetch"
            | "cache"
            | "take"
            | "skip"
            | "shard"
            | "concatenate"
            | "zip"
            | "repeat"
    )
}

/// TensorFlow's checks of one op asked for an element.
fn check(ds: &Dataset, index: Option<i64>, depth: usize) -> Result<()> {
    if depth > crate::MAX_PIPELINE_DEPTH {
        return Err(Error::InvalidArgument(
            "GetElementAtIndex: the pipeline nests too deep".into(),
        ));
    }
    if !reads_by_index(ds.op().name()) {
        return Err(Error::Unimplemented(format!(
            "Random access is not implemented for dataset {}",
            debug_name(ds)
        )));
    }
    let cardinality = ds.cardinality();
    if cardinality == INFINITE_CARDINALITY || cardinality == UNKNOWN_CARDINALITY {
        return Err(Error::FailedPrecondition(format!(
            "Dataset of type {} has {} cardinality, which does not support random access.",
            debug_name(ds),
            if cardinality == INFINITE_CARDINALITY {
                "infinite"
            } else {
                "unknown"
            }
        )));
    }
    if let Some(index) = index
        && (index < 0 || index >= cardinality)
    {
        return Err(crate::queue::out_of_range(format!(
            "Index out of range [0, {cardinality}):{index}"
        )));
    }
    // The inputs are asked for indices of their own: their kinds and
    // cardinalities are checked, not the index.
    for input in ds.op().inputs() {
        check(&input, None, depth + 1)?;
    }
    Ok(())
}

/// Element `index` of `ds`, as TensorFlow's `Get` answers it.
pub(crate) fn element_at(ds: &Dataset, index: i64) -> Result<Vec<Tensor>> {
    check(ds, Some(index), 0)?;
    let op = ds.op();
    if op.name() == "range" {
        let attrs = op.attrs();
        if let (Some(Attr::Int(start)), Some(Attr::Int(step))) =
            (attrs.get("start"), attrs.get("step"))
        {
            // In range: `index < cardinality`, so the value is below `stop`.
            return Ok(vec![Tensor::scalar(
                start.wrapping_add(index.wrapping_mul(*step)),
            )]);
        }
    }
    if index > MAX_SKIPPED {
        return Err(Error::InvalidArgument(format!(
            "GetElementAtIndex: the engine reads a dataset in order and reads at most \
             {MAX_SKIPPED} elements to reach an index; {index} is further"
        )));
    }
    let mut it = ds.iter()?;
    // Bounded: `index` is at most MAX_SKIPPED.
    for _ in 0..index {
        if it.next_element()?.is_none() {
            break;
        }
    }
    match it.next_element()? {
        Some(e) => Ok(e.components),
        None => Err(Error::Internal(format!(
            "GetElementAtIndex: the dataset ended before its cardinality ({})",
            ds.cardinality()
        ))),
    }
}
