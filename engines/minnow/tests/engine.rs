//! End-to-end tests of the minnow C engine: perft, determinism, the
//! null-move skip knob, the built-in bench, bestmove legality (checked with shakmaty) and
//! robustness against malformed input.

mod common;

use minnow::{build, read_epd, suites_dir, Uci};
use shakmaty::{fen::Fen, uci::UciMove, CastlingMode, Chess, Position};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(60);

struct Bins {
    _dir: tempfile::TempDir,
    default: PathBuf,
    ceiling3000: PathBuf,
}

/// The default build and one variant, built once per test binary (concurrently).
fn bins() -> &'static Bins {
    static B: OnceLock<Bins> = OnceLock::new();
    B.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().join("default").join("minnow");
        let v = dir.path().join("ceil3000").join("minnow");
        let (d2, v2) = (d.clone(), v.clone());
        let h1 = std::thread::spawn(move || build(&[], &d2));
        let h2 = std::thread::spawn(move || {
            build(&[("NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS", 3000)], &v2)
        });
        h1.join().unwrap().expect("build default");
        h2.join().unwrap().expect("build variant");
        Bins {
            _dir: dir,
            default: d,
            ceiling3000: v,
        }
    })
}

fn session(exe: &Path) -> Uci {
    let mut u = Uci::spawn(exe, TIMEOUT).expect("spawn minnow");
    u.handshake().expect("uci handshake");
    u
}

fn perft(u: &mut Uci, fen: &str, depth: u32) -> u64 {
    let (total, lines) = common::perft_lines(u, &format!("fen {fen}"), depth);
    // per-move lines in Stockfish format add up to the total
    let sum: u64 = lines
        .iter()
        .filter_map(|l| {
            l.split_once(": ")
                .filter(|(m, _)| m.len() >= 4 && m.len() <= 5)
        })
        .map(|(_, n)| n.parse::<u64>().unwrap())
        .sum();
    assert_eq!(sum, total, "per-move perft lines must add up: {lines:?}");
    total
}

fn ecm(n: usize) -> Vec<minnow::EpdRecord> {
    let v = read_epd(&suites_dir().join("ecm.epd")).expect("read suites/ecm.epd");
    v.into_iter().take(n).collect()
}

#[test]
fn uci_handshake_and_options() {
    let mut u = Uci::spawn(&bins().default, TIMEOUT).unwrap();
    let lines = u.handshake().unwrap();
    assert!(lines.iter().any(|l| l.starts_with("id name minnow")));
    assert!(lines.iter().any(|l| l.starts_with("id author ")));
    assert!(lines.contains(&"option name Hash type spin default 16 min 1 max 1024".to_string()));
    assert!(lines.contains(&"option name Threads type spin default 1 min 1 max 1".to_string()));
    u.sync().unwrap();
    assert!(u.quit().unwrap().success());
}

#[test]
fn perft_reference_positions() {
    let mut u = session(&bins().default);
    let cases: &[(&str, u32, u64)] = &[
        (
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
            5,
            4_865_609,
        ),
        (
            "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
            4,
            4_085_603,
        ),
        ("8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1", 5, 674_624),
        // chessprogramming.org "position 4" (note the black pawn on b2)
        (
            "r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1",
            4,
            422_333,
        ),
        (
            "rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8",
            4,
            2_103_487,
        ),
        // the same position mistyped with a knight on b2 and pawns on f2/g2/h2
        // (9 white pawns): 2246369 (checked with python-chess and shakmaty)
        (
            "r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pn1P1PPP/R2Q1RK1 w kq - 0 1",
            4,
            2_246_369,
        ),
    ];
    for &(fen, d, want) in cases {
        assert_eq!(perft(&mut u, fen, d), want, "perft {d} of {fen}");
    }
}

#[test]
fn perft_matches_shakmaty() {
    let mut u = session(&bins().default);
    let fens = [
        "r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pn1P1PPP/R2Q1RK1 w kq - 0 1",
        "r3k2r/8/8/8/3pPp2/8/8/R3K1RR b KQkq e3 0 1",
        "8/P1k5/K7/8/8/8/8/8 w - - 0 1",
        "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3",
    ];
    for fen in fens {
        let setup: Fen = fen.parse().unwrap();
        // the mistyped position 4 has nine white pawns: accept it anyway
        let pos: Chess = match setup.into_position(CastlingMode::Standard) {
            Ok(p) => p,
            Err(e) => e
                .ignore_too_much_material()
                .expect("valid apart from material"),
        };
        let want = shakmaty::perft(&pos, 3);
        assert_eq!(perft(&mut u, fen, 3), want, "perft 3 of {fen}");
    }
}

fn nodes_in_order(exe: &Path, recs: &[&minnow::EpdRecord], depth: u32) -> Vec<u64> {
    let mut u = session(exe);
    let v = recs
        .iter()
        .map(|r| {
            u.search_new(&format!("fen {}", r.fen), &format!("go depth {depth}"))
                .unwrap()
                .nodes()
        })
        .collect();
    u.quit().unwrap();
    v
}

#[test]
fn node_counts_are_deterministic() {
    let recs = ecm(10);
    let fwd: Vec<&minnow::EpdRecord> = recs.iter().collect();
    let a = nodes_in_order(&bins().default, &fwd, 7);
    let b = nodes_in_order(&bins().default, &fwd, 7);
    let rev: Vec<&minnow::EpdRecord> = recs.iter().rev().collect();
    let mut c = nodes_in_order(&bins().default, &rev, 7);
    c.reverse();
    assert!(a.iter().all(|&n| n > 0));
    assert_eq!(a, b, "same order, new process");
    assert_eq!(a, c, "reverse order");
    // one session, each position searched twice in a row after ucinewgame
    let mut u = session(&bins().default);
    for (r, &n) in recs.iter().zip(&a) {
        for _ in 0..2 {
            let got = u
                .search_new(&format!("fen {}", r.fen), "go depth 7")
                .unwrap()
                .nodes();
            assert_eq!(got, n, "{}", r.id);
        }
    }
    // a different Hash size is a different (but again deterministic) setting
    u.send("setoption name Hash value 1").unwrap();
    let x = u
        .search_new(&format!("fen {}", recs[0].fen), "go depth 7")
        .unwrap()
        .nodes();
    let y = u
        .search_new(&format!("fen {}", recs[0].fen), "go depth 7")
        .unwrap()
        .nodes();
    assert_eq!(x, y);
}

#[test]
fn go_nodes_is_exact_and_deterministic() {
    let mut u = session(&bins().default);
    let r = &ecm(3)[2];
    let a = u
        .search_new(&format!("fen {}", r.fen), "go nodes 20000")
        .unwrap();
    let b = u
        .search_new(&format!("fen {}", r.fen), "go nodes 20000")
        .unwrap();
    assert_eq!(a.nodes(), 20000);
    assert_eq!(a.bestmove, b.bestmove);
}

#[test]
fn ceiling_knob_changes_node_counts() {
    let recs = ecm(12);
    let refs: Vec<&minnow::EpdRecord> = recs.iter().collect();
    let mut base = session(&bins().default);
    let mut var = session(&bins().ceiling3000);
    let (mut n0, mut n1, mut skipped0, mut skipped1) = (0, 0, 0, 0);
    for r in &refs {
        let a = base
            .search_new(&format!("fen {}", r.fen), "go depth 8")
            .unwrap();
        let b = var
            .search_new(&format!("fen {}", r.fen), "go depth 8")
            .unwrap();
        n0 += a.nodes();
        n1 += b.nodes();
        skipped0 += a.counter("null_skipped");
        skipped1 += b.counter("null_skipped");
        assert!(
            a.counter("null_tried") > 0,
            "default build tries null moves"
        );
        for k in ["null_tried", "null_failhigh", "null_skipped", "tt_hits"] {
            assert!(a.counters.contains_key(k), "counter {k} missing");
        }
    }
    assert_eq!(skipped0, 0);
    assert!(skipped1 > 0);
    assert_ne!(n0, n1, "ceiling 0 vs 3000 must differ in nodes");
}

fn legal(fen: &str, mv: &str) -> bool {
    let setup: Fen = fen.parse().unwrap();
    let pos: Chess = setup.into_position(CastlingMode::Standard).unwrap();
    match UciMove::from_ascii(mv.as_bytes()) {
        Ok(u) => u.to_move(&pos).is_ok(),
        Err(_) => false,
    }
}

#[test]
fn bestmoves_on_ecm_are_legal() {
    let mut u = session(&bins().default);
    for r in ecm(50) {
        let res = u
            .search_new(&format!("fen {}", r.fen), "go depth 6")
            .unwrap();
        assert!(
            legal(&r.fen, &res.bestmove),
            "{}: illegal bestmove {}",
            r.id,
            res.bestmove
        );
        // every PV move printed is legal in sequence
        let last_info = res
            .lines
            .iter()
            .rev()
            .find(|l| l.starts_with("info depth"))
            .unwrap();
        let pv: Vec<&str> = last_info
            .split(" pv ")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(pv[0], res.bestmove, "{}", r.id);
        let mut pos: Chess = r
            .fen
            .parse::<Fen>()
            .unwrap()
            .into_position(CastlingMode::Standard)
            .unwrap();
        for m in pv {
            let mv = UciMove::from_ascii(m.as_bytes())
                .unwrap()
                .to_move(&pos)
                .unwrap_or_else(|_| panic!("{}: illegal pv move {m}", r.id));
            pos = pos.play(&mv).unwrap();
        }
        let counters = res
            .lines
            .iter()
            .filter(|l| l.starts_with("info string counters"))
            .count();
        assert_eq!(counters, 1);
        assert!(res.lines[res.lines.len() - 2].starts_with("info string counters"));
    }
}

#[test]
fn malformed_input_is_reported_and_ignored() {
    let mut u = session(&bins().default);
    let garbage = [
        "hello world",
        "",
        "   \t ",
        "position",
        "position fen",
        "position fen not/a/fen w - - 0 1",
        "position fen 8/8/8/8/8/8/8/8 w - - 0 1",
        "position fen rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR x KQkq - 0 1",
        "position startpos moves e2e5",
        "position startpos moves e2e4 zzzz",
        "go depth",
        "go depth -5",
        "go depth banana",
        "go depth 3 nodes 99999999999999999999999999999999",
        "go frobnicate 3",
        "go perft 1000",
        "setoption",
        "setoption name Hash value 0",
        "setoption name Hash value 184467440737095516160",
        "setoption name NoSuchOption value 3",
        "setoption name Threads value 4",
        "\u{1}\u{2}\u{7f}\u{ff}",
    ];
    for g in garbage {
        u.send(g).unwrap();
    }
    let long = "x".repeat(200_000);
    u.send(&long).unwrap();
    let lines = u.sync().unwrap();
    let errors = lines
        .iter()
        .filter(|l| l.starts_with("info string error"))
        .count();
    assert_eq!(
        errors, 20,
        "expected one error line per bad non-blank input line, got {lines:?}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("bestmove")).count(),
        1,
        "{lines:?}"
    );
    assert!(u.alive());
    // the position after "moves e2e4 zzzz" is the one after e2e4
    let res = u.search("startpos moves e2e4", "go depth 5").unwrap();
    assert!(legal(
        "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
        &res.bestmove
    ));
    let res = u.search_new("startpos", "go depth 5").unwrap();
    assert!(legal(
        "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
        &res.bestmove
    ));
    assert!(u.quit().unwrap().success());
}

#[test]
fn stop_interrupts_search() {
    let mut u = session(&bins().default);
    u.send("position startpos").unwrap();
    u.send("go infinite").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    u.send("isready").unwrap();
    u.read_until("readyok").unwrap();
    u.send("stop").unwrap();
    let lines = u.read_until("bestmove").unwrap();
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(legal(
        "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
        lines.last().unwrap().split(' ').nth(1).unwrap()
    ));
    // a deep fixed-depth search is stopped too, and movetime is honoured
    u.send("go depth 60").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    u.send("stop").unwrap();
    u.read_until("bestmove").unwrap();
    let t = Instant::now();
    u.send("go movetime 200").unwrap();
    u.read_until("bestmove").unwrap();
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(u.quit().unwrap().success());
}

#[test]
fn draws_and_mates() {
    let mut u = session(&bins().default);
    // K+N v K: insufficient material
    let r = u
        .search_new("fen 8/8/4k3/8/8/3NK3/8/8 w - - 0 1", "go depth 6")
        .unwrap();
    assert!(
        r.lines
            .iter()
            .any(|l| l.starts_with("info depth 6 ") && l.contains("score cp 0 ")),
        "{:?}",
        r.lines
    );
    // mate in 1
    let r = u
        .search_new("fen 6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1", "go depth 4")
        .unwrap();
    assert_eq!(r.bestmove, "a1a8");
    assert!(r.lines.iter().any(|l| l.contains("score mate 1 ")));
    // stalemate: no legal move
    let r = u
        .search_new("fen 7k/5Q2/6K1/8/8/8/8/8 b - - 0 1", "go depth 3")
        .unwrap();
    assert_eq!(r.bestmove, "0000");
    // promotion is printed in UCI form
    let r = u
        .search_new("fen 8/4P2k/8/8/8/8/8/K7 w - - 0 1", "go depth 5")
        .unwrap();
    assert_eq!(r.bestmove, "e7e8q");
}

#[test]
fn concurrent_variant_builds_do_not_clobber() {
    let dir = tempfile::tempdir().unwrap();
    let hs: Vec<_> = (0..3)
        .map(|i| {
            let out = dir.path().join(format!("v{i}")).join("minnow");
            std::thread::spawn(move || build(&[("NULLMOVE_R_BASE", 2 + i)], &out))
        })
        .collect();
    for h in hs {
        let exe = h.join().unwrap().unwrap();
        let mut u = session(&exe);
        assert!(!u
            .search_new("startpos", "go depth 3")
            .unwrap()
            .bestmove
            .is_empty());
    }
    assert!(build(&[("BAD NAME", 1)], &dir.path().join("x")).is_err());
}

/// The total of a bench's output (its last line must be `Nodes searched: N`), checked
/// against the per-position lines before it; no search `info` lines may appear.
fn bench_total(lines: &[String]) -> u64 {
    let total = lines
        .last()
        .and_then(|l| l.strip_prefix("Nodes searched: "))
        .unwrap_or_else(|| panic!("no final total: {lines:?}"))
        .parse()
        .unwrap();
    let per_position: u64 = lines
        .iter()
        .filter_map(|l| l.strip_prefix("bench position "))
        .map(|l| {
            let (_, n) = l.split_once(": ").unwrap();
            n.strip_suffix(" nodes").unwrap().parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(per_position, total, "{lines:?}");
    assert!(
        !lines.iter().any(|l| l.starts_with("info")),
        "bench prints no info lines: {lines:?}"
    );
    total
}

/// `minnow bench`: runs the bench and exits 0 without reading stdin (a `uci` waiting there
/// is never answered); returns the total.
fn bench_argv(exe: &Path) -> u64 {
    let mut child = std::process::Command::new(exe)
        .arg("bench")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run minnow bench");
    // minnow may have exited already: a failed write is no error here
    let _ = child.stdin.take().unwrap().write_all(b"uci\n");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    assert!(
        !lines.iter().any(|l| l == "uciok"),
        "stdin was read: {lines:?}"
    );
    bench_total(&lines)
}

/// `bench` on stdin in a running session.
fn bench_uci(u: &mut Uci) -> u64 {
    u.send("bench").unwrap();
    bench_total(&u.read_until("Nodes searched:").unwrap())
}

#[test]
fn bench_is_deterministic_in_both_forms() {
    let exe = &bins().default;
    let total = bench_argv(exe);
    assert!(total > 0);
    assert_eq!(bench_argv(exe), total, "a second run");
    // before `uci`, after it, twice in one process, and whatever Hash says
    let mut u = Uci::spawn(exe, TIMEOUT).unwrap();
    assert_eq!(bench_uci(&mut u), total, "before uci");
    u.handshake().unwrap();
    assert_eq!(bench_uci(&mut u), total, "after uci");
    u.send("setoption name Hash value 1").unwrap();
    assert_eq!(bench_uci(&mut u), total, "with Hash 1");
    assert!(u.quit().unwrap().success());
}

#[test]
fn bench_total_follows_the_knobs() {
    let dir = tempfile::tempdir().unwrap();
    let r1 = build(&[("NULLMOVE_R_BASE", 1)], &dir.path().join("minnow")).unwrap();
    let r3 = build(
        &[("NULLMOVE_R_BASE", 3)],
        &dir.path().join("r3").join("minnow"),
    )
    .unwrap();
    let default = bench_argv(&bins().default);
    assert_ne!(bench_argv(&r1), default, "R 1 vs the default R 3");
    assert_eq!(bench_argv(&r3), default, "R 3 is the default");
    assert_ne!(
        bench_argv(&bins().ceiling3000),
        default,
        "skip ceiling 3000"
    );
}

/// The depth bands of the skip ceiling: a band set alone searches differently from the
/// default, every band at the flat ceiling's value searches exactly as the flat ceiling (one
/// rule, two spellings), and a band at 0 leaves its nodes to the flat ceiling.
#[test]
fn skip_ceiling_bands_refine_the_flat_ceiling() {
    let dir = tempfile::tempdir().unwrap();
    let bin = |name: &str, defines: &[(&str, i64)]| {
        let out = dir.path().join(name).join("minnow");
        build(defines, &out).unwrap()
    };
    let every_band = bin(
        "bands",
        &[
            ("NULLMOVE_SKIP_CEILING_BAND1", 3000),
            ("NULLMOVE_SKIP_CEILING_BAND2", 3000),
            ("NULLMOVE_SKIP_CEILING_BAND3", 3000),
        ],
    );
    let flat_and_zero_band = bin(
        "flat",
        &[
            ("NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS", 3000),
            ("NULLMOVE_SKIP_CEILING_BAND2", 0),
        ],
    );
    let band2 = bin("band2", &[("NULLMOVE_SKIP_CEILING_BAND2", 3000)]);
    let (default, flat) = (bench_argv(&bins().default), bench_argv(&bins().ceiling3000));
    assert_eq!(
        bench_argv(&every_band),
        flat,
        "every band at the flat value"
    );
    assert_eq!(bench_argv(&flat_and_zero_band), flat, "a band at 0");
    let middle = bench_argv(&band2);
    assert_ne!(middle, default, "band 2 alone skips probes");
    assert_ne!(middle, flat, "band 2 alone is not the flat ceiling");
}

#[test]
fn search_after_bench_is_as_in_a_fresh_process() {
    let fen = &ecm(1)[0].fen;
    let searches = |u: &mut Uci| {
        // no ucinewgame: a search right after the bench sees whatever state it left
        let after_moves = u.search("startpos moves e2e4 e7e5", "go depth 7").unwrap();
        let fen = u.search(&format!("fen {fen}"), "go depth 7").unwrap();
        (
            after_moves.nodes(),
            after_moves.bestmove,
            fen.nodes(),
            fen.bestmove,
        )
    };
    let mut fresh = session(&bins().default);
    let want = searches(&mut fresh);
    let mut u = session(&bins().default);
    u.search("startpos", "go depth 6").unwrap();
    bench_uci(&mut u);
    assert_eq!(searches(&mut u), want);
    // the game set before the bench is the one searched after it
    u.send("position startpos moves e2e4 e7e5").unwrap();
    bench_uci(&mut u);
    u.send("go depth 7").unwrap();
    let res = minnow::parse_search(u.read_until("bestmove").unwrap());
    assert_eq!((res.nodes(), res.bestmove), (want.0, want.1));
}
