//! `sweep export ID`, `sweep import FILE` and `sweep delete ID`: a sweep moved between stores
//! (see `sweep_coordinator::transfer`), or let go, on a database directly (`--database`) or
//! through a coordinator (`--coordinator`, with a token).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use std::sync::Arc;

use sweep_coordinator::catalog::Catalog;
use sweep_coordinator::service::{Caller, LeaseSettings, Service};
use sweep_domain::wire::{DeleteAck, Submitted};

use super::api::Api;
use super::local::open;

/// Opens `database` to write a sweep into it: created and migrated when it is new (as `sweep
/// run` and `sweep token` do), so a laptop's fresh file or a team's database takes it alike.
async fn open_to_write(database: &str) -> anyhow::Result<Service> {
    let db = sweep_coordinator::database::connect(database).await?;
    Ok(Service::new(
        db,
        Arc::new(Catalog::default()),
        LeaseSettings::default(),
    ))
}

/// Writes sweep `id`'s export file to `out` (standard output when `None`), read from the
/// database `database` or through `api`.
pub async fn export(
    database: Option<&str>,
    api: Option<&Api>,
    id: i64,
    out: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let file = match (database, api) {
        (Some(db), _) => {
            open(db)
                .await?
                .reads()
                .export_sweep(&Caller::Local, id)
                .await?
        }
        (None, Some(api)) => api
            .get(&format!("/api/v1/sweeps/{id}/export"))
            .await?
            .bytes()
            .await
            .context("reading the export")?
            .to_vec(),
        (None, None) => anyhow::bail!("give --database or --coordinator"),
    };
    match out {
        Some(path) => {
            std::fs::write(path, &file).with_context(|| format!("writing {}", path.display()))?
        }
        None => std::io::stdout()
            .lock()
            .write_all(&file)
            .context("writing the export to standard output")?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Imports the export file `path` into the database `database` or through `api`; prints the
/// new sweep's id.
pub async fn import(
    database: Option<&str>,
    api: Option<&Api>,
    path: &Path,
) -> anyhow::Result<ExitCode> {
    let file = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let label = path.display().to_string();
    let submitted: Submitted = match (database, api) {
        (Some(db), _) => {
            open_to_write(db)
                .await?
                .submissions()
                .import_sweep(&Caller::Local, file, &label)
                .await?
        }
        (None, Some(api)) => api
            .post_bytes("/api/v1/sweeps/import", "application/gzip", file)
            .await?
            .json()
            .await
            .context("reading the answer")?,
        (None, None) => anyhow::bail!("give --database or --coordinator"),
    };
    println!("imported {} as sweep {}", path.display(), submitted.id);
    Ok(ExitCode::SUCCESS)
}

/// Deletes sweep `id` in the database `database` (opened as it is) or through `api`.
pub async fn delete(
    database: Option<&str>,
    api: Option<&Api>,
    id: i64,
) -> anyhow::Result<ExitCode> {
    let ack: DeleteAck = match (database, api) {
        (Some(db), _) => {
            open(db)
                .await?
                .submissions()
                .delete(&Caller::Local, id)
                .await?
        }
        (None, Some(api)) => api
            .delete(&format!("/api/v1/sweeps/{id}"))
            .await?
            .json()
            .await
            .context("reading the answer")?,
        (None, None) => anyhow::bail!("give --database or --coordinator"),
    };
    let how = if ack.cancelled {
        " (cancelled first)"
    } else {
        ""
    };
    println!("deleted sweep {id}{how}: {} results", ack.results);
    Ok(ExitCode::SUCCESS)
}
