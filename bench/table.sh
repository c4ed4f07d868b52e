#!/usr/bin/env bash
# The delta table of a big sweep: how long `GET /api/v1/sweeps/ID/table` takes and how much
# the coordinator's memory grows, while the sweep runs (summed in the database) and once it
# has finished (made once with paired statistics from every result, then cached), and a page
# of `positions`.
#
# A fresh Postgres database, a release coordinator on a free port, a minnow sweep of about
# 250,000 one-position jobs (257 builds x ecm + ecm_confident_quick, 969 positions, chunk 1),
# then one result per work job written straight into the database (made-up numbers: this
# measures reading tables, not measuring engines), every work job closed, the cross-checks
# left open (so the sweep still runs), and the reads; then the cross-checks closed too (the
# sweep is done), and the reads again. RSS is VmRSS of the coordinator (VmHWM: its peak).
#
#   bench/table.sh
#   READS=10 bench/table.sh
#
# Settings (environment): READS per phase (5), PG (postgres://postgres@127.0.0.1:5432), KEEP
# (set: keep the database), SWEEP_BIN (a binary to measure instead of building this
# checkout's). Needs psql, curl and jq. Prints figures; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

READS=${READS:-5}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
for tool in psql curl jq; do
  command -v "$tool" >/dev/null || { echo "table.sh needs $tool" >&2; exit 2; }
done
if [[ -z ${SWEEP_BIN:-} ]]; then cargo build --release --quiet -p sweep; fi
sweep=${SWEEP_BIN:-target/release/sweep}

# shellcheck source=bench/common.sh
source bench/common.sh
bench_database sweep_table

token=$("$sweep" token create --database-url "$PG/$db" --role admin --name bench-table 2>/dev/null)
bench_coordinator "$sweep"

cat > "$work/sweep.toml" <<EOF
name = "table benchmark"
engine = "minnow"
knob = "NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS"
values = [$(seq -s ', ' 1 256)]
suites = ["ecm", "ecm_confident_quick"]
depths = [10]
chunk_size = 1
EOF
start=$(date +%s.%N)
id=$(SWEEP_TOKEN=$token "$sweep" submit "$work/sweep.toml" --coordinator "$url")
echo "sweep $id submitted in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"

# One result per work job, as a worker would have stored it; about 70 % solved. In
# statements of about 5,000 results, the size of a big upload (each is summed by a trigger).
start=$(date +%s.%N)
sql "INSERT INTO workers (name, host, cores) VALUES ('bench', 'bench', 1)"
for part in $(seq 0 49); do
  sql "INSERT INTO results (build_id, suite_id, position_index, depth, sweep_id, job_id,
                            attempt, worker_id, position_id, nodes, bestmove, solved, score_cp,
                            reached_depth, time_ms)
       SELECT j.build_id, j.suite_id, j.first_index, j.depth, j.sweep_id, j.id, 1, 1,
              'p' || j.first_index, 20000 + (j.id * 2654435761) % 480000, 'e2e4',
              (j.id * 7919) % 10 < 7, (j.id % 200)::int - 100, j.depth, 10
       FROM jobs j WHERE j.sweep_id = $id AND j.kind = 'work' AND j.id % 50 = $part"
done
sql "UPDATE jobs SET state = 'done', results_done = count, attempt = 1, worker_id = 1
     WHERE sweep_id = $id AND kind = 'work'"
# Every work job handed out: no build's cursor is left (a version before leases were rows
# has none).
sql "DO \$\$ BEGIN
       IF to_regclass('build_queue') IS NOT NULL THEN
         DELETE FROM build_queue WHERE sweep_id = $id;
       END IF;
     END \$\$"
# Fresh planner statistics, as autovacuum would gather within a minute of a change this size
# (the bulk update above leaves those of `jobs` saying every job is queued).
sql "ANALYZE results; ANALYZE jobs"
results=$(sql "SELECT count(*) FROM results WHERE sweep_id = $id")
checks=$(sql "SELECT count(*) FROM jobs WHERE sweep_id = $id AND kind = 'check'")
echo "$results results written in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s; $checks cross-checks open"

rss() { awk -v k="$1:" '$1 == k { printf "%.1f", $2 / 1024 }' "/proc/$coord/status"; }
# Times $READS reads of $1 (a path): prints "first / median / max ms" and the bytes of one.
reads() {
  local path=$1 times=() t bytes
  for _ in $(seq 1 "$READS"); do
    t=$(curl -sS -o "$work/body" -w '%{time_total}' -H "Authorization: Bearer $token" "$url$path")
    times+=("$(awk -v t="$t" 'BEGIN { printf "%.1f", t * 1000 }')")
  done
  bytes=$(wc -c < "$work/body")
  printf '%s\n' "${times[@]}" | sort -n | awk -v first="${times[0]}" -v b="$bytes" \
    '{ a[NR] = $1 } END { printf "%s / %s / %s ms (%d bytes)", first, a[int((NR + 1) / 2)], a[NR], b }'
}
rows=()
phase() {
  local name=$1 before after
  before=$(rss VmRSS)
  local table; table=$(reads "/api/v1/sweeps/$id/table")
  after=$(rss VmRSS)
  local positions; positions=$(reads "/api/v1/sweeps/$id/positions?build=NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS%3D256&page_size=1000")
  echo "$name: table $table, RSS $before -> $after MB (peak $(rss VmHWM)); positions page $positions"
  rows+=("| $name | $table | $before -> $after ($(rss VmHWM)) | $positions |")
}
phase running
sql "UPDATE jobs SET state = 'done' WHERE sweep_id = $id AND kind = 'check'"
echo "sweep state now: $(curl -sS -H "Authorization: Bearer $token" "$url/api/v1/sweeps/$id" | jq -r '.state')"
phase finished

echo
echo "| sweep | table: first / median / max of $READS reads | coordinator RSS MB before -> after (peak) | positions page (1,000 rows) |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
