/* bench.c -- the built-in benchmark (`bench` on stdin, or `minnow bench`):
 * a fixed list of positions, each searched to BENCH_DEPTH from a clean state
 * exactly as `ucinewgame` + `position fen` + `go depth BENCH_DEPTH` would,
 * with the node total printed last as `Nodes searched: N`. The total is a
 * fingerprint of the search: every compile-time knob reaches it, and it is
 * the same on every run and machine for one binary. */
#include "minnow.h"

/* chosen so that the whole bench takes a few tenths of a second */
#define BENCH_DEPTH 7
/* the default Hash: a bench total must not depend on an earlier setoption */
#define BENCH_HASH_MB 16

/* middlegames (the first six) and endgames from suites/ (ECM, BK, WAC,
 * Arasan 2024) */
static const char *const bench_fens[] = {
    "1r5r/3b1pk1/3p1np1/p1qPp3/p1N1PbP1/2P2PN1/1PB1Q1K1/R3R3 b - - 0 1", /* ECM.011 */
    "6k1/p1qb1p1p/1p3np1/2b2p2/2B5/2P3N1/PP2QPPP/4N1K1 b - - 0 1",   /* ECM.005 */
    "3rr1k1/pp3pp1/1qn2np1/8/3p4/PP1R1P2/2P1NQPP/R1B3K1 b - - 0 1",  /* BK.10 */
    "2kr1bnr/pbpq4/2n1pp2/3p3p/3P1P1B/2N2N1Q/PPP3PP/2KR1B1R w - - 0 1", /* BK.09 */
    "r1bq1r1k/p1pnbpp1/1p2p3/6p1/3PB3/5N2/PPPQ1PPP/2KR3R w - - 0 1", /* arasan2024.1 */
    "2r1rbk1/p1Bq1ppp/Ppn1b3/1Npp4/B7/3P2Q1/1PP2PPP/R4RK1 w - - 0 1", /* ECM.635 */
    "4b3/p3kp2/6p1/3pP2p/2pP1P2/4K1P1/P3N2P/8 w - - 0 1",            /* BK.08 */
    "8/7p/5k2/5p2/p1p2P2/Pr1pPK2/1P1R3P/8 b - - 0 1",                /* WAC.002 */
    "8/3b2kp/4p1p1/pr1n4/N1N4P/1P4P1/1K3P2/3R4 w - - 0 1",           /* WAC.151 */
    "3R4/4Qpk1/4p1p1/7p/7K/5rP1/5P2/2q5 w - - 0 1",                  /* ECM.545 */
    "4k3/p1P3p1/2q1np1p/3N4/8/1Q3PP1/6KP/8 w - - 0 1",               /* ECM.003 */
    "8/2N5/1P2p3/5bPk/1q3b2/3Bp2P/2P5/6QK b - - 0 1",                /* arasan2024.167 */
};
#define BENCH_POSITIONS ((int)(sizeof bench_fens / sizeof bench_fens[0]))

/* the game (position and move history) the bench overwrites, put back after
 * it so that `position X`, `bench`, `go` still searches X */
static Position bench_saved_pos;
static Undo bench_saved_undo[MAX_HIST];
static uint64_t bench_saved_keys[MAX_HIST];
static int bench_saved_hply;

static void save_game(void) {
    bench_saved_pos = pos;
    bench_saved_hply = hply;
    memcpy(bench_saved_undo, undo_stack, sizeof(Undo) * (size_t)hply);
    memcpy(bench_saved_keys, key_hist, sizeof(uint64_t) * (size_t)hply);
}

static void restore_game(void) {
    pos = bench_saved_pos;
    hply = bench_saved_hply;
    memcpy(undo_stack, bench_saved_undo, sizeof(Undo) * (size_t)hply);
    memcpy(key_hist, bench_saved_keys, sizeof(uint64_t) * (size_t)hply);
}

/* searches one position as after `ucinewgame`; returns its nodes, or 0 with
 * an error line if the FEN is rejected */
static uint64_t bench_position(const char *fen) {
    char err[128];
    tt_clear();
    clear_search_state();
    if (!set_fen(fen, err, sizeof err)) {
        out("info string error bench: %s", err);
        return 0;
    }
    memset(&lim, 0, sizeof lim);
    lim.depth = BENCH_DEPTH;
    lim.quiet = 1;
    begin_search();
    deepen();
    return cnt.nodes;
}

/* runs the bench on a BENCH_HASH_MB table and prints its lines; leaves the
 * game as it was and the hash, killers and history cleared (as `ucinewgame`) */
static void bench(void) {
    uint64_t total = 0;
    int64_t t0 = now_ms();
    save_game();
    for (int i = 0; i < BENCH_POSITIONS; i++) {
        uint64_t n = bench_position(bench_fens[i]);
        out("bench position %d: %llu nodes", i + 1, (unsigned long long)n);
        total += n;
    }
    restore_game();
    memset(&lim, 0, sizeof lim);
    tt_clear();
    clear_search_state();
    int64_t ms = now_ms() - t0;
    out("bench: %d positions, depth %d, %llu nodes in %lld ms (%llu nps)", BENCH_POSITIONS, BENCH_DEPTH,
        (unsigned long long)total, (long long)ms, (unsigned long long)(ms > 0 ? total * 1000 / (uint64_t)ms : 0));
    out("Nodes searched: %llu", (unsigned long long)total);
}
