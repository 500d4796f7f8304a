//! [`serve`]: the worker as a library function over a bound listener, and
//! [`WorkerServer`]: TensorFlow's in-process `WorkerServer` around it.

use std::net::TcpListener as StdTcpListener;
use std::sync::Arc;
use std::time::Duration;

use tfdata_core::{Error, Result};
use tfdata_proto::data::worker_service_server::WorkerServiceServer;
use tfdata_rpc::CancellationToken;
use tfdata_rpc::admin::{self, MetricsFn};
use tfdata_rpc::channel::MAX_MESSAGE_BYTES;
use tfdata_rpc::health::Health;
use tfdata_rpc::server::{ServerHandle, bind};
use tonic::server::NamedService;

use crate::config::WorkerConfig;
use crate::grpc::WorkerGrpc;
use crate::stream::ElementStreamServer;
use crate::worker::Worker;

/// When to drain before stopping, and for how long at most (see
/// [`crate::drain`]).
#[derive(Debug, Clone)]
pub struct Drain {
    /// Cancelled to start draining (the CLI cancels it on SIGTERM).
    pub signal: CancellationToken,
    /// The longest a drain takes; then the worker stops regardless.
    pub timeout: std::time::Duration,
}

/// Runs a worker on `listener` until `shutdown` fires or registration fails
/// for good (for example a protocol version mismatch), with its admin HTTP
/// endpoint on `config.http_port` if set (bound here; a port in use is an
/// error). Callers that bind the HTTP port themselves use
/// [`serve_with_http`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: WorkerConfig,
    shutdown: CancellationToken,
) -> Result<()> {
    serve_draining(listener, config, shutdown, None).await
}

/// [`serve`], and when `drain`'s signal fires: drain (bounded by its
/// timeout), then stop as on `shutdown`. `shutdown` during a drain stops at
/// once.
pub async fn serve_draining(
    listener: tokio::net::TcpListener,
    config: WorkerConfig,
    shutdown: CancellationToken,
    drain: Option<Drain>,
) -> Result<()> {
    let http = config.http_port.map(admin::bind).transpose()?;
    serve_with_http(listener, http, config, shutdown, drain).await
}

/// A worker is not ready while its dispatcher has not answered a heartbeat
/// for this many heartbeat intervals (and at least `MIN_SILENCE`).
pub const UNREADY_AFTER_INTERVALS: u32 = 3;
const MIN_SILENCE: Duration = Duration::from_secs(3);

/// [`serve_draining`] with the admin HTTP endpoint on `http` (if any).
pub async fn serve_with_http(
    listener: tokio::net::TcpListener,
    http: Option<StdTcpListener>,
    config: WorkerConfig,
    shutdown: CancellationToken,
    drain: Option<Drain>,
) -> Result<()> {
    config.validate()?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::io("reading the bound port", e))?
        .port();
    let address = config.resolved_worker_address(port);
    let quiet_period = config.shutdown_quiet_period;
    let security = config.security.server()?;
    let admin_security = config.security.admin_server()?;
    let heartbeat_interval = config.heartbeat_interval;
    let (worker, completions) = Worker::new(config, address.clone(), shutdown.clone())?;
    tracing::info!(
        %address,
        tls = security.is_tls(),
        auth_token = security.requires_token(),
        jpeg = tfdata_dataset::kernels::jpeg_code_path(),
        "tf.data service worker serving"
    );
    if security.requires_token() && !security.is_tls() {
        tracing::warn!(
            "a bearer token is required but TLS is off: tokens cross the network in \
             plaintext (set --tls-cert, --tls-key and --tls-ca)"
        );
    }

    let health = Health::new(
        &[<WorkerServiceServer<WorkerGrpc> as NamedService>::NAME],
        "not registered with the dispatcher yet",
    );
    let http_stop = CancellationToken::new();
    let http = http.map(|listener| {
        let metrics: MetricsFn = {
            let worker = Arc::clone(&worker);
            Arc::new(move |format| {
                let text = worker.encode_metrics(format);
                Box::pin(async move { text })
            })
        };
        let router = admin::router(health.clone(), metrics);
        tokio::spawn(admin::serve(
            listener,
            router,
            http_stop.clone(),
            admin_security.clone(),
        ))
    });
    let service = WorkerServiceServer::new(WorkerGrpc(Arc::clone(&worker)))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    // tfdata readers stream elements; TensorFlow's never ask for it, so an
    // unknown-service answer (UNIMPLEMENTED) is what they would get anyway.
    let element_stream = worker
        .config()
        .element_stream
        .then(|| ElementStreamServer(Arc::clone(&worker)));
    let server_stop = CancellationToken::new();
    let grpc = tokio::spawn(
        tfdata_rpc::server::builder()
            // Every service, the element stream included, behind the token.
            .layer(security.auth_layer())
            .add_service(service)
            .add_optional_service(element_stream)
            .add_service(health.grpc_service().await)
            .serve_with_incoming_shutdown(
                tfdata_rpc::server::incoming(listener, &security),
                server_stop.clone().cancelled_owned(),
            ),
    );
    let completion = tokio::spawn(Arc::clone(&worker).completion_loop(completions));
    let readiness = tokio::spawn(follow_readiness(
        Arc::clone(&worker),
        health.clone(),
        heartbeat_interval,
    ));

    let drain_signal = drain
        .as_ref()
        .map_or_else(CancellationToken::new, |d| d.signal.clone());
    let registered = tokio::select! {
        registered = worker.register() => registered,
        // Nothing to drain before registering.
        () = drain_signal.cancelled() => {
            shutdown.cancel();
            Err(Error::Cancelled("draining before registering".into()))
        }
    };
    let outcome = match registered {
        Ok(()) => {
            let heartbeats = tokio::spawn(Arc::clone(&worker).heartbeat_loop());
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = drain_signal.cancelled() => {
                    let timeout = drain.as_ref().map_or_else(Default::default, |d| d.timeout);
                    tokio::select! {
                        _ = crate::drain::drain(&worker, timeout) => {}
                        () = shutdown.cancelled() => {
                            tracing::info!(%address, "stopping before the drain finished");
                        }
                    }
                    shutdown.cancel();
                }
            }
            heartbeats.abort();
            readiness.abort();
            health.set_not_ready("stopping");
            worker.announce_stop().await;
            Ok(())
        }
        Err(e) if shutdown.is_cancelled() => {
            tracing::debug!(error = %e, "stopped before registering");
            Ok(())
        }
        Err(e) => {
            tracing::error!(%address, error = %e, "worker cannot register with the dispatcher");
            shutdown.cancel();
            Err(e)
        }
    };
    readiness.abort();
    health.set_not_ready("stopping");
    if !quiet_period.is_zero() {
        tokio::time::sleep(quiet_period).await;
    }
    server_stop.cancel();
    http_stop.cancel();
    completion.abort();
    match grpc.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(Error::Internal(format!("worker gRPC server failed: {e}"))),
        Err(e) => {
            return Err(Error::Internal(format!(
                "worker gRPC server task failed: {e}"
            )));
        }
    }
    if let Some(http) = http {
        admin::stopped(http).await?;
    }
    tracing::info!(%address, "tf.data service worker stopped");
    outcome
}

/// Keeps `health` ready while the worker is registered and its dispatcher
/// answers heartbeats: not ready after [`UNREADY_AFTER_INTERVALS`] heartbeat
/// intervals (at least [`MIN_SILENCE`]) without an answer, ready again at
/// the next answer.
async fn follow_readiness(worker: Arc<Worker>, health: Health, heartbeat_interval: Duration) {
    let allowed = (heartbeat_interval * UNREADY_AFTER_INTERVALS).max(MIN_SILENCE);
    let period = heartbeat_interval.min(Duration::from_secs(1));
    worker.registered().await;
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // The first tick is immediate: ready as soon as registered.
        tick.tick().await;
        let silent = worker.since_heartbeat_answered();
        if silent > allowed {
            health.set_not_ready(format!(
                "the dispatcher has not answered a heartbeat for {} s (more than {} heartbeat intervals)",
                silent.as_secs(),
                UNREADY_AFTER_INTERVALS
            ));
        } else {
            health.set_ready();
        }
    }
}

/// An in-process worker, like TensorFlow's
/// `tf.data.experimental.service.WorkerServer`.
pub struct WorkerServer {
    handle: ServerHandle,
    address: String,
    http_port: Option<u16>,
}

impl Drop for WorkerServer {
    fn drop(&mut self) {
        tfdata_rpc::local_workers::remove(&self.address);
    }
}

impl WorkerServer {
    /// Creates and starts a worker. Registration with the dispatcher happens
    /// in the background; a fatal registration error ends the worker and is
    /// returned by [`join`](Self::join).
    pub fn new(config: WorkerConfig) -> Result<Self> {
        let server = Self::new_stopped(config)?;
        server.start()?;
        Ok(server)
    }

    /// Creates a worker bound to its port but not running until [`start`](Self::start).
    pub fn new_stopped(config: WorkerConfig) -> Result<Self> {
        config.validate()?;
        // Certificates and keys are read here too, so a bad file is an
        // error from the constructor rather than from `join()`.
        config.security.server()?;
        config.security.client()?;
        let listener = bind(config.port)?;
        let port = listener
            .local_addr()
            .map_err(|e| Error::io("reading the bound port", e))?
            .port();
        let address = config.resolved_worker_address(port);
        let http = config.http_port.map(admin::bind).transpose()?;
        let http_port = match &http {
            Some(l) => Some(
                l.local_addr()
                    .map_err(|e| Error::io("reading the bound HTTP port", e))?
                    .port(),
            ),
            None => None,
        };
        let handle = ServerHandle::new(
            "tfdata-worker",
            listener,
            Box::new(move |listener, shutdown| {
                Box::pin(serve_with_http(listener, http, config, shutdown, None))
            }),
        )?;
        tfdata_rpc::local_workers::add(&address);
        Ok(WorkerServer {
            handle,
            address,
            http_port,
        })
    }

    pub fn start(&self) -> Result<()> {
        self.handle.start()
    }

    pub fn join(&self) -> Result<()> {
        self.handle.join()
    }

    /// [`join`](Self::join), waiting at most `timeout`: `None` while it runs.
    pub fn join_timeout(&self, timeout: std::time::Duration) -> Option<Result<()>> {
        self.handle.join_timeout(timeout)
    }

    pub fn stop(&self) {
        tfdata_rpc::local_workers::remove(&self.address);
        self.handle.stop()
    }

    /// Whether the worker has stopped (for example after a fatal registration error).
    pub fn has_stopped(&self) -> bool {
        self.handle.has_ended()
    }

    /// The address the worker advertises (its identity at the dispatcher).
    pub fn address(&self) -> &str {
        &self.address
    }

    pub fn port(&self) -> u16 {
        self.handle.port()
    }

    /// The admin HTTP endpoint's port (`/metrics`, `/healthz`, `/readyz`),
    /// if `http_port` was set.
    pub fn http_port(&self) -> Option<u16> {
        self.http_port
    }
}
