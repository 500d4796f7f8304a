//! [`serve`]: the dispatcher as a library function over a bound listener, and
//! [`DispatchServer`]: TensorFlow's in-process `DispatchServer` around it.

use std::net::TcpListener as StdTcpListener;
use std::sync::Arc;

use tfdata_core::Result;
use tfdata_proto::data::dispatcher_service_server::DispatcherServiceServer;
use tfdata_rpc::CancellationToken;
use tfdata_rpc::admin;
use tfdata_rpc::channel::MAX_MESSAGE_BYTES;
use tfdata_rpc::health::Health;
use tfdata_rpc::security::TransportSecurity;
use tfdata_rpc::server::{ServerHandle, bind};

use crate::config::DispatcherConfig;
use crate::dispatcher::{Dispatcher, SystemClock};
use crate::serving::grpc::DispatcherGrpc;
use crate::serving::grpc_heartbeat::HeartbeatFastPath;
use crate::serving::http::DispatcherSlot;
use crate::serving::status::StatusGrpc;
use crate::serving::{
    HttpTask, maintenance_loop, new_health, start_http, stop_http, warn_if_token_in_plaintext,
    watch_journal,
};
use crate::state::DispatcherState;
use tfdata_proto::tfdata::status::status_service_server::StatusServiceServer;

/// Runs a dispatcher on `listener` until `shutdown` fires, with its admin
/// HTTP endpoint on `config.http_port` if set (bound here; a port in use
/// is an error). With `config.high_availability`, as one of several
/// dispatchers sharing the `work_dir` ([`crate::serving::high_availability`]): it
/// then also returns an error when it loses the leader lease. Callers
/// that bind the HTTP port themselves (to print it) use
/// [`serve_with_http`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: DispatcherConfig,
    shutdown: CancellationToken,
) -> Result<()> {
    let http = config.http_port.map(admin::bind).transpose()?;
    serve_with_http(listener, http, config, shutdown).await
}

/// [`serve`] with the admin HTTP endpoint on `http` (if any; its port
/// need not be `config.http_port`).
pub async fn serve_with_http(
    listener: tokio::net::TcpListener,
    http: Option<StdTcpListener>,
    config: DispatcherConfig,
    shutdown: CancellationToken,
) -> Result<()> {
    config.validate()?;
    if config.high_availability.is_some() {
        return crate::serving::high_availability::serve(listener, http, config, shutdown).await;
    }
    let security = config.security.clone();
    serve_recovering(listener, http, &security, shutdown, move || {
        Dispatcher::new(config, Arc::new(SystemClock))
    })
    .await
}

/// Serves the admin endpoint (with `security`, the dispatcher's) while
/// `recover` builds the dispatcher (replaying its journal, in
/// fault-tolerant mode: `/healthz` answers, `/readyz` is 503 until it is
/// done), then serves the dispatcher.
pub async fn serve_recovering(
    listener: tokio::net::TcpListener,
    http: Option<StdTcpListener>,
    security: &TransportSecurity,
    shutdown: CancellationToken,
    recover: impl FnOnce() -> Result<Dispatcher> + Send + 'static,
) -> Result<()> {
    let health = new_health("replaying the journal");
    let slot = DispatcherSlot::default();
    let http = start_http(http, security, &slot, &health, &shutdown)?;
    // Recovery reads the journal from disk: keep it off the async threads.
    let recovered = tokio::task::spawn_blocking(recover)
        .await
        .map_err(|e| tfdata_core::Error::Internal(format!("dispatcher start-up failed: {e}")))
        .and_then(|r| r);
    let dispatcher = match recovered {
        Ok(d) => Arc::new(d),
        Err(e) => {
            health.set_unhealthy(format!("the dispatcher did not start: {e}"));
            if let Err(http_error) = stop_http(http, &shutdown).await {
                tracing::warn!(error = %http_error, "the HTTP endpoint failed too");
            }
            return Err(e);
        }
    };
    slot.set(Arc::clone(&dispatcher));
    serve_grpc(listener, dispatcher, health, http, shutdown).await
}

/// Serves an already constructed (and, if fault tolerant, recovered)
/// dispatcher, with its admin endpoint on `http` if given.
pub async fn serve_dispatcher(
    listener: tokio::net::TcpListener,
    http: Option<StdTcpListener>,
    dispatcher: Arc<Dispatcher>,
    shutdown: CancellationToken,
) -> Result<()> {
    let health = new_health("starting");
    let slot = DispatcherSlot::with(Arc::clone(&dispatcher));
    let http = start_http(
        http,
        &dispatcher.config().security,
        &slot,
        &health,
        &shutdown,
    )?;
    serve_grpc(listener, dispatcher, health, http, shutdown).await
}

async fn serve_grpc(
    listener: tokio::net::TcpListener,
    dispatcher: Arc<Dispatcher>,
    health: Health,
    http: HttpTask,
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
    let watch = tokio::spawn(watch_journal(
        Arc::clone(&dispatcher),
        health.clone(),
        shutdown.clone(),
    ));
    let status = StatusServiceServer::new(StatusGrpc(Arc::clone(&dispatcher)));
    let grpc_health = health.grpc_service().await;
    let service = DispatcherServiceServer::new(DispatcherGrpc(Arc::clone(&dispatcher)))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    // ClientHeartbeat from the encoded task lists (crate::serving::grpc_heartbeat).
    let service = HeartbeatFastPath::new(service, dispatcher, MAX_MESSAGE_BYTES);
    let stopping = {
        let (health, shutdown) = (health.clone(), shutdown.clone());
        async move {
            shutdown.cancelled().await;
            health.set_not_ready("stopping");
        }
    };
    // The listener is bound: connections queue until the server accepts
    // them, so the dispatcher is ready from here.
    health.set_ready();
    let result = tonic::transport::Server::builder()
        .layer(security.auth_layer())
        .add_service(service)
        .add_service(status)
        .add_service(grpc_health)
        .serve_with_incoming_shutdown(tfdata_rpc::server::incoming(listener, &security), stopping)
        .await;
    maintenance.abort();
    watch.abort();
    let http_result = stop_http(http, &shutdown).await;
    result
        .map_err(|e| tfdata_core::Error::Internal(format!("dispatcher gRPC server failed: {e}")))?;
    http_result?;
    tracing::info!(port, "tf.data service dispatcher stopped");
    Ok(())
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
    http_port: Option<u16>,
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
        if config.high_availability.is_some() {
            return Err(tfdata_core::Error::InvalidConfig {
                field: "high_availability",
                reason: "an in-process DispatchServer is always the only dispatcher; run \
                         several `tfdata dispatcher --leader-lease-ms` processes (or \
                         tfdata_dispatcher::serve) for high availability"
                    .into(),
            });
        }
        // Certificates and keys are read here too, so a bad file is an
        // error from the constructor rather than from `join()`.
        config.security.server()?;
        let listener = bind(config.port)?;
        let http = config.http_port.map(admin::bind).transpose()?;
        let http_port = match &http {
            Some(l) => Some(
                l.local_addr()
                    .map_err(|e| tfdata_core::Error::io("reading the bound HTTP port", e))?
                    .port(),
            ),
            None => None,
        };
        let protocol = config.protocol.clone();
        let dispatcher = Arc::new(Dispatcher::new(config, Arc::new(SystemClock))?);
        let serving = Arc::clone(&dispatcher);
        let handle = ServerHandle::new(
            "tfdata-dispatcher",
            listener,
            Box::new(move |listener, shutdown| {
                Box::pin(serve_dispatcher(listener, http, serving, shutdown))
            }),
        )?;
        Ok(DispatchServer {
            handle,
            protocol,
            http_port,
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

    /// The admin HTTP endpoint's port (`/metrics`, `/healthz`, `/readyz`),
    /// if `http_port` was set.
    pub fn http_port(&self) -> Option<u16> {
        self.http_port
    }

    /// The dispatcher itself: its metrics and [`Dispatcher::overview`].
    pub fn dispatcher(&self) -> &Arc<Dispatcher> {
        &self.dispatcher
    }
}
