//! What workers send back: result batches (with retries of failing positions) and build
//! failures (failing a variant only once enough workers failed it). The rules themselves
//! live in [`crate::store::retry`].

use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use sqlx::{Postgres, Transaction};
use sweep_domain::wire::{BatchAck, JobReport};

use super::columns::{Measured, ResultColumns};
use super::group::{abandoned, replicate, Group};
use super::leases::mark_seen;
use super::{jobs_for_update, secs, statements, Locked, PgStore};
use crate::store::batch::{check_batch, Checked, Report};
use crate::store::job::{check_lease, JobRow};
use crate::store::retry::final_failures;
use crate::store::{StoreError, StoreResult};

/// One upload waiting to be stored (owned: it is stored by whichever call's turn comes).
pub(super) struct Upload {
    worker_id: i64,
    /// Shared with the caller, which still names each report in its answer.
    reports: Arc<[JobReport]>,
    lease: Duration,
    max_attempts: u32,
}

/// What one upload gets back: one result per report, in request order, or the error of the
/// whole call.
type Acks = StoreResult<Vec<StoreResult<BatchAck>>>;

/// The uploads of this coordinator, stored together.
pub(super) type Uploads = Group<Upload, Acks>;

/// How many groups of uploads may be stored at once: a second keeps the database busy while
/// the first waits for its commit, and groups touch disjoint jobs (an upload's jobs are its
/// worker's leases).
pub(super) const UPLOAD_TURNS: usize = 2;

/// Stores the reports of one upload, together with the uploads that arrive meanwhile (see
/// [`store_uploads`]). A lost lease is that report's `LeaseLost` or `NotFound` and stores
/// nothing; invalid input fails the whole call and stores nothing. One result per report, in
/// request order.
pub(super) async fn report_jobs(
    store: &PgStore,
    worker_id: i64,
    reports: Arc<[JobReport]>,
    lease: Duration,
    max_attempts: u32,
) -> Acks {
    let upload = Upload {
        worker_id,
        reports,
        lease,
        max_attempts,
    };
    let served = store.clone();
    store
        .uploads
        .call(upload, move |batch| async move {
            store_uploads(&served, batch).await
        })
        .await
        .unwrap_or_else(|| Err(abandoned("results upload")))
}

/// Stores uploads in as few transactions as their jobs allow: uploads naming a job another
/// upload of the batch names (a worker re-sending one) go in a later transaction, so each
/// transaction sees every job as the one before it left it. One answer per upload, in order;
/// a transaction that fails answers each of its uploads with the error and stores none of them.
async fn store_uploads(store: &PgStore, batch: Vec<Upload>) -> Vec<Acks> {
    let mut answers: Vec<Option<Acks>> = batch.iter().map(|_| None).collect();
    for round in rounds(&batch) {
        let uploads: Vec<&Upload> = round.iter().map(|&i| &batch[i]).collect();
        match store_round(store, &uploads).await {
            Ok(acks) => {
                for (i, acks) in round.into_iter().zip(acks) {
                    answers[i] = Some(acks);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, uploads = uploads.len(), "storing uploads failed");
                for i in round {
                    answers[i] = Some(Err(replicate(&e)));
                }
            }
        }
    }
    answers
        .into_iter()
        .map(|a| a.unwrap_or_else(|| Err(abandoned("results upload"))))
        .collect()
}

/// The uploads of `batch` split into rounds whose uploads name disjoint jobs, each upload in
/// the first round it fits, so uploads keep their order within a round.
fn rounds(batch: &[Upload]) -> Vec<Vec<usize>> {
    let mut rounds: Vec<(Vec<usize>, HashSet<i64>)> = Vec::new();
    for (i, upload) in batch.iter().enumerate() {
        let jobs: HashSet<i64> = upload.reports.iter().map(|r| r.job_id).collect();
        // After the last round that shares a job: an upload never goes before one it follows.
        let after = rounds
            .iter()
            .rposition(|(_, taken)| !taken.is_disjoint(&jobs))
            .map_or(0, |r| r + 1);
        match rounds.get_mut(after) {
            Some((members, taken)) => {
                members.push(i);
                taken.extend(jobs);
            }
            None => rounds.push((vec![i], jobs)),
        }
    }
    rounds.into_iter().map(|(members, _)| members).collect()
}

/// One report, checked: what goes in and what failed.
struct Held<'a> {
    report: Report<'a>,
    locked: &'a Locked,
    /// Positions that failed (they take the retry path; a cross-check has none).
    failed: Vec<Checked>,
}

/// Stores uploads naming disjoint jobs in one transaction, set-based: their jobs are locked
/// with one statement, every report is checked, the good results of all go in with one
/// multi-row insert, and the jobs' new states with one update. Failing positions (rare) take
/// the per-job retry path. An upload that fails its checks gets its error and stores nothing;
/// the others go on.
async fn store_round(store: &PgStore, uploads: &[&Upload]) -> StoreResult<Vec<Acks>> {
    let mut tx = store.pool.begin().await?;
    let ids: Vec<i64> = uploads
        .iter()
        .flat_map(|u| u.reports.iter().map(|r| r.job_id))
        .collect();
    let jobs = jobs_for_update(&mut tx, &ids).await?;
    // After the jobs, in id order: the order every worker call locks in.
    let mut workers: Vec<(i64, Duration)> =
        uploads.iter().map(|u| (u.worker_id, u.lease)).collect();
    workers.sort_unstable_by_key(|w| w.0);
    workers.dedup_by_key(|w| w.0);
    let mut unknown = HashSet::new();
    for (worker_id, lease) in workers {
        match mark_seen(store, &mut tx, worker_id, lease).await {
            Err(StoreError::NotFound(_)) => {
                unknown.insert(worker_id);
            }
            other => other?,
        }
    }
    let mut answers: Vec<Option<Acks>> = Vec::with_capacity(uploads.len());
    let mut checked: Vec<Vec<StoreResult<Held<'_>>>> = Vec::with_capacity(uploads.len());
    let mut rows = ResultColumns::default();
    let mut checks = Measured::default();
    for upload in uploads {
        if unknown.contains(&upload.worker_id) {
            answers.push(Some(Err(StoreError::NotFound(format!(
                "worker {}",
                upload.worker_id
            )))));
            checked.push(Vec::new());
            continue;
        }
        match check_upload(store, upload, &jobs).await {
            Ok((held, work, check)) => {
                rows.extend(work);
                checks.extend(check);
                answers.push(None);
                checked.push(held);
            }
            Err(e) => {
                answers.push(Some(Err(e)));
                checked.push(Vec::new());
            }
        }
    }
    let mut accepted: HashMap<i64, u32> = HashMap::new();
    for job_id in rows.insert(&mut tx).await? {
        *accepted.entry(job_id).or_default() += 1;
    }
    for job_id in checks.insert_checks(&mut tx).await? {
        *accepted.entry(job_id).or_default() += 1;
    }
    let mut updates = StateUpdates::default();
    for (answer, (upload, held)) in answers.iter_mut().zip(uploads.iter().zip(checked)) {
        if answer.is_none() {
            let acks = settle_upload(&mut tx, held, &mut accepted, &mut updates, upload).await?;
            *answer = Some(Ok(acks));
        }
    }
    updates.apply(&mut tx, store.clock.now()).await?;
    tx.commit().await?;
    Ok(answers
        .into_iter()
        .map(|a| a.expect("every upload answered"))
        .collect())
}

/// Checks every report of one upload against the locked jobs: a lost lease is that report's
/// error; invalid input fails the whole upload. Returns each report's verdict with the rows
/// to insert: results of work jobs, and cross-check measurements (errors included).
async fn check_upload<'a>(
    store: &PgStore,
    upload: &'a Upload,
    jobs: &'a HashMap<i64, Locked>,
) -> StoreResult<(Vec<StoreResult<Held<'a>>>, ResultColumns, Measured)> {
    let mut held = Vec::with_capacity(upload.reports.len());
    let mut rows = ResultColumns::default();
    let mut checks = Measured::default();
    for report in upload.reports.iter() {
        let report = Report::of_upload(upload.worker_id, report);
        let locked = match jobs.get(&report.job_id) {
            None => Err(StoreError::NotFound(format!("job {}", report.job_id))),
            Some(locked) => {
                check_lease(report.job_id, &locked.job, report.worker_id, report.attempt)
                    .map(|()| locked)
            }
        };
        let locked = match locked {
            Ok(locked) => locked,
            Err(e) => {
                held.push(Err(e));
                continue;
            }
        };
        let suite = store.suite_positions(locked.job.suite_id).await?;
        let checked = check_batch(&locked.job, &suite, &report)?;
        let failed = if locked.job.check {
            // A cross-check's measurements, errors included, go to `cross_checks` only.
            checks.push(&locked.job, &report, &checked);
            Vec::new()
        } else {
            let (failed, ok): (Vec<Checked>, Vec<Checked>) =
                checked.into_iter().partition(|c| c.error.is_some());
            rows.push(&locked.job, &report, &ok);
            failed
        };
        held.push(Ok(Held {
            report,
            locked,
            failed,
        }));
    }
    Ok((held, rows, checks))
}

/// Turns one upload's checked reports into its acks, recording failing positions (and the
/// results of those that failed for good) and each job's new state.
async fn settle_upload(
    tx: &mut Transaction<'_, Postgres>,
    held: Vec<StoreResult<Held<'_>>>,
    accepted: &mut HashMap<i64, u32>,
    updates: &mut StateUpdates,
    upload: &Upload,
) -> StoreResult<Vec<StoreResult<BatchAck>>> {
    let mut acks = Vec::with_capacity(held.len());
    for held in held {
        let Held {
            report,
            locked,
            failed,
        } = match held {
            Ok(h) => h,
            Err(e) => {
                acks.push(Err(e));
                continue;
            }
        };
        let job = &locked.job;
        // A job reported twice in one upload counts its new rows once.
        let stored = accepted.remove(&report.job_id).unwrap_or(0);
        let mut added = stored;
        let mut n = stored;
        if !failed.is_empty() {
            n += record_failures(tx, job, &report, &failed).await?;
            let failures = failures_of(tx, job, &failed).await?;
            let finals = final_failures(&failed, &failures, upload.max_attempts);
            let mut final_rows = ResultColumns::default();
            final_rows.push(job, &report, &finals);
            added += final_rows.insert(tx).await?.len() as u32;
        }
        let has = locked.results_done + updates.added(report.job_id) + added as i32;
        let state = job.state_after(report.finished, i64::from(has));
        updates.push(report.job_id, added as i32, state, upload.lease);
        acks.push(Ok(BatchAck {
            accepted: n,
            duplicates: (report.results.len() as u32).saturating_sub(n),
            cancelled: job.cancelled,
        }));
    }
    Ok(acks)
}

/// The jobs' new counts and states, one entry per job: an UPDATE joined to a row twice
/// would apply only one of them.
#[derive(Default)]
struct StateUpdates(BTreeMap<i64, (i32, Option<&'static str>, Duration)>);

impl StateUpdates {
    /// Results added to `job` so far by this transaction.
    fn added(&self, job: i64) -> i32 {
        self.0.get(&job).map_or(0, |u| u.0)
    }

    /// Adds `added` results to `job`, and its new state when it has one (the last wins).
    fn push(&mut self, job: i64, added: i32, state: Option<&'static str>, lease: Duration) {
        let entry = self.0.entry(job).or_insert((0, None, lease));
        entry.0 += added;
        entry.1 = state;
    }

    /// One statement for every job (a lease renewed with a state change runs for the
    /// upload's lease length: every upload of a coordinator has the same).
    async fn apply(
        self,
        tx: &mut Transaction<'_, Postgres>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let Some(lease) = self.0.values().next().map(|u| u.2) else {
            return Ok(());
        };
        let ids: Vec<i64> = self.0.keys().copied().collect();
        let added: Vec<i32> = self.0.values().map(|u| u.0).collect();
        let states: Vec<Option<&str>> = self.0.values().map(|u| u.1).collect();
        sqlx::query(statements::SET_STATES)
            .bind(&ids)
            .bind(&added)
            .bind(&states)
            .bind(secs(lease))
            .bind(now)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }
}

/// Records each failing position as one failed try of this (job, attempt); a re-sent batch
/// and a position that already has its result add nothing. Returns how many were new.
async fn record_failures(
    tx: &mut Transaction<'_, Postgres>,
    job: &JobRow,
    report: &Report<'_>,
    failed: &[Checked],
) -> StoreResult<u32> {
    let idx: Vec<i32> = failed.iter().map(|c| c.index).collect();
    let pid: Vec<&str> = failed.iter().map(|c| c.position_id.as_str()).collect();
    let err: Vec<&str> = failed
        .iter()
        .map(|c| c.error.as_deref().unwrap_or_default())
        .collect();
    let n = sqlx::query(
        "INSERT INTO position_failures (build_id, suite_id, position_index, depth, position_id,
                                        job_id, attempt, worker_id, error)
         SELECT $1, $2, t.idx, $3, t.pid, $4, $5, $6, t.err
         FROM UNNEST($7::int4[], $8::text[], $9::text[]) AS t(idx, pid, err)
         WHERE NOT EXISTS (SELECT 1 FROM results r WHERE r.build_id = $1 AND r.suite_id = $2
                             AND r.position_index = t.idx AND r.depth = $3)
         ON CONFLICT (job_id, attempt, position_index) DO NOTHING",
    )
    .bind(job.build_id)
    .bind(job.suite_id)
    .bind(job.depth)
    .bind(report.job_id)
    .bind(report.attempt)
    .bind(report.worker_id)
    .bind(&idx)
    .bind(&pid)
    .bind(&err)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(n as u32)
}

/// Every recorded failure reason of the given positions, oldest first, by position.
async fn failures_of(
    tx: &mut Transaction<'_, Postgres>,
    job: &JobRow,
    failed: &[Checked],
) -> StoreResult<BTreeMap<i32, Vec<String>>> {
    let idx: Vec<i32> = failed.iter().map(|c| c.index).collect();
    let rows: Vec<(i32, String)> = sqlx::query_as(
        "SELECT position_index, error FROM position_failures
         WHERE build_id = $1 AND suite_id = $2 AND depth = $3 AND position_index = ANY($4)
         ORDER BY id",
    )
    .bind(job.build_id)
    .bind(job.suite_id)
    .bind(job.depth)
    .bind(&idx)
    .fetch_all(&mut **tx)
    .await?;
    let mut by_position: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for (i, error) in rows {
        by_position.entry(i).or_default().push(error);
    }
    Ok(by_position)
}
