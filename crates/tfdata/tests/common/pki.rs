//! Certificates made at test time: a throwaway CA and the certificates it
//! signs, as PEM files in a temporary directory. (Also used by the CLI's
//! process tests, through `#[path]`.)

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)] // test code

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use tfdata_rpc::security::{CertKey, Secret, TlsConfig, TransportSecurity};

/// A CA and its files.
pub struct Pki {
    dir: tempfile::TempDir,
    issuer: CertifiedIssuer<'static, KeyPair>,
    ca: PathBuf,
}

impl Pki {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, issuer.pem()).unwrap();
        Pki { dir, issuer, ca }
    }

    /// The CA certificate's file.
    pub fn ca(&self) -> &Path {
        &self.ca
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A certificate for `localhost` and 127.0.0.1, good for servers and
    /// clients alike, written as `<name>.pem` and `<name>.key`.
    pub fn issue(&self, name: &str) -> CertKey {
        self.issue_for(name, &["localhost", "127.0.0.1"])
    }

    /// A certificate naming `hosts`.
    pub fn issue_for(&self, name: &str, hosts: &[&str]) -> CertKey {
        let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
        let mut params = CertificateParams::new(hosts).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let pair = CertKey {
            cert: self.dir.path().join(format!("{name}.pem")),
            key: self.dir.path().join(format!("{name}.key")),
        };
        std::fs::write(&pair.cert, cert.pem()).unwrap();
        std::fs::write(&pair.key, key.serialize_pem()).unwrap();
        pair
    }

    /// TLS with this CA, presenting `identity`.
    pub fn tls(&self, identity: Option<CertKey>, require_client_cert: bool) -> TlsConfig {
        TlsConfig {
            ca: self.ca.clone(),
            identity,
            client_identity: None,
            require_client_cert,
        }
    }

    /// A server's security: TLS with a fresh certificate, and `token`.
    pub fn server(
        &self,
        name: &str,
        require_client_cert: bool,
        token: Option<&str>,
    ) -> TransportSecurity {
        TransportSecurity {
            tls: Some(self.tls(Some(self.issue(name)), require_client_cert)),
            auth_token: token.map(|t| Secret::new(t).unwrap()),
        }
    }

    /// A reader's security: this CA, an optional client certificate, `token`.
    pub fn reader(&self, identity: Option<CertKey>, token: Option<&str>) -> TransportSecurity {
        TransportSecurity {
            tls: Some(TlsConfig {
                ca: self.ca.clone(),
                identity: None,
                client_identity: identity,
                require_client_cert: false,
            }),
            auth_token: token.map(|t| Secret::new(t).unwrap()),
        }
    }
}

/// Plaintext with a token.
pub fn token_only(token: &str) -> TransportSecurity {
    TransportSecurity {
        tls: None,
        auth_token: Some(Secret::new(token).unwrap()),
    }
}
