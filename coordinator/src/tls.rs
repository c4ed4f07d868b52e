//! HTTPS for the coordinator: the server certificate and key, read once at start.
//!
//! Workers lease jobs and fetch sources from whatever answers at the coordinator's address,
//! so on an untrusted network they need to know it is the real one; TLS with a certificate
//! they verify (see `sweep_client::trust`) gives them that.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// Why the certificate or key could not be used. Each case names the file; the CLI adds
/// the flag that gave it.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file is unreadable or holds no usable PEM certificate.
    #[error("certificate file {}: {reason}", path.display())]
    Cert {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The key file is unreadable or holds no usable PEM private key.
    #[error("private key file {}: {reason}", path.display())]
    Key {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Both files parse, but do not make a usable pair (e.g. the key is not the
    /// certificate's).
    #[error("certificate {} with key {}: {reason}", cert.display(), key.display())]
    Pair {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls said.
        reason: String,
    },
}

/// The coordinator's TLS settings, loaded and checked: cheap to clone.
#[derive(Clone)]
pub struct TlsSettings {
    config: Arc<ServerConfig>,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The config holds the private key: never print it.
        f.write_str("TlsSettings { .. }")
    }
}

impl TlsSettings {
    /// Reads a PEM certificate chain (the server's certificate first, then any
    /// intermediates) and its PEM private key (PKCS#8, PKCS#1 or SEC1), and checks that they
    /// belong together.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let cert_err = |reason: String| TlsError::Cert {
            path: cert.to_path_buf(),
            reason,
        };
        let key_err = |reason: String| TlsError::Key {
            path: key.to_path_buf(),
            reason,
        };
        let cert_pem = std::fs::read(cert).map_err(|e| cert_err(e.to_string()))?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| cert_err(format!("not valid PEM: {e}")))?;
        if chain.is_empty() {
            return Err(cert_err(
                "no PEM certificate (BEGIN CERTIFICATE) in it".into(),
            ));
        }
        let key_pem = std::fs::read(key).map_err(|e| key_err(e.to_string()))?;
        let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| match e {
            rustls::pki_types::pem::Error::NoItemsFound => {
                key_err("no PEM private key (BEGIN ... PRIVATE KEY) in it".into())
            }
            e => key_err(format!("not a valid PEM private key: {e}")),
        })?;
        // Explicitly ring: the process-wide default provider is not relied on, so a second
        // provider pulled in by some dependency cannot make this ambiguous.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let pair_err = |e: rustls::Error| TlsError::Pair {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            reason: e.to_string(),
        };
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(pair_err)?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(pair_err)?;
        // The server speaks HTTP/1.1 only (see `server::serve`).
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            config: Arc::new(config),
        })
    }

    /// The acceptor that runs the handshake on each accepted connection.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.config.clone())
    }
}
