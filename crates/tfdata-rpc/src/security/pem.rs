//! Reading PEM files into rustls's types, with errors that name the file
//! and the setting it came from.

use std::path::Path;
use std::sync::Arc;

use tfdata_core::{Error, Result};
use tokio_rustls::rustls::RootCertStore;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::config::{CertKey, read_bounded};

/// The largest PEM file read: a system CA bundle is a few hundred KiB.
pub const MAX_PEM_BYTES: usize = 4 << 20;

/// Every certificate in the PEM file at `path` (at least one).
pub(super) fn certificates(
    path: &Path,
    field: &'static str,
) -> Result<Vec<CertificateDer<'static>>> {
    let pem = read_bounded(path, field, MAX_PEM_BYTES)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::InvalidConfig {
            field,
            reason: format!("{} is not valid PEM: {e}", path.display()),
        })?;
    if certs.is_empty() {
        return Err(Error::InvalidConfig {
            field,
            reason: format!(
                "{} holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\")",
                path.display()
            ),
        });
    }
    Ok(certs)
}

/// The private key in the PEM file at `path` (PKCS#8, PKCS#1 or SEC1).
pub(super) fn private_key(path: &Path, field: &'static str) -> Result<PrivateKeyDer<'static>> {
    let pem = read_bounded(path, field, MAX_PEM_BYTES)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| Error::InvalidConfig {
        field,
        reason: format!("{} holds no usable PEM private key: {e}", path.display()),
    })
}

/// A certificate chain and its key, checked to belong together.
pub(super) fn identity(
    pair: &CertKey,
    fields: [&'static str; 2],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    Ok((
        certificates(&pair.cert, fields[0])?,
        private_key(&pair.key, fields[1])?,
    ))
}

/// The CA bundle at `path` as trust anchors; every certificate in it must
/// parse (a bundle that silently lost its only CA would trust nothing).
pub(super) fn roots(path: &Path) -> Result<Arc<RootCertStore>> {
    let mut store = RootCertStore::empty();
    for (i, cert) in certificates(path, "tls_ca")?.into_iter().enumerate() {
        store.add(cert).map_err(|e| Error::InvalidConfig {
            field: "tls_ca",
            reason: format!(
                "certificate {} of {} is not a usable CA certificate: {e}",
                i + 1,
                path.display()
            ),
        })?;
    }
    Ok(Arc::new(store))
}
