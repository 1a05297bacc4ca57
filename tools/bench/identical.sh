#!/usr/bin/env bash
# Checks that a change to the engine changes no result: runs `vmmu run --json` on a fixed list
# of workloads, modes and hardware designs, drops the only figures that may differ between runs
# (sim.seconds, sim.events_per_second), and compares everything else with a saved reference.
#
#   tools/bench/identical.sh save DIR          results of the current build (.venv) into DIR
#   tools/bench/identical.sh check DIR         the current build's results against DIR (a case
#                                              DIR has no result for is listed as new, not failed)
#   tools/bench/identical.sh base REV [DIR]    builds REV in a temporary worktree (its own venv),
#                                              saves its results into DIR (default
#                                              results/identical-REV), then checks the current
#                                              build against them
#
# VMMU=path/to/vmmu overrides the command (default: .venv/bin/vmmu of this repository).
# Exit status 0 when every case is identical, 1 when any differs (each difference printed).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VMMU=${VMMU:-$ROOT/.venv/bin/vmmu}
PY=${PYTHON3:-python3}

# One case per line: a name, then the arguments of `vmmu run`.
CASES=$(cat <<'LIST'
random-native        --mode native -w random:footprint=256M,refs=300K
random-nested-2dnt   --mode nested --pwc 2d+nt -w random:footprint=256M,refs=300K
random-nested-psc    --mode nested --pwc psc -w random:footprint=256M,refs=300K
random-shadow        --mode shadow -w random:footprint=256M,refs=300K
random-nested-2d     --mode nested --pwc 2d -w random:footprint=256M,refs=200K,prefault=1
random-nested-1d     --mode nested --pwc 1d -w random:footprint=256M,refs=200K,prefault=1
random-nested-none   --mode nested --pwc none -w random:footprint=256M,refs=200K,prefault=1
random-nested-5lvl   --mode nested --levels 5 -w random:footprint=256M,refs=200K
random-nested-2m     --mode nested --nested-page-size 2m --guest-page-size mixed -w random:footprint=1G,refs=200K
random-nested-lazy   --mode nested --backing lazy -w random:footprint=256M,refs=200K
random-native-psc    --mode native --pwc psc --levels 5 -w random:footprint=256M,refs=200K
random-nested-novpid --mode nested --vpid off --pcid off -w random:footprint=64M,refs=200K
random-native-check  --mode native --check -w random:footprint=64M,refs=100K
stream-native        --mode native -w stream:footprint=64M,refs=2M
stream-nested-2dnt   --mode nested --pwc 2d+nt -w stream:footprint=64M,refs=2M
stream-nested-psc    --mode nested --pwc psc -w stream:footprint=64M,refs=2M
stream-shadow        --mode shadow -w stream:footprint=64M,refs=2M
stream-native-huge   --mode native --guest-page-size 2m -w stream:footprint=64M,refs=1M,huge=1
chase-native         --mode native -w pointer-chase:footprint=1G,refs=300K
chase-nested-2dnt    --mode nested --pwc 2d+nt -w pointer-chase:footprint=1G,refs=300K
chase-nested-psc     --mode nested --pwc psc -w pointer-chase:footprint=1G,refs=300K
chase-shadow         --mode shadow -w pointer-chase:footprint=1G,refs=300K
fork-native          --mode native -w aim9-fork_test
fork-nested-2dnt     --mode nested --pwc 2d+nt -w aim9-fork_test
fork-nested-psc      --mode nested --pwc psc -w aim9-fork_test
fork-shadow          --mode shadow -w aim9-fork_test
fork-shadow-pv       --mode shadow --technique pv -w aim9-fork_test
fork-shadow-novpid   --mode shadow --vpid off -w aim9-fork_test
mm-native            --mode native -w memorymotion
mm-nested-2dnt       --mode nested --pwc 2d+nt -w memorymotion
mm-nested-psc        --mode nested --pwc psc -w memorymotion
mm-shadow            --mode shadow -w memorymotion
mm-shadow-previrt    --mode shadow --technique previrt -w memorymotion
swim-nested          --mode nested -w swim
zen4-nested          --machine zen4 --mode nested -w random:footprint=256M,refs=200K
interval-random      --machine zen3 --mode nested --core-model interval -w random:footprint=256M,refs=200K
interval-chase       --machine zen3 --mode nested --core-model interval -w pointer-chase:footprint=1G,refs=200K,chains=4
interval-shadow-fork --machine zen3 --mode shadow --core-model interval -w aim9-fork_test
interval-vcpus       --machine zen3 --mode nested --core-model interval --vcpus 2 -w memorymotion
interval-stream      --machine zen3 --mode native --core-model interval -w stream:footprint=64M,refs=2M
interval-stream-nest --machine zen3 --mode nested --pwc 2d+nt --core-model interval -w stream:footprint=64M,refs=2M,arrays=3
interval-trace       --machine zen3 --mode nested --core-model interval -t @TRACE@
interval-recorded    --machine zen3 --mode nested --core-model interval -t @RECORDED@
agile-mm             --mode agile -w memorymotion
nv-ept-fork          --mode nested-virt --l1 ept -w aim9-fork_test
nv-pvm-fork          --mode nested-virt --l1 pvm -w aim9-fork_test
nv-shadow-mm         --mode nested-virt --l1 shadow -w memorymotion
thp-always-nested    --mode nested --thp always -w random:footprint=256M,refs=200K
trace-native         --mode native -t @TRACE@
trace-nested-2dnt    --mode nested --pwc 2d+nt -t @TRACE@
trace-shadow         --mode shadow -t @TRACE@
text-nested          --mode nested -t @TEXT@
oracle-mixed         --mode adaptive --policy oracle --time-scale 1e-5 -w mixed-phases:phases=4,points=100K,jobs=10
oracle-gcc           --mode adaptive --policy oracle --time-scale 1e-5 -w gcc-phases:inputs=2,phases=4,blocks=400,arena=64
oracle-gcc-opteron   --machine opteron2350 --profile palacios-opteron2350 --mode adaptive --policy oracle --time-scale 1e-4 --set guest.format=x86_32 --set guest.memory=1G -w gcc-phases:bits=32,inputs=2
oracle-gzip          --mode adaptive --policy oracle --time-scale 1e-5 -w gzip:inputs=2
dav2m-gcc            --mode adaptive --policy dav2m --time-scale 1e-5 -w gcc-phases:inputs=2,phases=4,blocks=400,arena=64
costmodel-mixed      --mode adaptive --policy costmodel --time-scale 1e-5 -w mixed-phases:phases=4,footprint=2M,points=20K,jobs=6,pages=32,instrs=2000
LIST
)

# A lackey text trace (about 1.5 M references, several vtrace chunks) and its .vtrace.
make_traces() {
    local dir=$1
    "$PY" - "$dir/trace.txt" <<'PYEOF'
import sys
x = 12345
out = []
code, stack, heap = 0x401000, 0x7ffe00001000, 0x10000000
out.append("@mmap 0x10000000 0x4000000 rw- anon")
for i in range(500_000):
    x = (x * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
    r = x >> 33
    code = 0x401000 + (code - 0x401000 + 4 * (1 + r % 3)) % 0x8000
    out.append("I  %x,4" % code)
    if r % 2 == 0:
        out.append(" L %x,8" % (stack - 8 * (r % 16)))
    if r % 5 == 0:
        out.append(" S %x,8" % (heap + 64 * (r % 0x100000)))
    if r % 11 == 0:
        out.append(" M %x,4" % (heap + 4096 * (r % 0x4000)))
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PYEOF
    "$VMMU" trace convert "$dir/trace.txt" "$dir/trace.vtrace" >/dev/null
}

# record_trace VMMU DIR: DIR/recorded.vtrace, `vmmu record` of gzip compressing the first 16 KiB
# of DIR/trace.txt: a real program's references with their dependences. A recording depends on
# the host (its loader, libraries, environment), so the one made at `save` is kept beside the
# results and `check` replays it, the same bytes on both sides.
record_trace() {
    local vmmu=$1 dir=$2
    head -c 16384 "$dir/trace.txt" >"$dir/gzip-input.txt"
    if ! "$vmmu" record -o "$dir/recorded.vtrace" -- gzip -c "$dir/gzip-input.txt" \
        >/dev/null 2>"$dir/record.err"; then
        cat "$dir/record.err" >&2
        return 1
    fi
    rm -f "$dir/gzip-input.txt"
}

# run_all VMMU OUTDIR [RECORDED]: every case's normalised result JSON into OUTDIR/NAME.json;
# the recorded trace is RECORDED when it exists, else recorded into OUTDIR/recorded.vtrace
run_all() {
    local vmmu=$1 out=$2 recorded=${3:-} tmp
    mkdir -p "$out"
    tmp=$(mktemp -d)
    VMMU=$vmmu make_traces "$tmp"
    if [ -z "$recorded" ] || [ ! -f "$recorded" ]; then
        record_trace "$vmmu" "$tmp"
        mv "$tmp/recorded.vtrace" "$out/recorded.vtrace"
        recorded=$out/recorded.vtrace
    fi
    while read -r name args; do
        [ -z "$name" ] && continue
        args=${args//@TRACE@/$tmp/trace.vtrace}
        args=${args//@TEXT@/$tmp/trace.txt}
        args=${args//@RECORDED@/$recorded}
        # shellcheck disable=SC2086
        if ! "$vmmu" run --json $args >"$out/$name.raw" 2>"$out/$name.err"; then
            echo "error" >"$out/$name.raw"
        fi
        "$PY" - "$out/$name.raw" "$out/$name.json" "$tmp" "$recorded" <<'PYEOF'
import json, sys
raw, dst, tmp, recorded = sys.argv[1:5]
text = open(raw).read()
try:
    doc = json.loads(text)
except ValueError:
    doc = {"unparsable": text}
def strip(d):
    if isinstance(d, dict):
        return {k: strip(v) for k, v in d.items() if k not in ("seconds", "events_per_second")}
    if isinstance(d, list):
        return [strip(v) for v in d]
    if isinstance(d, str):
        return d.replace(tmp, "TMP").replace(recorded, "RECORDED")
    return d
json.dump(strip(doc), open(dst, "w"), indent=1, sort_keys=True)
PYEOF
        rm -f "$out/$name.raw"
        [ -s "$out/$name.err" ] || rm -f "$out/$name.err"
        printf '.'
    done <<<"$CASES"
    echo
    rm -rf "$tmp"
}

# compare REF NEW: 0 when every case REF has a result for is identical (and there is one)
compare() {
    local ref=$1 new=$2 bad=0 n=0 fresh=0
    while read -r name _; do
        [ -z "$name" ] && continue
        if [ ! -f "$ref/$name.json" ]; then
            fresh=$((fresh + 1))
            echo "NEW: $name (no result in $ref)"
            continue
        fi
        n=$((n + 1))
        if ! cmp -s "$ref/$name.json" "$new/$name.json"; then
            bad=$((bad + 1))
            echo "DIFFERS: $name"
            diff "$ref/$name.json" "$new/$name.json" | head -20 || true
        fi
    done <<<"$CASES"
    if [ "$n" -eq 0 ]; then
        echo "no case of $ref has a result"
        return 1
    elif [ "$bad" -eq 0 ]; then
        echo "identical: all $n cases"
        [ "$fresh" -eq 0 ] || echo "$fresh new cases not compared"
    else
        echo "$bad of $n cases differ"
        return 1
    fi
}

case "${1:-}" in
    save)
        [ $# -eq 2 ] || { echo "usage: $0 save DIR" >&2; exit 2; }
        run_all "$VMMU" "$2"
        ;;
    check)
        [ $# -eq 2 ] || { echo "usage: $0 check DIR" >&2; exit 2; }
        new=$(mktemp -d)
        run_all "$VMMU" "$new" "$2/recorded.vtrace"
        status=0
        compare "$2" "$new" || status=1
        rm -rf "$new"
        exit $status
        ;;
    base)
        [ $# -ge 2 ] || { echo "usage: $0 base REV [DIR]" >&2; exit 2; }
        rev=$2
        ref=${3:-$ROOT/results/identical-$(git -C "$ROOT" rev-parse --short "$rev")}
        if [ ! -d "$ref" ]; then
            wt=$(mktemp -d)/base
            git -C "$ROOT" worktree add --detach "$wt" "$rev" >/dev/null
            trap 'git -C "$ROOT" worktree remove --force "$wt"' EXIT
            echo "building $rev in $wt ..."
            make -C "$wt" --no-print-directory .venv/.vmmu-installed >/dev/null
            run_all "$wt/.venv/bin/vmmu" "$ref"
        fi
        "$0" check "$ref"
        ;;
    *)
        sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
