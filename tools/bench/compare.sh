#!/usr/bin/env bash
# `make bench-compare BASE=rev`: builds `rev` in a temporary worktree and runs the same bench on
# it and on the working tree, then prints both figure by figure with the speed-up.
#
# The bench program itself (crates/vmmu-bench) is taken from the working tree and built against
# each side's engine, so both sides are measured by the same code; only the engine differs.
#
#   tools/bench/compare.sh REV [BENCH ARGS...]    e.g. tools/bench/compare.sh main --runs 3
#
# Writes results/bench-REV.json and results/bench.json; the worktree and its build are removed
# at the end (KEEP=1 keeps them, and reuses one kept before).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 REV [BENCH ARGS...]" >&2; exit 2; }
rev=$1
shift
short=$(git -C "$ROOT" rev-parse --short "$rev")
wt=${TMPDIR:-/tmp}/vmmu-bench-base-$short
vmmu=$ROOT/.venv/bin/vmmu

if [ ! -d "$wt" ]; then
    git -C "$ROOT" worktree add --detach "$wt" "$rev" >/dev/null
fi
if [ "${KEEP:-0}" != 1 ]; then
    trap 'git -C "$ROOT" worktree remove --force "$wt"' EXIT
fi

# The working tree's bench, built against the base's engine.
rm -rf "$wt/crates/vmmu-bench"
# Before the bench had a crate of its own, it was a binary of the same name built from the
# core's tree by vmmu-record; that binary is dropped so the names do not clash.
if [ -f "$wt/crates/vmmu-core/src/bin/vmmu-bench.rs" ]; then
    rm -f "$wt/crates/vmmu-core/src/bin/vmmu-bench.rs"
    sed -i '/^# The engine.s speed bench/,$d' "$wt/crates/vmmu-record/Cargo.toml"
fi
cp -r "$ROOT/crates/vmmu-bench" "$wt/crates/vmmu-bench"
if ! grep -q '"crates/vmmu-bench"' "$wt/Cargo.toml"; then
    sed -i 's|^members = \[\(.*\)\]|members = [\1, "crates/vmmu-bench"]|' "$wt/Cargo.toml"
fi
echo "building the bench on $rev ($short) ..."
(cd "$wt" && cargo build --release -p vmmu-bench --quiet)
echo "building the bench on the working tree ..."
(cd "$ROOT" && cargo build --release -p vmmu-bench --quiet)

mkdir -p "$ROOT/results"
# `vmmu repro all` runs the installed package of the working tree on both sides: it measures
# the working tree only, so it is left out of the base run.
echo "== $rev =="
# The recording figure needs the vg-memtrace Valgrind tool, built in the working tree only.
(cd "$wt" && VMMU_VALGRIND_LIB=${VMMU_VALGRIND_LIB:-$ROOT/tools/vg-memtrace/build/lib} "$wt/target/release/vmmu-bench" --json "$ROOT/results/bench-$short.json" "$@")
echo "== working tree =="
(cd "$ROOT" && "$ROOT/target/release/vmmu-bench" --vmmu "$vmmu" --json "$ROOT/results/bench.json" "$@")
echo
"$ROOT/target/release/vmmu-bench" compare "$ROOT/results/bench-$short.json" "$ROOT/results/bench.json"
