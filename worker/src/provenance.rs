//! This worker's side of build provenance: what it tells the coordinator about how it got a
//! build's binary (host, CPU model, compiler, the build command, the binary's sha256), once
//! per build.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use sweep_domain::build::BuildSpec;
use sweep_domain::engine::{render_build_command, BenchPattern};
use sweep_domain::provenance::{BuildRecord, MAX_RECORD_TEXT};
use tokio::sync::OnceCell;

use crate::bench::run_bench;
use crate::sandbox::{Confinement, Sandbox};

/// A binary's bench total, or why there is none, computed once and shared.
type Bench = Arc<OnceCell<Result<u64, String>>>;

/// Makes build records and remembers which builds were reported.
#[derive(Debug, Default)]
pub struct BuildRecorder {
    host: String,
    /// The sandbox builds and engines run in, as records say it.
    sandbox: String,
    cpu_model: String,
    compiler: OnceCell<Option<String>>,
    /// sha256 per binary path (cache entries never change once built).
    shas: Mutex<HashMap<PathBuf, String>>,
    /// (sweep id, build name) already reported.
    reported: Mutex<HashSet<(i64, String)>>,
    /// Bench totals by binary sha256: run once per binary for the life of the process.
    benches: Mutex<HashMap<String, Bench>>,
}

impl BuildRecorder {
    /// A recorder for this machine, whose builds and engines run in `sandbox`.
    pub fn new(host: &str, sandbox: &Sandbox) -> Self {
        BuildRecorder {
            host: host.to_string(),
            sandbox: sandbox.describe(),
            cpu_model: cpu_model().unwrap_or_default(),
            ..Default::default()
        }
    }

    /// Whether the build was already reported by this process.
    pub fn reported(&self, sweep_id: i64, build: &str) -> bool {
        self.reported
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&(sweep_id, build.to_string()))
    }

    /// Remembers that the build was reported.
    pub fn mark_reported(&self, sweep_id: i64, build: &str) {
        self.reported
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((sweep_id, build.to_string()));
    }

    /// The node total of the engine's bench on `binary` (see [`crate::bench`]), run once per
    /// binary (by content) however many builds or jobs share it; `Ok(None)` when the
    /// engine's definition names no bench.
    pub async fn bench(
        &self,
        spec: &BuildSpec,
        binary: &Path,
        confinement: &Confinement,
    ) -> Result<Option<u64>, String> {
        let Some(def) = &spec.bench else {
            return Ok(None);
        };
        let sha = self
            .sha_of(binary)
            .await
            .map_err(|e| format!("bench: cannot read {}: {e}", binary.display()))?;
        let cell = self
            .benches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(sha)
            .or_default()
            .clone();
        let total = cell
            .get_or_init(|| async {
                let started = std::time::Instant::now();
                let total = match BenchPattern::compile(def) {
                    Ok(pattern) => run_bench(binary, &pattern, confinement).await,
                    Err(e) => Err(format!("bench: {e}")),
                };
                match &total {
                    Ok(n) => tracing::info!(build = %spec.name, nodes = n, ms = started.elapsed().as_millis() as u64, "bench"),
                    Err(e) => tracing::warn!(build = %spec.name, error = %e, "bench failed"),
                }
                total
            })
            .await;
        total.clone().map(Some)
    }

    /// The record of `spec` built (or found) at `binary`, with its bench total.
    pub async fn record(
        &self,
        spec: &BuildSpec,
        binary: &Path,
        bench_nodes: Option<u64>,
    ) -> std::io::Result<BuildRecord> {
        let from_source = spec.binary_path.is_none();
        let compiler = if from_source {
            self.compiler.get_or_init(cc_version).await.clone()
        } else {
            None
        };
        // The private tree's paths differ per build: keep the placeholders.
        let argv = if from_source {
            render_build_command(&spec.build_command, "{source}", "{out}", &spec.defines)
                .unwrap_or_else(|_| spec.build_command.clone())
        } else {
            Vec::new()
        };
        Ok(BuildRecord {
            host: self.host.clone(),
            cpu_model: self.cpu_model.clone(),
            compiler,
            argv: argv.into_iter().map(|a| clip(&a)).collect(),
            binary_sha256: self.sha_of(binary).await?,
            bench_nodes,
            sandbox: self.sandbox.clone(),
        })
    }

    async fn sha_of(&self, binary: &Path) -> std::io::Result<String> {
        if let Some(sha) = self
            .shas
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(binary)
        {
            return Ok(sha.clone());
        }
        let bytes = tokio::fs::read(binary).await?;
        let sha = hex::encode(Sha256::digest(&bytes));
        self.shas
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(binary.to_path_buf(), sha.clone());
        Ok(sha)
    }
}

/// Text as a record keeps it: one line, control characters dropped, at most
/// [`MAX_RECORD_TEXT`] bytes.
fn clip(text: &str) -> String {
    let mut out: String = text.chars().filter(|c| !c.is_control()).collect();
    while out.len() > MAX_RECORD_TEXT {
        out.pop();
    }
    out
}

/// `model name` of the first CPU in /proc/cpuinfo (Linux).
fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines().find_map(|l| {
        l.strip_prefix("model name")?
            .split_once(':')
            .map(|(_, v)| clip(v.trim()))
    })
}

/// First line of `cc --version`: the compiler a Makefile's `$(CC)` gets by default.
async fn cc_version() -> Option<String> {
    let out = tokio::process::Command::new("cc")
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .next()
        .map(|l| clip(l.trim()))
        .filter(|l| !l.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::build_spec;

    #[tokio::test]
    async fn records_the_binary_and_the_command_with_its_defines() {
        let dir = tempfile::tempdir().unwrap();
        let binary = dir.path().join("engine");
        std::fs::write(&binary, b"abc").unwrap();
        let spec = BuildSpec {
            name: "K=3".into(),
            defines: [("K".to_string(), 3)].into(),
            binary: "engine".into(),
            ..build_spec(&["make", "DEFINES={defines}", "OUT={out}"])
        };
        let r = BuildRecorder::new("box", &Sandbox::Off)
            .record(&spec, &binary, Some(5))
            .await
            .unwrap();
        // python3: hashlib.sha256(b"abc").hexdigest()
        assert_eq!(
            r.binary_sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(r.argv, ["make", "DEFINES=-DK=3", "OUT={out}"]);
        assert_eq!((r.host.as_str(), r.bench_nodes), ("box", Some(5)));
        assert_eq!(r.sandbox, "off");
        r.check().unwrap();
    }

    #[test]
    fn clip_keeps_one_bounded_line() {
        assert_eq!(clip("a\nb\u{7}c"), "abc");
        assert_eq!(clip(&"é".repeat(400)).len(), MAX_RECORD_TEXT);
    }
}
