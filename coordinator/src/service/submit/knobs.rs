//! Knobs a sweep declares (`[[knobs]]`) are accepted only if the source the sweep will build
//! defines them: the snapshot's files are read here, the search itself is the domain's
//! [`KnobRule`]. It takes the archive bytes, whatever made them (a registered directory
//! today), so it runs right after the source is resolved and before anything is stored.

use anyhow::Context;
use sweep_domain::engine::{DeclaredKnob, EngineDef, KnobRule};
use sweep_domain::FieldError;

use super::SubmitError;
use crate::snapshot::read_files;

/// Checks that the gzip'ed tar `archive` defines every knob in `declared` by `engine`'s rule
/// ([`KnobRule::of`] its `[source]`); a knob it does not define is refused as
/// `knobs[i].name`, naming the files searched. Blocking: gunzips the archive.
pub fn check_declared_knobs(
    engine: &EngineDef,
    declared: &[DeclaredKnob],
    archive: &[u8],
) -> Result<(), SubmitError> {
    if declared.is_empty() {
        return Ok(());
    }
    let Some(source) = &engine.source else {
        return Err(FieldError::new(
            "knobs",
            format!(
                "engine `{}` has no source, so a sweep cannot declare knobs for it",
                engine.name
            ),
        )
        .into());
    };
    let rule = KnobRule::of(source);
    let files = read_files(archive, |path, size| rule.wants(path, size))
        .context("reading the source snapshot for declared knobs")?;
    let names: Vec<&str> = declared.iter().map(|k| k.name.as_str()).collect();
    let found = rule.check(
        &names,
        files.iter().map(|(p, b)| (p.as_str(), b.as_slice())),
    )?;
    tracing::debug!(engine = %engine.name, found = ?found.found, searched = found.searched.len(), "declared knobs found in the source");
    Ok(())
}
