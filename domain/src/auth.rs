//! Who may do what: the roles a token carries, and the wire types of tokens and the audit log.
//!
//! The rules themselves (which role may call which use case) live in the coordinator's
//! service, next to the use cases; this module holds only the vocabulary both sides share.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everything: any sweep's cancel, build retries, the audit log.
    Admin,
    /// Submits sweeps, cancels its own, reads everything, fetches sources.
    Submitter,
    /// Registers workers and speaks the worker protocol for the workers it registered.
    Worker,
    /// Reads sweeps, tables, engines and suites.
    Reader,
}

impl Role {
    /// Every role, in the order help texts list them.
    pub const ALL: [Role; 4] = [Role::Admin, Role::Submitter, Role::Worker, Role::Reader];

    /// The role's name as stored and typed (`admin`, `submitter`, `worker`, `reader`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Submitter => "submitter",
            Role::Worker => "worker",
            Role::Reader => "reader",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown role `{s}` (roles: admin, submitter, worker, reader)"))
    }
}

/// Longest token name.
pub const MAX_TOKEN_NAME: usize = 100;

/// Checks a token name: 1 to [`MAX_TOKEN_NAME`] characters of letters, digits, `-`, `_`, `.`
/// and `@` (it shows up in logs, the audit log and sweep lists).
pub fn check_token_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_TOKEN_NAME {
        return Err(format!("must be 1 to {MAX_TOKEN_NAME} characters"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@')))
    {
        return Err(format!(
            "`{c}` is not allowed (letters, digits, `-`, `_`, `.` and `@` are)"
        ));
    }
    Ok(())
}

/// A token as listed (never its secret, which is stored only hashed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    /// Id.
    pub id: i64,
    /// Name, unique among tokens not revoked.
    pub name: String,
    /// Role.
    pub role: Role,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// When it was revoked; a revoked token is refused.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// One entry of the audit log: who did what to what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuditEntry {
    /// Id (entries are numbered in the order they were written).
    pub id: i64,
    /// When.
    pub at: DateTime<Utc>,
    /// The token's name, or `local` for a command run against the database directly.
    pub actor: String,
    /// The actor's role.
    pub role: String,
    /// What was done: `submit`, `cancel`, `retry_build`, `token_create`, `token_revoke`.
    pub action: String,
    /// What it was done to (`sweep 12`, `token ci-workers`).
    pub target: String,
    /// More about it (a sweep's name, a build's name, a token's role).
    pub detail: String,
}

/// The audit log as the API serves it, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuditLog {
    /// Entries, newest first.
    pub entries: Vec<AuditEntry>,
}

/// The answer to a build retry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RetryAck {
    /// Sweep.
    pub id: i64,
    /// Build retried.
    pub build: String,
    /// Jobs queued again.
    pub jobs: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip_and_unknown_ones_are_named() {
        for role in Role::ALL {
            assert_eq!(role.as_str().parse::<Role>(), Ok(role));
        }
        let err = "root".parse::<Role>().unwrap_err();
        assert!(err.contains("`root`") && err.contains("submitter"), "{err}");
    }

    #[test]
    fn token_names_are_bounded() {
        assert!(check_token_name("ci-workers.lab@host_1").is_ok());
        assert!(check_token_name("").is_err());
        assert!(check_token_name(&"a".repeat(MAX_TOKEN_NAME + 1)).is_err());
        assert!(check_token_name("two words").unwrap_err().contains("` `"));
        assert!(check_token_name("nul\0").is_err());
    }
}
