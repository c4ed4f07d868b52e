//! The coordinator closes connections that send no request (idle, slow or half-open ones
//! would otherwise hold file descriptors until it runs out), both before the first request
//! and between kept-alive requests, over plain HTTP and over TLS (where a socket that never
//! finishes its handshake is closed too). Real sockets against a real coordinator.

use std::time::{Duration, Instant};

use std::sync::Arc;

use sweep_coordinator::tls::TlsSettings;
use sweep_coordinator::{Application, CoordinatorConfig};
use sweep_testkit::tls::TestPki;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;

async fn coordinator(
    header_timeout: Duration,
) -> (std::net::SocketAddr, CancellationToken, tempfile::TempDir) {
    coordinator_with(header_timeout, None).await
}

async fn coordinator_with(
    header_timeout: Duration,
    tls: Option<TlsSettings>,
) -> (std::net::SocketAddr, CancellationToken, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sweep.db");
    let mut config = CoordinatorConfig::new(db.to_str().unwrap(), "127.0.0.1:0".parse().unwrap());
    config.engines_dir = "../configs/engines".into();
    config.suites_dir = "../suites".into();
    config.header_timeout = header_timeout;
    config.tls = tls;
    let app = Application::build(config).await.unwrap();
    let addr = app.addr();
    let stop = CancellationToken::new();
    tokio::spawn(app.run_until_stopped(stop.clone()));
    (addr, stop, dir)
}

/// Reads until the server closes the connection; returns what arrived and when it closed.
async fn read_to_close(
    conn: &mut (impl tokio::io::AsyncRead + Unpin),
    limit: Duration,
) -> (String, Duration) {
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(limit, conn.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => panic!("connection still open after {limit:?}"),
        }
    }
    (
        String::from_utf8_lossy(&got).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test]
async fn silent_and_idle_connections_are_closed() {
    let (addr, stop, _dir) = coordinator(Duration::from_millis(500)).await;

    // A connection that never sends a byte.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let (_, after) = read_to_close(&mut silent, Duration::from_secs(5)).await;
    assert!(
        after >= Duration::from_millis(400),
        "closed too early: {after:?}"
    );

    // Half a request line, then nothing.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /healthz HT").await.unwrap();
    read_to_close(&mut slow, Duration::from_secs(5)).await;

    // A kept-alive connection is answered, then closed once it idles.
    let mut kept = TcpStream::connect(addr).await.unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (answer, _) = read_to_close(&mut kept, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    stop.cancel();
}

#[tokio::test]
async fn silent_and_idle_tls_connections_are_closed() {
    let certs = tempfile::tempdir().unwrap();
    let pki = TestPki::new(certs.path(), "bounds");
    let tls = TlsSettings::from_pem_files(&pki.cert, &pki.key).unwrap();
    let (addr, stop, _dir) = coordinator_with(Duration::from_millis(500), Some(tls)).await;

    // A socket that never starts its handshake.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let (_, after) = read_to_close(&mut silent, Duration::from_secs(5)).await;
    assert!(
        after >= Duration::from_millis(400),
        "closed too early: {after:?}"
    );

    // The first bytes of a ClientHello record, then nothing.
    let mut half = TcpStream::connect(addr).await.unwrap();
    half.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .await
        .unwrap();
    read_to_close(&mut half, Duration::from_secs(5)).await;

    // Plain HTTP to the TLS port gets no HTTP answer.
    let mut plain = TcpStream::connect(addr).await.unwrap();
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (answer, _) = read_to_close(&mut plain, Duration::from_secs(5)).await;
    assert!(!answer.starts_with("HTTP/1.1"), "{answer}");

    // A finished handshake, a request answered over TLS, then closed once it idles.
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(&pki.ca).unwrap())
        .unwrap();
    let client =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut kept = TlsConnector::from(Arc::new(client))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (answer, after) = read_to_close(&mut kept, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        after >= Duration::from_millis(400),
        "closed too early: {after:?}"
    );
    stop.cancel();
}
