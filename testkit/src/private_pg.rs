//! Private Postgres clusters: one per test that stops its database (stopping a shared server
//! would break every other test running at the same time), and one per test process when the
//! machine has no server to use.

use std::path::PathBuf;
use std::process::Command;

/// A throwaway cluster in a temp dir, on its own port.
pub struct PrivatePg {
    bin: PathBuf,
    dir: tempfile::TempDir,
    /// Port it listens on.
    pub port: u16,
}

/// What to do when there is neither a server nor the binaries to start one.
const INSTALL: &str = "no Postgres server answers on 127.0.0.1:5432 (or SWEEP_TEST_PG) and no \
     server binaries were found under /usr/lib/postgresql to start a private one: install \
     Debian's `postgresql` package (apt-get install postgresql), or set SWEEP_TEST_PG";

fn bin_dir() -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dir| {
            dir.filter_map(|e| e.ok().map(|e| e.path().join("bin")))
                .filter(|p| p.join("pg_ctl").exists() && p.join("initdb").exists())
                .collect()
        })
        .unwrap_or_default();
    // Numeric order: 9.6 < 15 < 16.
    versions.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.split('.').next())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    versions.pop().unwrap_or_else(|| panic!("{INSTALL}"))
}

/// Postgres refuses to run as root, so as root the server runs as the `postgres` user.
fn as_pg_user(program: &std::path::Path) -> Command {
    if unsafe { libc::geteuid() } == 0 {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

impl PrivatePg {
    /// initdb + start on a free port, trust auth.
    pub fn start() -> Self {
        let bin = bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("sweep-pg")
            .tempdir()
            .unwrap();
        if unsafe { libc::geteuid() } == 0 {
            let status = Command::new("chown")
                .arg("-R")
                .arg("postgres")
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(status.success());
        }
        let data = dir.path().join("data");
        let out = as_pg_user(&bin.join("initdb"))
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-D"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pg = Self { bin, dir, port };
        pg.resume();
        pg
    }

    /// URL of database `postgres`.
    pub fn url(&self) -> String {
        format!("{}/postgres", self.base())
    }

    /// URL of the server, without a database.
    pub fn base(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}", self.port)
    }

    /// Starts a cluster for the whole test process and returns its URL (without a
    /// database). Nothing in the process stops it: a detached shell watches the process and,
    /// once it has ended (however it ended; statics are never dropped), stops the cluster
    /// and removes its directory.
    pub fn start_for_process() -> String {
        let pg = Self::start();
        let dir = pg.dir.path().to_path_buf();
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop} -D {data} -m immediate stop >/dev/null 2>&1; rm -rf {dir}",
            pid = std::process::id(),
            stop = if unsafe { libc::geteuid() } == 0 {
                format!("runuser -u postgres -- {}", pg.bin.join("pg_ctl").display())
            } else {
                pg.bin.join("pg_ctl").display().to_string()
            },
            data = dir.join("data").display(),
            dir = dir.display(),
        );
        // Never waited for, on purpose: the reaper must outlive this process.
        #[allow(clippy::zombie_processes)]
        Command::new("sh")
            .args(["-c", &script])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starting the private cluster's reaper");
        let base = pg.base();
        // The reaper owns the cluster and its directory now.
        std::mem::forget(pg);
        base
    }

    /// Starts (again) and waits until it accepts connections.
    pub fn resume(&self) {
        let data = self.dir.path().join("data");
        let opts = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let out = as_pg_user(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&data)
            .args(["-o", &opts, "-l"])
            .arg(self.dir.path().join("log"))
            .args(["-w", "start"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_ctl start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Stops it (fast shutdown: clients are disconnected).
    pub fn stop(&self) {
        let out = as_pg_user(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "fast", "-w", "stop"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_ctl stop: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        let _ = as_pg_user(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "stop"])
            .output();
    }
}
