#!/usr/bin/env bash
# Deleting a big sweep (issue 50, item 3): how long `sweep delete` of a sweep of about
# 250,000 results takes, and what it does meanwhile to the lease latency of a sweep that
# runs beside it.
#
# A fresh Postgres database and a release coordinator (bench/common.sh); the big sweep made as
# bench/table.sh makes it (257 builds x ecm + ecm_confident_quick, chunk 1, one made-up result
# per job written by SQL); a second sweep queued for the simulated workers; then two runs of
# `sweep-loadgen` of WORKERS workers for DURATION s each, at an offered load (WORK_MS per
# lease of one job), the second with the big sweep deleted through the coordinator a few
# seconds into its measured window. Prints the delete's time and both runs' lease figures.
#
#   bench/delete.sh
#   WORKERS=300 WORK_MS=100 bench/delete.sh
#
# Settings (environment): WORKERS (100), DURATION (20), WORK_MS (200), PG
# (postgres://postgres@127.0.0.1:5432), KEEP, SWEEP_BIN, LOADGEN_BIN. Needs psql and jq.
# Prints figures; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

WORKERS=${WORKERS:-100}
DURATION=${DURATION:-20}
WORK_MS=${WORK_MS:-200}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
for tool in psql jq; do
  command -v "$tool" >/dev/null || { echo "delete.sh needs $tool" >&2; exit 2; }
done
if [[ -z ${SWEEP_BIN:-} || -z ${LOADGEN_BIN:-} ]]; then
  cargo build --release --quiet -p sweep -p sweep-loadgen
fi
sweep=${SWEEP_BIN:-target/release/sweep}
loadgen=${LOADGEN_BIN:-target/release/sweep-loadgen}

# shellcheck source=bench/common.sh
source bench/common.sh
bench_database sweep_delete
admin=$("$sweep" token create --database-url "$PG/$db" --role admin --name bench-delete 2>/dev/null)
worker=$("$sweep" token create --database-url "$PG/$db" --role worker --name bench-workers 2>/dev/null)
bench_coordinator "$sweep"
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# The big sweep, as bench/table.sh makes it: every work job with its result.
cat > "$work/big.toml" <<CONF
name = "big sweep to delete"
engine = "minnow"
knob = "NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS"
values = [$(seq -s ', ' 1 256)]
suites = ["ecm", "ecm_confident_quick"]
depths = [10]
chunk_size = 1
CONF
big=$(SWEEP_TOKEN=$admin "$sweep" submit "$work/big.toml" --coordinator "$url")
start=$(date +%s.%N)
sql "INSERT INTO workers (name, host, cores) VALUES ('bench', 'bench', 1)"
for part in $(seq 0 49); do
  sql "INSERT INTO results (build_id, suite_id, position_index, depth, sweep_id, job_id,
                            attempt, worker_id, position_id, nodes, bestmove, solved, score_cp,
                            reached_depth, time_ms)
       SELECT j.build_id, j.suite_id, j.first_index, j.depth, j.sweep_id, j.id, 1,
              (SELECT max(id) FROM workers), 'p' || j.first_index,
              20000 + (j.id * 2654435761) % 480000, 'e2e4', (j.id * 7919) % 10 < 7,
              (j.id % 200)::int - 100, j.depth, 10
       FROM jobs j WHERE j.sweep_id = $big AND j.kind = 'work' AND j.id % 50 = $part"
done
sql "DELETE FROM build_queue WHERE sweep_id = $big"
sql "ANALYZE results; ANALYZE jobs"
results=$(sql "SELECT count(*) FROM results WHERE sweep_id = $big")
echo "sweep $big: $results results written in $(elapsed "$start") s"

# The sweep that runs beside it: one-position jobs for the simulated workers.
cat > "$work/queue.toml" <<CONF
name = "running beside"
engine = "minnow"
knob = "NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS"
values = [$(seq -s ', ' 1 127)]
suites = ["ecm_confident_quick"]
depths = [11, 12, 13, 14]
chunk_size = 1
CONF
running=$(SWEEP_TOKEN=$admin "$sweep" submit "$work/queue.toml" --coordinator "$url")
echo "sweep $running queued beside it: $(sql "SELECT count(*) FROM jobs WHERE sweep_id = $running") jobs"

# One loadgen run; with $1 = delete, the big sweep is deleted 3 s into the measured window.
run() {
  local out="$work/loadgen-$1" lg
  "$loadgen" --url "$url" --token "$worker" --workers "$WORKERS" --duration "$DURATION" \
    --jobs-per-lease 1 --work-ms "$WORK_MS" --timed-heartbeats --json > "$out.json" 2> "$out.err" &
  lg=$!
  until grep -q "loadgen: measuring" "$out.err" 2>/dev/null; do
    kill -0 "$lg" 2>/dev/null || { cat "$out.err" >&2; exit 1; }
    sleep 0.1
  done
  if [[ $1 == delete ]]; then
    sleep 3
    local t0; t0=$(date +%s.%N)
    SWEEP_TOKEN=$admin "$sweep" delete "$big" --coordinator "$url" >&2
    deleted_in=$(elapsed "$t0")
    echo "deleted in $deleted_in s (through the coordinator, while $WORKERS workers lease)" >&2
  fi
  wait "$lg"
  jq -r --arg name "$1" '.calls[] | select(.call == "lease")
    | "| \($name) | \(.ok) | \(.per_sec * 10 | round / 10) | \(.p50_ms * 10 | round / 10) | \(.p99_ms * 10 | round / 10) | \(.max_ms // 0 | . * 10 | round / 10) |"' "$out.json"
}
rows=("$(run before)" "$(run delete)")
left=$(sql "SELECT count(*) FROM results WHERE sweep_id = $big")
echo
echo "$WORKERS workers, $WORK_MS ms per lease of 1 job, $DURATION s per run; results of sweep $big left: $left"
echo
echo "| run | lease calls | per s | p50 ms | p99 ms | max ms |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
