//! Test support for the bundled `minnow` C engine: build a variant with
//! compile-time knobs (`make DEFINES=... OUT=...`) and talk raw, line-based
//! UCI to it with read timeouts. std only.

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

/// Directory holding the engine's C sources and Makefile.
pub fn source_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace's `suites/` directory (EPD files).
pub fn suites_dir() -> PathBuf {
    source_dir().join("..").join("..").join("suites")
}

/// Builds minnow with `-DNAME=VALUE` for every pair into `out` (the file
/// name of the binary) and returns its path. Runs
/// `make -C <source_dir> DEFINES="..." OUT=<out>`; the build is a single
/// `cc` call with no objects in the source tree, so concurrent builds of
/// different variants are safe.
pub fn build(defines: &[(&str, i64)], out: &Path) -> io::Result<PathBuf> {
    for (name, _) in defines {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad define name {name:?}"),
            ));
        }
    }
    let defs: Vec<String> = defines.iter().map(|(n, v)| format!("-D{n}={v}")).collect();
    let out = if out.is_absolute() {
        out.to_path_buf()
    } else {
        std::env::current_dir()?.join(out)
    };
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let res = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(source_dir())
        .arg(format!("DEFINES={}", defs.join(" ")))
        .arg(format!("OUT={}", out.display()))
        .stdin(Stdio::null())
        .output()?;
    if !res.status.success() {
        return Err(io::Error::other(format!(
            "make failed ({}): {}{}",
            res.status,
            String::from_utf8_lossy(&res.stdout),
            String::from_utf8_lossy(&res.stderr)
        )));
    }
    Ok(out)
}

/// The result of one `go`: everything the engine printed up to `bestmove`.
#[derive(Debug, Clone)]
pub struct SearchResult {
    pub bestmove: String,
    /// key=value pairs of the `info string counters ...` line
    pub counters: BTreeMap<String, u64>,
    pub lines: Vec<String>,
}

impl SearchResult {
    /// The search's node count, from the counters line; a search without one fails the
    /// test that asked (a count minnow never printed is not 0).
    pub fn nodes(&self) -> u64 {
        self.counters
            .get("nodes")
            .copied()
            .expect("minnow printed no `info string counters ... nodes=N` for this search")
    }
    pub fn counter(&self, k: &str) -> u64 {
        self.counters.get(k).copied().unwrap_or(0)
    }
}

/// A raw line-based UCI session over std::process pipes.
pub struct Uci {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<String>,
    pub timeout: Duration,
}

impl Uci {
    /// Spawns the engine; `timeout` bounds every wait for a line.
    pub fn spawn(exe: &Path, timeout: Duration) -> io::Result<Uci> {
        let mut child = Command::new(exe)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(l).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        Ok(Uci {
            child,
            stdin,
            rx,
            timeout,
        })
    }

    pub fn send(&mut self, line: &str) -> io::Result<()> {
        let w = self
            .stdin
            .as_mut()
            .ok_or_else(|| io::Error::other("stdin closed"))?;
        w.write_all(line.as_bytes())?;
        w.write_all(b"\n")?;
        w.flush()
    }

    /// Closes the engine's stdin (EOF).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Next output line, or an error after `self.timeout` / at EOF.
    pub fn read_line(&mut self) -> io::Result<String> {
        match self.rx.recv_timeout(self.timeout) {
            Ok(l) => Ok(l),
            Err(RecvTimeoutError::Timeout) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "engine read timeout",
            )),
            Err(RecvTimeoutError::Disconnected) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "engine closed stdout",
            )),
        }
    }

    /// Reads lines until one starts with `prefix`; returns all of them (the
    /// matching one last). The whole wait is bounded by `self.timeout`.
    pub fn read_until(&mut self, prefix: &str) -> io::Result<Vec<String>> {
        let deadline = Instant::now() + self.timeout;
        let mut lines = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let l = match self.rx.recv_timeout(left) {
                Ok(l) => l,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("timeout waiting for {prefix:?}; got {lines:?}"),
                    ))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("EOF waiting for {prefix:?}; got {lines:?}"),
                    ))
                }
            };
            let done = l.starts_with(prefix);
            lines.push(l);
            if done {
                return Ok(lines);
            }
        }
    }

    /// `uci` ... `uciok`, returns the handshake lines.
    pub fn handshake(&mut self) -> io::Result<Vec<String>> {
        self.send("uci")?;
        self.read_until("uciok")
    }

    /// `isready` ... `readyok`, returns the lines before it too.
    pub fn sync(&mut self) -> io::Result<Vec<String>> {
        self.send("isready")?;
        self.read_until("readyok")
    }

    /// Runs `go_cmd` on `position` (e.g. `"fen <fen>"` or `"startpos moves e2e4"`)
    /// after `ucinewgame`, and collects the output up to `bestmove`.
    pub fn search_new(&mut self, position: &str, go_cmd: &str) -> io::Result<SearchResult> {
        self.send("ucinewgame")?;
        self.search(position, go_cmd)
    }

    /// As `search_new` without `ucinewgame`.
    pub fn search(&mut self, position: &str, go_cmd: &str) -> io::Result<SearchResult> {
        self.send(&format!("position {position}"))?;
        self.send(go_cmd)?;
        let lines = self.read_until("bestmove")?;
        Ok(parse_search(lines))
    }

    /// `quit` and wait for the process (killed if it does not exit in time).
    pub fn quit(mut self) -> io::Result<std::process::ExitStatus> {
        let _ = self.send("quit");
        self.stdin = None;
        let deadline = Instant::now() + self.timeout;
        loop {
            if let Some(st) = self.child.try_wait()? {
                return Ok(st);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return self.child.wait();
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Uci {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Splits the lines of one search into bestmove and counters.
pub fn parse_search(lines: Vec<String>) -> SearchResult {
    let bestmove = lines
        .last()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("")
        .to_string();
    let mut counters = BTreeMap::new();
    for l in &lines {
        if let Some(rest) = l.strip_prefix("info string counters ") {
            for kv in rest.split_whitespace() {
                if let Some((k, v)) = kv.split_once('=') {
                    if let Ok(v) = v.parse() {
                        counters.insert(k.to_string(), v);
                    }
                }
            }
        }
    }
    SearchResult {
        bestmove,
        counters,
        lines,
    }
}

/// One EPD record: the FEN (first four fields plus "0 1") and the full line.
#[derive(Debug, Clone)]
pub struct EpdRecord {
    pub fen: String,
    pub id: String,
    pub line: String,
}

/// Reads the records of an EPD file (blank lines and `#` comments skipped).
pub fn read_epd(path: &Path) -> io::Result<Vec<EpdRecord>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 4 {
                return None;
            }
            let id = l
                .split(';')
                .map(str::trim)
                .find_map(|op| op.strip_prefix("id "))
                .map(|s| s.trim_matches('"').to_string())
                .unwrap_or_default();
            Some(EpdRecord {
                fen: format!("{} {} {} {} 0 1", f[0], f[1], f[2], f[3]),
                id,
                line: l.to_string(),
            })
        })
        .collect())
}
