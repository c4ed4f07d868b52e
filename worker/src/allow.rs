//! What a worker agrees to start for a coordinator: build programs and binary-only engines,
//! each on an allow-list checked before anything runs.
//!
//! The build argv comes from the coordinator. A worker that ran any argv would run whatever a
//! coordinator (or anyone who can pose as one) asks, `/bin/sh -c ...` included; so argv[0]
//! must be a name the worker's operator listed. The rule is an exact match on the template's
//! first element: a bare name (`make`) is looked up in `PATH` when the build starts, and a
//! path (`/bin/make`, `./make`, `{source}/build.sh`) is allowed only if that very string is
//! listed. The arguments are not checked: they are the engine definition's recipe, and the
//! source the recipe builds comes from the coordinator anyway (so the list narrows what a
//! coordinator can run; it does not make a hostile coordinator safe).

use sweep_domain::wire::BuildSpec;

use crate::build::error::BuildError;

/// The binary-only engines a worker runs unless configured otherwise: those of the bundled
/// engine definitions (Debian's `stockfish`, `fairymax`, `glaurung` and `toga2` packages).
pub const DEFAULT_ENGINE_BINARIES: &[&str] = &[
    "/usr/games/stockfish",
    "/usr/games/fairymax",
    "/usr/games/glaurung",
    "/usr/games/toga2",
];

/// The build programs a worker allows unless configured otherwise: what the bundled engine
/// definitions (`configs/engines/*.toml`) and common engine builds use.
pub const DEFAULT_BUILD_PROGRAMS: &[&str] = &["make", "cmake", "cargo"];

/// Strings an operator allowed, matched exactly: what both allow-lists share.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AllowList(Vec<String>);

impl AllowList {
    /// `entries` without the empty ones.
    fn new(entries: impl IntoIterator<Item = String>) -> Self {
        AllowList(entries.into_iter().filter(|p| !p.is_empty()).collect())
    }

    fn entries(&self) -> &[String] {
        &self.0
    }

    fn allows(&self, entry: &str) -> bool {
        self.0.iter().any(|p| p == entry)
    }

    /// For the message refusing `entry`: the allowed entries (`none` if there are none), and
    /// the list that would allow `entry` too, as an option's value.
    fn refusal(&self, entry: &str) -> (String, String) {
        let allowed = if self.0.is_empty() {
            "none".to_string()
        } else {
            self.0.join(", ")
        };
        let mut suggested = self.0.clone();
        suggested.push(entry.to_string());
        (allowed, suggested.join(","))
    }
}

/// The build programs a worker may start (see the module documentation for the rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildPrograms(AllowList);

impl Default for BuildPrograms {
    fn default() -> Self {
        BuildPrograms::new(DEFAULT_BUILD_PROGRAMS.iter().map(|s| s.to_string()))
    }
}

impl BuildPrograms {
    /// Allows exactly `programs` (empty entries are ignored; an empty list allows no build).
    pub fn new(programs: impl IntoIterator<Item = String>) -> Self {
        let mut list = AllowList::new(programs);
        list.0.dedup();
        BuildPrograms(list)
    }

    /// The allowed programs, in the order given.
    pub fn programs(&self) -> &[String] {
        self.0.entries()
    }

    /// Refuses `spec` unless its program (argv[0] of the build command) is allowed. The error
    /// names the program and says how to allow it.
    pub fn check(&self, spec: &BuildSpec) -> Result<(), BuildError> {
        let Some(program) = spec.build_command.first() else {
            return Err(BuildError::Invalid("empty build command".into()));
        };
        if self.0.allows(program) {
            return Ok(());
        }
        let (allowed, suggested) = self.0.refusal(program);
        Err(BuildError::Refused {
            program: program.clone(),
            allowed,
            hint: format!("to allow it, start the worker with --allow-build-programs {suggested}"),
        })
    }
}

/// The binaries of binary-only engines a worker may start. A binary-only engine's path comes
/// from the coordinator (its engine list and every lease); started with the worker's UCI
/// commands on stdin, `/bin/sh` would run any option name as shell code, so the path must be
/// one the operator listed, exactly as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineBinaries(AllowList);

impl Default for EngineBinaries {
    fn default() -> Self {
        EngineBinaries::new(DEFAULT_ENGINE_BINARIES.iter().map(|s| s.to_string()))
    }
}

impl EngineBinaries {
    /// Allows exactly `paths` (empty entries are ignored).
    pub fn new(paths: impl IntoIterator<Item = String>) -> Self {
        EngineBinaries(AllowList::new(paths))
    }

    /// Is `path` listed?
    pub fn allows(&self, path: &str) -> bool {
        self.0.allows(path)
    }

    /// Refuses `path` unless listed; the error names it and says how to allow it.
    pub fn check(&self, path: &str) -> Result<(), String> {
        if self.allows(path) {
            return Ok(());
        }
        let (allowed, suggested) = self.0.refusal(path);
        Err(format!(
            "engine binary `{path}` is not allowed on this worker (allowed: {allowed}); \
             to allow it, start the worker with --allow-engine-binaries {suggested}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_support::build_spec as spec;

    #[test]
    fn defaults_allow_the_bundled_recipes_by_bare_name_only() {
        let allow = BuildPrograms::default();
        for ok in ["make", "cmake", "cargo"] {
            assert!(allow.check(&spec(&[ok, "-C", "{source}"])).is_ok(), "{ok}");
        }
        for bad in [
            "/bin/sh",
            "sh",
            "/usr/bin/make",
            "./make",
            "make ",
            "MAKE",
            "{source}/make",
        ] {
            let err = allow.check(&spec(&[bad, "-c", "id"])).unwrap_err();
            let text = err.report();
            assert!(text.contains(&format!("`{bad}`")), "{text}");
            assert!(text.contains("--allow-build-programs"), "{text}");
            assert!(text.contains("make, cmake, cargo"), "{text}");
        }
    }

    #[test]
    fn a_path_is_allowed_only_when_listed_exactly() {
        let allow = BuildPrograms::new(["make".to_string(), "/opt/bin/ninja".to_string()]);
        assert!(allow.check(&spec(&["/opt/bin/ninja"])).is_ok());
        assert!(allow.check(&spec(&["ninja"])).is_err());
        assert!(allow.check(&spec(&["/opt/bin/../bin/ninja"])).is_err());
        assert!(allow.check(&spec(&["cmake"])).is_err());
    }

    #[test]
    fn an_empty_list_allows_nothing_and_says_so() {
        let allow = BuildPrograms::new([String::new()]);
        let err = allow.check(&spec(&["make"])).unwrap_err();
        assert!(err.report().contains("allowed: none"), "{}", err.report());
        assert!(matches!(
            allow.check(&spec(&[])),
            Err(BuildError::Invalid(_))
        ));
    }

    #[test]
    fn engine_binaries_match_exactly() {
        let allow = EngineBinaries::default();
        assert!(allow.check("/usr/games/stockfish").is_ok());
        for bad in ["/bin/sh", "stockfish", "/usr/games/../games/stockfish"] {
            let e = allow.check(bad).unwrap_err();
            assert!(e.contains(&format!("`{bad}`")), "{e}");
            assert!(e.contains("--allow-engine-binaries"), "{e}");
        }
        assert!(EngineBinaries::new([])
            .check("/usr/games/stockfish")
            .is_err());
    }
}
