# Shared by the bench scripts (sourced, not run): a throwaway Postgres database and, for the
# scripts that need one, a coordinator on a free port. Needs PG (a server URL without a
# database) set by the caller; KEEP set keeps the database and the logs for a look afterwards.

# Creates database "$1_<time>_<pid>" (in $db) and a scratch folder (in $work), both removed
# when the script exits (with the coordinator, if one was started); defines `sql`.
bench_database() {
  work=$(mktemp -d)
  db="$1_$(date +%s)_$$"
  coord=""
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
  psql "$PG/postgres" -qAtc "CREATE DATABASE $db" >/dev/null
}

bench_cleanup() {
  if [[ -n $coord ]]; then kill "$coord" 2>/dev/null || true; wait "$coord" 2>/dev/null || true; fi
  if [[ -n ${KEEP:-} ]]; then
    echo "KEEP: database $db and logs in $work left behind"
    return
  fi
  psql "$PG/postgres" -qAtc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}

# One statement (or several) on the benchmark's database, stopping at the first error.
sql() { psql "$PG/$db" -v ON_ERROR_STOP=1 -qAtc "$1"; }

# Starts the coordinator binary $1 on the benchmark's database, listening on a free port of
# 127.0.0.1; sets $coord (its pid) and $url, or exits with its log's tail.
bench_coordinator() {
  DATABASE_URL="$PG/$db" "$1" coordinator --listen 127.0.0.1:0 > "$work/coordinator.out" 2> "$work/coordinator.log" &
  coord=$!
  url=""
  for _ in $(seq 1 600); do
    # The coordinator announces itself on stdout: {"listening": "http://ADDR"}.
    url=$(head -n 1 "$work/coordinator.out" 2>/dev/null | jq -r '.listening // empty' 2>/dev/null || true)
    if [[ -n $url ]]; then return; fi
    kill -0 "$coord" 2>/dev/null || break
    sleep 0.1
  done
  echo "the coordinator did not start:" >&2; tail -n 20 "$work/coordinator.log" >&2; exit 1
}

# The parent of process $1 (nothing once it is gone).
ppid_of() {
  local stat f
  { read -r stat < "/proc/$1/stat"; } 2>/dev/null || return 0
  read -ra f <<< "${stat##*) }"
  echo "${f[1]}"
}

# The pid of the postmaster serving the benchmark's database (the parent of its cluster's
# checkpointer), so CPU figures count that cluster alone, never another one on the machine;
# exits if it cannot be found (a server on another machine).
bench_postmaster() {
  local checkpointer pid
  checkpointer=$(sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")
  pid=$(ppid_of "$checkpointer")
  if [[ -z $pid || $pid == 0 || ! -r /proc/$pid/stat ]]; then
    echo "cannot find the postmaster of $PG on this machine: the CPU figures need it here" >&2
    exit 1
  fi
  echo "$pid"
}

