//! Pax extended headers (POSIX.1-2001): only the keys that change what is read are honoured.
//!
//! A local header (`x`) may set `path` and `linkpath` of the next member, and `size` only to
//! the value its own header holds (a reader honouring one and a reader honouring the other
//! would see different archives). Sparse-file keys are refused; every other key (times,
//! owners, `comment`, vendor keys) is metadata a snapshot does not keep, and is ignored. A
//! global header (`g`, as `git archive` writes with the commit id) may not set `path`,
//! `linkpath` or `size` at all: applied to every member after it, they make no sense.

use crate::error::Problem;

/// What a pax header says about the member after it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Pax {
    /// `path`.
    pub path: Option<Vec<u8>>,
    /// `size`.
    pub size: Option<u64>,
}

fn bad(what: impl Into<String>) -> Problem {
    Problem::BadPax(what.into())
}

/// Parses a pax header body, `LENGTH KEY=VALUE\n` records (`global` for a `g` header).
pub(crate) fn parse(body: &[u8], global: bool) -> Result<Pax, Problem> {
    let mut pax = Pax::default();
    let mut rest = body;
    // Some writers pad the body with NULs.
    while !rest.iter().all(|&b| b == 0) {
        let space = rest
            .iter()
            .position(|&b| b == b' ')
            .ok_or_else(|| bad("a record without a length"))?;
        let len: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("a record whose length is not a number"))?;
        if len <= space + 1 || len > rest.len() {
            return Err(bad("a record's length runs past the header"));
        }
        let record = rest[space + 1..len]
            .strip_suffix(b"\n")
            .ok_or_else(|| bad("a record not ending in a newline"))?;
        let eq = record
            .iter()
            .position(|&b| b == b'=')
            .ok_or_else(|| bad("a record without `=`"))?;
        apply(&mut pax, &record[..eq], &record[eq + 1..], global)?;
        rest = &rest[len..];
    }
    Ok(pax)
}

fn apply(pax: &mut Pax, key: &[u8], value: &[u8], global: bool) -> Result<(), Problem> {
    let honoured = matches!(key, b"path" | b"linkpath" | b"size");
    if global && honoured {
        return Err(bad(format!(
            "a global header may not set `{}`",
            String::from_utf8_lossy(key)
        )));
    }
    if key.starts_with(b"GNU.sparse.") {
        return Err(bad("sparse files are not allowed"));
    }
    match key {
        b"path" => pax.path = Some(value.to_vec()),
        b"size" => {
            let size = std::str::from_utf8(value)
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad("`size` is not a number"))?;
            pax.size = Some(size);
        }
        // `linkpath` only matters to links, which are refused by their type.
        _ => {}
    }
    Ok(())
}

/// One pax record, `LENGTH KEY=VALUE\n`, where the length counts its own digits.
#[cfg(test)]
pub(crate) fn record(key: &str, value: &str) -> String {
    let body = format!(" {key}={value}\n");
    let mut len = body.len() + 1;
    while len != body.len() + len.to_string().len() {
        len = body.len() + len.to_string().len();
    }
    format!("{len}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn honours_path_and_size_ignores_the_rest() {
        let body = format!(
            "{}{}{}",
            record("mtime", "1.5"),
            record("path", "a/b.c"),
            record("size", "12")
        );
        let pax = parse(body.as_bytes(), false).unwrap();
        assert_eq!(pax.path.as_deref(), Some(&b"a/b.c"[..]));
        assert_eq!(pax.size, Some(12));
        // git archive's global header.
        let global = record("comment", "0123abcd");
        assert_eq!(parse(global.as_bytes(), true).unwrap(), Pax::default());
    }

    #[test]
    fn refuses_bad_records_sparse_and_global_paths() {
        for (body, global, why) in [
            ("5 a=b", false, "newline"),
            ("99 path=x\n", false, "runs past"),
            ("x path=x\n", false, "not a number"),
            ("7 path\n", false, "without `=`"),
        ] {
            let err = parse(body.as_bytes(), global).unwrap_err().to_string();
            assert!(err.contains(why), "{body:?}: {err}");
        }
        let sparse = record("GNU.sparse.map", "0,1");
        let err = parse(sparse.as_bytes(), false).unwrap_err().to_string();
        assert!(err.contains("sparse"), "{err}");
        let global = record("path", "x");
        let err = parse(global.as_bytes(), true).unwrap_err().to_string();
        assert!(err.contains("global header may not set `path`"), "{err}");
    }
}
