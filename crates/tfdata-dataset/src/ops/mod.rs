//! The op library. Each op is a [`crate::DatasetOp`], and its module also
//! defines its [`Dataset`] builder methods (`range` in [`source`], `batch`
//! in [`batch`], ...); [`build`] turns an op name, its inputs and its
//! attributes (from the wire or the JSON text form) back into a dataset,
//! rejecting unknown ops and bad attributes by name. [`resolve`] finds the
//! functions that `map`, `filter`, `flat_map` and `interleave` name.

pub mod batch;
pub mod buffer_pool;
pub mod cache;
pub mod control;
pub mod files;
pub mod group;
pub mod map;
pub mod parallel;
pub mod resolve;
pub mod sample;
pub mod scan;
pub mod select;
pub mod shuffle;
pub mod source;
pub mod structure;
pub mod tensor_util;
pub mod window;

#[cfg(test)]
mod tests;

use tfdata_core::{Error, Result};

use crate::Dataset;
use crate::attrs::Attrs;

/// The op names [`build`] knows.
pub const OP_NAMES: &[&str] = &[
    "range",
    "from_tensors",
    "from_tensor_slices",
    "list_files",
    "tfrecord_dataset",
    "text_line_dataset",
    "fixed_length_record_dataset",
    "load",
    "parquet_dataset",
    "webdataset",
    "array_record_dataset",
    "arrow_dataset",
    "huggingface_dataset",
    "map",
    "filter",
    "flat_map",
    "interleave",
    "batch",
    "padded_batch",
    "unbatch",
    "shuffle",
    "repeat",
    "take",
    "skip",
    "assert_cardinality",
    "shard",
    "prefetch",
    "cache",
    "zip",
    "concatenate",
    "enumerate",
    "window",
    "window_elements",
    "scan",
    "group_by_window",
    "group_by_reducer",
    "random",
    "directed_interleave",
    "unique",
    "take_while",
    "ignore_errors",
    "rebatch",
];

fn one_input(op: &str, inputs: Vec<Dataset>) -> Result<Dataset> {
    let n = inputs.len();
    let mut inputs = inputs.into_iter();
    match (inputs.next(), n) {
        (Some(input), 1) => Ok(input),
        _ => Err(Error::InvalidArgument(format!(
            "{op}: expects one input dataset, got {n}"
        ))),
    }
}

fn no_inputs(op: &str, inputs: &[Dataset]) -> Result<()> {
    if inputs.is_empty() {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "{op}: takes no input datasets, got {}",
            inputs.len()
        )))
    }
}

/// Rebuilds one op. Attributes are checked here (unknown ones rejected);
/// values are checked by the op's element spec.
pub fn build(op: &str, inputs: Vec<Dataset>, attrs: &Attrs) -> Result<Dataset> {
    if let Some(source) = {
        no_inputs_if_source(op, &inputs)?;
        source::from_attrs(op, attrs)?
    } {
        return Ok(source);
    }
    if let Some(source) = files::from_attrs(op, attrs)? {
        no_inputs(op, &inputs)?;
        return Ok(source);
    }
    if let Some(source) = crate::columnar::from_attrs(op, attrs)? {
        no_inputs(op, &inputs)?;
        return Ok(source);
    }
    if let Some(source) = crate::webdataset::from_attrs(op, attrs)? {
        no_inputs(op, &inputs)?;
        return Ok(source);
    }
    if let Some(source) = crate::array_record::from_attrs(op, attrs)? {
        no_inputs(op, &inputs)?;
        return Ok(source);
    }
    if let Some(source) = crate::snapshot::load::from_attrs(op, attrs)? {
        no_inputs(op, &inputs)?;
        return Ok(source);
    }
    let parallel = |attrs: &Attrs| attrs.opt_int(op, "num_parallel_calls");
    Ok(match op {
        "map" => {
            attrs.check_known(
                op,
                &[
                    "function",
                    "num_parallel_calls",
                    "deterministic",
                    "preserve_cardinality",
                ],
            )?;
            let mapped = one_input(op, inputs)?.map_with(
                attrs.function(op, "function")?.clone(),
                parallel(attrs)?,
                attrs.bool_or(op, "deterministic", true)?,
            );
            if attrs.bool_or(op, "preserve_cardinality", true)? {
                mapped
            } else {
                mapped.without_cardinality()
            }
        }
        "filter" => {
            attrs.check_known(op, &["predicate"])?;
            one_input(op, inputs)?.filter_with(attrs.function(op, "predicate")?.clone())
        }
        "flat_map" => {
            attrs.check_known(op, &["function"])?;
            one_input(op, inputs)?.flat_map(attrs.function(op, "function")?.clone())
        }
        "interleave" => {
            attrs.check_known(
                op,
                &[
                    "function",
                    "cycle_length",
                    "block_length",
                    "num_parallel_calls",
                ],
            )?;
            one_input(op, inputs)?.interleave(
                attrs.function(op, "function")?.clone(),
                attrs.int_or(op, "cycle_length", -1)?,
                attrs.int_or(op, "block_length", 1)?,
                parallel(attrs)?,
            )
        }
        "batch" => {
            attrs.check_known(op, &["batch_size", "drop_remainder"])?;
            one_input(op, inputs)?.batch(
                attrs.int(op, "batch_size")?,
                attrs.bool_or(op, "drop_remainder", false)?,
            )
        }
        "padded_batch" => {
            attrs.check_known(
                op,
                &[
                    "batch_size",
                    "padded_shapes",
                    "padding_values",
                    "drop_remainder",
                ],
            )?;
            let padded_shapes = match attrs.get("padded_shapes") {
                None => None,
                Some(crate::attrs::Attr::List(items)) => Some(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, a)| {
                            Attrs::new()
                                .with("s", a.clone())
                                .ints(op, "s")
                                .map_err(|_| {
                                    Error::InvalidArgument(format!(
                                        "{op}: padded_shapes[{i}] must be a list of integers"
                                    ))
                                })
                        })
                        .collect::<Result<Vec<_>>>()?,
                ),
                Some(other) => {
                    return Err(Error::InvalidArgument(format!(
                        "{op}: padded_shapes must be a list of shapes, got {other:?}"
                    )));
                }
            };
            let padding_values = match attrs.get("padding_values") {
                None => None,
                Some(_) => Some(attrs.tensors(op, "padding_values")?),
            };
            one_input(op, inputs)?.padded_batch(
                attrs.int(op, "batch_size")?,
                padded_shapes,
                padding_values,
                attrs.bool_or(op, "drop_remainder", false)?,
            )
        }
        "unbatch" => {
            attrs.check_known(op, &[])?;
            one_input(op, inputs)?.unbatch()
        }
        "shuffle" => {
            attrs.check_known(
                op,
                &[
                    "buffer_size",
                    "seed",
                    "graph_seed",
                    "reshuffle_each_iteration",
                ],
            )?;
            let input = one_input(op, inputs)?;
            let buffer_size = attrs.int(op, "buffer_size")?;
            let reshuffle = attrs.bool_or(op, "reshuffle_each_iteration", true)?;
            match (attrs.opt_int(op, "graph_seed")?, attrs.opt_int(op, "seed")?) {
                (Some(graph_seed), seed) => {
                    input.shuffle_with_seeds(buffer_size, graph_seed, seed.unwrap_or(0), reshuffle)
                }
                (None, seed) => input.shuffle(buffer_size, seed.map(|s| s as u64), reshuffle),
            }
        }
        "repeat" => {
            attrs.check_known(op, &["count"])?;
            one_input(op, inputs)?.repeat(Some(attrs.int_or(op, "count", -1)?))
        }
        "take" => {
            attrs.check_known(op, &["count"])?;
            one_input(op, inputs)?.take(attrs.int(op, "count")?)
        }
        "skip" => {
            attrs.check_known(op, &["count"])?;
            one_input(op, inputs)?.skip(attrs.int(op, "count")?)
        }
        "assert_cardinality" => {
            attrs.check_known(op, &["expected_cardinality"])?;
            one_input(op, inputs)?.assert_cardinality(attrs.int(op, "expected_cardinality")?)
        }
        "shard" => {
            attrs.check_known(op, &["num_shards", "index"])?;
            one_input(op, inputs)?.shard(attrs.int(op, "num_shards")?, attrs.int(op, "index")?)
        }
        "prefetch" => {
            attrs.check_known(op, &["buffer_size"])?;
            one_input(op, inputs)?.prefetch(attrs.int_or(op, "buffer_size", -1)?)
        }
        "cache" => {
            attrs.check_known(op, &["filename"])?;
            one_input(op, inputs)?.cache(attrs.str_or(op, "filename", "")?)
        }
        "zip" => {
            attrs.check_known(op, &[])?;
            Dataset::zip(inputs)
        }
        "concatenate" => {
            attrs.check_known(op, &[])?;
            let n = inputs.len();
            let mut it = inputs.into_iter();
            match (it.next(), it.next(), n) {
                (Some(a), Some(b), 2) => a.concatenate(b),
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "{op}: expects two input datasets, got {n}"
                    )));
                }
            }
        }
        "enumerate" => {
            attrs.check_known(op, &["start"])?;
            one_input(op, inputs)?.enumerate(attrs.int_or(op, "start", 0)?)
        }
        "window" => {
            attrs.check_known(op, &["size", "shift", "stride", "drop_remainder"])?;
            let size = attrs.int(op, "size")?;
            one_input(op, inputs)?.window(
                size,
                attrs.int_or(op, "shift", size)?,
                attrs.int_or(op, "stride", 1)?,
                attrs.bool_or(op, "drop_remainder", false)?,
            )
        }
        "scan" => {
            attrs.check_known(op, &["initial_state", "function", "preserve_cardinality"])?;
            one_input(op, inputs)?.scan(
                attrs.tensors(op, "initial_state")?,
                attrs.function(op, "function")?.clone(),
                attrs.bool_or(op, "preserve_cardinality", true)?,
            )
        }
        "group_by_window" => {
            attrs.check_known(op, &["key_func", "reduce_func", "window_size_func"])?;
            one_input(op, inputs)?.group_by_window(
                attrs.function(op, "key_func")?.clone(),
                attrs.function(op, "reduce_func")?.clone(),
                attrs.function(op, "window_size_func")?.clone(),
            )
        }
        "group_by_reducer" => {
            attrs.check_known(
                op,
                &["key_func", "init_func", "reduce_func", "finalize_func"],
            )?;
            one_input(op, inputs)?.group_by_reducer(
                attrs.function(op, "key_func")?.clone(),
                attrs.function(op, "init_func")?.clone(),
                attrs.function(op, "reduce_func")?.clone(),
                attrs.function(op, "finalize_func")?.clone(),
            )
        }
        "random" => {
            attrs.check_known(op, &["seed", "seed2", "rerandomize_each_iteration"])?;
            no_inputs(op, &inputs)?;
            Dataset::random(
                attrs.int_or(op, "seed", 0)?,
                attrs.int_or(op, "seed2", 0)?,
                attrs.bool_or(op, "rerandomize_each_iteration", false)?,
            )
        }
        "directed_interleave" => {
            attrs.check_known(op, &["stop_on_empty_dataset"])?;
            let mut inputs = inputs.into_iter();
            let Some(selector) = inputs.next() else {
                return Err(Error::InvalidArgument(format!(
                    "{op}: expects a selector dataset and data inputs"
                )));
            };
            Dataset::directed_interleave(
                selector,
                inputs.collect(),
                attrs.bool_or(op, "stop_on_empty_dataset", false)?,
            )
        }
        "unique" => {
            attrs.check_known(op, &[])?;
            one_input(op, inputs)?.unique()
        }
        "take_while" => {
            attrs.check_known(op, &["predicate"])?;
            one_input(op, inputs)?.take_while(attrs.function(op, "predicate")?.clone())
        }
        "ignore_errors" => {
            attrs.check_known(op, &[])?;
            one_input(op, inputs)?.ignore_errors()
        }
        "rebatch" => {
            attrs.check_known(op, &["batch_sizes", "drop_remainder"])?;
            one_input(op, inputs)?.rebatch(
                attrs.ints(op, "batch_sizes")?,
                attrs.bool_or(op, "drop_remainder", false)?,
            )
        }
        "window_elements" => {
            attrs.check_known(op, &["values", "shapes"])?;
            no_inputs(op, &inputs)?;
            Dataset::window_elements(attrs.tensors(op, "values")?, attrs.tensors(op, "shapes")?)?
        }
        other => {
            return Err(Error::InvalidArgument(format!(
                "unknown dataset op {other:?}; this build knows: {}",
                OP_NAMES.join(", ")
            )));
        }
    })
}

fn no_inputs_if_source(op: &str, inputs: &[Dataset]) -> Result<()> {
    match op {
        "range" | "from_tensors" | "from_tensor_slices" => no_inputs(op, inputs),
        _ => Ok(()),
    }
}
