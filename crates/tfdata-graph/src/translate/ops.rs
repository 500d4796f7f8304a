//! Each TensorFlow dataset node as the engine's op, built from the node's
//! input values when the graph runs.

use std::sync::Arc;

use tfdata_core::{DType, Error, Result};
use tfdata_dataset::Dataset;
use tfdata_proto::tensorflow::NodeDef;

use super::files;
use super::inline::{self, Bound, declared_structure};
use super::node::{
    Inputs, captured, deterministic, element_args, function, handle, placeholder, tensors,
};
use crate::attrs::NodeAttrs;
use crate::function::{CompiledNode, Compiler};
use crate::value::Value;

/// Every dataset (and dataset-side) op the translator builds.
pub const DATASET_OPS: &[&str] = &[
    // Sources.
    "RangeDataset",
    "TensorDataset",
    "TensorSliceDataset",
    "TFRecordDataset",
    "TFRecordDatasetV2",
    "TextLineDataset",
    "FixedLengthRecordDataset",
    "FixedLengthRecordDatasetV2",
    // Functions.
    "MapDataset",
    "ParallelMapDataset",
    "ParallelMapDatasetV2",
    "MapAndBatchDataset",
    "FilterDataset",
    "FlatMapDataset",
    "InterleaveDataset",
    "ParallelInterleaveDatasetV2",
    "ParallelInterleaveDatasetV3",
    "ParallelInterleaveDatasetV4",
    "LegacyParallelInterleaveDatasetV2",
    // Batching.
    "BatchDataset",
    "BatchDatasetV2",
    "ParallelBatchDataset",
    "PaddedBatchDatasetV2",
    "UnbatchDataset",
    // Order and selection.
    "ShuffleDataset",
    "ShuffleDatasetV2",
    "ShuffleDatasetV3",
    "ShuffleAndRepeatDataset",
    "ShuffleAndRepeatDatasetV2",
    "RepeatDataset",
    "TakeDataset",
    "SkipDataset",
    "ShardDataset",
    "PrefetchDataset",
    "CacheDataset",
    "CacheDatasetV2",
    "ZipDataset",
    "ConcatenateDataset",
    "WindowDataset",
    "ScanDataset",
    "ExperimentalScanDataset",
    "GroupByWindowDataset",
    "ExperimentalGroupByWindowDataset",
    "GroupByReducerDataset",
    "ExperimentalGroupByReducerDataset",
    "RandomDataset",
    "ExperimentalRandomDataset",
    "RandomDatasetV2",
    "DirectedInterleaveDataset",
    "ExperimentalDirectedInterleaveDataset",
    "UniqueDataset",
    "ExperimentalUniqueDataset",
    "TakeWhileDataset",
    "ExperimentalTakeWhileDataset",
    "IgnoreErrorsDataset",
    "ExperimentalIgnoreErrorsDataset",
    "RebatchDatasetV2",
    // Wrappers that change no element.
    "OptionsDataset",
    "ModelDataset",
    "FinalizeDataset",
    "MaxIntraOpParallelismDataset",
    "ExperimentalMaxIntraOpParallelismDataset",
    "PrivateThreadPoolDataset",
    "ExperimentalPrivateThreadPoolDataset",
    "AssertCardinalityDataset",
    "AssertNextDataset",
    "AssertPrevDataset",
    "OptimizeDataset",
    "OptimizeDatasetV2",
    // Resources those nodes take, which the engine keeps itself.
    "DummySeedGenerator",
    "AnonymousSeedGenerator",
    "DummyMemoryCache",
    "AnonymousMemoryCache",
    "DummyIterationCounter",
    "AnonymousRandomSeedGenerator",
    // File names.
    "MatchingFiles",
    // tfdata's private op reading an autocache (autocache_load.rs).
    crate::autocache::LOAD_OP,
    // Datasets run inside functions (consume.rs, iterators.rs).
    "ReduceDataset",
    "DatasetToSingleElement",
    "DatasetCardinality",
    "ExperimentalDatasetCardinality",
    "AnonymousIterator",
    "AnonymousIteratorV2",
    "AnonymousIteratorV3",
    "MakeIterator",
    "IteratorGetNext",
    "IteratorGetNextSync",
    "IteratorGetNextAsOptional",
    "DeleteIterator",
    "OptionalFromValue",
    "OptionalNone",
    "OptionalHasValue",
    "OptionalGetValue",
    // String handles, devices and saved positions of those iterators
    // (iterator_handles.rs).
    "Iterator",
    "IteratorV2",
    "OneShotIterator",
    "IteratorToStringHandle",
    "IteratorFromStringHandle",
    "IteratorFromStringHandleV2",
    "IteratorGetDevice",
    "ExperimentalIteratorGetDevice",
    "SerializeIterator",
    "DeserializeIterator",
    // Multi-device iterators (multi_device.rs).
    "AnonymousMultiDeviceIterator",
    "AnonymousMultiDeviceIteratorV3",
    "MultiDeviceIterator",
    "MultiDeviceIteratorInit",
    "MultiDeviceIteratorGetNextFromShard",
    "MultiDeviceIteratorToStringHandle",
    "MultiDeviceIteratorFromStringHandle",
    "DeleteMultiDeviceIterator",
    // Elements compressed and read back inside a function (compression.rs).
    "CompressElement",
    "UncompressElement",
    // A dataset of elements given as tensors (window_op.rs).
    "WindowOp",
    // A lookup table filled from a dataset (table_init.rs).
    "InitializeTableFromDataset",
    // Sinks (`sinks::OPS`).
    "DatasetToTFRecord",
    "ExperimentalDatasetToTFRecord",
    // Wrappers (wrappers.rs).
    "ThreadPoolDataset",
    "ExperimentalThreadPoolDataset",
    "ThreadPoolHandle",
    "ExperimentalThreadPoolHandle",
    "NonSerializableDataset",
    "ExperimentalNonSerializableDataset",
    "SleepDataset",
    "ExperimentalSleepDataset",
    "ExperimentalAssertNextDataset",
    "LatencyStatsDataset",
    "ExperimentalLatencyStatsDataset",
    "BytesProducedStatsDataset",
    "ExperimentalBytesProducedStatsDataset",
    "SetStatsAggregatorDataset",
    "ExperimentalSetStatsAggregatorDataset",
    "StatsAggregatorHandle",
    "StatsAggregatorHandleV2",
    "ExperimentalStatsAggregatorHandle",
    "ChooseFastestDataset",
    "ExperimentalChooseFastestDataset",
    "RewriteDataset",
    // Older ops (older.rs) and older names of the ops above.
    "SlidingWindowDataset",
    "ExperimentalSlidingWindowDataset",
    "ParallelFilterDataset",
    "ListDataset",
    "MatchingFilesDataset",
    "ExperimentalMatchingFilesDataset",
    "ExperimentalMapAndBatchDataset",
    "ExperimentalUnbatchDataset",
    "ParallelInterleaveDataset",
    "ExperimentalParallelInterleaveDataset",
    "PaddedBatchDataset",
    "RebatchDataset",
    "ExperimentalRebatchDataset",
    // CSV files (csv.rs).
    "CSVDataset",
    "CSVDatasetV2",
    "ExperimentalCSVDataset",
    // Parsed Examples (parse_dataset.rs).
    "ParseExampleDataset",
    "ParseExampleDatasetV2",
    "ExperimentalParseExampleDataset",
    // SQLite queries (sql.rs).
    "SqlDataset",
    "ExperimentalSqlDataset",
    // LMDB databases, refused as TensorFlow 2.21 refuses them (lmdb.rs).
    "LMDBDataset",
    "ExperimentalLMDBDataset",
    // Bernoulli sampling (bernoulli.rs).
    "SamplingDataset",
    // SparseTensor elements (sparse_datasets.rs).
    "SparseTensorSliceDataset",
    "DenseToSparseBatchDataset",
    "ExperimentalDenseToSparseBatchDataset",
    // Reading the input by index (global_shuffle.rs).
    "GlobalShuffleDataset",
    // A dataset from a serialized graph (dataset_from_graph.rs).
    "DatasetFromGraph",
    // A dataset wrapped for another device and back (wrap_variant.rs).
    "WrapDatasetVariant",
    "UnwrapDatasetVariant",
    // A function mapped over rows, inside a function (map_defun.rs).
    "MapDefun",
    // Weighted shares of inputs (weighted_flat_map.rs).
    "WeightedFlatMapDataset",
    // Rows of mapped elements by index (index_flat_map.rs).
    "IndexFlatMapDataset",
    // The fastest of equivalent branches (choose_branch.rs).
    "ChooseFastestBranchDataset",
    // Static sharding of the input (auto_shard.rs).
    "AutoShardDataset",
    "ExperimentalAutoShardDataset",
    // An element by index, inside a function (element_at.rs).
    "GetElementAtIndex",
    // Dataset.save's snapshots (save_load.rs).
    "LoadDataset",
    "SaveDataset",
    "SaveDatasetV2",
    "SnapshotDatasetReader",
    "SnapshotChunkDataset",
];

pub(super) fn compile(node: &NodeDef, compiler: &mut Compiler<'_>) -> Result<CompiledNode> {
    let attrs = NodeAttrs::of(node);
    let spec = declared_structure(&attrs)?;
    if let Some(compiled) = super::sinks::compile(node) {
        return Ok(compiled);
    }
    if let Some(compiled) = super::windows::compile(node, compiler, &attrs, &spec)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::seeds::compile(node, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::sampling::compile(node, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::select::compile(node, compiler, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::consume::compile(node, compiler, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::iterators::compile(node, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::iterator_handles::compile(node, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::multi_device::compile(node, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::one_shot::compile(node, &attrs, compiler)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::table_init::compile(node) {
        return Ok(compiled);
    }
    if let Some(compiled) = super::compression::compile(node, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::autocache_load::compile(node, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::window_op::compile(node, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::wrappers::compile(node, &attrs, &spec)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::sql::compile(node, &attrs, &spec)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::lmdb::compile(node) {
        return Ok(compiled);
    }
    if let Some(compiled) = super::bernoulli::compile(node)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::save_load::compile(node, compiler, &attrs, &spec)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::sparse_datasets::compile(node, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::parse_dataset::compile(node, &attrs, &spec)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::csv::compile(node, &attrs, &spec)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::dataset_from_graph::compile(node) {
        return Ok(compiled);
    }
    if let Some(compiled) = super::wrap_variant::compile(node) {
        return Ok(compiled);
    }
    if let Some(compiled) = super::map_defun::compile(node, compiler, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::weighted_flat_map::compile(node, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::index_flat_map::compile(node, compiler, &attrs, &spec)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::choose_branch::compile(node, compiler, &attrs, &spec)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::auto_shard::compile(node, compiler, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::element_at::compile(node, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::global_shuffle::compile(node, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::older::compile(node, compiler, &attrs, &spec)? {
        return Ok(compiled);
    }
    Ok(match node.op.as_str() {
        "RangeDataset" => {
            let dtype = attrs
                .dtypes("output_types")?
                .first()
                .copied()
                .unwrap_or(DType::Int64);
            handle(
                move |mut i| {
                    let (start, stop, step) = (i.int("start")?, i.int("stop")?, i.int("step")?);
                    let ds = Dataset::range_with_step(start, stop, step);
                    if dtype == DType::Int64 {
                        Ok(ds)
                    } else {
                        Ok(files::cast_map(ds, dtype))
                    }
                },
                node,
            )
        }
        "TensorDataset" => handle(
            |mut i| {
                Ok(Dataset::from_tensors(tensors(
                    i.take(None)?,
                    "TensorDataset",
                )?))
            },
            node,
        ),
        "TensorSliceDataset" => {
            // File names (`TFRecordDataset([...])`, `list_files`): FILE
            // sharding shards them.
            let is_files = attrs.bool_or("is_files", false)?;
            handle(
                move |mut i| {
                    let mut components = tensors(i.take(None)?, "TensorSliceDataset")?;
                    if is_files
                        && components.len() == 1
                        && let Some(names) = components.pop()
                    {
                        return Ok(Dataset::from_file_names(names));
                    }
                    Ok(Dataset::from_tensor_slices(components))
                },
                node,
            )
        }
        "TFRecordDataset" | "TFRecordDatasetV2" => handle(
            |mut i| {
                let names = files::names(&i.tensor("filenames")?)?;
                let compression = i.string("compression_type")?;
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                let _buffer = i.int("buffer_size")?;
                // V2's `byte_offsets`: where each file's reading starts.
                let offsets = match i.take(None)?.pop() {
                    Some(v) => v.into_tensor("TFRecordDatasetV2 byte_offsets")?.to_vec::<i64>()?,
                    None => Vec::new(),
                };
                Ok(Dataset::tfrecord_from_offsets(&names, &compression, offsets))
            },
            node,
        ),
        "TextLineDataset" => handle(
            |mut i| {
                let names = files::names(&i.tensor("filenames")?)?;
                let compression = i.string("compression_type")?;
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                Ok(Dataset::text_lines(&names, &compression))
            },
            node,
        ),
        "FixedLengthRecordDataset" | "FixedLengthRecordDatasetV2" => {
            let v2 = node.op.ends_with("V2");
            handle(
                move |mut i| {
                    let names = files::names(&i.tensor("filenames")?)?;
                    let header = i.int("header_bytes")?;
                    let record = i.int("record_bytes")?;
                    let footer = i.int("footer_bytes")?;
                    if i.int("buffer_size")? < 0 {
                        return Err(i.err("`buffer_size` must be >= 0"));
                    }
                    let compression = if v2 {
                        i.string("compression_type")?
                    } else {
                        String::new()
                    };
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    let ds =
                        Dataset::fixed_length_records(&names, header, record, footer, &compression);
                    // The sizes come from the graph: refuse bad ones here, at
                    // translation, with the node named, not at the first read.
                    ds.validate()?;
                    Ok(ds)
                },
                node,
            )
        }
        "MapDataset" | "ParallelMapDataset" | "ParallelMapDatasetV2" => {
            let f = function(&attrs, "f", compiler)?;
            let n = captured(&attrs)?;
            let args = element_args(&attrs, "f", n, compiler)?;
            let node_name = node.name.clone();
            let parallel = node.op != "MapDataset";
            // The op's registered default is false (a TensorFlow 1 map).
            let preserve = attrs.bool_or("preserve_cardinality", false)?;
            let det = if node.op == "ParallelMapDataset" {
                !attrs.bool_or("sloppy", false)?
            } else {
                deterministic(&attrs)?
            };
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let captured = i.take(Some(n))?;
                    let calls = if parallel {
                        Some(i.int("num_parallel_calls")?)
                    } else {
                        None
                    };
                    if let Some(n) = calls
                        && n <= 0
                        && n != -1
                    {
                        return Err(i.err("num_parallel_calls must be greater than zero."));
                    }
                    let f = inline::map(
                        Bound {
                            function: f.clone(),
                            captured,
                            node: node_name.clone(),
                            args: args.clone(),
                        },
                        spec.clone(),
                    );
                    let mapped = input.map_with(f, calls, det);
                    // TensorFlow 1's maps do not keep their input's cardinality.
                    Ok(if preserve { mapped } else { mapped.without_cardinality() })
                },
                node,
            )
        }
        "MapAndBatchDataset" | "ExperimentalMapAndBatchDataset" => {
            let f = function(&attrs, "f", compiler)?;
            let n = captured(&attrs)?;
            let args = element_args(&attrs, "f", n, compiler)?;
            let node_name = node.name.clone();
            // The map's own output is the batch's element without its batch dimension.
            let element = spec.as_ref().map(unbatched).transpose()?;
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let captured = i.take(Some(n))?;
                    let batch_size = i.int("batch_size")?;
                    let calls = i.int("num_parallel_calls")?;
                    let drop = i.bool("drop_remainder")?;
                    let f = inline::map(
                        Bound {
                            function: f.clone(),
                            captured,
                            node: node_name.clone(),
                            args: args.clone(),
                        },
                        element.clone(),
                    );
                    Ok(input.map_with(f, Some(calls), true).batch(batch_size, drop))
                },
                node,
            )
        }
        "FilterDataset" => {
            let f = function(&attrs, "predicate", compiler)?;
            let n = captured(&attrs)?;
            let args = element_args(&attrs, "predicate", n, compiler)?;
            let node_name = node.name.clone();
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let captured = i.take(Some(n))?;
                    Ok(input.filter_with(inline::predicate(Bound {
                        function: f.clone(),
                        captured,
                        node: node_name.clone(),
                        args: args.clone(),
                    })))
                },
                node,
            )
        }
        "FlatMapDataset" => {
            let f = function(&attrs, "f", compiler)?;
            let n = captured(&attrs)?;
            let args = element_args(&attrs, "f", n, compiler)?;
            let node_name = node.name.clone();
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let captured = i.take(Some(n))?;
                    let f = inline::dataset_fn(
                        Bound {
                            function: f.clone(),
                            captured,
                            node: node_name.clone(),
                            args: args.clone(),
                        },
                        spec.clone(),
                    );
                    Ok(input.flat_map(f))
                },
                node,
            )
        }
        "InterleaveDataset"
        | "ParallelInterleaveDatasetV2"
        | "ParallelInterleaveDatasetV3"
        | "ParallelInterleaveDatasetV4"
        | "LegacyParallelInterleaveDatasetV2"
        | "ParallelInterleaveDataset"
        | "ExperimentalParallelInterleaveDataset" => {
            let f = function(&attrs, "f", compiler)?;
            let n = captured(&attrs)?;
            let args = element_args(&attrs, "f", n, compiler)?;
            let node_name = node.name.clone();
            let op = node.op.clone();
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let captured = i.take(Some(n))?;
                    let cycle = i.int("cycle_length")?;
                    if op == "ParallelInterleaveDatasetV3" && cycle <= 0 && cycle != -1 {
                        return Err(i.err(format!(
                            "`cycle_length` must be `tf.data.AUTOTUNE` or greater than 0 but is {cycle}"
                        )));
                    }
                    let block = i.int("block_length")?;
                    let calls = match op.as_str() {
                        "InterleaveDataset" => None,
                        "ParallelInterleaveDatasetV4" => {
                            let _buffer_output_elements = i.int("buffer_output_elements")?;
                            let _prefetch_input_elements = i.int("prefetch_input_elements")?;
                            Some(i.int("num_parallel_calls")?)
                        }
                        "ParallelInterleaveDatasetV3" => Some(i.int("num_parallel_calls")?),
                        // The oldest: `sloppy` (an input) lets outputs
                        // reorder, which the engine's order also satisfies.
                        "ParallelInterleaveDataset" | "ExperimentalParallelInterleaveDataset" => {
                            let _sloppy = i.bool("sloppy")?;
                            Some(cycle)
                        }
                        // The legacy ops run `cycle_length` inputs in parallel.
                        _ => Some(cycle),
                    };
                    let f = inline::dataset_fn(
                        Bound {
                            function: f.clone(),
                            captured,
                            node: node_name.clone(),
                            args: args.clone(),
                        },
                        spec.clone(),
                    );
                    Ok(input.interleave(f, cycle, block, calls))
                },
                node,
            )
        }
        "BatchDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                let size = i.int("batch_size")?;
                if size <= 0 {
                    return Err(i.err("Batch size must be greater than zero."));
                }
                Ok(input.batch(size, false))
            },
            node,
        ),
        "BatchDatasetV2" => handle(
            |mut i| {
                let input = i.dataset()?;
                let size = i.int("batch_size")?;
                Ok(input.batch(size, i.bool("drop_remainder")?))
            },
            node,
        ),
        "ParallelBatchDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                let size = i.int("batch_size")?;
                let _calls = i.int("num_parallel_calls")?;
                Ok(input.batch(size, i.bool("drop_remainder")?))
            },
            node,
        ),
        "PaddedBatchDatasetV2" | "PaddedBatchDataset" => {
            let n = attrs.count("N")?;
            // The first version has no `drop_remainder` and keeps a short last batch.
            let v2 = node.op == "PaddedBatchDatasetV2";
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let size = i.int("batch_size")?;
                    let shapes = i
                        .take(Some(n))?
                        .into_iter()
                        .map(|v| v.into_tensor("padded_shapes")?.to_vec::<i64>())
                        .collect::<Result<Vec<_>>>()?;
                    let values = tensors(i.take(Some(n))?, "padding_values")?;
                    let drop = v2 && i.bool("drop_remainder")?;
                    Ok(input.padded_batch(size, Some(shapes), Some(values), drop))
                },
                node,
            )
        }
        "UnbatchDataset" | "ExperimentalUnbatchDataset" => {
            handle(|mut i| Ok(i.dataset()?.unbatch()), node)
        }
        "RepeatDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                Ok(input.repeat(Some(i.int("count")?)))
            },
            node,
        ),
        "TakeDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                Ok(input.take(i.int("count")?))
            },
            node,
        ),
        "SkipDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                Ok(input.skip(i.int("count")?))
            },
            node,
        ),
        "ShardDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                let n = i.int("num_shards")?;
                Ok(input.shard(n, i.int("index")?))
            },
            node,
        ),
        "PrefetchDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                Ok(input.prefetch(i.int("buffer_size")?))
            },
            node,
        ),
        "CacheDataset" | "CacheDatasetV2" => handle(
            |mut i| {
                let input = i.dataset()?;
                Ok(input.cache(&i.string("filename")?))
            },
            node,
        ),
        "ZipDataset" => handle(
            |mut i| {
                let inputs = i
                    .take(None)?
                    .into_iter()
                    .map(|v| v.into_dataset("ZipDataset input"))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Dataset::zip(inputs))
            },
            node,
        ),
        "ConcatenateDataset" => handle(
            |mut i| {
                let a = i.dataset()?;
                let b = i.dataset()?;
                Ok(a.concatenate(b))
            },
            node,
        ),
        // Options, autotuning, thread pools and assertions about the
        // pipeline's shape: the worker's engine has its own scheduling,
        // and the elements are the same.
        "OptionsDataset"
        | "ModelDataset"
        | "FinalizeDataset"
        | "AssertNextDataset"
        | "AssertPrevDataset"
        // TensorFlow's static rewrites (fusions, no-op elimination,
        // parallelisation): each keeps the elements; the names of the
        // rewrites to apply are ignored, unknown ones too, as TensorFlow does.
        | "OptimizeDataset"
        | "OptimizeDatasetV2" => handle(|mut i| i.dataset(), node),
        "AssertCardinalityDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                let expected = i.int("cardinality")?;
                Ok(input.assert_cardinality(expected))
            },
            node,
        ),
        "DummySeedGenerator" | "DummyMemoryCache" | "DummyIterationCounter" => {
            placeholder(&["handle"])
        }
        // TensorFlow 2.21 registers this op's kernel with
        // AnonymousSeedGenerator's, which reads a `reshuffle` input this op
        // lacks: every run fails, eagerly and in graphs, with this error.
        "AnonymousRandomSeedGenerator" => CompiledNode {
            outputs: vec![("handle".into(), 1), ("deleter".into(), 1)],
            run: Arc::new(|_| {
                Err(Error::InvalidArgument(
                    "Unknown input name: reshuffle".into(),
                ))
            }),
        },
        "AnonymousMemoryCache" => placeholder(&["handle", "deleter"]),
        "MatchingFiles" => CompiledNode {
            outputs: vec![("filenames".into(), 1)],
            run: Arc::new(|values| {
                let mut i = Inputs::new(values, "MatchingFiles", "MatchingFiles");
                let patterns = files::names(&i.tensor("pattern")?)?;
                Ok(vec![Value::Tensor(files::matching_files(&patterns)?)])
            }),
        },
        other => {
            return Err(Error::Internal(format!(
                "dataset op {other} is listed but not translated"
            )));
        }
    })
}

/// A batch's structure without its leading (batch) dimension.
fn unbatched(s: &tfdata_dataset::Structure) -> Result<tfdata_dataset::Structure> {
    s.map_components(&mut |spec: &tfdata_dataset::TensorSpec| {
        Ok(tfdata_dataset::TensorSpec::new(
            spec.dtype,
            spec.shape.drop_first()?,
        ))
    })
}
