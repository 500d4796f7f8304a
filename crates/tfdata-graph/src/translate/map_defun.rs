//! `MapDefun` (`tf.data`'s vectorization helper): its function run on each
//! row (along dimension 0) of its arguments, the captured inputs passed
//! whole, and each output the rows' results stacked.
//!
//! TensorFlow's checks and messages: every argument of rank at least 1 and
//! of the first one's leading dimension; each result of the declared dtype
//! and compatible with the declared shape, a dimension left unknown there
//! fixed by the first result (so later rows must match it). With no rows,
//! an output of fully declared shape is empty; one whose shape is not fully
//! declared is refused, as TensorFlow never allocates it.

use std::sync::Arc;

use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_dataset::ops::tensor_util::{slice, stack};
use tfdata_dataset::spec::Shape;
use tfdata_proto::tensorflow::NodeDef;

use super::inline::shape;
use super::node::{Inputs, function, tensors};
use crate::attrs::NodeAttrs;
use crate::function::{CompiledNode, Compiler};
use crate::value::Value;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(
    node: &NodeDef,
    compiler: &mut Compiler<'_>,
    attrs: &NodeAttrs,
) -> Result<Option<CompiledNode>> {
    if node.op != "MapDefun" {
        return Ok(None);
    }
    let f = function(attrs, "f", compiler)?;
    let n_args = attrs.dtype_codes("Targuments")?.len();
    let n_captured = attrs.dtype_codes("Tcaptured")?.len();
    let types: Vec<DType> = attrs.dtypes("output_types")?;
    let shapes: Vec<Shape> = attrs.shapes("output_shapes")?.iter().map(shape).collect();
    if types.len() != shapes.len() {
        return Err(Error::InvalidArgument(
            "Length of output_shapes and output_types must match.".into(),
        ));
    }
    let (name, op) = (node.name.clone(), node.op.clone());
    let n_out = types.len();
    Ok(Some(CompiledNode {
        outputs: vec![("output".into(), n_out)],
        run: Arc::new(move |values| {
            let mut i = Inputs::new(values, &name, &op);
            let args = tensors(i.take(Some(n_args))?, "arguments")?;
            let captured = i.take(Some(n_captured))?;
            let rows = check_arguments(&args)?;
            let mut declared = shapes.clone();
            let mut results: Vec<Vec<Tensor>> = vec![Vec::with_capacity(rows); n_out];
            // Bounded by the arguments' leading dimension.
            for row in 0..rows {
                let mut call: Vec<Value> = args
                    .iter()
                    .map(|a| slice(a, row).map(Value::Tensor))
                    .collect::<Result<_>>()?;
                call.extend(captured.iter().cloned());
                let out = tensors(f.call(call)?, &f.name)?;
                if out.len() != n_out {
                    return Err(Error::InvalidArgument(
                        "Mismatch in number of function outputs.".into(),
                    ));
                }
                for (j, t) in out.into_iter().enumerate() {
                    if t.dtype() != types[j] {
                        return Err(Error::InvalidArgument(format!(
                            "Mismatch in function return type and expected output type for \
                             output: {j}"
                        )));
                    }
                    if !declared[j].is_compatible_with(t.shape()) {
                        return Err(Error::InvalidArgument(format!(
                            "Mismatch in function retval shape, {}, and expected output \
                             shape, {}.",
                            debug_dims(t.shape()),
                            debug_shape(&declared[j])
                        )));
                    }
                    // The first result fixes what was left unknown.
                    declared[j] = Shape(Some(t.shape().iter().map(|&d| Some(d)).collect()));
                    results[j].push(t);
                }
            }
            results
                .into_iter()
                .enumerate()
                .map(|(j, parts)| {
                    if parts.is_empty() {
                        return empty_output(types[j], &shapes[j]);
                    }
                    let refs: Vec<&Tensor> = parts.iter().collect();
                    stack(&refs).map(Value::Tensor)
                })
                .collect()
        }),
    }))
}

/// The rows the arguments share, with TensorFlow's messages.
fn check_arguments(args: &[Tensor]) -> Result<usize> {
    let rows = args
        .first()
        .and_then(|a| a.shape().first().copied())
        .unwrap_or(-1);
    for (i, a) in args.iter().enumerate() {
        match a.shape().first() {
            None => {
                return Err(Error::InvalidArgument(format!(
                    "All inputs must have rank at least 1. Input {i} has a rank of 0."
                )));
            }
            Some(&d) if d != rows => {
                return Err(Error::InvalidArgument(format!(
                    "All inputs must have the same dimension 0. Input {i} has leading \
                     dimension {d}, while all previous inputs have leading dimension {rows}"
                )));
            }
            _ => {}
        }
    }
    if args.is_empty() {
        return Err(Error::InvalidArgument(
            "MapDefun: tfdata needs at least one argument to know how many rows to map".into(),
        ));
    }
    Ok(rows.max(0) as usize)
}

/// An output of no rows: empty when its shape is fully declared.
fn empty_output(dtype: DType, declared: &Shape) -> Result<Value> {
    let dims: Option<Vec<i64>> = declared
        .0
        .as_ref()
        .and_then(|d| d.iter().copied().collect::<Option<Vec<i64>>>());
    let Some(dims) = dims else {
        return Err(Error::InvalidArgument(
            "MapDefun: an output of no rows whose shape is not fully declared (TensorFlow \
             leaves it unallocated)"
                .into(),
        ));
    };
    let mut shape = vec![0];
    shape.extend(dims);
    // No values: an empty buffer, or no strings.
    let data = if dtype == DType::String {
        TensorData::Strings(Vec::new())
    } else {
        TensorData::Buffer(bytes::Bytes::new())
    };
    Tensor::new(dtype, shape, data).map(Value::Tensor)
}

/// TensorFlow's `TensorShape::DebugString`: `[2,3]`.
fn debug_dims(dims: &[i64]) -> String {
    let inner: Vec<String> = dims.iter().map(i64::to_string).collect();
    format!("[{}]", inner.join(","))
}

/// TensorFlow's `PartialTensorShape::DebugString`: `[?,3]`, `<unknown>`.
fn debug_shape(s: &Shape) -> String {
    match &s.0 {
        None => "<unknown>".into(),
        Some(d) => {
            let inner: Vec<String> = d
                .iter()
                .map(|x| x.map_or("?".to_string(), |v| v.to_string()))
                .collect();
            format!("[{}]", inner.join(","))
        }
    }
}
