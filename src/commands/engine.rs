//! `sweep engine add|list`: the coordinator's engine catalog over its API.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use reqwest::StatusCode;
use sweep_domain::wire::{EngineInfo, EngineList, EngineOrigin};

use super::api::{url_segment, Api};
use crate::cli::EngineCommand;

/// Runs a `sweep engine` subcommand.
pub async fn run(command: EngineCommand) -> anyhow::Result<ExitCode> {
    match command {
        EngineCommand::Add { file, remote } => add(&Api::remote(&remote)?, &file).await,
        EngineCommand::List { remote, json } => list(&Api::remote(&remote)?, json).await,
    }
}

/// Sends a definition file to `PUT /api/v1/engines/{name}`; prints what the coordinator
/// registered.
async fn add(api: &Api, file: &Path) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    // Only the name is read here (for the URL); the coordinator validates the rest.
    let doc: serde_json::Value = sweep_domain::decode::deserialize_toml(&text)
        .with_context(|| file.display().to_string())?;
    let name = doc["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .with_context(|| format!("{}: name: the definition names no engine", file.display()))?;
    let resp = api
        .put_toml(
            &format!("/api/v1/engines/{}", url_segment(name)),
            text.clone(),
        )
        .await?;
    let created = resp.status() == StatusCode::CREATED;
    let engine: EngineInfo = resp
        .json()
        .await
        .context("decoding the coordinator's answer")?;
    println!(
        "engine {} {} ({} engine, {} knob(s))",
        engine.name,
        if created { "added" } else { "updated" },
        format!("{:?}", engine.kind).to_lowercase(),
        engine.knobs.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// Prints the registered engines, one line each (or the raw JSON).
async fn list(api: &Api, json: bool) -> anyhow::Result<ExitCode> {
    let text = api.get("/api/v1/engines").await?.text().await?;
    if json {
        println!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let list: EngineList = serde_json::from_str(&text).context("decoding the engine list")?;
    for e in &list.engines {
        let origin = match &e.origin {
            Some(EngineOrigin::File { file }) => format!("file {file}"),
            Some(EngineOrigin::Database {
                updated_at,
                updated_by,
            }) => format!(
                "database, by {updated_by} at {}",
                updated_at.format("%Y-%m-%d %H:%M:%S")
            ),
            None => String::new(),
        };
        let knobs: Vec<String> = e
            .knobs
            .iter()
            .map(|k| format!("{} {}..{}", k.name, k.min, k.max))
            .collect();
        println!(
            "{:<20} {:<6} {:<7} {:<40} {}",
            e.name,
            format!("{:?}", e.kind).to_lowercase(),
            format!("{:?}", e.protocol).to_lowercase(),
            origin,
            knobs.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}
