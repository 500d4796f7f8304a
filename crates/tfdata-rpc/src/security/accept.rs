//! The server side: [`ServerSecurity`] (a TLS acceptor and the token check,
//! loaded from a [`TransportSecurity`]) and the connections it accepts.
//!
//! Handshakes run concurrently (at most [`MAX_PENDING_HANDSHAKES`], each
//! bounded by [`TLS_HANDSHAKE_TIMEOUT`]) so a slow client never holds up
//! the accept loop. A TLS port serves nothing in plaintext: a connection
//! whose first byte is not a TLS handshake record is closed, and a
//! plaintext HTTP/2 client (a gRPC client without TLS) is first told why
//! with a GOAWAY (INADEQUATE_SECURITY) that carries no gRPC answer.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tfdata_core::{Error, Result};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tonic::transport::server::{Connected, TcpConnectInfo};

use super::auth::RequireBearerTokenLayer;
use super::config::{Secret, TlsConfig, TransportSecurity};
use super::pem;

/// How long a client has to complete the TLS handshake.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in progress at once; further connections wait in the
/// listen backlog.
pub const MAX_PENDING_HANDSHAKES: usize = 256;
/// After refusing a plaintext client, how long (and how many bytes) its
/// remaining input is read and dropped, so the refusal is delivered
/// instead of being cut off by a TCP reset.
const PLAINTEXT_DRAIN_TIME: Duration = Duration::from_secs(1);
const PLAINTEXT_DRAIN_BYTES: usize = 64 << 10;
/// The first byte of every TLS connection (a handshake record).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;
/// HTTP/2's client connection preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// ALPN of gRPC.
pub const ALPN_H2: &[u8] = b"h2";
/// ALPN of the admin HTTP endpoint.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// A server's security, loaded (files read and checked): clone it freely.
#[derive(Clone, Default)]
pub struct ServerSecurity {
    tls: Option<TlsAcceptor>,
    auth_token: Option<Secret>,
}

impl std::fmt::Debug for ServerSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSecurity")
            .field("tls", &self.tls.is_some())
            .field("auth_token", &self.auth_token)
            .finish()
    }
}

impl TransportSecurity {
    /// This security loaded for a gRPC server (ALPN `h2`).
    pub fn server(&self) -> Result<ServerSecurity> {
        ServerSecurity::load(self, &[ALPN_H2])
    }

    /// This security loaded for the admin HTTP endpoint (ALPN `http/1.1`):
    /// HTTPS with the server's certificate when TLS is on, but client
    /// certificates are never required there, since kubelet probes and
    /// most scrapers cannot present one. The token (checked by the admin
    /// router on everything but `/healthz` and `/readyz`) guards the data.
    pub fn admin_server(&self) -> Result<ServerSecurity> {
        let mut admin = self.clone();
        if let Some(tls) = &mut admin.tls {
            tls.require_client_cert = false;
        }
        ServerSecurity::load(&admin, &[ALPN_HTTP1])
    }
}

impl ServerSecurity {
    pub fn plaintext() -> Self {
        ServerSecurity::default()
    }

    /// Reads and checks the server's certificate, key and (for mutual TLS)
    /// CA; `alpn` lists the application protocols offered (`h2` for gRPC;
    /// an HTTP server would add `http/1.1`).
    pub fn load(security: &TransportSecurity, alpn: &[&[u8]]) -> Result<Self> {
        security.validate_for_server()?;
        let tls = match &security.tls {
            Some(tls) => Some(TlsAcceptor::from(Arc::new(server_config(tls, alpn)?))),
            None => None,
        };
        Ok(ServerSecurity {
            tls,
            auth_token: security.auth_token.clone(),
        })
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    pub fn requires_token(&self) -> bool {
        self.auth_token.is_some()
    }

    /// The token check to put in front of every service of the server.
    pub fn auth_layer(&self) -> RequireBearerTokenLayer {
        RequireBearerTokenLayer::new(self.auth_token.clone())
    }

    /// The token check for requests whose path `is_open` refuses.
    pub fn auth_layer_with_open_paths(&self, is_open: fn(&str) -> bool) -> RequireBearerTokenLayer {
        RequireBearerTokenLayer::with_open_paths(self.auth_token.clone(), is_open)
    }

    /// The rustls configuration, for a server that runs its own accept
    /// loop.
    pub fn tls_acceptor(&self) -> Option<&TlsAcceptor> {
        self.tls.as_ref()
    }

    /// The connections to serve from `listener`: plaintext TCP, or TLS
    /// after a successful handshake (failed ones are logged and dropped).
    /// Nagle's algorithm is off on every connection.
    pub fn incoming(
        &self,
        listener: TcpListener,
    ) -> impl Stream<Item = io::Result<ServerIo>> + Send + 'static {
        let accepted = tokio_stream::wrappers::TcpListenerStream::new(listener).map(|accepted| {
            let stream = accepted?;
            stream.set_nodelay(true)?;
            Ok(stream)
        });
        match self.tls.clone() {
            None => accepted.map(|s| s.map(ServerIo::Plain)).left_stream(),
            Some(acceptor) => accepted
                .map(move |accepted| {
                    let acceptor = acceptor.clone();
                    async move {
                        match accepted {
                            Ok(stream) => accept_tls(acceptor, stream).await.map(Ok),
                            Err(e) => Some(Err(e)),
                        }
                    }
                })
                .buffer_unordered(MAX_PENDING_HANDSHAKES)
                .filter_map(futures::future::ready)
                .right_stream(),
        }
    }
}

fn server_config(tls: &TlsConfig, alpn: &[&[u8]]) -> Result<ServerConfig> {
    let identity = tls.identity.as_ref().ok_or_else(|| Error::InvalidConfig {
        field: "tls_cert",
        reason: "a TLS server needs its certificate and key".into(),
    })?;
    let (certs, key) = pem::identity(identity, ["tls_cert", "tls_key"])?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Internal(format!("TLS protocol versions: {e}")))?;
    let builder = if tls.require_client_cert {
        let verifier = WebPkiClientVerifier::builder_with_provider(pem::roots(&tls.ca)?, provider)
            .build()
            .map_err(|e| Error::InvalidConfig {
                field: "tls_ca",
                reason: format!("{}: {e}", tls.ca.display()),
            })?;
        builder.with_client_cert_verifier(verifier)
    } else {
        // Still read the CA now: the same process uses it as a client.
        pem::roots(&tls.ca)?;
        builder.with_no_client_auth()
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| Error::InvalidConfig {
            field: "tls_key",
            reason: format!(
                "the certificate {} and the key {} do not make an identity: {e}",
                identity.cert.display(),
                identity.key.display()
            ),
        })?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

/// The TLS connection on `stream`, or `None` (logged) if the client does
/// not complete a handshake in time.
async fn accept_tls(acceptor: TlsAcceptor, stream: TcpStream) -> Option<ServerIo> {
    let peer = stream
        .peer_addr()
        .map_or_else(|_| "an unknown peer".to_string(), |a| a.to_string());
    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, handshake(acceptor, stream)).await {
        Ok(Ok(io)) => Some(io),
        Ok(Err(Refusal::Plaintext { http2: true })) => {
            tracing::warn!(%peer, "refused a plaintext gRPC connection: this server requires TLS");
            None
        }
        Ok(Err(Refusal::Plaintext { http2: false })) => {
            tracing::warn!(%peer, "refused a connection that does not speak TLS");
            None
        }
        Ok(Err(Refusal::Closed)) => None,
        Ok(Err(Refusal::Failed(e))) => {
            tracing::warn!(%peer, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::warn!(%peer, timeout = ?TLS_HANDSHAKE_TIMEOUT, "TLS handshake timed out");
            None
        }
    }
}

enum Refusal {
    /// The client spoke something else than TLS (HTTP/2 in cleartext, say).
    Plaintext {
        http2: bool,
    },
    /// The client went away before sending anything.
    Closed,
    Failed(io::Error),
}

async fn handshake(acceptor: TlsAcceptor, stream: TcpStream) -> Result<ServerIo, Refusal> {
    let mut first = [0u8; H2_PREFACE.len()];
    let seen = stream.peek(&mut first).await.map_err(Refusal::Failed)?;
    match first[..seen].first() {
        None => Err(Refusal::Closed),
        Some(&TLS_HANDSHAKE_RECORD) => acceptor
            .accept(stream)
            .await
            .map(|tls| ServerIo::Tls(Box::new(tls)))
            .map_err(Refusal::Failed),
        Some(_) => {
            let http2 = H2_PREFACE.starts_with(&first[..seen]);
            refuse_plaintext(stream, http2).await;
            Err(Refusal::Plaintext { http2 })
        }
    }
}

/// The frames a plaintext HTTP/2 client gets: the server's (empty)
/// SETTINGS, which must come first, then GOAWAY with INADEQUATE_SECURITY
/// and the reason. No stream is ever answered.
pub(crate) fn plaintext_refusal_frames() -> Vec<u8> {
    const DEBUG: &[u8] = b"this tf.data service server requires TLS: connect with TLS \
        (TFDATA_TLS_CA or --tls-ca) to its port";
    const INADEQUATE_SECURITY: u32 = 0xc;
    let mut frames = Vec::with_capacity(9 + 9 + 8 + DEBUG.len());
    // SETTINGS: length 0, type 4, no flags, stream 0.
    frames.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    // GOAWAY: type 7, stream 0; last stream 0, the error code, the reason.
    let length = (8 + DEBUG.len()) as u32;
    frames.extend_from_slice(&length.to_be_bytes()[1..]);
    frames.extend_from_slice(&[7, 0, 0, 0, 0, 0]);
    frames.extend_from_slice(&0u32.to_be_bytes());
    frames.extend_from_slice(&INADEQUATE_SECURITY.to_be_bytes());
    frames.extend_from_slice(DEBUG);
    frames
}

/// Tells a plaintext HTTP/2 client why it is refused (others just get the
/// connection closed), then reads what it still sends for a bounded time,
/// so closing does not reset the connection before the refusal arrives.
async fn refuse_plaintext(mut stream: TcpStream, http2: bool) {
    if http2 {
        let _ = stream.write_all(&plaintext_refusal_frames()).await;
    }
    let _ = stream.shutdown().await;
    let drain = async {
        let mut buf = [0u8; 4096];
        let mut drained = 0;
        while drained < PLAINTEXT_DRAIN_BYTES {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    };
    let _ = tokio::time::timeout(PLAINTEXT_DRAIN_TIME, drain).await;
}

/// A served connection: plaintext or TLS.
pub enum ServerIo {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl Connected for ServerIo {
    type ConnectInfo = TcpConnectInfo;
    fn connect_info(&self) -> TcpConnectInfo {
        match self {
            ServerIo::Plain(s) => s.connect_info(),
            ServerIo::Tls(s) => s.get_ref().0.connect_info(),
        }
    }
}

impl AsyncRead for ServerIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ServerIo::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ServerIo::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ServerIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ServerIo::Plain(s) => Pin::new(s).poll_write(cx, buf),
            ServerIo::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    // Vectored writes matter: hyper writes a frame's header and its payload
    // (an element's buffers) in one call when the connection supports it.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ServerIo::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            ServerIo::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            ServerIo::Plain(s) => s.is_write_vectored(),
            ServerIo::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ServerIo::Plain(s) => Pin::new(s).poll_flush(cx),
            ServerIo::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ServerIo::Plain(s) => Pin::new(s).poll_shutdown(cx),
            ServerIo::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plaintext_refusal_is_settings_then_goaway() {
        let frames = plaintext_refusal_frames();
        assert_eq!(&frames[..9], &[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        let goaway = &frames[9..];
        let length = u32::from_be_bytes([0, goaway[0], goaway[1], goaway[2]]) as usize;
        assert_eq!(goaway[3], 7, "GOAWAY");
        assert_eq!(goaway.len(), 9 + length);
        assert_eq!(&goaway[13..17], &[0, 0, 0, 0xc], "INADEQUATE_SECURITY");
        assert!(String::from_utf8_lossy(&goaway[17..]).contains("requires TLS"));
    }
}
