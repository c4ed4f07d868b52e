//! Webhooks (issue 49 item 4): a real coordinator process POSTs a signed event to a local
//! receiver when a sweep ends, retries a receiver that refuses, and, with a second
//! coordinator on the same database, still announces each sweep once.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use sweep_domain::wire::SweepEvent;

use common::{cli, start_coordinator_with, start_worker, submit, submit_with, wait_final, TestDb};

const SECRET: &str = "webhook test secret";

/// One POST the receiver got.
#[derive(Clone, Debug)]
struct Received {
    path: String,
    headers: HeaderMap,
    body: Bytes,
}

/// A receiver on a free loopback port: it keeps every POST; `/flaky` answers the first one
/// 500 (the coordinator must try again), everything else 200.
#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<Received>>>);

impl Receiver {
    async fn start() -> (Self, String) {
        let receiver = Self::default();
        let app = axum::Router::new()
            .route("/{path}", post(take))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (receiver, base)
    }

    fn at(&self, path: &str) -> Vec<Received> {
        let all = self.0.lock().unwrap();
        all.iter().filter(|r| r.path == path).cloned().collect()
    }

    /// Waits until `path` got `n` POSTs (panics after 60 s); returns them.
    async fn wait_for(&self, path: &str, n: usize) -> Vec<Received> {
        let start = Instant::now();
        loop {
            let got = self.at(path);
            if got.len() >= n {
                return got;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "/{path} got {} of {n} events: {got:?}",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn take(
    State(receiver): State<Receiver>,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let mut all = receiver.0.lock().unwrap();
    let first_flaky = path == "flaky" && !all.iter().any(|r| r.path == "flaky");
    all.push(Received {
        path,
        headers,
        body,
    });
    if first_flaky {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::OK
    }
}

/// The event in `r`, after checking its signature against the raw body, independently of the
/// coordinator's code.
fn verified(r: &Received) -> SweepEvent {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(&r.body);
    let expected = format!("sha256={}", hex_of(&mac.finalize().into_bytes()));
    let header = |name: &str| r.headers[name].to_str().unwrap().to_string();
    assert_eq!(header("x-sweep-signature"), expected, "signature of {r:?}");
    assert_eq!(header("content-type"), "application/json");
    let event: SweepEvent = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(header("x-sweep-event"), event.event);
    assert_eq!(header("x-sweep-delivery"), event.delivery);
    event
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_sweeps_are_announced_signed_once_and_retried_until_taken() {
    let db = TestDb::new().await;
    let (receiver, hooks) = Receiver::start().await;
    let (hook, flaky) = (format!("{hooks}/hook"), format!("{hooks}/flaky"));
    let args = [
        "--webhook",
        &hook,
        "--webhook",
        &flaky,
        "--webhook-secret",
        SECRET,
    ];
    let (_coordinator, base) = start_coordinator_with(&db.url, &args);
    let cache = tempfile::tempdir().unwrap();
    let _worker = start_worker(&base, cache.path(), "w1", 2);

    let id = submit(&base, "configs/sweeps/demo.toml");
    let detail = wait_final(&base, id, Duration::from_secs(600)).await;
    assert_eq!(detail["state"], "done", "{detail}");
    let got = receiver.wait_for("hook", 1).await;
    let event = verified(&got[0]);
    assert_eq!(event.event, "sweep.finished");
    assert_eq!(event.delivery, format!("sweep-{id}-sweep.finished"));
    assert_eq!(event.sweep.id, id);
    assert_eq!(event.sweep.name, detail["name"]);
    assert_eq!(event.sweep.state.as_str(), "done");
    assert_eq!(event.sweep.positions_done, event.sweep.positions_total);
    assert_eq!(event.cross_checks.done, event.cross_checks.planned);
    assert_eq!(event.cross_checks.mismatches, 0);

    // The receiver that refused the first try got the same delivery again, and took it.
    let tries = receiver.wait_for("flaky", 2).await;
    assert_eq!(tries[0].body, tries[1].body, "a retry sends the same event");
    assert_eq!(verified(&tries[1]), event);

    // A cancelled sweep is announced as finished, with its state.
    let cancelled = submit_with(&base, "configs/sweeps/demo.toml", &["--force"]);
    let (code, _, err) = cli(&["cancel", &cancelled.to_string(), "--coordinator", &base]);
    assert_eq!(code, 0, "{err}");
    let got = receiver.wait_for("hook", 2).await;
    let second = verified(&got[1]);
    assert_eq!(
        (second.sweep.id, second.sweep.state.as_str()),
        (cancelled, "cancelled")
    );

    // A second coordinator on the same database, with the same receiver: nothing ended is
    // announced again, by either (each looks every 2 s).
    let (_other, _) = start_coordinator_with(&db.url, &args);
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(receiver.at("hook").len(), 2, "{:?}", receiver.at("hook"));
    assert_eq!(receiver.at("flaky").len(), 3);
}

#[test]
fn a_webhook_without_a_secret_or_with_a_bad_url_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sweep.db");
    let db = db.to_str().unwrap();
    let start = |extra: &[&str]| {
        let mut args = vec!["coordinator", "--database", db, "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        cli(&args)
    };
    let (code, _, err) = start(&["--webhook", "http://127.0.0.1:9/hook"]);
    assert_ne!(code, 0);
    assert!(err.contains("--webhook-secret"), "{err}");
    let (code, _, err) = start(&["--webhook", "ftp://x/", "--webhook-secret", "k"]);
    assert_ne!(code, 0);
    assert!(err.contains("--webhook `ftp://x/`"), "{err}");
}
