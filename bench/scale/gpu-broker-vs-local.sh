#!/usr/bin/env bash
# GPU acceptance of the broker (issue #15, docs/scale-out.md): the collectives batch through
# `pkgym eval`, against a plain `pkgym serve` on the GPUs (local execution) and against a pure
# broker (`--gpus none --worker-bind`) with one `pkgym worker` on the same GPUs, in alternating
# rounds with fresh data dirs (cold caches for both). Prints steps/s of each and the ratio
# broker/local, which must be >= 0.90. Needs 2 GPUs (exit 77 otherwise).
#   bench/scale/gpu-broker-vs-local.sh BUILD_DIR [RESULTS_FILE]
# G (8 trajectories per problem), T (3 turns), ROUNDS (2), EXCLUDE ("": collectives to leave
# out, e.g. "scatter gather alltoall") size it. SUITE=selftest GPU_LIST=none runs the same
# comparison on the host problems (any machine: a check of this script, not the acceptance).
set -euo pipefail
build=$(cd "${1:?usage: gpu-broker-vs-local.sh BUILD_DIR [RESULTS_FILE]}" && pwd)
out=${2:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
pkgym=$build/env/pkgym
G=${G:-8} T=${T:-3} ROUNDS=${ROUNDS:-2} SUITE=${SUITE:-collectives} GPU_LIST=${GPU_LIST:-0,1}
n_gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
if [ "$GPU_LIST" != none ] && [ "${n_gpus:-0}" -lt 2 ]; then
    echo "gpu-broker-vs-local: needs 2 GPUs, found ${n_gpus:-0}: not run" >&2
    exit 77
fi
tmp=$(mktemp -d /tmp/pk-bench-broker-gpu-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
if [ "$SUITE" = collectives ]; then
    "$src/rollout/replay/make-collectives.sh" "$tmp/replay" >/dev/null
else
    cp -r "$src/rollout/replay" "$tmp/replay"
fi
for x in ${EXCLUDE:-}; do rm -rf "$tmp/replay/$SUITE/$x"; done
# No Python here (the GPU machine's may lack pyzmq): `pkgym eval` waits for the server's
# hello itself, and a broker's worker is started first so that it joins as the server binds.
port=$((20000 + RANDOM % 30000))

run_eval() { # name endpoint -> prints steps/s
    "$pkgym" eval --server "$2" --policy "replay:$tmp/replay" --problems "suite:$SUITE" \
        -G "$G" -T "$T" --concurrency 64 --quiet --out "$tmp/eval-$1" \
        --options '{"check": {"trials": 1}}' >"$tmp/eval-$1.log" 2>&1 || {
        cat "$tmp/eval-$1.log" >&2
        return 1
    }
    local r=$tmp/eval-$1/report.json
    field() { sed -n "s/^  \"$1\": \([0-9.e+-]*\),*$/\1/p" "$r" | head -1; }
    echo "$(field steps_per_s) $(field steps) $(field wall_s)" |
        awk '{ printf "%.3f %d %.1f\n", $1, $2, $3 }'
}

local_round() {
    local ep=ipc://$tmp/local-$1.sock
    "$pkgym" serve --bind "$ep" --data-dir "$tmp/local-$1" --modules "$build/problems/modules" \
        --gpus "$GPU_LIST" >"$tmp/local-$1.log" 2>&1 &
    local s=$!
    pids+=("$s")
    run_eval "local-$1" "$ep"
    kill -TERM "$s"
    wait "$s" || true
}

broker_round() {
    local ep=ipc://$tmp/broker-$1.sock
    "$pkgym" worker --connect "tcp://127.0.0.1:$port" --gpus "$GPU_LIST" --data-dir "$tmp/worker-$1" \
        --modules "$build/problems/modules" >"$tmp/worker-$1.log" 2>&1 &
    local w=$!
    "$pkgym" serve --bind "$ep" --data-dir "$tmp/broker-$1" --modules "$build/problems/modules" \
        --gpus none --worker-bind "tcp://127.0.0.1:$port" >"$tmp/broker-$1.log" 2>&1 &
    local s=$!
    pids+=("$s" "$w")
    run_eval "broker-$1" "$ep"
    grep -q "worker .* joined" "$tmp/broker-$1.log" || { cat "$tmp/broker-$1.log" >&2; return 1; }
    kill -TERM "$w" "$s"
    wait "$w" || true
    wait "$s" || true
}

log=$tmp/results.md
{
    echo "## broker vs local on the GPUs: $(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo
    echo "Device: $( (nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo none) | sort | uniq -c | xargs) GPU(s), $(nproc) CPU cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
    echo
    echo "\$ bench/scale/gpu-broker-vs-local.sh (SUITE=$SUITE GPU_LIST=$GPU_LIST G=$G T=$T ROUNDS=$ROUNDS EXCLUDE=\"${EXCLUDE:-}\")"
    echo
    echo "| round | local steps/s | broker + 1 worker steps/s | steps | ratio |"
    echo "|---|---|---|---|---|"
} >"$log"
sum_l=0 sum_b=0
for r in $(seq "$ROUNDS"); do
    read -r l steps_l wall_l < <(local_round "$r")
    read -r b steps_b wall_b < <(broker_round "$r")
    ratio=$(awk -v b="$b" -v l="$l" 'BEGIN { printf "%.3f", b / l }')
    echo "| $r | $l ($wall_l s) | $b ($wall_b s) | $steps_l / $steps_b | $ratio |" >>"$log"
    sum_l=$(awk -v a="$sum_l" -v x="$l" 'BEGIN { print a + x }')
    sum_b=$(awk -v a="$sum_b" -v x="$b" 'BEGIN { print a + x }')
done
ratio=$(awk -v b="$sum_b" -v l="$sum_l" 'BEGIN { printf "%.3f", b / l }')
verdict=$(awk -v b="$sum_b" -v l="$sum_l" 'BEGIN { print (b / l >= 0.90 ? "PASS" : "FAIL") }')
echo "| all | | | | **$ratio** ($verdict: >= 0.90 wanted) |" >>"$log"
cat "$log"
[ -z "$out" ] || { cat "$log" >>"$out"; echo "appended to $out"; }
[ "$verdict" = PASS ]
