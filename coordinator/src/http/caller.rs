//! The caller of a request, from its `Authorization: Bearer` header: every handler that
//! needs one takes a [`Caller`] argument, and the service decides what it may do.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use super::error::ApiError;
use crate::service::{Caller, Service};

impl FromRequestParts<Service> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, svc: &Service) -> Result<Self, ApiError> {
        let bearer = match parts.headers.get(AUTHORIZATION) {
            None => None,
            Some(value) => Some(
                value
                    .to_str()
                    .ok()
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| {
                        ApiError::Unauthenticated(
                            "the Authorization header must be `Bearer TOKEN`".to_string(),
                        )
                    })?,
            ),
        };
        Ok(svc.authenticate(bearer).await?)
    }
}
