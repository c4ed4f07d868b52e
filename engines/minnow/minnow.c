/* minnow.c -- the single translation unit: `cc minnow.c -o minnow`. */
#define _POSIX_C_SOURCE 200809L
#include <strings.h>
#include "minnow.h"
#include "board.c"
#include "eval.c"
#include "movegen.c"
#include "tt.c"
#include "search.c"
#include "bench.c"
#include "uci.c"
