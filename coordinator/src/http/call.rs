//! What every handler shares, so each states only what differs: who may call ([`Call`]),
//! which sweep its path names ([`SweepId`]), its query ([`ApiQuery`]) and its answer
//! ([`Answer`]).
//!
//! Axum extracts a handler's arguments in order, so a handler that takes its [`Call`] first
//! answers 401 or 403 before anything the caller sent (path, query, body) is read: who may
//! call is decided before what they asked.

use std::collections::HashMap;
use std::marker::PhantomData;

use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::Json;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::error::ApiError;
use super::parse_id;
use crate::service::{Caller, Need, Service};

/// A handler's answer: JSON, or an error mapped to its status in `http/error.rs`.
pub(super) type Answer<T> = Result<Json<T>, ApiError>;

/// What a call needs of its caller, as a type, so a handler names it in its signature.
pub(super) trait Needs {
    /// The need the service checks.
    const NEED: Need;
}

/// The needs a handler names ([`Call`]`<need::Read>`), one per [`Need`].
pub(super) mod need {
    use super::{Need, Needs};

    macro_rules! needs {
        ($($(#[$doc:meta])* $name:ident;)*) => {$(
            $(#[$doc])*
            pub(in crate::http) struct $name;
            impl Needs for $name {
                const NEED: Need = Need::$name;
            }
        )*};
    }

    needs! {
        /// Read sweeps, tables, positions and workers.
        Read;
        /// Read the engine and suite catalog.
        Catalog;
        /// Submit or cancel sweeps, upload sources.
        Submit;
        /// Retry builds, read the audit log, add engines.
        Admin;
        /// Speak the worker protocol.
        Worker;
        /// Download or look up source snapshots.
        Source;
        /// Scrape `/metrics`.
        Metrics;
    }
}

/// A call from a caller that may make it: authenticated (its `Authorization` header, see
/// `caller.rs`) and authorized for `N`, with the service that answers it. The use case checks
/// again (the same pure check); this is what makes the check come first.
pub(super) struct Call<N> {
    /// The service.
    pub svc: Service,
    /// Who is calling.
    pub caller: Caller,
    need: PhantomData<N>,
}

impl<N: Needs> FromRequestParts<Service> for Call<N> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, svc: &Service) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, svc).await?;
        svc.authorize(&caller, N::NEED)?;
        Ok(Call {
            svc: svc.clone(),
            caller,
            need: PhantomData,
        })
    }
}

/// The sweep the path's `{id}` names; a malformed id is a sweep not found (404).
pub(super) struct SweepId(pub i64);

impl<S: Send + Sync> FromRequestParts<S> for SweepId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(params) = Path::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::BadRequest(e.body_text()))?;
        let raw = params.get("id").map(String::as_str).unwrap_or_default();
        Ok(SweepId(parse_id(raw, "sweep")?))
    }
}

/// A query string parsed into `T`; one that does not parse is answered 400 as JSON (axum's own
/// rejection is plain text).
pub(super) struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(q) = Query::<T>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::BadRequest(e.body_text()))?;
        Ok(ApiQuery(q))
    }
}

/// `?limit=N` of a list: `u32` where axum's parse answers a bad value (400), `String` where
/// the handler names the field itself (422).
#[derive(Deserialize)]
pub(super) struct LimitQuery<T = u32> {
    /// Entries listed at most.
    pub limit: Option<T>,
}

/// 201 for a thing the call created, 200 for one that was there already.
pub(super) fn created_unless(existing: bool) -> StatusCode {
    if existing {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    }
}
