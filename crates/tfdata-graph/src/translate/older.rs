//! Dataset ops TensorFlow's Python no longer writes (or writes only
//! through `tf.data.experimental`), which graphs saved by older versions
//! still hold: `SlidingWindowDataset`, `ParallelFilterDataset`,
//! `ListDataset` (`from_list`), `MatchingFilesDataset` and
//! `RebatchDataset` (V1), with their `Experimental*` names.

use std::sync::Arc;

use tfdata_core::{Element, Error, Result};
use tfdata_dataset::functions::ResolvedDatasetFn;
use tfdata_dataset::spec::Structure;
use tfdata_dataset::{
    Attrs, Dataset, DatasetOp, ElementIterator, FunctionRef, Inline, IterContext,
};
use tfdata_proto::tensorflow::NodeDef;

use super::files;
use super::inline::{self, Bound};
use super::node::{Inputs, captured, element_args, function, handle, tensors};
use crate::attrs::NodeAttrs;
use crate::function::{CompiledNode, Compiler};

/// The node compiled, if it is one of this module's.
pub(super) fn compile(
    node: &NodeDef,
    compiler: &mut Compiler<'_>,
    attrs: &NodeAttrs,
    spec: &Option<Structure>,
) -> Result<Option<CompiledNode>> {
    let spec = spec.clone();
    Ok(Some(match node.op.as_str() {
        "SlidingWindowDataset" | "ExperimentalSlidingWindowDataset" => {
            // The experimental op always drops a short last window.
            let drop = attrs.bool_or("drop_remainder", true)?;
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let size = i.int("window_size")?;
                    let shift = i.int("window_shift")?;
                    let stride = i.int("window_stride")?;
                    sliding_window(input, [size, shift, stride], drop, spec.clone())
                },
                node,
            )
        }
        "ParallelFilterDataset" => {
            let f = function(attrs, "predicate", compiler)?;
            let n = captured(attrs)?;
            let args = element_args(attrs, "predicate", n, compiler)?;
            let node_name = node.name.clone();
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let captured = i.take(Some(n))?;
                    let calls = i.int("num_parallel_calls")?;
                    if calls <= 0 && calls != -1 {
                        return Err(Error::InvalidArgument(
                            "num_parallel_calls must be greater than zero.".into(),
                        ));
                    }
                    // A filter keeps its input's order whatever the
                    // parallelism, so `deterministic` changes nothing here.
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
        "ListDataset" => {
            let Some(spec) = spec else {
                return Err(attrs.error("ListDataset declares no output_types"));
            };
            handle(move |i| list_dataset(i, spec.clone()), node)
        }
        "MatchingFilesDataset" | "ExperimentalMatchingFilesDataset" => handle(
            |mut i| {
                let patterns = files::names(&i.tensor("patterns")?)?;
                let names = matching_each(&patterns)?;
                // TensorFlow matches as it iterates, so knows no count.
                Ok(Dataset::from_op(Declared {
                    input: Dataset::from_tensor_slices(vec![names]),
                    spec: None,
                    cardinality: tfdata_dataset::UNKNOWN_CARDINALITY,
                }))
            },
            node,
        ),
        "RebatchDataset" | "ExperimentalRebatchDataset" => handle(
            move |mut i| {
                let input = i.dataset()?;
                let replicas = i.int("num_replicas")?;
                if replicas <= 0 {
                    return Err(Error::InvalidArgument(
                        "num_replicas must be greater than zero.".into(),
                    ));
                }
                Ok(Dataset::from_op(Declared {
                    input: input.flat_map(split_batches(replicas as usize)),
                    spec: spec.clone(),
                    cardinality: tfdata_dataset::UNKNOWN_CARDINALITY,
                }))
            },
            node,
        ),
        _ => return Ok(None),
    }))
}

/// Rows `range` of `t`, which may be empty (past the last row too).
fn rows_of(t: &tfdata_core::Tensor, range: std::ops::Range<usize>) -> Result<tfdata_core::Tensor> {
    if !range.is_empty() {
        return tfdata_dataset::ops::tensor_util::slice_rows(t, range);
    }
    let mut shape = t.shape().to_vec();
    let Some(first) = shape.first_mut() else {
        return Err(Error::InvalidArgument(
            "RebatchDataset: an element's components must be batches (rank >= 1)".into(),
        ));
    };
    *first = 0;
    let data = match t.data() {
        tfdata_core::tensor::TensorData::Strings(_) => {
            tfdata_core::tensor::TensorData::Strings(Vec::new())
        }
        tfdata_core::tensor::TensorData::Buffer(_) => {
            tfdata_core::tensor::TensorData::Buffer(bytes::Bytes::new())
        }
    };
    tfdata_core::Tensor::new(t.dtype(), shape, data)
}

/// `RebatchDataset` (V1): each batch of `B` rows split into `replicas`
/// minibatches of `ceil(B / replicas)` rows, the last ones shorter or
/// empty, so every replica gets one minibatch of every batch.
fn split_batches(replicas: usize) -> FunctionRef {
    let f: tfdata_dataset::functions::DatasetFn = Arc::new(move |batch: Element| {
        let rows = match batch.components.first().map(|t| t.shape()) {
            Some([b, ..]) => *b as usize,
            _ => {
                return Err(Error::InvalidArgument(
                    "RebatchDataset: an element's components must be batches (rank >= 1)".into(),
                ));
            }
        };
        let per = rows.div_ceil(replicas);
        let mut parts = Vec::with_capacity(replicas);
        for r in 0..replicas {
            let range = (r * per).min(rows)..((r + 1) * per).min(rows);
            let part = batch
                .components
                .iter()
                .map(|t| rows_of(t, range.clone()))
                .collect::<Result<Vec<_>>>()?;
            parts.push(Element::new(part));
        }
        let spec = batch
            .components
            .iter()
            .map(|t| {
                tfdata_dataset::spec::TensorSpec::new(
                    t.dtype(),
                    tfdata_dataset::spec::Shape::known(&t.shape()[1..]).prepend(None),
                )
            })
            .collect();
        Ok(Dataset::from_op(ListElements {
            rows: Arc::new(parts),
            spec: Structure::from_components(spec),
        }))
    });
    FunctionRef::inline(
        "rebatch_split",
        Inline {
            dataset: Some(Arc::new(move |_| {
                Ok(ResolvedDatasetFn {
                    f: f.clone(),
                    output: None,
                })
            })),
            ..Default::default()
        },
    )
}

/// `MatchingFilesDataset`'s names: each pattern's matches in order, one
/// pattern after another (a file two patterns match comes twice).
fn matching_each(patterns: &[String]) -> Result<tfdata_core::Tensor> {
    let mut all = Vec::new();
    for p in patterns {
        let mut matches = tfdata_dataset::io::glob(p)?;
        matches.sort();
        all.extend(matches.into_iter().map(bytes::Bytes::from));
        crate::kernels::check_size(
            "MatchingFilesDataset",
            tfdata_core::DType::String,
            all.len() as u64,
        )?;
    }
    if all.is_empty() {
        return Err(Error::not_found(
            "Don't find any matched files:",
            format!("{patterns:?}"),
        ));
    }
    let n = all.len() as i64;
    tfdata_core::Tensor::strings(all, vec![n])
}

/// `SlidingWindowDataset`: windows of `size` elements `stride` apart,
/// starting every `shift` elements, each batched into tensors.
fn sliding_window(
    input: Dataset,
    [size, shift, stride]: [i64; 3],
    drop: bool,
    spec: Option<Structure>,
) -> Result<Dataset> {
    // TensorFlow's checks and messages, on construction.
    for (v, what) in [
        (size, "Window size"),
        (shift, "Window shift"),
        (stride, "window_stride"),
    ] {
        if v <= 0 {
            return Err(Error::InvalidArgument(format!(
                "{what} must be greater than zero."
            )));
        }
    }
    // TensorFlow counts one window per `shift` input elements (dropping a
    // partial last one), whatever the window's size and stride: its
    // cardinality, which the dataset keeps, even where fewer windows come.
    let n = input.cardinality();
    let cardinality = if n < 0 {
        n
    } else if drop {
        n / shift
    } else {
        (n + shift - 1) / shift
    };
    let batch: tfdata_dataset::functions::DatasetFn = Arc::new(move |window: Element| {
        Ok(Dataset::window_from_pairs(window.components)?.batch(size, false))
    });
    let output = spec.clone();
    let f = FunctionRef::inline(
        "sliding_window_batch",
        Inline {
            dataset: Some(Arc::new(move |_| {
                Ok(ResolvedDatasetFn {
                    f: batch.clone(),
                    output: output.clone(),
                })
            })),
            ..Default::default()
        },
    );
    let windows = input.window(size, shift, stride, drop);
    windows.validate()?;
    Ok(Dataset::from_op(Declared {
        input: windows.flat_map(f),
        spec,
        cardinality,
    }))
}

/// `ListDataset`: each run of `output_types.len()` input tensors is one
/// element (a last, shorter run is dropped, as TensorFlow does).
fn list_dataset(mut i: Inputs, spec: Structure) -> Result<Dataset> {
    let per = spec.flatten().len().max(1);
    let all = tensors(i.take(None)?, "ListDataset tensors")?;
    let mut rows = Vec::with_capacity(all.len() / per);
    let mut it = all.into_iter();
    for _ in 0..(it.len() / per) {
        let row: Vec<_> = it.by_ref().take(per).collect();
        for (t, s) in row.iter().zip(spec.flatten()) {
            if t.dtype() != s.dtype || !s.shape.is_compatible_with(t.shape()) {
                return Err(i.err(format!(
                    "a tensor of {} {:?} does not match the declared {} {:?}",
                    t.dtype(),
                    t.shape(),
                    s.dtype,
                    s.shape
                )));
            }
        }
        rows.push(Element::new(row));
    }
    Ok(Dataset::from_op(ListElements {
        rows: Arc::new(rows),
        spec,
    }))
}

/// A fixed list of elements (`ListDataset`).
#[derive(Debug)]
struct ListElements {
    rows: Arc<Vec<Element>>,
    spec: Structure,
}

impl DatasetOp for ListElements {
    fn name(&self) -> &'static str {
        "list"
    }
    fn attrs(&self) -> Attrs {
        Attrs::new().with("elements", self.rows.len() as i64)
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        Ok(Some(self.spec.clone()))
    }
    fn cardinality(&self) -> i64 {
        self.rows.len() as i64
    }
    fn make_iterator(&self, _ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(ListIter {
            rows: self.rows.clone(),
            next: 0,
        }))
    }
}

struct ListIter {
    rows: Arc<Vec<Element>>,
    next: usize,
}

impl ElementIterator for ListIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let row = self.rows.get(self.next).cloned();
        self.next += 1;
        Ok(row)
    }
}

/// A dataset built from the engine's ops, with the structure and
/// cardinality TensorFlow's single op declares.
#[derive(Debug)]
struct Declared {
    input: Dataset,
    spec: Option<Structure>,
    cardinality: i64,
}

impl DatasetOp for Declared {
    fn name(&self) -> &'static str {
        "declared"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new().with("cardinality", self.cardinality)
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        match &self.spec {
            Some(s) => Ok(Some(s.clone())),
            None => self.input.element_spec(),
        }
    }
    fn cardinality(&self) -> i64 {
        self.cardinality
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        self.input.iter_with(ctx)
    }
}
