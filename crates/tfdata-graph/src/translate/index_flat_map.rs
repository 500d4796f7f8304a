//! `IndexFlatMapDataset` (`index_flat_map`): `map_func` turns each input
//! element into tensors whose rows are output elements, and
//! `index_map_func` maps an output position to (input element, row).
//!
//! Read in order, as TensorFlow's iterator reads it: for output position
//! `p`, `index_map_func(p)` gives `(i, offset)`; the iterator moves to the
//! next input element (one, whatever the jump) when `i` is past the
//! current input position or nothing was read yet, and outputs row
//! `offset` of each mapped tensor (a scalar as it is). The dataset ends
//! with its input. Its cardinality is the `output_cardinality` input, as
//! TensorFlow reports it (whatever the elements are). A
//! row out of range is refused (InvalidArgument) where TensorFlow's kernel
//! aborts the process.

use tfdata_core::{DType, Element, Error, Result, Tensor};
use tfdata_dataset::ops::tensor_util::slice;
use tfdata_dataset::spec::Structure;
use tfdata_dataset::{Attrs, Dataset, DatasetOp, ElementIterator, IterContext};
use tfdata_proto::tensorflow::NodeDef;

use super::inline::Bound;
use super::node::{element_args, function, handle};
use crate::attrs::NodeAttrs;
use crate::function::{CompiledNode, Compiler};

/// The node compiled, if it is one of this module's.
pub(super) fn compile(
    node: &NodeDef,
    compiler: &mut Compiler<'_>,
    attrs: &NodeAttrs,
    spec: &Option<Structure>,
) -> Result<Option<CompiledNode>> {
    if node.op != "IndexFlatMapDataset" {
        return Ok(None);
    }
    let map_func = function(attrs, "map_func", compiler)?;
    let index_func = function(attrs, "index_map_func", compiler)?;
    let n_map = attrs.dtype_codes("Tmap_func_args")?.len();
    let n_index = attrs.dtype_codes("Tindex_map_func_args")?.len();
    let map_args = element_args(attrs, "map_func", n_map, compiler)?;
    let index_args = element_args(attrs, "index_map_func", n_index, compiler)?;
    let node_name = node.name.clone();
    let spec = spec.clone();
    Ok(Some(handle(
        move |mut i| {
            let input = i.dataset()?;
            let map_captured = i.take(Some(n_map))?;
            let index_captured = i.take(Some(n_index))?;
            let cardinality = i.int("output_cardinality")?;
            Ok(Dataset::from_op(IndexFlatMap {
                input,
                cardinality,
                map: Bound {
                    function: map_func.clone(),
                    captured: map_captured,
                    node: node_name.clone(),
                    args: map_args.clone(),
                },
                index_map: Bound {
                    function: index_func.clone(),
                    captured: index_captured,
                    node: node_name.clone(),
                    args: index_args.clone(),
                },
                spec: spec.clone(),
            }))
        },
        node,
    )))
}

struct IndexFlatMap {
    input: Dataset,
    /// What the graph says the cardinality is (TensorFlow reports it as
    /// given; it changes no element).
    cardinality: i64,
    map: Bound,
    index_map: Bound,
    spec: Option<Structure>,
}

impl std::fmt::Debug for IndexFlatMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexFlatMap")
            .field("input", &self.input)
            .field("map_func", &self.map.function.name)
            .field("index_map_func", &self.index_map.function.name)
            .finish()
    }
}

impl DatasetOp for IndexFlatMap {
    fn name(&self) -> &'static str {
        "index_flat_map"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("map_func", self.map.function.name.clone())
            .with("index_map_func", self.index_map.function.name.clone())
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        self.input.element_spec()?;
        Ok(self.spec.clone())
    }
    fn cardinality(&self) -> i64 {
        self.cardinality
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(IndexFlatMapIter {
            input: self.input.iter_with(ctx)?,
            map: self.map.clone(),
            index_map: self.index_map.clone(),
            position: 0,
            input_position: 0,
            current: Vec::new(),
        }))
    }
}

struct IndexFlatMapIter {
    input: Box<dyn ElementIterator>,
    map: Bound,
    index_map: Bound,
    /// Output elements given so far.
    position: i64,
    /// The input index `current` was read for.
    input_position: u64,
    /// The mapped tensors of the current input element (none read yet).
    current: Vec<Tensor>,
}

/// One of `index_map_func`'s results as TensorFlow reads it: an int32 or
/// int64 scalar, as an unsigned index.
fn index_value(t: &Tensor, all: &[Tensor]) -> Result<u64> {
    let v = match (t.dtype(), t.shape().is_empty()) {
        (DType::Int64, true) => t.to_scalar::<i64>()?,
        (DType::Int32, true) => i64::from(t.to_scalar::<i32>()?),
        _ => {
            return Err(Error::InvalidArgument(format!(
                "The `index_map_fn` for `index_flat_map` is expected to return two int32/int64 \
                 values representing the element index and an offset within the element. Got: \
                 {} of shape {:?} (of {} results)",
                t.dtype(),
                t.shape(),
                all.len()
            )));
        }
    };
    // TensorFlow keeps it as a `size_t`: a negative value wraps.
    Ok(v as u64)
}

impl ElementIterator for IndexFlatMapIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let position = Tensor::scalar(self.position);
        let unflattened: Vec<Tensor> = self
            .index_map
            .call_components(vec![position])?
            .into_iter()
            .map(|v| v.into_tensor(&self.index_map.function.name))
            .collect::<Result<_>>()?;
        if unflattened.len() != 2 {
            return Err(Error::InvalidArgument(format!(
                "The `index_map_fn` for `index_flat_map` is expected to return two int values \
                 representing the element index and an offset within the element. Got: {} \
                 values",
                unflattened.len()
            )));
        }
        let input_index = index_value(&unflattened[0], &unflattened)?;
        let offset = index_value(&unflattened[1], &unflattened)?;
        if input_index > self.input_position || self.current.is_empty() {
            let Some(element) = self.input.next_element()? else {
                return Ok(None);
            };
            self.current = self
                .map
                .call(element)?
                .into_iter()
                .map(|v| v.into_tensor(&self.map.function.name))
                .collect::<Result<_>>()?;
            self.input_position = input_index;
        }
        let row = usize::try_from(offset).unwrap_or(usize::MAX);
        let out = self
            .current
            .iter()
            .map(|t| {
                if t.shape().is_empty() {
                    return Ok(t.clone());
                }
                if (row as u64) >= t.shape()[0] as u64 {
                    return Err(Error::InvalidArgument(format!(
                        "index_flat_map: offset {offset} is out of range for a mapped tensor of \
                         {} rows",
                        t.shape()[0]
                    )));
                }
                slice(t, row)
            })
            .collect::<Result<Vec<_>>>()?;
        self.position += 1;
        Ok(Some(Element::new(out)))
    }
}
