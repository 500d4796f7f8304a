//! Each TensorFlow dataset node as the engine's op, built from the node's
//! input values when the graph runs.

use std::sync::Arc;

use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_dataset::Dataset;
use tfdata_proto::tensorflow::{NodeDef, attr_value};

use super::files;
use super::inline::{self, Arg, Bound, declared_structure};
use crate::attrs::NodeAttrs;
use crate::function::{CompiledNode, Compiler, NodeFn};
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
    // Resources those nodes take, which the engine keeps itself.
    "DummySeedGenerator",
    "AnonymousSeedGenerator",
    "DummyMemoryCache",
    "AnonymousMemoryCache",
    // File names.
    "MatchingFiles",
];

/// The values a node receives, read in order with errors naming the node.
pub(super) struct Inputs {
    values: std::vec::IntoIter<Value>,
    node: String,
    op: String,
}

impl Inputs {
    fn new(values: Vec<Value>, node: &str, op: &str) -> Self {
        Inputs {
            values: values.into_iter(),
            node: node.to_string(),
            op: op.to_string(),
        }
    }

    pub(super) fn err(&self, msg: impl std::fmt::Display) -> Error {
        Error::InvalidArgument(format!("{} node {:?}: {msg}", self.op, self.node))
    }

    pub(super) fn next(&mut self, what: &str) -> Result<Value> {
        let v = self.values.next();
        v.ok_or_else(|| self.err(format!("input `{what}` is missing")))
    }

    pub(super) fn dataset(&mut self) -> Result<Dataset> {
        let what = format!("{} input dataset", self.op);
        self.next("input_dataset")?.into_dataset(&what)
    }

    pub(super) fn tensor(&mut self, what: &str) -> Result<Tensor> {
        let v = self.next(what)?;
        v.into_tensor(&format!("{} input `{what}`", self.op))
    }

    /// An integer scalar (int32 or int64), as TensorFlow's kernels accept.
    pub(super) fn int(&mut self, what: &str) -> Result<i64> {
        let t = self.tensor(what)?;
        scalar_int(&t).map_err(|e| self.err(format!("input `{what}`: {e}")))
    }

    pub(super) fn bool(&mut self, what: &str) -> Result<bool> {
        let t = self.tensor(what)?;
        t.to_scalar::<bool>()
            .map_err(|e| self.err(format!("input `{what}`: {e}")))
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let t = self.tensor(what)?;
        let s = t.string_values().map_err(|e| self.err(e))?;
        match s {
            [one] => Ok(String::from_utf8_lossy(one).into_owned()),
            _ => Err(self.err(format!("input `{what}` must be a scalar string"))),
        }
    }

    /// The `n` next values, or all the rest.
    pub(super) fn take(&mut self, n: Option<usize>) -> Result<Vec<Value>> {
        match n {
            None => Ok(self.values.by_ref().collect()),
            Some(n) => {
                let out: Vec<Value> = self.values.by_ref().take(n).collect();
                if out.len() != n {
                    return Err(self.err(format!("expected {n} more inputs, got {}", out.len())));
                }
                Ok(out)
            }
        }
    }
}

fn scalar_int(t: &Tensor) -> Result<i64> {
    match t.dtype() {
        DType::Int64 => t.to_scalar::<i64>(),
        DType::Int32 => t.to_scalar::<i32>().map(i64::from),
        other => Err(Error::InvalidArgument(format!(
            "expected an integer scalar, got {other}"
        ))),
    }
}

/// A node making one dataset.
pub(super) fn handle(
    run: impl Fn(Inputs) -> Result<Dataset> + Send + Sync + 'static,
    node: &NodeDef,
) -> CompiledNode {
    let (name, op) = (node.name.clone(), node.op.clone());
    let run: NodeFn =
        Arc::new(move |values| Ok(vec![Value::Dataset(run(Inputs::new(values, &name, &op))?)]));
    CompiledNode {
        outputs: vec![("handle".into(), 1)],
        run,
    }
}

/// A node whose output the engine does not need (a seed generator or a
/// memory cache: the engine's own ops keep that state): a placeholder
/// value, which the node consuming it ignores.
fn placeholder(outputs: &[&str]) -> CompiledNode {
    let n = outputs.len();
    CompiledNode {
        outputs: outputs.iter().map(|o| (o.to_string(), 1)).collect(),
        run: Arc::new(move |_| Ok(vec![Value::Resource; n])),
    }
}

/// The function attribute `key` of `node`, compiled.
pub(super) fn function(
    attrs: &NodeAttrs,
    key: &str,
    compiler: &mut Compiler<'_>,
) -> Result<Arc<crate::function::Function>> {
    compiler.function(&attrs.func(key)?.name)
}

/// How many captured inputs (`other_arguments`) the node has.
pub(super) fn captured(attrs: &NodeAttrs) -> Result<usize> {
    Ok(attrs.dtype_codes("Targuments")?.len())
}

/// How the elements of the node's input become the arguments of its
/// function `key` (which has `captured` more): each `DT_VARIANT` argument
/// is a dataset, which `window` elements carry encoded
/// ([`Arg::Window`]); empty when the function takes no dataset.
pub(super) fn element_args(
    attrs: &NodeAttrs,
    key: &str,
    captured: usize,
    compiler: &Compiler<'_>,
) -> Result<Arc<[Arg]>> {
    const DT_VARIANT: i32 = 21;
    let name = &attrs.func(key)?.name;
    let Some(sig) = compiler
        .library()
        .get(name)
        .and_then(|d| d.signature.as_ref())
    else {
        return Ok(Arc::from([]));
    };
    let n = sig.input_arg.len().saturating_sub(captured);
    let element = &sig.input_arg[..n];
    let def = compiler.library().get(name);
    // A variant argument is a dataset (a window) when TensorFlow declares
    // it a scalar; a SparseTensor's serialized form has an unknown rank and
    // stays a tensor.
    let is_dataset = |i: usize| {
        let shape = def
            .and_then(|d| d.arg_attr.get(&(i as u32)))
            .and_then(|a| a.attr.get("_output_shapes"))
            .and_then(|v| match &v.value {
                Some(attr_value::Value::List(l)) => l.shape.first().cloned(),
                _ => None,
            });
        shape.is_none_or(|s| !s.unknown_rank && s.dim.is_empty())
    };
    if element
        .iter()
        .enumerate()
        .all(|(i, a)| a.r#type != DT_VARIANT || !is_dataset(i))
    {
        return Ok(Arc::from([]));
    }
    Ok(element
        .iter()
        .enumerate()
        .map(|(i, a)| {
            if a.r#type == DT_VARIANT && is_dataset(i) {
                Arg::Window(1)
            } else {
                Arg::Tensor
            }
        })
        .collect())
}

/// TensorFlow's `deterministic` attribute: only "false" lets outputs reorder.
fn deterministic(attrs: &NodeAttrs) -> Result<bool> {
    Ok(attrs.string_or("deterministic", "default")? != "false")
}

pub(super) fn compile(node: &NodeDef, compiler: &mut Compiler<'_>) -> Result<CompiledNode> {
    let attrs = NodeAttrs::of(node);
    let spec = declared_structure(&attrs)?;
    if let Some(compiled) = super::windows::compile(node, compiler, &attrs, &spec)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::sampling::compile(node, &attrs)? {
        return Ok(compiled);
    }
    if let Some(compiled) = super::select::compile(node, compiler, &attrs)? {
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
                Ok(Dataset::tfrecord(&names, &compression))
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
                    let _buffer = i.int("buffer_size")?;
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
                    let f = inline::map(
                        Bound {
                            function: f.clone(),
                            captured,
                            node: node_name.clone(),
                            args: args.clone(),
                        },
                        spec.clone(),
                    );
                    Ok(input.map_with(f, calls, det))
                },
                node,
            )
        }
        "MapAndBatchDataset" => {
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
        | "LegacyParallelInterleaveDatasetV2" => {
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
                    let block = i.int("block_length")?;
                    let calls = match op.as_str() {
                        "InterleaveDataset" => None,
                        "ParallelInterleaveDatasetV4" => {
                            let _buffer_output_elements = i.int("buffer_output_elements")?;
                            let _prefetch_input_elements = i.int("prefetch_input_elements")?;
                            Some(i.int("num_parallel_calls")?)
                        }
                        "ParallelInterleaveDatasetV3" => Some(i.int("num_parallel_calls")?),
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
                Ok(input.batch(i.int("batch_size")?, false))
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
        "PaddedBatchDatasetV2" => {
            let n = attrs.count("N")?;
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
                    let drop = i.bool("drop_remainder")?;
                    Ok(input.padded_batch(size, Some(shapes), Some(values), drop))
                },
                node,
            )
        }
        "UnbatchDataset" => handle(|mut i| Ok(i.dataset()?.unbatch()), node),
        "ShuffleDataset" | "ShuffleDatasetV3" => {
            let reshuffle = attrs.bool_or("reshuffle_each_iteration", true)?;
            let v3 = node.op == "ShuffleDatasetV3";
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let buffer = i.int("buffer_size")?;
                    let (seed, seed2) = (i.int("seed")?, i.int("seed2")?);
                    if v3 {
                        i.next("seed_generator")?;
                    }
                    Ok(input.shuffle_with_seeds(buffer, seed, seed2, reshuffle))
                },
                node,
            )
        }
        "ShuffleDatasetV2" => handle(
            |mut i| {
                let input = i.dataset()?;
                let buffer = i.int("buffer_size")?;
                Ok(input.shuffle(buffer, None, true))
            },
            node,
        ),
        "ShuffleAndRepeatDataset" | "ShuffleAndRepeatDatasetV2" => {
            let reshuffle = attrs.bool_or("reshuffle_each_iteration", true)?;
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let buffer = i.int("buffer_size")?;
                    let (seed, seed2) = (i.int("seed")?, i.int("seed2")?);
                    let count = i.int("count")?;
                    Ok(input
                        .shuffle_with_seeds(buffer, seed, seed2, reshuffle)
                        .repeat(Some(count)))
                },
                node,
            )
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
        | "MaxIntraOpParallelismDataset"
        | "ExperimentalMaxIntraOpParallelismDataset"
        | "PrivateThreadPoolDataset"
        | "ExperimentalPrivateThreadPoolDataset"
        | "AssertNextDataset"
        | "AssertPrevDataset" => handle(|mut i| i.dataset(), node),
        "AssertCardinalityDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                let expected = i.int("cardinality")?;
                Ok(input.assert_cardinality(expected))
            },
            node,
        ),
        "DummySeedGenerator" | "DummyMemoryCache" => placeholder(&["handle"]),
        "AnonymousSeedGenerator" | "AnonymousMemoryCache" => placeholder(&["handle", "deleter"]),
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

pub(super) fn tensors(values: Vec<Value>, what: &str) -> Result<Vec<Tensor>> {
    values.into_iter().map(|v| v.into_tensor(what)).collect()
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
