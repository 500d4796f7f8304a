//! Resource variables as dataset graphs hold them: `VarHandleOp` makes one
//! (a [`Value::Variable`]), `AssignVariableOp` sets its value and
//! `ReadVariableOp` reads it.
//!
//! TensorFlow serialises a variable a pipeline captures (a
//! `tf.random.Generator`'s state, a `tf.Variable` a map function reads)
//! into the outer graph as a `VarHandleOp`, an `AssignVariableOp` of its
//! value then, and an `Identity` of the handle with a control edge on the
//! assignment, which the dataset node captures. The outer graph runs once
//! per translation, so each worker task starts from the serialised value.
//! The ops that advance an RNG state are `super::generator`'s.

use std::sync::Arc;

use tfdata_core::{Error, Result};

use super::ResourceKernelDef;
use crate::attrs::NodeAttrs;
use crate::kernels::NodeFn;
use crate::value::Value;
use crate::variable::Variable;

pub(super) const KERNELS: &[ResourceKernelDef] = &[
    ResourceKernelDef {
        op: "VarHandleOp",
        outputs: |_| Ok(vec![("resource", 1)]),
        build: var_handle,
    },
    ResourceKernelDef {
        op: "AssignVariableOp",
        outputs: |_| Ok(Vec::new()),
        build: assign,
    },
    ResourceKernelDef {
        op: "ReadVariableOp",
        outputs: |_| Ok(vec![("value", 1)]),
        build: read,
    },
];

/// The variable a resource input holds.
pub(super) fn variable_of(op: &str, v: &Value) -> Result<Arc<Variable>> {
    match v {
        Value::Variable(var) => Ok(var.clone()),
        other => Err(Error::InvalidArgument(format!(
            "{op}: input `resource` must be a variable a VarHandleOp node made, got {}",
            other.describe()
        ))),
    }
}

fn var_handle(attrs: &NodeAttrs) -> Result<NodeFn> {
    let dtype = attrs.dtype("dtype")?;
    // A new variable each time the node runs: the outer graph runs once
    // per translation, a function body once per call (a function-local
    // variable, as TensorFlow makes one per call without a shared name).
    Ok(Arc::new(move |_| {
        Ok(vec![Value::Variable(Arc::new(Variable::new(dtype)))])
    }))
}

/// The inputs as an array, or an error if there are not exactly `N`.
pub(super) fn take<const N: usize>(op: &str, inputs: Vec<Value>) -> Result<[Value; N]> {
    let n = inputs.len();
    inputs
        .try_into()
        .map_err(|_| Error::InvalidArgument(format!("{op}: expected {N} inputs, got {n}")))
}

fn assign(attrs: &NodeAttrs) -> Result<NodeFn> {
    attrs.dtype("dtype")?;
    Ok(Arc::new(|inputs| {
        let [handle, value] = take("AssignVariableOp", inputs)?;
        let var = variable_of("AssignVariableOp", &handle)?;
        var.assign(value.into_tensor("AssignVariableOp value")?)?;
        Ok(Vec::new())
    }))
}

fn read(attrs: &NodeAttrs) -> Result<NodeFn> {
    let dtype = attrs.dtype("dtype")?;
    Ok(Arc::new(move |inputs| {
        let [handle] = take("ReadVariableOp", inputs)?;
        let var = variable_of("ReadVariableOp", &handle)?;
        Ok(vec![Value::Tensor(var.read(dtype)?)])
    }))
}
