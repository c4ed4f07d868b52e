//! What leasing needs about a sweep and never changes after submission: the build each job
//! names (engine definition x defines x source) and the suite names. Read once per sweep
//! and kept, so a lease costs no per-job re-read of a sweep's spec or engine definition.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context;
use sqlx::{PgPool, Row};
use sweep_domain::engine::EngineDef;
use sweep_domain::wire::BuildSpec;

use crate::store::{StoreError, StoreResult};

/// Sweeps kept at most; past it the cache starts over (an entry is a few KB, rebuilt by
/// three small reads, so a crude bound is enough).
const MAX_SWEEPS: usize = 1024;

/// A sweep's immutable parts, as leases hand them out.
#[derive(Debug)]
pub(super) struct SweepStatic {
    /// Build spec by build id.
    pub builds: HashMap<i64, BuildSpec>,
    /// Suite name by suite id.
    pub suites: HashMap<i64, String>,
}

/// The cache of [`SweepStatic`] by sweep id.
#[derive(Debug, Default, Clone)]
pub(super) struct SweepCache(Arc<std::sync::Mutex<HashMap<i64, Arc<SweepStatic>>>>);

impl SweepCache {
    /// The sweep's immutable parts, from the cache or the database.
    pub async fn get(&self, pool: &PgPool, sweep_id: i64) -> StoreResult<Arc<SweepStatic>> {
        if let Some(s) = self.0.lock().expect("sweep cache lock").get(&sweep_id) {
            return Ok(s.clone());
        }
        let loaded = Arc::new(load(pool, sweep_id).await?);
        let mut cache = self.0.lock().expect("sweep cache lock");
        if cache.len() >= MAX_SWEEPS {
            cache.clear();
        }
        cache.insert(sweep_id, loaded.clone());
        Ok(loaded)
    }
}

async fn load(pool: &PgPool, sweep_id: i64) -> StoreResult<SweepStatic> {
    let row = sqlx::query("SELECT engine_def, source_sha256 FROM sweeps WHERE id = $1")
        .bind(sweep_id)
        .fetch_optional(pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("sweep {sweep_id}")))?;
    let def: EngineDef =
        serde_json::from_value(row.get("engine_def")).context("decoding engine definition")?;
    let source: Option<String> = row.get("source_sha256");
    let mut builds = HashMap::new();
    for b in sqlx::query("SELECT id, name, defines FROM builds WHERE sweep_id = $1")
        .bind(sweep_id)
        .fetch_all(pool)
        .await?
    {
        let defines = serde_json::from_value(b.get("defines")).context("decoding defines")?;
        let name: String = b.get("name");
        let spec = def.build_spec(&name, defines, source.as_deref().unwrap_or_default());
        builds.insert(b.get::<i64, _>("id"), spec);
    }
    let suites = sqlx::query_as::<_, (i64, String)>(
        "SELECT su.id, su.name FROM sweep_suites ss JOIN suites su ON su.id = ss.suite_id
         WHERE ss.sweep_id = $1",
    )
    .bind(sweep_id)
    .fetch_all(pool)
    .await?
    .into_iter()
    .collect();
    Ok(SweepStatic { builds, suites })
}
