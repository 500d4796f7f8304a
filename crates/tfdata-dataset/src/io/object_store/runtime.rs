//! Running `object_store`'s futures from synchronous code: on a small
//! runtime owned by this module, with the calling thread waiting on a
//! channel (see the module docs of [`super`]).

use std::future::Future;
use std::sync::{Mutex, PoisonError, mpsc};

use tfdata_core::{Error, Result};

use super::per_process::PerProcess;

/// The runtime object-store requests run on, created on first use. Two
/// worker threads are plenty: they only drive network I/O, and readers
/// prefetch so requests overlap with the callers' work.
///
/// Per process: a child of `fork()` builds its own (the parent's is leaked
/// in the child, never dropped: see [`PerProcess`]).
fn runtime() -> Result<tokio::runtime::Handle> {
    static RUNTIME: Mutex<Option<PerProcess<tokio::runtime::Handle>>> = Mutex::new(None);
    let mut slot = RUNTIME.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(handle) = slot.as_ref().and_then(PerProcess::get) {
        return Ok(handle.clone());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("tfdata-object-store")
        .enable_all()
        .build()
        .map_err(|e| Error::Internal(format!("cannot start the object-store I/O runtime: {e}")))?;
    let handle = runtime.handle().clone();
    std::mem::forget(runtime);
    *slot = Some(PerProcess::new(handle.clone()));
    Ok(handle)
}

/// A future running on [`runtime`]; [`Pending::wait`] blocks the calling
/// thread (never a runtime thread) until it is done. Dropping it cancels
/// the future.
pub(super) struct Pending<T> {
    result: mpsc::Receiver<T>,
    task: tokio::task::JoinHandle<()>,
}

impl<T: Send + 'static> Pending<T> {
    pub(super) fn spawn(future: impl Future<Output = T> + Send + 'static) -> Result<Self> {
        let (tx, rx) = mpsc::sync_channel(1);
        let task = runtime()?.spawn(async move {
            // The receiver is gone only if the caller gave up waiting.
            let _ = tx.send(future.await);
        });
        Ok(Self { result: rx, task })
    }

    /// The future's output; an error if it panicked (naming `what`).
    pub(super) fn wait(self, what: impl FnOnce() -> String) -> Result<T> {
        self.result
            .recv()
            .map_err(|_| Error::Internal(format!("{}: the object-store request panicked", what())))
    }
}

impl<T> Drop for Pending<T> {
    fn drop(&mut self) {
        // A no-op once the task has finished.
        self.task.abort();
    }
}

/// Runs `future` to completion from synchronous code.
pub(super) fn block_on<T: Send + 'static>(
    future: impl Future<Output = T> + Send + 'static,
    what: impl FnOnce() -> String,
) -> Result<T> {
    Pending::spawn(future)?.wait(what)
}
