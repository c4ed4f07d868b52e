//! The reaper: a small process that outlives the worker by a moment and kills every process
//! group the worker started, however the worker ended (including `kill -9`).
//!
//! # Why a reaper, and not `PR_SET_PDEATHSIG`
//!
//! `PR_SET_PDEATHSIG` set in a child fires when the *thread* that forked it exits, not the
//! process: a child spawned from a tokio blocking-pool thread (which exits after 10 s idle)
//! would be killed while the worker is alive and well. And it covers only the direct child: a
//! build's `make` would die, but the `cc` (or the `sleep` of a recipe) under it would keep
//! running. The kernel offers nothing that follows a whole process group on a parent's death.
//!
//! So the worker forks one reaper per process, the first time it starts a child. The two
//! share a `SOCK_SEQPACKET` socket pair; the worker keeps its end open (close-on-exec, so no
//! engine or compiler inherits it past `exec`) for the rest of its life. When the worker dies,
//! by any signal, the kernel closes that end, the reaper's `recv` returns 0, and the reaper
//! sends `SIGKILL` to every group it knows and exits. Groups die as groups, so a build's
//! grandchildren go with it.
//!
//! # Registration without a gap
//!
//! Each child registers its own group, from `pre_exec` (after `fork`, before `exec`): it makes
//! itself a group leader and sends its pid to the reaper. The child holds a copy of the
//! worker's end until its `exec` closes it, so the reaper cannot see end-of-file before the
//! registration arrives: a worker killed at any instant after the fork still takes the child
//! with it. The worker sends "forget this group" once it has killed and reaped the child (the
//! group id could be reused afterwards). Each message is one 4-byte record (`+pgid` / `-pgid`);
//! `SOCK_SEQPACKET` keeps records whole and `MSG_NOSIGNAL` means a dead reaper costs a failed
//! send, never a `SIGPIPE`.
//!
//! # What runs in the forked reaper
//!
//! The worker has many threads when it forks, so the reaper (which never calls `exec`) only
//! makes async-signal-safe calls: `close`, `open`, `dup2`, `setpgid`, `signal`, `prctl`,
//! `recv`, `kill`, `_exit`. It never allocates: its table of groups is allocated before the
//! fork. It moves to its own process group, so a Ctrl-C or a `kill -- -PGID` aimed at the
//! worker's group leaves it alive to clean up after the worker.
//!
//! Limits: a process that leaves its group on purpose (`setsid`, `setpgid`) escapes, and at
//! most [`CAPACITY`] groups are tracked at once (a worker runs one per engine slot plus
//! builds in flight).

use std::io;
use std::os::fd::RawFd;
use std::sync::OnceLock;

/// Process groups tracked at once; past it, new groups run untracked (the reaper cannot log).
pub(crate) const CAPACITY: usize = 4096;

/// How long a registration may wait for a reaper that does not read (stopped, say) before
/// the child starts untracked rather than hanging the worker's spawn.
const SEND_TIMEOUT_SECS: libc::time_t = 2;

/// The worker's end of the reaper's socket.
#[derive(Debug)]
pub(crate) struct Reaper {
    /// Write end, close-on-exec. Never closed: its closing (the worker's death) is the signal.
    fd: RawFd,
    /// The reaper's pid, for the log.
    pid: libc::pid_t,
}

static REAPER: OnceLock<Option<Reaper>> = OnceLock::new();

/// The reaper of this process, started on first use; `None` if it could not be started (the
/// error is logged once and children then run untracked, as before the reaper existed).
pub(crate) fn reaper() -> Option<&'static Reaper> {
    REAPER
        .get_or_init(|| match Reaper::start() {
            Ok(r) => {
                tracing::debug!(reaper_pid = r.pid, "started the reaper of child processes");
                Some(r)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the reaper: children may outlive a killed worker");
                None
            }
        })
        .as_ref()
}

impl Reaper {
    fn start() -> io::Result<Reaper> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: `fds` is valid for two ints.
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let [ours, theirs] = fds;
        let timeout = libc::timeval {
            tv_sec: SEND_TIMEOUT_SECS,
            tv_usec: 0,
        };
        // SAFETY: valid fd and a timeval of the size given. Failure only loses the bound.
        unsafe {
            libc::setsockopt(
                ours,
                libc::SOL_SOCKET,
                libc::SO_SNDTIMEO,
                (&timeout as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            );
        }
        // Allocated here: the forked reaper must not allocate.
        let mut table = vec![0 as libc::pid_t; CAPACITY];
        // SAFETY: fork is safe to call; the child below only makes async-signal-safe calls
        // and never returns.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = io::Error::last_os_error();
            // SAFETY: closing fds this function opened.
            unsafe {
                libc::close(ours);
                libc::close(theirs);
            }
            return Err(e);
        }
        if pid == 0 {
            // SAFETY: we are the freshly forked child.
            unsafe { reaper_main(theirs, ours, &mut table) }
        }
        // SAFETY: the reaper has its own copy; ours is no longer needed.
        unsafe {
            libc::close(theirs);
        }
        Ok(Reaper { fd: ours, pid })
    }

    /// The socket a child registers on (see [`register_self`]).
    pub(crate) fn fd(&self) -> RawFd {
        self.fd
    }

    /// Tells the reaper that group `pgid` is gone (killed and its leader reaped), so a later
    /// group reusing the id is not killed. Never blocks: a full socket loses the message.
    pub(crate) fn forget(&self, pgid: libc::pid_t) {
        send(self.fd, -pgid, libc::MSG_DONTWAIT);
    }
}

/// Called in a child between `fork` and `exec`: makes the child the leader of a new process
/// group and registers that group with the reaper whose socket is `fd`. Only
/// async-signal-safe calls. A failed registration (reaper gone) does not stop the child.
///
/// # Safety
/// Only to be called in a forked child before `exec` (a `pre_exec` hook).
pub(crate) unsafe fn register_self(fd: RawFd) -> io::Result<()> {
    if libc::setpgid(0, 0) != 0 {
        return Err(io::Error::last_os_error());
    }
    send(fd, libc::getpid(), 0);
    Ok(())
}

/// Sends one record; async-signal-safe, never raises `SIGPIPE`.
fn send(fd: RawFd, value: libc::pid_t, flags: libc::c_int) -> bool {
    let bytes = value.to_ne_bytes();
    loop {
        // SAFETY: `bytes` is valid for its length.
        let n = unsafe {
            libc::send(
                fd,
                bytes.as_ptr().cast(),
                bytes.len(),
                flags | libc::MSG_NOSIGNAL,
            )
        };
        if n >= 0 {
            return n as usize == bytes.len();
        }
        // SAFETY: reading errno of this thread.
        if unsafe { *libc::__errno_location() } != libc::EINTR {
            return false;
        }
    }
}

/// The reaper's whole life. Async-signal-safe calls only; no allocation; never returns.
unsafe fn reaper_main(rx: RawFd, worker_end: RawFd, table: &mut [libc::pid_t]) -> ! {
    libc::close(worker_end);
    // Standard descriptors are about to point at /dev/null: keep the socket clear of them.
    let rx = if rx < 3 {
        libc::fcntl(rx, libc::F_DUPFD, 3)
    } else {
        rx
    };
    // Out of the worker's group: signals aimed at that group must not take the reaper too.
    libc::setpgid(0, 0);
    // Hold nothing of the worker's but the socket: not its stdout (a reader waiting for EOF),
    // not its listening socket, not an engine's stdin.
    let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
    if null >= 0 {
        for std_fd in 0..3 {
            libc::dup2(null, std_fd);
        }
    }
    close_all_but(rx);
    libc::prctl(libc::PR_SET_NAME, c"sweep-reaper".as_ptr(), 0, 0, 0);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
        // The worker's handlers write to descriptors closed above: back to the defaults.
        libc::signal(sig, libc::SIG_DFL);
    }
    let mut buf = [0u8; 4];
    loop {
        let n = libc::recv(rx, buf.as_mut_ptr().cast(), buf.len(), 0);
        if n < 0 && *libc::__errno_location() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            break; // End of file: every copy of the worker's end is closed, the worker is dead.
        }
        if n as usize != buf.len() {
            continue;
        }
        let value = libc::pid_t::from_ne_bytes(buf);
        if value > 0 {
            if let Some(slot) = table.iter_mut().find(|p| **p == 0) {
                *slot = value;
            }
        } else if value < 0 {
            if let Some(slot) = table.iter_mut().find(|p| **p == -value) {
                *slot = 0;
            }
        }
    }
    for &pgid in table.iter() {
        if pgid > 1 {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
    libc::_exit(0)
}

/// Closes every descriptor from 3 up except `keep`.
unsafe fn close_all_but(keep: RawFd) {
    let keep = keep as libc::c_uint;
    let ranges = [(3, keep.saturating_sub(1)), (keep + 1, libc::c_uint::MAX)];
    for (first, last) in ranges {
        if first > last {
            continue;
        }
        if libc::syscall(libc::SYS_close_range, first, last, 0) != 0 {
            // Kernels before 5.9: one by one, up to a bound well above any default limit.
            for fd in first..=last.min(65_536) {
                libc::close(fd as RawFd);
            }
        }
    }
}
