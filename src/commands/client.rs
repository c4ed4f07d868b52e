//! HTTP client subcommands: submit, status, table, cancel, list, suite derive.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use serde_json::Value;
use sweep_domain::derive::{DeriveRequest, SUMMARY_HEADER};
use sweep_domain::wire::{SweepDetail, SweepSummary};

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

/// A coordinator's API as the CLI reaches it: its base URL and a client that trusts what
/// `--ca-cert` says (see `sweep_worker::trust`).
pub struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    /// The coordinator at `base`, trusting `ca_cert` (a PEM bundle) or the system's roots.
    pub fn new(base: &str, ca_cert: Option<&Path>) -> anyhow::Result<Self> {
        let http = sweep_worker::trust::client(ca_cert).map_err(|e| match ca_cert {
            // Name the flag: the file is the user's input.
            Some(_) => anyhow::anyhow!("--ca-cert: {e}"),
            None => anyhow::Error::new(e),
        })?;
        Ok(Self {
            base: base.trim_end_matches('/').to_string(),
            http,
        })
    }

    /// The coordinator that `--coordinator`/`--ca-cert` name.
    pub fn of(source: &crate::cli::Source) -> anyhow::Result<Self> {
        Self::new(&source.coordinator, source.ca_cert.as_deref())
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn contacting(&self) -> String {
        format!("contacting the coordinator at {}", self.base)
    }
}

/// Submits a TOML config; prints the id alone on stdout.
pub async fn submit(api: &Api, file: &Path) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let resp = api
        .http
        .post(api.url("/api/v1/sweeps"))
        .header("content-type", "application/toml")
        .body(text)
        .send()
        .await
        .with_context(|| api.contacting())?;
    let body: Value = check(resp).await?.json().await?;
    println!("{}", body["id"]);
    Ok(ExitCode::SUCCESS)
}

async fn get(api: &Api, path: &str) -> anyhow::Result<reqwest::Response> {
    let resp = api
        .http
        .get(api.url(path))
        .send()
        .await
        .with_context(|| api.contacting())?;
    check(resp).await
}

/// Prints a sweep's state and progress.
pub async fn status(api: &Api, id: i64, json: bool) -> anyhow::Result<ExitCode> {
    let text = get(api, &format!("/api/v1/sweeps/{id}"))
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
pub async fn table(api: &Api, id: i64, format: &str) -> anyhow::Result<ExitCode> {
    let text = get(api, &format!("/api/v1/sweeps/{id}/table?format={format}"))
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
pub async fn cancel(api: &Api, id: i64) -> anyhow::Result<ExitCode> {
    let resp = api
        .http
        .post(api.url(&format!("/api/v1/sweeps/{id}/cancel")))
        .send()
        .await
        .with_context(|| api.contacting())?;
    check(resp).await?;
    println!("cancelled {id}");
    Ok(ExitCode::SUCCESS)
}

/// Lists sweeps.
pub async fn list(api: &Api) -> anyhow::Result<ExitCode> {
    let body: Value = get(api, "/api/v1/sweeps").await?.json().await?;
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
    api: &Api,
    id: i64,
    request: &DeriveRequest,
) -> anyhow::Result<(String, String)> {
    let resp = api
        .http
        .get(api.url(&format!("/api/v1/sweeps/{id}/derive")))
        .query(&request.query_pairs())
        .send()
        .await
        .with_context(|| api.contacting())?;
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
