//! Python callables as pipeline functions.
//!
//! [`register_function`] puts a callable into the process's function
//! registry under its name, for each use a pipeline can make of it: as a
//! map function, a predicate and a function returning datasets (for
//! `flat_map` and `interleave`); the pipeline's op says which is meant. A
//! pipeline names them, so a worker in any Python process that registered
//! the same name runs them; a worker that did not fails the task naming it.
//!
//! Calls happen on pipeline threads: each attaches to the interpreter for
//! the call only, so other threads run Python in between. The input
//! structure is known when a pipeline is built, so elements arrive nested
//! as the user sees them (`fn(*tuple)`, `fn(dict)`, `fn(x)`, as
//! TensorFlow calls them). Like TensorFlow, which traces a function when
//! `map` is called, the output structure is learned by calling the function
//! once on a zero-filled placeholder element; if that call raises, the
//! structure is unknown until data flows.
//!
//! A Python exception becomes the task's error: the function's name, the
//! exception's type and message. When the call ran on the thread that is
//! iterating (local iteration), the exception itself is kept, so the caller
//! re-raises it as the cause.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tfdata_core::{Element, Error, Result};
use tfdata_dataset::functions::{ResolvedDatasetFn, ResolvedMap};
use tfdata_dataset::{Dataset, Structure};

use crate::convert;
use crate::dataset::PyDataset;

struct PyFunction {
    name: String,
    callable: Py<PyAny>,
    /// What the function makes of each input structure it has been used on
    /// (learned once per structure: pipelines ask again and again).
    outputs: Mutex<HashMap<Structure, Option<Structure>>>,
}

impl PyFunction {
    /// Calls the function on `element`, nested as `input` says.
    fn call<'py>(
        &self,
        py: Python<'py>,
        element: Element,
        input: Option<&Structure>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let spread = match input {
            Some(Structure::Tuple(_)) => true,
            Some(_) => false,
            None => element.components.len() > 1,
        };
        let value = convert::element_to_py(py, convert::maybe_shared(element), input)?;
        let callable = self.callable.bind(py);
        if spread {
            callable.call1(value.cast_into::<PyTuple>()?)
        } else {
            callable.call1((value,))
        }
    }

    /// Runs `body` attached to the interpreter, turning a Python exception
    /// into the task's error (and keeping it for this thread's caller).
    fn attached<T>(&self, body: impl FnOnce(Python<'_>) -> PyResult<T>) -> Result<T> {
        let outcome = Python::try_attach(|py| {
            body(py).map_err(|e| {
                let message = describe(py, &e);
                crate::raised::keep(&self.name, e);
                message
            })
        });
        match outcome {
            Some(Ok(v)) => Ok(v),
            Some(Err(message)) => Err(Error::user_function(
                self.name.clone(),
                message,
                tfdata_core::Code::InvalidArgument,
            )),
            None => Err(Error::Unavailable(format!(
                "cannot call Python function `{}`: the interpreter is shutting down",
                self.name
            ))),
        }
    }

    fn map(&self, element: Element, input: Option<&Structure>) -> Result<Element> {
        self.attached(|py| {
            let out = self.call(py, element, input)?;
            Ok(convert::py_to_element(&out)?.0)
        })
    }

    fn predicate(&self, element: &Element, input: Option<&Structure>) -> Result<bool> {
        self.attached(|py| {
            let out = self.call(py, element.clone(), input)?;
            out.is_truthy()
        })
    }

    fn dataset(&self, element: Element, input: Option<&Structure>) -> Result<Dataset> {
        self.attached(|py| {
            let out = self.call(py, element, input)?;
            dataset_of(&out)
        })
    }

    /// The output structure for `input`, learned from a placeholder call.
    fn output(
        &self,
        input: Option<&Structure>,
        learn: impl Fn(&Bound<'_, PyAny>) -> PyResult<Option<Structure>>,
    ) -> Option<Structure> {
        let input = input?;
        // Not under the lock while Python runs: the call needs the GIL, and
        // a thread holding the GIL may be waiting for this lock.
        let cached = self
            .outputs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(input)
            .cloned();
        if let Some(known) = cached {
            return known;
        }
        let learned = convert::placeholder(input).and_then(|element| {
            Python::try_attach(|py| {
                self.call(py, element, Some(input))
                    .and_then(|out| learn(&out))
                    .ok()
                    .flatten()
            })
            .flatten()
        });
        self.outputs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(input.clone(), learned.clone());
        learned
    }
}

/// "ValueError: message", the way Python prints an exception's last line.
fn describe(py: Python<'_>, e: &PyErr) -> String {
    let kind = e
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    match e.value(py).str() {
        Ok(m) if !m.to_string_lossy().is_empty() => format!("{kind}: {}", m.to_string_lossy()),
        _ => kind,
    }
}

/// The native dataset behind a `tfdata.Dataset` (or a native one itself).
pub fn dataset_of(value: &Bound<'_, PyAny>) -> PyResult<Dataset> {
    let native = match value.getattr("_native") {
        Ok(inner) => inner,
        Err(_) => value.clone(),
    };
    match native.cast::<PyDataset>() {
        Ok(d) => Ok(d.get().ds.clone()),
        Err(_) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "expected a tfdata.Dataset, got {}",
            value.get_type().name()?
        ))),
    }
}

/// Registers `callable` under `name` (see the module docs). Registering a
/// name again replaces it in this process.
#[pyfunction]
pub fn register_function(name: &str, callable: Py<PyAny>) {
    let f = Arc::new(PyFunction {
        name: name.to_string(),
        callable,
        outputs: Mutex::new(HashMap::new()),
    });
    let map = Arc::clone(&f);
    tfdata_dataset::register_map_factory(name, move |input| {
        let input = input.cloned();
        let output = map.output(input.as_ref(), |out| {
            Ok(Some(convert::relax(&convert::py_to_element(out)?.1)))
        });
        let call = Arc::clone(&map);
        Ok(ResolvedMap {
            f: Arc::new(move |element| call.map(element, input.as_ref())),
            output,
        })
    });
    let predicate = Arc::clone(&f);
    tfdata_dataset::register_predicate_factory(name, move |input| {
        let input = input.cloned();
        let call = Arc::clone(&predicate);
        Ok(Arc::new(move |element: &Element| {
            call.predicate(element, input.as_ref())
        }))
    });
    let dataset_fn = f;
    tfdata_dataset::register_dataset_fn_factory(name, move |input| {
        let input = input.cloned();
        let output = dataset_fn.output(input.as_ref(), |out| {
            Ok(dataset_of(out)?.element_spec().ok().flatten())
        });
        let call = Arc::clone(&dataset_fn);
        Ok(ResolvedDatasetFn {
            f: Arc::new(move |element| call.dataset(element, input.as_ref())),
            output,
        })
    });
}
