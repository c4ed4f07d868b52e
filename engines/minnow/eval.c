/* eval.c -- material + piece-square tables (Michniewski's "simplified
 * evaluation function"), tapered between middlegame and endgame by
 * non-pawn material, plus a bishop-pair bonus and a small tempo bonus.
 * Material and PST are kept incrementally in pos.mg / pos.eg. */
#include "minnow.h"

static const int value_mg[8] = {0, 100, 320, 330, 500, 900, 0, 0};
static const int value_eg[8] = {0, 120, 300, 330, 520, 920, 0, 0};

/* tables are written rank 8 first, as seen by White */
static const int t_pawn[64] = {
     0,  0,  0,  0,  0,  0,  0,  0,  50, 50, 50, 50, 50, 50, 50, 50,
    10, 10, 20, 30, 30, 20, 10, 10,   5,  5, 10, 25, 25, 10,  5,  5,
     0,  0,  0, 20, 20,  0,  0,  0,   5, -5,-10,  0,  0,-10, -5,  5,
     5, 10, 10,-20,-20, 10, 10,  5,   0,  0,  0,  0,  0,  0,  0,  0};
static const int t_pawn_eg[64] = {
     0,  0,  0,  0,  0,  0,  0,  0,  80, 80, 80, 80, 80, 80, 80, 80,
    50, 50, 50, 50, 50, 50, 50, 50,  30, 30, 30, 30, 30, 30, 30, 30,
    15, 15, 15, 15, 15, 15, 15, 15,   5,  5,  5,  5,  5,  5,  5,  5,
     0,  0,  0,  0,  0,  0,  0,  0,   0,  0,  0,  0,  0,  0,  0,  0};
static const int t_knight[64] = {
   -50,-40,-30,-30,-30,-30,-40,-50, -40,-20,  0,  0,  0,  0,-20,-40,
   -30,  0, 10, 15, 15, 10,  0,-30, -30,  5, 15, 20, 20, 15,  5,-30,
   -30,  0, 15, 20, 20, 15,  0,-30, -30,  5, 10, 15, 15, 10,  5,-30,
   -40,-20,  0,  5,  5,  0,-20,-40, -50,-40,-30,-30,-30,-30,-40,-50};
static const int t_bishop[64] = {
   -20,-10,-10,-10,-10,-10,-10,-20, -10,  0,  0,  0,  0,  0,  0,-10,
   -10,  0,  5, 10, 10,  5,  0,-10, -10,  5,  5, 10, 10,  5,  5,-10,
   -10,  0, 10, 10, 10, 10,  0,-10, -10, 10, 10, 10, 10, 10, 10,-10,
   -10,  5,  0,  0,  0,  0,  5,-10, -20,-10,-10,-10,-10,-10,-10,-20};
static const int t_rook[64] = {
     0,  0,  0,  0,  0,  0,  0,  0,   5, 10, 10, 10, 10, 10, 10,  5,
    -5,  0,  0,  0,  0,  0,  0, -5,  -5,  0,  0,  0,  0,  0,  0, -5,
    -5,  0,  0,  0,  0,  0,  0, -5,  -5,  0,  0,  0,  0,  0,  0, -5,
    -5,  0,  0,  0,  0,  0,  0, -5,   0,  0,  0,  5,  5,  0,  0,  0};
static const int t_queen[64] = {
   -20,-10,-10, -5, -5,-10,-10,-20, -10,  0,  0,  0,  0,  0,  0,-10,
   -10,  0,  5,  5,  5,  5,  0,-10,  -5,  0,  5,  5,  5,  5,  0, -5,
     0,  0,  5,  5,  5,  5,  0, -5, -10,  5,  5,  5,  5,  5,  0,-10,
   -10,  0,  5,  0,  0,  0,  0,-10, -20,-10,-10, -5, -5,-10,-10,-20};
static const int t_king_mg[64] = {
   -30,-40,-40,-50,-50,-40,-40,-30, -30,-40,-40,-50,-50,-40,-40,-30,
   -30,-40,-40,-50,-50,-40,-40,-30, -30,-40,-40,-50,-50,-40,-40,-30,
   -20,-30,-30,-40,-40,-30,-30,-20, -10,-20,-20,-20,-20,-20,-20,-10,
    20, 20,  0,  0,  0,  0, 20, 20,  20, 30, 10,  0,  0, 10, 30, 20};
static const int t_king_eg[64] = {
   -50,-40,-30,-20,-20,-30,-40,-50, -30,-20,-10,  0,  0,-10,-20,-30,
   -30,-10, 20, 30, 30, 20,-10,-30, -30,-10, 30, 40, 40, 30,-10,-30,
   -30,-10, 30, 40, 40, 30,-10,-30, -30,-10, 20, 30, 30, 20,-10,-30,
   -30,-30,  0,  0,  0,  0,-30,-30, -50,-30,-30,-30,-30,-30,-30,-50};

static void init_eval(void) {
    const int *mg[8] = {0, t_pawn, t_knight, t_bishop, t_rook, t_queen, t_king_mg, 0};
    const int *eg[8] = {0, t_pawn_eg, t_knight, t_bishop, t_rook, t_queen, t_king_eg, 0};
    for (int t = PAWN; t <= KING; t++)
        for (int s = 0; s < 128; s++) {
            if (OFFBOARD(s)) continue;
            int f = FILE_OF(s), r = RANK_OF(s);
            int wi = (7 - r) * 8 + f, bi = r * 8 + f; /* black mirrors ranks */
            pst_mg[PIECE(WHITE, t)][s] = value_mg[t] + mg[t][wi];
            pst_eg[PIECE(WHITE, t)][s] = value_eg[t] + eg[t][wi];
            pst_mg[PIECE(BLACK, t)][s] = -(value_mg[t] + mg[t][bi]);
            pst_eg[PIECE(BLACK, t)][s] = -(value_eg[t] + eg[t][bi]);
        }
}

/* static evaluation in centipawns from the side to move's point of view */
static int evaluate(void) {
    int ph = pos.phase > 24 ? 24 : pos.phase;
    int s = (pos.mg * ph + pos.eg * (24 - ph)) / 24;
    if (pos.cnt[PIECE(WHITE, BISHOP)] >= 2) s += 30;
    if (pos.cnt[PIECE(BLACK, BISHOP)] >= 2) s -= 30;
    return (pos.side == WHITE ? s : -s) + 10;
}
