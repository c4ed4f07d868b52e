//! Build records (see [`sweep_domain::provenance`]) as both backends read them back: rows
//! of (build, record, how many the build has), grouped per build.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Row, Type};
use sweep_domain::provenance::{BuildRecord, StoredBuildRecord};

use super::{StoreError, StoreResult};

/// Each build's first records (oldest first) and how many it has in all.
pub type BuildRecords = BTreeMap<String, (Vec<StoredBuildRecord>, u64)>;

/// Groups rows of (build name, record, total records of that build), already cut to the
/// first few per build and in order.
pub(crate) fn group(
    rows: impl IntoIterator<Item = (String, StoredBuildRecord, u64)>,
) -> BuildRecords {
    let mut out = BuildRecords::new();
    for (build, record, total) in rows {
        let entry = out.entry(build).or_insert_with(|| (Vec::new(), total));
        entry.0.push(record);
    }
    out
}

/// One row of either backend's build-records query (columns `build`, `worker`, `host`,
/// `cpu_model`, `compiler`, `argv` as JSON text, `binary_sha256`, `total`), with its time
/// already decoded (the backends keep it differently).
pub(crate) fn row_of<'r, R>(
    r: &'r R,
    reported_at: DateTime<Utc>,
) -> StoreResult<(String, StoredBuildRecord, u64)>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let argv: String = r.get("argv");
    let record = StoredBuildRecord {
        worker: r.get("worker"),
        record: BuildRecord {
            host: r.get("host"),
            cpu_model: r.get("cpu_model"),
            compiler: r.get("compiler"),
            argv: serde_json::from_str(&argv)
                .map_err(|e| StoreError::Internal(anyhow::anyhow!("stored argv `{argv}`: {e}")))?,
            binary_sha256: r.get("binary_sha256"),
        },
        reported_at,
    };
    Ok((r.get("build"), record, r.get::<i64, _>("total") as u64))
}
