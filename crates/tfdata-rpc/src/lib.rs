//! gRPC plumbing shared by the dispatcher, the workers and the client:
//!
//! * [`channel`]: channels and service clients with TensorFlow's message size
//!   limits lifted, and parsing of `grpc://host:port` service addresses;
//! * [`retry`]: TensorFlow's retry back-off for transient errors, bounded by a
//!   deadline and a cancellation token;
//! * [`server`]: the lifecycle of an in-process server (bind at construction,
//!   start, join, stop, stop on drop) around a `serve(listener, shutdown)`
//!   library function.

pub mod channel;
pub mod retry;
pub mod server;

pub use tokio_util::sync::CancellationToken;
