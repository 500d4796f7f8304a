//! What every dataset node's translation shares: its input values read in
//! order with errors naming the node, a node making one dataset, the
//! functions it calls and how its elements become their arguments. The
//! translations ([`super::ops`] and the families beside it) build on this
//! module, never on each other.

use std::sync::Arc;

use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_dataset::Dataset;
use tfdata_proto::tensorflow::{NodeDef, attr_value};

use super::inline::Arg;
use crate::attrs::NodeAttrs;
use crate::function::{CompiledNode, Compiler, NodeFn};
use crate::value::Value;

/// The values a node receives, read in order with errors naming the node.
pub(super) struct Inputs {
    values: std::vec::IntoIter<Value>,
    node: String,
    op: String,
}

impl Inputs {
    pub(super) fn new(values: Vec<Value>, node: &str, op: &str) -> Self {
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

    pub(super) fn string(&mut self, what: &str) -> Result<String> {
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

pub(super) fn scalar_int(t: &Tensor) -> Result<i64> {
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
pub(super) fn placeholder(outputs: &[&str]) -> CompiledNode {
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
pub(super) fn deterministic(attrs: &NodeAttrs) -> Result<bool> {
    Ok(attrs.string_or("deterministic", "default")? != "false")
}

pub(super) fn tensors(values: Vec<Value>, what: &str) -> Result<Vec<Tensor>> {
    values.into_iter().map(|v| v.into_tensor(what)).collect()
}

/// The kernel of `op` built for `node` (a node this translation makes up
/// to run a kernel the way a graph would).
pub(super) fn kernel(op: &str, node: &NodeDef) -> Result<crate::kernels::Compute> {
    let k = crate::kernels::lookup(op)
        .ok_or_else(|| Error::Internal(format!("the kernel set has no {op}")))?;
    (k.build)(&NodeAttrs::of(node))
}

/// `SerializeSparse` for values of dtype `code`: a SparseTensor's
/// `(indices, values, dense_shape)` as the `[3]` string form a pipeline
/// carries a SparseTensor in (TensorFlow's `DT_VARIANT` encoding).
pub(super) fn sparse_serializer(node: &str, code: i32) -> Result<crate::kernels::Compute> {
    const DT_VARIANT: i32 = 21;
    let mut n = NodeDef {
        op: "SerializeSparse".into(),
        name: node.to_string(),
        ..Default::default()
    };
    for (key, t) in [("T", code), ("out_type", DT_VARIANT)] {
        n.attr.insert(
            key.into(),
            tfdata_proto::tensorflow::AttrValue {
                value: Some(attr_value::Value::Type(t)),
            },
        );
    }
    kernel("SerializeSparse", &n)
}
