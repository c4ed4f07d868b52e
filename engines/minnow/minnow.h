/* minnow.h -- shared declarations for the minnow example engine.
 * minnow is built as ONE translation unit: minnow.c #includes every other
 * .c file, so all functions may be static and several variants can be built
 * concurrently from one source tree without intermediate object files. */
#ifndef MINNOW_H
#define MINNOW_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- compile-time knobs (see README.md) --------------------------------- */
#ifndef NULLMOVE_R_BASE
#define NULLMOVE_R_BASE 3
#endif
#ifndef NULLMOVE_R_DEPTH_DIV
#define NULLMOVE_R_DEPTH_DIV 6
#endif
#ifndef NULLMOVE_MIN_DEPTH
#define NULLMOVE_MIN_DEPTH 2
#endif
/* predicted null-move fail-high rate ceiling, in thousandths of a percent
 * (100000 = 100%); 0 = off */
#ifndef NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS
#define NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS 0
#endif
/* the same ceiling per band of remaining depth: band 1 is depth 0-5, band 2
 * 6-11, band 3 12 and more. A band's ceiling > 0 replaces the flat one at the
 * nodes of its band; 0 (the default) leaves the band to the flat ceiling. */
#ifndef NULLMOVE_SKIP_CEILING_BAND1
#define NULLMOVE_SKIP_CEILING_BAND1 0
#endif
#ifndef NULLMOVE_SKIP_CEILING_BAND2
#define NULLMOVE_SKIP_CEILING_BAND2 0
#endif
#ifndef NULLMOVE_SKIP_CEILING_BAND3
#define NULLMOVE_SKIP_CEILING_BAND3 0
#endif
/* whether any ceiling is set: with none, the skip test is not compiled in */
#define NULLMOVE_SKIP_ANY (NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS > 0 || \
    NULLMOVE_SKIP_CEILING_BAND1 > 0 || NULLMOVE_SKIP_CEILING_BAND2 > 0 || \
    NULLMOVE_SKIP_CEILING_BAND3 > 0)
/* optional static-eval condition for null move: eval >= beta - margin.
 * negative = no eval condition at all (the default) */
#ifndef NULLMOVE_EVAL_MARGIN
#define NULLMOVE_EVAL_MARGIN (-1)
#endif
/* late move reductions: 0 disables */
#ifndef LMR_ENABLE
#define LMR_ENABLE 1
#endif
#ifndef LMR_MIN_DEPTH
#define LMR_MIN_DEPTH 3
#endif
#ifndef LMR_MIN_MOVES
#define LMR_MIN_MOVES 4
#endif
/* CPU burnt per node: a loop of this many iterations over a volatile counter
 * wherever a node is counted. It changes no search decision (nodes, moves and
 * scores are the default build's), only the time a node takes; 0 (the
 * default) compiles the loop away. */
#ifndef SLOWDOWN_LOOPS
#define SLOWDOWN_LOOPS 0
#endif

#if NULLMOVE_R_DEPTH_DIV < 1
#error "NULLMOVE_R_DEPTH_DIV must be >= 1"
#endif
#if SLOWDOWN_LOOPS < 0
#error "SLOWDOWN_LOOPS must be >= 0"
#endif

/* ---- pieces, squares ---------------------------------------------------- */
enum { EMPTY = 0, PAWN = 1, KNIGHT, BISHOP, ROOK, QUEEN, KING };
enum { WHITE = 0, BLACK = 1 };
#define PIECE(c, t) (((c) << 3) | (t))
#define COLOR(p) ((p) >> 3)
#define PTYPE(p) ((p) & 7)
#define OFFBOARD(sq) ((sq) & 0x88)
#define NO_SQ (-1)
#define SQ(file, rank) (((rank) << 4) | (file))
#define FILE_OF(sq) ((sq) & 7)
#define RANK_OF(sq) ((sq) >> 4)
#define SQ64(sq) ((((sq) >> 4) << 3) | ((sq) & 7))

enum { WK_CASTLE = 1, WQ_CASTLE = 2, BK_CASTLE = 4, BQ_CASTLE = 8 };

/* ---- moves: from | to<<7 | promo<<14 | flags ---------------------------- */
#define F_CAPTURE (1 << 17)
#define F_EP (1 << 18)
#define F_CASTLE (1 << 19)
#define F_DOUBLE (1 << 20)
#define MOVE(from, to, promo, flags) ((from) | ((to) << 7) | ((promo) << 14) | (flags))
#define M_FROM(m) ((m) & 0x7f)
#define M_TO(m) (((m) >> 7) & 0x7f)
#define M_PROMO(m) (((m) >> 14) & 7)
#define M_QUIET(m) (!((m) & (F_CAPTURE | F_EP)) && !M_PROMO(m))

#define MAX_MOVES 256
#define MAX_PLY 128
#define MAX_GAME 4096 /* plies of game history kept for repetition */
#define MAX_HIST (MAX_GAME + MAX_PLY + 8)

typedef struct {
    uint8_t sq[128];
    int side, castle, ep, halfmove, fullmove;
    int king[2];
    int cnt[16];     /* piece counts by piece code */
    int mg, eg;      /* material + PST, white's point of view */
    int phase;       /* 0..24 (N,B=1 R=2 Q=4) */
    uint64_t key;
} Position;

typedef struct {
    int move;
    int captured;
    int castle, ep, halfmove;
    uint64_t key;
} Undo;

/* globals (board.c) */
static Position pos;
static Undo undo_stack[MAX_HIST];
static uint64_t key_hist[MAX_HIST];
static int hply; /* number of entries in undo_stack / key_hist */

/* board.c */
static void init_tables(void);
static int set_fen(const char *fen, char *err, size_t errlen);
static void get_fen(char *out, size_t len);
static int attacked(int sq, int by);
static int in_check(void);
static int make_move(int m);
static void unmake_move(void);
static void make_null(void);
static void unmake_null(void);
static void move_to_str(int m, char *buf);
static int is_draw(void);
static int has_nonpawn(int side);
/* movegen.c */
static int gen_moves(int *list, int caps_only);
static int parse_move(const char *s);
static uint64_t perft(int depth);
/* eval.c */
static void init_eval(void);
static int evaluate(void);
static int pst_mg[16][128], pst_eg[16][128];
static const int phase_w[8] = {0, 0, 1, 1, 2, 4, 0, 0};
/* tt.c */
static int tt_resize(int mb);
static void tt_clear(void);
/* uci.c */
static void out(const char *fmt, ...);
static int poll_input(void); /* during search: 1 if the search must stop */

#endif
