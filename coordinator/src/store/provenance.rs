//! Build records (see [`sweep_domain::provenance`]) as both backends read them back: rows
//! of (build, record, how many the build has), grouped per build.

use std::collections::BTreeMap;

use sweep_domain::provenance::StoredBuildRecord;

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
