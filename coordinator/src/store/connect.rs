//! Opening a store by database URL, and the migration check for a database opened as it is.
//! Kept apart from the interface so that `store/mod.rs` names no implementation.

use std::sync::Arc;

use super::postgres::PgStore;
use super::sqlite::SqliteStore;
use super::Store;

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

/// Opens the store a database URL names: `postgres://` or `postgresql://` is Postgres; a
/// `sqlite:` URL or a plain file path is SQLite (the file is created if missing). Migrations
/// are applied either way.
pub async fn connect(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(PgStore::connect(url).await?))
    } else if url.starts_with("sqlite:") || !url.contains("://") {
        Ok(Arc::new(SqliteStore::connect(url).await?))
    } else {
        // A typo'd scheme would otherwise become a SQLite file named after the URL.
        anyhow::bail!(
            "unsupported database URL `{}`: use postgres://, sqlite: or a file path",
            redact(url)
        )
    }
}

/// Opens an existing database as it is, for commands that read it (`sweep list --database`
/// and the like): nothing is created or migrated. `postgres://` is Postgres; a `sqlite:` URL
/// or a file path is SQLite.
pub async fn open_existing(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(PgStore::open_existing(url).await?))
    } else if url.starts_with("sqlite:") || !url.contains("://") {
        Ok(Arc::new(SqliteStore::open_existing(url).await?))
    } else {
        anyhow::bail!(
            "unsupported database URL `{}`: use postgres://, sqlite: or a file path",
            redact(url)
        )
    }
}

/// Checks a database's applied migrations (`applied`, from `_sqlx_migrations`, which
/// `has_table` says exists) against those this build knows, for a database opened without
/// migrating: `db` (as it may be shown) is not a Sweep database, is older (needs migrations a
/// writing command applies) or newer than this build.
pub(crate) fn check_migrations(
    db: &str,
    has_table: bool,
    applied: &[i64],
    known: &sqlx::migrate::Migrator,
) -> anyhow::Result<()> {
    if !has_table {
        anyhow::bail!("{db} is not a Sweep database (it has no migrations table)");
    }
    let known: Vec<i64> = known
        .iter()
        .filter(|m| m.migration_type.is_up_migration())
        .map(|m| m.version)
        .collect();
    if let Some(newer) = applied.iter().find(|v| !known.contains(v)) {
        anyhow::bail!(
            "{db} was written by a newer Sweep (its migration {newer} is unknown to this one): \
             read it with that version"
        );
    }
    let missing: Vec<String> = known
        .iter()
        .filter(|v| !applied.contains(v))
        .map(|v| v.to_string())
        .collect();
    if !missing.is_empty() {
        anyhow::bail!(
            "{db} is a Sweep database of an older version and needs migration ({} not applied); \
             reading commands leave it as it is: open it once with a command that writes, e.g. \
             `sweep coordinator --database {db}` or `sweep run --resume ID --database {db}`",
            missing.join(", ")
        );
    }
    Ok(())
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
