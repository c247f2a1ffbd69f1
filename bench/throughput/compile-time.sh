#!/usr/bin/env bash
# The compile of one candidate with pkgym's own nvcc flags (problems/src/compile.c), with and
# without NCCL's device API (-DPK_DEVICE_API=1, "device_api": true), REPS (5) runs each in turn
# after one warm-up, and the median CPU (user + sys) and wall seconds with /usr/bin/time; then
# one nvcc -time per variant for where the time goes. Issue 30, lever 4. No GPU needed.
#   bench/throughput/compile-time.sh [SOURCE [EXTRA_NVCC_FLAGS...]]
# Default SOURCE: bench/throughput/candidates/gemm_allreduce_host_api.cu with -lcublas
# -lcublasLt (pkb/13's "libraries"). A source that uses the device API fails without it.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
src=${1:-$here/candidates/gemm_allreduce_host_api.cu}
shift || true
extra=("$@")
[ $# -gt 0 ] || extra=(-lcublas -lcublasLt)
flags=(-shared -Xcompiler -fPIC -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -lineinfo
    -cudart shared "-I$root/problems/include/candidate" "${extra[@]}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # run VARIANT: one compile, "cpu wall" appended to $tmp/VARIANT
    local d=()
    [ "$1" = api ] && d=(-DPK_DEVICE_API=1)
    /usr/bin/time -f "%U %S %e" -o "$tmp/t" "$NVCC" "${flags[@]}" "${d[@]}" "$src" \
        -o "$tmp/$1.so" >"$tmp/$1.log" 2>&1 || echo "($1: nvcc failed)" >&2
    awk '{printf "%.3f %.3f\n", $1 + $2, $3}' "$tmp/t" >>"$tmp/$1"
}
run noapi && run api && rm -f "$tmp/noapi" "$tmp/api" # warm-up
for i in $(seq "${REPS:-5}"); do run noapi; run api; done
echo "nvcc ${flags[*]} [-DPK_DEVICE_API=1] $src  ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "| variant | runs | CPU s median (min-max) | wall s median (min-max) |"
echo "|---|---|---|---|"
for v in noapi api; do
    sort -n -k1 "$tmp/$v" | awk -v v="$v" '{c[NR]=$1} END {printf "| %s | %d | %.2f (%.2f-%.2f) |", v, NR, c[int((NR+1)/2)], c[1], c[NR]}'
    sort -n -k2 "$tmp/$v" | awk '{w[NR]=$2} END {printf " %.2f (%.2f-%.2f) |\n", w[int((NR+1)/2)], w[1], w[NR]}'
done
echo
for v in noapi api; do
    d=()
    [ "$v" = api ] && d=(-DPK_DEVICE_API=1)
    "$NVCC" "${flags[@]}" "${d[@]}" "$src" -o "$tmp/$v.so" -time "$tmp/$v.csv" >/dev/null 2>&1
    printf '%s phases (ms): ' "$v"
    awk -F, 'NR > 1 && $7 + 0 > 0 {gsub(/^ +| +$/, "", $2); printf "%s %.0f; ", $2, $7}' "$tmp/$v.csv"
    echo
done
