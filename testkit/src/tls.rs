//! A throwaway PKI for HTTPS tests: a CA and a server certificate it signed for
//! `localhost` and `127.0.0.1`, written as PEM files.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};

/// PEM files of a fresh CA and of a server certificate and key signed by it.
#[derive(Debug, Clone)]
pub struct TestPki {
    /// The CA certificate (what clients pass as `--ca-cert`).
    pub ca: PathBuf,
    /// The server's certificate (`--tls-cert`).
    pub cert: PathBuf,
    /// The server's private key (`--tls-key`).
    pub key: PathBuf,
}

impl TestPki {
    /// Makes a new CA and server certificate and writes them into `dir` as `NAME-ca.pem`,
    /// `NAME-cert.pem` and `NAME-key.pem`. Panics on failure (test support).
    pub fn new(dir: &Path, name: &str) -> Self {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, format!("sweep test CA {name}"));
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().unwrap();
        let ca = ca_params.self_signed(&ca_key).unwrap();

        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &ca, &ca_key).unwrap();

        let pki = TestPki {
            ca: dir.join(format!("{name}-ca.pem")),
            cert: dir.join(format!("{name}-cert.pem")),
            key: dir.join(format!("{name}-key.pem")),
        };
        std::fs::write(&pki.ca, ca.pem()).unwrap();
        std::fs::write(&pki.cert, cert.pem()).unwrap();
        std::fs::write(&pki.key, key.serialize_pem()).unwrap();
        pki
    }
}
