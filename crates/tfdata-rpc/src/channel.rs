//! Channels to dispatchers and workers, secured as the caller's
//! [`ClientSecurity`] says (plaintext by default).

use std::time::Duration;

use tfdata_core::{Error, Result};
use tfdata_proto::data::dispatcher_service_client::DispatcherServiceClient;
use tfdata_proto::data::worker_service_client::WorkerServiceClient;
use tonic::transport::Endpoint;

use crate::security::{ClientSecurity, RpcChannel};

/// Largest message any tfdata server or client accepts or sends. tonic's
/// default of 4 MiB breaks real elements; TensorFlow uses "unlimited" for
/// servers and worker clients and INT32_MAX for dispatcher clients.
pub const MAX_MESSAGE_BYTES: usize = i32::MAX as usize;

/// How long establishing a TCP connection may take before the call fails as
/// UNAVAILABLE (and is retried by whoever retries it).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The only transport protocols tfdata speaks. `grpc+local` (gRPC local TCP
/// credentials) is plaintext on loopback, which is what we serve. TLS is not
/// a protocol name: a `grpc://` address is reached over TLS when the
/// caller's security configures it (docs/security.md).
pub const SUPPORTED_PROTOCOLS: [&str; 2] = ["grpc", "grpc+local"];

/// Splits `"[<protocol>://]<address>"` as TensorFlow's `distribute` does.
pub fn parse_service(service: &str) -> Result<(String, String)> {
    let parts: Vec<&str> = service.split("://").collect();
    let (protocol, address) = match parts.as_slice() {
        [address] => ("grpc", *address),
        [protocol, address] => (*protocol, *address),
        _ => {
            return Err(Error::InvalidArgument(format!(
                "service address {service:?} has more than one \"://\""
            )));
        }
    };
    if address.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "service address {service:?} has no host:port"
        )));
    }
    check_protocol(protocol)?;
    Ok((protocol.to_string(), address.to_string()))
}

pub fn check_protocol(protocol: &str) -> Result<()> {
    if SUPPORTED_PROTOCOLS.contains(&protocol) {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "unsupported protocol {protocol:?}; tfdata supports {SUPPORTED_PROTOCOLS:?}"
        )))
    }
}

/// A lazily connecting channel to `host:port`: creating it never blocks, and
/// an unreachable peer shows up as UNAVAILABLE on the first call. It must be
/// created inside a tokio runtime (its connection task runs there). With
/// TLS in `security`, the handshake checks that the server's certificate
/// names `host`.
pub fn channel(address: &str, security: &ClientSecurity) -> Result<RpcChannel> {
    channel_via(address, None, security)
}

/// [`channel`], connecting to `via` (one of the socket addresses `address`'s
/// host resolves to) when given instead of resolving the host; the HTTP/2
/// authority and a TLS certificate check still use `address`.
pub fn channel_via(
    address: &str,
    via: Option<std::net::SocketAddr>,
    security: &ClientSecurity,
) -> Result<RpcChannel> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(Error::FailedPrecondition(format!(
            "a gRPC channel to {address} must be created inside a tokio runtime"
        )));
    }
    let endpoint = Endpoint::from_shared(format!("http://{address}"))
        .map_err(|e| Error::InvalidArgument(format!("invalid address {address:?}: {e}")))?;
    let endpoint = endpoint
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .initial_stream_window_size(crate::server::STREAM_WINDOW_BYTES)
        .initial_connection_window_size(crate::server::CONNECTION_WINDOW_BYTES)
        .max_frame_size(crate::server::MAX_FRAME_BYTES)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_while_idle(true);
    Ok(security.connect_lazy(endpoint, address, via))
}

pub fn dispatcher_client(channel: RpcChannel) -> DispatcherServiceClient<RpcChannel> {
    DispatcherServiceClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

/// The path of tfdata's element stream (see `proto/tfdata/stream.proto`).
pub const STREAM_ELEMENTS_PATH: &str = "/tfdata.stream.ElementStream/StreamElements";

/// Opens tfdata's element stream on a tfdata worker, through
/// [`crate::raw_grpc`] (batches decoded from the HTTP/2 frames as they
/// arrived, not copied into one buffer first).
pub async fn open_element_stream<S>(
    channel: RpcChannel,
    requests: S,
) -> Result<crate::raw_grpc::MessageReader<tonic::body::Body>, tonic::Status>
where
    S: futures::Stream<Item = tfdata_proto::tfdata::stream::StreamRequest> + Send + Unpin + 'static,
{
    use futures::StreamExt;
    let requests = requests.map(|r| crate::raw_grpc::small_message(&r));
    crate::raw_grpc::open_stream(channel, STREAM_ELEMENTS_PATH, requests, MAX_MESSAGE_BYTES).await
}

pub fn worker_client(channel: RpcChannel) -> WorkerServiceClient<RpcChannel> {
    WorkerServiceClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_addresses_parse_like_tensorflow() {
        assert_eq!(
            parse_service("grpc://localhost:5050").unwrap(),
            ("grpc".into(), "localhost:5050".into())
        );
        assert_eq!(
            parse_service("localhost:5050").unwrap(),
            ("grpc".into(), "localhost:5050".into())
        );
        assert!(parse_service("grpc://a://b").is_err());
        assert!(parse_service("grpc://").is_err());
        assert!(parse_service("http2://x:1").is_err());
    }
}
