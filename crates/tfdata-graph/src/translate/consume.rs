//! Nodes that run a dataset to the end inside a function and give tensors
//! back: `ReduceDataset` (`ds.reduce`, `window.reduce` in a map, and what
//! autograph makes of `for x in ds:` in a `tf.function`),
//! `DatasetToSingleElement` (`ds.get_single_element()`) and
//! `DatasetCardinality` (`ds.cardinality()`).

use std::sync::Arc;

use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_dataset::Dataset;
use tfdata_dataset::spec::Shape;
use tfdata_proto::tensorflow::NodeDef;

use super::inline::Bound;
use super::inline::shape;
use super::node::{Inputs, captured, element_args, function, tensors};
use crate::attrs::NodeAttrs;
use crate::function::{CompiledNode, Compiler};
use crate::value::Value;

/// Elements one node may read from its dataset: TensorFlow reads an
/// infinite dataset forever; ours gives up with an error.
pub(crate) const MAX_ELEMENTS: u64 = crate::MAX_WHILE_ITERATIONS;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(
    node: &NodeDef,
    compiler: &mut Compiler<'_>,
    attrs: &NodeAttrs,
) -> Result<Option<CompiledNode>> {
    let name = node.name.clone();
    let op = node.op.clone();
    Ok(Some(match node.op.as_str() {
        "ReduceDataset" => {
            let f = function(attrs, "f", compiler)?;
            let n_captured = captured(attrs)?;
            let n_state = attrs.dtype_codes("Tstate")?.len();
            // The state's arguments are tensors; an element's may be
            // datasets (a reduce over `window`'s datasets).
            let args = element_args(attrs, "f", n_captured, compiler)?;
            let declared = Declared::of(attrs)?;
            let outputs = vec![("components".to_string(), declared.types.len())];
            CompiledNode {
                outputs,
                run: Arc::new(move |values| {
                    let mut i = Inputs::new(values, &name, &op);
                    let input = i.dataset()?;
                    let mut state = tensors(i.take(Some(n_state))?, "initial_state")?;
                    let bound = Bound {
                        function: f.clone(),
                        captured: i.take(Some(n_captured))?,
                        node: name.clone(),
                        args: args.clone(),
                    };
                    if input.cardinality() == tfdata_dataset::INFINITE_CARDINALITY {
                        return Err(infinite(&op));
                    }
                    let mut it = input.iter()?;
                    let mut read = 0u64;
                    while let Some(element) = it.next_element()? {
                        read += 1;
                        if read > MAX_ELEMENTS {
                            return Err(too_many(&op));
                        }
                        let mut components = std::mem::take(&mut state);
                        components.extend(element.components);
                        let out = tensors(bound.call_components(components)?, &f.name)?;
                        if out.len() != n_state {
                            return Err(Error::InvalidArgument(format!(
                                "The number of components of the initial state and the reduce \
                                 function output does not match. (initial_state={n_state}, \
                                 output={}).",
                                out.len()
                            )));
                        }
                        state = out;
                    }
                    declared.check(&state)?;
                    Ok(state.into_iter().map(Value::Tensor).collect())
                }),
            }
        }
        "DatasetToSingleElement" => {
            let declared = Declared::of(attrs)?;
            let outputs = vec![("components".to_string(), declared.types.len())];
            CompiledNode {
                outputs,
                run: Arc::new(move |values| {
                    let mut i = Inputs::new(values, &name, &op);
                    let input = i.dataset()?;
                    let mut it = input.iter()?;
                    let Some(element) = it.next_element()? else {
                        return Err(Error::InvalidArgument("Dataset was empty.".into()));
                    };
                    if it.next_element()?.is_some() {
                        return Err(Error::InvalidArgument(
                            "Dataset had more than one element.".into(),
                        ));
                    }
                    declared.check(&element.components)?;
                    Ok(element.components.into_iter().map(Value::Tensor).collect())
                }),
            }
        }
        "DatasetCardinality" | "ExperimentalDatasetCardinality" => CompiledNode {
            outputs: vec![("cardinality".to_string(), 1)],
            run: Arc::new(move |values| {
                let mut i = Inputs::new(values, &name, &op);
                let input: Dataset = i.dataset()?;
                Ok(vec![Value::Tensor(Tensor::scalar(input.cardinality()))])
            }),
        },
        _ => return Ok(None),
    }))
}

fn infinite(op: &str) -> Error {
    Error::InvalidArgument(format!(
        "{op}: the input dataset is infinite (TensorFlow would run forever)"
    ))
}

fn too_many(op: &str) -> Error {
    Error::InvalidArgument(format!(
        "{op}: the dataset has more than {MAX_ELEMENTS} elements (an infinite dataset never \
         ends; TensorFlow would run forever)"
    ))
}

/// A node's `output_types` and `output_shapes`, which TensorFlow's kernels
/// hold the tensors they give back to.
pub(crate) struct Declared {
    pub types: Vec<DType>,
    pub shapes: Vec<Shape>,
}

impl Declared {
    pub fn of(attrs: &NodeAttrs) -> Result<Declared> {
        let types = attrs.dtypes("output_types")?;
        let shapes: Vec<Shape> = attrs.shapes("output_shapes")?.iter().map(shape).collect();
        if shapes.len() != types.len() {
            return Err(attrs.error(format!(
                "{} output_types but {} output_shapes",
                types.len(),
                shapes.len()
            )));
        }
        Ok(Declared { types, shapes })
    }

    /// TensorFlow's `VerifyTypesMatch` and `VerifyShapesCompatible`.
    pub fn check(&self, got: &[Tensor]) -> Result<()> {
        if got.len() != self.types.len() {
            return Err(Error::InvalidArgument(format!(
                "Number of components does not match: expected {} types but got {}.",
                self.types.len(),
                got.len()
            )));
        }
        for (i, (t, want)) in got.iter().zip(&self.types).enumerate() {
            if t.dtype() != *want {
                return Err(Error::InvalidArgument(format!(
                    "Data type mismatch at component {i}: expected {} but got {}.",
                    type_string(*want),
                    type_string(t.dtype())
                )));
            }
        }
        for (i, (t, want)) in got.iter().zip(&self.shapes).enumerate() {
            if !want.is_compatible_with(t.shape()) {
                return Err(Error::InvalidArgument(format!(
                    "Incompatible shapes at component {i}: expected {} but got {}.",
                    shape_string(want),
                    shape_string(&Shape::known(t.shape()))
                )));
            }
        }
        Ok(())
    }
}

/// TensorFlow's C++ `DataTypeString` (`float`, not `float32`).
pub(super) fn type_string(d: DType) -> &'static str {
    match d {
        DType::Float => "float",
        DType::Double => "double",
        DType::Half => "half",
        other => other.name(),
    }
}

/// TensorFlow's `PartialTensorShape::DebugString`: `[2,?]`, `<unknown>`.
pub(super) fn shape_string(s: &Shape) -> String {
    match &s.0 {
        None => "<unknown>".into(),
        Some(dims) => {
            let dims: Vec<String> = dims
                .iter()
                .map(|d| d.map_or("?".to_string(), |d| d.to_string()))
                .collect();
            format!("[{}]", dims.join(","))
        }
    }
}
