//! Opening a store by database URL: the one place that names the implementations, so that
//! `store/mod.rs` names none.

use std::sync::Arc;

use super::postgres::PgStore;
use super::sqlite::SqliteStore;
use super::url::redact;
use super::Store;

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
