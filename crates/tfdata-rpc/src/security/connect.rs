//! The client side: [`ClientSecurity`] (loaded from a
//! [`TransportSecurity`]) and [`RpcChannel`], the channel every tfdata
//! client calls through. It sends the bearer token on every call and turns
//! transport-security failures into UNAUTHENTICATED statuses that say what
//! is wrong, instead of a retried "transport error".

use std::error::Error as StdError;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use tfdata_core::{Error, Result};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{self, AlertDescription, CertificateError, ClientConfig};
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::Service;
use tonic::codegen::http::{HeaderValue, Request, Response, Uri, header};
use tonic::transport::{Channel, Endpoint};

use super::accept::ALPN_H2;
use super::config::{TlsConfig, TransportSecurity};
use super::pem;

type BoxError = Box<dyn StdError + Send + Sync>;

/// A client's security, loaded (files read and checked): clone it freely.
#[derive(Clone, Default)]
pub struct ClientSecurity {
    tls: Option<ClientTls>,
    /// `Bearer <token>`, marked sensitive (never indexed by HPACK, shown
    /// as "Sensitive" by `Debug`).
    authorization: Option<HeaderValue>,
}

#[derive(Clone)]
struct ClientTls {
    config: Arc<ClientConfig>,
    /// The CA file, for error messages.
    ca: Arc<Path>,
}

impl std::fmt::Debug for ClientSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSecurity")
            .field("tls_ca", &self.tls.as_ref().map(|t| &t.ca))
            .field(
                "auth_token",
                &self.authorization.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl TransportSecurity {
    /// This security loaded for clients: TLS when a CA is configured
    /// (presenting the process's certificate to servers that ask for one),
    /// and the token on every call.
    pub fn client(&self) -> Result<ClientSecurity> {
        ClientSecurity::load(self)
    }
}

impl ClientSecurity {
    pub fn plaintext() -> Self {
        ClientSecurity::default()
    }

    pub fn load(security: &TransportSecurity) -> Result<Self> {
        let tls = match &security.tls {
            Some(tls) => Some(ClientTls {
                config: Arc::new(client_config(tls)?),
                ca: Arc::from(tls.ca.as_path()),
            }),
            None => None,
        };
        let authorization = match &security.auth_token {
            Some(token) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
                    .map_err(|_| Error::InvalidConfig {
                        field: "auth_token",
                        reason: "the bearer token is not a valid header value".into(),
                    })?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        Ok(ClientSecurity { tls, authorization })
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A lazily connecting channel to `address` on `endpoint` (an
    /// `http://` endpoint with the caller's HTTP/2 settings): TLS on
    /// tfdata's own connector when configured, so every handshake failure
    /// is worded here. The endpoint's connect timeout covers the handshake.
    /// `via`: connect to this socket address instead of resolving the
    /// endpoint's host (one of the addresses a name resolves to); TLS still
    /// checks the certificate against the host's name.
    pub fn connect_lazy(
        &self,
        endpoint: Endpoint,
        address: &str,
        via: Option<SocketAddr>,
    ) -> RpcChannel {
        let channel = match (&self.tls, via) {
            (None, None) => endpoint.connect_lazy(),
            (None, Some(via)) => endpoint.connect_with_connector_lazy(PlainConnect { via }),
            (Some(tls), via) => endpoint.connect_with_connector_lazy(TlsConnect {
                tls: tls.clone(),
                via,
            }),
        };
        RpcChannel {
            inner: channel,
            authorization: self.authorization.clone(),
            peer: match via {
                Some(via) => Arc::from(format!("{address} ({via})").as_str()),
                None => Arc::from(address),
            },
            tls: self.tls.is_some(),
        }
    }
}

fn client_config(tls: &TlsConfig) -> Result<ClientConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Internal(format!("TLS protocol versions: {e}")))?
        .with_root_certificates(pem::roots(&tls.ca)?);
    let mut config = match tls.presented_identity() {
        Some(pair) => {
            let (certs, key) = pem::identity(pair, ["tls_client_cert", "tls_client_key"])?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| Error::InvalidConfig {
                    field: "tls_client_key",
                    reason: format!(
                        "the certificate {} and the key {} do not make an identity: {e}",
                        pair.cert.display(),
                        pair.key.display()
                    ),
                })?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(config)
}

/// Connects TCP to one given socket address, whatever the endpoint's host
/// (plaintext to one of the addresses a name resolves to).
#[derive(Clone)]
struct PlainConnect {
    via: SocketAddr,
}

type PlainIo = hyper_util::rt::TokioIo<TcpStream>;

impl Service<Uri> for PlainConnect {
    type Response = PlainIo;
    type Error = BoxError;
    type Future = BoxFuture<'static, std::result::Result<PlainIo, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::result::Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Uri) -> Self::Future {
        let via = self.via;
        Box::pin(async move {
            let tcp = TcpStream::connect(via).await?;
            tcp.set_nodelay(true)?;
            Ok(hyper_util::rt::TokioIo::new(tcp))
        })
    }
}

/// Connects TCP, then TLS, to the endpoint's host and port (or to `via`,
/// checking the certificate against the host's name all the same).
#[derive(Clone)]
struct TlsConnect {
    tls: ClientTls,
    via: Option<SocketAddr>,
}

type TlsIo = hyper_util::rt::TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;

impl Service<Uri> for TlsConnect {
    type Response = TlsIo;
    type Error = BoxError;
    type Future = BoxFuture<'static, std::result::Result<TlsIo, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::result::Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let tls = self.tls.clone();
        let via = self.via;
        Box::pin(async move {
            let (Some(host), Some(port)) = (uri.host(), uri.port_u16()) else {
                return Err(Status::invalid_argument(format!("{uri} has no host:port")).into());
            };
            let address = format!("{host}:{port}");
            // IPv6 literals come bracketed in URIs, bare in names.
            let host = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let name = ServerName::try_from(host.clone()).map_err(|e| {
                Status::invalid_argument(format!(
                    "{host:?} cannot be checked against a TLS certificate: {e}"
                ))
            })?;
            let tcp = match via {
                Some(via) => TcpStream::connect(via).await?,
                None => TcpStream::connect((host.as_str(), port)).await?,
            };
            tcp.set_nodelay(true)?;
            let stream = TlsConnector::from(Arc::clone(&tls.config))
                .connect(name, tcp)
                .await
                .map_err(|e| handshake_failure(&address, &tls.ca, &e))?;
            if stream.get_ref().1.alpn_protocol() != Some(ALPN_H2) {
                return Err(Status::unauthenticated(format!(
                    "TLS handshake with {address} failed: the server does not offer HTTP/2 \
                     (ALPN h2); it is not a gRPC server"
                ))
                .into());
            }
            Ok(hyper_util::rt::TokioIo::new(stream))
        })
    }
}

/// The status for a handshake that failed with `e`: UNAUTHENTICATED (never
/// retried) when TLS itself failed, UNAVAILABLE (retried) when the
/// connection broke, with a hint at the usual cause.
fn handshake_failure(address: &str, ca: &Path, e: &std::io::Error) -> BoxError {
    if let Some(tls) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        return Box::new(tls_failure(address, Some(ca), tls));
    }
    Box::new(Status::unavailable(format!(
        "TLS handshake with {address} failed: {e}; a server that does not serve TLS closes \
         the connection like this (TensorFlow's servers, and tfdata's without --tls-cert, \
         serve plaintext)"
    )))
}

/// UNAUTHENTICATED, saying what the TLS error `e` means for this connection.
fn tls_failure(address: &str, ca: Option<&Path>, e: &rustls::Error) -> Status {
    let ca = ca.map_or_else(
        || "the configured CA".to_string(),
        |p| p.display().to_string(),
    );
    let hint = match e {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            format!("the server's certificate is not signed by a CA in {ca}")
        }
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => "the server's certificate does not name the host this client connects to; \
              connect with a name or address the certificate lists"
            .into(),
        rustls::Error::AlertReceived(AlertDescription::CertificateRequired) => {
            "the server requires a client certificate (mutual TLS): set --tls-client-cert and \
             --tls-client-key (TFDATA_TLS_CLIENT_CERT, TFDATA_TLS_CLIENT_KEY)"
                .into()
        }
        rustls::Error::AlertReceived(
            AlertDescription::UnknownCA
            | AlertDescription::BadCertificate
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnsupportedCertificate,
        ) => "the server refused this client's certificate: it is not signed by a CA the \
              server trusts"
            .into(),
        rustls::Error::InvalidMessage(_)
        | rustls::Error::InappropriateMessage { .. }
        | rustls::Error::InappropriateHandshakeMessage { .. } => {
            "the server does not speak TLS; it may serve plaintext (TensorFlow's servers, and \
             tfdata's without --tls-cert, do)"
                .into()
        }
        _ => String::new(),
    };
    let hint = if hint.is_empty() {
        hint
    } else {
        format!(" ({hint})")
    };
    Status::unauthenticated(format!("TLS handshake with {address} failed: {e}{hint}"))
}

/// A channel to one server that sends the bearer token on every call and
/// explains transport-security failures (see the module docs).
#[derive(Clone)]
pub struct RpcChannel {
    inner: Channel,
    authorization: Option<HeaderValue>,
    peer: Arc<str>,
    tls: bool,
}

impl std::fmt::Debug for RpcChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcChannel")
            .field("peer", &self.peer)
            .field("tls", &self.tls)
            .finish()
    }
}

/// `e` as [`explain`] words it, else unchanged.
fn explained(e: tonic::transport::Error, peer: &str, tls: bool) -> BoxError {
    match explain(&e, peer, tls) {
        Some(status) => Box::new(status),
        None => Box::new(e),
    }
}

/// The status a transport failure means, if it is about security: a status
/// our connector produced, a TLS error (a TLS 1.3 client learns that its
/// certificate was refused only after the handshake), or a TLS-only
/// server's refusal of a plaintext client.
fn explain(e: &(dyn StdError + 'static), peer: &str, tls: bool) -> Option<Status> {
    let mut next = Some(e);
    // Error chains are short; the bound only guards against a cyclic one.
    for _ in 0..32 {
        let e = next?;
        if let Some(status) = e.downcast_ref::<Status>() {
            return Some(Status::new(status.code(), status.message()));
        }
        let rustls_error = e.downcast_ref::<rustls::Error>().or_else(|| {
            e.downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::get_ref)
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if let Some(tls_error) = rustls_error {
            return Some(tls_failure(peer, None, tls_error));
        }
        if let Some(alert) = e.downcast_ref::<std::io::Error>().and_then(alert_in_text) {
            return Some(tls_failure(
                peer,
                None,
                &rustls::Error::AlertReceived(alert),
            ));
        }
        if let Some(h2) = e.downcast_ref::<h2::Error>()
            && h2.reason() == Some(h2::Reason::INADEQUATE_SECURITY)
        {
            let message = if tls {
                format!("{peer} refused this connection as inadequately secured ({h2})")
            } else {
                format!(
                    "{peer} requires TLS and this client connects in plaintext: set --tls-ca \
                     (TFDATA_TLS_CA) to the CA that signed the server's certificate"
                )
            };
            return Some(Status::unauthenticated(message));
        }
        next = e.source();
    }
    None
}

/// The TLS alert an I/O error reports in words. After the handshake, an
/// alert reaches the client through HTTP/2, which keeps only the error's
/// kind and text (that of `rustls::Error::AlertReceived`): with TLS 1.3 a
/// client learns that its certificate was refused this way.
fn alert_in_text(e: &std::io::Error) -> Option<AlertDescription> {
    if e.kind() != std::io::ErrorKind::InvalidData {
        return None;
    }
    let text = e.to_string();
    let name = text.strip_prefix("received fatal alert: ")?;
    [
        AlertDescription::CertificateRequired,
        AlertDescription::UnknownCA,
        AlertDescription::BadCertificate,
        AlertDescription::CertificateUnknown,
        AlertDescription::UnsupportedCertificate,
        AlertDescription::CertificateExpired,
        AlertDescription::CertificateRevoked,
        AlertDescription::AccessDenied,
        AlertDescription::HandshakeFailure,
        AlertDescription::DecryptError,
    ]
    .into_iter()
    .find(|alert| format!("{alert:?}") == name)
}

impl Service<Request<Body>> for RpcChannel {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), BoxError>> {
        match self.inner.poll_ready(cx) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(explained(e, &self.peer, self.tls))),
            Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
            Poll::Pending => Poll::Pending,
        }
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        if let Some(value) = &self.authorization {
            request
                .headers_mut()
                .insert(header::AUTHORIZATION, value.clone());
        }
        ResponseFuture {
            inner: self.inner.call(request),
            peer: Arc::clone(&self.peer),
            tls: self.tls,
        }
    }
}

/// [`RpcChannel`]'s response: the channel's, with errors explained.
pub struct ResponseFuture {
    inner: tonic::transport::channel::ResponseFuture,
    peer: Arc<str>,
    tls: bool,
}

impl Future for ResponseFuture {
    type Output = std::result::Result<Response<Body>, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.inner).poll(cx) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(explained(e, &self.peer, self.tls))),
            Poll::Ready(Ok(response)) => Poll::Ready(Ok(response)),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alerts_are_recognised_in_the_words_http2_keeps() {
        // What rustls reports, as HTTP/2 passes it on: kind and text only.
        let kept =
            |e: rustls::Error| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string());
        let required = kept(rustls::Error::AlertReceived(
            AlertDescription::CertificateRequired,
        ));
        assert_eq!(
            alert_in_text(&required),
            Some(AlertDescription::CertificateRequired)
        );
        let status = explain(&required, "w:1", true).expect("explained");
        assert_eq!(status.code(), tonic::Code::Unauthenticated);
        assert!(status.message().contains("--tls-client-cert"), "{status:?}");
        let unknown_ca = kept(rustls::Error::AlertReceived(AlertDescription::UnknownCA));
        assert_eq!(
            alert_in_text(&unknown_ca),
            Some(AlertDescription::UnknownCA)
        );
        let other = std::io::Error::new(std::io::ErrorKind::InvalidData, "something else");
        assert_eq!(alert_in_text(&other), None);
        assert!(explain(&other, "w:1", true).is_none());
    }
}
