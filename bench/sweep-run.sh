#!/usr/bin/env bash
# Times `sweep run CONFIG` on a fresh SQLite file and a fresh build cache, and prints wall time,
# the CPU time of the engines and builds (the children of the sweep process), the sweep
# process's own CPU time, and utilisation = children CPU / (cores x wall).
#
#   bench/sweep-run.sh [CONFIG] [CORES]      (defaults: configs/sweeps/demo.toml, all cores)
#
# Builds the release binary first. Prints figures; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-configs/sweeps/demo.toml}
cores=${2:-$(nproc)}
cargo build --release --quiet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tick=$(getconf CLK_TCK)

start=$(date +%s.%N)
target/release/sweep run "$config" --cores "$cores" --database "$work/sweep.db" \
  --cache-dir "$work/cache" --format md > "$work/table.md" 2> "$work/stderr.log" &
pid=$!
self_ticks=0
# The sweep's own CPU (utime + stime, fields 14 and 15 of /proc/PID/stat; 12 and 13 after the
# command name), sampled until it exits.
# Builtins only in this loop, so the poller adds (almost) nothing to the children's CPU.
while kill -0 "$pid" 2>/dev/null; do
  if read -r stat < "/proc/$pid/stat" 2>/dev/null; then
    read -ra fields <<< "${stat##*) }"
    self_ticks=$((fields[11] + fields[12]))
  fi
  sleep 0.1
done
wait "$pid"
end=$(date +%s.%N)
# CPU of everything this script waited for: the sweep process and, through it, engines and builds.
# `times` must run in this shell, not in a pipeline's subshell, to see its children.
times > "$work/times"
times_out=$(tail -n 1 "$work/times")
child_secs=$(awk '{
  split($1, u, "m"); split($2, s, "m");
  gsub("s", "", u[2]); gsub("s", "", s[2]);
  print u[1] * 60 + u[2] + s[1] * 60 + s[2] }' <<< "$times_out")
wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
self_secs=$(awk -v t="$self_ticks" -v hz="$tick" 'BEGIN { printf "%.2f", t / hz }')
engines=$(awk -v c="$child_secs" -v s="$self_secs" 'BEGIN { printf "%.2f", c - s }')
util=$(awk -v e="$engines" -v n="$cores" -v w="$wall" 'BEGIN { printf "%.1f", 100 * e / (n * w) }')
echo "config:                 $config"
echo "cores:                  $cores"
echo "wall time:              ${wall} s"
echo "engines + builds CPU:   ${engines} s"
echo "sweep process CPU:      ${self_secs} s"
echo "utilisation:            ${util} % (engines + builds CPU / (cores x wall))"
tail -n 1 "$work/stderr.log"
