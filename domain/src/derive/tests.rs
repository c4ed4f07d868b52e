use super::*;

const FILES: [char; 8] = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];

/// Eight positions `p0`..`p7` (a white pawn on each file of the second rank), each with a
/// `c0` operation that a derived file must keep.
fn suite() -> Suite {
    let text: String = (0..8)
        .map(|i| {
            let rank2 = match i {
                0 => "P7".to_string(),
                7 => "7P".to_string(),
                _ => format!("{i}P{}", 7 - i),
            };
            format!(
                "4k3/8/8/8/8/8/{rank2}/4K3 w - - bm {}3; c0 \"note {i}\"; id \"p{i}\";\n",
                FILES[i]
            )
        })
        .collect();
    parse_suite("mini", &format!("# the source\n{text}")).unwrap()
}

fn row(build: &str, index: u32, nodes: u64, solved: bool, error: Option<&str>) -> ResultRow {
    ResultRow {
        counters: Default::default(),
        reused: false,
        build: build.into(),
        suite: "mini".into(),
        limit: Limit::Depth(6),
        index,
        position_id: format!("p{index}"),
        nodes,
        bestmove: "e1d1".into(),
        solved,
        error: error.map(str::to_string),
    }
}

/// The base build: p0..p5 with 100..600 nodes, even ones solved; p6 an error, p7 no result.
/// Another build's rows (all solved) must be ignored.
fn results() -> Vec<ResultRow> {
    let mut rows: Vec<ResultRow> = (0..6)
        .map(|i| row("base", i, 100 * (u64::from(i) + 1), i % 2 == 0, None))
        .collect();
    rows.push(row("base", 6, 0, false, Some("engine crashed")));
    rows.extend((0..8).map(|i| row("other", i, 5, true, None)));
    rows
}

fn request(filter: Filter, pick: Pick) -> DeriveRequest {
    DeriveRequest {
        build: "base".into(),
        suite: "mini".into(),
        rule: DeriveRule {
            filter,
            min_nodes: None,
            max_nodes: None,
            pick,
        },
        partial: false,
        limit: None,
    }
}

fn provenance() -> Provenance {
    Provenance {
        sweep_id: 7,
        sweep_name: "demo sweep".into(),
        sweep_state: SweepState::Done,
        engine: "minnow".into(),
        defines: BTreeMap::from([("K".to_string(), 3)]),
        limit: Limit::Depth(6),
    }
}

fn ids(req: &DeriveRequest) -> Vec<String> {
    derive_suite(&suite(), &results(), req, &provenance())
        .unwrap()
        .selected
}

#[test]
fn filters_by_verdict_and_skips_errors_and_missing() {
    assert_eq!(ids(&request(Filter::Solved, Pick::All)), ["p0", "p2", "p4"]);
    assert_eq!(
        ids(&request(Filter::Unsolved, Pick::All)),
        ["p1", "p3", "p5"]
    );
    let any = derive_suite(
        &suite(),
        &results(),
        &request(Filter::Any, Pick::All),
        &provenance(),
    )
    .unwrap();
    assert_eq!(any.selected, ["p0", "p1", "p2", "p3", "p4", "p5"]);
    assert_eq!(
        (
            any.total,
            any.matched,
            any.skipped_errors,
            any.skipped_missing
        ),
        (8, 6, 1, 1)
    );
    assert!(any.summary().contains("selected 6 of 8 positions"));
    assert!(any
        .summary()
        .contains("skipped: 1 with an error, 1 without a result"));
}

#[test]
fn node_range_is_inclusive() {
    let mut req = request(Filter::Any, Pick::All);
    req.rule.min_nodes = Some(200);
    req.rule.max_nodes = Some(400);
    assert_eq!(ids(&req), ["p1", "p2", "p3"]);
    req.rule.max_nodes = None;
    assert_eq!(ids(&req), ["p1", "p2", "p3", "p4", "p5"]);
    req.rule.min_nodes = None;
    req.rule.max_nodes = Some(299);
    assert_eq!(ids(&req), ["p0", "p1"]);
    req.rule.filter = Filter::Solved;
    assert_eq!(ids(&req), ["p0"]);
}

#[test]
fn first_n_in_suite_order() {
    assert_eq!(
        ids(&request(Filter::Any, Pick::First(4))),
        ["p0", "p1", "p2", "p3"]
    );
    assert_eq!(
        ids(&request(Filter::Unsolved, Pick::First(2))),
        ["p1", "p3"]
    );
    assert_eq!(ids(&request(Filter::Any, Pick::First(6))).len(), 6);
}

#[test]
fn seeded_random_is_reproducible_and_in_suite_order() {
    let pick = |seed| ids(&request(Filter::Any, Pick::Random { count: 3, seed }));
    let a = pick(42);
    assert_eq!(a, pick(42), "same seed, same pick");
    assert_eq!(a.len(), 3);
    let mut sorted = a.clone();
    sorted.sort();
    assert_eq!(a, sorted, "suite order");
    // Pinned (computed independently): a change of generator or sampling would change
    // users' derived suites.
    assert_eq!(a, ["p1", "p3", "p4"]);
    let picks: std::collections::BTreeSet<Vec<String>> = (0..20).map(pick).collect();
    assert!(picks.len() > 5, "seeds give different picks: {picks:?}");
    // Random of all matching positions is all of them.
    assert_eq!(
        ids(&request(Filter::Solved, Pick::Random { count: 3, seed: 9 })),
        ["p0", "p2", "p4"]
    );
}

#[test]
fn output_parses_back_to_exactly_the_selected_positions() {
    let mut req = request(Filter::Any, Pick::Random { count: 4, seed: 5 });
    req.rule.min_nodes = Some(100);
    let derived = derive_suite(&suite(), &results(), &req, &provenance()).unwrap();
    let back = parse_suite("derived", &derived.text).unwrap();
    let back_ids: Vec<&str> = back.positions.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(back_ids, derived.selected);
    let source = suite();
    for p in &back.positions {
        let original = source.positions.iter().find(|o| o.id == p.id).unwrap();
        assert_eq!(
            (&p.fen, &p.bm, &p.am, &p.epd),
            (&original.fen, &original.bm, &original.am, &original.epd),
            "records are copied whole, c0 included"
        );
    }
    assert!(derived.text.contains("c0 \"note"));
}

#[test]
fn header_records_sweep_build_limit_suite_and_rule() {
    let mut req = request(Filter::Solved, Pick::First(2));
    req.rule.max_nodes = Some(5000);
    let derived = derive_suite(&suite(), &results(), &req, &provenance()).unwrap();
    let header: Vec<&str> = derived
        .text
        .lines()
        .take_while(|l| l.starts_with('#'))
        .collect();
    let sha = suite().sha256;
    let expected = [
        "# Derived by `sweep suite derive` from a sweep's results.".to_string(),
        "# sweep: 7 \"demo sweep\"".into(),
        "# engine: minnow".into(),
        "# build: base, defines K=3".into(),
        "# limit: depth 6".into(),
        format!("# suite: mini (sha256 {sha})"),
        "# rule: positions the build solved with at most 5,000 nodes; the first 2 in suite order"
            .into(),
        "# command: sweep suite derive 7 --build base --suite mini --solved --max-nodes 5000 --first 2"
            .into(),
        "# selected 2 of 8 positions (3 matched the rule; skipped: 1 with an error, 1 without a result)"
            .into(),
    ];
    assert_eq!(header, expected);
    assert_eq!(derived.text.lines().count(), expected.len() + 2);
    // No date: deriving again gives the same bytes.
    let again = derive_suite(&suite(), &results(), &req, &provenance()).unwrap();
    assert_eq!(again.text, derived.text);
}

#[test]
fn partial_derivations_say_so() {
    let mut req = request(Filter::Any, Pick::All);
    req.partial = true;
    let p = Provenance {
        sweep_state: SweepState::Running,
        sweep_name: "two\nlines".into(),
        ..provenance()
    };
    let derived = derive_suite(&suite(), &results(), &req, &p).unwrap();
    assert!(derived.text.contains(
        "# partial: the sweep was running when this was derived; only positions with a result were considered\n"
    ));
    assert!(derived.text.contains("--any --partial\n"));
    assert!(derived.text.contains("# sweep: 7 \"two lines\"\n"));
    assert_eq!(parse_suite("d", &derived.text).unwrap().positions.len(), 6);
}

#[test]
fn suites_stored_without_records_are_rendered() {
    let mut old = suite();
    for p in &mut old.positions {
        p.epd = None;
    }
    let derived = derive_suite(
        &old,
        &results(),
        &request(Filter::Solved, Pick::All),
        &provenance(),
    )
    .unwrap();
    let records: Vec<&str> = derived
        .text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect();
    assert_eq!(
        records,
        [
            "4k3/8/8/8/8/8/P7/4K3 w - - bm a3; id \"p0\";",
            "4k3/8/8/8/8/8/2P5/4K3 w - - bm c3; id \"p2\";",
            "4k3/8/8/8/8/8/4P3/4K3 w - - bm e3; id \"p4\";",
        ]
    );
}

#[test]
fn impossible_rules_name_the_field() {
    let derive =
        |req: &DeriveRequest| derive_suite(&suite(), &results(), req, &provenance()).unwrap_err();
    let field = |e: DeriveError| match e {
        DeriveError::Invalid(f) => f,
        other => panic!("expected a field error, got {other}"),
    };
    let e = field(derive(&request(Filter::Any, Pick::First(0))));
    assert_eq!(e.field, "first");
    let e = field(derive(&request(
        Filter::Any,
        Pick::Random { count: 0, seed: 1 },
    )));
    assert_eq!(e.field, "random");
    let mut req = request(Filter::Any, Pick::All);
    req.rule.min_nodes = Some(500);
    req.rule.max_nodes = Some(100);
    let e = field(derive(&req));
    assert_eq!(e.field, "min_nodes");
    assert!(e.problem.contains("greater than max_nodes"), "{e}");
    let e = field(derive(&request(Filter::Solved, Pick::First(4))));
    assert_eq!(e.field, "first");
    assert!(
        e.problem
            .contains("4 positions asked for, but only 3 match"),
        "{e}"
    );
    let e = field(derive(&request(
        Filter::Solved,
        Pick::Random { count: 9, seed: 1 },
    )));
    assert_eq!(e.field, "random");
    req.rule.min_nodes = Some(10_000);
    req.rule.max_nodes = None;
    let e = field(derive(&req));
    assert_eq!(e.field, "filter");
    assert!(e.problem.contains("no position of `mini` matches"), "{e}");
}

fn query(pairs: &[(&str, &str)]) -> Result<DeriveRequest, FieldError> {
    DeriveRequest::from_query(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
}

#[test]
fn query_round_trips_and_errors_name_the_parameter() {
    let mut req = request(Filter::Unsolved, Pick::Random { count: 5, seed: 77 });
    req.build = "K=300".into();
    req.rule.min_nodes = Some(1);
    req.rule.max_nodes = Some(9);
    req.partial = true;
    let pairs: Vec<(String, String)> = req
        .query_pairs()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    assert_eq!(DeriveRequest::from_query(pairs).unwrap(), req);
    let plain = query(&[("build", "b"), ("suite", "s"), ("filter", "any")]).unwrap();
    assert_eq!(plain.rule.pick, Pick::All);
    assert!(!plain.partial);

    let field_of = |pairs: &[(&str, &str)]| query(pairs).unwrap_err().field;
    let base = [("build", "b"), ("suite", "s"), ("filter", "solved")];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        v
    };
    assert_eq!(field_of(&base[1..]), "build");
    assert_eq!(field_of(&[base[0], base[2]]), "suite");
    assert_eq!(field_of(&base[..2]), "filter");
    assert_eq!(
        field_of(&with(&[("filter", "any")])),
        "filter",
        "given twice"
    );
    assert_eq!(field_of(&[base[0], base[1], ("filter", "won")]), "filter");
    assert_eq!(field_of(&with(&[("min-nodes", "5")])), "min-nodes");
    assert_eq!(field_of(&with(&[("first", "x")])), "first");
    assert_eq!(field_of(&with(&[("first", "0")])), "first");
    assert_eq!(field_of(&with(&[("first", "99999999999")])), "first");
    assert_eq!(field_of(&with(&[("random", "3")])), "seed");
    assert_eq!(field_of(&with(&[("seed", "3")])), "seed");
    assert_eq!(
        field_of(&with(&[("first", "1"), ("random", "3"), ("seed", "1")])),
        "random"
    );
    assert_eq!(
        field_of(&with(&[("min_nodes", "9"), ("max_nodes", "8")])),
        "min_nodes"
    );
    assert_eq!(field_of(&with(&[("max_nodes", "-1")])), "max_nodes");
    assert_eq!(field_of(&with(&[("partial", "maybe")])), "partial");
    let long = "b".repeat(300);
    let e = query(&[("build", &long), ("suite", "s"), ("filter", "any")]).unwrap_err();
    assert_eq!(e.field, "build");
    assert!(e.problem.contains("at most 256 bytes"), "{e}");
    assert_eq!(field_of(&with(&[("seed", "1\u{0}")])), "seed");
    assert_eq!(query(&[(&long, "1")]).unwrap_err().field, "query");
}

#[test]
fn command_line_quotes_what_the_shell_would_split() {
    let mut req = request(Filter::Any, Pick::First(3));
    req.build = "my build's".into();
    assert_eq!(
        req.command_line(2),
        "sweep suite derive 2 --build 'my build'\\''s' --suite mini --any --first 3"
    );
}
