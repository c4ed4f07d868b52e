#!/usr/bin/env bash
# Issue 51's probe as a benchmark: a coordinator with two one-core workers, the seed plan's
# sweep (configs/sweeps/nullmove-skip-ceiling.toml, "big") and one second later the demo
# (configs/sweeps/demo.toml, "small"); then each alone. Prints each sweep's wall time, the
# small one's beside the big one against alone (the issue: about twice), and what the big one
# lost (the issue: no more than the small one's work).
#
#   bench/probe.sh          (DATABASE_URL: a postgres:// URL; default a fresh SQLite file;
#                            SWEEP_BIN: default target/quick/sweep, built first)
#
# The contested run goes first, so it compiles the builds and the runs alone find them in
# the workers' caches: if anything, the alone figures are flattered. Prints figures; asserts
# nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
sweep=${SWEEP_BIN:-target/quick/sweep}
if [[ -z ${SWEEP_BIN:-} ]]; then
  cargo build --profile quick --quiet
fi
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
db=${DATABASE_URL:-$work/probe.db}
token() { "$sweep" token create --database "$db" --role "$1" --name "probe-$1-$$"; }
export SWEEP_TOKEN
SWEEP_TOKEN=$(token admin)
worker_token=$(token worker)

DATABASE_URL=$db "$sweep" coordinator --listen 127.0.0.1:0 > "$work/coordinator.out" \
  2> "$work/coordinator.log" &
pids+=($!)
until [[ -s $work/coordinator.out ]]; do sleep 0.1; done
url=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["listening"])' \
  "$work/coordinator.out")
for w in w1 w2; do
  SWEEP_TOKEN=$worker_token "$sweep" worker --coordinator "$url" --cores 1 \
    --cache-dir "$work/cache-$w" --name "$w" 2> "$work/$w.log" &
  pids+=($!)
done

submit() { "$sweep" submit "$1" --coordinator "$url" --force 2>/dev/null; }
# Seconds from $2 (epoch) until sweep $1 is final.
until_final() {
  while true; do
    state=$("$sweep" status "$1" --coordinator "$url" --json |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
    case $state in queued|running|pending_approval) sleep 0.5 ;; *) break ;; esac
  done
  python3 -c "import time; print(f'{time.time() - $2:.1f}')"
}
now() { python3 -c 'import time; print(time.time())'; }

echo "bench/probe.sh: $(date -u +%Y-%m-%dT%H:%MZ), database ${DATABASE_URL:+postgres}${DATABASE_URL:-sqlite}"
t0=$(now)
big=$(submit configs/sweeps/nullmove-skip-ceiling.toml)
sleep 1
t1=$(now)
small=$(submit configs/sweeps/demo.toml)
small_beside=$(until_final "$small" "$t1")
big_beside=$(until_final "$big" "$t0")

t=$(now)
small=$(submit configs/sweeps/demo.toml)
small_alone=$(until_final "$small" "$t")
t=$(now)
big=$(submit configs/sweeps/nullmove-skip-ceiling.toml)
big_alone=$(until_final "$big" "$t")

python3 - "$small_alone" "$small_beside" "$big_alone" "$big_beside" <<'EOF'
import sys
sa, sb, ba, bb = map(float, sys.argv[1:])
print(f"small (demo):      alone {sa:7.1f} s   beside the big one {sb:7.1f} s   ({sb / sa:.2f} x)")
print(f"big (seed plan):   alone {ba:7.1f} s   with the small one {bb:7.1f} s   (+{bb - ba:.1f} s;"
      f" the small one's work alone took {sa:.1f} s of both workers)")
EOF
