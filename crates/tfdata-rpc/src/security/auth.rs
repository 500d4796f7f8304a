//! The shared bearer token on the server side: a tower layer in front of
//! every service of a server, refusing calls whose `authorization` header
//! is not `Bearer <token>` before any service sees them.

use std::task::{Context, Poll};

use futures::future::{Either, Ready, ready};
use tonic::codegen::Service;
use tonic::codegen::http::{HeaderValue, Request, Response, StatusCode, header};

use super::config::{Secret, constant_time_eq};

/// Paths served without a token: the gRPC health service, which
/// Kubernetes' probes call and cannot authenticate to. It tells nothing
/// but "serving".
pub const UNAUTHENTICATED_PATH_PREFIXES: &[&str] = &["/grpc.health.v1.Health/"];

/// Whether a gRPC server serves `path` without a token.
fn grpc_path_is_open(path: &str) -> bool {
    UNAUTHENTICATED_PATH_PREFIXES
        .iter()
        .any(|prefix| path.starts_with(prefix))
}

/// Why a request is refused, as its caller will read it.
fn refusal(request_token: Option<&HeaderValue>, token: &Secret) -> Option<&'static str> {
    let Some(value) = request_token else {
        return Some(
            "missing bearer token: this tf.data service server requires an \
                     `authorization: Bearer <token>` header (set TFDATA_AUTH_TOKEN or \
                     --auth-token-file)",
        );
    };
    let presented = value
        .as_bytes()
        .strip_prefix(b"Bearer ")
        .or_else(|| value.as_bytes().strip_prefix(b"bearer "));
    match presented {
        Some(presented) if constant_time_eq(presented, token.expose().as_bytes()) => None,
        Some(_) => Some("wrong bearer token: the token this client sent is not this server's"),
        None => Some("malformed authorization header: expected `Bearer <token>`"),
    }
}

/// Applies [`RequireBearerToken`] to a server's services.
#[derive(Clone, Debug)]
pub struct RequireBearerTokenLayer {
    token: Option<Secret>,
    is_open: fn(&str) -> bool,
}

impl RequireBearerTokenLayer {
    /// Checks `token` on every call but gRPC health checks
    /// ([`UNAUTHENTICATED_PATH_PREFIXES`]); `None` lets every call through.
    pub fn new(token: Option<Secret>) -> Self {
        Self::with_open_paths(token, grpc_path_is_open)
    }

    /// Checks `token` on every request whose path `is_open` refuses.
    pub fn with_open_paths(token: Option<Secret>, is_open: fn(&str) -> bool) -> Self {
        RequireBearerTokenLayer { token, is_open }
    }
}

impl<S> tower_layer::Layer<S> for RequireBearerTokenLayer {
    type Service = RequireBearerToken<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RequireBearerToken {
            inner,
            token: self.token.clone(),
            is_open: self.is_open,
        }
    }
}

/// The service [`RequireBearerTokenLayer`] makes: `inner` behind the token
/// check. A refused gRPC call gets UNAUTHENTICATED with a message saying
/// what was wrong; another HTTP request gets 401.
#[derive(Clone, Debug)]
pub struct RequireBearerToken<S> {
    inner: S,
    token: Option<Secret>,
    is_open: fn(&str) -> bool,
}

impl<S, B, ResBody> Service<Request<B>> for RequireBearerToken<S>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
    ResBody: Default,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Either<Ready<Result<Response<ResBody>, S::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let Some(token) = &self.token else {
            return Either::Right(self.inner.call(request));
        };
        let path = request.uri().path();
        if (self.is_open)(path) {
            return Either::Right(self.inner.call(request));
        }
        match refusal(request.headers().get(header::AUTHORIZATION), token) {
            None => Either::Right(self.inner.call(request)),
            Some(message) => {
                tracing::debug!(path, reason = message, "refused an unauthenticated call");
                Either::Left(ready(Ok(refused(&request, message))))
            }
        }
    }
}

/// A refusal: gRPC's trailers-only UNAUTHENTICATED for gRPC calls, HTTP 401
/// for anything else.
fn refused<B, ResBody: Default>(request: &Request<B>, message: &'static str) -> Response<ResBody> {
    let grpc = request
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    let mut response = Response::new(ResBody::default());
    if !grpc {
        *response.status_mut() = StatusCode::UNAUTHORIZED;
    }
    let headers = response.headers_mut();
    if grpc {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        headers.insert("grpc-status", HeaderValue::from_static("16"));
        // The messages above are plain ASCII without '%': valid as they are.
        headers.insert("grpc-message", HeaderValue::from_static(message));
    } else {
        headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::convert::Infallible;

    /// Answers 200 with the body "served".
    #[derive(Clone)]
    struct Served;
    impl Service<Request<()>> for Served {
        type Response = Response<String>;
        type Error = Infallible;
        type Future = Ready<Result<Response<String>, Infallible>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: Request<()>) -> Self::Future {
            ready(Ok(Response::new("served".to_string())))
        }
    }

    fn call(token: Option<&str>, path: &str, auth: Option<&str>, grpc: bool) -> Response<String> {
        use tower_layer::Layer;
        let layer = RequireBearerTokenLayer::new(token.map(|t| Secret::new(t).unwrap()));
        let mut service = layer.layer(Served);
        let mut request = Request::builder().uri(path);
        if let Some(auth) = auth {
            request = request.header(header::AUTHORIZATION, auth);
        }
        if grpc {
            request = request.header(header::CONTENT_TYPE, "application/grpc");
        }
        use futures::FutureExt;
        service
            .call(request.body(()).unwrap())
            .now_or_never()
            .expect("the layer answers at once")
            .unwrap()
    }

    fn grpc_message(r: &Response<String>) -> Option<&str> {
        r.headers().get("grpc-message").map(|v| v.to_str().unwrap())
    }

    const PATH: &str = "/tensorflow.data.DispatcherService/GetVersion";

    #[test]
    fn the_right_token_passes() {
        let r = call(Some("tok"), PATH, Some("Bearer tok"), true);
        assert_eq!(r.body(), "served");
        // Without a configured token, nothing is checked.
        assert_eq!(call(None, PATH, None, true).body(), "served");
    }

    #[test]
    fn missing_wrong_and_malformed_tokens_are_refused_with_unauthenticated() {
        for (auth, needle) in [
            (None, "missing bearer token"),
            (Some("Bearer nope"), "wrong bearer token"),
            (Some("Bearer toke"), "wrong bearer token"),
            (Some("tok"), "malformed authorization header"),
        ] {
            let r = call(Some("tok"), PATH, auth, true);
            assert_eq!(r.body(), "", "{auth:?} was served");
            assert_eq!(
                r.status(),
                StatusCode::OK,
                "gRPC refusals are trailers-only"
            );
            assert_eq!(r.headers()["grpc-status"], "16");
            assert!(grpc_message(&r).unwrap().contains(needle), "{auth:?}");
        }
    }

    #[test]
    fn plain_http_requests_get_401() {
        let r = call(Some("tok"), "/metrics", None, false);
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(r.headers()[header::WWW_AUTHENTICATE], "Bearer");
        assert_eq!(r.body(), "");
    }

    #[test]
    fn the_health_service_needs_no_token() {
        let r = call(Some("tok"), "/grpc.health.v1.Health/Check", None, true);
        assert_eq!(r.body(), "served");
    }

    #[test]
    fn constant_time_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(constant_time_eq(b"", b""));
    }
}
