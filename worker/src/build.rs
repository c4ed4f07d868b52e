//! The build cache: each variant (source x defines x recipe) is built once per machine.
//!
//! Binaries live at `cache_dir/builds/v2/<key>/<binary>` where the key is
//! [`sweep_domain::plan::build_key`]. A build writes into a temporary directory and the binary
//! is renamed into place only after the command succeeded, so the presence of the final file
//! means "finished", even across crashes and between worker processes sharing the cache.
//!
//! Each build runs in its own fresh copy of the source inside that temporary directory, never
//! in the shared unpacked snapshot, so no build sees another's outputs whatever its Makefile
//! writes where (the `tree` module says why). The copy goes away with the temporary directory.
//! The build command runs in the worker's sandbox ([`crate::sandbox`]), which sees that
//! temporary directory and the toolchain only: it cannot write into the cache.
//!
//! The cache trusts nothing it did not hash: a binary's sha256 is written beside it when it is
//! built (`<binary>.sha256`), and a binary found in the cache (built by an earlier process, or
//! by another worker sharing the directory) is used only if it still hashes to that; otherwise
//! it is logged, removed and built again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use sweep_domain::engine::render_build_command;
use sweep_domain::plan::build_key;
use sweep_domain::wire::BuildSpec;
use tokio::process::Command;
use tokio::sync::OnceCell;

use crate::allow::BuildPrograms;
use crate::process::{kill_group, own_group, GroupGuard};
use crate::sandbox::Sandbox;
use crate::tree::copy_tree;
use output::{join_output, read_tail};

pub(crate) mod error;
mod output;

pub use error::BuildError;

/// Layout of the binaries under `cache_dir/builds`. Version 1 (`builds/<key>`) built every
/// variant in the shared snapshot, where an engine writing object files into its tree got the
/// first variant's binary for all of them; its binaries are therefore never reused.
const LAYOUT: &str = "v2";

type Cell = Arc<OnceCell<Result<PathBuf, BuildError>>>;

/// Builds variants on demand, once per key for the life of the process.
#[derive(Debug)]
pub struct BuildCache {
    root: PathBuf,
    cells: Mutex<HashMap<String, Cell>>,
    programs: BuildPrograms,
    sandbox: Sandbox,
}

impl BuildCache {
    /// A cache under `cache_dir/builds` (in the current [`LAYOUT`]) that runs the default
    /// build programs ([`crate::allow::DEFAULT_BUILD_PROGRAMS`]).
    pub fn new(cache_dir: &Path) -> Self {
        BuildCache {
            root: cache_dir.join("builds").join(LAYOUT),
            cells: Mutex::new(HashMap::new()),
            programs: BuildPrograms::default(),
            sandbox: Sandbox::Off,
        }
    }

    /// This cache, running its builds in `sandbox`.
    pub fn with_sandbox(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// This cache, running only the build programs `programs` allows.
    pub fn with_programs(mut self, programs: BuildPrograms) -> Self {
        self.programs = programs;
        self
    }

    /// Refuses `spec` unless its build program is allowed here: checked before the source is
    /// fetched, and again before every build.
    pub fn check_program(&self, spec: &BuildSpec) -> Result<(), BuildError> {
        self.programs.check(spec)
    }

    /// Where the binary of `spec` is (or will be) once built.
    pub fn binary_path(&self, spec: &BuildSpec) -> PathBuf {
        self.root
            .join(build_key(
                &spec.source_sha256,
                &spec.defines,
                &spec.build_command,
            ))
            .join(&spec.binary)
    }

    /// The binary of `spec` built from the unpacked source in `source_dir`, which the build
    /// only reads: it runs in a private copy. Concurrent calls for the same key share one
    /// build; a failure is remembered and returned again without rebuilding (a broken variant
    /// stays broken for the same source and recipe). A program not on the allow-list is
    /// refused before anything runs, even if its binary is already in the cache.
    pub async fn get(&self, source_dir: &Path, spec: &BuildSpec) -> Result<PathBuf, BuildError> {
        self.programs.check(spec)?;
        check_binary_name(&spec.binary)?;
        let key = build_key(&spec.source_sha256, &spec.defines, &spec.build_command);
        let cell = {
            let mut cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
            cells.entry(key.clone()).or_default().clone()
        };
        cell.get_or_init(|| async {
            let final_path = self.root.join(&key).join(&spec.binary);
            if final_path.is_file() && cached_is_intact(&final_path).await {
                return Ok(final_path);
            }
            let started = std::time::Instant::now();
            let result = build(&self.root.join(&key), source_dir, spec, &self.sandbox).await;
            match &result {
                Ok(_) => tracing::info!(
                    build = %spec.name, key = %key, ms = started.elapsed().as_millis() as u64,
                    "built variant"
                ),
                Err(e) => {
                    tracing::warn!(build = %spec.name, key = %key, error = %e, "build failed")
                }
            }
            result
        })
        .await
        .clone()
    }
}

fn check_binary_name(binary: &str) -> Result<(), BuildError> {
    if binary.is_empty() || binary.contains('/') || binary.starts_with('.') || binary.contains('\0')
    {
        return Err(BuildError::Invalid(format!(
            "binary `{binary}` is not a plain file name"
        )));
    }
    Ok(())
}

/// Removes a build's temporary directory however the build ends (including being dropped).
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn io_error(what: &str, e: std::io::Error) -> BuildError {
    BuildError::Io(format!("{what}: {e}"))
}

/// Does the cached binary at `path` still hash to what was recorded when it was built? A
/// binary without a record, or with another hash, is logged and removed, so it is built again.
async fn cached_is_intact(path: &Path) -> bool {
    let record = sha_file(path);
    let (expected, actual) = tokio::join!(tokio::fs::read_to_string(&record), sha256_of(path));
    match (expected, actual) {
        (Ok(expected), Ok(actual)) if expected.trim() == actual => true,
        (expected, actual) => {
            tracing::warn!(
                binary = %path.display(),
                recorded = ?expected.ok().map(|e| e.trim().to_string()),
                actual = ?actual.ok(),
                "cached binary does not match the hash recorded when it was built: building it again"
            );
            let _ = tokio::fs::remove_file(path).await;
            let _ = tokio::fs::remove_file(&record).await;
            false
        }
    }
}

/// Where the sha256 of a cached binary is kept.
fn sha_file(binary: &Path) -> PathBuf {
    let mut name = binary.as_os_str().to_owned();
    name.push(".sha256");
    PathBuf::from(name)
}

async fn sha256_of(path: &Path) -> std::io::Result<String> {
    let bytes = tokio::fs::read(path).await?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

async fn build(
    key_dir: &Path,
    source_dir: &Path,
    spec: &BuildSpec,
    sandbox: &Sandbox,
) -> Result<PathBuf, BuildError> {
    tokio::fs::create_dir_all(key_dir)
        .await
        .map_err(|e| io_error("creating build dir", e))?;
    let tmp = TempDir(key_dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    )));
    tokio::fs::create_dir(&tmp.0)
        .await
        .map_err(|e| io_error("creating temp dir", e))?;
    let result = build_in(&tmp.0, key_dir, source_dir, spec, sandbox).await;
    // The private tree can be large once a real engine's objects are in it: remove it off the
    // runtime's threads. The guard still covers a build future dropped midway.
    let _ = tokio::fs::remove_dir_all(&tmp.0).await;
    result
}

/// Builds `spec` inside `tmp`: copies the source to `tmp/source`, runs the command there with
/// `{out}` in `tmp/out`, and moves the binary into `key_dir`.
async fn build_in(
    tmp: &Path,
    key_dir: &Path,
    source_dir: &Path,
    spec: &BuildSpec,
    sandbox: &Sandbox,
) -> Result<PathBuf, BuildError> {
    let tree = tmp.join("source");
    let out_dir = tmp.join("out");
    tokio::fs::create_dir(&out_dir)
        .await
        .map_err(|e| io_error("creating output dir", e))?;
    let out = out_dir.join(&spec.binary);
    let argv = build_argv(&tree, &out, spec)?;
    let Some((program, args)) = argv.split_first() else {
        return Err(BuildError::Invalid("empty build command".into()));
    };
    copy_source(source_dir, tmp, &tree).await?;
    let secs = spec.build_timeout_secs.max(1);
    let timeout = Duration::from_secs(secs);
    let command = sandbox.build_command(program, args, tmp, &tree);
    let (status, output) = run_command(command, program, timeout).await?;
    let Some(status) = status else {
        return Err(BuildError::TimedOut { secs, output });
    };
    if !status.success() {
        return Err(BuildError::Failed {
            status: status.to_string(),
            output,
        });
    }
    if !out.is_file() {
        return Err(BuildError::NoBinary {
            binary: spec.binary.clone(),
            output,
        });
    }
    let final_path = key_dir.join(&spec.binary);
    // The hash first: a binary in place without one is taken for tampered and rebuilt.
    let sha = sha256_of(&out)
        .await
        .map_err(|e| io_error("hashing the binary", e))?;
    tokio::fs::write(sha_file(&final_path), sha)
        .await
        .map_err(|e| io_error("recording the binary's hash", e))?;
    tokio::fs::rename(&out, &final_path)
        .await
        .map_err(|e| io_error("moving the binary into the cache", e))?;
    Ok(final_path)
}

/// The build command of `spec` with `{source}` at `tree` and `{out}` at `out`.
fn build_argv(tree: &Path, out: &Path, spec: &BuildSpec) -> Result<Vec<String>, BuildError> {
    let (Some(src), Some(out)) = (tree.to_str(), out.to_str()) else {
        return Err(BuildError::Invalid("cache path is not UTF-8".into()));
    };
    render_build_command(&spec.build_command, src, out, &spec.defines)
        .map_err(|e| BuildError::Invalid(e.to_string()))
}

/// Runs the build command `cmd` (the sandbox's, with an empty environment; `program` names
/// it in errors) in its own process group for at most `timeout`, killing the group after
/// that. Returns the exit status (`None`: timed out and killed) and the captured output.
async fn run_command(
    mut cmd: Command,
    program: &str,
    timeout: Duration,
) -> Result<(Option<ExitStatus>, String), BuildError> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    own_group(&mut cmd);
    let mut guard = GroupGuard::new(
        cmd.spawn()
            .map_err(|e| io_error(&format!("starting `{program}`"), e))?,
    );
    let stdout = tokio::spawn(read_tail(guard.0.stdout.take()));
    let stderr = tokio::spawn(read_tail(guard.0.stderr.take()));

    let waited = tokio::time::timeout(timeout, guard.0.wait()).await;
    if waited.is_err() {
        kill_group(&mut guard.0);
        let _ = guard.0.wait().await;
    }
    // The whole group is gone (or exited), so the pipes close and the readers end soon; the
    // bound only guards against a grandchild that escaped the group.
    let grace = Duration::from_secs(2);
    let out_text = tokio::time::timeout(grace, stdout)
        .await
        .ok()
        .and_then(Result::ok);
    let err_text = tokio::time::timeout(grace, stderr)
        .await
        .ok()
        .and_then(Result::ok);
    let output = join_output(out_text.unwrap_or_default(), err_text.unwrap_or_default());
    match waited {
        Err(_) => Ok((None, output)),
        Ok(Err(e)) => Err(io_error("waiting for the build", e)),
        Ok(Ok(status)) => Ok((Some(status), output)),
    }
}

/// Copies `source_dir` to `tree`, a fresh directory inside the build's temporary directory
/// `tmp`.
async fn copy_source(source_dir: &Path, tmp: &Path, tree: &Path) -> Result<(), BuildError> {
    let (from, tmp, to) = (
        source_dir.to_path_buf(),
        tmp.to_path_buf(),
        tree.to_path_buf(),
    );
    tokio::task::spawn_blocking(move || {
        let copy_err = |e: std::io::Error| {
            BuildError::Io(format!("copying the source into a private tree: {e}"))
        };
        let real = |p: &Path| {
            p.canonicalize()
                .map_err(|e| BuildError::Io(format!("resolving {}: {e}", p.display())))
        };
        // A source directory holding the cache would be copied into itself without end.
        let within = real(&tmp)?.starts_with(real(&from)?);
        if within {
            return Err(BuildError::Invalid(format!(
                "source directory {} contains the build cache",
                from.display()
            )));
        }
        copy_tree(&from, &to).map_err(copy_err)
    })
    .await
    .map_err(|e| BuildError::Io(format!("copying task: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_names_are_plain() {
        assert!(check_binary_name("minnow").is_ok());
        for bad in ["", "../x", "a/b", ".hidden"] {
            assert!(check_binary_name(bad).is_err(), "{bad}");
        }
    }
}
