#!/bin/sh
# Runs the attend() kernel of a pkb/54 or pkb/55 solution on the host under the warp emulation of
# tests/problems/attention_emul.h (no GPU, no NCCL: the LSA gather is replaced by the copies it
# would make), for every rank of W, and prints each rank's worst error / tolerance against
# causal attention in double (pkb/54's rtol 0.05, atol_rms 0.05; <= 1 passes).
# pkb/55 (driver55.cpp): W is the number of CP ranks, the output the attention output ctx.
# Usage: bench/pkb/attention-emul/run.sh SOLUTION.cu [W [S]]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python3 "$here/extract.py" "$1" >"$out/kern.inc"
g++ -std=c++20 -O2 -w -I"$out" -I"$here" -I"$root/tests/problems" -I"$root/common/include" \
    "$here/$(case "$1" in *55_*) echo driver55.cpp ;; *) echo driver.cpp ;; esac)" \
    -o "$out/emul" -lpthread
"$out/emul" "${2:-3}" "${3:-70}"
