//! Child processes in their own process group, killed as a group.
//!
//! Builds (`make` → `cc` → ...) and engines run in a fresh process group for two reasons:
//! a Ctrl-C aimed at the worker must not reach them directly (the worker decides when they
//! die, and must not mistake its own shutdown for an engine crash), and killing a build on
//! timeout must take its grandchildren too, or they would keep the output pipes open.

use tokio::process::{Child, Command};

/// Makes `cmd` start its child as the leader of a new process group.
pub(crate) fn own_group(cmd: &mut Command) -> &mut Command {
    cmd.process_group(0).kill_on_drop(true)
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
/// must not leave a compiler or engine running. Harmless once the child has exited.
pub(crate) struct GroupGuard(pub(crate) Child);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(&mut self.0);
    }
}
