//! Waiting from Python: without the GIL, in slices, and interruptible.
//!
//! Every blocking wait releases the GIL (other Python threads, and Python
//! functions that pipelines call, go on meanwhile) and comes back every
//! [`SLICE`] to let Python run its signal handlers, so Ctrl-C raises
//! `KeyboardInterrupt` within about that long.

use std::future::Future;
use std::time::Duration;

use pyo3::prelude::*;

use crate::errors::IntoPyResult;

/// How long one wait lasts before signals are looked at again.
pub const SLICE: Duration = Duration::from_millis(100);

/// Runs `future` on the client runtime until it is done, waiting without the
/// GIL. A signal handler that raises (Ctrl-C) cancels the future and
/// returns its exception.
pub fn run<F, T>(py: Python<'_>, future: F) -> PyResult<T>
where
    F: Future<Output = tfdata::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    let handle = tfdata_client::runtime::handle().py_err()?;
    let mut task = handle.spawn(future);
    loop {
        let done = py.detach(|| {
            handle.block_on(async { tokio::time::timeout(SLICE, &mut task).await.ok() })
        });
        match done {
            Some(Ok(result)) => return result.py_err(),
            Some(Err(join_error)) => {
                return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
                    "tfdata internal task failed: {join_error}"
                )));
            }
            None => {
                if let Err(interrupted) = py.check_signals() {
                    task.abort();
                    return Err(interrupted);
                }
            }
        }
    }
}

/// Calls `poll` (which waits at most about [`SLICE`] without the GIL)
/// until it yields, checking signals between calls.
pub fn poll_until<T>(py: Python<'_>, mut poll: impl FnMut() -> Option<T> + Send) -> PyResult<T>
where
    T: Send,
{
    loop {
        if let Some(done) = py.detach(&mut poll) {
            return Ok(done);
        }
        py.check_signals()?;
    }
}
