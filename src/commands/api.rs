//! The coordinator's HTTP API as the client subcommands call it: the base URL, credentials,
//! and each answer checked (a refusal becomes a sentence naming its field).

use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::Value;
use sweep_client::{bearer_headers, send, send_json, trust, ClientError};
use sweep_domain::wire::SweepDetail;

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
    if e.is_connect() && !trust::is_certificate_error(e) {
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
/// (if any) with every request and trusts what `--ca-cert` says (see `sweep_client::trust`).
pub struct Api {
    base: String,
    /// The HTTP client, for requests the helpers below do not cover.
    pub(super) http: reqwest::Client,
}

impl Api {
    /// The coordinator at `base`, sending the credentials' token as `Authorization: Bearer`
    /// and trusting their CA bundle (PEM) or the system's roots.
    pub fn new(base: &str, credentials: &Credentials) -> anyhow::Result<Self> {
        let ca_cert = credentials.ca_cert.as_deref();
        let headers =
            bearer_headers(credentials.token.as_deref()).context("--token (SWEEP_TOKEN)")?;
        let http = trust::client_builder(ca_cert)
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

    pub(super) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(super) async fn send(
        &self,
        req: reqwest::RequestBuilder,
    ) -> anyhow::Result<reqwest::Response> {
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

    /// `HEAD path`, answered whatever its status (the caller tells them apart); an error only
    /// when the coordinator could not be reached.
    pub(super) async fn head(&self, path: &str) -> anyhow::Result<reqwest::Response> {
        self.http.head(self.url(path)).send().await.map_err(|e| {
            let context = unreachable(&self.base, &e);
            anyhow::Error::new(e).context(context)
        })
    }

    /// `POST path` with `body` of `content_type`, the answer checked.
    pub(super) async fn post_bytes(
        &self,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> anyhow::Result<reqwest::Response> {
        let req = self
            .http
            .post(self.url(path))
            .header("content-type", content_type)
            .body(body);
        self.send(req).await
    }

    /// `DELETE path`, the answer checked.
    pub(super) async fn delete(&self, path: &str) -> anyhow::Result<reqwest::Response> {
        self.send(self.http.delete(self.url(path))).await
    }

    /// `POST path` with no body, the answer checked.
    pub(super) async fn post(&self, path: &str) -> anyhow::Result<reqwest::Response> {
        self.send(self.http.post(self.url(path))).await
    }

    /// One `GET /api/v1/sweeps/{id}`, its failure classified as the worker classifies its
    /// own calls (retry a 503/429 after its `Retry-After`, a lost connection after a backoff;
    /// never a 4xx or an untrusted certificate), for a caller that polls.
    pub async fn poll_detail(&self, id: i64) -> Result<SweepDetail, ClientError> {
        let (what, request) = self.poll(&format!("/api/v1/sweeps/{id}"));
        send_json(&what, request).await
    }

    /// A sweep's table as text in `format` (`md`, `csv` or `json`), failures classified as
    /// in [`Api::poll_detail`].
    pub async fn fetch_table(&self, id: i64, format: &str) -> Result<String, ClientError> {
        let (what, request) = self.poll(&format!("/api/v1/sweeps/{id}/table?format={format}"));
        let bytes = send(&what, request).await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A GET of `path` for a caller that polls, and its name in messages (the full URL, so a
    /// failure says which coordinator it was).
    fn poll(&self, path: &str) -> (String, reqwest::RequestBuilder) {
        let url = self.url(path);
        let request = self.http.get(&url).timeout(POLL_TIMEOUT);
        (format!("GET {url}"), request)
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
