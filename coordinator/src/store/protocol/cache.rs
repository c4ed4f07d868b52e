//! What the worker protocol reads about sweeps and suites that never changes after their
//! submission: the build each job names (engine definition x defines x source), the suite
//! names, and a suite version's positions. Read once and kept, so a lease or an upload costs
//! no re-read of a sweep's spec, its engine definition or a suite's positions.
//!
//! Loaded through the caller's transaction: on SQLite the one write connection may be the
//! only connection there is (an in-memory database), so reading beside it would wait for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sweep_domain::engine::EngineDef;
use sweep_domain::epd::SuitePosition;
use sweep_domain::wire::BuildSpec;

use crate::store::sql::{Columns, Tx, Value};
use crate::store::{StoreError, StoreResult};

/// Sweeps (and suites) kept at most; past it a cache starts over (an entry is rebuilt by a
/// few small reads, so a crude bound is enough).
const MAX_ENTRIES: usize = 1024;

/// A sweep's immutable parts, as leases hand them out.
#[derive(Debug)]
pub(crate) struct SweepStatic {
    /// Build spec by build id.
    pub builds: HashMap<i64, BuildSpec>,
    /// Suite name by suite id.
    pub suites: HashMap<i64, String>,
}

/// The caches of [`SweepStatic`] by sweep id and of suite positions by suite id.
#[derive(Debug, Default, Clone)]
pub(crate) struct Statics {
    sweeps: Arc<Mutex<HashMap<i64, Arc<SweepStatic>>>>,
    suites: Arc<Mutex<HashMap<i64, Arc<Vec<SuitePosition>>>>>,
}

/// Inserts into a bounded cache.
fn keep<V: Clone>(cache: &Mutex<HashMap<i64, V>>, id: i64, value: V) -> V {
    let mut cache = cache.lock().expect("cache lock");
    if cache.len() >= MAX_ENTRIES {
        cache.clear();
    }
    cache.insert(id, value.clone());
    value
}

impl Statics {
    /// The sweep's immutable parts, from the cache or through `tx`.
    pub async fn sweep<T: Tx>(&self, tx: &mut T, sweep_id: i64) -> StoreResult<Arc<SweepStatic>> {
        if let Some(s) = self.sweeps.lock().expect("cache lock").get(&sweep_id) {
            return Ok(s.clone());
        }
        let loaded = Arc::new(load_sweep(tx, sweep_id).await?);
        Ok(keep(&self.sweeps, sweep_id, loaded))
    }

    /// The positions of a suite version, from the cache or through `tx`.
    pub async fn suite<T: Tx>(
        &self,
        tx: &mut T,
        suite_id: i64,
    ) -> StoreResult<Arc<Vec<SuitePosition>>> {
        if let Some(p) = self.suites.lock().expect("cache lock").get(&suite_id) {
            return Ok(p.clone());
        }
        let row = tx
            .row(
                "SELECT positions FROM suites WHERE id = $1",
                &[Value::Int(suite_id)],
            )
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("suite {suite_id}")))?;
        let positions: Vec<SuitePosition> = row.json("positions")?;
        Ok(keep(&self.suites, suite_id, Arc::new(positions)))
    }
}

async fn load_sweep<T: Tx>(tx: &mut T, sweep_id: i64) -> StoreResult<SweepStatic> {
    let id = [Value::Int(sweep_id)];
    let row = tx
        .row(
            "SELECT engine_def, source_sha256 FROM sweeps WHERE id = $1",
            &id,
        )
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("sweep {sweep_id}")))?;
    let def: EngineDef = row.json("engine_def")?;
    let source = row.opt_text("source_sha256")?;
    let mut builds = HashMap::new();
    for b in tx
        .rows(
            "SELECT id, name, defines FROM builds WHERE sweep_id = $1",
            &id,
        )
        .await?
    {
        let spec = def.build_spec(
            &b.text("name")?,
            b.json("defines")?,
            source.as_deref().unwrap_or_default(),
        );
        builds.insert(b.int("id")?, spec);
    }
    let mut suites = HashMap::new();
    for s in tx
        .rows(
            "SELECT su.id, su.name FROM sweep_suites ss JOIN suites su ON su.id = ss.suite_id
             WHERE ss.sweep_id = $1",
            &id,
        )
        .await?
    {
        suites.insert(s.int("id")?, s.text("name")?);
    }
    Ok(SweepStatic { builds, suites })
}
