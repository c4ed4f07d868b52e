//! The two backends' schemas side by side. Postgres and SQLite each have their own migrations
//! (`migrations/postgres`, `migrations/sqlite`) and each keeps a sweep's table summed by its
//! own trigger; the conformance suite shows they behave alike case by case, and this file
//! compares them directly:
//! - the migrated catalogues: the same tables, the same columns (name, kind, nullability), the
//!   same primary keys and unique keys, and the same secondary indexes except the ones listed
//!   in [`ONE_SIDED_INDEXES`] with their reasons;
//! - the sums each trigger keeps, against `sums_of` over the results themselves, for random
//!   sweeps, outcomes, node counts and arrival orders (a property test, shrunk on failure);
//! - the migration files: from 0024 on, a change has the same number and name on both sides.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use sqlx::{Connection, PgConnection, Row, SqliteConnection};
use support::*;
use sweep_domain::spec::{SweepSpec, DEFAULT_BASELINE};
use sweep_domain::table::sums_of;
use sweep_domain::wire::{JobLease, PositionResult};

/// Indexes only one backend has: each backend indexes for its own statements, which differ
/// where Postgres serves many writers at once and SQLite one.
const ONE_SIDED_INDEXES: &[(&str, &str)] = &[
    // Postgres's lease path (migration 0005) skips a worker's failed builds and tries with an
    // index probe per lease; SQLite's lease reads those tables whole under its single writer.
    ("postgres", "build_failures_worker"),
    ("postgres", "position_failures_worker"),
    // Postgres's sums trigger walks a position's results of every build (0019), and it
    // replaced `results_sweep` there; SQLite's trigger probes the baseline's primary key.
    ("postgres", "results_position"),
    ("sqlite", "results_sweep"),
    // SQLite closes a failed build's jobs by `build_id`; Postgres finds them by the build's
    // range of job ids (0018) and dropped its index.
    ("sqlite", "jobs_build"),
];

/// The first migration number both backends share; before it their numbering differs.
const ALIGNED_FROM: u32 = 24;

/// A database's schema, in terms both backends can be compared in.
#[derive(Debug, Default, PartialEq)]
struct Schema {
    /// table -> column -> (kind as SQLite declares it, nullable).
    columns: BTreeMap<String, BTreeMap<String, (String, bool)>>,
    /// table -> primary key columns, in key order.
    primary_keys: BTreeMap<String, Vec<String>>,
    /// (table, columns, partial) of every unique key other than the primary key.
    uniques: BTreeSet<(String, Vec<String>, bool)>,
    /// index name -> (table, columns, partial) of every other index.
    indexes: BTreeMap<String, (String, Vec<String>, bool)>,
}

/// The SQLite type a Postgres column type is declared as in the twin migration: instants are
/// milliseconds since the epoch, JSON and arrays are text.
fn sqlite_kind(pg_type: &str) -> String {
    match pg_type {
        "bigint" | "integer" | "smallint" | "timestamp with time zone" => "INTEGER",
        "text" | "jsonb" | "ARRAY" => "TEXT",
        "boolean" => "BOOLEAN",
        "bytea" => "BLOB",
        other => panic!("a Postgres column of type {other}: say here what SQLite declares for it"),
    }
    .to_string()
}

/// sqlx's own bookkeeping, which each backend lays out its own way.
fn ours(table: &str) -> bool {
    table != "_sqlx_migrations" && !table.starts_with("sqlite_")
}

async fn postgres_schema(url: &str) -> Schema {
    let mut conn = PgConnection::connect(url)
        .await
        .expect("connect to Postgres");
    let mut schema = Schema::default();
    let columns = sqlx::query(
        "SELECT table_name::text, column_name::text, data_type::text, is_nullable = 'YES'
         FROM information_schema.columns WHERE table_schema = 'public'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("columns");
    for row in columns {
        let table: String = row.get(0);
        if ours(&table) {
            let kind = sqlite_kind(row.get::<String, _>(2).as_str());
            schema
                .columns
                .entry(table)
                .or_default()
                .insert(row.get(1), (kind, row.get(3)));
        }
    }
    let indexes = sqlx::query(
        "SELECT t.relname::text, i.relname::text, ix.indisprimary, ix.indisunique,
                ix.indpred IS NOT NULL,
                array(SELECT a.attname::text
                      FROM unnest(ix.indkey) WITH ORDINALITY k(attnum, ord)
                      JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
                      ORDER BY k.ord)
         FROM pg_index ix
         JOIN pg_class i ON i.oid = ix.indexrelid
         JOIN pg_class t ON t.oid = ix.indrelid
         JOIN pg_namespace n ON n.oid = t.relnamespace
         WHERE n.nspname = 'public'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("indexes");
    for row in indexes {
        let (table, name): (String, String) = (row.get(0), row.get(1));
        let (primary, unique, partial): (bool, bool, bool) = (row.get(2), row.get(3), row.get(4));
        let columns: Vec<String> = row.get(5);
        if !ours(&table) {
        } else if primary {
            schema.primary_keys.insert(table, columns);
        } else if unique {
            schema.uniques.insert((table, columns, partial));
        } else {
            schema.indexes.insert(name, (table, columns, partial));
        }
    }
    schema
}

async fn sqlite_schema(path: &str) -> Schema {
    let mut conn = SqliteConnection::connect(&format!("sqlite://{path}"))
        .await
        .expect("open the SQLite file");
    let mut schema = Schema::default();
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table'")
            .fetch_all(&mut conn)
            .await
            .expect("tables");
    for table in tables.into_iter().filter(|t| ours(t)) {
        let columns =
            sqlx::query("SELECT name, type, \"notnull\" OR pk > 0, pk FROM pragma_table_info(?)")
                .bind(&table)
                .fetch_all(&mut conn)
                .await
                .expect("columns");
        let mut key: Vec<(i64, String)> = Vec::new();
        for row in columns {
            let (name, kind, not_null, pk): (String, String, bool, i64) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            if pk > 0 {
                key.push((pk, name.clone()));
            }
            let table_columns = schema.columns.entry(table.clone()).or_default();
            table_columns.insert(name, (kind.to_uppercase(), !not_null));
        }
        key.sort();
        if !key.is_empty() {
            let key = key.into_iter().map(|(_, c)| c).collect();
            schema.primary_keys.insert(table.clone(), key);
        }
        let indexes =
            sqlx::query("SELECT name, \"unique\", origin, partial FROM pragma_index_list(?)")
                .bind(&table)
                .fetch_all(&mut conn)
                .await
                .expect("indexes");
        for row in indexes {
            let (name, unique, origin, partial): (String, bool, String, bool) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            let columns: Vec<String> =
                sqlx::query_scalar("SELECT name FROM pragma_index_info(?) ORDER BY seqno")
                    .bind(&name)
                    .fetch_all(&mut conn)
                    .await
                    .expect("index columns");
            if origin == "pk" {
                schema.primary_keys.insert(table.clone(), columns);
            } else if unique {
                schema.uniques.insert((table.clone(), columns, partial));
            } else {
                schema
                    .indexes
                    .insert(name, (table.clone(), columns, partial));
            }
        }
    }
    schema
}

/// Both backends migrated from nothing describe the same tables, columns, keys and indexes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrated_schemas_match() {
    let (pg, lite) = (Backend::postgres().await, Backend::sqlite().await);
    let (mut pg, mut lite) = (
        postgres_schema(&pg.url).await,
        sqlite_schema(&lite.url).await,
    );
    for (side, name) in ONE_SIDED_INDEXES {
        let schema = if *side == "postgres" {
            &mut pg
        } else {
            &mut lite
        };
        assert!(
            schema.indexes.remove(*name).is_some(),
            "{side} has no index {name}: drop it from ONE_SIDED_INDEXES"
        );
    }
    assert!(
        pg.columns.len() >= 20,
        "tables read: {:?}",
        pg.columns.keys()
    );
    let tables = |s: &Schema| s.columns.keys().cloned().collect::<BTreeSet<_>>();
    assert_same("tables", &tables(&pg), &tables(&lite));
    for (table, columns) in &pg.columns {
        assert_same(
            &format!("columns of {table}"),
            columns,
            &lite.columns[table],
        );
    }
    assert_same("primary keys", &pg.primary_keys, &lite.primary_keys);
    assert_same("unique keys", &pg.uniques, &lite.uniques);
    assert_same("indexes", &pg.indexes, &lite.indexes);
}

/// Fails naming only the entries that differ between the Postgres and SQLite sides.
fn assert_same<'a, T>(what: &str, pg: &'a T, lite: &'a T)
where
    &'a T: IntoIterator,
    <&'a T as IntoIterator>::Item: std::fmt::Debug,
{
    let entries =
        |side: &'a T| -> BTreeSet<String> { side.into_iter().map(|e| format!("{e:?}")).collect() };
    let (pg, lite) = (entries(pg), entries(lite));
    assert!(
        pg == lite,
        "{what} differ:\n  only in Postgres: {:?}\n  only in SQLite: {:?}",
        pg.difference(&lite).collect::<Vec<_>>(),
        lite.difference(&pg).collect::<Vec<_>>()
    );
}

/// From [`ALIGNED_FROM`] on, every migration has its twin under the same number and name.
#[test]
fn migrations_are_numbered_alike_from_0024() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
    let aligned = |backend: &str| -> BTreeSet<String> {
        std::fs::read_dir(dir.join(backend))
            .expect("migrations directory")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|name| name[..4].parse::<u32>().is_ok_and(|n| n >= ALIGNED_FROM))
            .collect()
    };
    let (pg, lite) = (aligned("postgres"), aligned("sqlite"));
    assert!(pg.len() >= 3, "migrations read: {pg:?}");
    assert_eq!(
        pg, lite,
        "migrations from {ALIGNED_FROM:04} (Postgres, SQLite)"
    );
}

/// One random sweep and what happens to it.
#[derive(Debug, Clone)]
struct Case {
    /// Variants besides the baseline.
    variants: usize,
    /// Positions per job (the suite has 5).
    chunk: u32,
    /// Outcome of each position of each job, in lease order (`job * 5 + position`).
    outcomes: Vec<Outcome>,
    /// The order in which jobs are uploaded (indices into the leases).
    order: Vec<usize>,
    /// How many jobs each upload carries, cycled.
    group_sizes: Vec<usize>,
    /// Whether the sweep measures everything again; if not, it takes the results earlier
    /// cases stored for the same builds (every case shares the baseline and variant 1), and
    /// those count as reused in the sums.
    recompute: bool,
}

#[derive(Debug, Clone)]
enum Outcome {
    /// A final error (one try is all a position gets here).
    Error,
    /// A search: its node count, and whether it played the suite's best move.
    Searched { nodes: u64, best: bool },
}

fn outcome() -> impl Strategy<Value = Outcome> {
    let nodes = prop_oneof![
        4 => 0u64..5_000_000,
        1 => Just(0u64),
        // Counts near the top of what a result stores: the sums carry into 128 bits.
        2 => (i64::MAX as u64 / 2)..=(i64::MAX as u64),
    ];
    prop_oneof![
        1 => Just(Outcome::Error),
        4 => (nodes, any::<bool>()).prop_map(|(nodes, best)| Outcome::Searched { nodes, best }),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=3, 1u32..=5).prop_flat_map(|(variants, chunk)| {
        let jobs = (variants + 1) * 5_usize.div_ceil(chunk as usize);
        (
            proptest::collection::vec(outcome(), jobs * 5),
            Just((0..jobs).collect::<Vec<usize>>()).prop_shuffle(),
            proptest::collection::vec(1usize..=4, 1..=4),
            any::<bool>(),
        )
            .prop_map(move |(outcomes, order, group_sizes, recompute)| Case {
                variants,
                chunk,
                outcomes,
                order,
                group_sizes,
                recompute,
            })
    })
}

fn results_of(case: &Case, job: usize, lease: &JobLease) -> Vec<PositionResult> {
    let moves = |best: bool, index: u32| {
        if best {
            GOOD_MOVES[index as usize]
        } else {
            "a1a1"
        }
    };
    lease
        .positions
        .iter()
        .map(|p| match case.outcomes[job * 5 + p.index as usize] {
            Outcome::Error => failed(p.index, "engine crashed"),
            Outcome::Searched { nodes, best } => PositionResult {
                nodes,
                ..result(p.index, moves(best, p.index))
            },
        })
        .collect()
}

/// Random cases per backend.
const CASES: u32 = 48;

/// Runs `case` as sweep `name`: after every upload, the sums the database keeps equal
/// `sums_of` over the results it holds. Returns how many results it took from earlier cases.
async fn sums_follow(db: &Database, name: String, case: Case) -> Result<u64, TestCaseError> {
    let (store, queue) = (&*db.store, &*db.queue);
    let values: Vec<i64> = (1..=case.variants as i64).collect();
    let spec = SweepSpec {
        recompute: case.recompute,
        ..spec(&name, &values, case.chunk)
    };
    let (id, jobs) = create_sweep_of(store, spec, &suite()).await;
    prop_assert_eq!(jobs as usize, case.order.len());
    let who = worker(store, &name).await;
    let leases = lease(queue, who, 1_000, LONG).await;
    if case.recompute {
        prop_assert_eq!(leases.len(), case.order.len(), "a lease of every job");
    }
    // Jobs whose positions were all taken from earlier sweeps are not handed out.
    let mut pending: Vec<usize> = case
        .order
        .iter()
        .copied()
        .filter(|&j| j < leases.len())
        .collect();
    let mut uploads = 0;
    while !pending.is_empty() {
        let take = case.group_sizes[uploads % case.group_sizes.len()].min(pending.len());
        let reports: Vec<_> = pending
            .drain(..take)
            .map(|job| job_report(&leases[job], results_of(&case, job, &leases[job]), true))
            .collect();
        queue
            .report_many(who, reports.into(), LONG, 1)
            .await
            .map_err(|e| TestCaseError::fail(format!("upload {uploads}: {e}")))?;
        uploads += 1;
        let rows = store.results(id).await.expect("results");
        let kept = store.table_sums(id).await.expect("table sums");
        prop_assert_eq!(
            kept,
            sums_of(&rows, DEFAULT_BASELINE),
            "after upload {}",
            uploads
        );
    }
    let rows = store.results(id).await.expect("results");
    prop_assert_eq!(
        rows.len(),
        (case.variants + 1) * 5,
        "every position of every build"
    );
    Ok(rows.iter().filter(|r| r.reused).count() as u64)
}

/// Runs the property on one backend, then checks that its results refuse change.
fn sums_property(backend: fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Backend>>>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let backend = rt.block_on(backend());
    let sweeps = AtomicU64::new(0);
    let reused = AtomicU64::new(0);
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        ..Config::default()
    });
    let outcome = runner.run(&case(), |case| {
        let name = format!("prop{}", sweeps.fetch_add(1, Ordering::Relaxed));
        let took = rt.block_on(sums_follow(&backend.db, name, case))?;
        reused.fetch_add(took, Ordering::Relaxed);
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
    assert!(
        sweeps.load(Ordering::Relaxed) >= u64::from(CASES),
        "every case ran"
    );
    assert!(
        reused.load(Ordering::Relaxed) > 0,
        "some cases took earlier results"
    );
    rt.block_on(results_are_append_only(&backend.url));
}

/// Results are never changed or removed once stored, on either backend (each has its own
/// trigger for it), so the sums kept as they arrive stay true.
async fn results_are_append_only(url: &str) {
    let (update, delete) = (
        "UPDATE results SET nodes = nodes + 1",
        "DELETE FROM results",
    );
    let refused = if url.starts_with("postgres") {
        let mut conn = PgConnection::connect(url).await.expect("connect");
        [
            refused(&mut conn, update).await,
            refused(&mut conn, delete).await,
        ]
    } else {
        let url = format!("sqlite://{url}");
        let mut conn = SqliteConnection::connect(&url).await.expect("open");
        [
            refused(&mut conn, update).await,
            refused(&mut conn, delete).await,
        ]
    };
    assert_eq!(refused, [true, true], "update and delete refused on {url}");
}

/// Whether the database refuses `sql`.
async fn refused<'c, E: sqlx::Executor<'c>>(conn: E, sql: &'c str) -> bool {
    conn.execute(sql).await.is_err()
}

#[test]
fn postgres_sums_equal_sums_of_random_results() {
    sums_property(|| Box::pin(Backend::postgres()));
}

#[test]
fn sqlite_sums_equal_sums_of_random_results() {
    sums_property(|| Box::pin(Backend::sqlite()));
}
