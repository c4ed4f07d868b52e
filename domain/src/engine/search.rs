//! Finding a knob's definition in a source tree: the rule a sweep-declared knob (`[[knobs]]`
//! in a sweep config) must pass before the coordinator builds anything with it.
//!
//! The rule is a line template, not a regex: `knob_pattern` in the engine definition's
//! `[source]` (default `#ifndef {name}`, the guard minnow puts around every knob's default)
//! with exactly one `{name}`. A line defines knob `NAME` when, after its leading blanks are
//! dropped and every run of blanks is read as one space, it starts with the template with
//! `{name}` replaced by `NAME` (blanks in the template are read the same way), and the
//! template's text is not followed by more of an identifier (`#ifndef NAME_2` does not define
//! `NAME`). Only files whose name ends with one of `knob_extensions` (default `.c .h .cc .cpp
//! .hpp`), of at most [`MAX_SCANNED_FILE`] bytes and without NUL bytes (text) are searched.
//!
//! Everything here works on (path, bytes) pairs the caller read: no I/O.

use std::collections::BTreeMap;

use super::def::SourceDef;
use crate::FieldError;

/// The placeholder a knob pattern holds exactly once.
pub const PLACEHOLDER_NAME: &str = "{name}";
/// The knob pattern when the engine definition gives none: minnow's `#ifndef NAME` guard.
pub const DEFAULT_KNOB_PATTERN: &str = "#ifndef {name}";
/// The extensions searched when the engine definition gives none.
pub const DEFAULT_KNOB_EXTENSIONS: [&str; 5] = [".c", ".h", ".cc", ".cpp", ".hpp"];
/// Largest file searched for knob definitions; bigger files are generated tables or data,
/// never where a knob's default lives.
pub const MAX_SCANNED_FILE: u64 = 1024 * 1024;
/// Longest knob pattern an engine definition may give.
pub const MAX_KNOB_PATTERN: usize = 200;
/// Most extensions an engine definition may list.
pub const MAX_KNOB_EXTENSIONS: usize = 32;
/// File names an error lists before it says "and N more".
const NAMED_FILES: usize = 5;

/// How knobs are found in one engine's source: a line template and the file extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnobRule {
    /// The line template, with one `{name}`.
    pub pattern: String,
    /// File name endings searched, each with its dot (`.c`).
    pub extensions: Vec<String>,
}

impl Default for KnobRule {
    fn default() -> Self {
        Self {
            pattern: DEFAULT_KNOB_PATTERN.to_string(),
            extensions: DEFAULT_KNOB_EXTENSIONS.map(String::from).to_vec(),
        }
    }
}

/// What one search found: the files searched (in the order given) and, per knob found, the
/// first file that defines it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnobSearch {
    /// Paths of the files searched.
    pub searched: Vec<String>,
    /// Knob name -> path of the first file defining it.
    pub found: BTreeMap<String, String>,
}

impl KnobRule {
    /// The rule of a source engine: its definition's pattern and extensions, or the defaults.
    pub fn of(source: &SourceDef) -> Self {
        let default = Self::default();
        Self {
            pattern: source.knob_pattern.clone().unwrap_or(default.pattern),
            extensions: source.knob_extensions.clone().unwrap_or(default.extensions),
        }
    }

    /// Should the file at `path` with `size` bytes be read for the search? (Its extension is
    /// listed and it is small enough; whether it is text is decided by [`KnobRule::search`].)
    pub fn wants(&self, path: &str, size: u64) -> bool {
        size <= MAX_SCANNED_FILE && self.extensions.iter().any(|e| path.ends_with(e.as_str()))
    }

    /// Does `line` define knob `name` by this rule?
    pub fn defines(&self, line: &str, name: &str) -> bool {
        let wanted = squeeze(&self.pattern.replace(PLACEHOLDER_NAME, name));
        let line = squeeze(line);
        let Some(rest) = line.strip_prefix(&wanted) else {
            return false;
        };
        // `#ifndef NAME_2` does not define NAME: an identifier may not run on.
        let ends_in_ident = wanted.chars().last().is_some_and(is_ident);
        !(ends_in_ident && rest.chars().next().is_some_and(is_ident))
    }

    /// Searches `files` (path, contents) for the definitions of `names`. Files the rule does
    /// not want, and files holding a NUL byte (binaries), are skipped and not counted.
    pub fn search<'a>(
        &self,
        names: &[&str],
        files: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> KnobSearch {
        let mut out = KnobSearch::default();
        for (path, bytes) in files {
            if !self.wants(path, bytes.len() as u64) || bytes.contains(&0) {
                continue;
            }
            out.searched.push(path.to_string());
            let text = String::from_utf8_lossy(bytes);
            for line in text.lines() {
                for name in names {
                    if !out.found.contains_key(*name) && self.defines(line, name) {
                        out.found.insert(name.to_string(), path.to_string());
                    }
                }
            }
        }
        out
    }

    /// Checks that every name in `names` (a sweep config's `knobs[i].name`, in order) is
    /// defined in `files`; the first that is not is refused as `knobs[i].name`, saying what
    /// was looked for and which files were searched.
    pub fn check<'a>(
        &self,
        names: &[&str],
        files: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> Result<KnobSearch, FieldError> {
        let search = self.search(names, files);
        for (i, name) in names.iter().enumerate() {
            if !search.found.contains_key(*name) {
                return Err(FieldError::new(
                    format!("knobs[{i}].name"),
                    format!(
                        "`{name}` is not defined in the engine source: no line `{}` in {}",
                        self.pattern.replace(PLACEHOLDER_NAME, name),
                        self.describe_searched(&search.searched)
                    ),
                ));
            }
        }
        Ok(search)
    }

    /// "the 7 files searched (a.c, b.h, ... and 2 more) with extensions .c .h ..." or, with
    /// none, why there were none.
    fn describe_searched(&self, searched: &[String]) -> String {
        let extensions = self.extensions.join(" ");
        if searched.is_empty() {
            return format!(
                "any file: the source has no text file of at most {MAX_SCANNED_FILE} bytes ending in {extensions}"
            );
        }
        let mut names = searched[..searched.len().min(NAMED_FILES)].join(", ");
        if searched.len() > NAMED_FILES {
            names.push_str(&format!(" and {} more", searched.len() - NAMED_FILES));
        }
        let files = if searched.len() == 1 { "file" } else { "files" };
        format!(
            "the {} {files} searched ({names}; text files ending in {extensions})",
            searched.len()
        )
    }
}

/// Checks an engine definition's knob rule: a one-line pattern with exactly one `{name}` and
/// some text besides it, and extensions like `.c`.
pub(super) fn validate_rule(source: &SourceDef) -> Result<(), FieldError> {
    if let Some(pattern) = &source.knob_pattern {
        let field = "source.knob_pattern";
        if pattern.len() > MAX_KNOB_PATTERN || pattern.chars().any(char::is_control) {
            return Err(FieldError::new(
                field,
                format!("must be one line of at most {MAX_KNOB_PATTERN} bytes"),
            ));
        }
        if pattern.matches(PLACEHOLDER_NAME).count() != 1 {
            return Err(FieldError::new(
                field,
                "must contain {name} exactly once, e.g. \"#ifndef {name}\"",
            ));
        }
        if pattern.replace(PLACEHOLDER_NAME, "").trim().is_empty() {
            return Err(FieldError::new(
                field,
                "needs text besides {name}, e.g. \"#ifndef {name}\"",
            ));
        }
    }
    if let Some(extensions) = &source.knob_extensions {
        let field = "source.knob_extensions";
        if extensions.is_empty() || extensions.len() > MAX_KNOB_EXTENSIONS {
            return Err(FieldError::new(
                field,
                format!("list 1 to {MAX_KNOB_EXTENSIONS} extensions"),
            ));
        }
        for (i, e) in extensions.iter().enumerate() {
            let ok = e.len() <= 16
                && e.strip_prefix('.').is_some_and(|rest| {
                    !rest.is_empty()
                        && rest
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "_+-.".contains(c))
                });
            if !ok {
                return Err(FieldError::new(
                    format!("{field}[{i}]"),
                    "must be a dot and 1 to 15 letters, digits, '_', '+', '-' or '.', e.g. \".c\"",
                ));
            }
        }
    }
    Ok(())
}

/// Drops leading blanks and reads every run of blanks as one space.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Vec<(&'static str, &'static [u8])> {
        vec![
            (
                "minnow.h",
                b"#ifndef MINNOW_H\n#define MINNOW_H\n  #ifndef   NEW_KNOB\n#define NEW_KNOB 3\n#endif\n"
                    .as_slice(),
            ),
            ("search.c", b"/* #ifndef IN_COMMENT */\n#ifndef LONG_NAME_2\n"),
            ("README.md", b"#ifndef DOC_ONLY\n"),
            ("table.h", b"\0\0#ifndef BINARY_ONLY\n"),
            ("sub/eval.cpp", b"#ifndef DEEP\n"),
        ]
    }

    fn check(rule: &KnobRule, names: &[&str]) -> Result<KnobSearch, FieldError> {
        rule.check(names, files())
    }

    #[test]
    fn finds_ifndef_guards_in_source_files() {
        let found = check(&KnobRule::default(), &["NEW_KNOB", "DEEP"]).unwrap();
        assert_eq!(found.found["NEW_KNOB"], "minnow.h");
        assert_eq!(found.found["DEEP"], "sub/eval.cpp");
        // The README is no source file, and the file with NUL bytes is no text.
        assert_eq!(found.searched, ["minnow.h", "search.c", "sub/eval.cpp"]);
    }

    #[test]
    fn refuses_a_knob_no_file_defines_naming_it_and_the_files() {
        let rule = KnobRule::default();
        for (name, why) in [
            ("NOPE", "nowhere"),
            ("IN_COMMENT", "only inside a comment"),
            ("LONG_NAME", "only a longer name"),
            ("DOC_ONLY", "only in a file with another extension"),
            ("BINARY_ONLY", "only in a binary file"),
        ] {
            let err = check(&rule, &["NEW_KNOB", name]).unwrap_err();
            assert_eq!(err.field, "knobs[1].name", "{why}");
            assert!(err.problem.contains(&format!("`{name}`")), "{why}: {err}");
            assert!(err.problem.contains(&format!("#ifndef {name}")), "{err}");
            assert!(
                err.problem
                    .contains("the 3 files searched (minnow.h, search.c, sub/eval.cpp;"),
                "{err}"
            );
        }
    }

    #[test]
    fn names_a_few_files_and_counts_the_rest() {
        let many: Vec<(String, Vec<u8>)> = (0..9)
            .map(|i| (format!("f{i}.c"), b"int x;\n".to_vec()))
            .collect();
        let err = KnobRule::default()
            .check(&["X"], many.iter().map(|(p, b)| (p.as_str(), b.as_slice())))
            .unwrap_err();
        assert!(
            err.problem
                .contains("the 9 files searched (f0.c, f1.c, f2.c, f3.c, f4.c and 4 more;"),
            "{err}"
        );
        let err = KnobRule::default().check(&["X"], []).unwrap_err();
        assert!(err.problem.contains("has no text file"), "{err}");
        assert_eq!(err.field, "knobs[0].name");
    }

    #[test]
    fn large_files_are_skipped() {
        let mut big = b"#ifndef BIG\n".to_vec();
        big.resize(MAX_SCANNED_FILE as usize + 1, b' ');
        let rule = KnobRule::default();
        assert!(rule.check(&["BIG"], [("big.h", big.as_slice())]).is_err());
        big.truncate(MAX_SCANNED_FILE as usize);
        assert!(rule.check(&["BIG"], [("big.h", big.as_slice())]).is_ok());
    }

    #[test]
    fn an_engine_may_give_its_own_rule() {
        let source = SourceDef {
            path: ".".into(),
            exclude: vec![],
            include_dotfiles: false,
            knob_pattern: Some("#if !defined( {name} )".into()),
            knob_extensions: Some(vec![".inc".into()]),
        };
        validate_rule(&source).unwrap();
        let rule = KnobRule::of(&source);
        let files = [
            ("knobs.inc", b"#if  !defined( MY_KNOB )\n".as_slice()),
            ("other.c", b"#ifndef OTHER\n"),
        ];
        let found = rule.check(&["MY_KNOB"], files).unwrap();
        assert_eq!(found.searched, ["knobs.inc"]);
        let err = rule.check(&["OTHER"], files).unwrap_err();
        assert!(err.problem.contains("#if !defined( OTHER )"), "{err}");
        assert!(err.problem.contains("ending in .inc"), "{err}");
        // The pattern need not end in the name: text after it must then follow.
        assert!(rule.defines("#if !defined( A ) && 1", "A"));
        assert!(!rule.defines("#if !defined( AB )", "A"));
    }

    #[test]
    fn bad_rules_name_the_field() {
        let with = |pattern: Option<&str>, ext: Option<Vec<&str>>| SourceDef {
            path: ".".into(),
            exclude: vec![],
            include_dotfiles: false,
            knob_pattern: pattern.map(String::from),
            knob_extensions: ext.map(|e| e.into_iter().map(String::from).collect()),
        };
        for bad in [
            "#ifndef NAME",
            "{name} {name}",
            " {name} ",
            "#ifndef {name}\n",
        ] {
            let e = validate_rule(&with(Some(bad), None)).unwrap_err();
            assert_eq!(e.field, "source.knob_pattern", "{bad:?}");
        }
        let e = validate_rule(&with(None, Some(vec![]))).unwrap_err();
        assert_eq!(e.field, "source.knob_extensions");
        for bad in ["c", ".", ".c h", "./x"] {
            let e = validate_rule(&with(None, Some(vec![".h", bad]))).unwrap_err();
            assert_eq!(e.field, "source.knob_extensions[1]", "{bad:?}");
        }
        assert!(validate_rule(&with(None, Some(vec![".c", ".tar.h"]))).is_ok());
    }
}
