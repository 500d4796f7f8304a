//! What a process is told about transport security: [`TransportSecurity`]
//! (validated: TLS files and a bearer token), built from the flat
//! [`SecuritySettings`] that flags, environment variables and Python
//! keywords all produce.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use tfdata_core::{Error, Result};

/// The CA bundle (PEM) a process verifies its peers with. Setting it turns
/// TLS on for the process's connections.
pub const ENV_TLS_CA: &str = "TFDATA_TLS_CA";
/// A server's certificate chain (PEM).
pub const ENV_TLS_CERT: &str = "TFDATA_TLS_CERT";
/// A server's private key (PEM).
pub const ENV_TLS_KEY: &str = "TFDATA_TLS_KEY";
/// The certificate chain (PEM) a client presents to servers that require one.
pub const ENV_TLS_CLIENT_CERT: &str = "TFDATA_TLS_CLIENT_CERT";
/// The private key of [`ENV_TLS_CLIENT_CERT`].
pub const ENV_TLS_CLIENT_KEY: &str = "TFDATA_TLS_CLIENT_KEY";
/// `1`/`true`: a server requires client certificates signed by the CA.
pub const ENV_TLS_REQUIRE_CLIENT_CERT: &str = "TFDATA_TLS_REQUIRE_CLIENT_CERT";
/// The shared bearer token itself.
pub const ENV_AUTH_TOKEN: &str = "TFDATA_AUTH_TOKEN";
/// A file holding the shared bearer token (one line).
pub const ENV_AUTH_TOKEN_FILE: &str = "TFDATA_AUTH_TOKEN_FILE";

/// The longest bearer token accepted: it travels in a header on every call.
pub const MAX_TOKEN_BYTES: usize = 4096;

/// A shared secret. Its `Debug` never shows it, it has no `Display`, and
/// nothing in tfdata logs it.
#[derive(Clone)]
pub struct Secret(Arc<str>);

impl Secret {
    /// A token: 1 to [`MAX_TOKEN_BYTES`] visible ASCII characters (what an
    /// HTTP header carries unchanged), no spaces.
    pub fn new(token: impl Into<String>) -> Result<Self> {
        let token = token.into();
        let invalid = |reason: &str| Error::InvalidConfig {
            field: "auth_token",
            reason: reason.to_string(),
        };
        if token.is_empty() {
            return Err(invalid("the bearer token is empty"));
        }
        if token.len() > MAX_TOKEN_BYTES {
            return Err(invalid(&format!(
                "the bearer token is longer than {MAX_TOKEN_BYTES} bytes"
            )));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(invalid(
                "the bearer token must be visible ASCII characters without spaces",
            ));
        }
        Ok(Secret(token.into()))
    }

    /// The token in `path`: its first line, without surrounding whitespace.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = read_bounded(path, "auth_token", MAX_TOKEN_BYTES + 2)?;
        let text = String::from_utf8(text).map_err(|_| Error::InvalidConfig {
            field: "auth_token",
            reason: format!("{} is not UTF-8 text", path.display()),
        })?;
        Secret::new(text.trim()).map_err(|e| Error::InvalidConfig {
            field: "auth_token",
            reason: format!("{}: {}", path.display(), reason_of(&e)),
        })
    }

    /// The token, for the one place that sends or compares it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        constant_time_eq(self.0.as_bytes(), other.0.as_bytes())
    }
}

impl Eq for Secret {}

/// A certificate chain and its private key, both PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertKey {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// TLS for every role a process plays. tfdata servers are clients too (a
/// worker calls its dispatcher; a dispatcher pushes tasks to workers), so
/// the CA is always needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// CA certificates (PEM) that peers' certificates must chain to: a
    /// client verifies servers against them, a server that requires client
    /// certificates verifies clients against them. System roots are never
    /// used.
    pub ca: PathBuf,
    /// The certificate a server presents (required to serve TLS). A server
    /// acting as a client presents it too when a peer asks for one, unless
    /// `client_identity` is set.
    pub identity: Option<CertKey>,
    /// The certificate a client presents to servers that require one
    /// (mutual TLS).
    pub client_identity: Option<CertKey>,
    /// Serving: refuse clients without a certificate signed by `ca`.
    pub require_client_cert: bool,
}

impl TlsConfig {
    /// What a client presents when asked: its client identity, else its
    /// server identity.
    pub fn presented_identity(&self) -> Option<&CertKey> {
        self.client_identity.as_ref().or(self.identity.as_ref())
    }
}

/// Transport security of a process, for its servers and its clients alike.
/// The default is plaintext without a token: what TensorFlow speaks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TransportSecurity {
    /// TLS, or plaintext when `None`.
    pub tls: Option<TlsConfig>,
    /// Servers refuse calls without `authorization: Bearer <token>`;
    /// clients send it on every call.
    pub auth_token: Option<Secret>,
}

/// Set by [`TransportSecurity::set_process_default`].
static PROCESS_DEFAULT: RwLock<Option<TransportSecurity>> = RwLock::new(None);

impl TransportSecurity {
    /// Plaintext, no token.
    pub fn plaintext() -> Self {
        TransportSecurity::default()
    }

    pub fn is_plaintext(&self) -> bool {
        self.tls.is_none() && self.auth_token.is_none()
    }

    /// From the `TFDATA_TLS_*` and `TFDATA_AUTH_TOKEN*` variables.
    pub fn from_env() -> Result<Self> {
        SecuritySettings::from_lookup(|name| std::env::var(name).ok())?.into_security()
    }

    /// What readers use when not given a security explicitly: the value of
    /// [`set_process_default`](Self::set_process_default) if set, else
    /// [`from_env`](Self::from_env) (read at each call).
    pub fn process_default() -> Result<Self> {
        let set = PROCESS_DEFAULT
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match set {
            Some(security) => Ok(security),
            None => Self::from_env(),
        }
    }

    /// Replaces the environment as this process's default (`None` goes back
    /// to it). For programs that take security from their own flags.
    pub fn set_process_default(security: Option<TransportSecurity>) {
        *PROCESS_DEFAULT.write().unwrap_or_else(|p| p.into_inner()) = security;
    }

    /// Checks the shape (not the files) for a server: TLS needs the server's
    /// own certificate.
    pub fn validate_for_server(&self) -> Result<()> {
        if let Some(tls) = &self.tls
            && tls.identity.is_none()
        {
            return Err(Error::InvalidConfig {
                field: "tls_cert",
                reason: "TLS is configured (tls_ca) but this server has no certificate: \
                         set --tls-cert and --tls-key (TFDATA_TLS_CERT, TFDATA_TLS_KEY)"
                    .into(),
            });
        }
        Ok(())
    }
}

/// The flat form of [`TransportSecurity`]: what a command line, the
/// environment or Python's keywords give, every field optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecuritySettings {
    pub tls_ca: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_client_cert: Option<PathBuf>,
    pub tls_client_key: Option<PathBuf>,
    pub tls_require_client_cert: bool,
    pub auth_token_file: Option<PathBuf>,
    pub auth_token: Option<Secret>,
}

impl SecuritySettings {
    /// From environment-style variables (`lookup` is `std::env::var` in
    /// practice); an empty value counts as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |name: &str| lookup(name).filter(|v| !v.is_empty());
        let path = |name: &str| get(name).map(PathBuf::from);
        let require = match get(ENV_TLS_REQUIRE_CLIENT_CERT).as_deref() {
            None | Some("0") | Some("false") | Some("no") => false,
            Some("1") | Some("true") | Some("yes") => true,
            Some(other) => {
                return Err(Error::InvalidConfig {
                    field: "tls_require_client_cert",
                    reason: format!("{ENV_TLS_REQUIRE_CLIENT_CERT}={other:?}: expected 1 or 0"),
                });
            }
        };
        Ok(SecuritySettings {
            tls_ca: path(ENV_TLS_CA),
            tls_cert: path(ENV_TLS_CERT),
            tls_key: path(ENV_TLS_KEY),
            tls_client_cert: path(ENV_TLS_CLIENT_CERT),
            tls_client_key: path(ENV_TLS_CLIENT_KEY),
            tls_require_client_cert: require,
            auth_token_file: path(ENV_AUTH_TOKEN_FILE),
            auth_token: get(ENV_AUTH_TOKEN)
                .map(|t| {
                    Secret::new(t.trim()).map_err(|e| Error::InvalidConfig {
                        field: "auth_token",
                        reason: format!("{ENV_AUTH_TOKEN}: {}", reason_of(&e)),
                    })
                })
                .transpose()?,
        })
    }

    /// Checks that the settings fit together and reads the token file (the
    /// certificates are read when a server or client is built from the
    /// result).
    pub fn into_security(self) -> Result<TransportSecurity> {
        // (field, flag prefix, environment prefix) of each pair.
        let pair = |cert: Option<PathBuf>, key: Option<PathBuf>, names: [&'static str; 3]| {
            let [field, flag, env] = names;
            match (cert, key) {
                (Some(cert), Some(key)) => Ok(Some(CertKey { cert, key })),
                (None, None) => Ok(None),
                (Some(_), None) => Err(Error::InvalidConfig {
                    field,
                    reason: format!(
                        "a certificate without its key: set --{flag}-key ({env}_KEY) too"
                    ),
                }),
                (None, Some(_)) => Err(Error::InvalidConfig {
                    field,
                    reason: format!(
                        "a key without its certificate: set --{flag}-cert ({env}_CERT) too"
                    ),
                }),
            }
        };
        let identity = pair(
            self.tls_cert,
            self.tls_key,
            ["tls_cert", "tls", "TFDATA_TLS"],
        )?;
        let client_identity = pair(
            self.tls_client_cert,
            self.tls_client_key,
            ["tls_client_cert", "tls-client", "TFDATA_TLS_CLIENT"],
        )?;
        let tls = match self.tls_ca {
            Some(ca) => Some(TlsConfig {
                ca,
                identity,
                client_identity,
                require_client_cert: self.tls_require_client_cert,
            }),
            None => {
                if identity.is_some() || client_identity.is_some() || self.tls_require_client_cert {
                    return Err(Error::InvalidConfig {
                        field: "tls_ca",
                        reason: "TLS settings without a CA: set --tls-ca (TFDATA_TLS_CA), the \
                                 CA bundle this process verifies its peers with (servers are \
                                 clients of each other too)"
                            .into(),
                    });
                }
                None
            }
        };
        let auth_token = match (self.auth_token, self.auth_token_file) {
            (Some(_), Some(_)) => {
                return Err(Error::InvalidConfig {
                    field: "auth_token",
                    reason: format!(
                        "both a token ({ENV_AUTH_TOKEN}) and a token file \
                         (--auth-token-file, {ENV_AUTH_TOKEN_FILE}) are given; set one"
                    ),
                });
            }
            (Some(token), None) => Some(token),
            (None, Some(path)) => Some(Secret::from_file(&path)?),
            (None, None) => None,
        };
        Ok(TransportSecurity { tls, auth_token })
    }
}

/// The contents of `path`, refusing more than `limit` bytes.
pub(super) fn read_bounded(path: &Path, field: &'static str, limit: usize) -> Result<Vec<u8>> {
    let file = std::fs::File::open(path).map_err(|e| Error::InvalidConfig {
        field,
        reason: format!("cannot open {}: {e}", path.display()),
    })?;
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::InvalidConfig {
            field,
            reason: format!("cannot read {}: {e}", path.display()),
        })?;
    if bytes.len() > limit {
        return Err(Error::InvalidConfig {
            field,
            reason: format!("{} is larger than {limit} bytes", path.display()),
        });
    }
    Ok(bytes)
}

/// Compares `a` and `b` in time that depends only on their lengths, so a
/// caller cannot learn a token byte by byte from response times.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// An `InvalidConfig`'s reason alone (for re-wrapping with more context).
fn reason_of(e: &Error) -> String {
    match e {
        Error::InvalidConfig { reason, .. } => reason.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::HashMap;

    fn settings(vars: &[(&str, &str)]) -> Result<SecuritySettings> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SecuritySettings::from_lookup(|name| vars.get(name).cloned())
    }

    #[test]
    fn nothing_set_is_plaintext() {
        let s = settings(&[]).unwrap().into_security().unwrap();
        assert!(s.is_plaintext());
        assert_eq!(s, TransportSecurity::plaintext());
        // Empty variables count as unset.
        let s = settings(&[(ENV_TLS_CA, ""), (ENV_AUTH_TOKEN, "")]).unwrap();
        assert!(s.into_security().unwrap().is_plaintext());
    }

    #[test]
    fn environment_variables_fill_every_field() {
        let s = settings(&[
            (ENV_TLS_CA, "/c/ca.pem"),
            (ENV_TLS_CERT, "/c/cert.pem"),
            (ENV_TLS_KEY, "/c/key.pem"),
            (ENV_TLS_CLIENT_CERT, "/c/client.pem"),
            (ENV_TLS_CLIENT_KEY, "/c/client.key"),
            (ENV_TLS_REQUIRE_CLIENT_CERT, "1"),
            (ENV_AUTH_TOKEN, " s3cret\n"),
        ])
        .unwrap()
        .into_security()
        .unwrap();
        let tls = s.tls.as_ref().unwrap();
        assert_eq!(tls.ca, PathBuf::from("/c/ca.pem"));
        assert_eq!(
            tls.identity.as_ref().unwrap().key,
            PathBuf::from("/c/key.pem")
        );
        assert_eq!(
            tls.presented_identity().unwrap().cert,
            PathBuf::from("/c/client.pem")
        );
        assert!(tls.require_client_cert);
        assert_eq!(s.auth_token.as_ref().unwrap().expose(), "s3cret");
    }

    #[test]
    fn a_server_identity_is_presented_when_no_client_identity_is_set() {
        let s = settings(&[
            (ENV_TLS_CA, "/ca"),
            (ENV_TLS_CERT, "/cert"),
            (ENV_TLS_KEY, "/key"),
        ])
        .unwrap()
        .into_security()
        .unwrap();
        assert_eq!(
            s.tls.unwrap().presented_identity().unwrap().cert,
            PathBuf::from("/cert")
        );
    }

    #[test]
    fn settings_that_do_not_fit_together_say_what_is_missing() {
        let err = |vars: &[(&str, &str)]| {
            settings(vars)
                .and_then(SecuritySettings::into_security)
                .unwrap_err()
                .to_string()
        };
        let e = err(&[(ENV_TLS_CERT, "/cert"), (ENV_TLS_KEY, "/key")]);
        assert!(e.contains("--tls-ca") && e.contains("TFDATA_TLS_CA"), "{e}");
        let e = err(&[(ENV_TLS_CA, "/ca"), (ENV_TLS_CERT, "/cert")]);
        assert!(
            e.contains("--tls-key") && e.contains("TFDATA_TLS_KEY"),
            "{e}"
        );
        let e = err(&[(ENV_TLS_CA, "/ca"), (ENV_TLS_CLIENT_KEY, "/k")]);
        assert!(e.contains("--tls-client-cert"), "{e}");
        let e = err(&[(ENV_TLS_REQUIRE_CLIENT_CERT, "maybe")]);
        assert!(e.contains("expected 1 or 0"), "{e}");
        let e = err(&[(ENV_AUTH_TOKEN, "a b")]);
        assert!(e.contains("without spaces"), "{e}");
        let e = err(&[(ENV_AUTH_TOKEN, "t"), (ENV_AUTH_TOKEN_FILE, "/f")]);
        assert!(e.contains("set one"), "{e}");
        // A server needs its own certificate; a reader does not.
        let reader = settings(&[(ENV_TLS_CA, "/ca")])
            .unwrap()
            .into_security()
            .unwrap();
        let e = reader.validate_for_server().unwrap_err().to_string();
        assert!(e.contains("--tls-cert"), "{e}");
    }

    #[test]
    fn tokens_never_show_in_debug_output() {
        let s = TransportSecurity {
            tls: None,
            auth_token: Some(Secret::new("hunter2-token").unwrap()),
        };
        let shown = format!("{s:?} {:?}", s.auth_token);
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }

    #[test]
    fn token_files_are_read_trimmed_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "abc.DEF-123\n").unwrap();
        assert_eq!(Secret::from_file(&path).unwrap().expose(), "abc.DEF-123");
        std::fs::write(&path, "\n").unwrap();
        let e = Secret::from_file(&path).unwrap_err().to_string();
        assert!(e.contains("empty") && e.contains("token"), "{e}");
        std::fs::write(&path, "x".repeat(MAX_TOKEN_BYTES + 10)).unwrap();
        let e = Secret::from_file(&path).unwrap_err().to_string();
        assert!(e.contains("larger than"), "{e}");
        let e = Secret::from_file(&dir.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing"), "{e}");
    }
}
