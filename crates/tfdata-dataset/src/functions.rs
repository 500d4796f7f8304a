//! The process-wide registry of named user functions.
//!
//! A pipeline refers to functions by name, so it can be serialised; a worker
//! resolves the names when it builds a task's iterator. A name the worker's
//! process has not registered fails that task with an error naming it.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock, RwLock};

use tfdata_core::{Element, Error, Result};

/// A map function: one element in, one element out.
pub type MapFn = Arc<dyn Fn(Element) -> Result<Element> + Send + Sync>;

fn registry() -> &'static RwLock<HashMap<String, MapFn>> {
    static REGISTRY: OnceLock<RwLock<HashMap<String, MapFn>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// Registers (or replaces) the function called `name` in this process.
pub fn register_function<F>(name: &str, f: F)
where
    F: Fn(Element) -> Result<Element> + Send + Sync + 'static,
{
    registry()
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .insert(name.to_string(), Arc::new(f));
}

/// The function registered as `name`.
pub fn lookup(name: &str) -> Result<MapFn> {
    registry()
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .get(name)
        .cloned()
        .ok_or_else(|| {
            Error::NotFound {
                what: "dataset function",
                id: format!(
                    "`{name}` (register it with tfdata::register_function in every process that runs the pipeline)"
                ),
            }
        })
}

/// Calls a user function, turning an error or a panic into
/// [`Error::UserFunction`] so the caller (a worker task) survives it.
pub fn call(name: &str, f: &MapFn, element: Element) -> Result<Element> {
    match catch_unwind(AssertUnwindSafe(|| f(element))) {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(e)) => Err(Error::UserFunction {
            function: name.to_string(),
            message: e.to_string(),
        }),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".into());
            Err(Error::UserFunction {
                function: name.to_string(),
                message: format!("panicked: {message}"),
            })
        }
    }
}
