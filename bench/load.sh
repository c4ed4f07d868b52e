#!/usr/bin/env bash
# Load benchmark of the coordinator: a fresh Postgres database, a release coordinator on a
# free port, a big queue of one-position jobs, then `sweep-loadgen` with N simulated workers
# for each N, and per N: lease calls/s, results stored/s, p50/p99 per call type, errors,
# coordinator RSS (VmRSS now, VmHWM peak so far) and the CPU of coordinator, Postgres and
# generator over the measured window. Ends with one markdown table.
#
#   bench/load.sh
#   WORKERS="10 100" DURATION=10 JOBS=20000 bench/load.sh
#   MODE=heartbeat-only WORKERS=10000 bench/load.sh
#   WORK_MS=2000 WORKERS="100 1000" bench/load.sh   # workers that spend 2 s per lease in engines
#   CHUNK=10 WORKERS="10 100" bench/load.sh         # jobs of 10 positions, as sweeps default to
#   BEATS=timed WORK_MS=1000 bench/load.sh          # heartbeats every 5 s, as real workers send
#   MODE=checks WORKERS="10 100" bench/load.sh      # the end of a big sweep: only cross-checks left
#
# Settings (environment): WORKERS (default "10 100 1000 10000"), DURATION seconds per N
# (20), JOBS jobs queued before each N (500000: the queue must outlast the run, and 100 workers
# lease 8 x 2,300 jobs/s here on a fast hour; it is topped up before each N by sweeps of at most
# SWEEP_JOBS, 250000, the seed's size; the coordinator refuses sweeps over its MAX_JOBS, and
# the script then falls back to the largest size it accepts and says so; a run whose queue
# still ran dry says so in its errors column, as its figures then understate), JOBS_PER_LEASE (8),
# CHUNK positions per job (1, the seed's sweep at chunk 1; 10 is a sweep's default chunk, so
# each upload then carries up to 10 results per job), WORK_MS (0: each simulated worker
# uploads as soon as it has heartbeated, saturation; else it waits that long between the two,
# as engines would take: the offered load is then at most workers x 1000 / WORK_MS lease
# calls/s), BEATS (per-lease: one heartbeat between each lease and its upload, the most a
# worker sends; timed: at most one every 5 s per worker, as the real worker's timer), MODE
# (lease; heartbeat-only; checks: the end of a big sweep that cross-checks half its positions,
# every work job's result stored by SQL and its cursors gone, so every lease is a pick of
# cross-checks, all of them queued again before each N), PG
# (postgres://postgres@127.0.0.1:5432), KEEP (set: keep the database and the logs for a look
# afterwards), SWEEP_BIN and LOADGEN_BIN (binaries to measure
# instead of building this checkout's: a before-and-after comparison), COORD_ARGS (more
# arguments of `sweep coordinator`, e.g. "--max-in-flight 512").
#
# Postgres CPU counts the backends of the benchmark's database, the shared writers
# (walwriter, checkpointer, background writer) and every backend that exited during the run
# (of any database: the postmaster's reaped children), all of the cluster PG names only (the
# children of its postmaster). CPU is in % of one core over the window.
# Prints figures; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

WORKERS=${WORKERS:-"10 100 1000 10000"}
DURATION=${DURATION:-20}
JOBS=${JOBS:-500000}
SWEEP_JOBS=${SWEEP_JOBS:-250000}
((SWEEP_JOBS <= JOBS)) || SWEEP_JOBS=$JOBS
JOBS_PER_LEASE=${JOBS_PER_LEASE:-8}
CHUNK=${CHUNK:-1}
MODE=${MODE:-lease}
WORK_MS=${WORK_MS:-0}
PG=${PG:-postgres://postgres@127.0.0.1:5432}

BEATS=${BEATS:-per-lease}
case $BEATS in per-lease | timed) ;; *) echo "BEATS must be per-lease or timed" >&2; exit 2 ;; esac
case $MODE in
  # --work-ms and --timed-heartbeats only when asked for, so binaries from before them
  # (LOADGEN_BIN) still run.
  lease | checks)
    mode_args=()
    ((WORK_MS == 0)) || mode_args+=(--work-ms "$WORK_MS")
    [[ $BEATS == per-lease ]] || mode_args+=(--timed-heartbeats)
    ;;
  heartbeat-only) mode_args=(--heartbeat-only) ;;
  *) echo "MODE must be lease, checks or heartbeat-only" >&2; exit 2 ;;
esac
command -v jq >/dev/null || { echo "load.sh needs jq" >&2; exit 2; }

# 10,000 workers are 10,000 connections on each side.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "open files limit: $(ulimit -n)"

# SWEEP_BIN / LOADGEN_BIN: binaries of another build (say, the commit before a change) to
# measure instead of this checkout's, which is then not built.
if [[ -z ${SWEEP_BIN:-} ]]; then
  cargo build --release --quiet -p sweep -p sweep-loadgen
fi
sweep=${SWEEP_BIN:-target/release/sweep}
loadgen=${LOADGEN_BIN:-target/release/sweep-loadgen}

# shellcheck source=bench/common.sh
source bench/common.sh
bench_database sweep_load

# Writes need tokens: an admin one for the submits, a worker one for the simulated workers.
admin_token=$("$sweep" token create --database-url "$PG/$db" --role admin --name bench-admin 2>/dev/null)
worker_token=$("$sweep" token create --database-url "$PG/$db" --role worker --name bench-workers 2>/dev/null)
export SWEEP_TOKEN=$admin_token
bench_coordinator "$sweep"
echo "coordinator $url (pid $coord), database $db"

# Sweeps submitted so far: each one after the first searches other depths, so the coordinator
# queues it instead of finding it identical to the first (and submitting nothing).
submitted=0

# A minnow sweep of about $1 jobs of CHUNK positions each: every suite (1,583 positions) times
# builds (baseline + skip-ceiling values) times depths. Prints its exact job count.
write_config() {
  local target=$1 file=$2 suites per=0 n builds depths=1 values first
  suites='"arasan2024", "bk", "ecm", "ecm_confident_quick", "ecm_hard_quick", "wac"'
  # Their sizes in positions: each gives ceil(size / CHUNK) jobs per build and depth.
  for n in 200 24 879 90 90 300; do per=$((per + (n + CHUNK - 1) / CHUNK)); done
  if ((target >= 2 * per)); then
    depths=$(((target + 257 * per - 1) / (257 * per)))
    ((depths <= 16)) || depths=16
  else
    suites='"ecm_confident_quick"'
    per=$(((90 + CHUNK - 1) / CHUNK))
  fi
  builds=$((target / (depths * per)))
  ((builds >= 2)) || builds=2
  ((builds <= 257)) || builds=257
  values=$(seq -s ', ' 1 $((builds - 1)))
  # Depths 6..40 (35 of them), a new range per submission.
  first=$((6 + (submitted * depths) % (35 - depths + 1)))
  cat > "$file" <<EOF
name = "load benchmark queue"
engine = "minnow"
knob = "NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS"
values = [$values]
suites = [$suites]
depths = [$(seq -s ', ' "$first" $((first + depths - 1)))]
chunk_size = $CHUNK
EOF
  # Enough checks that the end of the sweep outlasts a run.
  [[ $MODE != checks ]] || echo "cross_check = 0.5" >> "$file"
  echo $((builds * depths * per))
}

# Submits a queue of about $1 jobs; on refusal for size, retries with the largest size the
# coordinator names. Sets `used` to the planned size.
submit_queue() {
  local want=$1 out max
  used=$(write_config "$want" "$work/sweep.toml")
  if out=$("$sweep" submit "$work/sweep.toml" --coordinator "$url" 2>&1); then
    echo "submitted sweep $out: $used jobs"
    submitted=$((submitted + 1))
    return
  fi
  max=$(grep -o 'at most [0-9]*' <<< "$out" | grep -o '[0-9]*$' || true)
  if [[ -z $max ]]; then echo "submit failed: $out" >&2; exit 1; fi
  echo "NOTE: the coordinator refused a $used-job sweep ($out)"
  used=$(write_config "$max" "$work/sweep.toml")
  out=$("$sweep" submit "$work/sweep.toml" --coordinator "$url" 2>&1) || {
    echo "submit of $used jobs failed too: $out" >&2; exit 1; }
  submitted=$((submitted + 1))
  echo "NOTE: using the largest accepted size instead: sweep $out with $used jobs (JOBS=$want asked)"
}

# The end of the sweep: a result for every position of its work (in ten statements, as
# uploads of 25k results; an original's worker, 0, is none of the simulated ones), no cursor
# left, and (from migration 0022 on) every check marked as having its original.
finish_work() {
  local part
  for part in $(seq 0 9); do
    sql "INSERT INTO results (build_id, suite_id, position_index, depth, sweep_id, job_id,
                              attempt, worker_id, position_id, nodes, bestmove, solved,
                              reached_depth, time_ms)
         SELECT j.build_id, j.suite_id, p, j.depth, j.sweep_id, j.id, 1, 0, 'p', 1000 + p,
                'e2e4', TRUE, j.depth, 1
         FROM jobs j CROSS JOIN generate_series(j.first_index, j.first_index + j.count - 1) p
         WHERE j.kind = 'work' AND j.id % 10 = $part
         ON CONFLICT DO NOTHING" > /dev/null
  done
  sql "DELETE FROM build_queue; DELETE FROM requeued" > /dev/null
  if [[ $(sql "SELECT count(*) FROM information_schema.columns
               WHERE table_name = 'jobs' AND column_name = 'original_stored'") == 1 ]]; then
    sql "UPDATE jobs SET original_stored = TRUE WHERE kind = 'check'" > /dev/null
  fi
  sql "ANALYZE" > /dev/null
}

if [[ $MODE != heartbeat-only ]]; then
  start=$(date +%s.%N)
  submit_queue "$SWEEP_JOBS"
  echo "submit took $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
  queue_size=$used
  if [[ $MODE == checks ]]; then
    start=$(date +%s.%N)
    finish_work
    echo "every work job's results stored in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s" \
      "($(sql "SELECT count(*) FROM results") results)"
  fi
fi

tick=$(getconf CLK_TCK)
# Only the children of the benchmark's postmaster count: another cluster on the machine (its
# backends, writers and reaped children) must neither add to nor subtract from the figure.
postmaster=$(bench_postmaster)
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
# Waits until the generator logs $1 (or exits).
wait_for() {
  while ! grep -q "^$1\$" "$2" 2>/dev/null; do
    kill -0 "$3" 2>/dev/null || return 0
    sleep 0.05
  done
}
pct() { awk -v t="$1" -v hz="$tick" -v w="$2" 'BEGIN { printf "%.0f", 100 * t / hz / w }'; }
# ms of CPU per lease call (a worker cycle: the lease, its heartbeat if any, its upload) of a
# process using $1 % of a core at $2 lease calls/s: what a target in calls/s asks of each.
per_call() { awk -v c="$1" -v r="$2" 'BEGIN { if (r > 0) printf "%.2f", c / 100 / r * 1000; else printf "-" }'; }

# What waits to be handed out, and what is still held: lease rows (this version) or, for
# SWEEP_BIN of a version before leases were rows, job states.
if [[ $(sql "SELECT to_regclass('leases') IS NOT NULL") == t ]]; then
  queued_sql="SELECT COALESCE((SELECT sum(remaining) FROM build_queue), 0)
                     + (SELECT count(*) FROM requeued)"
  held_sql="SELECT count(*) FROM leases l, unnest(l.jobs) WITH ORDINALITY AS u(job, n)
            WHERE l.expires_at > now() AND (l.closed >> (u.n - 1)::int) & 1 = 0"
else
  queued_sql="SELECT count(*) FROM jobs WHERE state = 'queued'
                OR (state = 'leased' AND lease_expires_at < now())"
  held_sql="SELECT count(*) FROM jobs WHERE state = 'leased' AND lease_expires_at > now()"
fi

rows=()
for n in $WORKERS; do
  if [[ $MODE == lease ]]; then
    queued=$(sql "$queued_sql")
    while ((queued < JOBS)); do
      echo "$queued jobs queued; topping up to at least $JOBS"
      submit_queue "$queue_size"
      queued=$(sql "$queued_sql")
    done
    echo
    echo "== $n workers, $DURATION s ($queued jobs queued)"
  elif [[ $MODE == checks ]]; then
    # Each N takes the same checks: all queued again, none measured.
    sql "UPDATE jobs SET state = 'queued' WHERE kind = 'check'; DELETE FROM cross_checks" > /dev/null
    echo
    echo "== $n workers, $DURATION s ($(sql "SELECT count(*) FROM jobs WHERE kind = 'check'") cross-checks queued, no work)"
  else
    echo
    echo "== $n idle workers (heartbeat only), $DURATION s"
  fi
  out="$work/loadgen-$n"
  "$loadgen" --url "$url" --token "$worker_token" --workers "$n" --duration "$DURATION" \
    --jobs-per-lease "$JOBS_PER_LEASE" ${mode_args[@]+"${mode_args[@]}"} --json > "$out.json" 2> "$out.err" &
  lg=$!
  wait_for "loadgen: measuring" "$out.err" "$lg"
  t0=$(date +%s.%N); c0=$(ticks "$coord"); pg_snapshot "$postmaster" "$db" > "$work/pg0"
  wait_for "loadgen: done measuring" "$out.err" "$lg"
  t1=$(date +%s.%N); c1=$(ticks "$coord"); pg_snapshot "$postmaster" "$db" > "$work/pg1"
  if ! wait "$lg"; then
    echo "sweep-loadgen failed:" >&2; cat "$out.err" >&2; exit 1
  fi
  grep -v '^loadgen: \(done \)\?measuring$' "$out.err" || true
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
  cpu_c=$(pct $((c1 - c0)) "$wall")
  cpu_p=$(pct "$(pg_delta "$work/pg0" "$work/pg1")" "$wall")
  rss=$(($(status_kb "$coord" VmRSS) / 1024))
  hwm=$(($(status_kb "$coord" VmHWM) / 1024))
  # Jobs still held after every simulated worker has stopped.
  stranded=$(sql "$held_sql")
  j=$(cat "$out.json")
  q() { jq -r "$1" <<< "$j"; }
  # The generator measures itself: it exits too soon after its run to be sampled.
  cpu_g=$(q '(.cpu_secs // 0) / .elapsed_secs * 100 | round')
  lat() { q ".calls[] | select(.call == \"$1\") | \"\(.p50_ms * 10 | round / 10) / \(.p99_ms * 10 | round / 10)\""; }
  errors=$(q '[.calls[] | .call as $c | .errors | to_entries[] | "\($c) \(.key): \(.value)"]
              | if length == 0 then "none" else join(", ") end')
  # Workers that found nothing to do were not loading the coordinator: the run's rates
  # understate it, and the row must say so rather than look like a measurement.
  empty=$(q .empty_leases)
  if [[ $MODE != heartbeat-only ]] && ((empty > 0)); then
    dry="QUEUE RAN DRY ($empty empty leases; raise JOBS): rates understate"
    if [[ $errors == none ]]; then errors=$dry; else errors="$dry; $errors"; fi
  fi
  lease_rate=$(q '.lease_calls_per_sec * 10 | round / 10')
  result_rate=$(q '.results_per_sec * 10 | round / 10')
  hb_rate=$(q '.calls[] | select(.call == "heartbeat") | .per_sec * 10 | round / 10')
  echo "lease calls/s $lease_rate, heartbeat calls/s $hb_rate, results/s $result_rate" \
    "(jobs leased $(q .jobs_leased), empty leases $(q .empty_leases), lost $(q .lost), abandoned $(q .abandoned))"
  echo "p50 / p99 ms: register $(lat register), lease $(lat lease), heartbeat $(lat heartbeat), results $(lat results)"
  echo "errors: $errors"
  if [[ $MODE == checks ]]; then
    echo "cross-checks measured by the end of the run: $(sql "SELECT count(*) FROM cross_checks")"
  fi
  echo "coordinator RSS ${rss} MB (peak ${hwm} MB); CPU over $(printf %.1f "$wall") s:" \
    "coordinator ${cpu_c} %, postgres ${cpu_p} %, loadgen ${cpu_g} %; jobs still leased after the run: $stranded"
  cycle="$(per_call "$cpu_c" "$lease_rate") / $(per_call "$cpu_p" "$lease_rate") / $(per_call "$cpu_g" "$lease_rate")"
  rows+=("| $n | $lease_rate | $hb_rate | $result_rate | $(lat lease) | $(lat heartbeat) | $(lat results) | $errors | $rss ($hwm) | $cpu_c / $cpu_p / $cpu_g | $cycle | $stranded |")
done

logged=$(grep -cE ' (WARN|ERROR) ' "$work/coordinator.log" || true)
echo
echo "coordinator log: $logged warnings and errors"
if ((logged > 0)); then
  # Grouped with numbers masked, so one kind of message is one line.
  grep -E ' (WARN|ERROR) ' "$work/coordinator.log" | sed -E 's/^[^ ]+ +//; s/[0-9]+/N/g' |
    cut -c1-160 | sort | uniq -c | sort -rn | head -n 5
fi
echo
if [[ $MODE != heartbeat-only ]]; then
  echo "$MODE mode, $DURATION s per run, $JOBS_PER_LEASE jobs per lease of $CHUNK position(s) each, $WORK_MS ms of work per lease, heartbeats $BEATS, $(nproc) cores; CPU in % of one core"
else
  echo "heartbeat-only mode, $DURATION s per run, $(nproc) cores; CPU in % of one core"
fi
echo
echo "| workers | lease/s | heartbeat/s | results/s | lease p50/p99 ms | heartbeat p50/p99 ms | results p50/p99 ms | errors | coord RSS MB (peak) | CPU % coord / pg / gen | CPU ms per lease call coord / pg / gen | stranded |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
