//! Reading sweeps straight from a database (`--database ./sweep.db`), no coordinator needed.

use std::process::ExitCode;
use std::sync::Arc;

use sweep_coordinator::catalog::Catalog;
use sweep_coordinator::database;
use sweep_coordinator::service::{Caller, LeaseSettings, Service};
use sweep_domain::derive::{DeriveRequest, Derived};
use sweep_domain::table::render::{render, Format};

use super::print::{print_audit, print_detail, print_list};

/// Opens the database as it is: a reading command creates and migrates nothing. Its errors
/// name the database once.
pub(super) async fn open(database: &str) -> anyhow::Result<Service> {
    let db = database::open_existing(database).await?;
    // Reading needs no engines or suites: everything a sweep used is stored with it.
    Ok(Service::new(
        db,
        Arc::new(Catalog::default()),
        LeaseSettings::default(),
    ))
}

/// `sweep status ID --database DB`.
pub async fn status(database: &str, id: i64, json: bool) -> anyhow::Result<ExitCode> {
    let detail = open(database)
        .await?
        .reads()
        .detail(&Caller::Local, id)
        .await?;
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
    let table = open(database)
        .await?
        .reads()
        .table(&Caller::Local, id)
        .await?;
    print!("{}", render(&table, format));
    Ok(ExitCode::SUCCESS)
}

/// `sweep list --database DB`.
pub async fn list(database: &str) -> anyhow::Result<ExitCode> {
    let sweeps = open(database)
        .await?
        .reads()
        .list(&Caller::Local, 1000)
        .await?;
    print_list(&sweeps);
    Ok(ExitCode::SUCCESS)
}

/// `sweep cancel ID --database DB`.
pub async fn cancel(database: &str, id: i64) -> anyhow::Result<ExitCode> {
    open(database)
        .await?
        .submissions()
        .cancel(&Caller::Local, id)
        .await?;
    println!("cancelled {id}");
    Ok(ExitCode::SUCCESS)
}

/// `sweep suite derive ID --database DB`: the derived suite.
pub async fn derive(database: &str, id: i64, request: &DeriveRequest) -> anyhow::Result<Derived> {
    Ok(open(database)
        .await?
        .reads()
        .derive(&Caller::Local, id, request)
        .await?)
}

/// `sweep retry ID --build NAME --database DB`.
pub async fn retry(database: &str, id: i64, build: &str) -> anyhow::Result<ExitCode> {
    let ack = open(database)
        .await?
        .admin()
        .retry_build(&Caller::Local, id, build)
        .await?;
    println!(
        "sweep {id}: build {} queued again ({} jobs)",
        ack.build, ack.jobs
    );
    Ok(ExitCode::SUCCESS)
}

/// `sweep audit --database DB`.
pub async fn audit(database: &str, limit: u32) -> anyhow::Result<ExitCode> {
    let entries = open(database)
        .await?
        .admin()
        .audit_log(&Caller::Local, limit)
        .await?;
    print_audit(&entries);
    Ok(ExitCode::SUCCESS)
}
