//! The CPU time of this process's reaped children: the clock a speed job's runs are timed
//! with, because it also counts an engine's descendants (inside the sandbox's PID namespace,
//! out of the worker's sight) once each was reaped by its parent and the engine by the worker.

use std::io;

/// User plus system CPU time, in microseconds, of every child of this process that has ended
/// and been waited for, each with the time of its own waited-for descendants
/// (`getrusage(RUSAGE_CHILDREN)`). It only grows, so the difference of two readings is what
/// the children reaped in between used, provided no other child was reaped meanwhile.
pub(crate) fn reaped_children_cpu_us() -> io::Result<u64> {
    // SAFETY: `rusage` is a C struct of integers (and `timeval`s of integers), for which all
    // zero bytes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `getrusage` writes one `rusage` through the pointer, which points to a live,
    // aligned `rusage` borrowed mutably for the duration of the call; it keeps no pointer and
    // reads nothing of ours. `RUSAGE_CHILDREN` is one of the `who` values it accepts; on an
    // error it returns -1 and `errno` says why.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(micros(usage.ru_utime).saturating_add(micros(usage.ru_stime)))
}

/// `t` in microseconds (a negative field, which the kernel never reports, counts as 0).
fn micros(t: libc::timeval) -> u64 {
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let micros = u64::try_from(t.tv_usec).unwrap_or(0);
    secs.saturating_mul(1_000_000).saturating_add(micros)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn counts_a_child_once_it_is_reaped() {
        let before = reaped_children_cpu_us().unwrap();
        let started = Instant::now();
        let status = std::process::Command::new("/bin/sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .status()
            .unwrap();
        let wall = started.elapsed().as_micros() as u64;
        assert!(status.success());
        let spent = reaped_children_cpu_us().unwrap() - before;
        // A busy loop is all CPU; other tests' children reaped meanwhile only add to it.
        assert!(spent >= wall / 3, "{spent} µs of CPU in {wall} µs");
    }
}
