//! What logs and error messages may show of a database URL.

/// `url` with its password, if it has one, replaced by `***`: what error messages and logs
/// may show of a database URL.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_string();
    };
    match rest[..at].split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***{}", &rest[at..]),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://sweep:s3cret@db:5432/sweep"),
            "postgres://sweep:***@db:5432/sweep"
        );
        assert_eq!(
            redact("postgres://sweep@db/sweep"),
            "postgres://sweep@db/sweep"
        );
        assert_eq!(redact("postgres://u:p@ss@db/x"), "postgres://u:***@db/x");
        assert_eq!(redact("/tmp/sweep.db"), "/tmp/sweep.db");
    }
}
