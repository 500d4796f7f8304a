//! tfdata errors as Python exceptions: `tfdata.errors.OpError` subclasses
//! chosen by the error's status code, as TensorFlow's `tf.errors` are.

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tfdata_core::Error;

/// The status code Python sees for `error`. A dispatcher that cannot be
/// reached is UNAVAILABLE there (what a Python caller checks for), though
/// the Rust error reports the deadline it ran out of.
fn python_code(error: &Error) -> i32 {
    match error {
        Error::Unreachable { .. } => tonic_code::UNAVAILABLE,
        Error::Context { source, .. } => python_code(source),
        other => other.code() as i32,
    }
}

/// gRPC status codes (= TensorFlow's), the ones named here.
pub mod tonic_code {
    pub const FAILED_PRECONDITION: i32 = 9;
    pub const UNAVAILABLE: i32 = 14;
}

/// `error` as an exception of the `tfdata.errors` class for its code.
pub fn to_py(error: Error) -> PyErr {
    let code = python_code(&error);
    let message = match &error {
        // A peer's message as the peer wrote it, without our "(code ...)".
        Error::Remote { message, .. } => message.clone(),
        other => other.to_string(),
    };
    op_error(code, message)
}

/// An exception of `tfdata.errors` for `code` (UNKNOWN's class when the
/// module cannot be imported, which only a broken install does).
pub fn op_error(code: i32, message: String) -> PyErr {
    Python::attach(|py| {
        let made = (|| -> PyResult<PyErr> {
            let errors = py.import("tfdata.errors")?;
            let class = errors.call_method1("exception_type_from_error_code", (code,))?;
            let args = PyTuple::new(
                py,
                [
                    py.None(),
                    py.None(),
                    message.clone().into_pyobject(py)?.into_any().unbind(),
                ],
            )?;
            Ok(PyErr::from_value(class.call1(args)?))
        })();
        made.unwrap_or_else(|import_error| {
            pyo3::exceptions::PyRuntimeError::new_err(format!(
                "{message} (and tfdata.errors could not be used: {import_error})"
            ))
        })
    })
}

/// `Result<T, tfdata::Error>` → `PyResult<T>`.
pub trait IntoPyResult<T> {
    fn py_err(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for tfdata_core::Result<T> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}
