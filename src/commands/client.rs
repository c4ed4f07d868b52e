//! HTTP client subcommands: submit, status, table, cancel, list, retry, audit, suite derive
//! (and what `--wait` needs: polling a sweep, fetching its table).

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::Value;
use sweep_coordinator::snapshot::{Snapshot, SnapshotRules};
use sweep_domain::auth::{AuditEntry, AuditLog, RetryAck};
use sweep_domain::derive::{DeriveRequest, SUMMARY_HEADER};
use sweep_domain::engine::EngineKind;
use sweep_domain::source::short;
use sweep_domain::spec::{SourceConfig, SweepConfig};
use sweep_domain::wire::{EngineList, Submitted, SweepDetail, SweepSummary};
use sweep_worker::client::{classify_response, ClientError};

use crate::cli::{Credentials, Remote, Source};

/// The coordinator's answer, or its error as a sentence: `STATUS: field: message` for a
/// refused input (a TOML syntax error, reported on the field `body`, reads as just its
/// message), where a 404 names the coordinator instead of its status, and a 401 says how to
/// get a token.
async fn check(resp: reqwest::Response, base: &str) -> anyhow::Result<reqwest::Response> {
    if resp.status().is_success() {
        return Ok(resp);
    }
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    let err = &body["error"];
    let field = err["field"]
        .as_str()
        .filter(|f| !f.is_empty() && *f != "body");
    match (status, field, err["message"].as_str()) {
        // "sweep 99 not found" says it all; say where it was looked for.
        (reqwest::StatusCode::NOT_FOUND, None, Some(m)) => {
            bail!("{m} on the coordinator at {base}")
        }
        (reqwest::StatusCode::UNAUTHORIZED, _, Some(m)) => {
            bail!("{status}: {m} (give a token with --token or SWEEP_TOKEN; `sweep token create` makes one)")
        }
        (_, Some(f), Some(m)) => bail!("{status}: {f}: {m}"),
        (_, None, Some(m)) => bail!("{status}: {m}"),
        _ => bail!("the coordinator at {base} answered {status}"),
    }
}

/// A coordinator URL as given (`--coordinator`, `SWEEP_COORDINATOR`), with `http://` in
/// front when it names no scheme (`127.0.0.1:8080`), and no trailing `/`.
pub fn base_url(given: &str) -> String {
    let given = given.trim().trim_end_matches('/');
    if given.contains("://") {
        given.to_string()
    } else {
        format!("http://{given}")
    }
}

/// The context of a request that got no answer: where it went and, when nothing listens
/// there, what to do about it.
fn unreachable(base: &str, e: &reqwest::Error) -> String {
    if e.is_connect() && !sweep_worker::trust::is_certificate_error(e) {
        format!(
            "contacting the coordinator at {base}: nothing answers there. Start one with \
             `sweep coordinator`, point --coordinator (or SWEEP_COORDINATOR) at yours, or read \
             a local run's database with --database ./sweep.db"
        )
    } else {
        format!("contacting the coordinator at {base}")
    }
}

/// A coordinator's API as the CLI reaches it: its base URL and a client that sends the token
/// (if any) with every request and trusts what `--ca-cert` says (see `sweep_worker::trust`).
pub struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    /// The coordinator at `base`, sending the credentials' token as `Authorization: Bearer`
    /// and trusting their CA bundle (PEM) or the system's roots.
    pub fn new(base: &str, credentials: &Credentials) -> anyhow::Result<Self> {
        let ca_cert = credentials.ca_cert.as_deref();
        let mut headers = reqwest::header::HeaderMap::new();
        // An empty SWEEP_TOKEN means none.
        if let Some(token) = credentials.token.as_deref().filter(|t| !t.is_empty()) {
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                .context("--token (SWEEP_TOKEN) holds characters a header cannot carry")?;
            // Kept out of debug output and logs.
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        let http = sweep_worker::trust::client_builder(ca_cert)
            .map_err(|e| match ca_cert {
                // Name the flag: the file is the user's input.
                Some(_) => anyhow::Error::new(e).context("--ca-cert"),
                None => anyhow::Error::new(e),
            })?
            .default_headers(headers)
            .build()
            .context("building the HTTP client")?;
        let base = base_url(base);
        reqwest::Url::parse(&base)
            .with_context(|| format!("--coordinator `{base}` is not a URL"))?;
        Ok(Self { base, http })
    }

    /// The coordinator that `--coordinator` (or `SWEEP_COORDINATOR`), `--token` and
    /// `--ca-cert` name.
    pub fn of(source: &Source) -> anyhow::Result<Self> {
        Self::new(&source.coordinator_url(), &source.credentials)
    }

    /// The coordinator of a command that always talks to one.
    pub fn remote(remote: &Remote) -> anyhow::Result<Self> {
        Self::new(&remote.coordinator, &remote.credentials)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> anyhow::Result<reqwest::Response> {
        let resp = req.send().await.map_err(|e| {
            let context = unreachable(&self.base, &e);
            anyhow::Error::new(e).context(context)
        })?;
        check(resp, &self.base).await
    }

    pub(super) async fn get(&self, path: &str) -> anyhow::Result<reqwest::Response> {
        self.send(self.http.get(self.url(path))).await
    }

    /// PUTs a TOML document.
    pub(super) async fn put_toml(
        &self,
        path: &str,
        body: String,
    ) -> anyhow::Result<reqwest::Response> {
        let req = self
            .http
            .put(self.url(path))
            .header("content-type", "application/toml")
            .body(body);
        self.send(req).await
    }

    async fn post(&self, path: &str) -> anyhow::Result<reqwest::Response> {
        self.send(self.http.post(self.url(path))).await
    }

    /// One `GET /api/v1/sweeps/{id}`, its failure classified as the worker classifies its
    /// own calls (retry a 503/429 after its `Retry-After`, a lost connection after a backoff;
    /// never a 4xx or an untrusted certificate), for a caller that polls.
    pub async fn poll_detail(&self, id: i64) -> Result<SweepDetail, ClientError> {
        let path = format!("/api/v1/sweeps/{id}");
        let bytes = self.get_classified(&path).await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Fatal {
            status: 200,
            code: "bad_response".to_string(),
            message: format!("GET {path}: unexpected response body: {e}"),
        })
    }

    /// A sweep's table as text in `format` (`md`, `csv` or `json`), failures classified as
    /// in [`Api::poll_detail`].
    pub async fn fetch_table(&self, id: i64, format: &str) -> Result<String, ClientError> {
        let bytes = self
            .get_classified(&format!("/api/v1/sweeps/{id}/table?format={format}"))
            .await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// One GET of `path`: the body of a success, or the failure classified.
    async fn get_classified(&self, path: &str) -> Result<Vec<u8>, ClientError> {
        let resp = self
            .http
            .get(self.url(path))
            .timeout(POLL_TIMEOUT)
            .send()
            .await
            .map_err(|e| transport_error(&self.base, e))?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| transport_error(&self.base, e))?;
        if !status.is_success() {
            return Err(classify_response(status.as_u16(), &headers, &bytes));
        }
        Ok(bytes.to_vec())
    }

    /// A sweep's table as text in `format` (`md`, `csv` or `json`).
    pub async fn table_text(&self, id: i64, format: &str) -> anyhow::Result<String> {
        let text = self
            .get(&format!("/api/v1/sweeps/{id}/table?format={format}"))
            .await?
            .text()
            .await
            .context("reading the table")?;
        Ok(text)
    }
}

/// How long one poll may take: the client has no overall timeout (a submit may carry a large
/// config), but a poll that hangs must not stop a wait from noticing anything.
const POLL_TIMEOUT: Duration = Duration::from_secs(30);

/// A request that got no HTTP answer, classified: an untrusted certificate is never retried
/// (it may be an impostor); anything else (refused, reset, timed out) may heal.
fn transport_error(base: &str, e: reqwest::Error) -> ClientError {
    let message = format!("contacting the coordinator at {base}: {e}");
    if sweep_worker::trust::is_certificate_error(&e) {
        ClientError::Untrusted(message)
    } else if e.is_builder() {
        ClientError::Fatal {
            status: 0,
            code: "bad_request".to_string(),
            message,
        }
    } else {
        ClientError::Retryable(message)
    }
}

/// Submits a TOML config. With `source_dir`, that directory is snapshotted, uploaded unless
/// the coordinator has it, and named in `[source] sha256`. Without `wait`, prints the id alone
/// on stdout (and, on stderr, that it is an identical sweep already running, when it is).
/// With `wait` (a table format), says the id on stderr, follows the sweep to its end and
/// prints its table (see [`super::wait`]).
pub async fn submit(
    api: &Api,
    file: &Path,
    source_dir: Option<&Path>,
    force: bool,
    wait: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let (body, content_type) = match source_dir {
        // The text as it is, so the coordinator's errors name its lines.
        None if !force => (text.into_bytes(), "application/toml"),
        None => {
            let mut config =
                SweepConfig::from_toml(&text).with_context(|| file.display().to_string())?;
            config.recompute = true;
            as_json(&config)?
        }
        Some(dir) => {
            let mut config = with_source(api, file, &text, dir).await?;
            config.recompute |= force;
            as_json(&config)?
        }
    };
    let req = api
        .http
        .post(api.url("/api/v1/sweeps"))
        .header("content-type", content_type)
        .body(body);
    let submitted: Submitted = api
        .send(req)
        .await?
        .json()
        .await
        .context("decoding the coordinator's answer")?;
    announce(&submitted, wait.is_some());
    match wait {
        Some(format) => super::wait::follow(api, submitted.id, format).await,
        None => Ok(ExitCode::SUCCESS),
    }
}

/// Says what a submission did: its id on stdout (on stderr when `waiting`: stdout is then the
/// table at the end), and on stderr the results reused and an identical sweep still running.
fn announce(submitted: &Submitted, waiting: bool) {
    let id = submitted.id;
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

/// The config of `file` (its `text`) on the source in `dir`: snapshotted by the rules the
/// coordinator's engine definition gives, uploaded unless the coordinator has it, and named
/// in `[source] sha256`.
async fn with_source(
    api: &Api,
    file: &Path,
    text: &str,
    dir: &Path,
) -> anyhow::Result<SweepConfig> {
    let mut config = super::source::config_for_source(file, text)?;
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
            "--source: engine `{}` is binary-only; there is no source to replace",
            info.name
        );
    }
    let rules = SnapshotRules {
        exclude: info.exclude.clone(),
        include_dotfiles: info.include_dotfiles,
        gitignore: true,
    };
    let snap = super::source::snapshot(dir, rules).await?;
    upload_source(api, &snap).await?;
    config.source = Some(SourceConfig {
        sha256: Some(snap.sha256),
        ..SourceConfig::default()
    });
    Ok(config)
}

/// Uploads a snapshot unless the coordinator has it (`HEAD` first, then `PUT`).
async fn upload_source(api: &Api, snap: &Snapshot) -> anyhow::Result<()> {
    let path = format!("/api/v1/sources/{}", snap.sha256);
    let head = api.http.head(api.url(&path)).send().await.map_err(|e| {
        let context = unreachable(&api.base, &e);
        anyhow::Error::new(e).context(context)
    })?;
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

/// Prints a sweep's state, progress, build failures, workers and errors.
pub fn print_detail(d: &SweepDetail) {
    println!(
        "sweep {} `{}` ({}) by {}: {}  {}/{} positions",
        d.summary.id,
        d.summary.name,
        d.summary.engine,
        // Sweeps stored before tokens existed have no submitter.
        d.summary.submitter.as_deref().unwrap_or("-"),
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
    for line in d.cross_checks.lines() {
        println!("  {line}");
    }
}

/// Prints a sweep's table.
pub async fn table(api: &Api, id: i64, format: &str) -> anyhow::Result<ExitCode> {
    print_table(&api.table_text(id, format).await?);
    Ok(ExitCode::SUCCESS)
}

/// Prints a table's text on stdout, ending in a newline.
pub fn print_table(text: &str) {
    print!("{text}");
    if !text.ends_with('\n') {
        println!();
    }
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

/// Prints one line per audit log entry.
pub fn print_audit(entries: &[AuditEntry]) {
    for e in entries {
        println!(
            "{:>6}  {}  {:<20} {:<10} {:<13} {:<16} {}",
            e.id,
            e.at.format("%Y-%m-%d %H:%M:%S"),
            e.actor,
            e.role,
            e.action,
            e.target,
            e.detail
        );
    }
}

/// `s` percent-encoded for one path segment (build names hold `=`, maybe `/`).
pub(super) fn url_segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'=' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Lists sweeps.
pub async fn list(api: &Api) -> anyhow::Result<ExitCode> {
    let body: Value = api.get("/api/v1/sweeps").await?.json().await?;
    let sweeps: Vec<SweepSummary> = serde_json::from_value(body["sweeps"].clone())?;
    print_list(&sweeps);
    Ok(ExitCode::SUCCESS)
}

/// Prints one line per sweep.
pub fn print_list(sweeps: &[SweepSummary]) {
    for s in sweeps {
        println!(
            "{:>5}  {:<10} {:>8}/{:<8} {}  {:<16} {}",
            s.id,
            s.state.as_str(),
            s.positions_done,
            s.positions_total,
            s.created_at.format("%Y-%m-%d %H:%M"),
            s.submitter.as_deref().unwrap_or("-"),
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
