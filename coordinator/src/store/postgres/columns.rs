//! What an upload stores, as the columns of one multi-row insert (`UNNEST` of arrays):
//! [`Measured`] holds what a result and a cross-check measurement both have, bound as `$1` to
//! `$15` of either insert; [`ResultColumns`] adds the verdict, scores and counters of a
//! result; a cross-check's measurements are [`Measured`] alone.

use sqlx::postgres::PgArguments;
use sqlx::query::QueryScalar;
use sqlx::{Postgres, Transaction};

use super::statements;
use crate::store::batch::{Checked, Report};
use crate::store::job::JobRow;
use crate::store::StoreResult;

/// The insert of a column set, before its columns are bound.
type Insert<'q> = QueryScalar<'q, Postgres, i64, PgArguments>;

/// Measurements of several jobs (of any workers), one array element per position.
#[derive(Default)]
pub(super) struct Measured {
    worker: Vec<i64>,
    build: Vec<i64>,
    suite: Vec<i64>,
    idx: Vec<i32>,
    depth: Vec<i32>,
    nodes_limit: Vec<i64>,
    sweep: Vec<i64>,
    job: Vec<i64>,
    attempt: Vec<i32>,
    pid: Vec<String>,
    nodes: Vec<i64>,
    bm: Vec<String>,
    reached: Vec<i32>,
    ms: Vec<i64>,
    err: Vec<Option<String>>,
}

impl Measured {
    /// Adds one job's checked measurements (as reported: errors included).
    pub fn push(&mut self, job: &JobRow, report: &Report<'_>, rows: &[Checked]) {
        for c in rows {
            self.worker.push(report.worker_id);
            self.build.push(job.build_id);
            self.suite.push(job.suite_id);
            self.idx.push(c.index);
            self.depth.push(job.depth);
            self.nodes_limit.push(job.nodes_limit);
            self.sweep.push(job.sweep_id);
            self.job.push(report.job_id);
            self.attempt.push(report.attempt);
            self.pid.push(c.position_id.clone());
            self.nodes.push(c.nodes);
            self.bm.push(c.bestmove.clone());
            self.reached.push(c.reached_depth);
            self.ms.push(c.time_ms);
            self.err.push(c.error.clone());
        }
    }

    /// Moves every row of `other` to the end of these.
    pub fn extend(&mut self, mut other: Measured) {
        self.worker.append(&mut other.worker);
        self.build.append(&mut other.build);
        self.suite.append(&mut other.suite);
        self.idx.append(&mut other.idx);
        self.depth.append(&mut other.depth);
        self.nodes_limit.append(&mut other.nodes_limit);
        self.sweep.append(&mut other.sweep);
        self.job.append(&mut other.job);
        self.attempt.append(&mut other.attempt);
        self.pid.append(&mut other.pid);
        self.nodes.append(&mut other.nodes);
        self.bm.append(&mut other.bm);
        self.reached.append(&mut other.reached);
        self.ms.append(&mut other.ms);
        self.err.append(&mut other.err);
    }

    /// Binds the columns as `$1` to `$15`, in the order the inserts list them.
    fn bind<'q>(&'q self, insert: Insert<'q>) -> Insert<'q> {
        insert
            .bind(&self.worker)
            .bind(&self.build)
            .bind(&self.suite)
            .bind(&self.idx)
            .bind(&self.depth)
            .bind(&self.nodes_limit)
            .bind(&self.sweep)
            .bind(&self.job)
            .bind(&self.attempt)
            .bind(&self.pid)
            .bind(&self.nodes)
            .bind(&self.bm)
            .bind(&self.reached)
            .bind(&self.ms)
            .bind(&self.err)
    }

    /// Inserts every row as a cross-check measurement (see [`statements::INSERT_CHECKS`]);
    /// returns the job of each new row.
    pub async fn insert_checks(&self, tx: &mut Transaction<'_, Postgres>) -> StoreResult<Vec<i64>> {
        if self.job.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self
            .bind(sqlx::query_scalar(statements::INSERT_CHECKS))
            .fetch_all(&mut **tx)
            .await?)
    }
}

/// Results of several jobs (of any workers), one array element per position.
#[derive(Default)]
pub(super) struct ResultColumns {
    measured: Measured,
    solved: Vec<bool>,
    cp: Vec<Option<i32>>,
    mate: Vec<Option<i32>>,
    counters: Vec<Option<String>>,
}

impl ResultColumns {
    /// Adds one job's checked results.
    pub fn push(&mut self, job: &JobRow, report: &Report<'_>, rows: &[Checked]) {
        self.measured.push(job, report, rows);
        for c in rows {
            self.solved.push(c.solved);
            self.cp.push(c.score_cp);
            self.mate.push(c.score_mate);
            self.counters.push(c.counters.clone());
        }
    }

    /// Moves every row of `other` to the end of these.
    pub fn extend(&mut self, mut other: ResultColumns) {
        self.measured.extend(other.measured);
        self.solved.append(&mut other.solved);
        self.cp.append(&mut other.cp);
        self.mate.append(&mut other.mate);
        self.counters.append(&mut other.counters);
    }

    /// Inserts every row, ignoring positions that already have a result (see
    /// [`statements::INSERT_RESULTS`]); returns the job of each row that was new.
    pub async fn insert(&self, tx: &mut Transaction<'_, Postgres>) -> StoreResult<Vec<i64>> {
        if self.measured.job.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self
            .measured
            .bind(sqlx::query_scalar(statements::INSERT_RESULTS))
            .bind(&self.solved)
            .bind(&self.cp)
            .bind(&self.mate)
            .bind(&self.counters)
            .fetch_all(&mut **tx)
            .await?)
    }
}
