//! The lifecycle shared by `DispatchServer` and `WorkerServer`.
//!
//! A server is a library function `serve(listener, shutdown) -> Result<()>`.
//! [`ServerHandle`] gives it TensorFlow's in-process shape: the port is bound
//! at construction (so "address in use" is an error from the constructor),
//! `start()` runs `serve` on the server's own runtime, `join()` blocks until it
//! ends, `stop()` cancels it and waits, and dropping the handle stops it.

use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tfdata_core::{Error, Result};
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

/// How long `stop()` lets `serve` finish in-flight calls before the runtime
/// (and every task on it) is torn down.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// The function a server runs once started.
pub type ServeFn = Box<
    dyn FnOnce(tokio::net::TcpListener, CancellationToken) -> BoxFuture<'static, Result<()>> + Send,
>;

/// The connections a gRPC server accepts on `listener`: plaintext, or TLS
/// after a handshake when `security` has TLS (a TLS port serves nothing in
/// plaintext). Nagle's algorithm is off: without it, a response larger than
/// one segment ends in a small segment that waits for the client's delayed
/// ACK, about 40 ms per `GetElement` of an 8 KiB element on Linux. (tonic's
/// `tcp_nodelay` only applies to listeners it binds itself.)
pub fn incoming(
    listener: tokio::net::TcpListener,
    security: &crate::security::ServerSecurity,
) -> impl futures::Stream<Item = std::io::Result<crate::security::ServerIo>> + Send + 'static {
    security.incoming(listener)
}

/// HTTP/2 flow-control windows our servers and channels advertise. hyper's
/// defaults (64 KiB per stream) cap a 1 MiB element at a few round trips'
/// worth of window; these let a batch of several megabytes flow without
/// waiting for WINDOW_UPDATEs. They bound what a peer may send before we
/// read it, per stream and per connection.
pub const STREAM_WINDOW_BYTES: u32 = 16 << 20;
pub const CONNECTION_WINDOW_BYTES: u32 = 64 << 20;
/// Largest HTTP/2 frame we accept: 1 MiB frames (the default is 16 KiB)
/// cut the per-frame work on large elements.
pub const MAX_FRAME_BYTES: u32 = 1 << 20;

/// A tonic server builder with tfdata's HTTP/2 settings.
pub fn builder() -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .initial_stream_window_size(STREAM_WINDOW_BYTES)
        .initial_connection_window_size(CONNECTION_WINDOW_BYTES)
        .max_frame_size(MAX_FRAME_BYTES)
}

/// Binds `0.0.0.0:<port>` (port 0 picks a free one), as TensorFlow's servers do.
pub fn bind(port: u16) -> Result<StdTcpListener> {
    let address = SocketAddr::from(([0, 0, 0, 0], port));
    let listener = StdTcpListener::bind(address).map_err(|source| Error::Bind {
        address: address.to_string(),
        source,
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("configuring listener", e))?;
    Ok(listener)
}

#[derive(Default)]
struct Outcome {
    /// Set once the server has ended.
    ended: bool,
    /// The error it ended with, handed to the first `join()`; later joins get
    /// its message.
    error: Option<Error>,
    error_message: Option<String>,
}

struct Inner {
    name: &'static str,
    port: u16,
    runtime: Mutex<Option<Runtime>>,
    pending: Mutex<Option<(StdTcpListener, ServeFn)>>,
    shutdown: CancellationToken,
    outcome: Mutex<Outcome>,
    ended: Condvar,
}

/// An in-process server: see the module docs.
pub struct ServerHandle {
    inner: Arc<Inner>,
}

impl ServerHandle {
    /// Creates a stopped server around a bound `listener`.
    pub fn new(name: &'static str, listener: StdTcpListener, serve: ServeFn) -> Result<Self> {
        let port = listener
            .local_addr()
            .map_err(|e| Error::io("reading the bound port", e))?
            .port();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(name)
            .enable_all()
            .build()
            .map_err(|e| Error::io(format!("starting the {name} runtime"), e))?;
        Ok(ServerHandle {
            inner: Arc::new(Inner {
                name,
                port,
                runtime: Mutex::new(Some(runtime)),
                pending: Mutex::new(Some((listener, serve))),
                shutdown: CancellationToken::new(),
                outcome: Mutex::new(Outcome::default()),
                ended: Condvar::new(),
            }),
        })
    }

    /// The port the server is bound to.
    pub fn port(&self) -> u16 {
        self.inner.port
    }

    /// Starts serving. Starting twice, or after `stop()`, does nothing.
    pub fn start(&self) -> Result<()> {
        let Some((listener, serve)) = lock(&self.inner.pending).take() else {
            return Ok(());
        };
        let runtime = lock(&self.inner.runtime);
        let Some(runtime) = runtime.as_ref() else {
            return Ok(());
        };
        let inner = Arc::clone(&self.inner);
        let shutdown = self.inner.shutdown.clone();
        let _guard = runtime.enter();
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|e| Error::io("registering listener", e))?;
        runtime.spawn(async move {
            let result = serve(listener, shutdown).await;
            if let Err(e) = &result {
                tracing::error!(server = inner.name, error = %e, "server stopped with an error");
            }
            inner.finish(result);
        });
        Ok(())
    }

    /// Blocks until the server has stopped; its error if it failed.
    pub fn join(&self) -> Result<()> {
        let mut outcome = lock(&self.inner.outcome);
        loop {
            if outcome.ended {
                if let Some(e) = outcome.error.take() {
                    return Err(e);
                }
                return match &outcome.error_message {
                    Some(m) => Err(Error::Internal(m.clone())),
                    None => Ok(()),
                };
            }
            outcome = self
                .inner
                .ended
                .wait(outcome)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// [`join`](Self::join), waiting at most `timeout`: `None` if the server
    /// is still running then (so a caller can look at signals between waits).
    pub fn join_timeout(&self, timeout: Duration) -> Option<Result<()>> {
        {
            let outcome = lock(&self.inner.outcome);
            let (outcome, _) = self
                .inner
                .ended
                .wait_timeout_while(outcome, timeout, |o| !o.ended)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if !outcome.ended {
                return None;
            }
        }
        Some(self.join())
    }

    /// Whether the server has ended (stopped or failed).
    pub fn has_ended(&self) -> bool {
        lock(&self.inner.outcome).ended
    }

    /// Stops the server and waits (up to [`STOP_GRACE`]) for it to finish.
    pub fn stop(&self) {
        self.inner.shutdown.cancel();
        if lock(&self.inner.pending).take().is_some() {
            // Never started: nothing runs; release the port now.
            self.inner.finish(Ok(()));
        }
        {
            let outcome = lock(&self.inner.outcome);
            let _ = self
                .inner
                .ended
                .wait_timeout_while(outcome, STOP_GRACE, |o| !o.ended);
        }
        if let Some(runtime) = lock(&self.inner.runtime).take() {
            // Works inside or outside an async context, unlike dropping it.
            runtime.shutdown_background();
        }
        self.inner.finish(Ok(()));
    }
}

impl Inner {
    fn finish(&self, result: Result<()>) {
        let mut outcome = lock(&self.outcome);
        if !outcome.ended {
            outcome.ended = true;
            if let Err(e) = result {
                outcome.error_message = Some(e.to_string());
                outcome.error = Some(e);
            }
        }
        self.ended.notify_all();
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idle_server() -> ServerHandle {
        let listener = bind(0).unwrap();
        ServerHandle::new(
            "test",
            listener,
            Box::new(|_listener, shutdown| {
                Box::pin(async move {
                    shutdown.cancelled().await;
                    Ok(())
                })
            }),
        )
        .unwrap()
    }

    #[test]
    fn start_stop_join() {
        let server = idle_server();
        assert_ne!(server.port(), 0);
        server.start().unwrap();
        assert!(!server.has_ended());
        assert!(server.join_timeout(Duration::from_millis(10)).is_none());
        server.stop();
        server.join().unwrap();
        assert!(server.join_timeout(Duration::ZERO).unwrap().is_ok());
        assert!(server.has_ended());
    }

    #[test]
    fn stop_before_start_releases_the_port() {
        let server = idle_server();
        let port = server.port();
        server.stop();
        server.join().unwrap();
        drop(server);
        bind(port).unwrap();
    }

    #[test]
    fn port_in_use_is_an_error() {
        let held = bind(0).unwrap();
        let port = held.local_addr().unwrap().port();
        let err = bind(port).unwrap_err();
        assert!(matches!(err, Error::Bind { .. }), "{err}");
        assert!(err.to_string().contains(&port.to_string()));
    }

    #[test]
    fn a_failing_server_reports_through_join() {
        let server = ServerHandle::new(
            "test",
            bind(0).unwrap(),
            Box::new(|_l, _s| Box::pin(async { Err(Error::Internal("boom".into())) })),
        )
        .unwrap();
        server.start().unwrap();
        assert!(server.join().unwrap_err().to_string().contains("boom"));
    }
}
