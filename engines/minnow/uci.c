/* uci.c -- UCI front end. Input is read with read(2) on fd 0 into our own
 * buffer (no stdio buffering), so that while searching the engine can poll
 * fd 0 without blocking (poll(2) with a zero timeout every 4096 nodes) and
 * react to `stop`, `quit` and `isready`. Other lines arriving during a
 * search are queued and run after it. */
#include "minnow.h"
#include <stdarg.h>
#include <poll.h>
#include <unistd.h>
#include <errno.h>
#include <ctype.h>
#include <limits.h>

#define STARTPOS "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
#define LINE_MAX_LEN (1 << 16)

static char ibuf[LINE_MAX_LEN];
static size_t ilen;
static int in_eof, discarding;
static char pend[1 << 18];
static size_t plen;
static int hash_mb = 16;

static void out(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* read what is available (blocking if block != 0); returns 0 at EOF */
static int fill_input(int block) {
    if (in_eof) return 0;
    if (!block) {
        struct pollfd p = {0, POLLIN, 0};
        if (poll(&p, 1, 0) <= 0) return 1;
    }
    if (ilen == sizeof ibuf) { /* no newline in a full buffer: drop it */
        ilen = 0;
        if (!discarding) out("info string error input line too long (ignored)");
        discarding = 1;
    }
    ssize_t n;
    do n = read(0, ibuf + ilen, sizeof ibuf - ilen); while (n < 0 && errno == EINTR);
    if (n <= 0) { in_eof = 1; return 0; }
    ilen += (size_t)n;
    return 1;
}

/* take one complete line out of ibuf */
static int take_line(char *line, size_t cap) {
    for (;;) {
        char *nl = memchr(ibuf, '\n', ilen);
        if (!nl) {
            if (in_eof && ilen && !discarding) { /* last line without newline */
                size_t k = ilen < cap - 1 ? ilen : cap - 1;
                memcpy(line, ibuf, k); line[k] = 0; ilen = 0;
                return 1;
            }
            return 0;
        }
        size_t k = (size_t)(nl - ibuf);
        int drop = discarding;
        if (!drop) {
            size_t c = k < cap - 1 ? k : cap - 1;
            memcpy(line, ibuf, c);
            line[c] = 0;
        }
        memmove(ibuf, nl + 1, ilen - k - 1);
        ilen -= k + 1;
        discarding = 0;
        if (!drop) return 1;
    }
}

static int first_word_is(const char *line, const char *w) {
    while (*line == ' ' || *line == '\t') line++;
    size_t n = strlen(w);
    return !strncmp(line, w, n) && (line[n] == 0 || isspace((unsigned char)line[n]));
}

/* called from the search every 4096 nodes: returns 1 if it must stop */
static int poll_input(void) {
    static char line[LINE_MAX_LEN];
    fill_input(0);
    while (take_line(line, sizeof line)) {
        if (first_word_is(line, "stop")) stop_search = 1;
        else if (first_word_is(line, "quit")) { stop_search = 1; quit_requested = 1; }
        else if (first_word_is(line, "isready")) out("readyok");
        else {
            size_t k = strlen(line);
            if (plen + k + 1 < sizeof pend) { memcpy(pend + plen, line, k); pend[plen + k] = '\n'; plen += k + 1; }
            else out("info string error too many queued input lines during search (dropped)");
        }
    }
    /* EOF ends an infinite search; a bounded search runs to completion */
    if (in_eof && lim.infinite) stop_search = 1;
    return stop_search;
}

static int next_command(char *line, size_t cap) {
    if (plen) {
        char *nl = memchr(pend, '\n', plen);
        size_t k = (size_t)(nl - pend);
        memcpy(line, pend, k); line[k] = 0;
        memmove(pend, nl + 1, plen - k - 1);
        plen -= k + 1;
        return 1;
    }
    for (;;) {
        if (take_line(line, cap)) return 1;
        if (!fill_input(1) && !ilen) return 0;
    }
}

/* parse a non-negative decimal integer; clamps huge values to INT64_MAX */
static int parse_num(const char *s, int64_t *v) {
    if (!s || !*s) return 0;
    int64_t x = 0;
    for (const char *c = s; *c; c++) {
        if (!isdigit((unsigned char)*c)) return 0;
        if (x > (INT64_MAX - 9) / 10) x = INT64_MAX;
        else x = x * 10 + (*c - '0');
    }
    *v = x;
    return 1;
}

#define MAX_TOK 2048
static int tokenize(char *line, char **tok) {
    int n = 0;
    for (char *s = strtok(line, " \t\r\n"); s && n < MAX_TOK; s = strtok(NULL, " \t\r\n")) tok[n++] = s;
    return n;
}

static void cmd_position(char **tok, int n) {
    char fen[512], err[128];
    int i = 1;
    if (n < 2) { out("info string error position: missing startpos/fen"); return; }
    if (!strcmp(tok[1], "startpos")) { strcpy(fen, STARTPOS); i = 2; }
    else if (!strcmp(tok[1], "fen")) {
        fen[0] = 0; i = 2;
        for (int k = 0; i < n && strcmp(tok[i], "moves") && k < 6; i++, k++) {
            if (strlen(fen) + strlen(tok[i]) + 2 >= sizeof fen) { out("info string error position: fen too long"); return; }
            if (k) strcat(fen, " ");
            strcat(fen, tok[i]);
        }
        if (i < n && strcmp(tok[i], "moves")) { out("info string error position: unexpected token '%.40s'", tok[i]); return; }
    } else { out("info string error position: expected startpos or fen, got '%.40s'", tok[1]); return; }
    if (!set_fen(fen, err, sizeof err)) { out("info string error %s (position unchanged)", err); return; }
    if (i < n) {
        if (strcmp(tok[i], "moves")) { out("info string error position: unexpected token '%.40s'", tok[i]); return; }
        for (i++; i < n; i++) {
            if (hply >= MAX_GAME) { out("info string error position: too many moves (max %d)", MAX_GAME); return; }
            int m = strlen(tok[i]) <= 5 ? parse_move(tok[i]) : 0;
            if (!m) { out("info string error illegal move '%.40s' (rest of the move list ignored)", tok[i]); return; }
            make_move(m);
        }
    }
}

static void cmd_go(char **tok, int n) {
    int64_t v, depth = -1, nodes = 0, movetime = 0, perft_d = -1, wtime = -1, btime = -1, winc = 0, binc = 0, mtg = 0;
    int infinite = 0;
    for (int i = 1; i < n; i++) {
        const char *k = tok[i];
        int64_t *dst = NULL;
        if (!strcmp(k, "infinite")) { infinite = 1; continue; }
        if (!strcmp(k, "ponder")) continue;
        if (!strcmp(k, "depth")) dst = &depth;
        else if (!strcmp(k, "nodes")) dst = &nodes;
        else if (!strcmp(k, "movetime")) dst = &movetime;
        else if (!strcmp(k, "perft")) dst = &perft_d;
        else if (!strcmp(k, "wtime")) dst = &wtime;
        else if (!strcmp(k, "btime")) dst = &btime;
        else if (!strcmp(k, "winc")) dst = &winc;
        else if (!strcmp(k, "binc")) dst = &binc;
        else if (!strcmp(k, "movestogo")) dst = &mtg;
        else { out("info string error go: unknown token '%.40s'", k); return; }
        if (i + 1 >= n || !parse_num(tok[i + 1], &v)) { out("info string error go: %s needs a non-negative integer", k); return; }
        *dst = v;
        i++;
    }
    if (perft_d >= 0) {
        if (perft_d > 12) { out("info string error go perft: depth must be <= 12"); return; }
        int list[MAX_MOVES], m = gen_moves(list, 0);
        uint64_t total = 0;
        char mv[8];
        for (int j = 0; j < m; j++) {
            if (!make_move(list[j])) continue;
            uint64_t c = perft_d <= 1 ? 1 : perft((int)perft_d - 1);
            unmake_move();
            if (perft_d == 0) continue;
            move_to_str(list[j], mv);
            out("%s: %llu", mv, (unsigned long long)c);
            total += c;
        }
        if (perft_d == 0) total = 1;
        out("");
        out("Nodes searched: %llu", (unsigned long long)total);
        return;
    }
    memset(&lim, 0, sizeof lim);
    lim.depth = MAX_PLY - 28;
    if (depth == 0) { out("info string error go: depth must be >= 1"); return; }
    if (depth > 0 && depth < lim.depth) lim.depth = (int)depth;
    lim.nodes = (uint64_t)nodes;
    lim.movetime = movetime;
    int64_t mytime = pos.side == WHITE ? wtime : btime, myinc = pos.side == WHITE ? winc : binc;
    if (!movetime && mytime >= 0) {
        int64_t t = mytime / (mtg > 0 ? mtg + 1 : 30) + myinc * 3 / 4;
        if (t > mytime - 50) t = mytime - 50;
        lim.movetime = t < 1 ? 1 : t;
    }
    if (infinite || (depth < 0 && !nodes && !lim.movetime)) lim.infinite = 1; /* plain "go" = infinite */
    think();
}

static void cmd_setoption(char **tok, int n) {
    char name[128] = "";
    int i = 1;
    if (n < 3 || strcmp(tok[1], "name")) { out("info string error setoption: expected 'setoption name <id> [value <x>]'"); return; }
    for (i = 2; i < n && strcmp(tok[i], "value"); i++) {
        if (strlen(name) + strlen(tok[i]) + 2 >= sizeof name) { out("info string error setoption: name too long"); return; }
        if (name[0]) strcat(name, " ");
        strcat(name, tok[i]);
    }
    const char *val = (i + 1 < n) ? tok[i + 1] : NULL;
    int64_t v;
    if (!strcasecmp(name, "Hash")) {
        if (!val || !parse_num(val, &v) || v < 1 || v > 1024) { out("info string error setoption Hash: value must be 1..1024"); return; }
        if (!tt_resize((int)v)) { out("info string error setoption Hash: allocation failed, kept %d MB", hash_mb); return; }
        hash_mb = (int)v;
    } else if (!strcasecmp(name, "Threads")) {
        if (!val || !parse_num(val, &v) || v != 1) { out("info string error setoption Threads: only 1 is supported"); return; }
    } else {
        out("info string error setoption: unknown option '%.60s'", name);
    }
}

/* `bench` runs on a table of the default size whatever Hash says, and gives
 * the table its size back after; returns 0 if the bench could not run */
static int cmd_bench(int n) {
    if (n > 1) { out("info string error bench: takes no arguments"); return 0; }
    if (hash_mb != BENCH_HASH_MB && !tt_resize(BENCH_HASH_MB)) {
        out("info string error bench: cannot allocate %d MB of hash", BENCH_HASH_MB);
        return 0;
    }
    bench();
    if (hash_mb != BENCH_HASH_MB && !tt_resize(hash_mb)) {
        out("info string error bench: cannot allocate Hash %d MB again, kept %d MB", hash_mb, BENCH_HASH_MB);
        hash_mb = BENCH_HASH_MB;
    }
    return 1;
}

int main(int argc, char **argv) {
    static char line[LINE_MAX_LEN];
    static char *tok[MAX_TOK];
    char err[128];
    init_tables();
    if (!tt_resize(hash_mb)) { fprintf(stderr, "minnow: cannot allocate hash\n"); return 1; }
    set_fen(STARTPOS, err, sizeof err);
    /* `minnow bench`: the bench alone, stdin never read */
    if (argc > 1 && !strcmp(argv[1], "bench")) return cmd_bench(argc - 1) ? 0 : 1;
    while (!quit_requested && next_command(line, sizeof line)) {
        int n = tokenize(line, tok);
        if (!n) continue;
        const char *c = tok[0];
        if (!strcmp(c, "uci")) {
            out("id name minnow 1.0");
            out("id author the Sweep project");
            out("option name Hash type spin default 16 min 1 max 1024");
            out("option name Threads type spin default 1 min 1 max 1");
            out("uciok");
        } else if (!strcmp(c, "isready")) out("readyok");
        else if (!strcmp(c, "ucinewgame")) { tt_clear(); clear_search_state(); }
        else if (!strcmp(c, "setoption")) cmd_setoption(tok, n);
        else if (!strcmp(c, "position")) cmd_position(tok, n);
        else if (!strcmp(c, "go")) cmd_go(tok, n);
        else if (!strcmp(c, "bench")) cmd_bench(n);
        else if (!strcmp(c, "stop")) { /* nothing to stop */ }
        else if (!strcmp(c, "quit")) break;
        else if (!strcmp(c, "d")) { char f[128]; get_fen(f, sizeof f); out("info string fen %s key %016llx", f, (unsigned long long)pos.key); }
        else if (!strcmp(c, "eval")) out("info string eval %d", evaluate());
        else out("info string error unknown command '%.60s'", c);
    }
    return 0;
}
