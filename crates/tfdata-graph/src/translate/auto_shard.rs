//! `AutoShardDataset` and its older name `ExperimentalAutoShardDataset`
//! (`tf.data.experimental.AutoShardPolicy`, applied by TensorFlow's
//! distribution strategies): worker `index` of `num_workers` keeps its
//! share of the input, as TensorFlow's AutoShard rewrite of the input
//! graph decides it.
//!
//! * `OFF`, or a single worker: the input unchanged.
//! * `DATA`: every `num_workers`-th element from `index` (TensorFlow adds
//!   the shard at the end of the pipeline; a trailing prefetch changes no
//!   element).
//! * `FILE`: the files a reader op reads are sharded. A pipeline without a
//!   reader op (in the graph or any of its functions) has nothing to shard:
//!   NotFound, TensorFlow's "Found an unshardable source dataset".
//! * `AUTO`: `FILE` where a reader is found, else `DATA`.
//! * `HINT`: `shard(SHARD_HINT, SHARD_HINT)` placeholders become
//!   `shard(num_workers, index)`; a pipeline without them is unchanged, one
//!   with them is refused (Unimplemented): the engine's ops cannot be
//!   rebuilt with new arguments here.
//!
//! Where the pipeline reads files, TensorFlow's `FILE` rewrite walks from
//! the reader to the dataset of file names, through the ops between
//! (removing or moving shuffles of the names); that walk is not reproduced
//! here, so `FILE` and `AUTO` over a pipeline with a reader are refused
//! (Unimplemented) rather than sharded differently.

use tfdata_core::{Error, Result};
use tfdata_dataset::{Attr, Dataset};
use tfdata_proto::tensorflow::NodeDef;

use super::node::handle;
use crate::attrs::NodeAttrs;
use crate::function::{CompiledNode, Compiler};
use crate::graph::Library;

/// TensorFlow's `AutoShardPolicy` values.
const OFF: i64 = -1;
const AUTO: i64 = 0;
const FILE: i64 = 1;
const DATA: i64 = 2;
const HINT: i64 = 3;

/// TensorFlow's dataset ops that read files (its AutoShard readers, and
/// the other file sources the engine knows).
const READER_OPS: &[&str] = &[
    "TFRecordDataset",
    "TFRecordDatasetV2",
    "TextLineDataset",
    "FixedLengthRecordDataset",
    "FixedLengthRecordDatasetV2",
    "CSVDataset",
    "CSVDatasetV2",
    "ExperimentalCSVDataset",
    "ArrayRecordDataset",
    "RecordIODataset",
    "SSTableDataset",
    "LMDBDataset",
    "ExperimentalLMDBDataset",
    "MatchingFilesDataset",
    "ExperimentalMatchingFilesDataset",
];

/// The engine's ops that read files or carry file names.
const ENGINE_FILE_OPS: &[&str] = &[
    "tfrecord_dataset",
    "text_line_dataset",
    "fixed_length_record_dataset",
    "parquet_dataset",
    "arrow_dataset",
    "array_record_dataset",
    "webdataset",
    "list_files",
    "listed_files",
    "csv",
];

/// The node compiled, if it is one of this module's.
pub(super) fn compile(
    node: &NodeDef,
    compiler: &Compiler<'_>,
    attrs: &NodeAttrs,
) -> Result<Option<CompiledNode>> {
    if !matches!(
        node.op.as_str(),
        "AutoShardDataset" | "ExperimentalAutoShardDataset"
    ) {
        return Ok(None);
    }
    let policy = attrs.int_or("auto_shard_policy", AUTO)?;
    if !matches!(policy, OFF | AUTO | FILE | DATA | HINT) {
        return Err(attrs.error(format!("unknown auto_shard_policy {policy}")));
    }
    let _num_replicas = attrs.int_or("num_replicas", 0)?;
    // Whether any function of the graph reads files: the dataset of the
    // flat_map or interleave calling it is what FILE sharding shards.
    let library_reads_files = reads_files(compiler.library());
    Ok(Some(handle(
        move |mut i| {
            let input = i.dataset()?;
            let num_workers = i.int("num_workers")?;
            let index = i.int("index")?;
            if num_workers <= 0 {
                return Err(Error::InvalidArgument(
                    "num_workers must be greater than zero.".into(),
                ));
            }
            if index < 0 || index >= num_workers {
                return Err(Error::InvalidArgument(format!(
                    "index must be between 0 and {}",
                    num_workers - 1
                )));
            }
            // One worker keeps everything, whatever the policy (TensorFlow
            // does not rewrite, so even FILE over a pipeline without files
            // is accepted).
            if num_workers == 1 {
                return Ok(input);
            }
            match policy {
                OFF => Ok(input),
                DATA => Ok(input.shard(num_workers, index)),
                // Without placeholders there is nothing to replace.
                HINT if !has_shard_hint(&input, 0) => Ok(input),
                HINT => Err(Error::Unimplemented(
                    "AutoShardDataset: replacing `SHARD_HINT` placeholders (the HINT policy) is \
                     not supported by tfdata workers"
                        .into(),
                )),
                // FILE or AUTO.
                _ if library_reads_files || tree_reads_files(&input, 0) => {
                    Err(Error::Unimplemented(
                        "AutoShardDataset: FILE sharding of a pipeline that reads files is not \
                         supported by tfdata workers; use the DATA policy"
                            .into(),
                    ))
                }
                AUTO => Ok(input.shard(num_workers, index)),
                _ => Err(Error::NotFound {
                    what: "Found an unshardable source dataset:",
                    id: input.op().name().to_string(),
                }),
            }
        },
        node,
    )))
}

/// Whether a function of `library` has a reader node.
fn reads_files(library: &Library) -> bool {
    library.functions().any(|f| {
        f.node_def
            .iter()
            .any(|n| READER_OPS.contains(&n.op.as_str()))
    })
}

/// Whether `ds` or an op under it is a `shard(SHARD_HINT, SHARD_HINT)`.
fn has_shard_hint(ds: &Dataset, depth: usize) -> bool {
    let op = ds.op();
    if depth > crate::MAX_PIPELINE_DEPTH
        || (op.name() == "shard" && op.attrs().get("num_shards") == Some(&Attr::Int(-1)))
    {
        return true;
    }
    op.inputs().iter().any(|i| has_shard_hint(i, depth + 1))
}

/// Whether `ds` or an op under it reads files or carries file names.
fn tree_reads_files(ds: &Dataset, depth: usize) -> bool {
    let op = ds.op();
    if depth > crate::MAX_PIPELINE_DEPTH
        || ENGINE_FILE_OPS.contains(&op.name())
        || op.attrs().get("is_files") == Some(&Attr::Bool(true))
    {
        return true;
    }
    op.inputs().iter().any(|i| tree_reads_files(i, depth + 1))
}
