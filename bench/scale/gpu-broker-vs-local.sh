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
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

wait_ready() { # endpoint, workers wanted
    /usr/bin/python3 - "$src" "$1" "$2" <<'PY'
import sys, time
sys.path.insert(0, sys.argv[1] + "/rollout/python")
from pkgym_client import Client
c = Client(sys.argv[2], timeout_s=5)
deadline = time.time() + 120
while time.time() < deadline:
    try:
        st = c.stats()
        if len([w for w in st.get("workers", []) if "departed_at" not in w]) >= int(sys.argv[3]):
            sys.exit(0)
    except Exception:
        pass
    time.sleep(0.5)
sys.exit("server or worker not ready in 120 s")
PY
}

run_eval() { # name endpoint -> prints steps/s
    "$pkgym" eval --server "$2" --policy "replay:$tmp/replay" --problems "suite:$SUITE" \
        -G "$G" -T "$T" --concurrency 64 --quiet --out "$tmp/eval-$1" \
        --options '{"check": {"trials": 1}}' >"$tmp/eval-$1.log" 2>&1 || {
        cat "$tmp/eval-$1.log" >&2
        return 1
    }
    /usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.3f %d %.1f" % (r["steps_per_s"], r["steps"], r["wall_s"]))' "$tmp/eval-$1/report.json"
}

local_round() {
    local ep=ipc://$tmp/local-$1.sock
    "$pkgym" serve --bind "$ep" --data-dir "$tmp/local-$1" --modules "$build/problems/modules" \
        --gpus "$GPU_LIST" >"$tmp/local-$1.log" 2>&1 &
    local s=$!
    pids+=("$s")
    wait_ready "$ep" 0
    run_eval "local-$1" "$ep"
    kill -TERM "$s"
    wait "$s" || true
}

broker_round() {
    local ep=ipc://$tmp/broker-$1.sock
    "$pkgym" serve --bind "$ep" --data-dir "$tmp/broker-$1" --modules "$build/problems/modules" \
        --gpus none --worker-bind "tcp://127.0.0.1:$port" >"$tmp/broker-$1.log" 2>&1 &
    local s=$!
    "$pkgym" worker --connect "tcp://127.0.0.1:$port" --gpus "$GPU_LIST" --data-dir "$tmp/worker-$1" \
        --modules "$build/problems/modules" >"$tmp/worker-$1.log" 2>&1 &
    local w=$!
    pids+=("$s" "$w")
    wait_ready "$ep" 1
    run_eval "broker-$1" "$ep"
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
    ratio=$(/usr/bin/python3 -c "print('%.3f' % ($b / $l))")
    echo "| $r | $l ($wall_l s) | $b ($wall_b s) | $steps_l / $steps_b | $ratio |" >>"$log"
    sum_l=$(/usr/bin/python3 -c "print($sum_l + $l)")
    sum_b=$(/usr/bin/python3 -c "print($sum_b + $b)")
done
ratio=$(/usr/bin/python3 -c "print('%.3f' % ($sum_b / $sum_l))")
verdict=$(/usr/bin/python3 -c "print('PASS' if $sum_b / $sum_l >= 0.90 else 'FAIL')")
echo "| all | | | | **$ratio** ($verdict: >= 0.90 wanted) |" >>"$log"
cat "$log"
[ -z "$out" ] || { cat "$log" >>"$out"; echo "appended to $out"; }
[ "$verdict" = PASS ]
