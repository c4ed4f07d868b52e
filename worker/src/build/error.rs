//! Why a variant could not be built, with the text a build-failed report carries. Its own
//! module because the allow-list (`crate::allow`) refuses builds with it too.

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

#[cfg(test)]
mod tests {
    use super::*;

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
