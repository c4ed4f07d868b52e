#!/usr/bin/env bash
# The newcomer's first command, timed from `git clone` to the demo's table: clones REPO (default:
# this checkout) into a scratch folder and runs the README's first command there with a cold
# build (its own target directory) and, unless WARM_REGISTRY=1, an empty cargo home, so crates
# are downloaded as on a fresh machine. Prints the seconds of each phase and in all.
#
#   bench/first-table.sh [REPO [REV]]
#
# Only the machine's Rust toolchain and a C compiler are needed. Run it on an otherwise idle
# machine: the build is nearly all of the time and takes every core.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
repo=${1:-$here}
rev=${2:-HEAD}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", b - a }'; }

export CARGO_TARGET_DIR=$scratch/target
if [[ ${WARM_REGISTRY:-0} != 1 ]]; then
  # A fresh cargo home, but the toolchain the machine has: rustup's proxies find it through
  # RUSTUP_HOME, which stays.
  export RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}
  toolchain_bin=$(dirname "$(rustup which cargo 2>/dev/null || command -v cargo)")
  export CARGO_HOME=$scratch/cargo-home
  export PATH=$toolchain_bin:$PATH
fi

start=$(now)
git clone -q "$repo" "$scratch/sweep"
git -C "$scratch/sweep" checkout -q "$rev"
cloned=$(now)
cd "$scratch/sweep"
cargo fetch -q
fetched=$(now)
# The README's first command, word for word.
command=$(grep -m1 '^cargo run' README.md | sed 's/ *#.*//')
echo "first command: $command" >&2
bash -c "$command" > "$scratch/table.md" 2> "$scratch/run.log" || {
  tail -20 "$scratch/run.log" >&2
  exit 1
}
done_at=$(now)
grep -q 'head_reference' "$scratch/table.md" || {
  echo "no table on stdout:" >&2
  cat "$scratch/table.md" >&2
  exit 1
}
built=$(grep -m1 -o 'Finished.*' "$scratch/run.log" || true)
echo "clone:           $(secs "$start" "$cloned") s"
echo "crate downloads: $(secs "$cloned" "$fetched") s"
echo "build and sweep: $(secs "$fetched" "$done_at") s  (cargo: ${built:-?})"
echo "the table:"
sed 's/^/  /' "$scratch/table.md"
echo "first table:     $(secs "$start" "$done_at") s  on $(nproc) cores, $rev = $(git rev-parse --short HEAD)"
