//! Containment of what contributors bring: every build command and every engine process (its
//! searches, its bench, the option check) runs inside a bubblewrap sandbox (Debian's
//! `bubblewrap`, the `bwrap` program), because a Makefile and the engine it writes are code a
//! team member submitted and are hostile until proven otherwise.
//!
//! Inside: the toolchain read-only (`/usr`, with the `/bin`, `/lib`... links of a merged-usr
//! system, a few files of `/etc` compilers need, and any `--sandbox-ro` directory), a private
//! directory read-write (a build's own copy of the source and its output directory; an
//! engine's scratch directory, its current directory), a fresh `/tmp`, `/dev` and `/proc`, no
//! network, a PID namespace of its own (no `/proc` of the worker), an empty environment plus a
//! fixed list, and nothing of the cache but an engine's own binary, read-only. The sandbox
//! dies with the worker. Without it (`--sandbox off`, said explicitly, and said in the build
//! records) builds and engines still get an empty environment and a scratch directory, but
//! they can read and write whatever the worker's user can.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::Command;

/// Directories of the toolchain every sandbox sees read-only.
const TOOLCHAIN: &[&str] = &["/usr", "/opt"];
/// Top-level links of a merged-usr system (`/bin -> usr/bin`), recreated as links; a real
/// directory of that name is bound read-only instead.
const USR_LINKS: &[&str] = &["/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"];
/// What of `/etc` a compiler or a dynamically linked engine needs: the loader's cache and
/// config, and Debian's alternatives (`cc -> gcc-12`). Nothing else of it (no passwd, no
/// keys, no resolver config).
const ETC: &[&str] = &[
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
];
/// The environment inside, besides `HOME` and `TMPDIR`.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How one engine process is run: in which sandbox, and whether the directory of its binary is
/// visible (a binary-only engine's, whose script may read files beside it; never a build's
/// cache directory).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Confinement {
    /// The sandbox.
    pub sandbox: Sandbox,
    /// Show the binary's directory read-only, not the binary alone.
    pub binary_dir: bool,
}

/// How builds and engines are to be contained (the `--sandbox` flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// bubblewrap, and refuse to start without it.
    #[default]
    On,
    /// No sandbox: builds and engines can do whatever the worker's user can.
    Off,
    /// bubblewrap when it works here, else none (with a warning): for `sweep run`, where the
    /// code is the user's own on their own machine.
    Auto,
}

/// Why the sandbox cannot be used.
#[derive(Debug, thiserror::Error)]
#[error(
    "the build and engine sandbox needs bubblewrap (`bwrap`), which {0}: install Debian's \
     `bubblewrap` package (apt-get install bubblewrap), or pass --sandbox off to run \
     contributors' builds and engines unconfined"
)]
pub struct SandboxMissing(String);

/// The sandbox builds and engines run in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Sandbox {
    /// None: an empty environment and a scratch directory only.
    #[default]
    Off,
    /// bubblewrap.
    Bwrap(Bwrap),
}

/// A bubblewrap that works on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bwrap {
    program: PathBuf,
    version: String,
    /// Directories bound read-only besides the toolchain (`--sandbox-ro`).
    read_only: Vec<PathBuf>,
    /// Engines run as their PID namespace's first process (see [`Sandbox::timed`]).
    as_pid_1: bool,
}

impl Sandbox {
    /// The sandbox `mode` asks for, with `read_only` directories visible inside: bubblewrap
    /// is looked up in `PATH` and tried once (a kernel without user namespaces refuses it).
    pub fn resolve(mode: SandboxMode, read_only: &[PathBuf]) -> Result<Self, SandboxMissing> {
        if mode == SandboxMode::Off {
            tracing::warn!(
                "--sandbox off: builds and engines run unconfined, as this worker's user"
            );
            return Ok(Sandbox::Off);
        }
        match probe(read_only) {
            Ok(b) => {
                tracing::info!(version = %b.version, "builds and engines run in a bubblewrap sandbox");
                Ok(Sandbox::Bwrap(b))
            }
            Err(why) if mode == SandboxMode::Auto => {
                tracing::warn!(%why, "no sandbox: builds and engines run unconfined (install Debian's `bubblewrap`)");
                Ok(Sandbox::Off)
            }
            Err(why) => Err(SandboxMissing(why)),
        }
    }

    /// This sandbox for engines whose CPU time is measured (a speed job's timed runs): the
    /// same containment, but inside bubblewrap the engine is its PID namespace's first
    /// process (`--as-pid-1`) instead of running under bubblewrap's own init. That init
    /// passes the engine's exit on and bubblewrap exits without reaping it, so the time the
    /// engine used never reaches the worker's reaped children (`getrusage(RUSAGE_CHILDREN)`);
    /// as the first process the engine is reaped by bubblewrap, which the worker reaps, and
    /// its time (with that of its own reaped children) is counted. Without a sandbox the
    /// engine is the worker's child anyway.
    pub fn timed(&self) -> Sandbox {
        match self {
            Sandbox::Off => Sandbox::Off,
            Sandbox::Bwrap(b) => Sandbox::Bwrap(Bwrap {
                as_pid_1: true,
                ..b.clone()
            }),
        }
    }

    /// What build records say of it: `bwrap 0.8.0`, or `off`.
    pub fn describe(&self) -> String {
        match self {
            Sandbox::Off => "off".to_string(),
            Sandbox::Bwrap(b) => format!("bwrap {}", b.version),
        }
    }

    /// A command running `program args` in `cwd`, with `private` (which holds `cwd`)
    /// writable and nothing else of the worker's files but the toolchain: a build.
    pub fn build_command(
        &self,
        program: &str,
        args: &[String],
        private: &Path,
        cwd: &Path,
    ) -> Command {
        self.command(program, args, &[], private, cwd)
    }

    /// A command running the engine `binary` (with `args`) in a scratch directory of its own,
    /// its current directory and `HOME`: the binary is visible read-only, with its directory
    /// when it is a binary-only engine's (`with_dir`: a script may read files beside it).
    /// Inside bubblewrap the scratch directory is in the sandbox's own `/tmp`, a tmpfs that
    /// vanishes with it whatever happens to the worker; without, it is a fresh directory of
    /// the system's, returned to be kept until the engine is gone (dropping it removes it
    /// with whatever the engine wrote there).
    pub fn engine_command(
        &self,
        binary: &Path,
        args: &[String],
        with_dir: bool,
    ) -> std::io::Result<(Command, Option<tempfile::TempDir>)> {
        let program = binary.to_string_lossy();
        match self {
            Sandbox::Off => {
                let scratch = tempfile::Builder::new().prefix("sweep-engine-").tempdir()?;
                let cmd = self.command(&program, args, &[], scratch.path(), scratch.path());
                Ok((cmd, Some(scratch)))
            }
            Sandbox::Bwrap(b) => {
                let visible = if with_dir {
                    binary.parent().unwrap_or(binary)
                } else {
                    binary
                };
                let mut cmd = b.command(&program, args, &[visible], None);
                cmd.current_dir("/").stdin(Stdio::null());
                Ok((cmd, None))
            }
        }
    }

    fn command(
        &self,
        program: &str,
        args: &[String],
        read_only: &[&Path],
        private: &Path,
        cwd: &Path,
    ) -> Command {
        let mut cmd = match self {
            Sandbox::Off => {
                let mut cmd = Command::new(program);
                cmd.args(args)
                    .env_clear()
                    .env("PATH", PATH)
                    .env("HOME", private)
                    .env("TMPDIR", private);
                cmd
            }
            Sandbox::Bwrap(b) => b.command(program, args, read_only, Some(private)),
        };
        cmd.current_dir(cwd).stdin(Stdio::null());
        cmd
    }
}

/// An engine's directory inside the sandbox, in its tmpfs `/tmp`.
const ENGINE_SCRATCH: &str = "/tmp/engine";

impl Bwrap {
    /// bubblewrap running `program args` with the toolchain and `read_only` visible, and
    /// `private` writable and the current directory (`None`: a directory of the sandbox's own
    /// tmpfs, [`ENGINE_SCRATCH`]).
    fn command(
        &self,
        program: &str,
        args: &[String],
        read_only: &[&Path],
        private: Option<&Path>,
    ) -> Command {
        let home = private.unwrap_or(Path::new(ENGINE_SCRATCH));
        let mut cmd = Command::new(&self.program);
        cmd.env_clear();
        cmd.args(["--die-with-parent", "--new-session", "--unshare-all"]);
        if self.as_pid_1 {
            cmd.arg("--as-pid-1");
        }
        cmd.args([
            "--clearenv",
            "--setenv",
            "PATH",
            PATH,
            "--setenv",
            "TMPDIR",
            "/tmp",
        ]);
        cmd.arg("--setenv").arg("HOME").arg(home);
        for dir in TOOLCHAIN
            .iter()
            .map(Path::new)
            .chain(self.read_only.iter().map(PathBuf::as_path))
        {
            if dir.exists() {
                cmd.arg("--ro-bind").arg(dir).arg(dir);
            }
        }
        for link in USR_LINKS.iter().map(Path::new) {
            match std::fs::read_link(link) {
                Ok(target) => {
                    cmd.arg("--symlink").arg(target).arg(link);
                }
                Err(_) if link.is_dir() => {
                    cmd.arg("--ro-bind").arg(link).arg(link);
                }
                Err(_) => {}
            }
        }
        for path in ETC.iter().map(Path::new).filter(|p| p.exists()) {
            cmd.arg("--ro-bind").arg(path).arg(path);
        }
        cmd.args(["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]);
        for path in read_only {
            cmd.arg("--ro-bind").arg(path).arg(path);
        }
        match private {
            // Last, so it stays writable whatever it lies under.
            Some(dir) => cmd.arg("--bind").arg(dir).arg(dir),
            None => cmd.args(["--dir", ENGINE_SCRATCH]),
        };
        cmd.arg("--chdir").arg(home);
        cmd.arg("--").arg(program).args(args);
        cmd
    }
}

/// Finds `bwrap` and runs `true` in a sandbox like the real ones; why not, in words.
fn probe(read_only: &[PathBuf]) -> Result<Bwrap, String> {
    let program = find_in_path("bwrap").ok_or("is not installed (no `bwrap` in PATH)")?;
    let version = std::process::Command::new(&program)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot be run ({e})"))?;
    let version = String::from_utf8_lossy(&version.stdout)
        .trim()
        .trim_start_matches("bubblewrap ")
        .to_string();
    let b = Bwrap {
        program,
        version,
        read_only: read_only.to_vec(),
        as_pid_1: false,
    };
    let mut cmd = b.command("/bin/true", &[], &[], None).into_std();
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot be run ({e})"))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(format!("does not work here ({}: {why})", out.status));
    }
    Ok(b)
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sandbox of this machine; tests that need one skip (saying so) where bubblewrap
    /// cannot run, and `.ci/run` installs it.
    fn bwrap() -> Option<Sandbox> {
        match Sandbox::resolve(SandboxMode::On, &[]) {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("skipped: {e}");
                None
            }
        }
    }

    async fn run(cmd: &mut Command) -> (bool, String) {
        let out = cmd.output().await.unwrap();
        let mut text = String::from_utf8_lossy(&out.stdout).to_string();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    }

    #[tokio::test]
    async fn a_build_sees_its_tree_and_the_toolchain_only() {
        let Some(sandbox) = bwrap() else { return };
        let dir = tempfile::tempdir().unwrap();
        let private = dir.path().join("private");
        std::fs::create_dir(&private).unwrap();
        let host = format!("/tmp/sweep-sandbox-test-{}", std::process::id());
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "secret").unwrap();
        let script = format!(
            "echo ok > made; cc --version >/dev/null && echo cc; \
             cat {0} 2>/dev/null && echo READ; echo x > {0}.w 2>/dev/null && echo WROTE; \
             echo y > {1}; ls /proc | grep '^[0-9]'; env | sort",
            outside.display(),
            host
        );
        let mut cmd = sandbox.build_command("/bin/sh", &["-c".into(), script], &private, &private);
        let (ok, text) = run(&mut cmd).await;
        assert!(ok, "{text}");
        assert!(private.join("made").is_file(), "its own tree is writable");
        assert!(text.contains("cc"), "the compiler is there: {text}");
        assert!(!text.contains("READ"), "{text}");
        // Writing beside the tree lands in the sandbox's own tmpfs, never on the host.
        assert!(!dir.path().join("outside.w").exists());
        // A PID namespace of its own: its shell and its children only.
        let pids: Vec<&str> = text.lines().filter(|l| l.parse::<u32>().is_ok()).collect();
        assert!(
            pids.iter().all(|n| n.parse::<u32>().unwrap() < 10),
            "{text}"
        );
        // An empty environment but for the fixed list.
        for line in text.lines().filter(|l| l.contains('=')) {
            let name = line.split('=').next().unwrap();
            assert!(
                ["PATH", "HOME", "TMPDIR", "PWD", "SHLVL", "_"].contains(&name),
                "{line}"
            );
        }
        assert!(
            !Path::new(&host).exists(),
            "the host's /tmp is not the sandbox's"
        );
    }

    #[tokio::test]
    async fn no_network_inside() {
        let Some(sandbox) = bwrap() else { return };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED");
        let mut cmd =
            sandbox.build_command("/bin/bash", &["-c".into(), script], dir.path(), dir.path());
        let (_, text) = run(&mut cmd).await;
        assert!(!text.contains("CONNECTED"), "{text}");
    }

    #[test]
    fn off_is_described_and_explicit() {
        assert_eq!(
            Sandbox::resolve(SandboxMode::Off, &[]).unwrap(),
            Sandbox::Off
        );
        assert_eq!(Sandbox::Off.describe(), "off");
        let missing = SandboxMissing("is not installed".into()).to_string();
        assert!(missing.contains("bubblewrap") && missing.contains("--sandbox off"));
    }
}
