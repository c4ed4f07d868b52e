//! HTTP client subcommands: submit, status, table, cancel, list, retry, audit, suite derive
//! (and what `--wait` needs: polling a sweep, fetching its table).

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use serde_json::Value;
use sweep_coordinator::snapshot::{Snapshot, SnapshotRules};
use sweep_domain::auth::{AuditLog, RetryAck};
use sweep_domain::derive::{DeriveRequest, SUMMARY_HEADER};
use sweep_domain::engine::EngineKind;
use sweep_domain::source::short;
use sweep_domain::spec::SweepConfig;
use sweep_domain::wire::{
    ApprovalAck, EngineList, Estimate, Rejection, Submitted, SweepDetail, SweepSummary,
};

use super::api::{url_segment, Api};
use super::print::{print_audit, print_detail, print_estimate, print_list, print_table};
use crate::cli::SourceArgs;

/// Submits a TOML config. With `sources` (`--source`, `--variant-source`), each directory is
/// snapshotted, uploaded unless the coordinator has it, and named in the config (`[source]
/// sha256`, a variant's `sha256`). Without `wait`, prints the id alone
/// on stdout (and, on stderr, that it is an identical sweep already running, when it is).
/// With `wait` (a table format), says the id on stderr, follows the sweep to its end and
/// prints its table (see [`super::wait`]).
pub async fn submit(
    api: &Api,
    file: &Path,
    sources: &SourceArgs,
    force: bool,
    wait: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let submitted: Submitted = post_submission(api, "/api/v1/sweeps", file, sources, force).await?;
    announce(&submitted, wait.is_some());
    match wait {
        Some(format) => super::wait::follow(api, submitted.id, format).await,
        None => Ok(ExitCode::SUCCESS),
    }
}

/// Prints what submitting a config would make and cost (see [`submit`] for the arguments);
/// submits nothing.
pub async fn estimate(
    api: &Api,
    file: &Path,
    sources: &SourceArgs,
    force: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let estimate: Estimate =
        post_submission(api, "/api/v1/sweeps/estimate", file, sources, force).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&estimate)?);
    } else {
        print_estimate(&estimate);
    }
    Ok(ExitCode::SUCCESS)
}

/// Posts the submission of `file` (see [`submission`]) to `path`: the coordinator's answer.
async fn post_submission<T: serde::de::DeserializeOwned>(
    api: &Api,
    path: &str,
    file: &Path,
    sources: &SourceArgs,
    force: bool,
) -> anyhow::Result<T> {
    let (body, content_type) = submission(api, file, sources, force).await?;
    let req = api
        .http
        .post(api.url(path))
        .header("content-type", content_type)
        .body(body);
    api.send(req)
        .await?
        .json()
        .await
        .context("decoding the coordinator's answer")
}

/// The body of a submission of `file` and its content type: its text as it is, or, with
/// `force` or `sources` (snapshotted and uploaded), the config as JSON.
async fn submission(
    api: &Api,
    file: &Path,
    sources: &SourceArgs,
    force: bool,
) -> anyhow::Result<(Vec<u8>, &'static str)> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    if !sources.any() && !force {
        // The text as it is, so the coordinator's errors name its lines.
        return Ok((text.into_bytes(), "application/toml"));
    }
    let mut config = if sources.dir.is_some() {
        super::source::config_for_source(file, &text)?
    } else {
        SweepConfig::from_toml(&text).with_context(|| file.display().to_string())?
    };
    config.recompute |= force;
    if sources.any() {
        with_sources(api, file, &mut config, sources).await?;
    }
    as_json(&config)
}

/// Says what a submission did: its id on stdout (on stderr when `waiting`: stdout is then the
/// table at the end), and on stderr the results reused and an identical sweep still running.
fn announce(submitted: &Submitted, waiting: bool) {
    let id = submitted.id;
    if let Some(why) = &submitted.pending_approval {
        eprintln!("sweep {id} waits for an admin's approval: {why}");
    }
    if submitted.reused > 0 {
        eprintln!(
            "sweep {id}: {} results reused from earlier sweeps of the same builds (--force measures them again)",
            submitted.reused
        );
    }
    if !waiting {
        println!("{id}");
        if submitted.existing {
            // stdout stays the id alone, so scripts read it the same either way.
            eprintln!(
                "an identical sweep is still running: {id} is that sweep (nothing new submitted)"
            );
        }
    } else if submitted.existing {
        eprintln!(
            "an identical sweep is still running: waiting for sweep {id} (nothing new submitted)"
        );
    } else {
        eprintln!("submitted sweep {id}; waiting for it to finish");
    }
}

/// A config as the JSON body of a submission.
fn as_json(config: &SweepConfig) -> anyhow::Result<(Vec<u8>, &'static str)> {
    let body = serde_json::to_vec(config).context("encoding the config")?;
    Ok((body, "application/json"))
}

/// `config` (of `file`) on the code in the directories of `sources`: each snapshotted by the
/// rules the coordinator's engine definition gives, uploaded unless the coordinator has it,
/// and named in the config.
async fn with_sources(
    api: &Api,
    file: &Path,
    config: &mut SweepConfig,
    sources: &SourceArgs,
) -> anyhow::Result<()> {
    let engines: EngineList = api
        .get("/api/v1/engines")
        .await?
        .json()
        .await
        .context("decoding the engine list")?;
    let Some(info) = engines.engines.iter().find(|e| e.name == config.engine) else {
        bail!(
            "{}: engine `{}` is not registered on the coordinator",
            file.display(),
            config.engine
        );
    };
    if info.kind == EngineKind::Binary {
        bail!(
            "--source, --variant-source: engine `{}` is binary-only; there is no source to replace",
            info.name
        );
    }
    let rules = SnapshotRules {
        exclude: info.exclude.clone(),
        include_dotfiles: info.include_dotfiles,
        gitignore: true,
    };
    for (target, snap) in super::source::snapshots(sources, &rules).await? {
        upload_source(api, &snap).await?;
        super::source::name_in(file, config, &target, snap.sha256)?;
    }
    Ok(())
}

/// Uploads a snapshot unless the coordinator has it (`HEAD` first, then `PUT`).
async fn upload_source(api: &Api, snap: &Snapshot) -> anyhow::Result<()> {
    let path = format!("/api/v1/sources/{}", snap.sha256);
    let head = api.head(&path).await?;
    if head.status().is_success() {
        eprintln!("source {}: already on the coordinator", short(&snap.sha256));
        return Ok(());
    }
    if head.status() != reqwest::StatusCode::NOT_FOUND {
        // 401/403 and the like: the body says why (HEAD answers have none, so say it here).
        bail!(
            "{}: checking for source {} on the coordinator",
            head.status(),
            snap.sha256
        );
    }
    let req = api
        .http
        .put(api.url(&path))
        .header("content-type", "application/gzip")
        .body(snap.archive.clone());
    api.send(req)
        .await
        .with_context(|| format!("uploading source {}", snap.sha256))?;
    eprintln!(
        "source {}: uploaded ({} bytes)",
        short(&snap.sha256),
        snap.archive.len()
    );
    Ok(())
}

/// Prints a sweep's state and progress.
pub async fn status(api: &Api, id: i64, json: bool) -> anyhow::Result<ExitCode> {
    let text = api
        .get(&format!("/api/v1/sweeps/{id}"))
        .await?
        .text()
        .await?;
    if json {
        println!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let d: SweepDetail = serde_json::from_str(&text).context("decoding the sweep")?;
    print_detail(&d);
    Ok(ExitCode::SUCCESS)
}

/// Prints a sweep's table.
pub async fn table(api: &Api, id: i64, format: &str) -> anyhow::Result<ExitCode> {
    print_table(&api.table_text(id, format).await?);
    Ok(ExitCode::SUCCESS)
}

/// Cancels a sweep.
pub async fn cancel(api: &Api, id: i64) -> anyhow::Result<ExitCode> {
    api.post(&format!("/api/v1/sweeps/{id}/cancel")).await?;
    println!("cancelled {id}");
    Ok(ExitCode::SUCCESS)
}

/// Retries a failed build of a sweep (admin).
pub async fn retry(api: &Api, id: i64, build: &str) -> anyhow::Result<ExitCode> {
    let path = format!("/api/v1/sweeps/{id}/builds/{}/retry", url_segment(build));
    let ack: RetryAck = api.post(&path).await?.json().await?;
    println!(
        "sweep {id}: build {} queued again ({} jobs)",
        ack.build, ack.jobs
    );
    Ok(ExitCode::SUCCESS)
}

/// Approves sweep `id`, held for approval, or with `reject`, rejects it saying why (admin).
pub async fn approve(api: &Api, id: i64, reject: Option<&str>) -> anyhow::Result<ExitCode> {
    let req = match reject {
        None => api
            .http
            .post(api.url(&format!("/api/v1/sweeps/{id}/approve"))),
        Some(why) => api
            .http
            .post(api.url(&format!("/api/v1/sweeps/{id}/reject")))
            .json(&Rejection {
                why: why.to_string(),
            }),
    };
    let ack: ApprovalAck = api
        .send(req)
        .await?
        .json()
        .await
        .context("decoding the coordinator's answer")?;
    println!("sweep {id}: {}", ack.state.as_str());
    Ok(ExitCode::SUCCESS)
}

/// Prints the audit log (admin), newest first.
pub async fn audit(api: &Api, limit: u32) -> anyhow::Result<ExitCode> {
    let log: AuditLog = api
        .get(&format!("/api/v1/audit?limit={limit}"))
        .await?
        .json()
        .await?;
    print_audit(&log.entries);
    Ok(ExitCode::SUCCESS)
}

/// Lists sweeps.
pub async fn list(api: &Api) -> anyhow::Result<ExitCode> {
    let body: Value = api.get("/api/v1/sweeps").await?.json().await?;
    let sweeps: Vec<SweepSummary> = serde_json::from_value(body["sweeps"].clone())?;
    print_list(&sweeps);
    Ok(ExitCode::SUCCESS)
}

/// A derived suite from the coordinator: (EPD text, summary of the counts).
pub async fn derive(
    api: &Api,
    id: i64,
    request: &DeriveRequest,
) -> anyhow::Result<(String, String)> {
    let req = api
        .http
        .get(api.url(&format!("/api/v1/sweeps/{id}/derive")))
        .query(&request.query_pairs());
    let resp = api.send(req).await?;
    let summary = resp
        .headers()
        .get(SUMMARY_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let text = resp.text().await.context("reading the derived suite")?;
    Ok((text, summary))
}
