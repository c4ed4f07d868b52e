/* tt.c -- transposition table: one 16-byte entry per slot, always-replace,
 * index = low bits of the Zobrist key, power-of-two size from Hash (MB). */
#include "minnow.h"

enum { TT_NONE = 0, TT_UPPER = 1, TT_LOWER = 2, TT_EXACT = 3 };

typedef struct {
    uint64_t key;
    int32_t move;
    int16_t score;
    int8_t depth;
    uint8_t flag;
} TTEntry;

static TTEntry *tt;
static uint64_t tt_mask;

static int tt_resize(int mb) {
    uint64_t bytes = (uint64_t)mb << 20, n = 1;
    while (n * 2 * sizeof(TTEntry) <= bytes) n *= 2;
    TTEntry *t = calloc((size_t)n, sizeof(TTEntry)); /* zeroed: deterministic */
    if (!t) return 0;
    free(tt);
    tt = t;
    tt_mask = n - 1;
    return 1;
}

static void tt_clear(void) { memset(tt, 0, (size_t)(tt_mask + 1) * sizeof(TTEntry)); }

static inline TTEntry *tt_probe(uint64_t key) {
    TTEntry *e = &tt[key & tt_mask];
    return (e->flag != TT_NONE && e->key == key) ? e : NULL;
}

static inline void tt_store(uint64_t key, int depth, int score, int flag, int move) {
    TTEntry *e = &tt[key & tt_mask];
    if (e->key == key && !move) move = e->move; /* keep the old best move */
    e->key = key;
    e->move = move;
    e->score = (int16_t)score;
    e->depth = (int8_t)(depth > 127 ? 127 : depth);
    e->flag = (uint8_t)flag;
}
