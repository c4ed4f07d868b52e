//! Test support shared by every test suite of the workspace: one way to get a Postgres
//! server ([`pg_base`]) and a fresh database per test ([`TestDb`]), and private clusters for
//! tests that stop their database ([`PrivatePg`]), and a throwaway CA and server certificate
//! for HTTPS tests ([`tls::TestPki`]), and a stand-in coordinator for worker tests
//! ([`stand_in`]).
//!
//! Which server: `SWEEP_TEST_PG` when set (a URL without a database, or `private`); else the
//! machine's server on 127.0.0.1:5432 when one answers; else (and for `private`) a private
//! throwaway cluster started once per test process (from Debian's `postgresql` package) and
//! removed when the process ends.

mod private_pg;
pub mod stand_in;
pub mod tls;

use std::net::{SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::{Connection, PgConnection};

pub use private_pg::PrivatePg;

/// The machine's usual server.
const DEFAULT_BASE: &str = "postgres://postgres@127.0.0.1:5432";

/// The URL of the Postgres server tests use, without a database and without a trailing `/`
/// (see the crate documentation for which server).
pub fn pg_base() -> String {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        match std::env::var("SWEEP_TEST_PG") {
            Ok(private) if private == "private" => return PrivatePg::start_for_process(),
            Ok(url) => return url.trim_end_matches('/').to_string(),
            Err(_) => {}
        }
        let usual: SocketAddr = "127.0.0.1:5432".parse().expect("address");
        if TcpStream::connect_timeout(&usual, Duration::from_secs(1)).is_ok() {
            return DEFAULT_BASE.to_string();
        }
        PrivatePg::start_for_process()
    })
    .clone()
}

/// A database that exists for one test (`sweep_test_<unique>`), dropped with this value.
pub struct TestDb {
    /// Its URL.
    pub url: String,
    name: String,
}

impl TestDb {
    /// Creates a fresh database on [`pg_base`].
    pub async fn new() -> Self {
        let name = format!("sweep_test_{}", unique());
        let base = pg_base();
        let mut conn = PgConnection::connect(&format!("{base}/postgres"))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "connecting to Postgres at {base}: {e} (set SWEEP_TEST_PG to a server's URL)"
                )
            });
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await
            .expect("creating the test database");
        Self {
            url: format!("{base}/{name}"),
            name,
        }
    }

    /// A connection to the test database.
    pub async fn connect(&self) -> PgConnection {
        PgConnection::connect(&self.url)
            .await
            .expect("connecting to the test database")
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let (base, name) = (pg_base(), self.name.clone());
        // Drop runs inside the test's runtime (or while unwinding from a failed assertion);
        // a plain thread with its own runtime can block on the async drop in both cases.
        // FORCE ends the connections the code under test still holds.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                if let Ok(mut c) = PgConnection::connect(&format!("{base}/postgres")).await {
                    let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .execute(&mut c)
                        .await;
                }
            });
        })
        .join();
    }
}

/// Unique within the machine: time, process and a counter.
fn unique() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos();
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{nanos:x}_{}_{n}", std::process::id())
}
