//! What produced a build's numbers: each worker that built (or found) a variant's binary
//! says how, once per build, so a table can be traced to compilers, flags and machines, and
//! a reviewer can see whether every worker ran the same binary.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::bounds::{check_text, Lines, MAX_HOST};
use crate::FieldError;

/// Longest free-text field of a build record (a compiler's version line, a CPU model).
pub const MAX_RECORD_TEXT: usize = 512;
/// Most arguments of a recorded build command.
pub const MAX_RECORD_ARGS: usize = 64;

/// How one worker got a build's binary (`POST /api/v1/jobs/{id}/built`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BuildRecord {
    /// The worker's host name.
    pub host: String,
    /// Its CPU model (`model name` of /proc/cpuinfo), empty when unknown.
    pub cpu_model: String,
    /// First line of `cc --version` on the worker (the compiler a Makefile's `$(CC)` gets by
    /// default); `None` for a binary-only engine or when `cc` is missing.
    pub compiler: Option<String>,
    /// The build command as run, defines filled in and the private tree's paths left as
    /// `{source}` and `{out}` (they differ per build); empty for a binary-only engine.
    pub argv: Vec<String>,
    /// sha256 of the binary that ran the positions (hex).
    pub binary_sha256: String,
    /// The node total of the engine's own bench on this worker (when its definition names
    /// one, see [`crate::engine::BenchDef`]): equal for every worker that runs one binary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bench_nodes: Option<u64>,
    /// The sandbox the worker built and ran the engine in: `bwrap 0.8.0`, or `off` when it
    /// ran contributors' code unconfined (`--sandbox off`); empty from a worker older than
    /// sandboxes.
    #[serde(default)]
    pub sandbox: String,
}

impl BuildRecord {
    /// Checks every field against its bound, naming the field (`record.argv[3]`, ...).
    pub fn check(&self) -> Result<(), FieldError> {
        check_text("record.host", &self.host, MAX_HOST, Lines::One)?;
        check_text("record.sandbox", &self.sandbox, MAX_RECORD_TEXT, Lines::One)?;
        check_text(
            "record.cpu_model",
            &self.cpu_model,
            MAX_RECORD_TEXT,
            Lines::One,
        )?;
        if let Some(c) = &self.compiler {
            check_text("record.compiler", c, MAX_RECORD_TEXT, Lines::One)?;
        }
        if self.argv.len() > MAX_RECORD_ARGS {
            return Err(FieldError::new(
                "record.argv",
                format!("{} arguments; at most {MAX_RECORD_ARGS}", self.argv.len()),
            ));
        }
        for (i, a) in self.argv.iter().enumerate() {
            check_text(&format!("record.argv[{i}]"), a, MAX_RECORD_TEXT, Lines::One)?;
        }
        if self.binary_sha256.len() != 64
            || !self
                .binary_sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(FieldError::new(
                "record.binary_sha256",
                "is not 64 lowercase hex digits",
            ));
        }
        if self.bench_nodes.is_some_and(|n| i64::try_from(n).is_err()) {
            return Err(FieldError::new(
                "record.bench_nodes",
                "is more than can be stored",
            ));
        }
        Ok(())
    }
}

/// A worker's report of how it got the binary of the job's build, under the lease it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BuildReport {
    /// Worker that built.
    pub worker_id: i64,
    /// The lease (attempt) it holds the job under.
    pub attempt: i64,
    /// What it did.
    pub record: BuildRecord,
}

/// The answer to a [`BuildReport`]: kept (or a record of that build and worker already was).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BuildRecorded {
    /// The job whose build it was.
    pub job_id: i64,
    /// Set when the record's bench total differs from the one another worker reported for
    /// the same binary earlier in the sweep: the record is kept and shown, the job is queued
    /// again for other workers and kept from this one, and this says so (which worker
    /// reported what). The worker must not run the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bench_mismatch: Option<String>,
}

/// A build record as kept: which worker, when, and what it said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StoredBuildRecord {
    /// Worker name.
    pub worker: String,
    /// What it reported.
    #[serde(flatten)]
    pub record: BuildRecord,
    /// When it was first reported.
    pub reported_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> BuildRecord {
        BuildRecord {
            host: "box".into(),
            cpu_model: "AMD EPYC".into(),
            compiler: Some("cc (Debian 12.2.0-14) 12.2.0".into()),
            argv: vec!["make".into(), "DEFINES=-DK=3".into(), "OUT={out}".into()],
            binary_sha256: "ab".repeat(32),
            bench_nodes: Some(12345),
            sandbox: "bwrap 0.8.0".into(),
        }
    }

    #[test]
    fn each_bad_field_is_named() {
        assert!(record().check().is_ok());
        type Spoil = fn(&mut BuildRecord);
        let cases: [(Spoil, &str); 6] = [
            (|r| r.bench_nodes = Some(u64::MAX), "record.bench_nodes"),
            (|r| r.host = "a\nb".into(), "record.host"),
            (
                |r| r.cpu_model = "x".repeat(MAX_RECORD_TEXT + 1),
                "record.cpu_model",
            ),
            (|r| r.argv[1] = "a\0b".into(), "record.argv[1]"),
            (
                |r| r.argv = vec![String::new(); MAX_RECORD_ARGS + 1],
                "record.argv",
            ),
            (
                |r| r.binary_sha256 = "AB".repeat(32),
                "record.binary_sha256",
            ),
        ];
        for (spoil, field) in cases {
            let mut r = record();
            spoil(&mut r);
            assert_eq!(r.check().unwrap_err().field, field);
        }
    }
}
