#!/usr/bin/env bash
# The database floor of the worker protocol: what Postgres alone can do per second of the
# writes every job costs, with no coordinator, no HTTP and no generator in the way, and with
# the whole machine to itself. It answers "how fast could any coordinator over this schema
# be here?", which bench/load.sh (the real thing, sharing the cores) cannot.
#
# A fresh database gets the project's Postgres migrations (applied in order with psql), a
# 250k-job queue of one-position jobs (JOBS) over 257 builds, and then, for each batch size B
# (BATCHES, jobs per transaction) and client count (CLIENTS), pgbench runs this cycle, the
# least a job costs in the database whatever a coordinator batches:
#   1. lease:  one transaction that picks B queued jobs in index order (SKIP LOCKED) and marks
#              them leased with their attempt bumped (the lease statements' shape, without the
#              per-worker conditions);
#   2. upload: one transaction that inserts B results (UNNEST, ON CONFLICT DO NOTHING, the
#              real `results` table and indexes) and marks the B jobs done.
# CYCLE=lease-rows measures instead the floor of a store that never writes `jobs` on the hot
# path (not how Sweep works today; the shape a design meeting issue 14's targets would have):
#   1. lease:  one transaction advances a queue cursor by B and inserts one lease row naming
#              the B jobs (a range of ids here, the cheapest form such a row could take);
#   2. upload: one transaction locks that lease row, inserts the B results (job data read
#              from `jobs` by primary key) and marks the lease row done.
# It prints jobs/s (= results/s) and lease transactions/s per setting, with Postgres' CPU.
# B = 8 is what one lease call asks for in bench/load.sh; a coordinator that claims for many
# calls at once and stores many uploads together approaches the larger B.
#
#   bench/pg-floor.sh
#   BATCHES="8 64 512" CLIENTS="2 8" DURATION=10 bench/pg-floor.sh
#
# Settings (environment): CYCLE (jobs, the default: the cycle above; or lease-rows),
# BATCHES (default "8 64 512"), CLIENTS ("2 8"), DURATION seconds
# per run (10), JOBS (250000; a run that empties the queue says so, and its figure is only a
# lower bound), LEAN (set: drop every index of `jobs` and `results` but their primary keys
# and the queue's `jobs_queued_work`, for the floor of a leaner schema than ours), SUMS (off:
# disable the `results_summed` trigger, to see what the table's sums cost each insert), FK
# (off: drop the foreign key of `results.build_id`, if the schema still has it), PG
# (postgres://postgres@127.0.0.1:5432), KEEP (set: keep the database). Needs psql and
# pgbench (Debian: postgresql-client). Prints figures; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

CYCLE=${CYCLE:-jobs}
case $CYCLE in jobs | lease-rows) ;; *) echo "CYCLE must be jobs or lease-rows" >&2; exit 2 ;; esac
BATCHES=${BATCHES:-"8 64 512"}
CLIENTS=${CLIENTS:-"2 8"}
DURATION=${DURATION:-10}
JOBS=${JOBS:-250000}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
for tool in psql pgbench; do
  command -v "$tool" >/dev/null || { echo "pg-floor.sh needs $tool (Debian: postgresql-client)" >&2; exit 2; }
done

# shellcheck source=bench/common.sh
source bench/common.sh
bench_database sweep_floor
for m in migrations/postgres/*.sql; do
  psql "$PG/$db" -v ON_ERROR_STOP=1 -q -1 -f "$m" >/dev/null
done

if [[ -n ${LEAN:-} ]]; then
  sql "SELECT 'DROP INDEX ' || string_agg(indexrelid::regclass::text, ', ')
       FROM pg_index WHERE indrelid IN ('jobs'::regclass, 'results'::regclass)
         AND NOT indisprimary AND indexrelid <> 'jobs_queued_work'::regclass" > "$work/lean.sql"
  psql "$PG/$db" -v ON_ERROR_STOP=1 -q -f "$work/lean.sql"
fi
if [[ ${SUMS:-on} == off ]]; then
  sql "ALTER TABLE results DISABLE TRIGGER results_summed" >/dev/null
elif [[ ${SUMS:-on} != on ]]; then
  echo "SUMS must be on or off" >&2; exit 2
fi
if [[ ${FK:-on} == off ]]; then
  sql "ALTER TABLE results DROP CONSTRAINT IF EXISTS results_build_id_fkey" >/dev/null
elif [[ ${FK:-on} != on ]]; then
  echo "FK must be on or off" >&2; exit 2
fi
builds=257
# Parents of the queue: one snapshot, suite, sweep and 257 builds, one worker per client.
sql "INSERT INTO source_snapshots (sha256, archive) VALUES ('floor', '');
     INSERT INTO suites (name, sha256, positions, size) VALUES ('floor', 'floor', '[]', $JOBS);
     INSERT INTO sweeps (name, engine, spec, engine_def, source_sha256)
       VALUES ('floor', 'minnow', '{}', '{}', 'floor');
     INSERT INTO builds (sweep_id, name, defines, is_baseline, ord)
       SELECT 1, 'b' || g, '{}', g = 0, g FROM generate_series(0, $builds - 1) g;
     INSERT INTO workers (name, host, cores) SELECT 'w' || g, 'floor', 1 FROM generate_series(1, 64) g;"
# The queue as a sweep writes it: jobs in build-major order, positions within.
fill() {
  sql "TRUNCATE results;
       DELETE FROM jobs;
       INSERT INTO jobs (sweep_id, build_id, suite_id, first_index, count, depth)
         SELECT 1, 1 + g % $builds, 1, g / $builds, 1, 10 FROM generate_series(0, $JOBS - 1) g
         ORDER BY 1 + g % $builds, g / $builds;"
  sql "VACUUM ANALYZE jobs"
  sql "VACUUM ANALYZE results"
  if [[ $CYCLE == lease-rows ]]; then
    sql "DROP TABLE IF EXISTS floor_leases, floor_cursor;
         CREATE TABLE floor_leases (id BIGSERIAL PRIMARY KEY, worker_id BIGINT NOT NULL,
           first_job BIGINT NOT NULL, end_job BIGINT NOT NULL, expires_at TIMESTAMPTZ NOT NULL,
           done BOOLEAN NOT NULL DEFAULT FALSE);
         CREATE TABLE floor_cursor (next BIGINT NOT NULL, last BIGINT NOT NULL);
         INSERT INTO floor_cursor SELECT min(id), max(id) FROM jobs;"
  fi
}

# One cycle of B jobs: lease (ids and attempts carried to the upload by \gset), then upload.
cat > "$work/cycle.sql" <<'EOF'
\set w 1 + :client_id % 64
BEGIN;
-- As the coordinator's lease transactions (statements::LEASE_SETTINGS); uploads keep it on.
SET LOCAL synchronous_commit = off;
WITH picked AS (
  SELECT j.id FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
  WHERE j.state = 'queued' AND j.kind = 'work'
  ORDER BY j.id LIMIT :batch FOR UPDATE OF j SKIP LOCKED),
leased AS (
  UPDATE jobs SET state = 'leased', attempt = jobs.attempt + 1, worker_id = :w,
         lease_expires_at = now() + interval '30 s', updated_at = now()
  FROM picked WHERE jobs.id = picked.id
  RETURNING jobs.id, jobs.build_id, jobs.first_index)
SELECT coalesce(array_agg(id), '{}')::text AS ids,
       coalesce(array_agg(build_id), '{}')::text AS builds,
       coalesce(array_agg(first_index), '{}')::text AS idxs FROM leased \gset
COMMIT;
BEGIN;
INSERT INTO results (build_id, suite_id, position_index, depth, sweep_id, job_id, attempt,
                     worker_id, position_id, nodes, bestmove, solved, reached_depth, time_ms)
SELECT t.build, 1, t.idx, 10, 1, t.job, 1, :w, 'floor ' || t.idx, 123456, 'e2e4', true, 10, 42
FROM UNNEST(':ids'::int8[], ':builds'::int8[], ':idxs'::int4[]) AS t(job, build, idx)
ON CONFLICT DO NOTHING;
UPDATE jobs SET results_done = jobs.results_done + 1, state = 'done', updated_at = now()
FROM UNNEST(':ids'::int8[]) AS t(id) WHERE jobs.id = t.id;
COMMIT;
EOF

# The same B jobs through lease rows: no write to `jobs` at all.
cat > "$work/lease-rows.sql" <<'EOF'
\set w 1 + :client_id % 64
BEGIN;
SET LOCAL synchronous_commit = off;
WITH c AS (
  UPDATE floor_cursor SET next = next + :batch
  RETURNING next - :batch AS first, LEAST(next, last + 1) AS fin)
INSERT INTO floor_leases (worker_id, first_job, end_job, expires_at)
SELECT :w, first, GREATEST(first, fin), now() + interval '30 s' FROM c
RETURNING id AS lease, first_job AS first, end_job AS fin \gset
COMMIT;
BEGIN;
SELECT 1 FROM floor_leases WHERE id = :lease AND worker_id = :w AND NOT done FOR UPDATE;
INSERT INTO results (build_id, suite_id, position_index, depth, sweep_id, job_id, attempt,
                     worker_id, position_id, nodes, bestmove, solved, reached_depth, time_ms)
SELECT j.build_id, 1, j.first_index, 10, 1, j.id, :lease, :w, 'floor ' || j.first_index,
       123456, 'e2e4', true, 10, 42
FROM jobs j WHERE j.id >= :first AND j.id < :fin
ON CONFLICT DO NOTHING;
UPDATE floor_leases SET done = TRUE WHERE id = :lease;
COMMIT;
EOF
script=$work/cycle.sql
[[ $CYCLE == lease-rows ]] && script=$work/lease-rows.sql

tick=$(getconf CLK_TCK)
# Only the benchmark's cluster counts: every child of its postmaster (backends come and go
# with pgbench's connections, so those it reaped count too), never another cluster's.
postmaster=$(bench_postmaster)

echo "database $db, $JOBS jobs over $builds builds, ${DURATION}s per run, $(nproc) cores, cycle $CYCLE${LEAN:+, lean schema}, sums ${SUMS:-on}, results' foreign key ${FK:-on}"
rows=()
for b in $BATCHES; do
  for c in $CLIENTS; do
    fill
    pg_snapshot "$postmaster" > "$work/pg0"
    out=$(pgbench -n -f "$script" -D batch="$b" -c "$c" -j "$c" -T "$DURATION" "$PG/$db" 2>&1) || {
      echo "pgbench failed (batch $b, clients $c):" >&2; echo "$out" >&2; exit 1; }
    pg_snapshot "$postmaster" > "$work/pg1"
    done_jobs=$(sql "SELECT count(*) FROM results")
    tps=$(grep -o 'tps = [0-9.]*' <<< "$out" | head -n 1 | grep -o '[0-9.]*$')
    lat=$(grep -o 'latency average = [0-9.]* ms' <<< "$out" | grep -o '[0-9.]* ms' || echo "-")
    jobs_s=$(awk -v n="$done_jobs" -v d="$DURATION" 'BEGIN { printf "%.0f", n / d }')
    cpu=$(awk -v t="$(pg_delta "$work/pg0" "$work/pg1")" -v hz="$tick" -v d="$DURATION" 'BEGIN { printf "%.0f", 100 * t / hz / d }')
    if ((done_jobs >= JOBS)); then echo "NOTE: the queue ran dry (raise JOBS): a lower bound" >&2; fi
    echo "batch $b, $c clients: $jobs_s jobs/s ($tps cycles/s, $lat per cycle), Postgres CPU $cpu % of a core"
    rows+=("| $b | $c | $jobs_s | $(awk -v t="$tps" 'BEGIN { printf "%.0f", t }') | $lat | $cpu % |")
  done
done
echo
echo "| jobs per transaction | clients | jobs (results) per s | lease transactions per s | cycle latency | Postgres CPU |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
