//! What every protocol driver shares: the engine process in its own group, one buffered write
//! per step, cancel-safe line reads with deadlines, the garbage limit, and telling a crash from
//! a hang.
//!
//! Every failure that leaves the process in an unknown state kills it and clears
//! [`EngineProcess::usable`], so a driver only has to set `usable` back after a clean answer.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::time::Instant;

use super::outcome::EngineError;
use crate::process::{kill_group, own_group, GroupGuard};
use crate::sandbox::Confinement;

/// Longest line accepted from an engine; longer means it is not speaking its protocol.
const MAX_LINE: usize = 1 << 20;
/// Unrecognised lines tolerated per command before the engine is declared broken.
pub(crate) const MAX_GARBAGE: u32 = 10_000;
/// After `stop`/`?` (timeout) or `quit`, how long the engine gets before it is killed.
pub(crate) const GRACE: Duration = Duration::from_secs(1);

/// Why [`EngineProcess::next_line`] returned no line.
pub(crate) enum ReadError {
    Timeout,
    TooLong,
    Io(std::io::Error),
}

/// Does `s` contain something that would end a protocol line early?
pub(crate) fn has_line_break(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// A running engine process and its pipes.
pub(crate) struct EngineProcess {
    child: GroupGuard,
    /// Its current directory outside a sandbox, removed with everything the engine wrote
    /// there once the process is gone (after `child`, whose drop kills it).
    _scratch: Option<tempfile::TempDir>,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: Vec<u8>,
    line_done: bool,
    /// Commands collected for the next [`EngineProcess::send`].
    pub(crate) cmd: String,
    binary: PathBuf,
    /// Is the process in a known state, ready for the next command?
    pub(crate) usable: bool,
}

impl EngineProcess {
    /// Starts `binary` as `confinement` says, in its own process group and a scratch
    /// directory of its own (never the caller's current directory), with an empty
    /// environment and piped stdin/stdout (stderr discarded).
    pub(crate) fn spawn(binary: &Path, confinement: &Confinement) -> Result<Self, EngineError> {
        let (mut cmd, scratch) = confinement
            .sandbox
            .engine_command(binary, &[], confinement.binary_dir)
            .map_err(EngineError::Spawn)?;
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        own_group(&mut cmd);
        let mut child = cmd.spawn().map_err(EngineError::Spawn)?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(EngineError::Protocol("engine pipes unavailable".into()));
        };
        Ok(EngineProcess {
            child: GroupGuard::new(child),
            _scratch: scratch,
            stdin,
            stdout: BufReader::with_capacity(64 * 1024, stdout),
            line: Vec::with_capacity(256),
            line_done: false,
            cmd: String::with_capacity(256),
            binary: binary.to_path_buf(),
            usable: false,
        })
    }

    /// Process id (until the process is reaped).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.0.id()
    }

    /// The binary this process runs.
    pub(crate) fn binary(&self) -> &Path {
        &self.binary
    }

    /// The last line read, without its line break (raw bytes: engines may send anything).
    pub(crate) fn line(&self) -> &[u8] {
        &self.line
    }

    /// Writes and flushes everything collected in `cmd`, in one write.
    pub(crate) async fn send(&mut self) -> Result<(), EngineError> {
        let result = async {
            self.stdin.write_all(self.cmd.as_bytes()).await?;
            self.stdin.flush().await
        }
        .await;
        self.cmd.clear();
        match result {
            Ok(()) => Ok(()),
            // A closed pipe means the engine is gone: report how it ended.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(self.crashed().await),
            Err(e) => {
                self.kill().await;
                Err(EngineError::Io(e))
            }
        }
    }

    /// Reads lines until one (trimmed) satisfies `want`; `Ok(false)` at the deadline.
    /// Lines that do not satisfy it count toward the garbage limit.
    pub(crate) async fn wait_for(
        &mut self,
        mut want: impl FnMut(&str) -> bool,
        deadline: Instant,
    ) -> Result<bool, EngineError> {
        let mut garbage = 0;
        loop {
            match self.next_line(deadline).await {
                Ok(true) => {}
                Ok(false) => return Err(self.crashed().await),
                Err(ReadError::Timeout) => return Ok(false),
                Err(e) => return Err(self.fail(e).await),
            }
            match std::str::from_utf8(&self.line) {
                Ok(t) if want(t.trim()) => return Ok(true),
                _ => {
                    // Introductions (`id`, `option`, `tellics`...) land here too; they count
                    // toward the same limit, which no honest engine comes near.
                    garbage += 1;
                    self.check_garbage(garbage).await?;
                }
            }
        }
    }

    /// Reads the next line into the line buffer: `Ok(true)` for a line, `Ok(false)` at EOF.
    /// Cancel-safe: a partial line survives a timeout and is completed by the next call.
    pub(crate) async fn next_line(&mut self, deadline: Instant) -> Result<bool, ReadError> {
        if self.line_done {
            self.line.clear();
            self.line_done = false;
        }
        let room = MAX_LINE.saturating_sub(self.line.len()) as u64;
        let mut limited = (&mut self.stdout).take(room);
        let read = limited.read_until(b'\n', &mut self.line);
        let n = match tokio::time::timeout_at(deadline, read).await {
            Err(_) => return Err(ReadError::Timeout),
            Ok(Err(e)) => return Err(ReadError::Io(e)),
            Ok(Ok(n)) => n,
        };
        if self.line.last() == Some(&b'\n') {
            self.line_done = true;
            return Ok(true);
        }
        if self.line.len() >= MAX_LINE {
            return Err(ReadError::TooLong);
        }
        if n == 0 && self.line.is_empty() {
            return Ok(false);
        }
        // The output ended inside a line: hand it over; the next read reports EOF.
        self.line_done = true;
        Ok(true)
    }

    /// Marks the start of a search: refuses an engine in an unknown state, and leaves
    /// `usable` false until the driver has read a clean answer (so a search future dropped
    /// half-way leaves the process marked unusable). Returns the start time.
    pub(crate) fn begin_search(&mut self) -> Result<Instant, EngineError> {
        if !self.usable {
            return Err(EngineError::Protocol(
                "engine is not in a usable state".into(),
            ));
        }
        self.usable = false;
        Ok(Instant::now())
    }

    /// Reads the next line of a search: `Ok(Some(text))` (trimmed) for a UTF-8 line,
    /// `Ok(None)` for one that is not (counted in `garbage`). At `deadline` the engine gets
    /// `stop` (the protocol's "move now", answered by a line starting with `answer`; see
    /// [`EngineProcess::interrupt`]); EOF and read failures end the search with the reason.
    pub(crate) async fn search_line(
        &mut self,
        deadline: Instant,
        stop: (&str, &str),
        timeout: Duration,
        garbage: &mut u32,
    ) -> Result<Option<&str>, EngineError> {
        match self.next_line(deadline).await {
            Ok(true) => {}
            Ok(false) => return Err(self.crashed().await),
            Err(ReadError::Timeout) => return Err(self.interrupt(stop.0, stop.1, timeout).await),
            Err(e) => return Err(self.fail(e).await),
        }
        if std::str::from_utf8(&self.line).is_err() {
            self.garbage_line(garbage).await?;
            return Ok(None);
        }
        // Checked just above; converted again so the borrow starts after the awaits.
        Ok(std::str::from_utf8(&self.line).ok().map(str::trim))
    }

    /// Counts one unrecognised line in `garbage` (see [`EngineProcess::check_garbage`]).
    pub(crate) async fn garbage_line(&mut self, garbage: &mut u32) -> Result<(), EngineError> {
        *garbage += 1;
        self.check_garbage(*garbage).await
    }

    /// Kills the engine once `count` unrecognised lines exceed [`MAX_GARBAGE`].
    pub(crate) async fn check_garbage(&mut self, count: u32) -> Result<(), EngineError> {
        if count > MAX_GARBAGE {
            self.kill().await;
            return Err(EngineError::Protocol(format!(
                "more than {MAX_GARBAGE} unrecognised lines"
            )));
        }
        Ok(())
    }

    /// Kills the engine after a read failure other than EOF and says why.
    pub(crate) async fn fail(&mut self, e: ReadError) -> EngineError {
        self.kill().await;
        match e {
            ReadError::TooLong => {
                EngineError::Protocol(format!("output line longer than {MAX_LINE} bytes"))
            }
            ReadError::Io(e) => EngineError::Io(e),
            ReadError::Timeout => EngineError::Protocol("timeout".into()),
        }
    }

    /// The engine's output ended: collect its exit status (killing it if it lingers).
    pub(crate) async fn crashed(&mut self) -> EngineError {
        self.usable = false;
        let status = match tokio::time::timeout(GRACE, self.child.0.wait()).await {
            Ok(Ok(status)) => status.to_string(),
            Ok(Err(e)) => format!("exit status unknown: {e}"),
            Err(_) => {
                self.kill().await;
                "closed its output but kept running; killed".to_string()
            }
        };
        EngineError::Crashed { status }
    }

    /// Sends `command` (the protocol's "exit") and waits a moment for the process to end,
    /// killing it if it has not.
    pub(crate) async fn quit(&mut self, command: &str) {
        self.cmd.push_str(command);
        if self.send().await.is_ok()
            && tokio::time::timeout(GRACE, self.child.0.wait())
                .await
                .is_ok()
        {
            return;
        }
        self.kill().await;
    }

    /// Ends the process so that all the CPU time it and its descendants used is counted in
    /// the worker's reaped children's: sends `command` (the protocol's "exit") and waits
    /// [`GRACE`] for the process to exit, which reaps it. In the timed sandbox
    /// ([`Sandbox::timed`](crate::sandbox::Sandbox::timed)) the process is bubblewrap, which
    /// reaps the engine (and the engine its own children) before it exits, so each one's time
    /// accrues to its parent up to the worker. A process that does not exit is killed, and
    /// that is an error: killing bubblewrap leaves the engine to be reaped by the system, so
    /// its time would be missing.
    pub(crate) async fn quit_reaped(&mut self, command: &str) -> Result<(), EngineError> {
        if !self.usable {
            self.kill().await;
            return Err(EngineError::Protocol(
                "engine is not in a usable state to quit".into(),
            ));
        }
        self.cmd.push_str(command);
        // A failed send has already collected the exit status, or killed the process.
        self.send().await?;
        match tokio::time::timeout(GRACE, self.child.0.wait()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => {
                self.kill().await;
                Err(EngineError::Io(e))
            }
            Err(_) => {
                self.kill().await;
                Err(EngineError::Protocol(format!(
                    "did not exit within {GRACE:?} of `{}`; killed",
                    command.trim()
                )))
            }
        }
    }

    /// Ends the process after a one-shot search: `quit` when it is in a known state, a kill
    /// otherwise.
    pub(crate) async fn close(&mut self, quit: &str) {
        if self.usable {
            self.quit(quit).await;
        } else {
            self.kill().await;
        }
    }

    /// After a search ran past `timeout`: sends `command` (the protocol's "move now") and gives
    /// the engine [`GRACE`] to answer with a line starting with `answer`. An engine that obeys
    /// is in a known state and stays usable; one that does not is killed.
    pub(crate) async fn interrupt(
        &mut self,
        command: &str,
        answer: &str,
        timeout: Duration,
    ) -> EngineError {
        self.cmd.push_str(command);
        let obeyed = self.send().await.is_ok()
            && matches!(
                self.wait_for(|l| l.starts_with(answer), Instant::now() + GRACE)
                    .await,
                Ok(true)
            );
        if obeyed {
            self.usable = true;
        } else {
            self.kill().await;
        }
        EngineError::Timeout { limit: timeout }
    }

    /// Kills the engine's process group now and reaps it.
    pub(crate) async fn kill(&mut self) {
        self.usable = false;
        kill_group(&mut self.child.0);
        let _ = tokio::time::timeout(GRACE, self.child.0.wait()).await;
    }
}
