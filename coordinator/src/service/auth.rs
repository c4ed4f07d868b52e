//! Who is calling, and what they may do: tokens, roles, worker ownership and write rate limits.
//!
//! Every use case starts with one of the checks here, so the rules live in one file:
//!
//! | need | admin | submitter | reader | worker | anonymous |
//! |---|---|---|---|---|---|
//! | read sweeps and tables | yes | yes | yes | no | only with `--public-read` |
//! | read engines and suites | yes | yes | yes | yes | only with `--public-read` |
//! | metrics (`/metrics`) | yes | yes | yes | no | only with `--public-read` |
//! | submit | yes | yes | no | no | no |
//! | cancel | any sweep | its own | no | no | no |
//! | retry a build, audit log, tokens, add engines | yes | no | no | no | no |
//! | sources | yes | yes | no | yes | no |
//! | worker protocol | no | no | no | the workers it registered | no |
//! | health, dashboard page, OpenAPI document | yes | yes | yes | yes | yes |
//!
//! The last row needs no check here: those routes never ask for a [`Caller`]. The OpenAPI
//! document (`crate::http::openapi`) lists each operation's roles in its security requirement.
//!
//! A token is 256 random bits; only its sha256 is stored. Lookups are cached for
//! [`TOKEN_TTL`], so a revoked token stops working within that time on every coordinator
//! (at once on the one that revoked it), and a flood of bad tokens costs one query each per
//! TTL, not one per request.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::RngCore;
use sha2::{Digest, Sha256};
use sweep_domain::auth::Role;

use super::ServiceError;
use crate::store::{Owner, Store, StoredToken};

/// How long a token lookup is trusted.
pub const TOKEN_TTL: Duration = Duration::from_secs(5);
/// Writes (submit, cancel, retry, token changes) a token may make at once...
pub const WRITE_BURST: f64 = 30.0;
/// ...and per second after that.
pub const WRITES_PER_SEC: f64 = 2.0;
/// Prefix of every token, so a leaked one is easy to recognise (and to grep for).
pub const TOKEN_PREFIX: &str = "sweep_";
/// Entries a cache holds before it starts over.
const MAX_CACHED: usize = 100_000;

/// The authenticated holder of a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Token id (negative for a local run's in-memory token).
    pub token_id: i64,
    /// Token name.
    pub name: String,
    /// Role.
    pub role: Role,
}

/// Who is calling a use case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// No token.
    Anonymous,
    /// A valid token.
    Token(Principal),
    /// A command run on this machine against the database itself (`--database`,
    /// `sweep token`): whoever holds the database holds everything.
    Local,
}

/// What a use case needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Read sweeps, tables, positions.
    Read,
    /// Read the engine and suite catalog.
    Catalog,
    /// Submit or cancel (own) sweeps.
    Submit,
    /// Retry builds, read the audit log, manage tokens, add engines.
    Admin,
    /// Speak the worker protocol.
    Worker,
    /// Download source snapshots.
    Source,
    /// Scrape `/metrics` (a Prometheus scraper holds a reader token).
    Metrics,
}

impl Need {
    fn allows(self, role: Role) -> bool {
        use Role::*;
        match self {
            Need::Read => matches!(role, Admin | Submitter | Reader),
            Need::Catalog => true,
            Need::Submit => matches!(role, Admin | Submitter),
            Need::Admin => role == Admin,
            Need::Worker => role == Worker,
            Need::Source => matches!(role, Admin | Submitter | Worker),
            Need::Metrics => matches!(role, Admin | Submitter | Reader),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Need::Read => "reading sweeps needs a reader, submitter or admin token",
            Need::Catalog => "reading engines and suites needs a token",
            Need::Submit => "submitting and cancelling need a submitter or admin token",
            Need::Admin => "this needs an admin token",
            Need::Worker => "the worker protocol needs a worker token",
            Need::Source => "sources are served to worker, submitter and admin tokens",
            Need::Metrics => "metrics need a reader, submitter or admin token",
        }
    }
}

/// The authentication state a coordinator keeps: settings, caches, rate limits.
pub(crate) struct Auth {
    /// Anonymous callers may read sweeps, tables, engines and suites.
    pub public_read: bool,
    /// Token lookups by hash (`None`: no such live token), with when they were made.
    tokens: Mutex<HashMap<String, (Option<Principal>, Instant)>>,
    /// Tokens that live only in this process (a local run's), by hash.
    ephemeral: Mutex<HashMap<String, Principal>>,
    /// The token that registered each worker (never changes once registered).
    owners: Mutex<HashMap<i64, Option<i64>>>,
    /// Write budget per token id: (tokens left, last refill).
    budgets: Mutex<HashMap<i64, (f64, Instant)>>,
}

impl Auth {
    pub(crate) fn new(public_read: bool) -> Self {
        Self {
            public_read,
            tokens: Mutex::default(),
            ephemeral: Mutex::default(),
            owners: Mutex::default(),
            budgets: Mutex::default(),
        }
    }

    /// The caller a bearer token (or its absence) makes.
    pub(crate) async fn authenticate(
        &self,
        store: &dyn Store,
        bearer: Option<&str>,
    ) -> Result<Caller, ServiceError> {
        let Some(secret) = bearer else {
            return Ok(Caller::Anonymous);
        };
        let hash = hash_token(secret);
        if let Some(p) = self.ephemeral.lock().expect("auth lock").get(&hash) {
            return Ok(Caller::Token(p.clone()));
        }
        let cached = self
            .tokens
            .lock()
            .expect("auth lock")
            .get(&hash)
            .filter(|(_, at)| at.elapsed() < TOKEN_TTL)
            .map(|(p, _)| p.clone());
        let principal = match cached {
            Some(p) => p,
            None => {
                let found =
                    store
                        .token_by_hash(&hash)
                        .await?
                        .map(|StoredToken { id, name, role }| Principal {
                            token_id: id,
                            name,
                            role,
                        });
                let mut cache = self.tokens.lock().expect("auth lock");
                if cache.len() >= MAX_CACHED {
                    cache.clear();
                }
                cache.insert(hash, (found.clone(), Instant::now()));
                found
            }
        };
        principal
            .map(Caller::Token)
            .ok_or_else(|| ServiceError::Unauthenticated("unknown or revoked token".to_string()))
    }

    /// Forgets cached lookups, so a revocation applies at once on this coordinator.
    pub(crate) fn forget_tokens(&self) {
        self.tokens.lock().expect("auth lock").clear();
    }

    /// Makes a token that lives only in this process.
    pub(crate) fn ephemeral_token(&self, role: Role, name: &str) -> String {
        let secret = new_secret();
        let principal = Principal {
            // Negative, so it can never equal a stored token's id.
            token_id: -(1 + (rand::random::<u32>() as i64)),
            name: name.to_string(),
            role,
        };
        self.ephemeral
            .lock()
            .expect("auth lock")
            .insert(hash_token(&secret), principal);
        secret
    }

    /// Checks that `caller` may do what `need` says; the token holder, if any.
    pub(crate) fn require<'a>(
        &self,
        caller: &'a Caller,
        need: Need,
    ) -> Result<Option<&'a Principal>, ServiceError> {
        match caller {
            Caller::Local => Ok(None),
            Caller::Anonymous
                if self.public_read
                    && matches!(need, Need::Read | Need::Catalog | Need::Metrics) =>
            {
                Ok(None)
            }
            Caller::Anonymous => Err(ServiceError::Unauthenticated(format!(
                "{}: send `Authorization: Bearer TOKEN` (sweep ... --token, or SWEEP_TOKEN)",
                need.describe()
            ))),
            Caller::Token(p) if need.allows(p.role) => Ok(Some(p)),
            Caller::Token(p) => Err(ServiceError::Forbidden(format!(
                "{} (token `{}` is a {} token)",
                need.describe(),
                p.name,
                p.role
            ))),
        }
    }

    /// Takes one write from the caller's budget; [`ServiceError::RateLimited`] when empty.
    pub(crate) fn spend_write(&self, caller: &Caller) -> Result<(), ServiceError> {
        let Caller::Token(p) = caller else {
            return Ok(());
        };
        let mut budgets = self.budgets.lock().expect("auth lock");
        if budgets.len() >= MAX_CACHED {
            budgets.clear();
        }
        let now = Instant::now();
        let (left, at) = budgets.entry(p.token_id).or_insert((WRITE_BURST, now));
        *left = (*left + now.duration_since(*at).as_secs_f64() * WRITES_PER_SEC).min(WRITE_BURST);
        *at = now;
        if *left < 1.0 {
            let wait = ((1.0 - *left) / WRITES_PER_SEC).ceil().max(1.0) as u64;
            return Err(ServiceError::RateLimited {
                retry_after_secs: wait,
            });
        }
        *left -= 1.0;
        Ok(())
    }

    /// Checks that the worker protocol call for `worker_id` comes from the token that
    /// registered that worker.
    pub(crate) async fn check_worker(
        &self,
        store: &dyn Store,
        caller: &Caller,
        worker_id: i64,
    ) -> Result<(), ServiceError> {
        let Some(p) = self.require(caller, Need::Worker)? else {
            return Ok(());
        };
        let cached = self
            .owners
            .lock()
            .expect("auth lock")
            .get(&worker_id)
            .copied();
        let owner = match cached {
            Some(owner) => owner,
            None => {
                let owner = store.worker_token(worker_id).await?;
                let mut owners = self.owners.lock().expect("auth lock");
                if owners.len() >= MAX_CACHED {
                    owners.clear();
                }
                owners.insert(worker_id, owner);
                owner
            }
        };
        if owner == Some(p.token_id) {
            Ok(())
        } else {
            Err(ServiceError::Forbidden(format!(
                "worker {worker_id} was not registered with token `{}`",
                p.name
            )))
        }
    }
}

impl Caller {
    /// The token that owns what this caller creates (`None` for a local command).
    pub(crate) fn owner(&self) -> Option<Owner> {
        match self {
            Caller::Token(p) => Some(Owner {
                token_id: p.token_id,
                name: p.name.clone(),
            }),
            _ => None,
        }
    }

    /// (actor, role) as the audit log names them.
    pub(crate) fn actor(&self) -> (String, String) {
        match self {
            Caller::Token(p) => (p.name.clone(), p.role.to_string()),
            Caller::Local => ("local".to_string(), "local".to_string()),
            Caller::Anonymous => ("anonymous".to_string(), "none".to_string()),
        }
    }
}

/// A new token: [`TOKEN_PREFIX`] and 256 random bits in hex.
pub(crate) fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("{TOKEN_PREFIX}{}", hex::encode(bytes))
}

/// What the store keeps of a token.
pub(crate) fn hash_token(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(role: Role) -> Caller {
        Caller::Token(Principal {
            token_id: 7,
            name: "t".into(),
            role,
        })
    }

    #[test]
    fn roles_get_what_the_table_says() {
        let auth = Auth::new(false);
        let ok = |c: &Caller, n| auth.require(c, n).is_ok();
        assert!(ok(&token(Role::Reader), Need::Read));
        assert!(!ok(&token(Role::Reader), Need::Submit));
        assert!(!ok(&token(Role::Worker), Need::Read));
        assert!(ok(&token(Role::Worker), Need::Catalog));
        assert!(ok(&token(Role::Worker), Need::Source));
        assert!(!ok(&token(Role::Reader), Need::Source));
        assert!(ok(&token(Role::Reader), Need::Metrics));
        assert!(!ok(&token(Role::Worker), Need::Metrics));
        assert!(!ok(&Caller::Anonymous, Need::Metrics));
        assert!(!ok(&token(Role::Admin), Need::Worker));
        assert!(ok(&token(Role::Admin), Need::Admin));
        assert!(!ok(&token(Role::Submitter), Need::Admin));
        assert!(!ok(&Caller::Anonymous, Need::Read));
        assert!(ok(&Caller::Local, Need::Admin));
        let public = Auth::new(true);
        assert!(public.require(&Caller::Anonymous, Need::Read).is_ok());
        assert!(public.require(&Caller::Anonymous, Need::Metrics).is_ok());
        assert!(public.require(&Caller::Anonymous, Need::Submit).is_err());
        assert!(public.require(&Caller::Anonymous, Need::Source).is_err());
    }

    #[test]
    fn writes_past_the_burst_are_limited_then_refill() {
        let auth = Auth::new(false);
        let caller = token(Role::Submitter);
        for _ in 0..WRITE_BURST as usize {
            auth.spend_write(&caller).unwrap();
        }
        match auth.spend_write(&caller) {
            Err(ServiceError::RateLimited { retry_after_secs }) => assert!(retry_after_secs >= 1),
            other => panic!("{other:?}"),
        }
        // Local commands are never limited.
        auth.spend_write(&Caller::Local).unwrap();
    }

    #[test]
    fn secrets_are_random_and_hashed() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() == TOKEN_PREFIX.len() + 64);
        assert_eq!(hash_token(&a).len(), 64);
        assert_ne!(hash_token(&a), a);
    }
}
