//! A private Postgres server for tests that stop the database: stopping the machine's shared
//! server would break every other test running at the same time.

use std::path::PathBuf;
use std::process::Command;

/// A throwaway cluster in a temp dir, on its own port.
pub struct PrivatePg {
    bin: PathBuf,
    dir: tempfile::TempDir,
    /// Port it listens on.
    pub port: u16,
}

fn bin_dir() -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("Postgres server binaries under /usr/lib/postgresql")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("pg_ctl").exists())
        .collect();
    versions.sort();
    versions.pop().expect("a Postgres version with pg_ctl")
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
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
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
