//! HTTPS between workers, CLI and coordinator, for real: a throwaway CA and server
//! certificate, an in-process coordinator serving TLS (on SQLite), the `sweep` binary as
//! client and as worker.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use sweep_client::{trust, ClientError};
use sweep_coordinator::service::Caller;
use sweep_coordinator::tls::TlsSettings;
use sweep_testkit::tls::TestPki;
use sweep_worker::client::CoordinatorClient;

use common::{cli, repo, sweep_bin, InProcess, Proc};

/// A coordinator serving HTTPS with `pki`'s certificate, on a database in its own temp dir.
async fn https_coordinator(pki: &TestPki) -> InProcess<tempfile::TempDir> {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sweep.db");
    let mut config = common::coordinator_config(db.to_str().unwrap());
    config.tls = Some(TlsSettings::from_pem_files(&pki.cert, &pki.key).unwrap());
    InProcess::start_with_tokens(config, dir).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_need_the_ca_and_plain_http_is_refused() {
    let certs = tempfile::tempdir().unwrap();
    let pki = TestPki::new(certs.path(), "main");
    let coord = https_coordinator(&pki).await;
    assert!(
        coord.base.starts_with("https://127.0.0.1:"),
        "{}",
        coord.base
    );
    let ca = pki.ca.to_str().unwrap();

    // The shared client builder with the CA: health and the API answer over HTTPS.
    let http = trust::client(Some(&pki.ca)).unwrap();
    let health = http
        .get(format!("{}/healthz", coord.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let (code, stdout, stderr) = cli(&["list", "--coordinator", &coord.base, "--ca-cert", ca]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "", "no sweeps yet");

    // Without the CA (system roots only) the certificate is refused, by the CLI and by the
    // library, and the worker's client calls that untrusted (not worth a retry).
    let (code, _, stderr) = cli(&["list", "--coordinator", &coord.base]);
    assert_ne!(code, 0);
    assert!(stderr.contains("certificate"), "{stderr}");
    let err = trust::client(None)
        .unwrap()
        .get(format!("{}/healthz", coord.base))
        .send()
        .await
        .unwrap_err();
    assert!(trust::is_certificate_error(&err), "{err:?}");
    let worker_client =
        CoordinatorClient::with_ca_cert(&coord.base, Duration::from_secs(5), None).unwrap();
    match worker_client.engines().await {
        Err(e @ ClientError::Untrusted(_)) => {
            assert!(e.to_string().contains("certificate"), "{e}");
            assert!(!e.is_retryable());
        }
        other => panic!("expected Untrusted, got {other:?}"),
    }

    // Another CA's certificate is no better than none: --ca-cert replaces the system roots,
    // it does not widen them.
    let other = TestPki::new(certs.path(), "other");
    let (code, _, stderr) = cli(&[
        "list",
        "--coordinator",
        &coord.base,
        "--ca-cert",
        other.ca.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(stderr.contains("certificate"), "{stderr}");

    // Plain HTTP to the TLS port gets no answer.
    let plain = coord.base.replacen("https://", "http://", 1);
    let refused = reqwest::get(format!("{plain}/healthz")).await;
    assert!(refused.is_err(), "{refused:?}");

    // A CA file that is no certificate: the error names the flag and the file.
    let (code, _, stderr) = cli(&[
        "list",
        "--coordinator",
        &coord.base,
        "--ca-cert",
        pki.key.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("--ca-cert") && stderr.contains(pki.key.to_str().unwrap()),
        "{stderr}"
    );
}

#[test]
fn bad_certificate_files_name_the_flag_and_the_file() {
    let certs = tempfile::tempdir().unwrap();
    let pki = TestPki::new(certs.path(), "flags");
    let other = TestPki::new(certs.path(), "stranger");
    let coordinator = |cert: &std::path::Path, key: &std::path::Path| {
        cli(&[
            "coordinator",
            "--database-url",
            "postgres://nobody@127.0.0.1:1/none",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ])
    };
    let missing = certs.path().join("missing.pem");
    for (cert, key, flag, file) in [
        (&missing, &pki.key, "--tls-cert", &missing),
        (&pki.key, &pki.key, "--tls-cert", &pki.key),
        (&pki.cert, &pki.cert, "--tls-key", &pki.cert),
        (&pki.cert, &other.key, "--tls-key", &other.key),
    ] {
        let (code, stdout, stderr) = coordinator(cert, key);
        assert_eq!(code, 1, "{stderr}");
        assert_eq!(stdout, "", "nothing announced");
        assert!(
            stderr.contains(flag) && stderr.contains(file.to_str().unwrap()),
            "{flag} {}: {stderr}",
            file.display()
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // One without the other is a usage error.
    let (code, _, stderr) = cli(&[
        "coordinator",
        "--database-url",
        "x",
        "--tls-cert",
        pki.cert.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--tls-key"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_over_https_finishes_a_sweep() {
    let certs = tempfile::tempdir().unwrap();
    let pki = TestPki::new(certs.path(), "e2e");
    let coord = https_coordinator(&pki).await;
    // One variant against the baseline on one quick suite, shallow: small but real (two
    // builds of minnow, engine processes, uploads), all over HTTPS.
    let config = certs.path().join("small.toml");
    std::fs::write(
        &config,
        "name = \"tls\"\nengine = \"minnow\"\nknob = \"NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS\"\n\
         values = [3000]\nsuites = [\"ecm_confident_quick\"]\ndepth = 4\nchunk_size = 30\n\
         [baseline]\nname = \"head_reference\"\n",
    )
    .unwrap();
    // Submitted through the CLI with the CA from the environment.
    let out = Command::new(sweep_bin())
        .current_dir(repo())
        .args([
            "submit",
            config.to_str().unwrap(),
            "--coordinator",
            &coord.base,
        ])
        .env("SWEEP_CA_CERT", &pki.ca)
        .env(
            "SWEEP_TOKEN",
            common::tokens_for(&coord.base).unwrap().admin,
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();

    let cache = certs.path().join("cache");
    let _worker = Proc(
        common::worker_command(&coord.base, &cache, 1)
            .env(
                "SWEEP_TOKEN",
                common::tokens_for(&coord.base).unwrap().worker,
            )
            .arg("--ca-cert")
            .arg(&pki.ca)
            .args(["--name", "tls-worker"])
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    let detail = loop {
        let detail = coord
            .service
            .reads()
            .detail(&Caller::Local, id)
            .await
            .unwrap();
        if detail.summary.state.is_final() {
            break detail;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "sweep still {} after 300 s",
            detail.summary.state.as_str()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(detail.summary.state.as_str(), "done", "{detail:?}");
    assert_eq!(
        detail.summary.positions_done,
        detail.summary.positions_total
    );
    assert!(detail.summary.positions_total > 0);

    // The table over HTTPS through the CLI.
    let (code, table, stderr) = cli(&[
        "table",
        &id.to_string(),
        "--coordinator",
        &coord.base,
        "--ca-cert",
        pki.ca.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(table.contains("head_reference"), "{table}");
}

/// `sweep run --serve` with TLS: the served port speaks HTTPS (a remote worker with the CA
/// joins over it), while the run's own worker uses a plain loopback port of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_run_takes_remote_workers_over_https() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new(dir.path(), "run");
    let db = dir.path().join("sweep.db");
    let listen = format!("127.0.0.1:{}", common::free_port());
    // The remote worker's token, made in the run's database before the run.
    let tokens = common::test_tokens(db.to_str().unwrap());
    let tls: [&std::ffi::OsStr; 4] = [
        "--tls-cert".as_ref(),
        pki.cert.as_os_str(),
        "--tls-key".as_ref(),
        pki.key.as_os_str(),
    ];
    let cache = dir.path().join("local-cache");
    let mut run = common::spawn_served_demo_run(&listen, &db, &cache, &tls);
    let base = format!("https://{listen}");
    let http = trust::client(Some(&pki.ca)).unwrap();
    let start = Instant::now();
    common::wait_until_serving(&http, &base, "the run never served HTTPS").await;
    let remote = Proc(
        common::worker_command(&base, &dir.path().join("remote-cache"), 1)
            .env("SWEEP_TOKEN", &tokens.worker)
            .arg("--ca-cert")
            .arg(&pki.ca)
            .args(["--name", "remote"])
            .spawn()
            .unwrap(),
    );
    let status = common::wait_exit(&mut run, start, Duration::from_secs(300), "the run").await;
    drop(remote);
    assert!(status.success());
    let table = common::json_stdout(&mut run);
    common::assert_table_matches(&table, &common::direct::direct_totals(common::DEMO).await);
    assert_eq!(
        common::workers_with_results(&db).await,
        2,
        "the local and the remote (HTTPS) worker both ran positions"
    );
}
