//! Reading sweeps straight from a database (`--database ./sweep.db`), no coordinator needed.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use sweep_coordinator::catalog::Catalog;
use sweep_coordinator::service::{LeaseSettings, Service};
use sweep_coordinator::store;
use sweep_domain::derive::{DeriveRequest, Derived};
use sweep_domain::table::render::{render, Format};

use super::client::{print_detail, print_list};

async fn open(database: &str) -> anyhow::Result<Service> {
    if !database.contains("://") && !std::path::Path::new(database).exists() {
        anyhow::bail!("no database at {}", store::redact(database));
    }
    let store = store::connect(database)
        .await
        .with_context(|| format!("opening {}", store::redact(database)))?;
    // Reading needs no engines or suites: everything a sweep used is stored with it.
    Ok(Service::new(
        store,
        Arc::new(Catalog::default()),
        LeaseSettings::default(),
    ))
}

/// `sweep status ID --database DB`.
pub async fn status(database: &str, id: i64, json: bool) -> anyhow::Result<ExitCode> {
    let detail = open(database).await?.detail(id).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&detail)?);
    } else {
        print_detail(&detail);
    }
    Ok(ExitCode::SUCCESS)
}

/// `sweep table ID --database DB`.
pub async fn table(database: &str, id: i64, format: &str) -> anyhow::Result<ExitCode> {
    let format: Format = format.parse().map_err(anyhow::Error::msg)?;
    let table = open(database).await?.table(id).await?;
    print!("{}", render(&table, format));
    Ok(ExitCode::SUCCESS)
}

/// `sweep list --database DB`.
pub async fn list(database: &str) -> anyhow::Result<ExitCode> {
    let sweeps = open(database).await?.list(1000).await?;
    print_list(&sweeps);
    Ok(ExitCode::SUCCESS)
}

/// `sweep cancel ID --database DB`.
pub async fn cancel(database: &str, id: i64) -> anyhow::Result<ExitCode> {
    open(database).await?.cancel(id).await?;
    println!("cancelled {id}");
    Ok(ExitCode::SUCCESS)
}

/// `sweep suite derive ID --database DB`: the derived suite.
pub async fn derive(database: &str, id: i64, request: &DeriveRequest) -> anyhow::Result<Derived> {
    Ok(open(database).await?.derive(id, request).await?)
}
