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
# 127.0.0.1, with COORD_ARGS (split on spaces: `COORD_ARGS="--max-in-flight 512"`) after its
# own; sets $coord (its pid) and $url, or exits with its log's tail.
bench_coordinator() {
  local extra cap=()
  read -ra extra <<< "${COORD_ARGS:-}"
  # The load generator registers every simulated worker with one token (a binary from
  # before the per-token cap has no such flag).
  if "$1" coordinator --help 2>/dev/null | grep -q -- --max-workers-per-token; then
    cap=(--max-workers-per-token 1000000)
  fi
  DATABASE_URL="$PG/$db" "$1" coordinator --listen 127.0.0.1:0 "${cap[@]}" "${extra[@]}" > "$work/coordinator.out" 2> "$work/coordinator.log" &
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

# utime + stime of process $1 in ticks (0 once it is gone).
ticks() {
  local stat f
  { read -r stat < "/proc/$1/stat"; } 2>/dev/null || { echo 0; return; }
  read -ra f <<< "${stat##*) }"
  echo $((f[11] + f[12]))
}

# cutime + cstime of process $1: what the children it reaped have used.
reaped_ticks() {
  local stat f
  { read -r stat < "/proc/$1/stat"; } 2>/dev/null || { echo 0; return; }
  read -ra f <<< "${stat##*) }"
  echo $((f[13] + f[14]))
}

# CPU ticks of the Postgres cluster whose postmaster is $1, as "key ticks" lines: one per
# child (with $2 given, only the backends of database $2 and the shared writers: walwriter,
# checkpointer, background writer), plus `reaped`, what the children that exited have used
# (of any database: backends come and go with connections). Read again whenever a child was
# reaped during the reading: it would otherwise count in neither half (or in both).
pg_snapshot() {
  local p stat f cmd r1 r2 lines
  while :; do
    r1=$(reaped_ticks "$1")
    lines=""
    for p in /proc/[0-9]*; do
      { read -r stat < "$p/stat"; } 2>/dev/null || continue
      read -ra f <<< "${stat##*) }"
      [[ ${f[1]} == "$1" ]] || continue
      # An exited child not yet reaped counts as it is, as the reaped ones do.
      if [[ -n ${2:-} && ${f[0]} != Z ]]; then
        cmd=$({ tr '\0' ' ' < "$p/cmdline"; } 2>/dev/null) || continue
        [[ $cmd == *" $2 "* || $cmd == *walwriter* || $cmd == *checkpointer* ||
           $cmd == *"background writer"* ]] || continue
      fi
      lines+="${p#/proc/} $((f[11] + f[12]))"$'\n'
    done
    r2=$(reaped_ticks "$1")
    [[ $r1 != "$r2" ]] || break
  done
  echo "reaped $r1"
  printf '%s' "$lines"
}

# Ticks spent between two pg_snapshot files: processes that started meanwhile count whole,
# and those that ended meanwhile (now in the reaped total, with what they had spent before)
# have their earlier ticks taken off.
pg_delta() {
  awk 'NR == FNR { before[$1] = $2; next } { d += $2 - before[$1]; seen[$1] = 1 }
       END { for (k in before) if (!(k in seen)) d -= before[k]; print d + 0 }' "$1" "$2"
}
