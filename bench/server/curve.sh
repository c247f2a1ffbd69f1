#!/usr/bin/env bash
# What CURVE costs: the same closed-loop requests against two servers started side by side, one
# on plain loopback TCP and one on loopback TCP with CURVE (keys from `pkgym keygen`), taken in
# alternation (plain, CURVE, plain, CURVE) so both see the same machine load. Reports every run
# and CURVE/plain of the summed throughputs.
#   bench/server/curve.sh BUILD_DIR [SECONDS] [RESULTS_FILE]    (PK_BENCH_ROUNDS, default 5)
set -euo pipefail
build=${1:?usage: curve.sh BUILD_DIR [SECONDS] [RESULTS_FILE]}
secs=${2:-5}
out=${3:-}
rounds=${PK_BENCH_ROUNDS:-5}
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
start() { # NAME ARGS...: starts a server on tcp://127.0.0.1:*; sets ep and pid (no subshell:
    # the pid must reach the cleanup)
    local name=$1
    shift
    "$pkgym" serve --bind 'tcp://127.0.0.1:*' --data-dir "$tmp/data-$name" \
        --modules "$build/problems/modules" --shutdown-grace-ms 0 "$@" >"$tmp/$name.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    ep=
    for _ in $(seq 200); do
        ep=$(grep -o 'bound tcp://127.0.0.1:[0-9]*' "$tmp/$name.log" | head -1 | cut -d' ' -f2 || true)
        [ -n "$ep" ] && break
        sleep 0.05
    done
    [ -n "$ep" ] || { cat "$tmp/$name.log" >&2; exit 1; }
}
start plain
plain=$ep plain_pid=$pid
start curve --curve-secret-key "$tmp/server.key" --curve-allow "$tmp/allow"
curve=$ep curve_pid=$pid
# CPU time of all of a server's threads (ZeroMQ's I/O thread does the encryption), in ns: robust
# against the machine's load, unlike throughput.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'; }
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
pair() { # ARGS...: plain, CURVE, plain, CURVE, ... ($rounds each) with the same arguments
    echo "\$ bench_server $*" >>"$results"
    local ta=() tb=() pa=() pb=() ca=() cb=() a b c0 c1
    for _ in $(seq "$rounds"); do
        c0=$(cpu_ns "$plain_pid")
        a=$("$bench" --endpoint "$plain" "$@")
        c1=$(cpu_ns "$plain_pid")
        ca+=("$(awk -v d=$((c1 - c0)) -v n="$(echo "$a" | sed -n 's/.*requests=\([0-9]*\).*/\1/p')" 'BEGIN { printf "%.1f", (n > 0 ? d / n / 1000 : 0) }')")
        c0=$(cpu_ns "$curve_pid")
        b=$(env "${keys[@]}" "$bench" --endpoint "$curve" "$@")
        c1=$(cpu_ns "$curve_pid")
        cb+=("$(awk -v d=$((c1 - c0)) -v n="$(echo "$b" | sed -n 's/.*requests=\([0-9]*\).*/\1/p')" 'BEGIN { printf "%.1f", (n > 0 ? d / n / 1000 : 0) }')")
        printf 'plain: %s server_cpu_us_per_request=%s\ncurve: %s server_cpu_us_per_request=%s\n' \
            "$a" "${ca[-1]}" "$b" "${cb[-1]}" | tee -a "$results"
        ta+=("$(echo "$a" | tput)") tb+=("$(echo "$b" | tput)")
        pa+=("$(echo "$a" | p50)") pb+=("$(echo "$b" | p50)")
    done
    # Medians over the rounds; the ratio is the median of each round's CURVE/plain.
    awk -v args="$*" -v ta="${ta[*]}" -v tb="${tb[*]}" -v pa="${pa[*]}" -v pb="${pb[*]}" \
        -v ca="${ca[*]}" -v cb="${cb[*]}" '
        function median(s,    v, n, i, j, t) { n = split(s, v, " ");
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
            return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
        BEGIN { n = split(ta, x, " "); split(tb, y, " "); r = "";
                for (i = 1; i <= n; i++) r = r " " (x[i] > 0 ? y[i] / x[i] : 0);
                ma = median(ca); mb = median(cb);
                printf "| `%s` | %d/s | %d/s | %.2f | %.3f / %.3f ms | %.1f / %.1f us (%.2fx) |\n", args, median(ta), median(tb), median(r), median(pa), median(pb), ma, mb, (ma > 0 ? mb / ma : 0) }' \
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
        echo "  bench/server/bench_server.c) against plain, then CURVE, $rounds rounds of $secs s each;"
        echo "  the table gives medians over the rounds (CURVE/plain: the median of each round's"
        echo "  ratio). --pad adds a 64 KiB field to each request (the reply stays small). reset"
        echo "  includes one fsync'd SQLite commit on the store thread. Server CPU per request: the"
        echo "  CPU time of all the server's threads (/proc/PID/task/*/schedstat) over the requests"
        echo "  of a run, including each run's connection handshakes; the least load-dependent"
        echo "  figure here."
        echo
        echo "| requests | plain | CURVE | CURVE/plain | p50 latency plain / CURVE | server CPU per request plain / CURVE |"
        echo "|---|---|---|---|---|---|"
        cat "$table"
        echo
        echo '```'
        cat "$results"
        echo '```'
    } >"$out"
fi
