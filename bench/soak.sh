#!/usr/bin/env bash
# A soak to run before a release: the service as a team runs it (two coordinators on one
# Postgres behind HAProxy, several workers), with faults thrown at it for SOAK_S seconds
# (default 1800), sweep after sweep, and every sweep checked at the end.
#
#   bench/soak.sh                       SOAK_S=600 WORKERS=4 bench/soak.sh
#
# What it does:
# - a private Postgres cluster (restartable), two coordinators (`--lease-secs 10`) behind the
#   shipped deploy/haproxy/haproxy.cfg (only its addresses changed), WORKERS one-core workers
#   (default 3) talking to the balancer;
# - the reference: CONFIG (default configs/sweeps/demo.toml) run once with `sweep run` on a
#   SQLite file, fault-free;
# - then, until SOAK_S is spent, CONFIG submitted with --force (every position measured
#   again) through the balancer, one sweep after another, while every 8 to 20 s one fault
#   strikes: `kill -9` of a random worker (started again 2 s later) or of a random coordinator
#   (started again on its port 3 s later); once, at a third of the time, Postgres is
#   restarted (`pg_ctl restart -m fast`), and once, at two thirds, the balancer is killed and
#   started again;
# - at the end, for every sweep submitted: its state (must be done), its results (one per
#   position: none lost, none twice) and its table's nodes, solved, done and errors per
#   build, suite and limit (equal to the reference's).
#
# Prints what it did and the verdict; exits 1 if any sweep lost, duplicated or differed.
# SWEEP_BIN picks the binary (default: target/release/sweep, built first).
set -euo pipefail
cd "$(dirname "$0")/.."

SOAK_S=${SOAK_S:-1800}
WORKERS=${WORKERS:-3}
CONFIG=${CONFIG:-configs/sweeps/demo.toml}
if [[ -z "${SWEEP_BIN:-}" ]]; then
  cargo build --release --quiet
  SWEEP_BIN=target/release/sweep
fi
bin=$(realpath "$SWEEP_BIN")
haproxy_bin=$(command -v haproxy || echo /usr/sbin/haproxy)
[[ -x $haproxy_bin ]] || { echo "soak: needs haproxy (apt-get install haproxy)" >&2; exit 1; }
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[[ -x $pgbin/pg_ctl ]] || { echo "soak: needs Postgres server binaries (apt-get install postgresql)" >&2; exit 1; }

work=$(mktemp -d /tmp/sweep-soak.XXXXXX)
declare -A pids=()
started=$(date +%s)
log() { printf '%6ss  %s\n' "$(($(date +%s) - started))" "$*"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Postgres refuses to run as root: as root the cluster runs as the `postgres` user.
as_pg() { if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pg_port=$(free_port)
# The cluster's own directory: the postgres user's; the rest (build caches) stays ours.
chmod 755 "$work"
mkdir "$work/pg"
[[ $(id -u) == 0 ]] && chown postgres "$work/pg"
as_pg "$pgbin/initdb" -A trust -U postgres --no-sync -D "$work/pg/data" > /dev/null
pg_ctl() { as_pg "$pgbin/pg_ctl" -D "$work/pg/data" -w -l "$work/pg/log" \
  -o "-p $pg_port -c listen_addresses=127.0.0.1 -k $work/pg -c fsync=off" "$@" > /dev/null; }
pg_ctl start
db="postgres://postgres@127.0.0.1:$pg_port/postgres"

cleanup() {
  for name in "${!pids[@]}"; do kill -9 "${pids[$name]}" 2>/dev/null || true; done
  pg_ctl -m immediate stop 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

admin=$("$bin" token create --database "$db" --role admin --name soak-admin 2> /dev/null)
worker_token=$("$bin" token create --database "$db" --role worker --name soak-workers 2> /dev/null)
coord_ports=("$(free_port)" "$(free_port)")
start_coordinator() { # INDEX
  local port=${coord_ports[$1]}
  "$bin" coordinator --database "$db" --listen "127.0.0.1:$port" --lease-secs 10 \
    > /dev/null 2>> "$work/coordinator$1.log" &
  pids[coordinator$1]=$!
  disown
}
start_worker() { # INDEX
  SWEEP_TOKEN=$worker_token "$bin" worker --coordinator "http://127.0.0.1:$balancer_port" \
    --cores 1 --name "soak-w$1" --cache-dir "$work/cache$1" > /dev/null 2>> "$work/worker$1.log" &
  pids[worker$1]=$!
  disown
}
balancer_port=$(free_port)
sed -e "/^ *server /d" -e "s/bind :8080/bind 127.0.0.1:$balancer_port/" deploy/haproxy/haproxy.cfg \
  > "$work/haproxy.cfg"
for i in 0 1; do
  echo "    server coordinator$((i + 1)) 127.0.0.1:${coord_ports[$i]}" >> "$work/haproxy.cfg"
done
start_balancer() { "$haproxy_bin" -db -f "$work/haproxy.cfg" > /dev/null 2>&1 & pids[balancer]=$!; disown; }
base="http://127.0.0.1:$balancer_port"
wait_up() { # URL
  for _ in $(seq 1 150); do curl -sf "$1/healthz" > /dev/null && return 0; sleep 0.2; done
  echo "soak: $1 never came up" >&2; return 1
}
start_coordinator 0; start_coordinator 1
wait_up "http://127.0.0.1:${coord_ports[0]}"; wait_up "http://127.0.0.1:${coord_ports[1]}"
start_balancer; wait_up "$base"
for i in $(seq 1 "$WORKERS"); do start_worker "$i"; done
log "Postgres on $pg_port, coordinators on ${coord_ports[*]}, balancer on $balancer_port, $WORKERS workers; $CONFIG for ${SOAK_S} s"

# The fault-free reference, on its own SQLite file.
"$bin" run "$CONFIG" --format json --cores 2 --database "$work/reference.db" \
  --cache-dir "$work/reference-cache" > "$work/reference.json" 2> "$work/reference.log" \
  || { echo "soak: the reference run failed:" >&2; tail -n 5 "$work/reference.log" >&2; exit 1; }
log "reference: $CONFIG run fault-free with sweep run"

export SWEEP_TOKEN=$admin
submitted=()
faults=0; worker_kills=0; coordinator_kills=0; pg_restarts=0; balancer_restarts=0
next_fault=$(($(date +%s) + 8 + RANDOM % 13))
current=""
deadline=$((started + SOAK_S))
while (( $(date +%s) < deadline )); do
  if [[ -z $current ]] || [[ $("$bin" status "$current" --coordinator "$base" --json 2>/dev/null \
      | jq -r .state 2>/dev/null) =~ ^(done|done_with_errors|failed|cancelled)$ ]]; then
    if id=$("$bin" submit "$CONFIG" --force --coordinator "$base" 2> /dev/null); then
      current=$id; submitted+=("$id"); log "submitted sweep $id"
    fi
  fi
  now=$(date +%s)
  if (( now >= next_fault )); then
    faults=$((faults + 1))
    elapsed=$((now - started))
    if (( pg_restarts == 0 && elapsed >= SOAK_S / 3 )); then
      pg_ctl -m fast restart; pg_restarts=1; log "fault $faults: Postgres restarted"
    elif (( balancer_restarts == 0 && elapsed >= 2 * SOAK_S / 3 )); then
      kill -9 "${pids[balancer]}"; sleep 1; start_balancer; balancer_restarts=1
      log "fault $faults: balancer killed and started again"
    elif (( RANDOM % 3 )); then
      i=$((1 + RANDOM % WORKERS)); kill -9 "${pids[worker$i]}" 2>/dev/null || true
      sleep 2; start_worker "$i"; worker_kills=$((worker_kills + 1))
      log "fault $faults: worker soak-w$i killed with -9, started again"
    else
      i=$((RANDOM % 2)); kill -9 "${pids[coordinator$i]}" 2>/dev/null || true
      sleep 3; start_coordinator "$i"; coordinator_kills=$((coordinator_kills + 1))
      log "fault $faults: coordinator$((i + 1)) killed with -9, started again"
    fi
    next_fault=$(($(date +%s) + 8 + RANDOM % 13))
  fi
  sleep 1
done
log "faults stop: $worker_kills worker kills, $coordinator_kills coordinator kills, $pg_restarts Postgres restart, $balancer_restarts balancer restart; waiting for sweep $current"

# The last sweep ends without faults; then every sweep is checked.
for _ in $(seq 1 600); do
  state=$("$bin" status "$current" --coordinator "$base" --json 2>/dev/null | jq -r .state || true)
  [[ $state =~ ^(done|done_with_errors|failed|cancelled)$ ]] && break
  sleep 1
done
bad=0
for id in "${submitted[@]}"; do
  "$bin" table "$id" --coordinator "$base" --format json > "$work/table-$id.json"
  state=$("$bin" status "$id" --coordinator "$base" --json | jq -r .state)
  counts=$(as_pg "$pgbin/psql" -h 127.0.0.1 -p "$pg_port" -U postgres -At -c \
    "SELECT count(*), count(DISTINCT (build_id, suite_id, position_index, depth)),
            (SELECT position_count FROM sweeps WHERE id = $id)
     FROM results WHERE sweep_id = $id" postgres)
  verdict=$(python3 - "$work/reference.json" "$work/table-$id.json" "$state" "$counts" <<'PY'
import json, sys
def cells(path):
    t = json.load(open(path))
    out = {}
    for lt in t["tables"]:
        for row in lt["rows"]:
            for suite, c in list(row["suites"].items()) + [("combined", row["combined"])]:
                out[(row["build"], json.dumps(lt["limit"]), suite)] = (c["nodes"], c["solved"], c["done"], c["errors"])
    return out
ref, got = cells(sys.argv[1]), cells(sys.argv[2])
rows, distinct, planned = map(int, sys.argv[4].split("|"))
problems = []
if sys.argv[3] != "done": problems.append(f"state {sys.argv[3]}")
if rows != planned: problems.append(f"{planned - rows} results lost")
if distinct != rows: problems.append(f"{rows - distinct} results twice")
if got != ref: problems.append(f"{sum(1 for k in ref if got.get(k) != ref[k])} cells differ from the reference")
print("ok" if not problems else ", ".join(problems))
PY
)
  [[ $verdict == ok ]] || bad=$((bad + 1))
  echo "sweep $id: $state, results $(cut -d'|' -f1 <<< "$counts")/$(cut -d'|' -f3 <<< "$counts"): $verdict"
done
echo "soak: ${#submitted[@]} sweeps in $(($(date +%s) - started)) s under $faults faults ($worker_kills worker kills, $coordinator_kills coordinator kills, $pg_restarts Postgres restart, $balancer_restarts balancer restart); $bad with a problem"
(( bad == 0 ))
