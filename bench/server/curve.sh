#!/usr/bin/env bash
# What CURVE costs: the same closed-loop requests against two servers started side by side, one
# on plain loopback TCP and one on loopback TCP with CURVE (keys from `pkgym keygen`), taken in
# alternation (plain, CURVE, plain, CURVE) so both see the same machine load. Reports every run
# and CURVE/plain of the summed throughputs.
#   bench/server/curve.sh BUILD_DIR [SECONDS] [RESULTS_FILE]
set -euo pipefail
build=${1:?usage: curve.sh BUILD_DIR [SECONDS] [RESULTS_FILE]}
secs=${2:-5}
out=${3:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
pkgym=$build/env/pkgym
bench=$build/tests/env/bench_server
tmp=$(mktemp -d)
mkdir -p "$tmp/allow"
"$pkgym" keygen "$tmp/server" >/dev/null 2>&1
"$pkgym" keygen "$tmp/client" >/dev/null 2>&1
cp "$tmp/client.pub" "$tmp/allow/"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
start() { # NAME ARGS...: starts a server on tcp://127.0.0.1:*, prints its endpoint
    local name=$1
    shift
    "$pkgym" serve --bind 'tcp://127.0.0.1:*' --data-dir "$tmp/data-$name" \
        --modules "$build/problems/modules" --shutdown-grace-ms 0 "$@" >"$tmp/$name.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 200); do
        ep=$(grep -o 'bound tcp://127.0.0.1:[0-9]*' "$tmp/$name.log" | head -1 | cut -d' ' -f2)
        [ -n "$ep" ] && break
        sleep 0.05
    done
    [ -n "$ep" ] || { cat "$tmp/$name.log" >&2; exit 1; }
    echo "$ep"
}
plain=$(start plain)
curve=$(start curve --curve-secret-key "$tmp/server.key" --curve-allow "$tmp/allow")
keys=(PKGYM_CURVE_SERVER_KEY="$tmp/server.pub" PKGYM_CURVE_CLIENT_KEY="$tmp/client.key")
for _ in $(seq 100); do
    "$bench" --endpoint "$plain" --op hello --clients 1 --seconds 0.05 >/dev/null 2>&1 &&
        env "${keys[@]}" "$bench" --endpoint "$curve" --op hello --clients 1 --seconds 0.05 \
            >/dev/null 2>&1 && break
    sleep 0.1
done
results=$tmp/results.txt
table=$tmp/table.txt
tput() { sed -n 's/.*throughput=\([0-9]*\).*/\1/p'; }
p50() { sed -n 's/.*p50_ms=\([0-9.]*\).*/\1/p'; }
pair() { # ARGS...: plain, CURVE, plain, CURVE with the same arguments
    echo "\$ bench_server $*" >>"$results"
    local a b a2 b2
    a=$("$bench" --endpoint "$plain" "$@")
    b=$(env "${keys[@]}" "$bench" --endpoint "$curve" "$@")
    a2=$("$bench" --endpoint "$plain" "$@")
    b2=$(env "${keys[@]}" "$bench" --endpoint "$curve" "$@")
    printf 'plain: %s\ncurve: %s\nplain: %s\ncurve: %s\n' "$a" "$b" "$a2" "$b2" | tee -a "$results"
    awk -v args="$*" -v ta="$(echo "$a" | tput)" -v tb="$(echo "$b" | tput)" \
        -v ta2="$(echo "$a2" | tput)" -v tb2="$(echo "$b2" | tput)" \
        -v pa="$(echo "$a" | p50)" -v pb="$(echo "$b" | p50)" \
        -v pa2="$(echo "$a2" | p50)" -v pb2="$(echo "$b2" | p50)" \
        'BEGIN { sa = ta + ta2; sb = tb + tb2;
                 printf "| `%s` | %d, %d /s | %d, %d /s | %.2f | %s, %s / %s, %s ms |\n", args, ta, ta2, tb, tb2, (sa > 0 ? sb / sa : 0), pa, pa2, pb, pb2 }' \
        >>"$table"
}
pair --op hello --clients 1 --seconds "$secs"
pair --op hello --clients 64 --seconds "$secs"
pair --op hello --clients 1 --seconds "$secs" --pad 65536
pair --op hello --clients 16 --seconds "$secs" --pad 65536
pair --op list_problems --clients 1 --seconds "$secs"
pair --op reset --problem selftest/scale --clients 1 --seconds "$secs"
cat "$table"
if [ -n "$out" ]; then
    {
        echo "# CURVE vs plain TCP: pkgym serve throughput"
        echo
        echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
        echo "- command: bench/server/curve.sh BUILD_DIR $secs $out (commit $(git -C "$src" rev-parse --short HEAD))"
        echo "- device: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(uname -sr); no GPU used"
        echo "- machine load while measuring (1/5/15 min): $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared; figures are noisy)"
        echo "- libzmq $(pkg-config --modversion libzmq 2>/dev/null || echo '?'), libsodium $(pkg-config --modversion libsodium 2>/dev/null || echo '?')"
        echo "- two servers side by side on loopback TCP, one with CURVE (--curve-secret-key, --curve-allow);"
        echo "  each line runs the same closed loop (one request in flight per client, C client"
        echo "  bench/server/bench_server.c) against plain, CURVE, plain, CURVE; CURVE/plain is the"
        echo "  ratio of the summed throughputs. --pad adds a 64 KiB field to each request (the reply"
        echo "  stays small). reset includes one fsync'd SQLite commit (disk-bound)."
        echo
        echo "| requests | plain (2 runs) | CURVE (2 runs) | CURVE/plain | p50 plain / CURVE |"
        echo "|---|---|---|---|---|"
        cat "$table"
        echo
        echo '```'
        cat "$results"
        echo '```'
    } >"$out"
fi
