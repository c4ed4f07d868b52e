//! Where a claim finds jobs, inside its transaction: jobs waiting to be handed out again
//! (`requeued`, oldest first), then fresh work through one cursor per build (`build_queue`:
//! the build's jobs in id order from `next_job`). Every statement is an index probe or an
//! index-ordered walk of as many entries as it returns: nothing here grows with the queue.
//!
//! A cursor row is locked for the rest of the claim (Postgres: `FOR UPDATE SKIP LOCKED`, so a
//! claim of another coordinator takes other builds meanwhile); the jobs it fetched are dealt
//! from the front, so the cursor moves past exactly the jobs handed out.

use std::collections::{HashMap, VecDeque};

use chrono::{DateTime, Utc};

use super::shares::{weight, Weighed};
use super::statements as stmt;
use super::statements::{Retried, Takeable};
use super::Queue;
use crate::store::backend::Backend;
use crate::store::job::{JobRow, LeaseRow};
use crate::store::sql::{Columns, Tx, Value};
use crate::store::StoreResult;

/// Takes up to `max` requeued jobs `takeable`, oldest first, out of `requeued`; returns them
/// in that order.
pub(super) async fn take_requeued<B: Backend>(
    tx: &mut B::Tx,
    max: i64,
    takeable: Takeable,
    retried: Retried,
) -> StoreResult<Vec<i64>> {
    if max <= 0 {
        return Ok(Vec::new());
    }
    let sql = stmt::take_requeued::<B>(takeable, retried);
    let rows = tx
        .rows(&sql, &[Value::Int(max), Value::Int(takeable.worker())])
        .await?;
    let mut taken = rows
        .iter()
        .map(|r| Ok((r.time("since")?, r.int("job_id")?)))
        .collect::<StoreResult<Vec<(DateTime<Utc>, i64)>>>()?;
    taken.sort_unstable();
    Ok(taken.into_iter().map(|(_, job)| job).collect())
}

/// Puts work jobs back in the queue (`requeued`, as of `since`); a job already there stays
/// as it is, and a cancelled sweep's or a failed build's is not put back (it is closed). A
/// cross-check goes back to `queued` in `jobs` instead (see [`requeue_checks`]).
pub(super) async fn requeue<B: Backend>(
    tx: &mut B::Tx,
    jobs: &[i64],
    since: DateTime<Utc>,
) -> StoreResult<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let sql = stmt::requeue::<B>();
    tx.execute(&sql, &[Value::Ints(jobs), Value::Time(since)])
        .await?;
    Ok(())
}

/// Puts `jobs` back in the queue as of `since`: work jobs in `requeued`, cross-checks and
/// speed jobs back to `queued` (see [`requeue`] and [`requeue_checks`]).
pub(crate) async fn put_back<B: Backend>(
    tx: &mut B::Tx,
    jobs: &[&JobRow],
    since: DateTime<Utc>,
) -> StoreResult<()> {
    let (checks, work): (Vec<&JobRow>, Vec<&JobRow>) =
        jobs.iter().copied().partition(|j| j.check || j.speed);
    let mut work: Vec<i64> = work.iter().map(|j| j.id).collect();
    work.sort_unstable();
    work.dedup();
    let checks: Vec<i64> = checks.iter().map(|j| j.id).collect();
    requeue::<B>(tx, &work, since).await?;
    requeue_checks::<B>(tx, &checks).await
}

/// Cross-checks back to `queued`, for any worker to take again.
async fn requeue_checks<B: Backend>(tx: &mut B::Tx, jobs: &[i64]) -> StoreResult<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let sql = stmt::requeue_checks::<B>();
    tx.execute(&sql, &[Value::Ints(jobs)]).await?;
    Ok(())
}

/// The builds at the head of the queue (whose next job is oldest) `takeable`, at most `max`,
/// in queue order.
pub(super) async fn head_builds<B: Backend>(
    tx: &mut B::Tx,
    max: i64,
    takeable: Takeable,
) -> StoreResult<Vec<i64>> {
    let sql = stmt::head_builds(takeable);
    let rows = tx
        .rows(&sql, &[Value::Int(max), Value::Int(takeable.worker())])
        .await?;
    rows.iter().map(|r| r.int("build_id")).collect()
}

/// The builds at the head of sweep `sweep`'s queue `takeable` (the most left first), at most
/// `max`; all of the queue's with `sweep` `None` (see [`head_builds`]).
pub(super) async fn heads_of<B: Backend>(
    tx: &mut B::Tx,
    sweep: Option<i64>,
    max: i64,
    takeable: Takeable,
) -> StoreResult<Vec<i64>> {
    let Some(sweep) = sweep else {
        return head_builds::<B>(tx, max, takeable).await;
    };
    let sql = stmt::head_builds_of(takeable);
    let rows = tx
        .rows(
            &sql,
            &[
                Value::Int(max),
                Value::Int(takeable.worker()),
                Value::Int(sweep),
            ],
        )
        .await?;
    rows.iter().map(|r| r.int("build_id")).collect()
}

/// The sweeps with fresh work, and those with cross-checks ready and no fresh work, with
/// their weights (see [`super::shares`]).
pub(super) async fn sweeps_with_work<B: Backend>(tx: &mut B::Tx) -> StoreResult<Vec<Weighed>> {
    let mut sweeps: Vec<(i64, String, String, bool)> = Vec::new();
    for (sql, work) in [
        (stmt::sweeps_with_work(), true),
        (stmt::sweeps_with_checks(), false),
        (stmt::sweeps_with_speed(), false),
    ] {
        for r in &tx.rows(&sql, &[]).await? {
            let id = r.int("id")?;
            if !sweeps.iter().any(|s| s.0 == id) {
                let who = r.opt_text("submitter")?.unwrap_or_default();
                sweeps.push((id, who, r.text("priority")?, work));
            }
        }
    }
    let mut per_submitter: HashMap<&str, usize> = HashMap::new();
    for (_, who, _, _) in &sweeps {
        *per_submitter.entry(who.as_str()).or_default() += 1;
    }
    let mut weighed: Vec<Weighed> = sweeps
        .iter()
        .map(|(sweep, who, priority, work)| Weighed {
            sweep: *sweep,
            weight: weight(priority, per_submitter[who.as_str()]),
            work: *work,
        })
        .collect();
    weighed.sort_by_key(|w| w.sweep);
    Ok(weighed)
}

/// Of `builds`, those with fresh work `takeable`, in the order given.
pub(super) async fn takeable_builds<B: Backend>(
    tx: &mut B::Tx,
    builds: &[i64],
    takeable: Takeable,
) -> StoreResult<Vec<i64>> {
    if builds.is_empty() {
        return Ok(Vec::new());
    }
    let sql = stmt::takeable_builds::<B>(takeable);
    let rows = tx
        .rows(&sql, &[Value::Ints(builds), Value::Int(takeable.worker())])
        .await?;
    let found = rows
        .iter()
        .map(|r| r.int("build_id"))
        .collect::<StoreResult<std::collections::HashSet<i64>>>()?;
    Ok(builds
        .iter()
        .copied()
        .filter(|b| found.contains(b))
        .collect())
}

/// One build's cursor as a claim holds it.
#[derive(Debug)]
struct Cursor {
    /// The next job id the cursor stands at, as locked.
    next_job: i64,
    /// The build's last job (its range ends there).
    last_job: i64,
    /// Jobs left at or after it, as locked.
    remaining: i64,
    /// Fetched jobs at or after the cursor not dealt yet, in id order.
    fetched: VecDeque<i64>,
    /// The last job handed out (the cursor moves past it).
    last_taken: Option<i64>,
    /// Jobs handed out.
    taken: i64,
    /// A fetch returned fewer jobs than asked: there are no more.
    exhausted: bool,
}

/// The cursors a claim has locked, and the fresh jobs it fetched through them.
#[derive(Debug, Default)]
pub(super) struct Cursors {
    held: HashMap<i64, Cursor>,
    /// Builds whose row another claim holds, or that have no fresh work (left alone).
    unavailable: std::collections::HashSet<i64>,
}

impl Cursors {
    /// Makes at least `n` jobs of each `(build, n)` ready to take where the build has them:
    /// locks the cursors not held yet (skipping those another claim holds) and reads their
    /// first jobs in one statement, then reads more past the held cursors that are short in
    /// another. The jobs read are kept in the cache of what never changes of them, so the
    /// claim's payload reads no job row again.
    pub async fn fetch<B: Backend>(
        &mut self,
        db: &Queue<B>,
        tx: &mut B::Tx,
        wants: &[(i64, i64)],
    ) -> StoreResult<()> {
        let new = self.not_known(wants);
        if !new.is_empty() {
            self.lock(db, tx, &new).await?;
        }
        let more = self.short(wants);
        if more.is_empty() {
            return Ok(());
        }
        self.read_more(db, tx, more).await
    }

    /// The `(build, n)` of `wants` whose cursor this claim has not tried to lock yet, each
    /// build once.
    fn not_known(&self, wants: &[(i64, i64)]) -> Vec<(i64, i64)> {
        let mut new: Vec<(i64, i64)> = Vec::new();
        for &(build, n) in wants {
            let known = self.held.contains_key(&build) || self.unavailable.contains(&build);
            if !known && !new.iter().any(|w| w.0 == build) {
                new.push((build, n));
            }
        }
        new
    }

    /// Locks the cursors of `new` (skipping those another claim holds) with their first
    /// jobs; a build whose cursor is not locked is unavailable.
    async fn lock<B: Backend>(
        &mut self,
        db: &Queue<B>,
        tx: &mut B::Tx,
        new: &[(i64, i64)],
    ) -> StoreResult<()> {
        let statics = &db.memory().statics;
        for c in db.backend.lock_cursors(tx, new).await? {
            let asked = new.iter().find(|w| w.0 == c.build_id).map_or(0, |w| w.1);
            statics.keep_jobs(&c.jobs);
            self.held.insert(
                c.build_id,
                Cursor {
                    next_job: c.next_job,
                    last_job: c.last_job,
                    remaining: c.remaining,
                    exhausted: (c.jobs.len() as i64) < asked,
                    fetched: c.jobs.iter().map(|j| j.id).collect(),
                    last_taken: None,
                    taken: 0,
                },
            );
        }
        for &(b, _) in new {
            if !self.held.contains_key(&b) {
                self.unavailable.insert(b);
            }
        }
        Ok(())
    }

    /// The held cursors of `wants` with fewer jobs fetched than wanted and maybe more to
    /// read: (build, first job to read, the build's last job, how many more), each build once.
    fn short(&self, wants: &[(i64, i64)]) -> Vec<(i64, i64, i64, i64)> {
        let mut more = Vec::new();
        for &(build, n) in wants {
            let Some(c) = self.held.get(&build) else {
                continue;
            };
            let short = n - c.fetched.len() as i64;
            if short > 0
                && !c.exhausted
                && !more.iter().any(|m: &(i64, i64, i64, i64)| m.0 == build)
            {
                let after = c
                    .fetched
                    .back()
                    .or(c.last_taken.as_ref())
                    .map_or(c.next_job, |&j| j + 1);
                more.push((build, after, c.last_job, short));
            }
        }
        more
    }

    /// Reads the jobs `more` asks for past the held cursors (see [`Cursors::short`]) and
    /// adds them to what each fetched.
    async fn read_more<B: Backend>(
        &mut self,
        db: &Queue<B>,
        tx: &mut B::Tx,
        more: Vec<(i64, i64, i64, i64)>,
    ) -> StoreResult<()> {
        let read = db.backend.jobs_after(tx, &more).await?;
        db.memory().statics.keep_jobs(&read);
        let mut got: HashMap<i64, Vec<i64>> = HashMap::new();
        for job in &read {
            got.entry(job.build_id).or_default().push(job.id);
        }
        for (build, _, _, asked) in more {
            let mut jobs = got.remove(&build).unwrap_or_default();
            jobs.sort_unstable();
            let c = self
                .held
                .get_mut(&build)
                .expect("fetched for a held cursor");
            c.exhausted = (jobs.len() as i64) < asked;
            c.fetched.extend(jobs);
        }
        Ok(())
    }

    /// Builds this claim knows have no fresh job for it: held by another claim, or found
    /// empty.
    pub fn spent(&self) -> usize {
        self.unavailable.len()
            + self
                .held
                .values()
                .filter(|c| c.exhausted && c.fetched.is_empty())
                .count()
    }

    /// Whether `build` is one of those.
    pub fn is_spent(&self, build: i64) -> bool {
        self.unavailable.contains(&build)
            || self
                .held
                .get(&build)
                .is_some_and(|c| c.exhausted && c.fetched.is_empty())
    }

    /// The next fetched job of `build`, taken (the cursor moves past it).
    pub fn take(&mut self, build: i64) -> Option<i64> {
        let c = self.held.get_mut(&build)?;
        let job = c.fetched.pop_front()?;
        c.last_taken = Some(job);
        c.taken += 1;
        Some(job)
    }

    /// Writes the cursors that moved: past the last job taken, or gone once the build has
    /// no fresh work left.
    pub async fn save<B: Backend>(self, db: &Queue<B>, tx: &mut B::Tx) -> StoreResult<()> {
        let mut moved = Vec::new();
        let mut done = Vec::new();
        for (build, c) in self.held {
            let Some(last) = c.last_taken else { continue };
            let remaining = c.remaining - c.taken;
            if remaining <= 0 || (c.exhausted && c.fetched.is_empty()) {
                done.push(build);
            } else {
                let next = c.fetched.front().copied().unwrap_or(last + 1);
                moved.push((build, next, remaining));
            }
        }
        // Rows with nothing left are gone from the queue (a fetch that came back short
        // proves it even if `remaining` says otherwise).
        if !done.is_empty() {
            let sql = stmt::delete_cursors::<B>();
            tx.execute(&sql, &[Value::Ints(&done)]).await?;
        }
        db.backend.set_cursors(tx, &moved).await
    }
}

/// The jobs `ids`, each with what a worker call checks (see [`JobRow`]), by id; an unknown
/// job is absent. What never changes comes from the cache where it can (a job handed out by
/// this coordinator is there); the flags of their builds and sweeps are read every time.
pub(crate) async fn jobs<B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    ids: &[i64],
) -> StoreResult<HashMap<i64, JobRow>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let statics = &db.memory().statics;
    let (mut found, missing) = statics.jobs(ids);
    if !missing.is_empty() {
        let sql = stmt::jobs::<B>();
        let read = tx
            .rows(&sql, &[Value::Ints(&missing)])
            .await?
            .iter()
            .map(JobRow::read)
            .collect::<StoreResult<Vec<_>>>()?;
        statics.keep_jobs(&read);
        found.extend(read.into_iter().map(|j| (j.id, j)));
    }
    let mut builds: Vec<i64> = found.values().map(|j| j.build_id).collect();
    builds.sort_unstable();
    builds.dedup();
    let mut flags: HashMap<i64, (bool, bool)> = HashMap::new();
    for r in tx
        .rows(&stmt::build_flags::<B>(), &[Value::Ints(&builds)])
        .await?
    {
        flags.insert(
            r.int("id")?,
            (r.flag("build_failed")?, r.flag("cancelled")?),
        );
    }
    for job in found.values_mut() {
        // A build gone is a sweep deleted (the job may still be in this coordinator's cache,
        // or named by a lease row): nobody holds its jobs any more.
        let (failed, cancelled) = flags.get(&job.build_id).copied().unwrap_or((true, false));
        job.build_failed = failed;
        job.cancelled = cancelled;
    }
    Ok(found)
}

/// The lease rows `ids`, by id; a lease that is gone is absent. `lock`: locked for the rest
/// of the transaction, in id order (Postgres), as every call that writes them locks them.
pub(crate) async fn leases<B: Backend>(
    tx: &mut B::Tx,
    ids: &[i64],
    lock: bool,
) -> StoreResult<HashMap<i64, LeaseRow>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let sql = stmt::leases::<B>(lock);
    tx.rows(&sql, &[Value::Ints(ids)])
        .await?
        .iter()
        .map(|r| LeaseRow::read(r).map(|l| (l.id, l)))
        .collect()
}
