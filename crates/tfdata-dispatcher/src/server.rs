//! [`serve`]: the dispatcher as a library function over a bound listener, and
//! [`DispatchServer`]: TensorFlow's in-process `DispatchServer` around it.

use std::sync::Arc;

use tfdata_core::Result;
use tfdata_proto::data::dispatcher_service_server::DispatcherServiceServer;
use tfdata_rpc::CancellationToken;
use tfdata_rpc::channel::MAX_MESSAGE_BYTES;
use tfdata_rpc::server::{ServerHandle, bind};

use crate::config::DispatcherConfig;
use crate::dispatcher::{Clock, Dispatcher, SystemClock};
use crate::grpc::DispatcherGrpc;
use crate::state::DispatcherState;
use crate::status::StatusGrpc;
use tfdata_proto::tfdata::status::status_service_server::StatusServiceServer;

/// Runs a dispatcher on `listener` until `shutdown` fires.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: DispatcherConfig,
    shutdown: CancellationToken,
) -> Result<()> {
    serve_with_clock(listener, config, shutdown, Arc::new(SystemClock)).await
}

/// [`serve`] with an injected clock (tests).
pub async fn serve_with_clock(
    listener: tokio::net::TcpListener,
    config: DispatcherConfig,
    shutdown: CancellationToken,
    clock: Arc<dyn Clock>,
) -> Result<()> {
    // Recovery reads the journal from disk: keep it off the async threads.
    let dispatcher = tokio::task::spawn_blocking(move || Dispatcher::new(config, clock))
        .await
        .map_err(|e| tfdata_core::Error::Internal(format!("dispatcher start-up failed: {e}")))??;
    serve_dispatcher(listener, Arc::new(dispatcher), shutdown).await
}

/// Serves an already constructed (and, if fault tolerant, recovered) dispatcher.
pub async fn serve_dispatcher(
    listener: tokio::net::TcpListener,
    dispatcher: Arc<Dispatcher>,
    shutdown: CancellationToken,
) -> Result<()> {
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    let security = dispatcher.config().security.server()?;
    tracing::info!(
        port,
        tls = security.is_tls(),
        auth_token = security.requires_token(),
        "tf.data service dispatcher serving"
    );
    warn_if_token_in_plaintext(&security);

    let maintenance = tokio::spawn(maintenance_loop(Arc::clone(&dispatcher), shutdown.clone()));
    let status = StatusServiceServer::new(StatusGrpc(Arc::clone(&dispatcher)));
    let service = DispatcherServiceServer::new(DispatcherGrpc(dispatcher))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let result = tonic::transport::Server::builder()
        .layer(security.auth_layer())
        .add_service(service)
        .add_service(status)
        .serve_with_incoming_shutdown(
            tfdata_rpc::server::incoming(listener, &security),
            shutdown.cancelled_owned(),
        )
        .await;
    maintenance.abort();
    result
        .map_err(|e| tfdata_core::Error::Internal(format!("dispatcher gRPC server failed: {e}")))?;
    tracing::info!(port, "tf.data service dispatcher stopped");
    Ok(())
}

/// A token sent in plaintext can be read by anyone on the network path.
pub(crate) fn warn_if_token_in_plaintext(security: &tfdata_rpc::security::ServerSecurity) {
    if security.requires_token() && !security.is_tls() {
        tracing::warn!(
            "a bearer token is required but TLS is off: tokens cross the network in \
             plaintext (set --tls-cert, --tls-key and --tls-ca)"
        );
    }
}

/// Runs [`Dispatcher::check_liveness`] every
/// [`Dispatcher::liveness_check_interval`] and [`Dispatcher::collect_garbage`]
/// every `job_gc_check_interval` (not at all when `job_gc_timeout` is unset,
/// TensorFlow's -1): noticing a dead worker or client follows its own
/// timeout, not the garbage collector's schedule.
async fn maintenance_loop(dispatcher: Arc<Dispatcher>, shutdown: CancellationToken) {
    let ticker = |period| {
        let mut t = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    };
    let mut liveness = ticker(dispatcher.liveness_check_interval());
    let gc_enabled = dispatcher.config().job_gc_timeout.is_some();
    let mut gc = ticker(dispatcher.config().job_gc_check_interval);
    loop {
        let result = tokio::select! {
            _ = liveness.tick() => dispatcher.check_liveness().await,
            _ = gc.tick(), if gc_enabled => dispatcher.collect_garbage().await,
            () = shutdown.cancelled() => return,
        };
        if let Err(e) = result {
            tracing::error!(error = %e, "dispatcher maintenance failed");
        }
    }
}

/// An in-process dispatcher, like TensorFlow's
/// `tf.data.experimental.service.DispatchServer`.
///
/// ```no_run
/// use tfdata_dispatcher::{DispatchServer, DispatcherConfig};
/// let dispatcher = DispatchServer::new(DispatcherConfig::default())?;
/// println!("{}", dispatcher.target()); // grpc://localhost:<port>
/// # Ok::<(), tfdata_core::Error>(())
/// ```
pub struct DispatchServer {
    handle: ServerHandle,
    protocol: String,
    dispatcher: Arc<Dispatcher>,
}

impl DispatchServer {
    /// Creates and starts a dispatcher. A port in use or an invalid config is
    /// an error here.
    pub fn new(config: DispatcherConfig) -> Result<Self> {
        let server = Self::new_stopped(config)?;
        server.start()?;
        Ok(server)
    }

    /// Creates a dispatcher bound to its port but not serving until
    /// [`start`](Self::start) (TensorFlow's `start=False`). In fault-tolerant
    /// mode the journal is replayed here, so a corrupt journal is an error
    /// from the constructor.
    pub fn new_stopped(config: DispatcherConfig) -> Result<Self> {
        config.validate()?;
        // Certificates and keys are read here too, so a bad file is an
        // error from the constructor rather than from `join()`.
        config.security.server()?;
        let listener = bind(config.port)?;
        let protocol = config.protocol.clone();
        let dispatcher = Arc::new(Dispatcher::new(config, Arc::new(SystemClock))?);
        let serving = Arc::clone(&dispatcher);
        let handle = ServerHandle::new(
            "tfdata-dispatcher",
            listener,
            Box::new(move |listener, shutdown| {
                Box::pin(serve_dispatcher(listener, serving, shutdown))
            }),
        )?;
        Ok(DispatchServer {
            handle,
            protocol,
            dispatcher,
        })
    }

    /// A copy of the dispatcher's current state (TensorFlow's `_num_workers()`
    /// and friends are queries on it).
    pub fn state(&self) -> DispatcherState {
        let dispatcher = &self.dispatcher;
        // A plain thread may block on the async lock from any context.
        std::thread::scope(|s| {
            s.spawn(|| dispatcher.state_blocking())
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// Number of registered workers.
    pub fn num_workers(&self) -> usize {
        self.state().workers().len()
    }

    pub fn start(&self) -> Result<()> {
        self.handle.start()
    }

    /// Blocks until the dispatcher stops; its error if it failed.
    pub fn join(&self) -> Result<()> {
        self.handle.join()
    }

    /// [`join`](Self::join), waiting at most `timeout`: `None` while it runs.
    pub fn join_timeout(&self, timeout: std::time::Duration) -> Option<Result<()>> {
        self.handle.join_timeout(timeout)
    }

    /// Stops the dispatcher. Dropping it does the same.
    pub fn stop(&self) {
        self.handle.stop()
    }

    /// `"<protocol>://localhost:<port>"`, the `service` clients pass to `distribute`.
    pub fn target(&self) -> String {
        format!("{}://localhost:{}", self.protocol, self.handle.port())
    }

    /// `localhost:<port>`, the `dispatcher_address` workers are given.
    pub fn address(&self) -> String {
        format!("localhost:{}", self.handle.port())
    }

    pub fn port(&self) -> u16 {
        self.handle.port()
    }
}
