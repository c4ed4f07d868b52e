//! Result uploads stored together. Every upload of this coordinator queues itself; whoever
//! gets a turn stores every upload queued so far, as few transactions as their jobs allow,
//! set-based: the leases they name are locked with one statement, their jobs read with one,
//! every report checked, the good results of all inserted at once (one statement on
//! Postgres), and each lease row written once. No job row is written for work: a job is
//! complete when every position has its result.
//!
//! An upload that fails its checks (a bad report, an unknown worker) stores nothing and gets
//! its own error; the others go on. A failed transaction answers each of its uploads with
//! the error and leaves nothing behind.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use sweep_domain::wire::{BatchAck, JobReport};

use super::checks::{originals_stored, set_state};
use super::closing::LeaseWrites;
use super::fence::check_lease;
use super::group::{abandoned, replicate};
use super::queued::{jobs, leases, put_back};
use super::speed;
use super::statements as stmt;
use super::Queue;
use super::{touch_unless_recent, Marked};
use crate::store::backend::Backend;
use crate::store::backend::Measurement;
use crate::store::batch::{check_batch, Checked, Report};
use crate::store::clock::after;
use crate::store::job::{JobRow, LeaseRow};
use crate::store::retry::final_failures;
use crate::store::sql::stamp;
use crate::store::sql::{Columns, Tx, Value};
use crate::store::{StoreError, StoreResult};

/// One upload waiting to be stored (owned: it is stored by whichever call's turn comes).
pub(crate) struct Upload {
    /// The uploading worker.
    pub worker_id: i64,
    /// Shared with the caller, which still names each report in its answer.
    pub reports: Arc<[JobReport]>,
    /// How long a renewed lease lasts.
    pub lease: Duration,
    /// Failed tries before a position fails for good.
    pub max_attempts: u32,
}

/// What one upload gets back: one result per report, in request order, or the error of the
/// whole call.
pub(crate) type Acks = StoreResult<Vec<StoreResult<BatchAck>>>;

/// How many groups of uploads may be stored at once: a second keeps the database busy while
/// the first waits for its commit, and groups touch disjoint leases.
pub(crate) const UPLOAD_TURNS: usize = 2;

/// Stores the reports of one upload, together with the uploads that arrive meanwhile. A lost
/// lease is that report's `LeaseLost` and stores nothing; invalid input fails the whole call
/// and stores nothing. One result per report, in request order.
pub(crate) async fn report<B: Backend>(db: &Queue<B>, upload: Upload) -> Acks {
    let store = db.clone();
    db.memory()
        .uploads
        .call(upload, move |batch| async move {
            store_uploads(&store, batch).await
        })
        .await
        .unwrap_or_else(|| Err(abandoned("results upload")))
}

/// Stores uploads in as few transactions as their leases allow: uploads naming a lease
/// another upload of the batch names (a worker re-sending one) go in a later transaction, so
/// each transaction sees every lease as the one before it left it. One answer per upload, in
/// order.
async fn store_uploads<B: Backend>(db: &Queue<B>, batch: Vec<Upload>) -> Vec<Acks> {
    let mut answers: Vec<Option<Acks>> = batch.iter().map(|_| None).collect();
    for round in rounds(&batch) {
        let uploads: Vec<&Upload> = round.iter().map(|&i| &batch[i]).collect();
        let started = std::time::Instant::now();
        match store_round_again_if_rolled_back(db, &uploads).await {
            Ok(acks) => {
                tracing::debug!(
                    uploads = uploads.len(),
                    ms = started.elapsed().as_secs_f64() * 1e3,
                    "uploads stored"
                );
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

/// The uploads of `batch` split into rounds whose uploads name disjoint leases and jobs, each
/// upload in the first round it fits, so uploads keep their order within a round.
fn rounds(batch: &[Upload]) -> Vec<Vec<usize>> {
    let mut rounds: Vec<(Vec<usize>, HashSet<i64>)> = Vec::new();
    for (i, upload) in batch.iter().enumerate() {
        // Negative keys for leases, so a lease and a job of the same number never collide.
        let keys: HashSet<i64> = upload
            .reports
            .iter()
            .flat_map(|r| [r.job_id, -1 - r.attempt])
            .collect();
        // After the last round that shares one: an upload never goes before one it follows.
        let after = rounds
            .iter()
            .rposition(|(_, taken)| !taken.is_disjoint(&keys))
            .map_or(0, |r| r + 1);
        match rounds.get_mut(after) {
            Some((members, taken)) => {
                members.push(i);
                taken.extend(keys);
            }
            None => rounds.push((vec![i], keys)),
        }
    }
    rounds.into_iter().map(|(members, _)| members).collect()
}

/// How many times a round is run when the database rolls it back to break a deadlock.
const ROUND_TRIES: u32 = 3;

/// Stores one round, again if the database chose it as a deadlock's victim (or failed it
/// for a serialization conflict): the transaction left nothing behind and its inputs are
/// the same, so running it again is what its callers would do anyway, minus their 503s.
/// The one deadlock seen under load (two upload turns' results inserts taking the sums'
/// position locks out of order) is gone with migration 0020; this keeps any other the
/// database may find from reaching the workers as errors.
async fn store_round_again_if_rolled_back<B: Backend>(
    db: &Queue<B>,
    uploads: &[&Upload],
) -> StoreResult<Vec<Acks>> {
    let mut tries = 1;
    loop {
        match store_round(db, uploads).await {
            Err(e) if e.rolled_back() && tries < ROUND_TRIES => {
                tracing::warn!(error = %e, tries, uploads = uploads.len(),
                    "the database rolled an upload round back; storing it again");
                tries += 1;
            }
            other => return other,
        }
    }
}

/// One report, checked: what goes in and what failed.
struct Held<'a> {
    report: Report<'a>,
    job: &'a JobRow,
    lease: &'a LeaseRow,
    /// Every position measured (a cross-check's, errors included, go to `cross_checks`).
    ok: Vec<Checked>,
    /// Positions that failed (they take the retry path; a cross-check has none).
    failed: Vec<Checked>,
}

/// Stores uploads naming disjoint leases in one transaction (see the module documentation).
async fn store_round<B: Backend>(db: &Queue<B>, uploads: &[&Upload]) -> StoreResult<Vec<Acks>> {
    let now = db.clock().now();
    let mut tx = db.backend.begin_hot().await?;
    let RoundRows {
        leases: held_leases,
        jobs: job_rows,
        unknown,
        marked,
    } = read_round(db, &mut tx, uploads).await?;
    let (mut answers, checked) =
        check_uploads(db, &mut tx, uploads, &unknown, &job_rows, &held_leases).await?;
    let accepted = insert(db, &mut tx, &checked, now).await?;
    // Results of these work jobs may be stored by now (new, or final failures below).
    let stored = work_measured(&checked);
    let mut settling = Settling {
        accepted,
        writes: LeaseWrites::default(),
        finished: Vec::new(),
        now,
    };
    for (answer, (upload, held)) in answers.iter_mut().zip(uploads.iter().zip(&checked)) {
        if answer.is_none() {
            *answer = Some(Ok(
                acknowledge(db, &mut tx, upload, held, &mut settling).await?
            ));
        }
    }
    let Settling {
        mut writes,
        finished,
        ..
    } = settling;
    originals_stored(db, &mut tx, &stored).await?;
    settle_finished::<B>(&mut tx, &finished, &mut writes, now).await?;
    writes.apply(db, &mut tx).await?;
    tx.commit().await?;
    marked.committed();
    Ok(answers
        .into_iter()
        .map(|a| a.expect("every upload answered"))
        .collect())
}

/// What a round reads before it checks its uploads.
struct RoundRows<'d> {
    /// The lease rows its reports name, locked, by id.
    leases: HashMap<i64, LeaseRow>,
    /// The jobs its reports name, by id.
    jobs: HashMap<i64, JobRow>,
    /// Its workers that are not registered.
    unknown: HashSet<i64>,
    /// Its workers marked seen, to remember once the round commits.
    marked: Marked<'d>,
}

/// Reads, in this order, the lease rows the reports of `uploads` name (locked), their jobs,
/// and marks the uploading workers seen.
async fn read_round<'d, B: Backend>(
    db: &'d Queue<B>,
    tx: &mut B::Tx,
    uploads: &[&Upload],
) -> StoreResult<RoundRows<'d>> {
    let lease = uploads.first().map_or(Duration::ZERO, |u| u.lease);
    let mut attempts: Vec<i64> = uploads
        .iter()
        .flat_map(|u| u.reports.iter().map(|r| r.attempt))
        .collect();
    attempts.sort_unstable();
    attempts.dedup();
    let leases = leases::<B>(tx, &attempts, true).await?;
    let ids: Vec<i64> = uploads
        .iter()
        .flat_map(|u| u.reports.iter().map(|r| r.job_id))
        .collect();
    let jobs = jobs(db, tx, &ids).await?;
    let workers: Vec<i64> = uploads.iter().map(|u| u.worker_id).collect();
    let (unknown, marked) = touch_unless_recent(db, tx, &workers, lease).await?;
    Ok(RoundRows {
        leases,
        jobs,
        unknown,
        marked,
    })
}

/// The work jobs (not cross-checks) of the reports held that measured positions (results or
/// failed tries).
fn work_measured<'a>(checked: &[Vec<StoreResult<Held<'a>>>]) -> Vec<&'a JobRow> {
    checked
        .iter()
        .flatten()
        .flatten()
        .filter(|h| !h.job.check && (!h.ok.is_empty() || !h.failed.is_empty()))
        .map(|h| h.job)
        .collect()
}

/// The reports of each upload checked (see [`check_upload`]), in order, with its answer
/// when the upload failed as a whole (an unknown worker, invalid input): then it has no
/// reports held.
type CheckedUploads<'a> = (Vec<Option<Acks>>, Vec<Vec<StoreResult<Held<'a>>>>);

/// Checks every upload of a round against the leases and jobs read (see [`check_upload`]);
/// an upload of a worker `unknown` is that worker's `NotFound`.
async fn check_uploads<'a, B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    uploads: &[&'a Upload],
    unknown: &HashSet<i64>,
    jobs: &'a HashMap<i64, JobRow>,
    leases: &'a HashMap<i64, LeaseRow>,
) -> StoreResult<CheckedUploads<'a>> {
    let mut answers: Vec<Option<Acks>> = Vec::with_capacity(uploads.len());
    let mut checked: Vec<Vec<StoreResult<Held<'_>>>> = Vec::with_capacity(uploads.len());
    for upload in uploads {
        let verdict = if unknown.contains(&upload.worker_id) {
            Err(StoreError::NotFound(format!("worker {}", upload.worker_id)))
        } else {
            check_upload(db, tx, upload, jobs, leases).await
        };
        match verdict {
            Ok(held) => {
                answers.push(None);
                checked.push(held);
            }
            Err(e) => {
                answers.push(Some(Err(e)));
                checked.push(Vec::new());
            }
        }
    }
    Ok((answers, checked))
}

/// What acknowledging a round's reports gathers for the end of its transaction.
struct Settling<'h, 'a> {
    /// New rows per job, as inserted (taken by the first report of each job).
    accepted: HashMap<i64, u32>,
    /// Lease rows to renew (and, once settled, to close).
    writes: LeaseWrites,
    /// Reports saying their job is finished.
    finished: Vec<&'h Held<'a>>,
    /// The round's time.
    now: chrono::DateTime<chrono::Utc>,
}

/// The acks of one upload that passed its checks, one per report in order: each counts the
/// rows its report added (failed tries of positions recorded here); a finished job is noted
/// for settling, a held one's lease for renewal.
async fn acknowledge<'h, 'a, B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    upload: &Upload,
    held: &'h [StoreResult<Held<'a>>],
    settling: &mut Settling<'h, 'a>,
) -> StoreResult<Vec<StoreResult<BatchAck>>> {
    let now = settling.now;
    let mut acks = Vec::with_capacity(held.len());
    for h in held {
        let h = match h {
            Ok(h) => h,
            Err(e) => {
                acks.push(Err(group_error(e)));
                continue;
            }
        };
        // A job reported twice in one upload counts its new rows once.
        let mut n = settling.accepted.remove(&h.report.job_id).unwrap_or(0);
        if !h.failed.is_empty() {
            n += fail_positions::<B>(db, tx, h, upload.max_attempts, now).await?;
        }
        if h.report.finished {
            settling.finished.push(h);
        } else if !h.job.cancelled {
            settling.writes.renew(h.lease, after(now, upload.lease));
        }
        acks.push(Ok(BatchAck {
            accepted: n,
            duplicates: (h.report.results.len() as u32).saturating_sub(n),
            cancelled: h.job.cancelled,
        }));
    }
    Ok(acks)
}

/// A report's error as its ack carries it (store errors are not `Clone`).
fn group_error(e: &StoreError) -> StoreError {
    replicate(e)
}

/// Checks every report of one upload against the leases and jobs read: a lost lease (or an
/// unknown job) is that report's error; invalid input fails the whole upload.
async fn check_upload<'a, B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    upload: &'a Upload,
    jobs: &'a HashMap<i64, JobRow>,
    leases: &'a HashMap<i64, LeaseRow>,
) -> StoreResult<Vec<StoreResult<Held<'a>>>> {
    let mut out = Vec::with_capacity(upload.reports.len());
    for report in upload.reports.iter() {
        let report = Report::of_upload(upload.worker_id, report);
        let Some(job) = jobs.get(&report.job_id) else {
            out.push(Err(StoreError::NotFound(format!("job {}", report.job_id))));
            continue;
        };
        let lease = leases.get(&report.attempt);
        if let Err(e) = check_lease(job, lease, report.worker_id, report.attempt) {
            out.push(Err(e));
            continue;
        }
        let lease = lease.expect("checked: the lease exists");
        let suite = db.memory().statics.suite(tx, job.suite_id).await?;
        check_speed(db, tx, job, &report).await?;
        let checked = check_batch(job, &suite, &report)?;
        let (failed, ok) = if job.check {
            (Vec::new(), checked)
        } else {
            let (failed, ok): (Vec<Checked>, Vec<Checked>) =
                checked.into_iter().partition(|c| c.error.is_some());
            (failed, ok)
        };
        out.push(Ok(Held {
            report,
            job,
            lease,
            ok,
            failed,
        }));
    }
    Ok(out)
}

/// Refuses a report whose `speed` does not fit its job: runs for a job that is not a speed
/// job, results for one that is, a speed job finished without its runs, or runs that fail
/// [`SpeedReport::problem`](sweep_domain::wire::SpeedReport::problem) (the field named).
async fn check_speed<B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    job: &JobRow,
    report: &Report<'_>,
) -> StoreResult<()> {
    let id = job.id;
    let invalid = |m: String| Err(StoreError::Invalid(m));
    match (job.speed, report.speed) {
        (false, None) => Ok(()),
        (false, Some(_)) => invalid(format!("speed: job {id} is not a speed job")),
        (true, _) if !report.results.is_empty() => invalid(format!(
            "results: job {id} is a speed job: it reports `speed`, not results"
        )),
        (true, None) if report.finished => {
            invalid(format!("speed: speed job {id} finished without its runs"))
        }
        (true, None) => Ok(()),
        (true, Some(speed)) => {
            let sweep = db.memory().statics.sweep(tx, job.sweep_id).await?;
            let repeats = sweep.speed.as_ref().map_or(0, |s| s.repeats);
            match speed.problem(repeats) {
                Some(e) => invalid(format!("{}: {}", e.field, e.problem)),
                None if !report.finished => invalid(format!(
                    "finished: speed job {id} reports its runs once, with `finished`"
                )),
                None => Ok(()),
            }
        }
    }
}

/// Inserts every good measurement of the checked uploads (results, and cross-checks apart);
/// returns how many new rows each job got.
async fn insert<B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    checked: &[Vec<StoreResult<Held<'_>>>],
    now: chrono::DateTime<chrono::Utc>,
) -> StoreResult<HashMap<i64, u32>> {
    let mut results = Vec::new();
    let mut checks = Vec::new();
    for h in checked.iter().flatten().flatten() {
        let rows = if h.job.check {
            &mut checks
        } else {
            &mut results
        };
        rows.extend(h.ok.iter().map(|c| Measurement {
            job: h.job,
            worker_id: h.report.worker_id,
            attempt: h.report.attempt,
            c,
        }));
    }
    let mut accepted: HashMap<i64, u32> = HashMap::new();
    for job in db.backend.insert_results(tx, &results, now).await? {
        *accepted.entry(job).or_default() += 1;
    }
    for job in db.backend.insert_checks(tx, &checks, now).await? {
        *accepted.entry(job).or_default() += 1;
    }
    for h in checked.iter().flatten().flatten() {
        if let Some(report) = h.report.speed {
            let (worker, attempt) = (h.report.worker_id, h.report.attempt);
            let n = speed::store_runs::<B>(tx, h.job, worker, attempt, report, now).await?;
            *accepted.entry(h.job.id).or_default() += n;
        }
    }
    Ok(accepted)
}

/// Records each failing position of a report as one failed try of this (job, attempt) (a
/// re-sent batch and a position that already has its result add nothing), and stores the
/// final result of each that has now failed `max_attempts` times. Returns the rows new.
async fn fail_positions<B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    h: &Held<'_>,
    max_attempts: u32,
    now: chrono::DateTime<chrono::Utc>,
) -> StoreResult<u32> {
    let mut n = 0u32;
    for c in &h.failed {
        n += record_failed_try::<B>(tx, h, c, now).await? as u32;
    }
    let failures = failures_of::<B>(tx, h.job, &h.failed).await?;
    let finals = final_failures(&h.failed, &failures, max_attempts);
    let rows: Vec<Measurement<'_>> = finals
        .iter()
        .map(|c| Measurement {
            job: h.job,
            worker_id: h.report.worker_id,
            attempt: h.report.attempt,
            c,
        })
        .collect();
    db.backend.insert_results(tx, &rows, now).await?;
    Ok(n)
}

/// Records position `c` of report `h` as one failed try of its (job, attempt); returns the
/// rows inserted (none when it is recorded already or the position has its result).
async fn record_failed_try<B: Backend>(
    tx: &mut B::Tx,
    h: &Held<'_>,
    c: &Checked,
    now: chrono::DateTime<chrono::Utc>,
) -> StoreResult<u64> {
    let job = h.job;
    let mut cols = vec![
        "build_id",
        "suite_id",
        "position_index",
        "depth",
        "position_id",
        "job_id",
        "attempt",
        "worker_id",
        "error",
    ];
    let mut values = vec![
        Value::Int(job.build_id),
        Value::Int(job.suite_id),
        Value::Int(c.index.into()),
        Value::Int(job.depth.into()),
        Value::Text(&c.position_id),
        Value::Int(job.id),
        Value::Int(h.report.attempt),
        Value::Int(h.report.worker_id),
        Value::Text(c.error.as_deref().unwrap_or_default()),
    ];
    stamp(&mut cols, &mut values, "created_at", B::written_at(now));
    let marks: Vec<String> = (1..=cols.len()).map(|i| format!("${i}")).collect();
    // A SELECT, so a position that has its result by now records nothing.
    let sql = format!(
        "INSERT INTO position_failures ({}) SELECT {}
             WHERE NOT EXISTS (SELECT 1 FROM results r WHERE r.build_id = $1 AND r.suite_id = $2
                                 AND r.position_index = $3 AND r.depth = $4)
             ON CONFLICT (job_id, attempt, position_index) DO NOTHING",
        cols.join(", "),
        marks.join(", ")
    );
    tx.execute(&sql, &values).await
}

/// The errors of every failed try recorded of the positions `failed` of `job`'s build, suite
/// and depth (any job's, any attempt's), oldest first, by position.
async fn failures_of<B: Backend>(
    tx: &mut B::Tx,
    job: &JobRow,
    failed: &[Checked],
) -> StoreResult<BTreeMap<i32, Vec<String>>> {
    let indices: Vec<i64> = failed.iter().map(|c| i64::from(c.index)).collect();
    let sql = format!(
        "SELECT position_index, error FROM position_failures
         WHERE build_id = $1 AND suite_id = $2 AND depth = $3 AND position_index {}
         ORDER BY id",
        B::in_list("$4")
    );
    let mut failures: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for r in tx
        .rows(
            &sql,
            &[
                Value::Int(job.build_id),
                Value::Int(job.suite_id),
                Value::Int(job.depth.into()),
                Value::Ints(&indices),
            ],
        )
        .await?
    {
        let index = i32::try_from(r.int("position_index")?).unwrap_or(i32::MAX);
        failures.entry(index).or_default().push(r.text("error")?);
    }
    Ok(failures)
}

/// The jobs their holders said are finished: each is no longer held; of a sweep not cancelled,
/// one whose positions all have their result (a cross-check: its measurement) is complete (a cross-check's state is
/// set `done`), one with positions missing (lost, or still failing) goes back to the queue
/// for them.
async fn settle_finished<B: Backend>(
    tx: &mut B::Tx,
    finished: &[&Held<'_>],
    writes: &mut LeaseWrites,
    now: chrono::DateTime<chrono::Utc>,
) -> StoreResult<()> {
    if finished.is_empty() {
        return Ok(());
    }
    // A report measuring every position of its job needs no count: each has its result now
    // (stored, or found stored). Others (handed out again, some failed) are counted.
    let covered = |h: &Held<'_>| {
        let indices: HashSet<i32> = h.ok.iter().map(|c| c.index).collect();
        indices.len() >= h.job.count as usize
    };
    let mut stored: HashMap<i64, i64> = HashMap::new();
    for (check, table) in [(false, "results"), (true, "cross_checks")] {
        let ids: Vec<i64> = finished
            .iter()
            .filter(|h| h.job.check == check && !h.job.speed && !h.job.cancelled && !covered(h))
            .map(|h| h.job.id)
            .collect();
        if ids.is_empty() {
            continue;
        }
        let sql = stmt::measured_counts::<B>(table);
        for r in tx.rows(&sql, &[Value::Ints(&ids)]).await? {
            stored.insert(r.int("job_id")?, r.int("n")?);
        }
    }
    let (mut holes, mut checks_done) = (Vec::new(), Vec::new());
    for h in finished {
        writes.close(h.lease, h.job.id);
        if h.job.cancelled {
            // Closed with its sweep: nothing to complete or hand out again.
            continue;
        }
        // A speed job finishes with its runs (checked above): it is complete.
        let complete = h.job.speed
            || covered(h)
            || stored.get(&h.job.id).copied().unwrap_or(0) >= i64::from(h.job.count);
        match (complete, h.job.check || h.job.speed) {
            (true, true) => checks_done.push(h.job.id),
            (true, false) => {}
            (false, _) => holes.push(h.job),
        }
    }
    put_back::<B>(tx, &holes, now).await?;
    set_state::<B>(tx, &checks_done, "done").await
}
