//! Which git URLs a sweep may name: the operator's allow-list (`--git-allow`).
//!
//! An entry and a submitted URL are both parsed, and compared part by part: scheme, host,
//! port (the scheme's default when not written) and whole path segments. A raw string prefix
//! would let `https://github.com.evil.org/` pass for `https://github.com`, and `..` or
//! encoded slashes walk out of a listed path; here they cannot. Nothing in this module runs
//! git or touches the network: a refused URL has cost nothing.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The transports a git source may use. ssh is not one of them: it would run with the
/// coordinator's own keys, and `ext`/`fd` run commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `https://`
    Https,
    /// `http://`
    Http,
    /// `git://` (the git daemon's protocol).
    Git,
    /// `file://` or an absolute path on the coordinator's machine.
    File,
}

impl Scheme {
    /// The name git's `protocol.<name>.allow` knows it by.
    pub fn protocol(self) -> &'static str {
        match self {
            Scheme::Https => "https",
            Scheme::Http => "http",
            Scheme::Git => "git",
            Scheme::File => "file",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Scheme::Https => 443,
            Scheme::Http => 80,
            Scheme::Git => 9418,
            Scheme::File => 0,
        }
    }

    fn parse(name: &str) -> Result<Self, UrlError> {
        match name.to_ascii_lowercase().as_str() {
            "https" => Ok(Scheme::Https),
            "http" => Ok(Scheme::Http),
            "git" => Ok(Scheme::Git),
            "file" => Ok(Scheme::File),
            "ssh" | "git+ssh" | "ssh+git" => Err(UrlError::Ssh),
            other => Err(UrlError::Scheme(other.to_string())),
        }
    }
}

/// Why a string is not a URL (or path) this module accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// `user:password@` or `user@` in the authority.
    #[error("credentials in the URL (user:password@ or user@) are not accepted")]
    Credentials,
    /// ssh would run with the coordinator's own keys.
    #[error("ssh URLs are not accepted: git would use the coordinator's own keys")]
    Ssh,
    /// A scheme other than https, http, git and file.
    #[error("the scheme `{0}` is not accepted (https, http, git or file)")]
    Scheme(String),
    /// A relative path, or git's scp-like `host:path` (which is ssh).
    #[error("not a URL or an absolute path (relative paths and host:path, which is ssh, are not accepted)")]
    NotAbsolute,
    /// A host that is empty, has odd characters, or a bad port.
    #[error("the host or port is not valid")]
    Host,
    /// `file://HOST/...`: only the coordinator's own files, `file:///...`.
    #[error("a file URL must name no host (file:///path)")]
    FileHost,
    /// `.`/`..` segments, encoded dots or slashes, backslashes, queries or fragments.
    #[error("the path may not hold `.` or `..` segments, %2e, %2f, %5c, `\\`, `?` or `#`")]
    Path,
}

/// A URL (or absolute path) taken apart for comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Parsed {
    scheme: Scheme,
    /// Lower case; empty for `File`.
    host: String,
    /// The scheme's default when not written.
    port: u16,
    /// Non-empty segments of the path.
    segments: Vec<String>,
}

impl Parsed {
    fn parse(text: &str) -> Result<Self, UrlError> {
        let Some((scheme, rest)) = text.split_once("://").filter(|(s, _)| is_scheme(s)) else {
            // git reads `host:path` (a colon before any slash) as ssh; a path must be absolute.
            if !text.starts_with('/') {
                return Err(UrlError::NotAbsolute);
            }
            return Ok(Self {
                scheme: Scheme::File,
                host: String::new(),
                port: 0,
                segments: segments(text)?,
            });
        };
        let scheme = Scheme::parse(scheme)?;
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(UrlError::Credentials);
        }
        let (host, port) = host_port(authority, scheme)?;
        if scheme == Scheme::File && !host.is_empty() {
            return Err(UrlError::FileHost);
        }
        if scheme != Scheme::File && host.is_empty() {
            return Err(UrlError::Host);
        }
        Ok(Self {
            scheme,
            host,
            port,
            segments: segments(path)?,
        })
    }

    /// The path as an absolute filesystem path (`File` only).
    fn local_path(&self) -> PathBuf {
        Path::new("/").join(self.segments.join("/"))
    }
}

/// `[a-zA-Z][a-zA-Z0-9+.-]*`, as URL schemes are spelt.
fn is_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
}

/// Host (lower case) and port of an authority without userinfo.
fn host_port(authority: &str, scheme: Scheme) -> Result<(String, u16), UrlError> {
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (addr, after) = v6.split_once(']').ok_or(UrlError::Host)?;
        if !addr
            .chars()
            .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
        {
            return Err(UrlError::Host);
        }
        (format!("[{addr}]"), after.strip_prefix(':'))
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    let host_ok = host.starts_with('[')
        || host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-_".contains(c));
    if !host_ok {
        return Err(UrlError::Host);
    }
    let port = match port {
        None => scheme.default_port(),
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or(UrlError::Host)?,
    };
    Ok((host.to_ascii_lowercase(), port))
}

/// The non-empty segments of a path; refuses anything a server or git might read as a
/// different path than the one compared.
fn segments(path: &str) -> Result<Vec<String>, UrlError> {
    let lower = path.to_ascii_lowercase();
    let tricks = ["%2e", "%2f", "%5c", "\\", "?", "#"];
    if tricks.iter().any(|t| lower.contains(t)) {
        return Err(UrlError::Path);
    }
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if segs.iter().any(|s| s == "." || s == "..") {
        return Err(UrlError::Path);
    }
    Ok(segs)
}

/// One entry of `--git-allow`: a URL prefix (`https://github.com/`,
/// `https://git.example.org/team/`, `file:///srv/repos/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowEntry {
    text: String,
    parsed: Parsed,
}

impl FromStr for AllowEntry {
    type Err = UrlError;

    fn from_str(text: &str) -> Result<Self, UrlError> {
        let text = text.trim();
        if !text.contains("://") {
            // A bare path would be easy to mistake for a relative one: ask for file:///.
            return Err(UrlError::NotAbsolute);
        }
        Ok(Self {
            text: text.to_string(),
            parsed: Parsed::parse(text)?,
        })
    }
}

impl fmt::Display for AllowEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl AllowEntry {
    /// Does `url` fall under this entry: same scheme, host and port, and the entry's path
    /// segments a prefix of the URL's?
    fn covers(&self, url: &Parsed) -> bool {
        let e = &self.parsed;
        e.scheme == url.scheme
            && e.host == url.host
            && e.port == url.port
            && url.segments.starts_with(&e.segments)
    }
}

/// Why a git URL is refused before anything runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The allow-list is empty.
    #[error("git sources are off on this coordinator: its operator allows none (--git-allow)")]
    Off,
    /// The URL is malformed or of a kind never accepted.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// No entry covers the URL.
    #[error("not under any URL prefix this coordinator's operator allows (--git-allow): {0}")]
    NotListed(String),
    /// A listed local path leads (through a symlink) outside its entry.
    #[error("the path leads outside the allowed directory {0} (through a symlink)")]
    Escapes(String),
}

/// A URL the allow-list let through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// What git is given: the URL as submitted, or for a local repository its path with
    /// symlinks resolved (checked to stay under the entry).
    pub target: String,
    /// Its transport, the only one git is allowed for this URL.
    pub scheme: Scheme,
}

/// The operator's `--git-allow` entries; empty refuses every git source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitAllowList {
    entries: Vec<AllowEntry>,
}

impl GitAllowList {
    /// A list of these entries.
    pub fn new(entries: Vec<AllowEntry>) -> Self {
        Self { entries }
    }

    /// Is any git source allowed at all?
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Checks `url` against the list (lexically: no I/O, no git). A local path must also
    /// pass [`GitAllowList::confine`] before git sees it.
    pub fn check(&self, url: &str) -> Result<Allowed, Refusal> {
        if self.entries.is_empty() {
            return Err(Refusal::Off);
        }
        let parsed = Parsed::parse(url)?;
        let entry = self.entry_for(&parsed)?;
        let target = match parsed.scheme {
            Scheme::File => confine(&parsed, entry)?,
            _ => url.to_string(),
        };
        Ok(Allowed {
            target,
            scheme: parsed.scheme,
        })
    }

    fn entry_for(&self, url: &Parsed) -> Result<&AllowEntry, Refusal> {
        self.entries.iter().find(|e| e.covers(url)).ok_or_else(|| {
            let listed: Vec<String> = self.entries.iter().map(|e| e.text.clone()).collect();
            Refusal::NotListed(listed.join(", "))
        })
    }
}

/// The real path of a local repository, if it stays under `entry`'s (both with symlinks
/// resolved). A path that does not exist is left as written: git then fails to fetch it.
fn confine(url: &Parsed, entry: &AllowEntry) -> Result<String, Refusal> {
    let path = url.local_path();
    let Ok(real) = std::fs::canonicalize(&path) else {
        return Ok(path.display().to_string());
    };
    let root = entry.parsed.local_path();
    let real_root = std::fs::canonicalize(&root).unwrap_or(root);
    if !real.starts_with(&real_root) {
        return Err(Refusal::Escapes(entry.text.clone()));
    }
    Ok(real.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> GitAllowList {
        GitAllowList::new(entries.iter().map(|e| e.parse().unwrap()).collect())
    }

    #[test]
    fn an_empty_list_refuses_everything() {
        let err = GitAllowList::default()
            .check("https://github.com/a/b")
            .unwrap_err();
        assert_eq!(err, Refusal::Off);
        assert!(err.to_string().contains("--git-allow"), "{err}");
    }

    #[test]
    fn hosts_ports_and_paths_are_compared_as_parts_not_strings() {
        let allow = list(&["https://github.com/", "https://git.example.org:8443/team"]);
        for ok in [
            "https://github.com/org/repo.git",
            "https://GitHub.com:443/org/repo",
            "https://git.example.org:8443/team/engine",
            "https://git.example.org:8443//team/engine",
        ] {
            assert_eq!(allow.check(ok).unwrap().target, ok, "{ok}");
        }
        for refused in [
            "https://github.com.evil.org/org/repo",
            "https://evil.org/github.com/",
            "http://github.com/org/repo",
            "https://github.com:444/org/repo",
            "https://git.example.org/team/engine",
            "https://git.example.org:8443/teamster/engine",
            "https://git.example.org:8443/other/engine",
        ] {
            let err = allow.check(refused).unwrap_err();
            assert!(matches!(err, Refusal::NotListed(_)), "{refused}: {err}");
        }
    }

    #[test]
    fn tricks_in_paths_and_authorities_are_refused() {
        let allow = list(&["https://git.example.org/team/"]);
        let cases = [
            ("https://git.example.org/team/../other", UrlError::Path),
            ("https://git.example.org/team/%2e%2e/other", UrlError::Path),
            ("https://git.example.org/team%2F..%2Fother", UrlError::Path),
            ("https://git.example.org/team/x?y=1", UrlError::Path),
            (
                "https://user:tok@git.example.org/team/x",
                UrlError::Credentials,
            ),
            ("https://user@git.example.org/team/x", UrlError::Credentials),
            (
                "https://git.example.org@evil.org/team/x",
                UrlError::Credentials,
            ),
            ("ssh://git.example.org/team/x", UrlError::Ssh),
            ("git@git.example.org:team/x", UrlError::NotAbsolute),
            ("ext::sh -c touch% /tmp/pwned", UrlError::NotAbsolute),
            ("fd::3", UrlError::NotAbsolute),
            ("relative/repo", UrlError::NotAbsolute),
            (
                "ftp://git.example.org/team/x",
                UrlError::Scheme("ftp".into()),
            ),
            ("https://git.exa mple.org/team/x", UrlError::Host),
            ("https://git.example.org:0/team/x", UrlError::Host),
        ];
        for (url, want) in cases {
            assert_eq!(allow.check(url).unwrap_err(), Refusal::Url(want), "{url}");
        }
    }

    #[test]
    fn entries_must_be_urls_without_credentials_or_ssh() {
        assert_eq!(
            "/srv/repos".parse::<AllowEntry>(),
            Err(UrlError::NotAbsolute)
        );
        assert_eq!(
            "https://u:p@github.com/".parse::<AllowEntry>(),
            Err(UrlError::Credentials)
        );
        assert_eq!(
            "ssh://github.com/".parse::<AllowEntry>(),
            Err(UrlError::Ssh)
        );
        assert_eq!(
            "file://host/srv".parse::<AllowEntry>(),
            Err(UrlError::FileHost)
        );
    }

    #[test]
    fn local_paths_only_under_a_listed_file_prefix_and_never_through_symlinks_out() {
        let tmp = tempfile::tempdir().unwrap();
        let allowed = tmp.path().join("repos");
        let outside = tmp.path().join("secret");
        std::fs::create_dir_all(allowed.join("engine")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, allowed.join("link")).unwrap();
        let https_only = list(&["https://github.com/"]);
        let path = allowed.join("engine").display().to_string();
        for url in [path.clone(), format!("file://{path}")] {
            let err = https_only.check(&url).unwrap_err();
            assert!(matches!(err, Refusal::NotListed(_)), "{url}: {err}");
        }
        let files = list(&[&format!("file://{}/", allowed.display())]);
        let real = std::fs::canonicalize(allowed.join("engine")).unwrap();
        for url in [path.clone(), format!("file://{path}")] {
            let ok = files.check(&url).unwrap();
            assert_eq!(ok.scheme, Scheme::File);
            assert_eq!(ok.target, real.display().to_string());
        }
        let err = files.check(&outside.display().to_string()).unwrap_err();
        assert!(matches!(err, Refusal::NotListed(_)), "{err}");
        let through_link = allowed.join("link").display().to_string();
        let err = files.check(&through_link).unwrap_err();
        assert!(matches!(err, Refusal::Escapes(_)), "{err}");
    }
}
