#!/usr/bin/env bash
# Cross-checks every problem that has an adapter (or those matching XC_ONLY, a regex), at W=2,
# on the GPU machine: dumps each problem's inputs and reference outputs (pkgym check
# --reference --skip-timing --dump, XC_JOBS at a time: pkgym takes no timing), then one torchrun
# per device kind checks them all. PKB_DIR: a ParallelKernelBench checkout (default .gpu/pkb).
# XC_TIME_PKB=1 (the default; 0 leaves it out): crosscheck.py --time-pkb also times PKB's
# solution() on every CUDA problem (pkb_us; XC_PKB_WARMUP, XC_PKB_ITERS: 20 and 50 calls).
# XC_REPORT=FILE: every problem's JSON report, one a line, in FILE (bench/pkb/table.py reads it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pkgym=${PKGYM:-$root/build-gpu/env/pkgym}
pkb=${PKB_DIR:-$root/.gpu/pkb}
world=${XC_WORLD:-2}
work=$(mktemp -d /tmp/pkb-xc.XXXXXX)
timing=()
[ "${XC_TIME_PKB:-1}" = 1 ] && timing=(--time-pkb --pkb-warmup "${XC_PKB_WARMUP:-20}"
                                      --pkb-iters "${XC_PKB_ITERS:-50}")
[ -n "${XC_REPORT:-}" ] && : >"$XC_REPORT"
trap 'rm -rf "$work"' EXIT
: >"$work/cuda" ; : >"$work/cpu"
for a in "$here"/adapters/[!_]*.py; do # _*.py: shared helpers
    id=$(basename "$a" .py)
    problem=${id/_//}
    [ -n "${XC_ONLY:-}" ] && ! echo "$problem" | grep -Eq "$XC_ONLY" && continue
    [ -f "$root/problems/$problem/meta.json" ] || { echo "no problem for adapter $id"; continue; }
    kind=cuda
    grep -q '"device": *"host"' "$root/problems/$problem/meta.json" && kind=cpu
    echo "$problem" >>"$work/$kind"
done
# XC_REGIME: iid (default, PKB's own inputs), all (each trial its secret regime: the calibration
# of tolerances on the regimes, with XC_TRIALS=5), or one regime's name.
regime=${XC_REGIME:-iid}
regime_opt=$([ "$regime" = all ] || echo "--regime $regime")
dump_one() { # problem -> dump dir, or a line saying why not
    local problem=$1 dir="$work/dump-${1//\//_}"
    mkdir -p "$dir"
    "$pkgym" check --problem "$problem" --reference --skip-timing --world-size "$world" \
        --trials "${XC_TRIALS:-2}" $regime_opt --dump "$dir" --json >"$dir.json" 2>"$dir.err"
    if python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r["status"]=="correct" else 1)' "$dir.json" 2>/dev/null; then
        echo "$dir"
    else
        echo "DUMP FAILED $problem: $(head -c 400 "$dir.json" "$dir.err" | tr '\n' ' ')" >&2
    fi
}
export -f dump_one; export pkgym world work regime_opt
rc=0
for kind in cuda cpu; do
    [ -s "$work/$kind" ] || continue
    dumps=$(xargs -P "${XC_JOBS:-4}" -I{} bash -c 'dump_one {}' <"$work/$kind")
    n_want=$(wc -l <"$work/$kind"); n_got=$(echo "$dumps" | grep -c . || true)
    [ "$n_got" -lt "$n_want" ] && rc=1
    [ -n "$dumps" ] || continue
    echo "=== torchrun ($kind): $n_got dumps"
    ${TORCHRUN:-torchrun} --nproc-per-node "$world" --master-port "${XC_PORT:-29511}" \
        "$here/crosscheck.py" --device "$kind" --pkb "$pkb" ${timing[@]+"${timing[@]}"} \
        ${XC_REPORT:+--report "$XC_REPORT"} --dump $dumps || rc=1
done
exit $rc
