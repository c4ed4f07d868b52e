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
//! | sources | yes | those it uploaded or runs sweeps on | no | those its workers hold leases of | no |
//! | register workers | no | no | no | up to `--max-workers-per-token` live ones | no |
//! | worker protocol | no | no | no | the workers it registered | no |
//! | health, dashboard page, OpenAPI document | yes | yes | yes | yes | yes |
//!
//! The last row needs no check here: those routes never ask for a [`Caller`]. The OpenAPI
//! document (`crate::http::openapi`) lists each operation's roles in its security requirement.
//! A source snapshot a caller may not read is answered as if it were not stored (404), so
//! nobody learns that it exists ([`Auth::may_read_source`]).
//!
//! All four parts of the service (submissions, the worker protocol, reads, administration)
//! check here, so this module is theirs in common, with the failures they share: a caller
//! [`Denied`], a write [`RateLimited`]; authenticating a bearer fails with an [`AuthError`].
//!
//! A token is 256 random bits; only its sha256 is stored. Lookups are cached for
//! [`TOKEN_TTL`], so a revoked token stops working within that time on every coordinator
//! (at once on the one that revoked it). Bad tokens cost the database as little as they can:
//! a bearer that is not of a token's form is refused without a lookup; an unknown one is
//! looked up once, then remembered as unknown ([`UNKNOWN_KEPT`] of them, each for
//! [`UNKNOWN_TTL`], in a cache of their own, so a flood of them evicts no valid token);
//! requests with one bearer at once share one lookup; and at most [`LOOKUPS_AT_ONCE`]
//! lookups run at once, so a flood of distinct random bearers cannot take the pool's
//! connections from the worker protocol (authentication happens before a request takes an
//! in-flight slot).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus::IntCounter;
use rand::RngCore;
use sha2::{Digest, Sha256};
use sweep_domain::auth::Role;
use tokio::sync::Semaphore;

use super::failure::{unexpected, Unavailable};
use crate::store::{Owner, Store, StoreError, StoreResult, StoredToken};

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
/// Unknown tokens remembered at most (the oldest are forgotten first).
pub const UNKNOWN_KEPT: usize = 10_000;
/// How long an unknown token is remembered. A token's secret is drawn at random as it is
/// made, so a secret unknown now never becomes a token: this only bounds the memory of
/// bearers seen once.
pub const UNKNOWN_TTL: Duration = Duration::from_secs(300);
/// Token lookups in the database at once, at most: a few connections of the pool.
pub const LOOKUPS_AT_ONCE: usize = 4;
/// How long a lookup waits for its turn before the request is answered 503.
const LOOKUP_WAIT: Duration = Duration::from_secs(2);

/// Why a caller may not do what it asked: a case of every part's error.
#[derive(Debug, thiserror::Error)]
pub enum Denied {
    /// No token, or an unknown or revoked one, where one is needed.
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// The token's role (or ownership) does not allow this.
    #[error("forbidden: {0}")]
    Forbidden(String),
}

/// The token made too many writes; it may try again after `retry_after_secs`.
#[derive(Debug, thiserror::Error)]
#[error("too many writes; retry after {retry_after_secs} s")]
pub struct RateLimited {
    /// Seconds until the next write is allowed.
    pub retry_after_secs: u64,
}

/// Why a request's bearer token made no caller.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The bearer is no live token (unknown, revoked, or not of a token's form).
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// Every turn for token lookups was taken for `LOOKUP_WAIT`: retry shortly (the worker
    /// protocol keeps its share of the database meanwhile).
    #[error("too many reads at once; retry later")]
    Busy,
    /// The database did not answer the lookup.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    /// Anything else, with its cause chain.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<StoreError> for AuthError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(e) => AuthError::Unavailable(Unavailable::new(e)),
            other => AuthError::Internal(unexpected(other)),
        }
    }
}

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
    /// Live tokens by hash, with when they were looked up.
    tokens: Mutex<HashMap<String, (Principal, Instant)>>,
    /// Hashes looked up and found to be no live token.
    unknown: Mutex<Recent>,
    /// One lock per hash being looked up: requests with one bearer share a lookup.
    looking: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Turns for lookups in the database ([`LOOKUPS_AT_ONCE`]).
    lookup_turns: Semaphore,
    /// Counts lookups in the database (`sweep_token_lookups_total`).
    lookups: IntCounter,
    /// Tokens that live only in this process (a local run's), by hash.
    ephemeral: Mutex<HashMap<String, Principal>>,
    /// The token that registered each worker (never changes once registered).
    owners: Mutex<HashMap<i64, Option<i64>>>,
    /// Write budget per token id: (tokens left, last refill).
    budgets: Mutex<HashMap<i64, (f64, Instant)>>,
}

impl Auth {
    /// The state of a coordinator that lets anonymous callers read when `public_read`,
    /// counting its lookups in the database with `lookups`.
    pub(crate) fn new(public_read: bool, lookups: IntCounter) -> Self {
        Self {
            public_read,
            tokens: Mutex::default(),
            unknown: Mutex::new(Recent::new(UNKNOWN_KEPT, UNKNOWN_TTL)),
            looking: Mutex::default(),
            lookup_turns: Semaphore::new(LOOKUPS_AT_ONCE),
            lookups,
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
    ) -> Result<Caller, AuthError> {
        let Some(secret) = bearer else {
            return Ok(Caller::Anonymous);
        };
        // Every token is made by `new_secret`: anything else is none, without a lookup.
        if !is_token_form(secret) {
            return Err(unknown_token());
        }
        let hash = hash_token(secret);
        if let Some(p) = self.ephemeral.lock().expect("auth lock").get(&hash) {
            return Ok(Caller::Token(p.clone()));
        }
        if let Some(known) = self.cached(&hash) {
            return known.map(Caller::Token).ok_or_else(unknown_token);
        }
        let found = self.look_up(store, &hash).await?;
        found.map(Caller::Token).ok_or_else(unknown_token)
    }

    /// What the caches say of `hash`: `Some(Some(_))` a live token, `Some(None)` none,
    /// `None` not known (or no longer trusted).
    fn cached(&self, hash: &str) -> Option<Option<Principal>> {
        let known = self
            .tokens
            .lock()
            .expect("auth lock")
            .get(hash)
            .filter(|(_, at)| at.elapsed() < TOKEN_TTL)
            .map(|(p, _)| p.clone());
        if known.is_some() {
            return Some(known);
        }
        let unknown = self.unknown.lock().expect("auth lock").contains(hash);
        unknown.then_some(None)
    }

    /// Looks `hash` up in the store, once for all requests that wait for it, in one of the
    /// [`LOOKUPS_AT_ONCE`] turns ([`AuthError::Busy`] after [`LOOKUP_WAIT`] without one),
    /// and caches the answer.
    async fn look_up(&self, store: &dyn Store, hash: &str) -> Result<Option<Principal>, AuthError> {
        let one = self
            .looking
            .lock()
            .expect("auth lock")
            .entry(hash.to_string())
            .or_default()
            .clone();
        // Removed however this ends, a caller that hangs up mid-lookup included.
        let _entry = Looking { auth: self, hash };
        let _one = one.lock().await;
        // Whoever held the lock before looked it up meanwhile.
        if let Some(known) = self.cached(hash) {
            return Ok(known);
        }
        let _turn = tokio::time::timeout(LOOKUP_WAIT, self.lookup_turns.acquire())
            .await
            .map_err(|_| AuthError::Busy)?
            .map_err(|_| AuthError::Busy)?;
        self.lookups.inc();
        let found = store
            .token_by_hash(hash)
            .await?
            .map(|StoredToken { id, name, role }| Principal {
                token_id: id,
                name,
                role,
            });
        match &found {
            Some(p) => {
                let mut tokens = self.tokens.lock().expect("auth lock");
                if tokens.len() >= MAX_CACHED {
                    tokens.clear();
                }
                tokens.insert(hash.to_string(), (p.clone(), Instant::now()));
            }
            None => self
                .unknown
                .lock()
                .expect("auth lock")
                .insert(hash, Instant::now()),
        }
        Ok(found)
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
    ) -> Result<Option<&'a Principal>, Denied> {
        match caller {
            Caller::Local => Ok(None),
            Caller::Anonymous
                if self.public_read
                    && matches!(need, Need::Read | Need::Catalog | Need::Metrics) =>
            {
                Ok(None)
            }
            Caller::Anonymous => Err(Denied::Unauthenticated(format!(
                "{}: send `Authorization: Bearer TOKEN` (sweep ... --token, or SWEEP_TOKEN)",
                need.describe()
            ))),
            Caller::Token(p) if need.allows(p.role) => Ok(Some(p)),
            Caller::Token(p) => Err(Denied::Forbidden(format!(
                "{} (token `{}` is a {} token)",
                need.describe(),
                p.name,
                p.role
            ))),
        }
    }

    /// Takes one write from the caller's budget; [`RateLimited`] when empty.
    pub(crate) fn spend_write(&self, caller: &Caller) -> Result<(), RateLimited> {
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
            return Err(RateLimited {
                retry_after_secs: wait,
            });
        }
        *left -= 1.0;
        Ok(())
    }

    /// Checks that the worker protocol call for `worker_id` comes from the token that
    /// registered that worker: [`Denied`] if not, the store's error (an unregistered worker
    /// is not found) if it cannot tell.
    pub(crate) async fn check_worker<E: From<Denied> + From<StoreError>>(
        &self,
        store: &dyn Store,
        caller: &Caller,
        worker_id: i64,
    ) -> Result<(), E> {
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
            Err(Denied::Forbidden(format!(
                "worker {worker_id} was not registered with token `{}`",
                p.name
            ))
            .into())
        }
    }

    /// Whether `caller` may read snapshot `sha256`: admins and local commands always; a token
    /// that uploaded it or submitted a sweep that uses it; a worker token one of whose
    /// workers holds a lease of a job of such a sweep (what a worker fetches a source for).
    pub(crate) async fn may_read_source(
        &self,
        store: &dyn Store,
        caller: &Caller,
        sha256: &str,
    ) -> StoreResult<bool> {
        Ok(match caller {
            Caller::Local => true,
            Caller::Token(p) if p.role == Role::Admin => true,
            Caller::Token(p) => store.may_read_snapshot(sha256, p.token_id).await?,
            Caller::Anonymous => false,
        })
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

/// A hash's entry in [`Auth::looking`], removed when dropped. A caller that waited for it
/// may remove the entry of a later lookup of the same hash: that only lets the next caller
/// look it up again.
struct Looking<'a> {
    auth: &'a Auth,
    hash: &'a str,
}

impl Drop for Looking<'_> {
    fn drop(&mut self) {
        self.auth
            .looking
            .lock()
            .expect("auth lock")
            .remove(self.hash);
    }
}

/// The answer to a bearer that is no live token.
fn unknown_token() -> AuthError {
    AuthError::Unauthenticated("unknown or revoked token".to_string())
}

/// Whether `secret` has the form of a token ([`new_secret`]): the prefix, then 64 lowercase
/// hex digits.
fn is_token_form(secret: &str) -> bool {
    secret.strip_prefix(TOKEN_PREFIX).is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// A bounded set of keys, each kept at most `ttl`, the oldest forgotten first when full.
struct Recent {
    /// Each key and when it was put in.
    keys: HashMap<String, Instant>,
    /// Keys in the order they were put in (a key put in again is here twice; only its
    /// latest entry counts).
    order: VecDeque<(String, Instant)>,
    cap: usize,
    ttl: Duration,
}

impl Recent {
    fn new(cap: usize, ttl: Duration) -> Self {
        Recent {
            keys: HashMap::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
            ttl,
        }
    }

    /// Whether `key` was put in less than `ttl` ago.
    fn contains(&self, key: &str) -> bool {
        self.keys.get(key).is_some_and(|at| at.elapsed() < self.ttl)
    }

    /// Puts `key` in at `now`, forgetting what is past `ttl`, then the oldest while full.
    fn insert(&mut self, key: &str, now: Instant) {
        while let Some((oldest, at)) = self.order.front() {
            let expired = now.saturating_duration_since(*at) >= self.ttl;
            if !expired && self.keys.len() < self.cap {
                break;
            }
            if self.keys.get(oldest) == Some(at) {
                self.keys.remove(oldest);
            }
            self.order.pop_front();
        }
        self.keys.insert(key.to_string(), now);
        self.order.push_back((key.to_string(), now));
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
        let auth = Auth::new(false, IntCounter::new("lookups", "test").unwrap());
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
        let public = Auth::new(true, IntCounter::new("lookups", "test").unwrap());
        assert!(public.require(&Caller::Anonymous, Need::Read).is_ok());
        assert!(public.require(&Caller::Anonymous, Need::Metrics).is_ok());
        assert!(public.require(&Caller::Anonymous, Need::Submit).is_err());
        assert!(public.require(&Caller::Anonymous, Need::Source).is_err());
    }

    #[test]
    fn writes_past_the_burst_are_limited_then_refill() {
        let auth = Auth::new(false, IntCounter::new("lookups", "test").unwrap());
        let caller = token(Role::Submitter);
        for _ in 0..WRITE_BURST as usize {
            auth.spend_write(&caller).unwrap();
        }
        match auth.spend_write(&caller) {
            Err(RateLimited { retry_after_secs }) => assert!(retry_after_secs >= 1),
            other => panic!("{other:?}"),
        }
        // Local commands are never limited.
        auth.spend_write(&Caller::Local).unwrap();
    }

    #[test]
    fn only_bearers_of_a_tokens_form_are_looked_up() {
        assert!(is_token_form(&new_secret()));
        let hex = "0123456789abcdef".repeat(4);
        assert!(is_token_form(&format!("{TOKEN_PREFIX}{hex}")));
        assert!(!is_token_form(&format!(
            "{TOKEN_PREFIX}{}",
            hex.to_uppercase()
        )));
        assert!(!is_token_form(&format!("{TOKEN_PREFIX}{hex}0")));
        assert!(!is_token_form(&hex));
        assert!(!is_token_form("Bearer"));
    }

    #[test]
    fn unknown_tokens_are_kept_bounded_in_number_and_time() {
        let mut recent = Recent::new(3, Duration::from_secs(60));
        let t0 = Instant::now();
        for key in ["a", "b", "c"] {
            recent.insert(key, t0);
        }
        assert!(["a", "b", "c"].iter().all(|k| recent.contains(k)));
        // Full: the oldest goes first.
        recent.insert("d", t0);
        assert!(!recent.contains("a") && recent.contains("d"));
        assert_eq!(recent.keys.len(), 3);
        // Put in again, a key counts from then; its earlier entry frees no other.
        recent.insert("b", t0);
        recent.insert("e", t0);
        assert!(recent.contains("b") && !recent.contains("c"));
        // Past the time, all that were put in before go at the next insert.
        recent.insert("f", t0 + Duration::from_secs(61));
        assert_eq!(recent.keys.len(), 1);
        assert!(recent.order.len() == 1 && recent.contains("f"));
        // An expired key is not contained, even before anything else is put in.
        let mut short = Recent::new(3, Duration::ZERO);
        short.insert("g", Instant::now());
        assert!(!short.contains("g"));
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
