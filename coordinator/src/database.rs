//! Opening a database by URL: the one place that names the backends and puts the two
//! handles over one database together, the [`Store`] (rows and SQL) and the
//! [`WorkerQueue`] (the worker protocol's engine over those rows), so that neither `store`
//! nor `queue` names the other's construction.

use std::sync::Arc;

use crate::queue::{Queue, WorkerQueue};
use crate::store::postgres::PgStore;
use crate::store::sqlite::SqliteStore;
use crate::store::{redact, Store};

/// One database as the coordinator uses it: what it keeps, and the worker queue over it. The
/// queue keeps in memory what one coordinator knows of the protocol, so one `Database` is one
/// coordinator's view; clones share it.
#[derive(Clone)]
pub struct Database {
    /// Everything kept: sweeps, results, tokens, engines, sources.
    pub store: Arc<dyn Store>,
    /// Leases, heartbeats, uploads and build reports of workers.
    pub queue: Arc<dyn WorkerQueue>,
}

impl From<PgStore> for Database {
    fn from(db: PgStore) -> Self {
        Self {
            store: Arc::new(db.clone()),
            queue: Arc::new(Queue::new(db)),
        }
    }
}

impl From<SqliteStore> for Database {
    fn from(db: SqliteStore) -> Self {
        Self {
            store: Arc::new(db.clone()),
            queue: Arc::new(Queue::new(db)),
        }
    }
}

/// Which backend a database URL names.
enum Kind {
    Postgres,
    Sqlite,
}

/// `postgres://` or `postgresql://` is Postgres; a `sqlite:` URL or a plain file path is
/// SQLite; anything else is refused, since a typo'd scheme would otherwise become a SQLite
/// file named after the URL.
fn kind(url: &str) -> anyhow::Result<Kind> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Kind::Postgres)
    } else if url.starts_with("sqlite:") || !url.contains("://") {
        Ok(Kind::Sqlite)
    } else {
        anyhow::bail!(
            "unsupported database URL `{}`: use postgres://, sqlite: or a file path",
            redact(url)
        )
    }
}

/// Opens the database a URL names (`postgres://` or `postgresql://`: Postgres; `sqlite:` or a
/// plain file path: SQLite, the file created if missing).
/// Migrations are applied either way.
pub async fn connect(url: &str) -> anyhow::Result<Database> {
    Ok(match kind(url)? {
        Kind::Postgres => PgStore::connect(url).await?.into(),
        Kind::Sqlite => SqliteStore::connect(url).await?.into(),
    })
}

/// Opens an existing database as it is, for commands that read it (`sweep list --database`
/// and the like): nothing is created or migrated.
pub async fn open_existing(url: &str) -> anyhow::Result<Database> {
    Ok(match kind(url)? {
        Kind::Postgres => PgStore::open_existing(url).await?.into(),
        Kind::Sqlite => SqliteStore::open_existing(url).await?.into(),
    })
}
