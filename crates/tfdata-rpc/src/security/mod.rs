//! Opt-in transport security: TLS (mutual TLS when servers require client
//! certificates) and a shared bearer token, for servers and clients alike.
//! Plaintext without a token stays the default: it is all TensorFlow
//! speaks (docs/security.md).
//!
//! * [`config`]: what a process is told ([`TransportSecurity`], from
//!   [`SecuritySettings`]: flags, `TFDATA_TLS_*`/`TFDATA_AUTH_TOKEN*`
//!   variables, Python keywords);
//! * [`accept`]: a server's side, [`ServerSecurity`]: TLS handshakes off
//!   the accept loop, plaintext clients refused;
//! * [`auth`]: the token check in front of every service;
//! * [`connect`]: a client's side, [`ClientSecurity`] and [`RpcChannel`];
//! * `pem`: certificate and key files.
//!
//! Module dependencies point one way: `connect → accept → {auth, pem} → config`.

pub mod accept;
pub mod auth;
pub mod config;
pub mod connect;
mod pem;

pub use accept::{ServerIo, ServerSecurity};
pub use auth::{RequireBearerToken, RequireBearerTokenLayer};
pub use config::{
    CertKey, ENV_AUTH_TOKEN, ENV_AUTH_TOKEN_FILE, ENV_TLS_CA, ENV_TLS_CERT, ENV_TLS_CLIENT_CERT,
    ENV_TLS_CLIENT_KEY, ENV_TLS_KEY, ENV_TLS_REQUIRE_CLIENT_CERT, Secret, SecuritySettings,
    TlsConfig, TransportSecurity,
};
pub use connect::{ClientSecurity, RpcChannel};
