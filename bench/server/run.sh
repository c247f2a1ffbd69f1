#!/usr/bin/env bash
# Server benchmark: throughput and p50/p99 latency of hello and reset over loopback TCP, with 1
# and 64 clients; then hello while steps are in flight (when a selftest solution exists).
#   bench/server/run.sh BUILD_DIR [SECONDS] [RESULTS_FILE]
# Writes the figures with the command, date and device to RESULTS_FILE when given.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR [SECONDS] [RESULTS_FILE]}
secs=${2:-5}
out=${3:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
pkgym=$build/env/pkgym
bench=$build/tests/env/bench_server
tmp=$(mktemp -d)
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
ep=tcp://127.0.0.1:$port
# Grace 0: steps still in flight at the end are cancelled rather than waited for.
"$pkgym" serve --bind "$ep" --data-dir "$tmp/data" --modules "$build/problems/modules" \
    --shutdown-grace-ms 0 >"$tmp/server.log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do
    "$bench" --endpoint "$ep" --op hello --clients 1 --seconds 0.05 >/dev/null 2>&1 && break
    sleep 0.1
done
problem=$(/usr/bin/python3 - "$src" "$ep" <<'PY'
import sys; sys.path.insert(0, sys.argv[1] + "/rollout/python")
from pkgym_client import Client
ids = [p["id"] for p in Client(sys.argv[2], timeout_s=10).list_problems()]
sel = [i for i in ids if i.startswith("selftest/")]
print((sel or ids or [""])[0])
PY
)
results=$tmp/results.txt
run() { echo "\$ bench_server $*" >>"$results"; "$bench" --endpoint "$ep" "$@" | tee -a "$results"; }
run --op hello --clients 1 --seconds "$secs"
run --op hello --clients 64 --seconds "$secs"
if [ -n "$problem" ]; then
    run --op reset --problem "$problem" --clients 1 --seconds "$secs"
    run --op reset --problem "$problem" --clients 64 --seconds "$secs"
    sol=$src/problems/${problem}/solutions/correct.cu
    if [ -f "$sol" ]; then
        action=$tmp/action.txt
        printf 'My kernel:\n```cuda\n%s\n```\n' "$(cat "$sol")" >"$action"
        run --op hello --clients 1 --seconds "$secs" --problem "$problem" --load-steps 16 --action-file "$action"
    else
        echo "no $sol: hello under step load not measured" | tee -a "$results"
    fi
fi
if [ -n "$out" ]; then
    {
        echo "# pkgym serve benchmark"
        echo
        echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
        echo "- command: bench/server/run.sh BUILD_DIR $secs $out (commit $(git -C "$src" rev-parse --short HEAD))"
        echo "- device: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(uname -sr); no GPU used"
        echo "- machine load while measuring (1/5/15 min): $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared; figures are noisy)"
        echo "- transport: loopback TCP ($ep), closed loop (one request in flight per client), C client (bench/server/bench_server.c)"
        echo "- server: pkgym serve with defaults; reset writes one SQLite row (synchronous=FULL) and is followed by an untimed close"
        echo "- problem for reset: ${problem:-none}"
        echo
        echo '```'
        cat "$results"
        echo '```'
        echo
        echo "Reading: with N clients in a closed loop, p50 is about N / throughput (Little's law),"
        echo "so at 64 clients latency is queueing; the 64 client threads also share the cores"
        echo "with the server. reset throughput is bounded by one fsync'd SQLite commit per"
        echo "episode on the store writer thread. The last line is hello while 16 episodes keep a"
        echo "step in flight (real compile + MPI run of the selftest solution): the serving"
        echo "thread stays free because evaluation and store commits run on other threads."
    } >"$out"
fi
