//! Binary-only engines and option checks: which prebuilt binaries this machine has, and
//! whether a variant's options are ones its engine accepts.
//!
//! A variant whose options the engine refuses could never run a position, so it is reported
//! like a broken build (once, with the engine's own announcement) instead of as one error per
//! position.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sweep_domain::engine::EngineKind;
use sweep_domain::wire::{BuildSpec, EngineList};
use tokio::sync::OnceCell;

use crate::allow::EngineBinaries;
use crate::engine::uci::{check_options, UciEngine};
use crate::sandbox::Confinement;

/// Checks that `path` is a regular file someone may execute; the error says why not.
pub fn check_executable(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err("not executable".into());
    }
    Ok(())
}

/// The binary-only engines of `list` whose binary `allowed` lists and is an executable file
/// on this machine: what a worker reports at registration so it gets their jobs (and only
/// those: a job it would refuse would fail the build for the whole sweep).
pub fn available_engines(list: &EngineList, allowed: &EngineBinaries) -> Vec<String> {
    list.engines
        .iter()
        .filter(|e| e.kind == EngineKind::Binary)
        .filter_map(|e| {
            let path = e.binary.as_deref()?;
            if let Err(why) = allowed.check(path) {
                tracing::info!(engine = %e.name, binary = path, %why, "binary-only engine not allowed here");
                return None;
            }
            match check_executable(Path::new(path)) {
                Ok(()) => Some(e.name.clone()),
                Err(why) => {
                    tracing::info!(engine = %e.name, binary = path, %why, "binary-only engine not available here");
                    None
                }
            }
        })
        .collect()
}

type Checked = Arc<OnceCell<Result<(), String>>>;

/// A binary and the options set on it, in order.
type CheckKey = (PathBuf, Vec<(String, String)>);

/// Option checks, done once per (binary, options) for the life of the process.
#[derive(Debug, Default)]
pub struct OptionChecks {
    done: Mutex<HashMap<CheckKey, Checked>>,
}

impl OptionChecks {
    /// Checks the options `spec` sets through its option knobs (`checked_options`) against
    /// what `binary` announces in its `uci` answer. Starts the engine once per binary and
    /// option set; concurrent calls share the check, and the answer is remembered. The error
    /// names the option, the value and what the engine announced.
    pub async fn check(
        &self,
        binary: &Path,
        spec: &BuildSpec,
        confinement: &Confinement,
    ) -> Result<(), String> {
        if spec.checked_options.is_empty() {
            return Ok(());
        }
        let cell = {
            let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
            done.entry((binary.to_path_buf(), spec.options.clone()))
                .or_default()
                .clone()
        };
        cell.get_or_init(|| async {
            let result = announced_check(binary, spec, confinement).await;
            match &result {
                Ok(()) => tracing::info!(build = %spec.name, "options accepted by the engine"),
                Err(e) => tracing::warn!(build = %spec.name, error = %e, "options refused"),
            }
            result
        })
        .await
        .clone()
    }
}

/// Starts the engine without options (confined as its searches will be), reads its
/// announcements, quits it, and checks.
async fn announced_check(
    binary: &Path,
    spec: &BuildSpec,
    confinement: &Confinement,
) -> Result<(), String> {
    let init = Duration::from_secs(spec.init_timeout_secs.max(1));
    let engine = UciEngine::start_confined(binary, &[], init, confinement)
        .await
        .map_err(|e| {
            format!(
                "cannot check the options of build `{}`: engine {} did not start: {e}",
                spec.name,
                binary.display()
            )
        })?;
    let announced = engine.announced_options().to_vec();
    engine.quit().await;
    check_options(&announced, &spec.options, &spec.checked_options)
}
