//! The runtime behind the blocking API: a small multi-threaded tokio runtime
//! created on first use and shared by every blocking call in the process.
//!
//! The runtime belongs to the process that made it. After `fork()` (every
//! PyTorch DataLoader worker on Linux) the child has the parent's runtime
//! object but none of its threads, so a child that used it would wait
//! forever. [`handle`] therefore keys the runtime by process id: a child
//! builds its own on first use and leaves the parent's alone (it is leaked,
//! not dropped: dropping would try to join threads that do not exist here).

use std::future::Future;
use std::sync::Mutex;

use tfdata_core::{Error, Result};

/// Threads of the shared client runtime: network I/O and element decoding.
///
/// One, measured: with two, HTTP/2's connection task and the element
/// streams' tasks ran on different threads and every frame and credit grant
/// crossed between them; `large` (1 MiB tensors from one worker) then ran at
/// 32–91% of a plain TCP copy from run to run, with the worker waiting for
/// credit over 90% of the time. With one thread the same run is at 77–108%
/// (see docs/performance.md). Decoding is cheap (tensors are slices of the
/// received frames); the heavy part of a read, the kernel's socket copy, is
/// not on this thread's clock.
const CLIENT_RUNTIME_THREADS: usize = 1;

/// The shared runtime's handle, for the process that asks.
pub fn handle() -> Result<tokio::runtime::Handle> {
    static RUNTIME: Mutex<Option<(u32, tokio::runtime::Handle)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((owner, handle)) = slot.as_ref()
        && *owner == pid
    {
        return Ok(handle.clone());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(CLIENT_RUNTIME_THREADS)
        .thread_name("tfdata-client")
        .enable_all()
        .build()
        .map_err(|e| Error::Internal(format!("cannot start the tfdata client runtime: {e}")))?;
    let handle = runtime.handle().clone();
    // Lives as long as the process (and, after a fork, is abandoned there).
    std::mem::forget(runtime);
    *slot = Some((pid, handle.clone()));
    Ok(handle)
}

/// Runs `fut` to completion from synchronous code. Calling it from inside an
/// async runtime would block that runtime's thread, so it is refused there
/// with an error that names the async alternative.
pub fn block_on<F: Future>(what: &str, fut: F) -> Result<F::Output> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(Error::FailedPrecondition(format!(
            "{what} blocks, and was called from inside an async runtime; use its async variant"
        )));
    }
    Ok(handle()?.block_on(fut))
}
