//! The Python exception a user function last raised on this thread, kept
//! so that the pipeline error reporting it can re-raise the exception
//! itself as its cause (local iteration runs functions on the iterating
//! thread). `functions` stores, `dataset` takes; neither knows the other.

use std::cell::RefCell;

use pyo3::PyErr;

thread_local! {
    static LAST_EXCEPTION: RefCell<Option<(String, PyErr)>> = const { RefCell::new(None) };
}

/// Remembers `error`, raised by the function `name` on this thread.
pub fn keep(name: &str, error: PyErr) {
    LAST_EXCEPTION.with(|slot| *slot.borrow_mut() = Some((name.to_string(), error)));
}

/// The exception the function `name` last raised on this thread, if any.
pub fn take(name: &str) -> Option<PyErr> {
    LAST_EXCEPTION.with(|slot| match slot.borrow_mut().take() {
        Some((n, e)) if n == name => Some(e),
        _ => None,
    })
}
