//! `sweep token create|list|revoke`: tokens are managed in the database itself, so the first
//! admin token can be made before any exists (whoever can write the database is trusted).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use sweep_coordinator::catalog::Catalog;
use sweep_coordinator::service::{Caller, LeaseSettings, Service};
use sweep_coordinator::store;

use crate::cli::{Database, TokenCommand};

async fn open(database: &Database) -> anyhow::Result<Service> {
    let database = database.database.as_str();
    // Creates a SQLite file if missing: `sweep run --serve` on a new ./sweep.db needs tokens
    // for the workers that join it before the first run made the file.
    let db = sweep_coordinator::database::connect(database)
        .await
        .with_context(|| format!("opening {}", store::redact(database)))?;
    Ok(Service::new(
        db,
        Arc::new(Catalog::default()),
        LeaseSettings::default(),
    ))
}

/// Runs a `sweep token` subcommand.
pub async fn run(command: TokenCommand) -> anyhow::Result<ExitCode> {
    match command {
        TokenCommand::Create {
            database,
            role,
            name,
        } => {
            let (info, secret) = open(&database)
                .await?
                .admin()
                .create_token(&Caller::Local, &name, role)
                .await?;
            // The secret alone on stdout, so `TOKEN=$(sweep token create ...)` works.
            println!("{secret}");
            eprintln!(
                "created {} token `{}` (id {}); it is shown only now",
                info.role, info.name, info.id
            );
        }
        TokenCommand::List { database } => {
            for t in open(&database)
                .await?
                .admin()
                .tokens(&Caller::Local)
                .await?
            {
                let revoked = t
                    .revoked_at
                    .map(|at| format!("revoked {}", at.format("%Y-%m-%d %H:%M")))
                    .unwrap_or_default();
                println!(
                    "{:>5}  {:<30} {:<10} {}  {revoked}",
                    t.id,
                    t.name,
                    t.role.as_str(),
                    t.created_at.format("%Y-%m-%d %H:%M"),
                );
            }
        }
        TokenCommand::Revoke { database, name } => {
            let info = open(&database)
                .await?
                .admin()
                .revoke_token(&Caller::Local, &name)
                .await?;
            println!("revoked {} token `{}`", info.role, info.name);
        }
    }
    Ok(ExitCode::SUCCESS)
}
