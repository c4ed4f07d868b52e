//! Where a sweep's engine source came from (its provenance), and which files of a directory
//! a snapshot leaves out (`.gitignore`-style rules).
//!
//! A source is one of three kinds: the directory the coordinator's operator registered
//! (`registered`), a snapshot a submitter uploaded (`uploaded`), or a commit of a git
//! repository the coordinator resolved (`git`). Every kind ends as a content-addressed
//! snapshot (sha256 of a deterministic tar.gz); the provenance says how it got there.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// How a sweep's source was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// The directory of the engine definition on the coordinator.
    #[default]
    Registered,
    /// A snapshot uploaded by a submitter (`sweep submit --source DIR`).
    Uploaded,
    /// A commit of a git repository (`[source] git`, `rev`).
    Git,
}

impl SourceKind {
    /// The stored and shown name.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Registered => "registered",
            SourceKind::Uploaded => "uploaded",
            SourceKind::Git => "git",
        }
    }

    /// The kind of a stored name; unknown names read as `registered` (the column's default).
    pub fn parse(s: &str) -> Self {
        match s {
            "uploaded" => SourceKind::Uploaded,
            "git" => SourceKind::Git,
            _ => SourceKind::Registered,
        }
    }
}

/// How a sweep's source snapshot came to be, besides its sha256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default, ToSchema)]
pub struct SourceOrigin {
    /// Registered, uploaded or git.
    pub kind: SourceKind,
    /// The token that submitted the sweep on uploaded code (`uploaded` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uploader: Option<String>,
    /// The repository as the config named it (`git` only); shown with any credentials in
    /// it replaced by `***` (see [`redact_git_url`]), which sweeps stored before such URLs
    /// were refused may hold.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "serialize_redacted"
    )]
    pub git_url: Option<String>,
    /// The revision as the config named it: branch, tag or sha (`git` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_rev: Option<String>,
    /// The commit `git_rev` resolved to at submission (`git` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_commit: Option<String>,
}

/// A sweep's source as the detail JSON, the table header and the dashboard show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SourceProvenance {
    /// sha256 of the snapshot the workers build.
    pub sha256: String,
    /// How it came to be.
    #[serde(flatten)]
    pub origin: SourceOrigin,
}

impl SourceProvenance {
    /// A short name for a table row: `commit 0123456789ab` for a git source, else
    /// `snapshot 1a2b3c4d5e6f`.
    pub fn label(&self) -> String {
        match (&self.origin.kind, &self.origin.git_commit) {
            (SourceKind::Git, Some(commit)) => format!("commit {}", short(commit)),
            _ => format!("snapshot {}", short(&self.sha256)),
        }
    }

    /// One line for humans: `source 1a2b3c4d5e6f (uploaded by alice)`,
    /// `source 1a2b3c4d5e6f (git URL rev -> commit 0123456789ab)`.
    pub fn describe(&self) -> String {
        let sha = short(&self.sha256);
        let o = &self.origin;
        match o.kind {
            SourceKind::Registered => format!("source {sha} (registered)"),
            SourceKind::Uploaded => format!(
                "source {sha} (uploaded by {})",
                o.uploader.as_deref().unwrap_or("a local run")
            ),
            SourceKind::Git => format!(
                "source {sha} (git {} {} -> commit {})",
                o.git_url.as_deref().map_or("?".into(), redact_git_url),
                o.git_rev.as_deref().unwrap_or("?"),
                o.git_commit.as_deref().map_or("?", short)
            ),
        }
    }
}

/// `url` with the userinfo of its authority (`user:password@`, `user@`) replaced by `***@`,
/// for every place a stored git URL is shown: API answers, tables, logs. A URL without one
/// is returned as it is.
pub fn redact_git_url(url: &str) -> std::borrow::Cow<'_, str> {
    let (prefix, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        // git's scp-like `user@host:path`: the userinfo ends before the first `:` or `/`.
        None => ("", url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = if prefix.is_empty() {
        &rest[..rest.find(':').map_or(end, |c| c.min(end))]
    } else {
        &rest[..end]
    };
    match authority.rfind('@') {
        Some(at) => format!("{prefix}***{}", &rest[at..]).into(),
        None => url.into(),
    }
}

fn serialize_redacted<S: serde::Serializer>(url: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    url.as_deref().map(redact_git_url).serialize(s)
}

/// The first 12 hex digits of a hash (the whole string when shorter).
pub fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// Is `s` a sha256 in hex as sources are named (64 lowercase hex digits)?
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// One rule of a `.gitignore` file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    /// The glob, without `!`, leading `/` or trailing `/`.
    glob: String,
    /// `!pattern`: includes again what an earlier rule left out.
    negate: bool,
    /// `pattern/`: matches directories only.
    dir_only: bool,
    /// Leading `/` or a `/` inside: matched against the path from the root, not any name.
    anchored: bool,
}

/// The rules of a `.gitignore` at a snapshot's root. Supported: blank lines and `#`
/// comments; names and globs with `*` (any run of characters but `/`) and `?` (one
/// character); a trailing `/` (directories only); a leading `/` or a `/` inside (anchored at
/// the root, matched against the whole relative path); `!` to include again. Not supported:
/// `**`, character classes `[...]`, escapes, and `.gitignore` files below the root (they
/// are ignored). As in git, the last matching rule decides, and nothing inside a left-out
/// directory is looked at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IgnoreRules {
    rules: Vec<Rule>,
}

impl IgnoreRules {
    /// Parses the text of a `.gitignore`.
    pub fn parse(text: &str) -> Self {
        let rules = text
            .lines()
            .map(str::trim_end)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .filter_map(|line| {
                let (negate, rest) = match line.strip_prefix('!') {
                    Some(r) => (true, r),
                    None => (false, line),
                };
                let (dir_only, rest) = match rest.strip_suffix('/') {
                    Some(r) => (true, r),
                    None => (false, rest),
                };
                let anchored = rest.contains('/');
                let glob = rest.trim_start_matches('/').to_string();
                (!glob.is_empty()).then_some(Rule {
                    glob,
                    negate,
                    dir_only,
                    anchored,
                })
            })
            .collect();
        Self { rules }
    }

    /// Is `path` (relative to the root, `/`-separated) left out?
    pub fn ignores(&self, path: &str, is_dir: bool) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        let mut ignored = false;
        for rule in &self.rules {
            if rule.dir_only && !is_dir {
                continue;
            }
            let subject = if rule.anchored { path } else { name };
            if glob_match(rule.glob.as_bytes(), subject.as_bytes()) {
                ignored = !rule.negate;
            }
        }
        ignored
    }
}

/// `*` matches any run of bytes but `/`, `?` one byte but `/`; everything else itself.
fn glob_match(pat: &[u8], s: &[u8]) -> bool {
    match (pat.first(), s.first()) {
        (None, None) => true,
        (None, Some(_)) => false,
        (Some(b'*'), _) => {
            glob_match(&pat[1..], s) || (!s.is_empty() && s[0] != b'/' && glob_match(pat, &s[1..]))
        }
        (Some(b'?'), Some(c)) => *c != b'/' && glob_match(&pat[1..], &s[1..]),
        (Some(p), Some(c)) => p == c && glob_match(&pat[1..], &s[1..]),
        (Some(_), None) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitignore_names_globs_dirs_anchors_and_negation() {
        let rules = IgnoreRules::parse(
            "# build outputs\n*.o\nminnow\nbuild/\n/top.txt\ndocs/*.html\n!keep.o\n\n",
        );
        assert!(rules.ignores("a.o", false));
        assert!(rules.ignores("src/deep/b.o", false));
        assert!(!rules.ignores("keep.o", false));
        assert!(rules.ignores("minnow", false));
        assert!(rules.ignores("sub/minnow", true));
        assert!(rules.ignores("build", true));
        assert!(!rules.ignores("build", false), "build/ matches dirs only");
        assert!(rules.ignores("top.txt", false));
        assert!(!rules.ignores("sub/top.txt", false), "anchored at the root");
        assert!(rules.ignores("docs/a.html", false));
        assert!(!rules.ignores("docs/sub/a.html", false), "* stops at /");
        assert!(!rules.ignores("main.c", false));
    }

    #[test]
    fn credentials_in_git_urls_are_redacted() {
        let cases = [
            ("https://u:tok@host/r.git", "https://***@host/r.git"),
            ("https://u@host/r.git", "https://***@host/r.git"),
            ("https://a@b:c@host:8443/r", "https://***@host:8443/r"),
            ("git@host:org/r.git", "***@host:org/r.git"),
            ("https://host/a@b", "https://host/a@b"),
            ("/srv/repos/r@1", "/srv/repos/r@1"),
            ("https://host/r.git", "https://host/r.git"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_git_url(url), shown, "{url}");
        }
    }

    #[test]
    fn provenance_lines() {
        let sha = "ab".repeat(32);
        let p = SourceProvenance {
            sha256: sha.clone(),
            origin: SourceOrigin {
                kind: SourceKind::Git,
                git_url: Some("/repo".into()),
                git_rev: Some("main".into()),
                git_commit: Some("0123456789abcdef".into()),
                ..Default::default()
            },
        };
        assert_eq!(
            p.describe(),
            "source abababababab (git /repo main -> commit 0123456789ab)"
        );
        assert!(is_sha256(&sha));
        assert!(!is_sha256(&sha.to_uppercase()));
        assert_eq!(SourceKind::parse("uploaded"), SourceKind::Uploaded);
        let mut with_token = p.clone();
        with_token.origin.git_url = Some("https://alice:s3cret@git.example.org/m.git".into());
        assert_eq!(
            with_token.describe(),
            "source abababababab (git https://***@git.example.org/m.git main -> commit 0123456789ab)"
        );
        let json = serde_json::to_value(&with_token).unwrap();
        assert_eq!(json["git_url"], "https://***@git.example.org/m.git");
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["kind"], "git");
        assert_eq!(json["sha256"], sha);
    }
}
