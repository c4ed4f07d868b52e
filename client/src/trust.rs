//! Which coordinators a client trusts: the one place an HTTP client to a coordinator is
//! made, for the worker and for every CLI command.
//!
//! `https://` URLs always verify the server's certificate and host name. By default against
//! the system's root certificates; with a CA bundle (`--ca-cert`), against that bundle
//! *only*, so a coordinator with a private CA cannot be impersonated by anyone holding a
//! certificate from a public one. Plain `http://` URLs still work (loopback, trusted
//! networks) and verify nothing.

use std::path::{Path, PathBuf};

/// Why a client could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The CA bundle is unreadable, or holds no PEM certificate.
    #[error("CA certificate file {}: {reason}", path.display())]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// reqwest refused the settings (e.g. the TLS backend could not start).
    #[error("building the HTTP client: {0}")]
    Build(#[from] reqwest::Error),
}

/// A client builder that trusts the certificates in `ca_cert` (a PEM bundle) instead of the
/// system roots, or the system roots when `None`. Callers add their timeouts and build.
pub fn client_builder(ca_cert: Option<&Path>) -> Result<reqwest::ClientBuilder, TrustError> {
    let builder = reqwest::Client::builder();
    let Some(path) = ca_cert else {
        return Ok(builder);
    };
    let ca_err = |reason: String| TrustError::CaFile {
        path: path.to_path_buf(),
        reason,
    };
    let pem = std::fs::read(path).map_err(|e| ca_err(e.to_string()))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| ca_err(format!("not a PEM certificate bundle: {e}")))?;
    if certs.is_empty() {
        return Err(ca_err(
            "no PEM certificate (BEGIN CERTIFICATE) in it".into(),
        ));
    }
    Ok(certs
        .into_iter()
        .fold(builder.tls_built_in_root_certs(false), |b, c| {
            b.add_root_certificate(c)
        }))
}

/// [`client_builder`], built with no other settings (for one-shot CLI commands).
pub fn client(ca_cert: Option<&Path>) -> Result<reqwest::Client, TrustError> {
    Ok(client_builder(ca_cert)?.build()?)
}

/// Is this failure the server's certificate not being trusted (unknown issuer, wrong host
/// name, expired...)? Waiting does not fix that, and retrying would keep talking to a
/// server that may be an impostor.
pub fn is_certificate_error(e: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if is_rustls_certificate_error(err) {
            return true;
        }
        // rustls's error reaches reqwest wrapped in io::Errors (one inside another), whose
        // `source()` skips the wrapped error itself, so those are opened here.
        source = match err.downcast_ref::<std::io::Error>() {
            Some(io) => io.get_ref().map(|inner| inner as _),
            None => err.source(),
        };
    }
    false
}

fn is_rustls_certificate_error(e: &(dyn std::error::Error + 'static)) -> bool {
    use rustls::Error as R;
    matches!(
        e.downcast_ref::<R>(),
        Some(R::InvalidCertificate(_) | R::NoCertificatesPresented)
    )
}
