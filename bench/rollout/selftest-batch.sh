#!/usr/bin/env bash
# Rollout benchmark on the selftest suite (host ranks over MPI; runs on any machine):
#  1. bench_rollout: 64 concurrent episodes straight into the scheduler + harness, cold then
#     warm compile cache: compile pool busy fraction, steps/s, step latency;
#  2. end to end: `pkgym eval` against `pkgym serve`, 64 concurrent episodes (2 problems x
#     G=32, T=2), steps/s through the server.
#   bench/rollout/selftest-batch.sh BUILD_DIR [RESULTS_FILE]
set -euo pipefail
build=$(cd "${1:?usage: selftest-batch.sh BUILD_DIR [RESULTS_FILE]}" && pwd)
out=${2:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
episodes=${EPISODES:-64} turns=${TURNS:-2}
tmp=$(mktemp -d /tmp/pk-bench-rollout-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
log=$tmp/results.md
{
    echo "## selftest batch: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "Device: $(nproc) CPU cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true) GPU(s)"
    echo
    echo "\$ bench_rollout --suite selftest --episodes $episodes --turns $turns --trials 1 --gpus none"
    echo
} >"$log"
cd "$src"
"$build/tests/rollout/bench_rollout" --replay "$src/rollout/replay" --cache-dir "$tmp/cache" \
    --suite selftest --episodes "$episodes" --turns "$turns" --trials 1 --gpus none | tee -a "$log"

half=$((episodes / 2))
cmd=(eval --policy "replay:$src/rollout/replay" --problems selftest/scale,selftest/allreduce
     -G "$half" -T "$turns" --concurrency "$episodes" --quiet --out "$tmp/eval"
     --options '{"stop_on_correct": false, "check": {"trials": 1}}'
     --serve-arg --gpus --serve-arg none)
{
    echo
    echo "\$ pkgym ${cmd[*]}"
    echo
} >>"$log"
"$build/env/pkgym" "${cmd[@]}"
/usr/bin/python3 - "$tmp/eval/report.json" >>"$log" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
st = r.get("server_stats") or {}
cache = st.get("cache", {})
print("| episodes | steps | wall s | end-to-end steps/s | compile cache hits / misses |")
print("|---|---|---|---|---|")
print("| %d | %d | %.1f | %.2f | %s / %s |" % (len(r["trajectories"]), r["steps"], r["wall_s"],
      r["steps_per_s"], cache.get("compile_hits", "?"), cache.get("compile_misses", "?")))
PY
tail -4 "$log"
[ -z "$out" ] || { cat "$log" >>"$out"; echo "appended to $out"; }
