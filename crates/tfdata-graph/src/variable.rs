//! A resource variable (`VarHandleOp`'s handle, a `Value::Variable`): one
//! tensor of a fixed dtype that ops read and replace under a lock.
//!
//! TensorFlow serialises a variable a pipeline captures into the outer
//! graph as a `VarHandleOp` and an `AssignVariableOp` of its value at
//! serialisation time (a `tf.random.Generator`'s state, for one). The outer
//! graph runs once per translation, so each worker task starts from that
//! value, as TensorFlow's own data-service workers do; map functions then
//! share the variable (an `Arc`), and ops that read and advance it (the
//! RNG ops of `kernels::generator`) do so atomically under the lock.

use std::sync::{Mutex, MutexGuard};

use tfdata_core::{DType, Error, Result, Tensor};

#[derive(Debug)]
pub struct Variable {
    dtype: DType,
    /// `None` until the first assignment.
    value: Mutex<Option<Tensor>>,
}

impl Variable {
    pub fn new(dtype: DType) -> Self {
        Variable {
            dtype,
            value: Mutex::new(None),
        }
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The value, locked: ops that read and write it hold the guard for
    /// the whole update, so concurrent map calls see successive states.
    pub fn lock(&self) -> MutexGuard<'_, Option<Tensor>> {
        // A poisoned lock still holds a whole tensor (updates replace it).
        self.value.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the value (TensorFlow's `AssignVariableOp` message on a
    /// wrong dtype).
    pub fn assign(&self, t: Tensor) -> Result<()> {
        if t.dtype() != self.dtype {
            return Err(Error::InvalidArgument(format!(
                "Trying to assign variable with wrong dtype. Expected {} got {}",
                tf_name(self.dtype),
                tf_name(t.dtype())
            )));
        }
        *self.lock() = Some(t);
        Ok(())
    }

    /// A copy of the value (`ReadVariableOp`).
    pub fn read(&self, want: DType) -> Result<Tensor> {
        let guard = self.lock();
        let t = guard.as_ref().ok_or_else(uninitialized)?;
        if t.dtype() != want {
            return Err(Error::InvalidArgument(format!(
                "Trying to read variable with wrong dtype. Expected {} got {}",
                tf_name(t.dtype()),
                tf_name(want)
            )));
        }
        Ok(t.clone())
    }
}

/// Reading a variable no op assigned yet.
pub fn uninitialized() -> Error {
    Error::FailedPrecondition(
        "Could not find variable: the resource variable was never initialized".into(),
    )
}

/// TensorFlow's `DataTypeString`.
pub fn tf_name(d: DType) -> &'static str {
    match d {
        DType::Float => "float",
        DType::Double => "double",
        DType::Half => "half",
        other => other.name(),
    }
}
