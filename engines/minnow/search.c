/* search.c -- iterative deepening, PVS alpha-beta, quiescence, null move
 * (with the optional predicted-fail-high skip), killers/history, LMR. */
#include "minnow.h"
#include "null_table.h"
#include <time.h>

#define INF 32000
#define MATE 31000
#define MATE_BOUND (MATE - MAX_PLY)

typedef struct {
    int depth;          /* max iteration depth */
    uint64_t nodes;     /* 0 = no limit */
    int64_t movetime;   /* ms, 0 = no limit */
    int infinite;
    int quiet;          /* bench: print no info lines and leave stdin unread */
} Limits;

typedef struct {
    uint64_t nodes, qnodes, null_tried, null_failhigh, null_skipped,
        null_eligible, tt_probes, tt_hits, tt_cutoffs, beta_cutoffs,
        first_move_cutoffs, lmr, lmr_research, pvs_research, check_ext;
} Counters;

static Limits lim;
static Counters cnt;
static int stop_search, quit_requested;
static int64_t start_ms;
static int killers[MAX_PLY][2];
static int history[16][128];
static int pv[MAX_PLY][MAX_PLY], pv_len[MAX_PLY];
static int seldepth, root_best, root_ply_base;

#ifdef MINNOW_NULL_STATS
static uint64_t ns_tries[NULL_TBL_DEPTHS][NULL_TBL_GAPS], ns_fh[NULL_TBL_DEPTHS][NULL_TBL_GAPS],
    ns_nodes[NULL_TBL_DEPTHS][NULL_TBL_GAPS];
#endif

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* remaining-depth bucket and gap-to-alpha bucket of the skip table */
static inline int null_depth_bucket(int d) { return d < 0 ? 0 : d >= NULL_TBL_DEPTHS ? NULL_TBL_DEPTHS - 1 : d; }

#if NULLMOVE_SKIP_ANY
/* the skip ceiling at remaining depth d: its band's, else the flat one */
static inline int null_skip_ceiling(int d) {
    int band = d <= 5 ? NULLMOVE_SKIP_CEILING_BAND1
             : d <= 11 ? NULLMOVE_SKIP_CEILING_BAND2 : NULLMOVE_SKIP_CEILING_BAND3;
    return band > 0 ? band : NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS;
}
#endif
static inline int null_gap_bucket(int gap) {
    static const int lim_cp[NULL_TBL_GAPS - 1] = {25, 50, 100, 150, 200, 300, 400, 600, 900};
    int b = 0;
    while (b < NULL_TBL_GAPS - 1 && gap >= lim_cp[b]) b++;
    return b;
}

/* SLOWDOWN_LOOPS: a fixed amount of CPU per node, nothing else (the volatile
 * counter keeps the loop from being optimised away; nothing reads it) */
#if SLOWDOWN_LOOPS > 0
static inline void slowdown(void) {
    volatile long burn = 0;
    for (long i = 0; i < SLOWDOWN_LOOPS; i++) burn++;
}
#else
#define slowdown() ((void)0)
#endif

static void clear_search_state(void) {
    memset(killers, 0, sizeof killers);
    memset(history, 0, sizeof history);
}

static inline int check_stop(void) {
    if (stop_search) return 1;
    if (lim.nodes && cnt.nodes >= lim.nodes) return stop_search = 1;
    if ((cnt.nodes & 4095) == 0) {
        if (lim.movetime > 0 && now_ms() - start_ms >= lim.movetime) return stop_search = 1;
        /* a bench must not be cut short (nor its stdin consumed) by later input */
        if (!lim.quiet && poll_input()) return stop_search = 1;
    }
    return 0;
}

static const int mvv[8] = {0, 100, 300, 300, 500, 900, 10000, 0};

static void score_moves(const int *list, int *sc, int n, int ttmove, int ply) {
    for (int i = 0; i < n; i++) {
        int m = list[i];
        if (m == ttmove) sc[i] = 1 << 30;
        else if (m & (F_CAPTURE | F_EP) || M_PROMO(m) == QUEEN) {
            int victim = (m & F_EP) ? PAWN : PTYPE(pos.sq[M_TO(m)]);
            sc[i] = (1 << 26) + mvv[victim] * 16 + (M_PROMO(m) == QUEEN ? 8000 : 0) - PTYPE(pos.sq[M_FROM(m)]);
        } else if (M_PROMO(m)) sc[i] = -(1 << 20); /* under-promotions last */
        else if (m == killers[ply][0]) sc[i] = (1 << 25) + 1;
        else if (m == killers[ply][1]) sc[i] = 1 << 25;
        else sc[i] = history[pos.sq[M_FROM(m)]][M_TO(m)];
    }
}

static inline void pick(int *list, int *sc, int n, int i) {
    int b = i;
    for (int j = i + 1; j < n; j++) if (sc[j] > sc[b]) b = j;
    if (b != i) {
        int t = list[i]; list[i] = list[b]; list[b] = t;
        t = sc[i]; sc[i] = sc[b]; sc[b] = t;
    }
}

static int qsearch(int alpha, int beta, int ply) {
    cnt.nodes++; cnt.qnodes++;
    slowdown();
    pv_len[ply] = ply;
    if (check_stop()) return 0;
    if (ply > seldepth) seldepth = ply;
    int stand = evaluate();
    if (ply >= MAX_PLY - 1 || stand >= beta) return stand;
    if (stand > alpha) alpha = stand;
    int list[MAX_MOVES], sc[MAX_MOVES];
    int n = gen_moves(list, 1), best = stand;
    score_moves(list, sc, n, 0, ply);
    for (int i = 0; i < n; i++) {
        pick(list, sc, n, i);
        if (!make_move(list[i])) continue;
        int s = -qsearch(-beta, -alpha, ply + 1);
        unmake_move();
        if (stop_search) return 0;
        if (s > best) {
            best = s;
            if (s > alpha) { alpha = s; if (s >= beta) break; }
        }
    }
    return best;
}

static inline int score_to_tt(int s, int ply) { return s >= MATE_BOUND ? s + ply : s <= -MATE_BOUND ? s - ply : s; }
static inline int score_from_tt(int s, int ply) { return s >= MATE_BOUND ? s - ply : s <= -MATE_BOUND ? s + ply : s; }

static int search(int alpha, int beta, int depth, int ply, int allow_null) {
    int pvnode = beta - alpha > 1;
    int chk = in_check();
    if (chk) { depth++; cnt.check_ext++; }
    if (depth <= 0) return qsearch(alpha, beta, ply);
    cnt.nodes++;
    slowdown();
    pv_len[ply] = ply;
    if (check_stop()) return 0;
    if (ply > seldepth) seldepth = ply;
    if (ply > 0) {
        if (is_draw()) return 0;
        if (ply >= MAX_PLY - 2) return evaluate();
        /* mate distance pruning */
        if (alpha < -MATE + ply) alpha = -MATE + ply;
        if (beta > MATE - ply - 1) beta = MATE - ply - 1;
        if (alpha >= beta) return alpha;
    }

    int ttmove = 0;
    cnt.tt_probes++;
    TTEntry *e = tt_probe(pos.key);
    if (e) {
        cnt.tt_hits++;
        ttmove = e->move;
        if (!pvnode && ply > 0 && e->depth >= depth) {
            int s = score_from_tt(e->score, ply);
            if (e->flag == TT_EXACT || (e->flag == TT_LOWER && s >= beta) || (e->flag == TT_UPPER && s <= alpha)) {
                cnt.tt_cutoffs++;
                return s;
            }
        }
    }

    int ev = chk ? -INF : evaluate();
    (void)ev; /* used only by the optional eval margin, skip table and stats */

    /* null move: never at the root, never twice in a row (allow_null), not in
     * check, not with king and pawns only, not at PV nodes, depth >= MIN */
    if (!pvnode && allow_null && ply > 0 && !chk && depth >= NULLMOVE_MIN_DEPTH &&
        has_nonpawn(pos.side) && beta > -MATE_BOUND && beta < MATE_BOUND
#if NULLMOVE_EVAL_MARGIN >= 0
        && ev >= beta - NULLMOVE_EVAL_MARGIN
#endif
    ) {
        int skip = 0;
        cnt.null_eligible++;
#if NULLMOVE_SKIP_ANY
        int ceiling = null_skip_ceiling(depth);
        if (ceiling > 0 && ev <= alpha &&
            null_fh_pred[null_depth_bucket(depth)][null_gap_bucket(alpha - ev)] < ceiling) {
            skip = 1;
            cnt.null_skipped++;
        }
#endif
        if (!skip) {
            int R = NULLMOVE_R_BASE + depth / NULLMOVE_R_DEPTH_DIV;
#ifdef MINNOW_NULL_STATS
            uint64_t n0 = cnt.nodes;
#endif
            cnt.null_tried++;
            make_null();
            int s = -search(-beta, -beta + 1, depth - 1 - R, ply + 1, 0);
            unmake_null();
            if (stop_search) return 0;
#ifdef MINNOW_NULL_STATS
            if (ev <= alpha) {
                int db = null_depth_bucket(depth), gb = null_gap_bucket(alpha - ev);
                ns_tries[db][gb]++;
                ns_fh[db][gb] += s >= beta;
                ns_nodes[db][gb] += cnt.nodes - n0;
            }
#endif
            if (s >= beta) {
                cnt.null_failhigh++;
                return s >= MATE_BOUND ? beta : s;
            }
        }
    }

    int list[MAX_MOVES], sc[MAX_MOVES];
    int n = gen_moves(list, 0);
    score_moves(list, sc, n, ttmove, ply);
    int best = -INF, bestmove = 0, legal = 0, orig_alpha = alpha;
    for (int i = 0; i < n; i++) {
        pick(list, sc, n, i);
        int m = list[i];
        if (!make_move(m)) continue;
        legal++;
        int s, nd = depth - 1;
        if (legal == 1) {
            s = -search(-beta, -alpha, nd, ply + 1, 1);
        } else {
            int r = 0;
#if LMR_ENABLE
            if (depth >= LMR_MIN_DEPTH && legal > LMR_MIN_MOVES && !chk && M_QUIET(m) &&
                m != killers[ply][0] && m != killers[ply][1] && !in_check()) {
                r = 1 + (legal > 12 && depth >= 6);
                cnt.lmr++;
            }
#endif
            s = -search(-alpha - 1, -alpha, nd - r, ply + 1, 1);
            if (r && s > alpha && !stop_search) {
                cnt.lmr_research++;
                s = -search(-alpha - 1, -alpha, nd, ply + 1, 1);
            }
            if (s > alpha && s < beta && !stop_search) {
                cnt.pvs_research++;
                s = -search(-beta, -alpha, nd, ply + 1, 1);
            }
        }
        unmake_move();
        if (stop_search) return 0;
        if (s > best) {
            best = s;
            bestmove = m;
            if (s > alpha) {
                alpha = s;
                pv[ply][ply] = m;
                for (int j = ply + 1; j < pv_len[ply + 1]; j++) pv[ply][j] = pv[ply + 1][j];
                pv_len[ply] = pv_len[ply + 1] > ply + 1 ? pv_len[ply + 1] : ply + 1;
                if (ply == 0) root_best = m;
                if (s >= beta) {
                    cnt.beta_cutoffs++;
                    if (legal == 1) cnt.first_move_cutoffs++;
                    if (M_QUIET(m)) {
                        if (killers[ply][0] != m) { killers[ply][1] = killers[ply][0]; killers[ply][0] = m; }
                        int *h = &history[pos.sq[M_FROM(m)]][M_TO(m)];
                        *h += depth * depth;
                        if (*h > (1 << 20))
                            for (int a = 0; a < 16; a++) for (int b = 0; b < 128; b++) history[a][b] /= 2;
                    }
                    break;
                }
            }
        }
    }
    if (!legal) return chk ? -MATE + ply : 0;
    int flag = best >= beta ? TT_LOWER : best > orig_alpha ? TT_EXACT : TT_UPPER;
    tt_store(pos.key, depth, score_to_tt(best, ply), flag, flag == TT_UPPER ? 0 : bestmove);
    return best;
}

static void print_score(char *buf, size_t len, int s) {
    if (s >= MATE_BOUND) snprintf(buf, len, "mate %d", (MATE - s + 1) / 2);
    else if (s <= -MATE_BOUND) snprintf(buf, len, "mate %d", -((MATE + s) / 2));
    else snprintf(buf, len, "cp %d", s);
}

/* the state every search starts from: counters, stop flag, clock, and the
 * first legal move as the fallback best move */
static void begin_search(void) {
    memset(&cnt, 0, sizeof cnt);
#ifdef MINNOW_NULL_STATS
    memset(ns_tries, 0, sizeof ns_tries); memset(ns_fh, 0, sizeof ns_fh); memset(ns_nodes, 0, sizeof ns_nodes);
#endif
    stop_search = 0;
    start_ms = now_ms();
    root_ply_base = hply;
    int list[MAX_MOVES], n = gen_moves(list, 0);
    root_best = 0;
    for (int i = 0; i < n && !root_best; i++)
        if (make_move(list[i])) { unmake_move(); root_best = list[i]; }
}

/* the `info depth ...` line of the iteration to depth d that just finished */
static void print_iteration(int d, int s, int64_t t) {
    char mv[8], sbuf[32], line[8192];
    print_score(sbuf, sizeof sbuf, s);
    int k = snprintf(line, sizeof line, "info depth %d seldepth %d score %s nodes %llu nps %llu time %lld pv",
                     d, seldepth, sbuf, (unsigned long long)cnt.nodes,
                     (unsigned long long)(t > 0 ? cnt.nodes * 1000 / (uint64_t)t : 0), (long long)t);
    for (int j = 0; j < pv_len[0] && k < (int)sizeof line - 8; j++) {
        move_to_str(pv[0][j], mv);
        k += snprintf(line + k, sizeof line - (size_t)k, " %s", mv);
    }
    out("%s", line);
}

/* iterative deepening 1..lim.depth from the current position, after
 * begin_search(); returns the last completed depth */
static int deepen(void) {
    int done_depth = 0;
    if (!root_best) return 0;
    for (int d = 1; d <= lim.depth; d++) {
        seldepth = 0;
        int s = search(-INF, INF, d, 0, 0);
        if (stop_search) {
            /* an interrupted iteration's root_best is only kept if the
             * root raised alpha with a completely searched move */
            break;
        }
        done_depth = d;
        int64_t t = now_ms() - start_ms;
        if (!lim.quiet) print_iteration(d, s, t);
        if (!lim.infinite && lim.movetime > 0 && t * 2 >= lim.movetime) break;
        if (!lim.infinite && (s >= MATE_BOUND || s <= -MATE_BOUND) && MATE - (s < 0 ? -s : s) <= d) break;
    }
    return done_depth;
}

static void think(void) {
    char mv[8];
    begin_search();
    int done_depth = deepen();
    /* in infinite mode, wait for stop/quit before answering */
    while (lim.infinite && !stop_search) {
        if (poll_input()) break;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
#ifdef MINNOW_NULL_STATS
    for (int a = 0; a < NULL_TBL_DEPTHS; a++)
        for (int b = 0; b < NULL_TBL_GAPS; b++)
            if (ns_tries[a][b])
                out("info string nullstats d=%d g=%d tries=%llu fh=%llu probe_nodes=%llu", a, b,
                    (unsigned long long)ns_tries[a][b], (unsigned long long)ns_fh[a][b], (unsigned long long)ns_nodes[a][b]);
#endif
    out("info string counters depth=%d nodes=%llu qnodes=%llu null_eligible=%llu null_tried=%llu null_failhigh=%llu "
        "null_skipped=%llu tt_probes=%llu tt_hits=%llu tt_cutoffs=%llu beta_cutoffs=%llu first_move_cutoffs=%llu "
        "lmr=%llu lmr_research=%llu pvs_research=%llu check_ext=%llu",
        done_depth, (unsigned long long)cnt.nodes, (unsigned long long)cnt.qnodes,
        (unsigned long long)cnt.null_eligible, (unsigned long long)cnt.null_tried,
        (unsigned long long)cnt.null_failhigh, (unsigned long long)cnt.null_skipped,
        (unsigned long long)cnt.tt_probes, (unsigned long long)cnt.tt_hits, (unsigned long long)cnt.tt_cutoffs,
        (unsigned long long)cnt.beta_cutoffs, (unsigned long long)cnt.first_move_cutoffs,
        (unsigned long long)cnt.lmr, (unsigned long long)cnt.lmr_research, (unsigned long long)cnt.pvs_research,
        (unsigned long long)cnt.check_ext);
    move_to_str(root_best, mv);
    out("bestmove %s", mv);
}
