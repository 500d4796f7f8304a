//! Transport-security flags (docs/security.md). Each falls back to its
//! environment variable, so a deployment can set either; a flag wins over
//! its variable.

use std::path::PathBuf;

use clap::Args;
use tfdata_rpc::security::{SecuritySettings, TransportSecurity};

/// TLS and token flags of `tfdata dispatcher` and `tfdata worker`: the
/// server's own certificate, and what it uses as a client (a worker calls
/// the dispatcher; the dispatcher calls workers).
#[derive(Args, Debug, Default)]
#[command(next_help_heading = "Transport security (default: plaintext, as TensorFlow)")]
pub struct ServerSecurityArgs {
    /// Certificate chain (PEM) this server presents; with --tls-key and
    /// --tls-ca, turns TLS on [env: TFDATA_TLS_CERT]
    #[arg(long, value_name = "PATH")]
    tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert [env: TFDATA_TLS_KEY]
    #[arg(long, value_name = "PATH")]
    tls_key: Option<PathBuf>,
    /// CA bundle (PEM) peers' certificates must chain to: the servers this
    /// process calls, and its clients with --tls-require-client-cert
    /// [env: TFDATA_TLS_CA]
    #[arg(long, value_name = "PATH")]
    tls_ca: Option<PathBuf>,
    /// Mutual TLS: refuse clients without a certificate signed by --tls-ca
    /// [env: TFDATA_TLS_REQUIRE_CLIENT_CERT=1]
    #[arg(long)]
    tls_require_client_cert: bool,
    /// Certificate (PEM) presented to servers that require one; default:
    /// --tls-cert [env: TFDATA_TLS_CLIENT_CERT]
    #[arg(long, value_name = "PATH")]
    tls_client_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-client-cert [env: TFDATA_TLS_CLIENT_KEY]
    #[arg(long, value_name = "PATH")]
    tls_client_key: Option<PathBuf>,
    /// File holding the shared bearer token every call must carry (and
    /// this process sends) [env: TFDATA_AUTH_TOKEN_FILE, or the token
    /// itself in TFDATA_AUTH_TOKEN]
    #[arg(long, value_name = "PATH")]
    auth_token_file: Option<PathBuf>,
}

/// TLS and token flags of the client commands (`register`, `read`, `save`,
/// `status`).
#[derive(Args, Debug, Default)]
#[command(next_help_heading = "Transport security (default: plaintext, as TensorFlow)")]
pub struct ClientSecurityArgs {
    /// CA bundle (PEM) the servers' certificates must chain to; turns TLS
    /// on [env: TFDATA_TLS_CA]
    #[arg(long, value_name = "PATH")]
    tls_ca: Option<PathBuf>,
    /// Certificate (PEM) presented to servers that require one (mutual
    /// TLS) [env: TFDATA_TLS_CLIENT_CERT]
    #[arg(long, value_name = "PATH")]
    tls_client_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-client-cert [env: TFDATA_TLS_CLIENT_KEY]
    #[arg(long, value_name = "PATH")]
    tls_client_key: Option<PathBuf>,
    /// File holding the shared bearer token sent on every call
    /// [env: TFDATA_AUTH_TOKEN_FILE, or the token itself in TFDATA_AUTH_TOKEN]
    #[arg(long, value_name = "PATH")]
    auth_token_file: Option<PathBuf>,
}

/// The environment's settings, with `flags` taking precedence field by field.
fn merged(flags: SecuritySettings) -> anyhow::Result<TransportSecurity> {
    let env = SecuritySettings::from_lookup(|name| std::env::var(name).ok())?;
    let token_file_flag = flags.auth_token_file.is_some();
    Ok(SecuritySettings {
        tls_ca: flags.tls_ca.or(env.tls_ca),
        tls_cert: flags.tls_cert.or(env.tls_cert),
        tls_key: flags.tls_key.or(env.tls_key),
        tls_client_cert: flags.tls_client_cert.or(env.tls_client_cert),
        tls_client_key: flags.tls_client_key.or(env.tls_client_key),
        tls_require_client_cert: flags.tls_require_client_cert || env.tls_require_client_cert,
        auth_token_file: flags.auth_token_file.or(env.auth_token_file),
        // A token file given as a flag beats a token in the environment.
        auth_token: if token_file_flag {
            None
        } else {
            env.auth_token
        },
    }
    .into_security()?)
}

/// Reads a server's certificate, key and CA files, so a bad one stops the
/// command before it listens.
pub fn check_files(security: &TransportSecurity) -> anyhow::Result<()> {
    security.server()?;
    security.client()?;
    Ok(())
}

impl ServerSecurityArgs {
    /// These flags as `tfdata worker` arguments, for the workers `tfdata
    /// workers` starts (the environment's settings reach them anyway).
    pub fn worker_flags(&self) -> Vec<std::ffi::OsString> {
        let mut flags = Vec::new();
        let mut path = |name: &str, value: &Option<PathBuf>| {
            if let Some(v) = value {
                flags.push(name.into());
                flags.push(v.clone().into_os_string());
            }
        };
        path("--tls-cert", &self.tls_cert);
        path("--tls-key", &self.tls_key);
        path("--tls-ca", &self.tls_ca);
        path("--tls-client-cert", &self.tls_client_cert);
        path("--tls-client-key", &self.tls_client_key);
        path("--auth-token-file", &self.auth_token_file);
        if self.tls_require_client_cert {
            flags.push("--tls-require-client-cert".into());
        }
        flags
    }

    pub fn into_security(self) -> anyhow::Result<TransportSecurity> {
        merged(SecuritySettings {
            tls_ca: self.tls_ca,
            tls_cert: self.tls_cert,
            tls_key: self.tls_key,
            tls_client_cert: self.tls_client_cert,
            tls_client_key: self.tls_client_key,
            tls_require_client_cert: self.tls_require_client_cert,
            auth_token_file: self.auth_token_file,
            auth_token: None,
        })
    }
}

impl ClientSecurityArgs {
    /// Makes these settings the process default every client call uses.
    pub fn install(self) -> anyhow::Result<()> {
        let security = merged(SecuritySettings {
            tls_ca: self.tls_ca,
            tls_client_cert: self.tls_client_cert,
            tls_client_key: self.tls_client_key,
            auth_token_file: self.auth_token_file,
            ..Default::default()
        })?;
        // Read the files now: a bad one is reported before any call.
        security.client()?;
        TransportSecurity::set_process_default(Some(security));
        Ok(())
    }
}
