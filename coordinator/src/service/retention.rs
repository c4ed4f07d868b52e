//! Data that can be let go (`--keep-finished-days N --archive-dir DIR`): every minute (see
//! [`look_every`]) the
//! coordinator looks for sweeps that ended more than N days ago, writes each one's export
//! file into the archive directory, reads it back to check it, and only then deletes the
//! sweep. A sweep whose archive cannot be written or checked stays (and is tried again at the
//! next look). Several coordinators on one database may do the same sweep: the file is
//! written under a temporary name and renamed, and the second delete finds nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::auth::Caller;
use super::{Service, SubmitError};
use crate::transfer;

/// How often the coordinator looks for sweeps past their keep: every minute, or more often
/// for a keep of minutes (a sweep goes at most a quarter of its keep late).
fn look_every(keep: Duration) -> Duration {
    (keep / 4).clamp(Duration::from_secs(1), Duration::from_secs(60))
}
/// Sweeps one look archives at most.
const PER_LOOK: u32 = 20;

/// How long ended sweeps are kept, and where they are archived before they go.
#[derive(Debug, Clone)]
pub struct RetentionSettings {
    /// Ended sweeps are kept this long after they ended.
    pub keep: Duration,
    /// Their export files are written here first.
    pub archive_dir: PathBuf,
}

impl Service {
    /// Archives and deletes sweeps past `settings.keep` until `stop` fires (see the module
    /// doc); the first look is at once.
    pub async fn let_go_of_old_sweeps(&self, settings: RetentionSettings, stop: CancellationToken) {
        loop {
            if let Err(e) = self.let_go_once(&settings).await {
                tracing::warn!(error = format!("{e:#}"), "archiving old sweeps failed");
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(look_every(settings.keep)) => {}
            }
        }
    }

    /// One look: each sweep past its keep archived, checked and deleted; returns how many.
    pub async fn let_go_once(&self, settings: &RetentionSettings) -> anyhow::Result<usize> {
        let keep = chrono::Duration::from_std(settings.keep).context("keep")?;
        let cutoff = self.0.shared.store.clock().now() - keep;
        let mut done = 0;
        for id in self
            .0
            .shared
            .store
            .sweeps_ended_before(cutoff, PER_LOOK)
            .await?
        {
            let file = self.reads().export_sweep(&Caller::Local, id).await?;
            let path = write_archive(&settings.archive_dir, id, file).await?;
            let ack = self.submissions().delete(&Caller::Local, id).await;
            match ack {
                Ok(ack) => {
                    tracing::info!(sweep_id = id, results = ack.results, archive = %path.display(),
                        "sweep archived and deleted");
                    done += 1;
                }
                // Another coordinator deleted it meanwhile.
                Err(SubmitError::NotFound(_)) => {}
                Err(e) => return Err(e).context(format!("deleting sweep {id}")),
            }
        }
        Ok(done)
    }
}

/// Writes sweep `id`'s export `file` as `DIR/sweep-ID.sweep.gz`, through a temporary file
/// synced and renamed, then reads it back and decodes it: a file that does not verify is an
/// error, and the sweep is not deleted.
async fn write_archive(dir: &Path, id: i64, file: Vec<u8>) -> anyhow::Result<PathBuf> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(format!("sweep-{id}.sweep.gz"));
        let tmp = dir.join(format!(".sweep-{id}.sweep.gz.{}", std::process::id()));
        let mut out =
            std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        out.write_all(&file)?;
        out.sync_all()?;
        std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
        let back = std::fs::read(&path)?;
        transfer::decode(&back).with_context(|| format!("checking {}", path.display()))?;
        Ok(path)
    })
    .await
    .context("archive task")?
}
