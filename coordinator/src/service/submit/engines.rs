//! Engines added or updated at runtime: an admin sends a definition (TOML), it is validated
//! exactly like a file of the engines directory, stored in the database (so it survives a
//! restart, where it wins over a file of the same name: see [`crate::catalog`]), and swapped
//! into the catalog, so the next submission can use it. Sweeps already submitted keep the
//! definition they were submitted with.

use anyhow::Context;

use sweep_domain::bounds::{check_text, Lines, MAX_ENGINE_DEFINITION, MAX_REF_NAME};
use sweep_domain::engine::EngineKind;
use sweep_domain::wire::{EngineInfo, EngineOrigin};
use sweep_domain::FieldError;

use super::{Submissions, SubmitError};
use crate::catalog::Engine;
use crate::service::auth::{Caller, Need};

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
