//! Results read straight from a sweep's database and ranked from scratch, as the issue
//! states the rule, so tests check the coordinator's promotions and searches against an
//! independent computation rather than against its own code.

use std::collections::BTreeMap;
use std::path::Path;

/// The baseline's row name.
pub const BASELINE: &str = "head_reference";

/// One result as stored.
#[derive(Debug, Clone)]
pub struct Stored {
    pub build: String,
    pub suite: String,
    pub index: i64,
    pub nodes: i64,
    pub solved: bool,
    pub error: bool,
}

pub const RESULTS_SQL: &str =
    "SELECT b.name, su.name, CAST(r.position_index AS BIGINT), r.nodes, r.solved,
                                  r.error IS NOT NULL
                           FROM results r JOIN builds b ON b.id = r.build_id
                           JOIN suites su ON su.id = r.suite_id WHERE r.sweep_id = $1";

pub type Row = (String, String, i64, i64, bool, bool);

pub fn stored(rows: Vec<Row>) -> Vec<Stored> {
    rows.into_iter()
        .map(|(build, suite, index, nodes, solved, error)| Stored {
            build,
            suite,
            index,
            nodes,
            solved,
            error,
        })
        .collect()
}

pub async fn sqlite_results(db: &Path, sweep: i64) -> Vec<Stored> {
    use sqlx::Connection;
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}?mode=ro", db.display()))
        .await
        .unwrap();
    let rows: Vec<Row> = sqlx::query_as(&RESULTS_SQL.replace("$1", "?1"))
        .bind(sweep)
        .fetch_all(&mut conn)
        .await
        .unwrap();
    stored(rows)
}

/// The eligible variants of a stage over `suite` (of `among`, or all), best first, with their ratio and solved
/// delta: the rule computed from scratch (geometric mean of per-position node
/// ratios over positions both searched without error and with nodes; eligible when solved
/// is at most `max_loss` below the baseline's over the positions both finished; ties by more
/// solved, then name).
pub fn ranking(
    results: &[Stored],
    suite: &str,
    max_loss: i64,
    among: Option<&[String]>,
) -> Vec<(String, f64, i64)> {
    let of = |build: &str| -> BTreeMap<i64, &Stored> {
        results
            .iter()
            .filter(|r| r.build == build && r.suite == suite && !r.error)
            .map(|r| (r.index, r))
            .collect()
    };
    let base = of(BASELINE);
    let mut names: Vec<String> = results
        .iter()
        .filter(|r| r.suite == suite && r.build != BASELINE)
        .filter(|r| among.is_none_or(|a| a.contains(&r.build)))
        .map(|r| r.build.clone())
        .collect();
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    for name in names {
        let (mut logs, mut n, mut delta) = (0f64, 0u32, 0i64);
        for (index, r) in of(&name) {
            let Some(b) = base.get(&index) else { continue };
            delta += i64::from(r.solved) - i64::from(b.solved);
            if r.nodes > 0 && b.nodes > 0 {
                logs += (r.nodes as f64 / b.nodes as f64).ln();
                n += 1;
            }
        }
        if n > 0 && delta >= -max_loss {
            out.push((name, (logs / f64::from(n)).exp(), delta));
        }
    }
    out.sort_by(|a, b| a.1.total_cmp(&b.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
    out
}

/// A config run to its end with `sweep run` in a scratch folder.
pub struct LocalRun {
    /// The scratch folder (removed when dropped).
    pub dir: tempfile::TempDir,
    /// The JSON table `sweep run` printed.
    pub table: serde_json::Value,
    /// The sweep's id.
    pub id: i64,
    /// Its SQLite file.
    pub db: std::path::PathBuf,
    /// Its results, read from the file.
    pub results: Vec<Stored>,
}

/// Runs the config `text` with `sweep run` (see [`super::run_json`]).
pub async fn run_local(text: &str) -> LocalRun {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, text).unwrap();
    let table = super::run_json(config.to_str().unwrap(), dir.path(), &[]);
    let id = table["sweep"]["id"].as_i64().unwrap();
    let db = dir.path().join("sweep.db");
    let results = sqlite_results(&db, id).await;
    LocalRun {
        dir,
        table,
        id,
        db,
        results,
    }
}

impl LocalRun {
    /// `sweep COMMAND ID --database DB ARGS...` on the run's database: its output, the
    /// command having succeeded.
    pub fn read(&self, command: &str, args: &[&str]) -> String {
        let id = self.id.to_string();
        let mut all = vec![command, &id, "--database", self.db.to_str().unwrap()];
        all.extend_from_slice(args);
        let (code, out, err) = super::cli(&all);
        assert_eq!(code, 0, "sweep {all:?}: {err}");
        out
    }
}

/// Sweep `id`'s results on a Postgres connection, and how many workers measured them.
pub async fn pg_results(conn: &mut sqlx::PgConnection, id: i64) -> (Vec<Stored>, i64) {
    let rows: Vec<Row> = sqlx::query_as(RESULTS_SQL)
        .bind(id)
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    let workers: i64 =
        sqlx::query_scalar("SELECT count(DISTINCT worker_id) FROM results WHERE sweep_id = $1")
            .bind(id)
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    (stored(rows), workers)
}

/// A config run to its end through a coordinator on a fresh Postgres with two worker
/// processes: its table, its results read from the database, and how many workers measured
/// them.
pub struct TwoWorkerRun {
    /// The JSON table the API serves.
    pub table: serde_json::Value,
    /// Its results, read from the database.
    pub results: Vec<Stored>,
    /// Workers that measured them.
    pub workers: i64,
}

/// Runs the config `text` as [`TwoWorkerRun`] says, after checking that each of `bad` (a
/// config and the field its refusal names) is refused (422) before anything is stored.
pub async fn run_on_two_workers(text: &str, bad: &[(String, &str)]) -> TwoWorkerRun {
    let db = super::TestDb::new().await;
    let (_coordinator, base) = super::start_coordinator(&db.url, 30);
    let _workers = super::start_two_workers(&base, &[]);
    for (config, field) in bad {
        let resp = super::post_toml(&format!("{base}/api/v1/sweeps"), config.clone()).await;
        assert_eq!(resp.status(), 422, "{config}");
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["field"], *field, "{body}");
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, text).unwrap();
    let id = super::submit(&base, config.to_str().unwrap());
    let detail = super::wait_final(&base, id, std::time::Duration::from_secs(600)).await;
    assert_eq!(detail["state"], "done", "{detail}");
    let table = super::get_json(&format!("{base}/api/v1/sweeps/{id}/table")).await;
    let (results, workers) = pg_results(&mut db.connect().await, id).await;
    TwoWorkerRun {
        table,
        results,
        workers,
    }
}
