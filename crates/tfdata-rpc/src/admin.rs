//! The admin HTTP endpoint a dispatcher or worker serves on a port of its
//! own (`http_port`), never on its gRPC port: TensorFlow peers see a pure
//! gRPC port, network policies can treat the two apart, and Prometheus
//! scrapes and kubelet probes (HTTP/1.1) need no protocol sniffing next to
//! gRPC's HTTP/2. (docs/operations.md says why at more length.)
//!
//! [`router`] gives the routes every server has:
//!
//! * `GET /metrics`: the server's metrics, OpenMetrics text (Prometheus
//!   text 0.0.4 for a client that asks only for `text/plain`);
//! * `GET /healthz`: 200 while the server is live, 503 with the reason;
//! * `GET /readyz`: 200 while it is ready, 503 with the reason.
//!
//! A server adds its own routes by merging an `axum::Router` into it (the
//! dispatcher's status page does), then runs it with [`serve`].
//!
//! Security follows the server's gRPC settings
//! ([`TransportSecurity::admin_server`]): HTTPS with the same certificate
//! when TLS is on (nothing is served in plaintext then), and the bearer
//! token on every path but the probes' ([`is_open_path`]).

use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use tfdata_core::{Error, Result};
use tokio_util::sync::CancellationToken;

use crate::health::Health;
use crate::metrics::Format;
#[cfg(doc)]
use crate::security::TransportSecurity;
use crate::security::{ServerIo, ServerSecurity};

/// The paths served without the bearer token: liveness and readiness,
/// which kubelet probes call and which tell nothing but a state.
pub fn is_open_path(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz")
}

/// After a failed accept (out of file descriptors, say), the pause before
/// the next, so the loop does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// Produces a scrape's text in a format: servers refresh gauges that are
/// computed from their state (under its async lock) before encoding.
pub type MetricsFn = Arc<dyn Fn(Format) -> BoxFuture<'static, String> + Send + Sync>;

/// The routes every server serves: `/metrics`, `/healthz`, `/readyz`.
pub fn router(health: Health, metrics: MetricsFn) -> Router {
    let live = health.clone();
    let ready = health;
    Router::new()
        .route(
            "/metrics",
            get(move |headers: axum::http::HeaderMap| {
                let metrics = Arc::clone(&metrics);
                let accept = headers
                    .get(header::ACCEPT)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                async move {
                    let format = Format::negotiate(accept.as_deref());
                    let text = metrics(format).await;
                    ([(header::CONTENT_TYPE, format.content_type())], text)
                }
            }),
        )
        .route(
            "/healthz",
            get(move || {
                let status = live.status();
                async move { plain(status.live, "ok", &status.reason) }
            }),
        )
        .route(
            "/readyz",
            get(move || {
                let status = ready.status();
                async move { plain(status.live && status.ready, "ready", &status.reason) }
            }),
        )
        .fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                "not found; this endpoint serves /metrics, /healthz and /readyz\n",
            )
        })
}

fn plain(ok: bool, ok_text: &str, reason: &str) -> Response {
    if ok {
        (StatusCode::OK, format!("{ok_text}\n")).into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")).into_response()
    }
}

/// Binds the admin port `0.0.0.0:<port>` (0 picks a free one). A port in
/// use is an error that says it is the HTTP port.
pub fn bind(port: u16) -> Result<StdTcpListener> {
    crate::server::bind(port).map_err(|e| match e {
        Error::Bind { address, source } => Error::Bind {
            address: format!("{address} (the HTTP port, http_port / --http-port)"),
            source,
        },
        other => other,
    })
}

/// How long a stopping server waits for its admin endpoint's open
/// connections to finish before dropping them.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Waits (at most [`STOP_GRACE`]) for a spawned [`serve`] to end once its
/// shutdown fired; its error, if it failed. A connection that never
/// finishes (a client stalled mid-request) is dropped, not waited for.
pub async fn stopped(task: tokio::task::JoinHandle<Result<()>>) -> Result<()> {
    let abort = task.abort_handle();
    match tokio::time::timeout(STOP_GRACE, task).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) if e.is_cancelled() => Ok(()),
        Ok(Err(e)) => Err(Error::Internal(format!(
            "the HTTP endpoint's task failed: {e}"
        ))),
        Err(_) => {
            tracing::warn!("HTTP connections still open after the stop grace; dropping them");
            abort.abort();
            Ok(())
        }
    }
}

/// Serves `router` on `listener` until `shutdown` fires, with `security`
/// (from [`TransportSecurity::admin_server`]): TLS handshakes and plaintext
/// refusals as on the gRPC port, the token on every path but
/// [`is_open_path`]'s.
pub async fn serve(
    listener: StdTcpListener,
    router: Router,
    shutdown: CancellationToken,
    security: ServerSecurity,
) -> Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)
        .map_err(|e| Error::io("registering the HTTP listener", e))?;
    let local = listener
        .local_addr()
        .map_err(|e| Error::io("reading the HTTP port", e))?;
    tracing::info!(
        port = local.port(),
        tls = security.is_tls(),
        auth_token = security.requires_token(),
        "admin HTTP endpoint serving"
    );
    let router = router.layer(security.auth_layer_with_open_paths(is_open_path));
    let listener = Accepted {
        connections: Box::pin(security.incoming(listener)),
        local,
    };
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
        .map_err(|e| Error::io("serving the HTTP endpoint", e))
}

/// The connections [`ServerSecurity::incoming`] accepts (TLS already
/// handshaken), as axum's listener.
struct Accepted {
    connections: Pin<Box<dyn Stream<Item = std::io::Result<ServerIo>> + Send>>,
    local: SocketAddr,
}

impl axum::serve::Listener for Accepted {
    type Io = ServerIo;
    /// The peer's address, when the socket still knows it.
    type Addr = Option<SocketAddr>;

    async fn accept(&mut self) -> (ServerIo, Option<SocketAddr>) {
        loop {
            match self.connections.next().await {
                Some(Ok(io)) => {
                    use tonic::transport::server::Connected;
                    let peer = io.connect_info().remote_addr();
                    return (io, peer);
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "accepting an HTTP connection failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
                // The listener's stream never ends; were it to, accept no more.
                None => std::future::pending::<()>().await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Option<SocketAddr>> {
        Ok(Some(self.local))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A raw HTTP/1.1 GET, as kubelet or Prometheus would send it.
    async fn get(port: u16, path: &str) -> (u16, String, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        let code = head.split(' ').nth(1).unwrap().parse().unwrap();
        (code, head.to_string(), body.to_string())
    }

    #[tokio::test]
    async fn serves_metrics_health_and_readiness() {
        let health = Health::new(&[], "starting up");
        let metrics: MetricsFn = Arc::new(|format| {
            Box::pin(async move {
                match format {
                    Format::OpenMetrics => "# EOF\n".to_string(),
                    Format::PrometheusText => String::new(),
                }
            })
        });
        let listener = bind(0).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = CancellationToken::new();
        let server = tokio::spawn(serve(
            listener,
            router(health.clone(), metrics),
            stop.clone(),
            ServerSecurity::plaintext(),
        ));

        let (code, head, body) = get(port, "/metrics").await;
        assert_eq!(code, 200);
        assert!(
            head.to_ascii_lowercase()
                .contains("application/openmetrics-text"),
            "{head}"
        );
        assert!(body.ends_with("# EOF\n"), "{body}");
        assert_eq!(get(port, "/healthz").await.0, 200);
        let (code, _, body) = get(port, "/readyz").await;
        assert_eq!((code, body.as_str()), (503, "starting up\n"));
        health.set_ready();
        assert_eq!(get(port, "/readyz").await.0, 200);
        health.set_unhealthy("journal failed");
        let (code, _, body) = get(port, "/healthz").await;
        assert_eq!((code, body.as_str()), (503, "journal failed\n"));
        assert_eq!(get(port, "/readyz").await.0, 503);
        assert_eq!(get(port, "/nope").await.0, 404);

        stop.cancel();
        server.await.unwrap().unwrap();
    }

    /// A client stalled mid-request does not hold the server's stop.
    #[tokio::test]
    async fn a_stalled_client_does_not_hold_the_stop() {
        use tokio::io::AsyncWriteExt;
        let metrics: MetricsFn = Arc::new(|_| Box::pin(async { String::new() }));
        let listener = bind(0).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = CancellationToken::new();
        let server = tokio::spawn(serve(
            listener,
            router(Health::new(&[], "x"), metrics),
            stop.clone(),
            ServerSecurity::plaintext(),
        ));
        let mut stalled = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        stalled
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        stop.cancel();
        let started = std::time::Instant::now();
        stopped(server).await.unwrap();
        assert!(started.elapsed() < STOP_GRACE + std::time::Duration::from_secs(1));
        drop(stalled);
    }

    /// A raw GET with an `authorization` header.
    async fn get_with(port: u16, path: &str, authorization: &str) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: {authorization}\r\n\
             Connection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response.split(' ').nth(1).unwrap().parse().unwrap()
    }

    #[tokio::test]
    async fn the_token_guards_every_path_but_the_probes() {
        let security = crate::security::TransportSecurity {
            tls: None,
            auth_token: Some(crate::security::Secret::new("t0ken").unwrap()),
        };
        let metrics: MetricsFn = Arc::new(|_| Box::pin(async { "# EOF\n".to_string() }));
        let listener = bind(0).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = CancellationToken::new();
        let health = Health::new(&[], "x");
        health.set_ready();
        let server = tokio::spawn(serve(
            listener,
            router(health, metrics),
            stop.clone(),
            security.admin_server().unwrap(),
        ));
        assert_eq!(get(port, "/healthz").await.0, 200);
        assert_eq!(get(port, "/readyz").await.0, 200);
        let (code, head, _) = get(port, "/metrics").await;
        assert_eq!(code, 401);
        assert!(head.contains("www-authenticate: Bearer"), "{head}");
        assert_eq!(get(port, "/healthz/more").await.0, 401);
        assert_eq!(get_with(port, "/metrics", "Bearer wrong").await, 401);
        assert_eq!(get_with(port, "/metrics", "Bearer t0ken").await, 200);
        stop.cancel();
        server.await.unwrap().unwrap();
    }

    #[test]
    fn a_port_in_use_names_the_http_port() {
        let held = bind(0).unwrap();
        let port = held.local_addr().unwrap().port();
        let err = bind(port).unwrap_err().to_string();
        assert!(
            err.contains(&port.to_string()) && err.contains("HTTP port"),
            "{err}"
        );
    }
}
