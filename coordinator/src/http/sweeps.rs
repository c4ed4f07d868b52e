//! Public sweep routes: submit, list, details, tables, positions, derived suites, cancel.

use std::str::FromStr;

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use sweep_domain::auth::{AuditLog, RetryAck};
use sweep_domain::bounds::{check_text, Lines, MAX_QUERY_VALUE};
use sweep_domain::derive::{DeriveRequest, SUMMARY_HEADER};
use sweep_domain::limit::Limit;
use sweep_domain::spec::SweepConfig;
use sweep_domain::table::render::{render, Format};
use sweep_domain::table::{PositionsReport, PositionsView, Table};
use sweep_domain::wire::{
    ApprovalAck, CancelAck, DeleteAck, EngineList, Estimate, Rejection, Submitted, SuiteList,
    SweepDetail, SweepList, SweepState,
};
use sweep_domain::FieldError;

use super::call::{created_unless, need, Answer, ApiQuery, Call, LimitQuery, SweepId};
use super::error::ApiError;
use super::openapi::{CatalogErrors, InputErrors, ListErrors, ReadErrors, WriteErrors};
use crate::service::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};

/// Submits a sweep.
///
/// The body is a sweep config, as TOML (`Content-Type` naming `toml`, or any body not
/// starting with `{`) or as JSON. 201 with the new sweep; 200 with `existing` when an
/// identical sweep (same engine, source and spec) is still queued or running.
#[utoipa::path(
    post, path = "/api/v1/sweeps", tag = "sweeps",
    request_body(
        description = "A sweep config (the schema of `configs/sweep.schema.json`).",
        content(
            (SweepConfig = "application/json"),
            (SweepConfig = "application/toml")
        )
    ),
    responses(
        (status = 201, description = "Submitted: a new sweep.", body = Submitted),
        (status = 200, description = "An identical sweep is already queued or running.",
            body = Submitted),
        WriteErrors
    ),
    security(("token" = ["admin", "submitter"]))
)]
pub(super) async fn submit(
    Call { svc, caller, .. }: Call<need::Submit>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Submitted>), ApiError> {
    let submitted = svc
        .submissions()
        .submit(&caller, sweep_config(&headers, &body)?)
        .await?;
    // 200 with `existing` for the identical sweep already running: nothing was created.
    Ok((created_unless(submitted.existing), Json(submitted)))
}

/// Estimates a sweep without submitting it.
///
/// The body is a sweep config, as for a submission. The answer says what submitting it now
/// would make (builds, jobs, cross-checks, searches, the results reuse would take) and what
/// the searches left would cost in engine-seconds, priced at the engine's earlier searches
/// of the same suite and limit (or which cells have none). Nothing is stored.
#[utoipa::path(
    post, path = "/api/v1/sweeps/estimate", tag = "sweeps",
    request_body(
        description = "A sweep config (the schema of `configs/sweep.schema.json`).",
        content(
            (SweepConfig = "application/json"),
            (SweepConfig = "application/toml")
        )
    ),
    responses(
        (status = 200, description = "What the sweep would make and cost.", body = Estimate),
        WriteErrors
    ),
    security(("token" = ["admin", "submitter"]))
)]
pub(super) async fn estimate(
    Call { svc, caller, .. }: Call<need::Submit>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Estimate>, ApiError> {
    let estimate = svc
        .submissions()
        .estimate(&caller, sweep_config(&headers, &body)?)
        .await?;
    Ok(Json(estimate))
}

/// The sweep config a submission's body holds: TOML when its `Content-Type` names `toml`, or
/// names no `json` and the body does not start with `{`; JSON otherwise.
fn sweep_config(headers: &HeaderMap, body: &[u8]) -> Result<SweepConfig, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let is_toml = content_type.contains("toml")
        || (!content_type.contains("json") && !body.trim_ascii_start().starts_with(b"{"));
    if !is_toml {
        return Ok(SweepConfig::from_json(body)?);
    }
    let text = std::str::from_utf8(body)
        .map_err(|e| FieldError::new("", format!("body is not UTF-8: {e}")))?;
    Ok(SweepConfig::from_toml(text)?)
}

/// Lists sweeps, newest first.
#[utoipa::path(
    get, path = "/api/v1/sweeps", tag = "sweeps",
    params(("limit" = Option<u32>, Query, description = "Most sweeps to list (default 100).")),
    responses((status = 200, description = "The sweeps.", body = SweepList), ListErrors),
    security(("token" = ["admin", "submitter", "reader"]))
)]
pub(super) async fn list(
    Call { svc, caller, .. }: Call<need::Read>,
    ApiQuery(q): ApiQuery<LimitQuery>,
) -> Answer<SweepList> {
    let sweeps = svc.reads().list(&caller, q.limit.unwrap_or(100)).await?;
    Ok(Json(SweepList { sweeps }))
}

/// Everything about one sweep: spec, source, builds, progress, workers, errors.
#[utoipa::path(
    get, path = "/api/v1/sweeps/{id}", tag = "sweeps",
    params(("id" = i64, Path, description = "Sweep id."),),
    responses((status = 200, description = "The sweep.", body = SweepDetail), ReadErrors),
    security(("token" = ["admin", "submitter", "reader"]))
)]
pub(super) async fn detail(
    Call { svc, caller, .. }: Call<need::Read>,
    SweepId(id): SweepId,
) -> Answer<SweepDetail> {
    Ok(Json(svc.reads().detail(&caller, id).await?))
}

#[derive(Deserialize)]
pub(super) struct TableQuery {
    format: Option<String>,
}

/// The delta tables of a sweep, as JSON, CSV or Markdown.
#[utoipa::path(
    get, path = "/api/v1/sweeps/{id}/table", tag = "sweeps",
    params(
        ("id" = i64, Path, description = "Sweep id."),
        ("format" = Option<String>, Query, pattern = "^(json|csv|md|markdown|review)$",
            description = "`json` (default), `csv`, `md` (also `markdown`) or `review` (Markdown with the paired statistics first)."),
    ),
    responses(
        (status = 200, description = "The tables, in the asked format.",
            content(
                (Table = "application/json"),
                (String = "text/csv"),
                (String = "text/markdown")
            )),
        InputErrors
    ),
    security(("token" = ["admin", "submitter", "reader"]))
)]
pub(super) async fn table(
    Call { svc, caller, .. }: Call<need::Read>,
    ApiQuery(q): ApiQuery<TableQuery>,
    SweepId(id): SweepId,
) -> Result<Response, ApiError> {
    let format = Format::from_str(q.format.as_deref().unwrap_or("json"))
        .map_err(|e| FieldError::new("format", e))?;
    let table = svc.reads().table(&caller, id).await?;
    let content_type = match format {
        Format::Json => return Ok(Json(table).into_response()),
        Format::Csv => "text/csv; charset=utf-8",
        Format::Markdown | Format::Review => "text/markdown; charset=utf-8",
    };
    Ok((
        [(header::CONTENT_TYPE, content_type)],
        render(&table, format),
    )
        .into_response())
}

#[derive(Deserialize)]
pub(super) struct PositionsQuery {
    build: Option<String>,
    /// `depth=8`, `nodes=100000` (or a bare depth).
    limit: Option<String>,
    /// First row of the page (default 0).
    offset: Option<String>,
    /// Rows per page (default and most: see [`DEFAULT_PAGE_SIZE`], [`MAX_PAGE_SIZE`]).
    page_size: Option<String>,
    /// `all` (default), `flips` (gained and lost) or `node_change` (largest first).
    view: Option<String>,
}

impl PositionsQuery {
    /// The rows asked for: the limit (default: every limit) and the view, once the free-text
    /// values are checked against their bound.
    fn selection(&self) -> Result<(Option<Limit>, PositionsView), FieldError> {
        for (field, value) in [
            ("build", &self.build),
            ("limit", &self.limit),
            ("view", &self.view),
        ] {
            if let Some(v) = value {
                check_text(field, v, MAX_QUERY_VALUE, Lines::One)?;
            }
        }
        let limit = self
            .limit
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(|e: String| FieldError::new("limit", e))?;
        let view = self
            .view
            .as_deref()
            .map(PositionsView::from_str)
            .transpose()
            .map_err(|e| FieldError::new("view", e))?
            .unwrap_or_default();
        Ok((limit, view))
    }

    /// The page asked for: its first row and its size (1 to [`MAX_PAGE_SIZE`]).
    fn page(&self) -> Result<(usize, usize), FieldError> {
        let number = |raw: &Option<String>, field: &str, default: usize, max: usize| {
            let Some(raw) = raw else { return Ok(default) };
            raw.parse::<usize>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| FieldError::new(field, format!("must be a number from 0 to {max}")))
        };
        let offset = number(&self.offset, "offset", 0, usize::MAX)?;
        let page_size = number(
            &self.page_size,
            "page_size",
            DEFAULT_PAGE_SIZE,
            MAX_PAGE_SIZE,
        )?;
        if page_size == 0 {
            return Err(FieldError::new(
                "page_size",
                format!("must be 1 to {MAX_PAGE_SIZE}"),
            ));
        }
        Ok((offset, page_size))
    }
}

/// Positions gained and lost by a build against the baseline, a page at a time.
#[utoipa::path(
    get, path = "/api/v1/sweeps/{id}/positions", tag = "sweeps",
    params(
        ("id" = i64, Path, description = "Sweep id."),
        ("build" = Option<String>, Query, description = "Only this build (default: every variant)."),
        ("limit" = Option<String>, Query, description = "Only this search limit: `depth=8`, \
            `nodes=100000` or a bare depth (default: every limit)."),
        ("view" = Option<String>, Query, description = "`all` (default: every position, in \
            suite order), `flips` (gained and lost only) or `node_change` (positions whose node \
            counts differ, largest change first)."),
        ("offset" = Option<u64>, Query, description = "First row of the page (default 0)."),
        ("page_size" = Option<u32>, Query, minimum = 1,
            description = "Rows per page (default and most: the coordinator's page size)."),
    ),
    responses(
        (status = 200, description = "A page of positions.", body = PositionsReport),
        InputErrors
    ),
    security(("token" = ["admin", "submitter", "reader"]))
)]
pub(super) async fn positions(
    Call { svc, caller, .. }: Call<need::Read>,
    ApiQuery(q): ApiQuery<PositionsQuery>,
    SweepId(id): SweepId,
) -> Answer<PositionsReport> {
    let (limit, view) = q.selection()?;
    let (offset, page_size) = q.page()?;
    Ok(Json(
        svc.reads()
            .positions(
                &caller,
                id,
                q.build.as_deref(),
                limit,
                view,
                offset,
                page_size,
            )
            .await?,
    ))
}

/// Derives a sub-suite from a sweep's results: an EPD file of the positions a build's
/// results select.
#[utoipa::path(
    get, path = "/api/v1/sweeps/{id}/derive", tag = "sweeps",
    params(
        ("id" = i64, Path, description = "Sweep id."),
        ("build" = String, Query, description = "The build whose results select the positions."),
        ("suite" = String, Query, description = "The suite of the sweep to derive from."),
        ("filter" = String, Query, pattern = "^(solved|unsolved|any)$",
            description = "`solved`, `unsolved` or `any`."),
        ("first" = Option<u32>, Query, description = "Keep the first N in suite order."),
        ("random" = Option<u32>, Query, description = "Keep N at random (needs `seed`)."),
        ("seed" = Option<u64>, Query, description = "Seed of the random pick."),
        ("min_nodes" = Option<u64>, Query,
            description = "Keep positions searched with at least this many nodes."),
        ("max_nodes" = Option<u64>, Query,
            description = "Keep positions searched with at most this many nodes."),
        ("partial" = Option<bool>, Query,
            description = "Accept a sweep that has not finished."),
        ("limit" = Option<String>, Query,
            description = "The search limit whose results select (default: the sweep's first)."),
    ),
    responses(
        (status = 200, description = "The derived suite (EPD).", content_type = "text/plain",
            body = String,
            headers(("x-sweep-derive-summary" = String,
                description = "The counts, as the file's last header comment says them."))),
        InputErrors
    ),
    security(("token" = ["admin", "submitter", "reader"]))
)]
pub(super) async fn derive(
    Call { svc, caller, .. }: Call<need::Read>,
    SweepId(id): SweepId,
    ApiQuery(query): ApiQuery<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let request = DeriveRequest::from_query(query)?;
    let derived = svc.reads().derive(&caller, id, &request).await?;
    let summary = HeaderValue::from_str(&derived.summary()).context("summary header")?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            ),
            (HeaderName::from_static(SUMMARY_HEADER), summary),
        ],
        derived.text,
    )
        .into_response())
}

/// Cancels a sweep: submitters their own, admins any; a finished sweep cannot be (422).
#[utoipa::path(
    post, path = "/api/v1/sweeps/{id}/cancel", tag = "sweeps",
    params(("id" = i64, Path, description = "Sweep id."),),
    responses((status = 200, description = "Cancelled.", body = CancelAck), WriteErrors),
    security(("token" = ["admin", "submitter"]))
)]
pub(super) async fn cancel(
    Call { svc, caller, .. }: Call<need::Submit>,
    SweepId(id): SweepId,
) -> Answer<CancelAck> {
    svc.submissions().cancel(&caller, id).await?;
    Ok(Json(CancelAck {
        id,
        state: SweepState::Cancelled,
    }))
}

/// Deletes a sweep whole: submitters their own, admins any; a queued or running sweep is
/// cancelled first. Audited.
#[utoipa::path(
    delete, path = "/api/v1/sweeps/{id}", tag = "sweeps",
    params(("id" = i64, Path, description = "Sweep id."),),
    responses((status = 200, description = "Deleted.", body = DeleteAck), WriteErrors),
    security(("token" = ["admin", "submitter"]))
)]
pub(super) async fn delete(
    Call { svc, caller, .. }: Call<need::Submit>,
    SweepId(id): SweepId,
) -> Answer<DeleteAck> {
    Ok(Json(svc.submissions().delete(&caller, id).await?))
}

/// The registered engines with their knobs.
#[utoipa::path(
    get, path = "/api/v1/engines", tag = "catalog",
    responses(
        (status = 200, description = "The engines, by name.", body = EngineList),
        CatalogErrors
    ),
    security(("token" = ["admin", "submitter", "reader", "worker"]))
)]
pub(super) async fn engines(Call { svc, caller, .. }: Call<need::Catalog>) -> Answer<EngineList> {
    let engines = svc.reads().engines(&caller)?;
    Ok(Json(EngineList { engines }))
}

/// The loaded suites.
#[utoipa::path(
    get, path = "/api/v1/suites", tag = "catalog",
    responses(
        (status = 200, description = "The suites, by name.", body = SuiteList),
        CatalogErrors
    ),
    security(("token" = ["admin", "submitter", "reader", "worker"]))
)]
pub(super) async fn suites(Call { svc, caller, .. }: Call<need::Catalog>) -> Answer<SuiteList> {
    let suites = svc.reads().suites(&caller)?;
    Ok(Json(SuiteList { suites }))
}

/// Queues a failed build's jobs again (after fixing a worker's compiler, say).
#[utoipa::path(
    post, path = "/api/v1/sweeps/{id}/builds/{build}/retry", tag = "admin",
    params(
        ("id" = i64, Path, description = "Sweep id."),
        ("build" = String, Path, description = "Build name."),
    ),
    responses((status = 200, description = "Queued again.", body = RetryAck), WriteErrors),
    security(("token" = ["admin"]))
)]
pub(super) async fn retry_build(
    Call { svc, caller, .. }: Call<need::Admin>,
    SweepId(id): SweepId,
    Path((_, build)): Path<(String, String)>,
) -> Answer<RetryAck> {
    Ok(Json(svc.admin().retry_build(&caller, id, &build).await?))
}

/// Lets a sweep held for approval run (see `--approve-over-engine-hours`); 422 when it is
/// not waiting for approval.
#[utoipa::path(
    post, path = "/api/v1/sweeps/{id}/approve", tag = "admin",
    params(("id" = i64, Path, description = "Sweep id."),),
    responses((status = 200, description = "Approved: it is queued.", body = ApprovalAck),
        WriteErrors),
    security(("token" = ["admin"]))
)]
pub(super) async fn approve(
    Call { svc, caller, .. }: Call<need::Admin>,
    SweepId(id): SweepId,
) -> Answer<ApprovalAck> {
    Ok(Json(svc.admin().approve(&caller, id).await?))
}

/// Rejects a sweep held for approval, saying why (its submitter sees it); 422 when it is not
/// waiting for approval.
#[utoipa::path(
    post, path = "/api/v1/sweeps/{id}/reject", tag = "admin",
    params(("id" = i64, Path, description = "Sweep id."),),
    request_body = Rejection,
    responses((status = 200, description = "Rejected.", body = ApprovalAck), WriteErrors),
    security(("token" = ["admin"]))
)]
pub(super) async fn reject(
    Call { svc, caller, .. }: Call<need::Admin>,
    SweepId(id): SweepId,
    body: Bytes,
) -> Answer<ApprovalAck> {
    let rejection: Rejection = super::json_body(&body)?;
    Ok(Json(svc.admin().reject(&caller, id, &rejection.why).await?))
}

/// The audit log, newest first: submits, cancels, retries, token changes, engines added.
#[utoipa::path(
    get, path = "/api/v1/audit", tag = "admin",
    params(("limit" = Option<u32>, Query, description = "Most entries (default 1000).")),
    responses((status = 200, description = "The entries.", body = AuditLog), ListErrors),
    security(("token" = ["admin"]))
)]
pub(super) async fn audit(
    Call { svc, caller, .. }: Call<need::Admin>,
    ApiQuery(q): ApiQuery<LimitQuery>,
) -> Answer<AuditLog> {
    let entries = svc
        .admin()
        .audit_log(&caller, q.limit.unwrap_or(1000))
        .await?;
    Ok(Json(AuditLog { entries }))
}
