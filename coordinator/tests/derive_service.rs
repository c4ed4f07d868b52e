//! `Reads::derive` on both backends: it assembles the suite version, the build's results and
//! the sweep record from the store, and refuses what it cannot do with an error naming the
//! field. Run one backend with `cargo test --test derive_service sqlite::` (or `postgres::`).

#[macro_use]
mod support;

use support::*;
use sweep_coordinator::service::Caller;
use sweep_coordinator::service::ReadError;
use sweep_domain::derive::{DeriveRequest, DeriveRule, Filter, Pick};
use sweep_domain::epd::parse_suite;
use sweep_domain::spec::DEFAULT_BASELINE;

on_both_backends!(
    derive_selects_from_the_build_results,
    derive_refuses_with_field_errors
);

fn request(build: &str, filter: Filter, pick: Pick, partial: bool) -> DeriveRequest {
    DeriveRequest {
        build: build.into(),
        suite: "tiny".into(),
        rule: DeriveRule {
            filter,
            min_nodes: None,
            max_nodes: None,
            pick,
        },
        partial,
        limit: None,
    }
}

fn field(err: ReadError) -> String {
    match err {
        ReadError::Invalid(e) => e.field,
        other => panic!("expected a field error, got {other:?}"),
    }
}

/// A sweep of the tiny suite whose baseline job is reported (castle, WAC.001 and black
/// solved; pawn failed; avoid played its avoid move) and whose variant job is still open.
async fn half_done_sweep(db: &Database) -> (i64, i64, Vec<sweep_domain::wire::JobLease>) {
    let (store, queue) = (&*db.store, &*db.queue);
    let (id, _) = create_sweep(store, "derive me", &[2], 5).await;
    let a = worker(store, "a").await;
    let leases = lease(queue, a, 100, LONG).await;
    // One attempt, so the failure is final at once.
    upload_once(queue, a, &leases[0], results_with_a_crash(), true).await;
    (id, a, leases)
}

async fn derive_selects_from_the_build_results(db: Database) {
    let queue = db.queue.clone();
    let svc = service(db.clone());
    let svc = svc.reads();
    let (id, a, leases) = half_done_sweep(&db).await;

    let solved = svc
        .derive(
            &Caller::Local,
            id,
            &request(DEFAULT_BASELINE, Filter::Solved, Pick::All, true),
        )
        .await
        .unwrap();
    assert_eq!(solved.selected, ["castle", "WAC.001", "black"]);
    assert_eq!((solved.skipped_errors, solved.skipped_missing), (1, 0));
    let back = parse_suite("derived", &solved.text).unwrap();
    let source = suite();
    assert_eq!(
        back.positions,
        [0, 1, 4].map(|i| source.positions[i].clone()),
        "the derived file reads back as exactly the selected positions"
    );
    assert!(solved
        .text
        .contains(&format!("# sweep: {id} \"derive me\"\n")));
    assert!(solved
        .text
        .contains(&format!("# suite: tiny (sha256 {})\n", source.sha256)));
    assert!(solved.text.contains("# limit: depth 6\n"));
    assert!(solved.text.contains("# partial: the sweep was running"));

    // Results of 1000 + index nodes: the node range and the pick apply after the filter.
    let mut req = request(DEFAULT_BASELINE, Filter::Any, Pick::First(2), true);
    req.rule.min_nodes = Some(1001);
    let picked = svc.derive(&Caller::Local, id, &req).await.unwrap();
    assert_eq!(picked.selected, ["WAC.001", "avoid"]);
    let unsolved = svc
        .derive(
            &Caller::Local,
            id,
            &request(DEFAULT_BASELINE, Filter::Unsolved, Pick::All, true),
        )
        .await
        .unwrap();
    assert_eq!(unsolved.selected, ["avoid"]);

    // Once every job is closed, no --partial is needed, and the header does not mention it.
    finish(&*queue, a, &leases[1]).await;
    let variant = svc
        .derive(
            &Caller::Local,
            id,
            &request("NULLMOVE_R_BASE=2", Filter::Solved, Pick::All, false),
        )
        .await
        .unwrap();
    assert_eq!(variant.selected.len(), 5, "{}", variant.text);
    assert!(variant
        .text
        .contains("# build: NULLMOVE_R_BASE=2, defines NULLMOVE_R_BASE=2\n"));
    assert!(!variant.text.contains("partial"));
}

async fn derive_refuses_with_field_errors(db: Database) {
    let svc = service(db.clone());
    let (id, _, _) = half_done_sweep(&db).await;
    let derive = |req: DeriveRequest| {
        let svc = svc.clone();
        async move {
            svc.reads()
                .derive(&Caller::Local, id, &req)
                .await
                .unwrap_err()
        }
    };
    let base = || request(DEFAULT_BASELINE, Filter::Solved, Pick::All, true);

    let err = derive(request(DEFAULT_BASELINE, Filter::Solved, Pick::All, false)).await;
    assert!(
        err.to_string().contains("is running, not finished"),
        "{err}"
    );
    assert_eq!(field(err), "partial");
    let err = derive(DeriveRequest {
        build: "nope".into(),
        ..base()
    })
    .await;
    assert!(
        err.to_string()
            .contains("builds: head_reference, NULLMOVE_R_BASE=2"),
        "{err}"
    );
    assert_eq!(field(err), "build");
    let err = derive(DeriveRequest {
        suite: "nope".into(),
        ..base()
    })
    .await;
    assert!(err.to_string().contains("suites: tiny"), "{err}");
    assert_eq!(field(err), "suite");
    let mut zero = base();
    zero.rule.pick = Pick::Random { count: 0, seed: 1 };
    assert_eq!(field(derive(zero).await), "random");
    let mut inverted = base();
    inverted.rule.min_nodes = Some(10);
    inverted.rule.max_nodes = Some(9);
    assert_eq!(field(derive(inverted).await), "min_nodes");
    let mut too_many = base();
    too_many.rule.pick = Pick::First(4);
    let err = derive(too_many).await;
    assert!(err.to_string().contains("only 3 match"), "{err}");
    assert_eq!(field(err), "first");
    // The variant has no results yet: nothing to select, and that is said, not an empty file.
    let err = derive(DeriveRequest {
        build: "NULLMOVE_R_BASE=2".into(),
        ..base()
    })
    .await;
    assert!(err.to_string().contains("5 no result"), "{err}");
    assert_eq!(field(err), "filter");
    assert!(matches!(
        svc.reads().derive(&Caller::Local, id + 1000, &base()).await,
        Err(ReadError::NotFound(_))
    ));
}
