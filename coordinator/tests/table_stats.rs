//! `Reads::table` attaches paired statistics (issue 10 item 5) and counter sums (item 6)
//! from the stored results, on both backends. Run one with `cargo test --test table_stats sqlite::` (or `postgres::`).

#[macro_use]
mod support;

use support::*;
use sweep_coordinator::service::Caller;
use sweep_domain::wire::PositionResult;

on_both_backends!(
    table_has_paired_stats,
    counters_are_stored_and_summed_once_finished,
    finished_tables_are_made_before_they_are_asked_for
);

fn nodes(index: u32, bestmove: &str, nodes: u64) -> PositionResult {
    PositionResult {
        counters: Default::default(),
        nodes,
        ..result(index, bestmove)
    }
}

async fn table_has_paired_stats(db: Database) {
    let (store, queue) = (db.store.clone(), db.queue.clone());
    let svc = service(db.clone());
    let (id, _) = create_sweep(&*store, "stats", &[2], 5).await;
    let a = worker(&*store, "a").await;
    let leases = lease(&*queue, a, 100, LONG).await;
    // The baseline solves everything with 1000 + index nodes.
    finish(&*queue, a, &leases[0]).await;
    // While the sweep runs, its table stays summed in the database: no statistics yet.
    let running =
        serde_json::to_value(&*svc.reads().table(&Caller::Local, id).await.unwrap()).unwrap();
    assert!(
        running["tables"][0]["rows"][1]["combined"]
            .get("stats")
            .is_none(),
        "{running:#}"
    );
    // The variant: faster on 0, slower on 1, an error on 2 (not compared), the avoid move
    // with equal nodes on 3 (a lost solve), equal on 4.
    let variant = vec![
        nodes(0, GOOD_MOVES[0], 500),
        nodes(1, GOOD_MOVES[1], 2000),
        failed(2, "engine crashed"),
        nodes(3, "e1c1", 1003),
        nodes(4, GOOD_MOVES[4], 1004),
    ];
    upload_once(&*queue, a, &leases[1], variant, true).await;

    let table = svc.reads().table(&Caller::Local, id).await.unwrap();
    let json = serde_json::to_value(&*table).unwrap();
    let rows = &json["tables"][0]["rows"];
    assert!(rows[0]["combined"].get("stats").is_none(), "{json:#}");
    let stats = &rows[1]["combined"]["stats"];
    assert_eq!(
        stats, &rows[1]["suites"]["tiny"]["stats"],
        "one suite: the same"
    );
    assert_eq!(stats["pairs"], 4, "{json:#}");
    assert_eq!(
        [&stats["faster"], &stats["slower"], &stats["equal"]],
        [1, 1, 2]
    );
    assert_eq!([&stats["gained"], &stats["lost"]], [0, 1]);
    assert_eq!(stats["mcnemar_p"], 1.0);
    // python3: (500/1000 * 2000/1001) ** 0.25 = 0.9997501561329076.
    let g = stats["geomean_ratio"].as_f64().unwrap();
    assert!((g - 0.9997501561329076).abs() < 1e-12, "{g}");
    let ci = stats["ci95"].as_array().unwrap();
    let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
    assert!(
        lo <= g && g <= hi && lo >= 0.5 && hi <= 2000.0 / 1001.0,
        "{ci:?}"
    );
    // The same request gives the same interval (seeded bootstrap).
    let again = svc.reads().table(&Caller::Local, id).await.unwrap();
    assert_eq!(*again, *table);
}

/// A result with counters `null_skipped = skipped` and `depth = 7`.
fn counted(index: u32, bestmove: &str, skipped: u64) -> PositionResult {
    PositionResult {
        counters: [
            ("null_skipped".to_string(), skipped),
            ("depth".to_string(), 7),
        ]
        .into(),
        ..result(index, bestmove)
    }
}

/// Issue 10 item 6: counters travel with each result, are stored, and a finished sweep's
/// table sums them per build and suite; a result with a counter that cannot be stored is a
/// failed try of its position, never a figure.
async fn counters_are_stored_and_summed_once_finished(db: Database) {
    let (store, queue) = (db.store.clone(), db.queue.clone());
    let svc = service(db.clone());
    let mut spec = spec("counters", &[2], 5);
    spec.counters = vec!["null_skipped".into()];
    let (id, _) = create_sweep_of(&*store, spec, &suite()).await;
    let a = worker(&*store, "a").await;
    let leases = lease(&*queue, a, 100, LONG).await;
    let base: Vec<PositionResult> = (0..5)
        .map(|i| counted(i, GOOD_MOVES[i as usize], 10 + u64::from(i)))
        .collect();
    upload_once(&*queue, a, &leases[0], base, true).await;
    // While the variant runs, counters are not summed (the running table stays summed in
    // the database, like its nodes).
    let running =
        serde_json::to_value(&*svc.reads().table(&Caller::Local, id).await.unwrap()).unwrap();
    assert!(
        running["tables"][0]["rows"][0]["combined"]
            .get("counters")
            .is_none(),
        "sums wait for the end: {running:#}"
    );
    assert_eq!(running["counters"], serde_json::json!(["null_skipped"]));
    // Variant: position 4 comes with a counter name no column could hold. With one live
    // worker its one failed try is final: an error, never a figure.
    let mut bad = counted(4, GOOD_MOVES[4], 1);
    bad.counters.insert("a b".into(), 1);
    let variant: Vec<PositionResult> = (0..4)
        .map(|i| counted(i, GOOD_MOVES[i as usize], 100 * u64::from(i)))
        .chain([bad])
        .collect();
    upload_once(&*queue, a, &leases[1], variant, true).await;
    let table =
        serde_json::to_value(&*svc.reads().table(&Caller::Local, id).await.unwrap()).unwrap();
    let rows = &table["tables"][0]["rows"];
    assert_eq!(
        rows[0]["combined"]["counters"],
        serde_json::json!({"null_skipped": 10 + 11 + 12 + 13 + 14, "depth": 35}),
        "{table:#}"
    );
    assert_eq!(rows[1]["combined"]["errors"], 1, "{table:#}");
    assert_eq!(
        rows[1]["suites"]["tiny"]["counters"],
        serde_json::json!({"null_skipped": 100 + 200 + 300, "depth": 28}),
        "the failed position adds nothing: {table:#}"
    );
    let errors = store.position_errors(id, 10).await.unwrap();
    assert!(
        errors.iter().any(|e| e.error.contains("counter name")),
        "{errors:?}"
    );
    // Stored exactly: the per-position rows read back with their counters.
    let stored = store.results(id).await.unwrap();
    let p3 = stored
        .iter()
        .find(|r| r.build != "head_reference" && r.index == 3)
        .unwrap();
    assert_eq!(p3.counters["null_skipped"], 300);
}

/// A sweep's table is made, with its statistics, as soon as the sweep has finished, and kept:
/// its first reader does not wait for it. A running sweep's is not (it still changes).
async fn finished_tables_are_made_before_they_are_asked_for(db: Database) {
    let (store, queue) = (db.store.clone(), db.queue.clone());
    let svc = service(db.clone());
    let (id, _) = create_sweep(&*store, "warm", &[2], 5).await;
    let a = worker(&*store, "a").await;
    let leases = lease(&*queue, a, 100, LONG).await;
    finish(&*queue, a, &leases[0]).await;
    assert_eq!(
        svc.reads().warm_finished_tables(4).await.unwrap(),
        0,
        "still running"
    );
    finish(&*queue, a, &leases[1]).await;
    assert_eq!(
        svc.reads().warm_finished_tables(4).await.unwrap(),
        1,
        "finished: made"
    );
    assert_eq!(
        svc.reads().warm_finished_tables(4).await.unwrap(),
        0,
        "kept: not again"
    );
    let table = svc.reads().table(&Caller::Local, id).await.unwrap();
    let json = serde_json::to_value(&*table).unwrap();
    assert!(
        json["tables"][0]["rows"][1]["combined"]
            .get("stats")
            .is_some(),
        "the kept table has its statistics: {json:#}"
    );
}
