//! Each backend's migrations, embedded in the binary by `build.rs`, as sqlx's migrator runs
//! them, and the check of a database opened without migrating. They are read the way sqlx reads a migrations folder (version and description from
//! the file name, a `-- no-transaction` first line, the checksum of the text), so databases
//! migrated by earlier builds, which used `sqlx::migrate!`, check out unchanged: the test
//! below compares both readings.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

/// The Postgres migrations (`migrations/postgres`).
pub(crate) async fn of_postgres() -> anyhow::Result<Migrator> {
    Ok(Migrator::new(Embedded(POSTGRES)).await?)
}

/// The SQLite migrations (`migrations/sqlite`).
pub(crate) async fn of_sqlite() -> anyhow::Result<Migrator> {
    Ok(Migrator::new(Embedded(SQLITE)).await?)
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

/// (file name, SQL) of each migration, in version order.
#[derive(Debug)]
struct Embedded(&'static [(&'static str, &'static str)]);

impl<'s> MigrationSource<'s> for Embedded {
    fn resolve(
        self,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<Migration>, BoxDynError>> + Send + 's>> {
        Box::pin(async move {
            self.0
                .iter()
                .map(|(file, sql)| migration(file, sql))
                .collect()
        })
    }
}

/// A migration file as sqlx reads one: `<version>_<description>.sql`, underscores in the
/// description read as spaces.
fn migration(file: &str, sql: &'static str) -> Result<Migration, BoxDynError> {
    let (version, rest) = file
        .split_once('_')
        .ok_or_else(|| format!("migration file name {file} has no `<version>_`"))?;
    let version: i64 = version
        .parse()
        .map_err(|_| format!("migration file name {file}: `{version}` is not a version"))?;
    let kind = MigrationType::from_filename(rest);
    let description = rest.trim_end_matches(kind.suffix()).replace('_', " ");
    let no_tx = sql.starts_with("-- no-transaction");
    Ok(Migration::new(
        version,
        Cow::Owned(description),
        kind,
        Cow::Borrowed(sql),
        no_tx,
    ))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use sqlx::migrate::Migrator;

    /// What sqlx's own reading of the folder (the one `sqlx::migrate!` used) makes of it.
    async fn from_folder(backend: &str) -> Migrator {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../migrations")
            .join(backend);
        Migrator::new(dir)
            .await
            .expect("reading the migrations folder")
    }

    fn summary(m: &Migrator) -> Vec<(i64, String, Vec<u8>, bool)> {
        m.iter()
            .map(|m| {
                (
                    m.version,
                    m.description.to_string(),
                    m.checksum.to_vec(),
                    m.no_tx,
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn embedded_migrations_are_the_folders_to_the_checksum() {
        for (backend, embedded) in [
            ("postgres", super::of_postgres().await.unwrap()),
            ("sqlite", super::of_sqlite().await.unwrap()),
        ] {
            let folder = from_folder(backend).await;
            assert!(folder.iter().count() >= 20, "{backend}: migrations read");
            assert_eq!(summary(&embedded), summary(&folder), "{backend}");
        }
    }
}
