//! gRPC and operations plumbing shared by the dispatcher, the workers and the client:
//!
//! * [`channel`]: channels and service clients with TensorFlow's message size
//!   limits lifted, and parsing of `grpc://host:port` service addresses;
//! * [`retry`]: TensorFlow's retry back-off for transient errors, bounded by a
//!   deadline and a cancellation token;
//! * [`raw_grpc`]: gRPC messages as lists of `Bytes` parts, sent and
//!   received without tonic's codec copies (the element stream's data path);
//! * [`server`]: the lifecycle of an in-process server (bind at construction,
//!   start, join, stop, stop on drop) around a `serve(listener, shutdown)`
//!   library function;
//! * [`security`]: opt-in TLS, mutual TLS and a shared bearer token, for
//!   servers ([`security::ServerSecurity`]) and clients
//!   ([`security::ClientSecurity`], [`security::RpcChannel`]).
//! * [`metrics`]: what every crate's metrics build on (OpenMetrics text, a
//!   lock-free histogram, the gRPC code label);
//! * [`health`]: a server's liveness and readiness, reported by both
//!   [`admin`] and gRPC's standard health service;
//! * [`admin`]: the admin HTTP endpoint (`/metrics`, `/healthz`, `/readyz`)
//!   on a port of its own.

pub mod admin;
pub mod channel;
pub mod health;
pub mod metrics;
pub mod peer;
pub mod raw_grpc;
pub mod retry;
pub mod security;
pub mod server;

pub use tokio_util::sync::CancellationToken;

/// Addresses of the workers running in this process, for readers'
/// `target_workers` (`LOCAL` reads only these; `AUTO` skips `COLOCATED`
/// workers not among them). In-process `WorkerServer`s add themselves while
/// they run.
pub mod local_workers {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};

    fn registry() -> &'static Mutex<HashSet<String>> {
        static LOCAL: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
        LOCAL.get_or_init(Default::default)
    }

    pub fn add(address: &str) {
        registry()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(address.to_string());
    }

    pub fn remove(address: &str) {
        registry()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(address);
    }

    pub fn contains(address: &str) -> bool {
        registry()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(address)
    }

    pub fn is_empty() -> bool {
        registry()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }
}
