//! HTTP client subcommands: submit, status, table, cancel, list, suite derive.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use serde_json::Value;
use sweep_domain::derive::{DeriveRequest, SUMMARY_HEADER};
use sweep_domain::wire::{Submitted, SweepDetail, SweepSummary};

async fn check(resp: reqwest::Response) -> anyhow::Result<reqwest::Response> {
    if resp.status().is_success() {
        return Ok(resp);
    }
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    let err = &body["error"];
    match (err["field"].as_str(), err["message"].as_str()) {
        (Some(f), Some(m)) if !f.is_empty() => bail!("{status}: {f}: {m}"),
        (_, Some(m)) => bail!("{status}: {m}"),
        _ => bail!("{status}"),
    }
}

fn url(base: &str, path: &str) -> String {
    format!("{}{path}", base.trim_end_matches('/'))
}

/// Submits a TOML config; prints the id alone on stdout (and, on stderr, that it is an
/// identical sweep already running, when it is).
pub async fn submit(base: &str, file: &Path) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let resp = reqwest::Client::new()
        .post(url(base, "/api/v1/sweeps"))
        .header("content-type", "application/toml")
        .body(text)
        .send()
        .await
        .with_context(|| format!("contacting the coordinator at {base}"))?;
    let submitted: Submitted = check(resp)
        .await?
        .json()
        .await
        .context("decoding the coordinator's answer")?;
    println!("{}", submitted.id);
    if submitted.existing {
        // stdout stays the id alone, so scripts read it the same either way.
        eprintln!(
            "an identical sweep is still running: {} is that sweep (nothing new submitted)",
            submitted.id
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn get(base: &str, path: &str) -> anyhow::Result<reqwest::Response> {
    let resp = reqwest::get(url(base, path))
        .await
        .with_context(|| format!("contacting the coordinator at {base}"))?;
    check(resp).await
}

/// Prints a sweep's state and progress.
pub async fn status(base: &str, id: i64, json: bool) -> anyhow::Result<ExitCode> {
    let text = get(base, &format!("/api/v1/sweeps/{id}"))
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

/// Prints a sweep's state, progress, build failures, workers and errors.
pub fn print_detail(d: &SweepDetail) {
    println!(
        "sweep {} `{}` ({}): {}  {}/{} positions",
        d.summary.id,
        d.summary.name,
        d.summary.engine,
        d.summary.state.as_str(),
        d.summary.positions_done,
        d.summary.positions_total
    );
    for p in &d.progress {
        println!(
            "  {:<40} {:<24} {:<16} {:>6}/{:<6} errors {}",
            p.build,
            p.suite,
            p.limit.to_string(),
            p.done,
            p.total,
            p.errors
        );
    }
    for b in d.builds.iter().filter(|b| b.build_error.is_some()) {
        println!(
            "  build {} failed:\n{}",
            b.name,
            b.build_error.as_deref().unwrap_or("")
        );
    }
    for w in &d.active_workers {
        println!("  worker {} ({}) holds {} job(s)", w.name, w.host, w.jobs);
    }
    for e in &d.errors {
        println!(
            "  error {} {} {}: {}",
            e.build, e.suite, e.position, e.error
        );
    }
}

/// Prints a sweep's table.
pub async fn table(base: &str, id: i64, format: &str) -> anyhow::Result<ExitCode> {
    let text = get(base, &format!("/api/v1/sweeps/{id}/table?format={format}"))
        .await?
        .text()
        .await?;
    print!("{text}");
    if !text.ends_with('\n') {
        println!();
    }
    Ok(ExitCode::SUCCESS)
}

/// Cancels a sweep.
pub async fn cancel(base: &str, id: i64) -> anyhow::Result<ExitCode> {
    let resp = reqwest::Client::new()
        .post(url(base, &format!("/api/v1/sweeps/{id}/cancel")))
        .send()
        .await
        .with_context(|| format!("contacting the coordinator at {base}"))?;
    check(resp).await?;
    println!("cancelled {id}");
    Ok(ExitCode::SUCCESS)
}

/// Lists sweeps.
pub async fn list(base: &str) -> anyhow::Result<ExitCode> {
    let body: Value = get(base, "/api/v1/sweeps").await?.json().await?;
    let sweeps: Vec<SweepSummary> = serde_json::from_value(body["sweeps"].clone())?;
    print_list(&sweeps);
    Ok(ExitCode::SUCCESS)
}

/// Prints one line per sweep.
pub fn print_list(sweeps: &[SweepSummary]) {
    for s in sweeps {
        println!(
            "{:>5}  {:<10} {:>8}/{:<8} {}  {}",
            s.id,
            s.state.as_str(),
            s.positions_done,
            s.positions_total,
            s.created_at.format("%Y-%m-%d %H:%M"),
            s.name
        );
    }
}

/// A derived suite from the coordinator: (EPD text, summary of the counts).
pub async fn derive(
    base: &str,
    id: i64,
    request: &DeriveRequest,
) -> anyhow::Result<(String, String)> {
    let resp = reqwest::Client::new()
        .get(url(base, &format!("/api/v1/sweeps/{id}/derive")))
        .query(&request.query_pairs())
        .send()
        .await
        .with_context(|| format!("contacting the coordinator at {base}"))?;
    let resp = check(resp).await?;
    let summary = resp
        .headers()
        .get(SUMMARY_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let text = resp.text().await.context("reading the derived suite")?;
    Ok((text, summary))
}
