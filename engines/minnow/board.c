/* board.c -- 0x88 board: Zobrist keys, FEN, make/unmake, attacks, draws. */
#include "minnow.h"

static uint64_t z_piece[16][128], z_castle[16], z_ep[8], z_side;
static int castle_mask[128];
static const int knight_d[8] = {33, 31, 18, 14, -33, -31, -18, -14};
static const int king_d[8] = {1, -1, 16, -16, 15, 17, -15, -17};
static const int bishop_d[4] = {15, 17, -15, -17};
static const int rook_d[4] = {1, -1, 16, -16};

/* fixed-seed splitmix64: Zobrist keys are the same on every run/machine */
static uint64_t rng_state = 0x6d696e6e6f77ULL; /* "minnow" */
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void init_tables(void) {
    for (int p = 0; p < 16; p++)
        for (int s = 0; s < 128; s++) z_piece[p][s] = rng_next();
    for (int i = 0; i < 16; i++) z_castle[i] = rng_next();
    for (int i = 0; i < 8; i++) z_ep[i] = rng_next();
    z_side = rng_next();
    for (int s = 0; s < 128; s++) castle_mask[s] = 15;
    castle_mask[SQ(4, 0)] = 15 & ~(WK_CASTLE | WQ_CASTLE);
    castle_mask[SQ(7, 0)] = 15 & ~WK_CASTLE;
    castle_mask[SQ(0, 0)] = 15 & ~WQ_CASTLE;
    castle_mask[SQ(4, 7)] = 15 & ~(BK_CASTLE | BQ_CASTLE);
    castle_mask[SQ(7, 7)] = 15 & ~BK_CASTLE;
    castle_mask[SQ(0, 7)] = 15 & ~BQ_CASTLE;
    init_eval();
}

static inline void add_piece(int sq, int p) {
    pos.sq[sq] = (uint8_t)p;
    pos.key ^= z_piece[p][sq];
    pos.mg += pst_mg[p][sq];
    pos.eg += pst_eg[p][sq];
    pos.phase += phase_w[PTYPE(p)];
    pos.cnt[p]++;
    if (PTYPE(p) == KING) pos.king[COLOR(p)] = sq;
}

static inline void remove_piece(int sq) {
    int p = pos.sq[sq];
    pos.sq[sq] = EMPTY;
    pos.key ^= z_piece[p][sq];
    pos.mg -= pst_mg[p][sq];
    pos.eg -= pst_eg[p][sq];
    pos.phase -= phase_w[PTYPE(p)];
    pos.cnt[p]--;
}

static inline void move_piece(int from, int to) {
    int p = pos.sq[from];
    pos.sq[from] = EMPTY;
    pos.sq[to] = (uint8_t)p;
    pos.key ^= z_piece[p][from] ^ z_piece[p][to];
    pos.mg += pst_mg[p][to] - pst_mg[p][from];
    pos.eg += pst_eg[p][to] - pst_eg[p][from];
    if (PTYPE(p) == KING) pos.king[COLOR(p)] = to;
}

static int attacked(int sq, int by) {
    int s, p;
    if (by == WHITE) {
        s = sq - 15; if (!OFFBOARD(s) && pos.sq[s] == PIECE(WHITE, PAWN)) return 1;
        s = sq - 17; if (!OFFBOARD(s) && pos.sq[s] == PIECE(WHITE, PAWN)) return 1;
    } else {
        s = sq + 15; if (!OFFBOARD(s) && pos.sq[s] == PIECE(BLACK, PAWN)) return 1;
        s = sq + 17; if (!OFFBOARD(s) && pos.sq[s] == PIECE(BLACK, PAWN)) return 1;
    }
    int kn = PIECE(by, KNIGHT), kg = PIECE(by, KING);
    for (int i = 0; i < 8; i++) {
        s = sq + knight_d[i];
        if (!OFFBOARD(s) && pos.sq[s] == kn) return 1;
        s = sq + king_d[i];
        if (!OFFBOARD(s) && pos.sq[s] == kg) return 1;
    }
    int bq = PIECE(by, BISHOP), rq = PIECE(by, ROOK), qq = PIECE(by, QUEEN);
    for (int i = 0; i < 4; i++) {
        int d = bishop_d[i];
        for (s = sq + d; !OFFBOARD(s); s += d) {
            p = pos.sq[s];
            if (p) { if (p == bq || p == qq) return 1; break; }
        }
        d = rook_d[i];
        for (s = sq + d; !OFFBOARD(s); s += d) {
            p = pos.sq[s];
            if (p) { if (p == rq || p == qq) return 1; break; }
        }
    }
    return 0;
}

static int in_check(void) { return attacked(pos.king[pos.side], pos.side ^ 1); }

/* Makes m (pseudo-legal). Returns 1 if legal; if it leaves the mover's king
 * in check the move is taken back and 0 is returned. */
static int make_move(int m) {
    Undo *u = &undo_stack[hply];
    int from = M_FROM(m), to = M_TO(m), us = pos.side;
    int p = pos.sq[from], cap = EMPTY;
    u->move = m; u->castle = pos.castle; u->ep = pos.ep;
    u->halfmove = pos.halfmove; u->key = pos.key;
    key_hist[hply] = pos.key;
    if (pos.ep != NO_SQ) pos.key ^= z_ep[FILE_OF(pos.ep)];
    pos.ep = NO_SQ;
    if (m & F_EP) {
        int cs = to + (us == WHITE ? -16 : 16);
        cap = pos.sq[cs];
        remove_piece(cs);
    } else if (pos.sq[to]) {
        cap = pos.sq[to];
        remove_piece(to);
    }
    u->captured = cap;
    move_piece(from, to);
    if (M_PROMO(m)) { remove_piece(to); add_piece(to, PIECE(us, M_PROMO(m))); }
    if (m & F_CASTLE) {
        if (to > from) move_piece(from + 3, from + 1);
        else move_piece(from - 4, from - 1);
    }
    if (m & F_DOUBLE) { pos.ep = (from + to) / 2; pos.key ^= z_ep[FILE_OF(pos.ep)]; }
    pos.halfmove = (PTYPE(p) == PAWN || cap) ? 0 : pos.halfmove + 1;
    pos.key ^= z_castle[pos.castle];
    pos.castle &= castle_mask[from] & castle_mask[to];
    pos.key ^= z_castle[pos.castle];
    if (us == BLACK) pos.fullmove++;
    pos.side ^= 1;
    pos.key ^= z_side;
    hply++;
    if (attacked(pos.king[us], us ^ 1)) { unmake_move(); return 0; }
    return 1;
}

static void unmake_move(void) {
    hply--;
    Undo *u = &undo_stack[hply];
    int m = u->move, from = M_FROM(m), to = M_TO(m);
    pos.side ^= 1;
    int us = pos.side;
    if (us == BLACK) pos.fullmove--;
    if (m & F_CASTLE) {
        if (to > from) move_piece(from + 1, from + 3);
        else move_piece(from - 1, from - 4);
    }
    if (M_PROMO(m)) { remove_piece(to); add_piece(to, PIECE(us, PAWN)); }
    move_piece(to, from);
    if (u->captured) {
        if (m & F_EP) add_piece(to + (us == WHITE ? -16 : 16), u->captured);
        else add_piece(to, u->captured);
    }
    pos.castle = u->castle; pos.ep = u->ep; pos.halfmove = u->halfmove;
    pos.key = u->key;
}

static void make_null(void) {
    Undo *u = &undo_stack[hply];
    u->move = 0; u->captured = 0; u->castle = pos.castle; u->ep = pos.ep;
    u->halfmove = pos.halfmove; u->key = pos.key;
    key_hist[hply] = pos.key;
    if (pos.ep != NO_SQ) pos.key ^= z_ep[FILE_OF(pos.ep)];
    pos.ep = NO_SQ;
    pos.halfmove = 0; /* repetition scans never cross a null move */
    pos.side ^= 1;
    pos.key ^= z_side;
    hply++;
}

static void unmake_null(void) {
    hply--;
    Undo *u = &undo_stack[hply];
    pos.side ^= 1;
    pos.ep = u->ep; pos.halfmove = u->halfmove; pos.key = u->key;
}

static int has_nonpawn(int side) {
    return pos.cnt[PIECE(side, KNIGHT)] + pos.cnt[PIECE(side, BISHOP)] +
           pos.cnt[PIECE(side, ROOK)] + pos.cnt[PIECE(side, QUEEN)] > 0;
}

static int insufficient_material(void) {
    if (pos.cnt[PIECE(WHITE, PAWN)] || pos.cnt[PIECE(BLACK, PAWN)] ||
        pos.cnt[PIECE(WHITE, ROOK)] || pos.cnt[PIECE(BLACK, ROOK)] ||
        pos.cnt[PIECE(WHITE, QUEEN)] || pos.cnt[PIECE(BLACK, QUEEN)])
        return 0;
    int wn = pos.cnt[PIECE(WHITE, KNIGHT)], bn = pos.cnt[PIECE(BLACK, KNIGHT)];
    int wb = pos.cnt[PIECE(WHITE, BISHOP)], bb = pos.cnt[PIECE(BLACK, BISHOP)];
    if (wn + bn + wb + bb <= 1) return 1; /* K v K, K+minor v K */
    if (wn + bn == 0 && wb == 1 && bb == 1) { /* KB v KB, bishops on one colour */
        int c[2] = {-1, -1};
        for (int s = 0; s < 128; s++) {
            if (OFFBOARD(s)) { s += 7; continue; }
            if (PTYPE(pos.sq[s]) == BISHOP) c[COLOR(pos.sq[s])] = (FILE_OF(s) + RANK_OF(s)) & 1;
        }
        return c[0] == c[1];
    }
    return 0;
}

/* draw by 50-move rule, repetition (any earlier occurrence since the last
 * irreversible move) or insufficient material. Mate on the 100th half move
 * is not distinguished (the searcher treats it as a draw). */
static int is_draw(void) {
    if (pos.halfmove >= 100) return 1;
    for (int i = hply - 2; i >= 0 && i >= hply - pos.halfmove; i -= 2)
        if (key_hist[i] == pos.key) return 1;
    return insufficient_material();
}

static void move_to_str(int m, char *buf) {
    if (!m) { strcpy(buf, "0000"); return; }
    int f = M_FROM(m), t = M_TO(m);
    buf[0] = (char)('a' + FILE_OF(f)); buf[1] = (char)('1' + RANK_OF(f));
    buf[2] = (char)('a' + FILE_OF(t)); buf[3] = (char)('1' + RANK_OF(t));
    buf[4] = M_PROMO(m) ? " pnbrqk"[M_PROMO(m)] : 0;
    buf[5] = 0;
}

/* ---- FEN ----------------------------------------------------------------- */
static const char piece_chars[] = " PNBRQK  pnbrqk";

static int set_fen(const char *fen, char *err, size_t errlen) {
    Position save = pos;
    int save_hply = hply;
    char board[128], side[8] = "w", castle[8] = "-", ep[8] = "-";
    int half = 0, full = 1;
    int n = sscanf(fen, "%127s %7s %7s %7s %d %d", board, side, castle, ep, &half, &full);
#define FEN_FAIL(msg) do { snprintf(err, errlen, "bad fen: %s", msg); pos = save; hply = save_hply; return 0; } while (0)
    if (n < 2) FEN_FAIL("need at least board and side to move");
    memset(&pos, 0, sizeof pos);
    pos.ep = NO_SQ;
    int file = 0, rank = 7;
    for (const char *c = board; *c; c++) {
        if (*c == '/') {
            if (file != 8 || rank == 0) FEN_FAIL("bad rank layout");
            rank--; file = 0;
        } else if (*c >= '1' && *c <= '8') {
            file += *c - '0';
            if (file > 8) FEN_FAIL("rank too long");
        } else {
            const char *pc = strchr(piece_chars, *c);
            if (!pc || *c == ' ' || file > 7) FEN_FAIL("bad piece character or rank too long");
            int p = (int)(pc - piece_chars);
            if (PTYPE(p) == PAWN && (rank == 0 || rank == 7)) FEN_FAIL("pawn on first/last rank");
            add_piece(SQ(file, rank), p);
            file++;
        }
    }
    if (rank != 0 || file != 8) FEN_FAIL("board must have 8 ranks of 8 squares");
    if (pos.cnt[PIECE(WHITE, KING)] != 1 || pos.cnt[PIECE(BLACK, KING)] != 1)
        FEN_FAIL("need exactly one king per side");
    if (!strcmp(side, "w")) pos.side = WHITE;
    else if (!strcmp(side, "b")) pos.side = BLACK;
    else FEN_FAIL("side to move must be w or b");
    if (strcmp(castle, "-")) {
        for (const char *c = castle; *c; c++) {
            switch (*c) {
            case 'K': pos.castle |= WK_CASTLE; break;
            case 'Q': pos.castle |= WQ_CASTLE; break;
            case 'k': pos.castle |= BK_CASTLE; break;
            case 'q': pos.castle |= BQ_CASTLE; break;
            default: FEN_FAIL("bad castling field");
            }
        }
    }
    /* drop castling rights that the board cannot support */
    if (pos.sq[SQ(4, 0)] != PIECE(WHITE, KING)) pos.castle &= ~(WK_CASTLE | WQ_CASTLE);
    if (pos.sq[SQ(7, 0)] != PIECE(WHITE, ROOK)) pos.castle &= ~WK_CASTLE;
    if (pos.sq[SQ(0, 0)] != PIECE(WHITE, ROOK)) pos.castle &= ~WQ_CASTLE;
    if (pos.sq[SQ(4, 7)] != PIECE(BLACK, KING)) pos.castle &= ~(BK_CASTLE | BQ_CASTLE);
    if (pos.sq[SQ(7, 7)] != PIECE(BLACK, ROOK)) pos.castle &= ~BK_CASTLE;
    if (pos.sq[SQ(0, 7)] != PIECE(BLACK, ROOK)) pos.castle &= ~BQ_CASTLE;
    if (strcmp(ep, "-")) {
        if (strlen(ep) != 2 || ep[0] < 'a' || ep[0] > 'h' || ep[1] < '1' || ep[1] > '8')
            FEN_FAIL("bad en-passant square");
        int s = SQ(ep[0] - 'a', ep[1] - '1');
        /* keep it only if it is consistent with a double push just made */
        int need_rank = pos.side == WHITE ? 5 : 2;
        int pawn_sq = s + (pos.side == WHITE ? -16 : 16);
        if (RANK_OF(s) == need_rank && pos.sq[s] == EMPTY &&
            pos.sq[pawn_sq] == PIECE(pos.side ^ 1, PAWN))
            pos.ep = s;
    }
    if (n < 5 || half < 0 || half > 10000) half = 0;
    if (n < 6 || full < 1 || full > 100000) full = 1;
    pos.halfmove = half; pos.fullmove = full;
    if (attacked(pos.king[pos.side ^ 1], pos.side)) FEN_FAIL("side not to move is in check");
    pos.key ^= z_castle[pos.castle];
    if (pos.ep != NO_SQ) pos.key ^= z_ep[FILE_OF(pos.ep)];
    if (pos.side == BLACK) pos.key ^= z_side;
    hply = 0;
#undef FEN_FAIL
    return 1;
}

static void get_fen(char *o, size_t len) {
    char b[100]; int k = 0;
    for (int r = 7; r >= 0; r--) {
        int e = 0;
        for (int f = 0; f < 8; f++) {
            int p = pos.sq[SQ(f, r)];
            if (!p) { e++; continue; }
            if (e) { b[k++] = (char)('0' + e); e = 0; }
            b[k++] = piece_chars[p];
        }
        if (e) b[k++] = (char)('0' + e);
        if (r) b[k++] = '/';
    }
    b[k] = 0;
    char c[5]; int j = 0;
    if (pos.castle & WK_CASTLE) c[j++] = 'K';
    if (pos.castle & WQ_CASTLE) c[j++] = 'Q';
    if (pos.castle & BK_CASTLE) c[j++] = 'k';
    if (pos.castle & BQ_CASTLE) c[j++] = 'q';
    if (!j) c[j++] = '-';
    c[j] = 0;
    char e[3] = "-";
    if (pos.ep != NO_SQ) { e[0] = (char)('a' + FILE_OF(pos.ep)); e[1] = (char)('1' + RANK_OF(pos.ep)); e[2] = 0; }
    snprintf(o, len, "%s %c %s %s %d %d", b, pos.side == WHITE ? 'w' : 'b', c, e, pos.halfmove, pos.fullmove);
}
