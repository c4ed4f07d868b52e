//! Child processes in their own process group, killed as a group, and killed with the worker.
//!
//! Builds (`make` → `cc` → ...) and engines run in a fresh process group for two reasons:
//! a Ctrl-C aimed at the worker must not reach them directly (the worker decides when they
//! die, and must not mistake its own shutdown for an engine crash), and killing a build on
//! timeout must take its grandchildren too, or they would keep the output pipes open.
//!
//! Every group is also registered with the [`reaper`], which kills it if the worker dies
//! without doing so itself (`kill -9`, a crash, the OOM killer); its module says why that is
//! a separate process and not `PR_SET_PDEATHSIG`.

mod reaper;

use tokio::process::{Child, Command};

/// Makes `cmd` start its child as the leader of a new process group that the reaper kills if
/// the worker dies first.
pub(crate) fn own_group(cmd: &mut Command) -> &mut Command {
    cmd.process_group(0).kill_on_drop(true);
    if let Some(reaper) = reaper::reaper() {
        let fd = reaper.fd();
        // SAFETY: `register_self` makes only async-signal-safe calls, as a hook between
        // `fork` and `exec` must.
        unsafe {
            cmd.pre_exec(move || reaper::register_self(fd));
        }
    }
    cmd
}

/// Sends SIGKILL to the process group led by `child`, if the child has not been reaped yet
/// (after reaping, its pid could belong to someone else).
pub(crate) fn kill_group(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        if let Some(pid) = child.id() {
            if let Ok(pid) = i32::try_from(pid) {
                // SAFETY: plain syscall; a negative pid addresses the group this child leads.
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                }
            }
        }
    }
    let _ = child.start_kill();
}

/// Kills a child's process group when dropped: a job future dropped on shutdown or timeout
/// must not leave a compiler or engine running. Harmless once the child has exited. Then
/// tells the reaper the group is no longer the worker's.
pub(crate) struct GroupGuard(pub(crate) Child, Option<i32>);

impl GroupGuard {
    /// Guards `child`, started by a command prepared with [`own_group`].
    pub(crate) fn new(child: Child) -> Self {
        let pgid = child.id().and_then(|p| i32::try_from(p).ok());
        GroupGuard(child, pgid)
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(&mut self.0);
        if let (Some(pgid), Some(reaper)) = (self.1, reaper::reaper()) {
            reaper.forget(pgid);
        }
    }
}
