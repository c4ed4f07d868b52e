//! What the four parts of the service share, so each holds only a handle to it: the store,
//! who may do what ([`Auth`]) and the counters of `/metrics` ([`Shared`]); the engine and
//! suite catalog as it is now ([`LiveCatalog`]); the audit log the writing parts append to.
//! (The failures they share are in `failure.rs`, which `auth.rs` uses too.)

use std::sync::{Arc, RwLock};

use crate::catalog::{Catalog, Engine};
use crate::metrics::Metrics;
use crate::store::{NewAudit, Store, StoreResult};

use super::auth::{Auth, Caller};

/// The handles every part holds: cheap to clone (three `Arc`s).
#[derive(Clone)]
pub(crate) struct Shared {
    /// Storage: only the service speaks to it.
    pub store: Arc<dyn Store>,
    /// Tokens, worker ownership, write budgets.
    pub auth: Arc<Auth>,
    /// What `/metrics` shows: counted here, where the events happen.
    pub metrics: Arc<Metrics>,
}

impl Shared {
    /// Writes an audit log entry for what `caller` just did.
    pub async fn audit(
        &self,
        caller: &Caller,
        action: &str,
        target: String,
        detail: String,
    ) -> StoreResult<()> {
        let (actor, role) = caller.actor();
        self.store
            .audit(&NewAudit {
                actor,
                role,
                action: action.to_string(),
                target,
                detail,
            })
            .await
    }
}

/// The engines and suites as they are now: replaced whole when an engine is added, so a use
/// case that took one snapshot never mixes two definitions into one answer.
pub(crate) struct LiveCatalog(RwLock<Arc<Catalog>>);

impl LiveCatalog {
    /// A catalog that is `catalog` until an engine is added.
    pub fn new(catalog: Arc<Catalog>) -> Self {
        Self(RwLock::new(catalog))
    }

    /// The catalog as it is now.
    pub fn current(&self) -> Arc<Catalog> {
        self.0.read().expect("catalog lock").clone()
    }

    /// Puts `engine` into a new catalog, in place of the one every later use case takes; the
    /// engine it replaced, if any.
    pub fn swap_in(&self, name: &str, engine: Engine) -> Option<Engine> {
        let mut current = self.0.write().expect("catalog lock");
        let mut next = Catalog::clone(&current);
        let replaced = next.engines.insert(name.to_string(), engine);
        *current = Arc::new(next);
        replaced
    }
}
