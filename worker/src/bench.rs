//! An engine's own benchmark (`bench` in its definition): the node total of a fixed search the
//! engine runs on its own, which identifies what a binary does. A worker runs it once per
//! binary and reports the total with the build's record.
//!
//! The engine is started in its own process group, given the bench command on its standard
//! input followed by `quit` (or started with the bench's arguments), and both its output
//! streams are read line by line, bounded in size and time; the last line the pattern
//! matches gives the total. A bench that cannot be read is an error naming why, never a
//! total of 0.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use sweep_domain::engine::BenchPattern;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::process::{own_group, GroupGuard};
use crate::sandbox::Confinement;

/// Most output read from a bench, per stream; a bench that prints more is cut off there.
const MAX_OUTPUT: u64 = 4 << 20;
/// Lines of output quoted in an error.
const QUOTED_LINES: usize = 5;

/// Runs the bench of `bench` on `binary`, confined as its engine is: its node total, or why
/// there is none.
pub async fn run_bench(
    binary: &Path,
    bench: &BenchPattern,
    confinement: &Confinement,
) -> Result<u64, String> {
    let def = bench.def();
    let args: Vec<String> = def.argv.iter().flatten().cloned().collect();
    // `_scratch` lives until the bench is over (outside a sandbox it is the engine's
    // current directory).
    let (mut cmd, _scratch) = confinement
        .sandbox
        .engine_command(binary, &args, confinement.binary_dir)
        .map_err(|e| format!("bench: scratch directory: {e}"))?;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    own_group(&mut cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("bench: cannot start {}: {e}", binary.display()))?;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let mut child = GroupGuard::new(child);
    let (tx, mut lines) = mpsc::channel(256);
    if let Some(out) = stdout {
        tokio::spawn(forward_lines(out, tx.clone()));
    }
    if let Some(err) = stderr {
        tokio::spawn(forward_lines(err, tx));
    }
    if let Some(mut stdin) = stdin {
        if let Some(command) = &def.command {
            // An engine that exits before reading all of it is judged by what it printed.
            let _ = stdin
                .write_all(format!("{command}\nquit\n").as_bytes())
                .await;
        }
        // Dropped: an engine that reads to the end of its input sees it.
    }
    let timeout = Duration::from_secs(def.timeout_secs);
    let mut total = None;
    let mut tail: Vec<String> = Vec::new();
    let read = async {
        while let Some(line) = lines.recv().await {
            match bench.nodes_in(&line) {
                Some(Ok(n)) => total = Some(Ok(n)),
                Some(Err(why)) => total = Some(Err(why)),
                None => {}
            }
            tail.push(line);
            if tail.len() > QUOTED_LINES {
                tail.remove(0);
            }
        }
        child.0.wait().await
    };
    let status = match tokio::time::timeout(timeout, read).await {
        Ok(status) => status.map_err(|e| format!("bench: {e}"))?,
        Err(_) => {
            return Err(format!(
                "bench did not finish within {} s (timeout_secs)",
                def.timeout_secs
            ))
        }
    };
    match total {
        Some(Ok(n)) => Ok(n),
        Some(Err(why)) => Err(format!("bench: {why}")),
        None => Err(format!(
            "bench: the pattern `{}` matched no line of its output ({status}); last lines: {}",
            def.nodes,
            if tail.is_empty() {
                "none".to_string()
            } else {
                tail.join(" | ")
            }
        )),
    }
}

/// Sends each line of `stream` (at most [`MAX_OUTPUT`] bytes of it) to `tx`, lossily decoded.
async fn forward_lines(stream: impl AsyncRead + Unpin, tx: mpsc::Sender<String>) {
    let mut reader = BufReader::new(tokio::io::AsyncReadExt::take(stream, MAX_OUTPUT));
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf).trim().to_string();
                if tx.send(line).await.is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use sweep_domain::engine::BenchDef;

    fn script(dir: &Path, body: &str) -> std::path::PathBuf {
        let path = dir.join("engine.sh");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn bench(command: Option<&str>, argv: Option<&[&str]>, timeout_secs: u64) -> BenchPattern {
        BenchPattern::compile(&BenchDef {
            command: command.map(str::to_string),
            argv: argv.map(|a| a.iter().map(|s| s.to_string()).collect()),
            nodes: r"Nodes searched\s*:\s*(?P<nodes>\d+)".into(),
            timeout_secs,
        })
        .unwrap()
    }

    #[tokio::test]
    async fn reads_the_total_from_either_stream() {
        let dir = tempfile::tempdir().unwrap();
        // Reads its commands; prints the total on stderr, as Stockfish does.
        let engine = script(
            dir.path(),
            r#"while read -r cmd; do
  case "$cmd" in
    bench) echo "info depth 1 nodes 5"; echo "Nodes searched  : 12345" >&2 ;;
    quit) exit 0 ;;
  esac
done"#,
        );
        assert_eq!(
            run_bench(
                &engine,
                &bench(Some("bench"), None, 10),
                &Confinement::default()
            )
            .await,
            Ok(12345)
        );
        let argv = script(
            dir.path(),
            r#"[ "$1" = bench ] && echo "Nodes searched: 7" && echo "Nodes searched: 8""#,
        );
        assert_eq!(
            run_bench(
                &argv,
                &bench(None, Some(&["bench"]), 10),
                &Confinement::default()
            )
            .await,
            Ok(8)
        );
    }

    #[tokio::test]
    async fn a_bench_without_a_total_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let silent = script(dir.path(), "echo hello; exit 3");
        let e = run_bench(
            &silent,
            &bench(Some("bench"), None, 10),
            &Confinement::default(),
        )
        .await
        .unwrap_err();
        assert!(e.contains("matched no line") && e.contains("hello"), "{e}");
        let hang = script(dir.path(), "sleep 30");
        let started = std::time::Instant::now();
        let e = run_bench(
            &hang,
            &bench(Some("bench"), None, 1),
            &Confinement::default(),
        )
        .await
        .unwrap_err();
        assert!(e.contains("within 1 s"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
