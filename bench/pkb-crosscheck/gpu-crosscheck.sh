#!/usr/bin/env bash
# Cross-checks every problem that has an adapter, at W=2, on the GPU machine (torchrun from the
# machine's PyTorch). PKB_DIR: a ParallelKernelBench checkout (default .gpu/pkb, a copy of
# ../shared/pkb carried into the checkout). Prints one JSON report per problem and a summary.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export PKGYM=${PKGYM:-$root/build-gpu/env/pkgym}
export PKB_DIR=${PKB_DIR:-$root/.gpu/pkb}
pass=0 fail=0
for a in "$here"/adapters/*.py; do
    id=$(basename "$a" .py)
    problem=$(python3 -c 'import sys,os,glob; s=sys.argv[1]; print(next(p for p in (s.replace("_","/",1),) ))' "$id")
    [ -n "${XC_ONLY:-}" ] && ! echo "$problem" | grep -Eq "$XC_ONLY" && continue
    dev=cuda
    grep -q '"device": *"host"' "$root/problems/$problem/meta.json" && dev=cpu
    echo "=== $problem ($dev)"
    if DEVICE=$dev bash "$here/run.sh" "$problem" 2 "$PKB_DIR"; then
        pass=$((pass + 1)); echo "--- $problem: pass"
    else
        fail=$((fail + 1)); echo "--- $problem: FAIL"
    fi
done
echo "crosscheck: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
