#!/usr/bin/env bash
# Broker benchmark (issue #15): what the broker adds per job and the no-op jobs it passes per
# second, with 1 and 4 `pkgym worker` processes over loopback TCP.
#   bench/scale/run.sh BUILD_DIR [JOBS] [RESULTS_FILE]
set -euo pipefail
build=$(cd "${1:?usage: run.sh BUILD_DIR [JOBS] [RESULTS_FILE]}" && pwd)
jobs=${2:-20000}
out=${3:-}
bench=$build/tests/rollout/bench_broker
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
{
    echo "## broker: $(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo
    echo "Device: $(nproc) CPU cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true) GPU(s)"
    echo
} >"$tmp"
for w in 1 4; do
    serial=$((jobs / 10 > 0 ? jobs / 10 : 1))
    echo "\$ bench_broker --workers $w --jobs $jobs --inflight 256 --serial $serial" | tee -a "$tmp"
    echo >>"$tmp"
    "$bench" --pkgym "$build/env/pkgym" --workers "$w" --jobs "$jobs" --inflight 256 \
        --serial "$serial" | tee -a "$tmp"
    echo >>"$tmp"
done
[ -z "$out" ] || { cat "$tmp" >>"$out"; echo "appended to $out"; }
