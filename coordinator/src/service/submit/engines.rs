//! Engines added or updated at runtime: an admin sends a definition (TOML), it is validated
//! exactly like a file of the engines directory, stored in the database (so it survives a
//! restart, where it wins over a file of the same name: see [`crate::catalog`]), and swapped
//! into the catalog, so the next submission can use it. Sweeps already submitted keep the
//! definition they were submitted with. Other coordinators on the same database take it from
//! there within seconds ([`Submissions::follow_stored_engines`]), with no restart.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use sweep_domain::bounds::{check_text, Lines, MAX_ENGINE_DEFINITION, MAX_REF_NAME};
use sweep_domain::engine::EngineKind;
use sweep_domain::wire::{EngineInfo, EngineOrigin};
use sweep_domain::FieldError;

use super::{Submissions, SubmitError};
use crate::catalog::Engine;
use crate::service::auth::{Caller, Need};
use crate::store::StoredEngine;

/// How often a coordinator reads the stored engine definitions: an engine added or updated
/// through another coordinator on the same database is usable here within this.
pub const FOLLOW_ENGINES_EVERY: Duration = Duration::from_secs(2);

/// What [`Submissions::add_engine`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineAdded {
    /// The engine as it is now registered.
    pub engine: EngineInfo,
    /// No engine of that name was stored before (it may still have come from a file).
    pub created: bool,
}

impl Submissions {
    /// Registers (or replaces) the engine `name` with the definition `body` (TOML text), for
    /// admins. The definition must name itself `name`; a source engine's `source.path` must
    /// be an absolute directory on this machine.
    pub async fn add_engine(
        &self,
        caller: &Caller,
        name: &str,
        body: &[u8],
    ) -> Result<EngineAdded, SubmitError> {
        self.shared.auth.require(caller, Need::Admin)?;
        self.shared.auth.spend_write(caller)?;
        let (text, parsed) = parse_definition(name, body).await?;
        let (actor, _) = caller.actor();
        let _writes = self.engine_writes.lock().await;
        let (stored, created) = self.shared.store.put_engine(name, text, &actor).await?;
        let engine = Engine {
            origin: EngineOrigin::Database {
                updated_at: stored.updated_at,
                updated_by: stored.updated_by,
            },
            ..parsed
        };
        let info = engine.info();
        let kind = engine.def.kind();
        let replaced = self.catalog.swap_in(name, engine);
        let detail = describe_add(kind, replaced.as_ref());
        self.shared
            .audit(
                caller,
                "engine_add",
                format!("engine {name}"),
                detail.clone(),
            )
            .await?;
        tracing::info!(engine = name, created, %detail, "engine registered over the API");
        Ok(EngineAdded {
            engine: info,
            created,
        })
    }
}

impl Submissions {
    /// Keeps this coordinator's catalog in step with the engine definitions stored in the
    /// database, until `stop` fires: every [`FOLLOW_ENGINES_EVERY`], a stored definition newer
    /// than the one in the catalog (or one the catalog has only from a file, or not at all)
    /// is validated like a file and swapped in. One that does not validate here (say, its
    /// source directory does not exist on this machine) is logged once per version and
    /// left out; the catalog keeps what it had.
    pub async fn follow_stored_engines(&self, stop: CancellationToken) {
        let mut refused = HashMap::new();
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(FOLLOW_ENGINES_EVERY) => {}
            }
            match self.shared.store.engines().await {
                Ok(rows) => self.take_newer(rows, &mut refused).await,
                Err(e) => tracing::warn!(error = %e, "reading the stored engines failed"),
            }
        }
    }

    /// Swaps in every row of `rows` newer than the catalog's engine of its name, except the
    /// versions in `refused` (which it adds to when one does not validate).
    async fn take_newer(
        &self,
        rows: Vec<StoredEngine>,
        refused: &mut HashMap<String, DateTime<Utc>>,
    ) {
        // Beside `add_engine`, which stores and swaps in under the same lock: a row read
        // before a local add never replaces the newer definition it swapped in.
        let _writes = self.engine_writes.lock().await;
        let current = self.catalog.current();
        for row in rows {
            let newer = match current.engines.get(&row.name).map(|e| &e.origin) {
                Some(EngineOrigin::Database { updated_at, .. }) => row.updated_at > *updated_at,
                Some(EngineOrigin::File { .. }) | None => true,
            };
            if !newer || refused.get(&row.name) == Some(&row.updated_at) {
                continue;
            }
            match parse_stored(&row).await {
                Ok(engine) => {
                    tracing::info!(engine = %row.name, updated_by = %row.updated_by, "engine added or updated through another coordinator: taken");
                    self.catalog.swap_in(&row.name, engine);
                }
                Err(why) => {
                    tracing::warn!(engine = %row.name, reason = %why, "stored engine definition left out here");
                    refused.insert(row.name.clone(), row.updated_at);
                }
            }
        }
    }
}

/// The engine a stored row defines, validated like a file (on a blocking thread: a source
/// engine's directory is looked at).
async fn parse_stored(row: &StoredEngine) -> anyhow::Result<Engine> {
    let origin = EngineOrigin::Database {
        updated_at: row.updated_at,
        updated_by: row.updated_by.clone(),
    };
    let text = row.definition.clone();
    let engine = tokio::task::spawn_blocking(move || Engine::parse(&text, None, origin))
        .await
        .context("engine parse task")??;
    anyhow::ensure!(
        engine.def.name == row.name,
        "the definition names itself `{}`",
        engine.def.name
    );
    Ok(engine)
}

/// The definition `body` sent to `name`, checked (UTF-8, bounds, parsed and validated like a
/// file of the engines directory, naming itself `name`): its text and the engine it makes,
/// with a provisional origin (the store stamps who and when).
async fn parse_definition<'a>(
    name: &str,
    body: &'a [u8],
) -> Result<(&'a str, Engine), SubmitError> {
    let text = std::str::from_utf8(body)
        .map_err(|e| FieldError::new("definition", format!("is not UTF-8 text: {e}")))?;
    check_text("name", name, MAX_REF_NAME, Lines::One)?;
    // Files written on Windows arrive with CRLF; the bound allows newlines and tabs only.
    check_text(
        "definition",
        &text.replace("\r\n", "\n"),
        MAX_ENGINE_DEFINITION,
        Lines::Many,
    )?;
    let provisional = EngineOrigin::Database {
        updated_at: chrono::Utc::now(),
        updated_by: String::new(),
    };
    // A bad source directory is checked on a blocking thread: it touches the file system.
    let owned = text.to_string();
    let parsed = tokio::task::spawn_blocking(move || Engine::parse(&owned, None, provisional))
        .await
        .context("engine parse task")??;
    if parsed.def.name != name {
        return Err(FieldError::new(
            "name",
            format!(
                "the definition names itself `{}` but was sent to `{name}`",
                parsed.def.name
            ),
        )
        .into());
    }
    Ok((text, parsed))
}

/// The audit log's word on an engine added: new (of which kind), or what it replaced.
fn describe_add(kind: EngineKind, replaced: Option<&Engine>) -> String {
    match replaced {
        None => match kind {
            EngineKind::Source => "source engine added".to_string(),
            EngineKind::Binary => "binary-only engine added".to_string(),
        },
        Some(old) => match &old.origin {
            EngineOrigin::File { file } => format!("replaces the definition of {file}"),
            EngineOrigin::Database { .. } => "updated".to_string(),
        },
    }
}
