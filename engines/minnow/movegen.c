/* movegen.c -- pseudo-legal move generation (legality is checked by
 * make_move), UCI move parsing, perft. */
#include "minnow.h"

static inline int add_pawn_moves(int *list, int n, int from, int to, int flags, int caps_only) {
    int r = RANK_OF(to);
    if (r == 7 || r == 0) {
        /* promotions: queen first; under-promotions are not generated in quiescence */
        list[n++] = MOVE(from, to, QUEEN, flags);
        if (!caps_only) {
            list[n++] = MOVE(from, to, KNIGHT, flags);
            list[n++] = MOVE(from, to, ROOK, flags);
            list[n++] = MOVE(from, to, BISHOP, flags);
        }
    } else if (!caps_only || (flags & (F_CAPTURE | F_EP))) {
        list[n++] = MOVE(from, to, 0, flags);
    }
    return n;
}

/* caps_only: captures and queen promotions (for quiescence) */
static int gen_moves(int *list, int caps_only) {
    int n = 0, us = pos.side, them = us ^ 1;
    int fwd = us == WHITE ? 16 : -16;
    int start_rank = us == WHITE ? 1 : 6;
    for (int from = 0; from < 128; from++) {
        if (OFFBOARD(from)) { from += 7; continue; }
        int p = pos.sq[from];
        if (!p || COLOR(p) != us) continue;
        int t = PTYPE(p);
        if (t == PAWN) {
            int to = from + fwd;
            if (pos.sq[to] == EMPTY) {
                n = add_pawn_moves(list, n, from, to, 0, caps_only);
                if (!caps_only && RANK_OF(from) == start_rank && pos.sq[to + fwd] == EMPTY)
                    list[n++] = MOVE(from, to + fwd, 0, F_DOUBLE);
            }
            for (int side = -1; side <= 1; side += 2) {
                to = from + fwd + side;
                if (OFFBOARD(to)) continue;
                int q = pos.sq[to];
                if (q && COLOR(q) == them) n = add_pawn_moves(list, n, from, to, F_CAPTURE, caps_only);
                else if (to == pos.ep) list[n++] = MOVE(from, to, 0, F_EP);
            }
        } else if (t == KNIGHT || t == KING) {
            const int *d = t == KNIGHT ? knight_d : king_d;
            for (int i = 0; i < 8; i++) {
                int to = from + d[i];
                if (OFFBOARD(to)) continue;
                int q = pos.sq[to];
                if (!q) { if (!caps_only) list[n++] = MOVE(from, to, 0, 0); }
                else if (COLOR(q) == them) list[n++] = MOVE(from, to, 0, F_CAPTURE);
            }
        } else {
            for (int i = 0; i < 8; i++) {
                int d;
                if (i < 4) { if (t == ROOK) continue; d = bishop_d[i]; }
                else { if (t == BISHOP) continue; d = rook_d[i - 4]; }
                for (int to = from + d; !OFFBOARD(to); to += d) {
                    int q = pos.sq[to];
                    if (!q) { if (!caps_only) list[n++] = MOVE(from, to, 0, 0); continue; }
                    if (COLOR(q) == them) list[n++] = MOVE(from, to, 0, F_CAPTURE);
                    break;
                }
            }
        }
    }
    if (!caps_only && pos.castle) {
        if (us == WHITE) {
            if ((pos.castle & WK_CASTLE) && !pos.sq[SQ(5, 0)] && !pos.sq[SQ(6, 0)] &&
                !attacked(SQ(4, 0), BLACK) && !attacked(SQ(5, 0), BLACK))
                list[n++] = MOVE(SQ(4, 0), SQ(6, 0), 0, F_CASTLE);
            if ((pos.castle & WQ_CASTLE) && !pos.sq[SQ(3, 0)] && !pos.sq[SQ(2, 0)] && !pos.sq[SQ(1, 0)] &&
                !attacked(SQ(4, 0), BLACK) && !attacked(SQ(3, 0), BLACK))
                list[n++] = MOVE(SQ(4, 0), SQ(2, 0), 0, F_CASTLE);
        } else {
            if ((pos.castle & BK_CASTLE) && !pos.sq[SQ(5, 7)] && !pos.sq[SQ(6, 7)] &&
                !attacked(SQ(4, 7), WHITE) && !attacked(SQ(5, 7), WHITE))
                list[n++] = MOVE(SQ(4, 7), SQ(6, 7), 0, F_CASTLE);
            if ((pos.castle & BQ_CASTLE) && !pos.sq[SQ(3, 7)] && !pos.sq[SQ(2, 7)] && !pos.sq[SQ(1, 7)] &&
                !attacked(SQ(4, 7), WHITE) && !attacked(SQ(3, 7), WHITE))
                list[n++] = MOVE(SQ(4, 7), SQ(2, 7), 0, F_CASTLE);
        }
    }
    return n;
}

/* returns the legal move matching UCI string s, or 0 */
static int parse_move(const char *s) {
    int list[MAX_MOVES];
    int n = gen_moves(list, 0);
    char buf[8];
    for (int i = 0; i < n; i++) {
        move_to_str(list[i], buf);
        if (strcmp(buf, s)) continue;
        if (!make_move(list[i])) return 0;
        unmake_move();
        return list[i];
    }
    return 0;
}

static uint64_t perft(int depth) {
    int list[MAX_MOVES];
    int n = gen_moves(list, 0);
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (!make_move(list[i])) continue;
        total += depth <= 1 ? 1 : perft(depth - 1);
        unmake_move();
    }
    return total;
}
