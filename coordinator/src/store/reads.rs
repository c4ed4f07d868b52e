//! Everything the read side asks about a sweep, written once for both backends over
//! [`Reads`]: the listing, one sweep's record, progress, live workers, position errors,
//! results and the suite version it ran. The statements are portable SQL; each backend only
//! runs them (see [`super::sql`]).

use std::collections::BTreeMap;

use sweep_domain::epd::Suite;
use sweep_domain::limit::Limit;
use sweep_domain::source::{SourceKind, SourceOrigin, SourceProvenance};
use sweep_domain::spec::Priority;
use sweep_domain::table::{CellSums, ResultRow, SumsKey};
use sweep_domain::wire::{
    ActiveWorker, BuildStatus, PositionError, Progress, StageProgress, SweepSummary,
};

use super::backend::Backend;
use super::retry::{error_list, ErrorRow};
use super::rows::saturating_u64;
use super::sql::{Columns, Reads, Value};
use super::state::{state_of, Approval, SweepCounts};
use super::{Created, StoreError, StoreResult, SweepRecord};

/// The counts and flags [`state_of`] needs, plus the listing's columns; callers add `WHERE`
/// and the order. Cheap at any sweep size: the job and position totals are the sweep's own
/// columns (they never change after its submission), results are counted in `result_sums`,
/// and the open cross-checks are an index probe (`jobs_check_sweep`), never counts of jobs.
/// Its work is open while the builds without a build error miss results: each build knows
/// how many positions it is to search (`builds.position_count`, grown when a later stage
/// adds its jobs), and a position that failed for good has its result too (the error).
pub(crate) const SUMMARY_SQL: &str = concat!(
    "
SELECT s.id, s.name, s.engine, s.cancelled, s.created_at, s.submitter, s.source_sha256,
       s.source_kind, s.source_uploader, s.source_git_url, s.source_git_rev, s.source_git_commit,
       s.job_count AS jobs,
       s.position_count AS total_positions,
       (EXISTS (SELECT 1 FROM jobs j WHERE j.sweep_id = s.id AND j.kind = 'check'
                  AND j.state IN ('queued', 'leased'))
        OR EXISTS (SELECT 1 FROM jobs j WHERE j.sweep_id = s.id AND j.kind = 'speed'
                  AND j.state IN ('queued', 'leased'))
        OR ",
    super::sql::work_open!(),
    ") AS open,
       s.stages_left + CASE WHEN s.search_open THEN 1 ELSE 0 END AS stages_left,
       s.stage_count, s.stage_reached, s.approval, s.approval_note, s.priority,
       s.started,
       COALESCE((SELECT CAST(sum(p.done) AS BIGINT) FROM result_sums p WHERE p.sweep_id = s.id),
                0) AS done_positions,
       COALESCE((SELECT CAST(sum(p.errors) AS BIGINT) FROM result_sums p
                 WHERE p.sweep_id = s.id), 0) AS error_results,
       (SELECT count(*) FROM builds b WHERE b.sweep_id = s.id AND b.build_error IS NULL) AS ok_builds,
       EXISTS (SELECT 1 FROM builds b WHERE b.sweep_id = s.id AND b.is_baseline
                 AND b.build_error IS NOT NULL) AS baseline_failed,
       (SELECT count(*) FROM builds b WHERE b.sweep_id = s.id AND b.build_error IS NOT NULL) AS failed_builds
FROM sweeps s"
);

/// The source a sweep was built from, from the `source_*` columns of `sweeps`.
pub(crate) fn origin_of(row: &impl Columns) -> StoreResult<SourceOrigin> {
    Ok(SourceOrigin {
        kind: SourceKind::parse(&row.text("source_kind")?),
        uploader: row.opt_text("source_uploader")?,
        git_url: row.opt_text("source_git_url")?,
        git_rev: row.opt_text("source_git_rev")?,
        git_commit: row.opt_text("source_git_commit")?,
    })
}

/// A staged sweep's stage, from a row of [`SUMMARY_SQL`]; `None` without stages.
fn stage_of(row: &impl Columns) -> StoreResult<Option<StageProgress>> {
    let total = row.int("stage_count")?;
    if total <= 1 {
        return Ok(None);
    }
    let current = row.int("stage_reached")?;
    Ok(Some(StageProgress {
        current: u32::try_from(current).unwrap_or(0),
        total: u32::try_from(total).unwrap_or(0),
    }))
}

/// A listing row of [`SUMMARY_SQL`].
pub(crate) fn summary_of(row: &impl Columns) -> StoreResult<SweepSummary> {
    let source = match row.opt_text("source_sha256")? {
        Some(sha256) => Some(SourceProvenance {
            sha256,
            origin: origin_of(row)?,
        }),
        None => None,
    };
    Ok(SweepSummary {
        id: row.int("id")?,
        name: row.text("name")?,
        engine: row.text("engine")?,
        state: state_of(SweepCounts {
            cancelled: row.flag("cancelled")?,
            jobs: row.int("jobs")?,
            open: row.flag("open")?,
            started: row.flag("started")?,
            baseline_failed: row.flag("baseline_failed")?,
            ok_builds: row.int("ok_builds")?,
            error_results: row.int("error_results")?,
            failed_builds: row.int("failed_builds")?,
            stages_left: row.int("stages_left")?,
            approval: Approval::parse(row.opt_text("approval")?.as_deref()),
        }),
        created_at: row.time("created_at")?,
        positions_done: row.count("done_positions")?,
        positions_total: row.count("total_positions")?,
        submitter: row.opt_text("submitter")?,
        source,
        stage: stage_of(row)?,
        approval_note: row.opt_text("approval_note")?,
        priority: match row.text("priority")?.as_str() {
            "low" => Priority::Low,
            "high" => Priority::High,
            _ => Priority::Normal,
        },
    })
}

/// The first sweep of `rows` (rows of [`SUMMARY_SQL`]) that is not final, as the one an
/// identical submission gets instead of a new sweep.
pub(crate) fn running_of(rows: &[impl Columns]) -> StoreResult<Option<Created>> {
    for row in rows {
        if !summary_of(row)?.state.is_final() {
            return Ok(Some(Created {
                id: row.int("id")?,
                jobs: row.count("jobs")?,
                existing: true,
                reused: 0,
            }));
        }
    }
    Ok(None)
}

/// Sweeps, newest first.
pub(crate) async fn list(db: &impl Reads, limit: u32) -> StoreResult<Vec<SweepSummary>> {
    let sql = format!("{SUMMARY_SQL} ORDER BY s.id DESC LIMIT $1");
    let rows = db.rows(&sql, &[Value::Int(limit.into())]).await?;
    rows.iter().map(summary_of).collect()
}

/// One sweep with its spec, builds and suites.
pub(crate) async fn sweep(db: &impl Reads, id: i64) -> StoreResult<SweepRecord> {
    let by_id = [Value::Int(id)];
    let sql = format!("{SUMMARY_SQL} WHERE s.id = $1");
    let row = db
        .row(&sql, &by_id)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("sweep {id}")))?;
    let summary = summary_of(&row)?;
    let extra = db
        .row(
            "SELECT spec, engine_def, source_sha256, submitter_token, source_kind,
                    source_uploader, source_git_url, source_git_rev, source_git_commit,
                    CAST(search AS TEXT) AS search, imported_from
             FROM sweeps WHERE id = $1",
            &by_id,
        )
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("sweep {id}")))?;
    let builds = build_statuses(db, &by_id).await?;
    let (suites, suite_sha256) = suites_of(db, &by_id).await?;
    let spec: sweep_domain::spec::SweepSpec = extra.json("spec")?;
    // Only a sweep with stages after its first has decisions to read.
    let stages = if spec.stages.is_empty() {
        Vec::new()
    } else {
        super::stages::decisions(db, id).await?
    };
    Ok(SweepRecord {
        summary,
        spec,
        engine_def: extra.json("engine_def")?,
        source_sha256: extra.opt_text("source_sha256")?,
        origin: origin_of(&extra)?,
        builds,
        suites,
        suite_sha256: suite_sha256.into_iter().collect(),
        submitter_token: extra.opt_int("submitter_token")?,
        stages,
        search: search_of(&extra)?,
        imported_from: extra
            .opt_text("imported_from")?
            .map(|text| {
                serde_json::from_str(&text)
                    .map_err(|e| anyhow::anyhow!("decoding `imported_from`: {e}"))
            })
            .transpose()?,
    })
}

/// Where the sweep's search stands, from the `search` column of `row` read as text.
pub(crate) fn search_of(
    row: &impl Columns,
) -> StoreResult<Option<sweep_domain::table::SearchReport>> {
    row.opt_text("search")?
        .map(|text| {
            serde_json::from_str(&text)
                .map_err(|e| anyhow::anyhow!("decoding `search`: {e}").into())
        })
        .transpose()
}

/// The builds of the sweep `by_id` names, in their order, without their build records.
async fn build_statuses(db: &impl Reads, by_id: &[Value<'_>]) -> StoreResult<Vec<BuildStatus>> {
    db.rows(
        "SELECT name, defines, is_baseline, build_error FROM builds
             WHERE sweep_id = $1 ORDER BY ord",
        by_id,
    )
    .await?
    .iter()
    .map(|b| {
        Ok(BuildStatus {
            name: b.text("name")?,
            defines: b.json("defines")?,
            is_baseline: b.flag("is_baseline")?,
            build_error: b.opt_text("build_error")?,
            // Attached by the sweep's detail (`Store::build_records`), not every read.
            records: Vec::new(),
            records_total: 0,
        })
    })
    .collect()
}

/// The suites of the sweep `by_id` names, in their order: (name, size) and (name, sha256).
async fn suites_of(
    db: &impl Reads,
    by_id: &[Value<'_>],
) -> StoreResult<(Vec<(String, usize)>, Vec<(String, String)>)> {
    let suite_rows = db
        .rows(
            "SELECT su.name, su.size, su.sha256
             FROM sweep_suites ss JOIN suites su ON su.id = ss.suite_id
             WHERE ss.sweep_id = $1 ORDER BY ss.ord",
            by_id,
        )
        .await?;
    let mut suites = Vec::with_capacity(suite_rows.len());
    let mut suite_sha256 = Vec::with_capacity(suite_rows.len());
    for r in &suite_rows {
        suites.push((r.text("name")?, r.count("size")? as usize));
        suite_sha256.push((r.text("name")?, r.text("sha256")?));
    }
    Ok((suites, suite_sha256))
}

/// A progress cell: (build's order, suite's order, depth, node limit).
type CellKey = (i64, i64, i64, i64);

/// A build and suite of a sweep, by (build's order, suite's order): their names and the
/// suite's size.
type Cells = BTreeMap<(i64, i64), (String, String, u64)>;

/// The sums of the cells with results: (done, errors, node sum).
type Sums = BTreeMap<CellKey, (u64, u64, u128)>;

/// Progress per build, suite and limit; `errors` counts final failures only. Read from the
/// sums the database keeps (`result_sums`, a few rows per cell), every cell of the sweep's
/// builds, suites and limits (its spec's), those without a result yet at 0: never a count of
/// its results or a walk of its jobs.
pub(crate) async fn progress(db: &impl Reads, id: i64) -> StoreResult<Vec<Progress>> {
    let row = db
        .row(
            "SELECT spec, CAST(search AS TEXT) AS search FROM sweeps WHERE id = $1",
            &[Value::Int(id)],
        )
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("sweep {id}")))?;
    let spec: sweep_domain::spec::SweepSpec = row.json("spec")?;
    let search = search_of(&row)?;
    // Node sums are kept as 32-bit halves and joined in 128 bits, so no backend overflows.
    let rows = db
        .rows(
            "SELECT b.name AS build, su.name AS suite, su.size, b.ord, ss.ord AS suite_ord,
                    p.depth, p.nodes_limit,
                    CAST(COALESCE(sum(p.done), 0) AS BIGINT) AS done,
                    CAST(COALESCE(sum(p.errors), 0) AS BIGINT) AS errors,
                    CAST(COALESCE(sum(p.nodes_hi), 0) AS BIGINT) AS nodes_hi,
                    CAST(COALESCE(sum(p.nodes_lo), 0) AS BIGINT) AS nodes_lo
             FROM builds b
             JOIN sweep_suites ss ON ss.sweep_id = b.sweep_id
             JOIN suites su ON su.id = ss.suite_id
             LEFT JOIN result_sums p ON p.sweep_id = b.sweep_id AND p.build_id = b.id
                                    AND p.suite_id = su.id
             WHERE b.sweep_id = $1
             GROUP BY b.id, b.name, b.ord, su.id, su.name, su.size, ss.ord, p.depth,
                      p.nodes_limit
             ORDER BY b.ord, ss.ord",
            &[Value::Int(id)],
        )
        .await?;
    let (cells, sums) = cells_of(&rows)?;
    let decisions = if spec.stages.is_empty() {
        Vec::new()
    } else {
        super::stages::decisions(db, id).await?
    };
    let stages = sweep_domain::table::Planned::new(&spec, &decisions, search.as_ref());
    let planned = |build: &str, suite: &str, limit: &Limit| stages.measures(build, suite, limit);
    Ok(progress_table(&spec.all_limits(), &cells, &sums, planned))
}

/// Every cell of `rows` (a build and a suite), and the sums of the cells with results, by
/// (build, suite, limit key).
fn cells_of(rows: &[impl Columns]) -> StoreResult<(Cells, Sums)> {
    let mut cells = Cells::new();
    let mut sums = Sums::new();
    for r in rows {
        let cell = (r.int("ord")?, r.int("suite_ord")?);
        cells
            .entry(cell)
            .or_insert((r.text("build")?, r.text("suite")?, r.count("size")?));
        if let (Some(depth), Some(nodes)) = (r.opt_int("depth")?, r.opt_int("nodes_limit")?) {
            let node_sum = (u128::from(r.int("nodes_hi")? as u64) << 32)
                + u128::from(r.int("nodes_lo")? as u64);
            sums.insert(
                (cell.0, cell.1, depth, nodes),
                (r.count("done")?, r.count("errors")?, node_sum),
            );
        }
    }
    Ok((cells, sums))
}

/// Every cell in table order (limit, build, suite) that is `planned`, those without results
/// at 0.
fn progress_table(
    limits: &[Limit],
    cells: &Cells,
    sums: &Sums,
    planned: impl Fn(&str, &str, &Limit) -> bool,
) -> Vec<Progress> {
    let mut out = Vec::new();
    for limit in limits {
        let (depth, nodes) = limit.key();
        for (&(b, su), (build, suite, size)) in cells {
            if !planned(build, suite, limit) {
                continue;
            }
            let (done, errors, node_sum) = sums
                .get(&(b, su, i64::from(depth), nodes))
                .copied()
                .unwrap_or_default();
            out.push(Progress {
                build: build.clone(),
                suite: suite.clone(),
                limit: *limit,
                done,
                total: *size,
                errors,
                nodes: saturating_u64(node_sum),
            });
        }
    }
    out
}

/// Workers holding unexpired leases on the sweep's jobs (none once it is cancelled): a walk of
/// the live leases (one row per lease call of a worker at work, however big the queue).
pub(crate) async fn active_workers<B: Backend>(db: &B, id: i64) -> StoreResult<Vec<ActiveWorker>> {
    let sql = format!(
        "SELECT w.id, w.name, w.host, count(*) AS jobs
         FROM leases l{} JOIN jobs j ON j.id = u.value JOIN workers w ON w.id = l.worker_id
         JOIN sweeps s ON s.id = j.sweep_id
         WHERE l.expires_at > $2 AND ((l.closed >> u.key) & 1) = 0 AND j.sweep_id = $1
           AND NOT s.cancelled
         GROUP BY w.id, w.name, w.host ORDER BY w.id",
        B::lease_jobs("l")
    );
    let rows = db
        .reader()
        .rows(&sql, &[Value::Int(id), Value::Time(db.clock().now())])
        .await?;
    rows.iter()
        .map(|r| {
            Ok(ActiveWorker {
                id: r.int("id")?,
                name: r.text("name")?,
                host: r.text("host")?,
                jobs: r.count("jobs")?,
            })
        })
        .collect()
}

/// Names of the builds with a job under a live lease, in the sweep's build order.
pub(crate) async fn active_builds<B: Backend>(db: &B, id: i64) -> StoreResult<Vec<String>> {
    let sql = format!(
        "SELECT DISTINCT b.name, b.ord
         FROM leases l{} JOIN jobs j ON j.id = u.value JOIN builds b ON b.id = j.build_id
         JOIN sweeps s ON s.id = j.sweep_id
         WHERE l.expires_at > $2 AND ((l.closed >> u.key) & 1) = 0 AND j.sweep_id = $1
           AND NOT s.cancelled AND b.build_error IS NULL
         ORDER BY b.ord",
        B::lease_jobs("l")
    );
    let rows = db
        .reader()
        .rows(&sql, &[Value::Int(id), Value::Time(db.clock().now())])
        .await?;
    rows.iter().map(|r| r.text("name")).collect()
}

/// A row of either error query of [`position_errors`].
fn error_row(r: &impl Columns) -> StoreResult<ErrorRow> {
    Ok(ErrorRow {
        ord: r.int("ord")?,
        build: r.text("build")?,
        suite: r.text("suite")?,
        index: r.int("position_index")?,
        position: r.text("position_id")?,
        error: r.text("error")?,
    })
}

/// Final position errors (results with an error) and failures still to be retried.
pub(crate) async fn position_errors(
    db: &impl Reads,
    id: i64,
    limit: u32,
) -> StoreResult<Vec<PositionError>> {
    let finals = db
        .rows(
            "SELECT b.ord, b.name AS build, su.name AS suite, r.position_index, r.position_id,
                    r.error
             FROM results r JOIN builds b ON b.id = r.build_id JOIN suites su ON su.id = r.suite_id
             WHERE r.sweep_id = $1 AND r.error IS NOT NULL
             ORDER BY b.ord, su.name, r.position_index LIMIT $2",
            &[Value::Int(id), Value::Int(limit.into())],
        )
        .await?;
    // Pending failures are few (a position leaves this list once it has a result), so they
    // are read whole and grouped in Rust.
    let pending = db
        .rows(
            "SELECT b.ord, b.name AS build, su.name AS suite, f.position_index, f.position_id,
                    f.error
             FROM position_failures f JOIN builds b ON b.id = f.build_id
             JOIN suites su ON su.id = f.suite_id
             WHERE b.sweep_id = $1
               AND NOT EXISTS (SELECT 1 FROM results r WHERE r.build_id = f.build_id
                                 AND r.suite_id = f.suite_id
                                 AND r.position_index = f.position_index
                                 AND r.depth = f.depth)
             ORDER BY b.ord, su.name, f.position_index, f.id",
            &[Value::Int(id)],
        )
        .await?;
    Ok(error_list(
        finals.iter().map(error_row).collect::<StoreResult<_>>()?,
        pending.iter().map(error_row).collect::<StoreResult<_>>()?,
        limit,
    ))
}

/// The columns [`result_row`] reads, for `FROM results r JOIN builds b JOIN suites su`.
pub(crate) const RESULT_COLUMNS: &str = "
b.name AS build, su.name AS suite, r.position_index, r.position_id, r.nodes, r.bestmove,
r.solved, r.error, r.depth, r.nodes_limit, CAST(r.counters AS TEXT) AS counters,
r.origin_sweep_id IS NOT NULL AS reused";

/// A row of [`RESULT_COLUMNS`].
pub(crate) fn result_row(r: &impl Columns) -> StoreResult<ResultRow> {
    Ok(ResultRow {
        build: r.text("build")?,
        suite: r.text("suite")?,
        limit: r.limit()?,
        index: r.count("position_index")? as u32,
        position_id: r.text("position_id")?,
        // Stored as the bits of the count: a count above i64::MAX reads back whole.
        nodes: r.int("nodes")? as u64,
        bestmove: r.text("bestmove")?,
        solved: r.flag("solved")?,
        error: r.opt_text("error")?,
        counters: super::rows::counters_of(r.opt_text("counters")?)?,
        reused: r.flag("reused")?,
    })
}

/// Every result of the sweep, in build, suite, position order.
pub(crate) async fn results(db: &impl Reads, id: i64) -> StoreResult<Vec<ResultRow>> {
    let sql = format!(
        "SELECT {RESULT_COLUMNS}
         FROM results r JOIN builds b ON b.id = r.build_id JOIN suites su ON su.id = r.suite_id
         WHERE r.sweep_id = $1 ORDER BY b.ord, su.name, r.position_index"
    );
    let rows = db.rows(&sql, &[Value::Int(id)]).await?;
    rows.iter().map(result_row).collect()
}

/// The results of the named builds at one limit, from every result of the sweep (a backend
/// that can select them next to the data does so instead).
pub(crate) async fn build_results(
    db: &impl Reads,
    id: i64,
    builds: &[String],
    limit: Limit,
) -> StoreResult<Vec<ResultRow>> {
    let mut rows = results(db, id).await?;
    rows.retain(|r| r.limit == limit && builds.contains(&r.build));
    Ok(rows)
}

/// The table's sums, per (build, limit, suite) with results, against the sweep's baseline
/// build (what [`sweep_domain::table::sums_of`] makes of its results): read from
/// `result_sums`, which the database keeps summed as results are inserted (see migration
/// `result_sums`), so a read costs a few rows per cell whatever the sweep's size. Node sums are kept as 32-bit halves and joined in
/// 128 bits.
pub(crate) async fn table_sums(
    db: &impl Reads,
    id: i64,
) -> StoreResult<BTreeMap<SumsKey, CellSums>> {
    let rows = db
        .rows(
            "SELECT b.name AS build, su.name AS suite, s.depth, s.nodes_limit,
                    CAST(sum(s.done) AS BIGINT) AS done,
                    CAST(sum(s.errors) AS BIGINT) AS errors,
                    CAST(sum(s.reused) AS BIGINT) AS reused,
                    CAST(sum(s.nodes_hi) AS BIGINT) AS nodes_hi,
                    CAST(sum(s.nodes_lo) AS BIGINT) AS nodes_lo,
                    CAST(sum(s.solved) AS BIGINT) AS solved,
                    CAST(sum(s.compared) AS BIGINT) AS compared,
                    CAST(sum(s.compared_nodes_hi) AS BIGINT) AS compared_nodes_hi,
                    CAST(sum(s.compared_nodes_lo) AS BIGINT) AS compared_nodes_lo,
                    CAST(sum(s.compared_base_nodes_hi) AS BIGINT) AS compared_base_nodes_hi,
                    CAST(sum(s.compared_base_nodes_lo) AS BIGINT) AS compared_base_nodes_lo,
                    CAST(sum(s.compared_solved) AS BIGINT) AS compared_solved,
                    CAST(sum(s.compared_base_solved) AS BIGINT) AS compared_base_solved
             FROM result_sums s
             JOIN builds b ON b.id = s.build_id
             JOIN suites su ON su.id = s.suite_id
             WHERE s.sweep_id = $1
             GROUP BY b.name, su.name, s.depth, s.nodes_limit",
            &[Value::Int(id)],
        )
        .await?;
    let halves = |r: &_, col: &str| -> StoreResult<u128> {
        let hi = Columns::count(r, &format!("{col}_hi"))?;
        let lo = Columns::count(r, &format!("{col}_lo"))?;
        Ok((u128::from(hi) << 32) + u128::from(lo))
    };
    rows.iter()
        .map(|r| {
            let key = (r.text("build")?, r.limit()?, r.text("suite")?);
            let sums = CellSums {
                done: r.count("done")?,
                errors: r.count("errors")?,
                reused: r.count("reused")?,
                nodes: halves(r, "nodes")?,
                solved: r.count("solved")?,
                compared: r.count("compared")?,
                compared_nodes: halves(r, "compared_nodes")?,
                compared_base_nodes: halves(r, "compared_base_nodes")?,
                compared_solved: r.count("compared_solved")?,
                compared_base_solved: r.count("compared_base_solved")?,
            };
            Ok((key, sums))
        })
        .collect()
}

/// The suite version the sweep ran under `name`, positions included.
pub(crate) async fn sweep_suite(db: &impl Reads, id: i64, name: &str) -> StoreResult<Suite> {
    let row = db
        .row(
            "SELECT su.sha256, su.positions
             FROM sweep_suites ss JOIN suites su ON su.id = ss.suite_id
             WHERE ss.sweep_id = $1 AND su.name = $2",
            &[Value::Int(id), Value::Text(name)],
        )
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("suite `{name}` of sweep {id}")))?;
    Ok(Suite {
        name: name.to_string(),
        sha256: row.text("sha256")?,
        positions: row.json("positions")?,
    })
}
