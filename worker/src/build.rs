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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sweep_domain::bounds::{cut_marker, MAX_BUILD_OUTPUT};
use sweep_domain::engine::render_build_command;
use sweep_domain::plan::build_key;
use sweep_domain::wire::BuildSpec;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::sync::OnceCell;

use crate::allow::BuildPrograms;
use crate::process::{kill_group, own_group, GroupGuard};
use crate::tree::copy_tree;

/// Bytes of compiler output kept per stream (stdout, stderr): the last ones, where compilers
/// put their errors. Both streams, their cut markers and the report's first line fit in
/// [`MAX_BUILD_OUTPUT`], so nothing is cut twice on the way to the coordinator.
const OUTPUT_CAP: usize = MAX_BUILD_OUTPUT / 2 - 1024;

/// Layout of the binaries under `cache_dir/builds`. Version 1 (`builds/<key>`) built every
/// variant in the shared snapshot, where an engine writing object files into its tree got the
/// first variant's binary for all of them; its binaries are therefore never reused.
const LAYOUT: &str = "v2";

/// Environment variables a build keeps; everything else is cleared so that a worker's
/// environment cannot change what a variant means.
const KEPT_ENV: &[&str] = &["PATH", "HOME", "TMPDIR"];

/// Why a variant could not be built. Cloneable because a failure is remembered and handed to
/// every later request for the same key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The spec itself is unusable (bad binary name, bad define, empty command).
    #[error("invalid build spec: {0}")]
    Invalid(String),
    /// The build's program is not on this worker's allow-list: nothing was run.
    #[error(
        "build program `{program}` is not allowed on this worker (allowed: {allowed}); {hint}"
    )]
    Refused {
        /// argv[0] of the build command, as the coordinator sent it.
        program: String,
        /// The allowed programs, comma-separated (`none` if there are none).
        allowed: String,
        /// How to allow it.
        hint: String,
    },
    /// The build command exited unsuccessfully.
    #[error("build command failed ({status})")]
    Failed {
        /// Exit status as text.
        status: String,
        /// Captured stdout and stderr: the tail of each, after a line saying what was cut.
        output: String,
    },
    /// The build ran longer than its timeout and was killed.
    #[error("build timed out after {secs}s and was killed")]
    TimedOut {
        /// The timeout.
        secs: u64,
        /// Output captured until the kill.
        output: String,
    },
    /// The command succeeded but did not write the binary to `{out}`.
    #[error("build succeeded but did not produce `{binary}`")]
    NoBinary {
        /// Expected file name.
        binary: String,
        /// Captured output.
        output: String,
    },
    /// Spawning the command or handling files failed.
    #[error("build I/O error: {0}")]
    Io(String),
}

impl BuildError {
    /// Captured compiler output, if any.
    pub fn output(&self) -> &str {
        match self {
            BuildError::Failed { output, .. }
            | BuildError::TimedOut { output, .. }
            | BuildError::NoBinary { output, .. } => output,
            BuildError::Invalid(_) | BuildError::Refused { .. } | BuildError::Io(_) => "",
        }
    }

    /// The reason followed by the output: what a build-failed report carries.
    pub fn report(&self) -> String {
        let out = self.output();
        if out.is_empty() {
            self.to_string()
        } else {
            format!("{self}\n{out}")
        }
    }
}

type Cell = Arc<OnceCell<Result<PathBuf, BuildError>>>;

/// Builds variants on demand, once per key for the life of the process.
#[derive(Debug)]
pub struct BuildCache {
    root: PathBuf,
    cells: Mutex<HashMap<String, Cell>>,
    programs: BuildPrograms,
}

impl BuildCache {
    /// A cache under `cache_dir/builds` (in the current [`LAYOUT`]) that runs the default
    /// build programs ([`crate::allow::DEFAULT_BUILD_PROGRAMS`]).
    pub fn new(cache_dir: &Path) -> Self {
        BuildCache {
            root: cache_dir.join("builds").join(LAYOUT),
            cells: Mutex::new(HashMap::new()),
            programs: BuildPrograms::default(),
        }
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
            if final_path.is_file() {
                return Ok(final_path);
            }
            let started = std::time::Instant::now();
            let result = build(&self.root.join(&key), source_dir, spec).await;
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

async fn build(key_dir: &Path, source_dir: &Path, spec: &BuildSpec) -> Result<PathBuf, BuildError> {
    let io = |what: &str, e: std::io::Error| BuildError::Io(format!("{what}: {e}"));
    tokio::fs::create_dir_all(key_dir)
        .await
        .map_err(|e| io("creating build dir", e))?;
    let tmp = TempDir(key_dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    )));
    tokio::fs::create_dir(&tmp.0)
        .await
        .map_err(|e| io("creating temp dir", e))?;
    let result = build_in(&tmp.0, key_dir, source_dir, spec).await;
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
) -> Result<PathBuf, BuildError> {
    let io = |what: &str, e: std::io::Error| BuildError::Io(format!("{what}: {e}"));
    let tree = tmp.join("source");
    let out_dir = tmp.join("out");
    tokio::fs::create_dir(&out_dir)
        .await
        .map_err(|e| io("creating output dir", e))?;
    let out = out_dir.join(&spec.binary);
    let (Some(src), Some(out_str)) = (tree.to_str(), out.to_str()) else {
        return Err(BuildError::Invalid("cache path is not UTF-8".into()));
    };
    let argv = render_build_command(&spec.build_command, src, out_str, &spec.defines)
        .map_err(|e| BuildError::Invalid(e.to_string()))?;
    let Some((program, args)) = argv.split_first() else {
        return Err(BuildError::Invalid("empty build command".into()));
    };
    copy_source(source_dir, tmp, &tree).await?;

    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(&tree)
        .env_clear()
        .envs(
            KEPT_ENV
                .iter()
                .filter_map(|k| std::env::var_os(k).map(|v| (k, v))),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    own_group(&mut cmd);
    let mut guard = GroupGuard::new(
        cmd.spawn()
            .map_err(|e| io(&format!("starting `{program}`"), e))?,
    );
    let stdout = tokio::spawn(read_tail(guard.0.stdout.take()));
    let stderr = tokio::spawn(read_tail(guard.0.stderr.take()));

    let secs = spec.build_timeout_secs.max(1);
    let waited = tokio::time::timeout(Duration::from_secs(secs), guard.0.wait()).await;
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

    let status = match waited {
        Err(_) => return Err(BuildError::TimedOut { secs, output }),
        Ok(Err(e)) => return Err(io("waiting for the build", e)),
        Ok(Ok(status)) => status,
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
    tokio::fs::rename(&out, &final_path)
        .await
        .map_err(|e| io("moving the binary into the cache", e))?;
    Ok(final_path)
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

/// A stream's kept output: its last bytes, and how many came before them.
#[derive(Debug, Default, PartialEq, Eq)]
struct Tail {
    /// The last (at most [`OUTPUT_CAP`]) bytes, as text.
    text: String,
    /// Bytes cut from the front.
    cut: usize,
}

/// Reads a pipe to the end, keeping its last [`OUTPUT_CAP`] bytes (a compiler's errors come
/// last; the first lines are usually the command echoed); the whole pipe is drained so the
/// child never blocks on a full pipe.
async fn read_tail<R: AsyncRead + Unpin>(pipe: Option<R>) -> Tail {
    let Some(mut pipe) = pipe else {
        return Tail::default();
    };
    let mut kept = Vec::new();
    let mut cut = 0;
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                kept.extend_from_slice(&buf[..n]);
                // Trimmed in steps of at least OUTPUT_CAP, so the copying stays linear.
                if kept.len() >= 2 * OUTPUT_CAP {
                    let excess = kept.len() - OUTPUT_CAP;
                    kept.drain(..excess);
                    cut += excess;
                }
            }
        }
    }
    if kept.len() > OUTPUT_CAP {
        let excess = kept.len() - OUTPUT_CAP;
        kept.drain(..excess);
        cut += excess;
    }
    if cut > 0 {
        // Start at a character, not inside one (UTF-8 continuation bytes are 0b10xxxxxx).
        let inside = kept
            .iter()
            .take(3)
            .take_while(|b| *b & 0xC0 == 0x80)
            .count();
        kept.drain(..inside);
        cut += inside;
    }
    Tail {
        text: String::from_utf8_lossy(&kept).into_owned(),
        cut,
    }
}

/// Stdout then stderr, each after a line saying how much of its front was cut, if any.
fn join_output(stdout: Tail, stderr: Tail) -> String {
    let mut out = String::new();
    for tail in [stdout, stderr] {
        if tail.text.is_empty() && tail.cut == 0 {
            continue;
        }
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        if tail.cut > 0 {
            out.push_str(&cut_marker(tail.cut));
        }
        out.push_str(&tail.text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail(text: &str, cut: usize) -> Tail {
        Tail {
            text: text.into(),
            cut,
        }
    }

    #[test]
    fn output_joins_and_marks_what_was_cut() {
        let s = join_output(tail("a", 0), tail("b\n", 7));
        assert_eq!(s, "a\n[... 7 bytes cut; the last part follows]\nb\n");
        assert_eq!(join_output(tail("", 0), tail("e", 0)), "e");
    }

    #[tokio::test]
    async fn a_long_stream_keeps_its_tail() {
        // A compiler's error comes last, after far more than the cap of noise.
        let mut text = String::new();
        for i in 0..20_000 {
            text.push_str(&format!("cc -c file{i}.c\n"));
        }
        text.push_str("flaky.c:1: error: the real reason\n");
        let kept = read_tail(Some(text.as_bytes())).await;
        assert!(
            kept.text.ends_with("error: the real reason\n"),
            "{}",
            kept.text
        );
        assert_eq!(kept.text.len(), OUTPUT_CAP);
        assert_eq!(kept.cut, text.len() - OUTPUT_CAP);
        let joined = join_output(Tail::default(), kept);
        assert!(
            joined.starts_with(&format!("[... {} bytes cut", text.len() - OUTPUT_CAP)),
            "{}",
            &joined[..80]
        );

        // A cut inside a character moves to the next one instead of leaving a broken one.
        let text = format!("x{}", "é".repeat(OUTPUT_CAP));
        let kept = read_tail(Some(text.as_bytes())).await;
        assert!(!kept.text.contains('\u{FFFD}'));
        assert_eq!(kept.cut + kept.text.len(), text.len());

        // Short output is kept whole, unmarked.
        assert_eq!(
            read_tail(Some(&b"error: x\n"[..])).await,
            tail("error: x\n", 0)
        );
    }

    #[test]
    fn both_streams_and_the_report_fit_what_the_coordinator_keeps() {
        let big = || tail(&"y".repeat(OUTPUT_CAP), usize::MAX / 2);
        let e = BuildError::Failed {
            status: "exit status: 2".into(),
            output: join_output(big(), big()),
        };
        assert!(e.report().len() <= MAX_BUILD_OUTPUT, "{}", e.report().len());
    }

    #[test]
    fn binary_names_are_plain() {
        assert!(check_binary_name("minnow").is_ok());
        for bad in ["", "../x", "a/b", ".hidden"] {
            assert!(check_binary_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn report_includes_output() {
        let e = BuildError::Failed {
            status: "exit status: 2".into(),
            output: "error: x".into(),
        };
        assert_eq!(
            e.report(),
            "build command failed (exit status: 2)\nerror: x"
        );
    }
}
