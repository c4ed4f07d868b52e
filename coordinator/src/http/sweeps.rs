//! Public sweep routes: submit, list, details, tables, positions, derived suites, cancel.

use std::str::FromStr;

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use sweep_domain::auth::{AuditLog, RetryAck};
use sweep_domain::bounds::{check_text, Lines, MAX_QUERY_VALUE};
use sweep_domain::derive::{DeriveRequest, SUMMARY_HEADER};
use sweep_domain::spec::SweepConfig;
use sweep_domain::table::render::{render, Format};
use sweep_domain::table::{PositionsReport, PositionsView};
use sweep_domain::wire::{
    CancelAck, EngineList, Submitted, SuiteList, SweepDetail, SweepList, SweepState,
};
use sweep_domain::FieldError;

use super::error::ApiError;
use super::parse_id;
use crate::service::{Caller, Service, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};

pub(super) async fn submit(
    State(svc): State<Service>,
    caller: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Submitted>), ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let is_toml = content_type.contains("toml")
        || (!content_type.contains("json") && !body.trim_ascii_start().starts_with(b"{"));
    let config = if is_toml {
        let text = std::str::from_utf8(&body).map_err(|e| {
            ApiError::Invalid(FieldError::new("", format!("body is not UTF-8: {e}")))
        })?;
        SweepConfig::from_toml(text)?
    } else {
        SweepConfig::from_json(&body)?
    };
    let submitted = svc.submit(&caller, config).await?;
    // 200 with `existing` for the identical sweep already running: nothing was created.
    let status = if submitted.existing {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(submitted)))
}

#[derive(Deserialize)]
pub(super) struct ListQuery {
    limit: Option<u32>,
}

pub(super) async fn list(
    State(svc): State<Service>,
    caller: Caller,
    Query(q): Query<ListQuery>,
) -> Result<Json<SweepList>, ApiError> {
    let sweeps = svc.list(&caller, q.limit.unwrap_or(100)).await?;
    Ok(Json(SweepList { sweeps }))
}

pub(super) async fn detail(
    State(svc): State<Service>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<SweepDetail>, ApiError> {
    let id = parse_id(&id, "sweep")?;
    Ok(Json(svc.detail(&caller, id).await?))
}

#[derive(Deserialize)]
pub(super) struct TableQuery {
    format: Option<String>,
}

pub(super) async fn table(
    State(svc): State<Service>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<TableQuery>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id, "sweep")?;
    let format = Format::from_str(q.format.as_deref().unwrap_or("json"))
        .map_err(|e| FieldError::new("format", e))?;
    let table = svc.table(&caller, id).await?;
    let content_type = match format {
        Format::Json => return Ok(Json(table).into_response()),
        Format::Csv => "text/csv; charset=utf-8",
        Format::Markdown => "text/markdown; charset=utf-8",
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

pub(super) async fn positions(
    State(svc): State<Service>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<PositionsQuery>,
) -> Result<Json<PositionsReport>, ApiError> {
    let id = parse_id(&id, "sweep")?;
    for (field, value) in [("build", &q.build), ("limit", &q.limit), ("view", &q.view)] {
        if let Some(v) = value {
            check_text(field, v, MAX_QUERY_VALUE, Lines::One)?;
        }
    }
    let limit = q
        .limit
        .as_deref()
        .map(str::parse)
        .transpose()
        .map_err(|e: String| FieldError::new("limit", e))?;
    let number = |raw: &Option<String>, field: &str, default: usize, max: usize| {
        let Some(raw) = raw else { return Ok(default) };
        raw.parse::<usize>()
            .ok()
            .filter(|n| *n <= max)
            .ok_or_else(|| FieldError::new(field, format!("must be a number from 0 to {max}")))
    };
    let view = q
        .view
        .as_deref()
        .map(PositionsView::from_str)
        .transpose()
        .map_err(|e| FieldError::new("view", e))?
        .unwrap_or_default();
    let offset = number(&q.offset, "offset", 0, usize::MAX)?;
    let page_size = number(&q.page_size, "page_size", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)?;
    if page_size == 0 {
        return Err(FieldError::new("page_size", format!("must be 1 to {MAX_PAGE_SIZE}")).into());
    }
    Ok(Json(
        svc.positions(
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

pub(super) async fn derive(
    State(svc): State<Service>,
    caller: Caller,
    Path(id): Path<String>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id, "sweep")?;
    // axum's own rejection is plain text; the API answers JSON.
    let Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let request = DeriveRequest::from_query(query)?;
    let derived = svc.derive(&caller, id, &request).await?;
    let summary = HeaderValue::from_str(&derived.summary())
        .map_err(|e| anyhow::anyhow!("summary header: {e}"))?;
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

pub(super) async fn cancel(
    State(svc): State<Service>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<CancelAck>, ApiError> {
    let id = parse_id(&id, "sweep")?;
    svc.cancel(&caller, id).await?;
    Ok(Json(CancelAck {
        id,
        state: SweepState::Cancelled,
    }))
}

pub(super) async fn engines(
    State(svc): State<Service>,
    caller: Caller,
) -> Result<Json<EngineList>, ApiError> {
    Ok(Json(EngineList {
        engines: svc.engines(&caller)?,
    }))
}

pub(super) async fn suites(
    State(svc): State<Service>,
    caller: Caller,
) -> Result<Json<SuiteList>, ApiError> {
    Ok(Json(SuiteList {
        suites: svc.suites(&caller)?,
    }))
}

pub(super) async fn retry_build(
    State(svc): State<Service>,
    caller: Caller,
    Path((id, build)): Path<(String, String)>,
) -> Result<Json<RetryAck>, ApiError> {
    let id = parse_id(&id, "sweep")?;
    Ok(Json(svc.retry_build(&caller, id, &build).await?))
}

#[derive(Deserialize)]
pub(super) struct AuditQuery {
    limit: Option<u32>,
}

pub(super) async fn audit(
    State(svc): State<Service>,
    caller: Caller,
    Query(q): Query<AuditQuery>,
) -> Result<Json<AuditLog>, ApiError> {
    let entries = svc.audit_log(&caller, q.limit.unwrap_or(1000)).await?;
    Ok(Json(AuditLog { entries }))
}
