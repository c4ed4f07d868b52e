#!/usr/bin/env bash
# Compute to decision: the same 64-cell grid of minnow's knobs (bench/search/grid.toml:
# null-move R x minimum depth x fail-high skip ceiling) measured every cell, and searched
# coordinate-wise (bench/search/coordinate.toml), each with `sweep run` on a fresh SQLite
# file and a fresh build cache. Prints per run: cells measured, engine-seconds (the engines'
# own search time, summed over every result), wall time, the chosen cell and its node ratio
# and solved delta against head_reference; then the coordinate choice against the grid's
# best, and the issue's targets (within 0.5 % of the best node ratio, no more solved lost,
# at most 35 % of the grid's engine-seconds).
#
#   bench/search.sh                (DEPTH=8 CORES=all SWEEP_BIN=target/quick/sweep)
#
# Prints figures; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
depth=${DEPTH:-8}
cores=${CORES:-$(nproc)}
sweep=${SWEEP_BIN:-target/quick/sweep}
if [[ -z ${SWEEP_BIN:-} ]]; then
  cargo build --profile quick --quiet
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() { # run NAME: the sweep of bench/search/NAME.toml at $depth; its table in $work/NAME.json
  local name=$1
  sed "s/^depth = .*/depth = $depth/" "bench/search/$name.toml" > "$work/$name.toml"
  local start end
  start=$(date +%s.%N)
  "$sweep" run "$work/$name.toml" --cores "$cores" --database "$work/$name.db" \
    --cache-dir "$work/cache-$name" --format json > "$work/$name.json" 2> "$work/$name.log"
  end=$(date +%s.%N)
  echo "$start $end" > "$work/$name.wall"
}

echo "bench/search.sh: depth $depth, $cores cores, $(date -u +%Y-%m-%dT%H:%MZ)"
run grid
run coordinate

python3 - "$work" <<'EOF'
import json, sqlite3, sys
work = sys.argv[1]

def load(name):
    table = json.load(open(f"{work}/{name}.json"))
    db = sqlite3.connect(f"{work}/{name}.db")
    ms, n = db.execute(
        "SELECT sum(time_ms), count(*) FROM results WHERE origin_sweep_id IS NULL").fetchone()
    builds = db.execute(
        "SELECT count(DISTINCT build_id) FROM results").fetchone()[0]
    start, end = map(float, open(f"{work}/{name}.wall").read().split())
    rows = {}
    for row in table["tables"][0]["rows"]:
        stats = row["combined"].get("stats") or {}
        rows[row["build"]] = (stats.get("geomean_ratio"), row["combined"].get("solved_delta"))
    return table, rows, ms / 1000.0, n, builds, end - start

grid, grid_rows, grid_s, grid_n, grid_builds, grid_wall = load("grid")
coord, coord_rows, coord_s, coord_n, coord_builds, coord_wall = load("coordinate")
baseline = grid["baseline"]
eligible = [(r, d, b) for b, (r, d) in grid_rows.items()
            if b != baseline and r is not None and d is not None and d >= 0]
eligible.sort(key=lambda x: (x[0], -x[1], x[2]))
best_ratio, best_delta, best = eligible[0]
search = coord["search"]
chosen = search["chosen"]
chosen_ratio, chosen_delta = coord_rows[chosen]
in_grid_ratio, in_grid_delta = grid_rows[chosen]

print()
print(f"{'':12} {'cells':>6} {'results':>8} {'engine-s':>9} {'wall s':>7}  chosen (node ratio, solved)")
print(f"{'exhaustive':12} {grid_builds - 1:>6} {grid_n:>8} {grid_s:>9.1f} {grid_wall:>7.1f}  "
      f"{best} ({best_ratio:.4f}, {best_delta:+d})")
print(f"{'coordinate':12} {coord_builds - 1:>6} {coord_n:>8} {coord_s:>9.1f} {coord_wall:>7.1f}  "
      f"{chosen} ({chosen_ratio:.4f}, {chosen_delta:+d})")
print()
print("search path:")
for step in search["path"]:
    print(f"  round {step['round']} {step['knob']}: {len(step['cells'])} cells, "
          f"{step['measured']} new, kept {step['chosen']} ({step['ratio']:.4f})")
gap = 100.0 * (chosen_ratio / best_ratio - 1.0)
share = 100.0 * coord_s / grid_s
print()
print(f"the coordinate choice in the exhaustive run: node ratio {in_grid_ratio:.4f}, "
      f"solved {in_grid_delta:+d} (the same build, measured again: "
      f"{'identical' if (in_grid_ratio, in_grid_delta) == (chosen_ratio, chosen_delta) else 'DIFFERENT'})")
print(f"node ratio gap to the grid's best: {gap:+.3f} %  (target within 0.5 %: "
      f"{'met' if gap <= 0.5 else 'missed'})")
print(f"solved against the grid's best: {chosen_delta - best_delta:+d}  (target no more lost: "
      f"{'met' if chosen_delta >= best_delta else 'missed'})")
print(f"engine-seconds: {share:.1f} % of the grid's  (target at most 35 %: "
      f"{'met' if share <= 35.0 else 'missed'})")
print(f"the search's own estimate of the grid: {search.get('grid_engine_seconds', 0):.1f} "
      f"engine-s (measured {grid_s:.1f})")
EOF
