#!/usr/bin/env bash
# The broker's per-job cost with CURVE on the worker endpoint vs without (issue #19): no-op
# jobs through pk_broker and `pkgym worker` processes over loopback TCP (bench_broker), plain
# and --curve alternating for ROUNDS rounds, so that both see the same machine load. Prints
# each run's table row and the medians with their ratio (CURVE / plain).
#   bench/scale/curve.sh BUILD_DIR [JOBS] [ROUNDS] [RESULTS_FILE]
# WORKERS (default 1) worker processes per run.
set -euo pipefail
build=$(cd "${1:?usage: curve.sh BUILD_DIR [JOBS] [ROUNDS] [RESULTS_FILE]}" && pwd)
jobs=${2:-20000}
rounds=${3:-5}
out=${4:-}
workers=${WORKERS:-1}
bench=$build/tests/rollout/bench_broker
serial=$((jobs / 10 > 0 ? jobs / 10 : 1))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log=$tmp/results.md
{
    echo "## broker, CURVE vs plain worker endpoint: $(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo
    echo "Device: $(nproc) CPU cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true) GPU(s); load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    echo "\$ bench/scale/curve.sh BUILD $jobs $rounds  (each run: bench_broker --workers $workers --jobs $jobs --inflight 256 --serial $serial [--curve])"
    echo
} >"$log"
for r in $(seq "$rounds"); do
    for mode in plain curve; do
        flag=()
        [ "$mode" = curve ] && flag=(--curve)
        "$bench" --pkgym "$build/env/pkgym" --workers "$workers" --jobs "$jobs" --inflight 256 \
            --serial "$serial" "${flag[@]}" >"$tmp/$mode-$r.md" 2>"$tmp/$mode-$r.log" || {
            cat "$tmp/$mode-$r.log" >&2
            exit 1
        }
        tail -1 "$tmp/$mode-$r.md" >>"$tmp/rows-$mode"
    done
done
{
    head -2 "$tmp/plain-1.md"
    cat "$tmp/rows-plain" "$tmp/rows-curve"
    echo
} >>"$log"
# Columns (| separated): 4 idle p50, 5 idle p99, 8 jobs/s, 9 loaded p50, 10 loaded p99,
# 12 the broker process's CPU per job (the least load-dependent figure).
median() { # file column
    awk -F'|' -v c="$(($2 + 1))" '{ gsub(/ /, "", $c); print $c }' "$1" | sort -g |
        awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
{
    echo "| median of $rounds runs | plain | CURVE | CURVE / plain |"
    echo "|---|---|---|---|"
    for spec in "4:idle p50 ms (one job at a time)" "5:idle p99 ms" "8:jobs/s (256 in flight)" \
        "9:loaded p50 ms" "10:loaded p99 ms" "12:broker process CPU us per job"; do
        col=${spec%%:*} name=${spec#*:}
        p=$(median "$tmp/rows-plain" "$col") c=$(median "$tmp/rows-curve" "$col")
        echo "| $name | $p | $c | $(awk -v p="$p" -v c="$c" 'BEGIN { printf "%.2f", (p > 0 ? c / p : 0) }') |"
    done
} >>"$log"
cat "$log"
[ -z "$out" ] || { cat "$log" >>"$out"; echo "appended to $out"; }
