#!/bin/sh
# Compiles every GPU problem's correct and wrong solutions (problems/*/*/ with "device": "gpu")
# with the harness's nvcc flags (problems/src/compile.c) but host -O0, which changes no
# diagnostics and saves CI time, and each problem.cu as a module unless the build already made
# it. No GPU needed. PK_COLL_COMPILE_ALL=1 also compiles the hostile submissions and the
# shortcut twins (the GPU run compiles them all anyway; here they would double CI's nvcc time).
# PK_COMPILE_ONLY=PATTERN (a shell pattern over SUITE/ID, e.g. 'pkb/3[678]_*') compiles only the
# problems it matches (a port's own check without the whole suite's nvcc time).
set -u
: "${PK_SOURCE_DIR:?set by ctest}" "${PK_BUILD_DIR:?set by ctest}"
NVCC=${PK_NVCC:-/usr/local/cuda/bin/nvcc}
if [ ! -x "$NVCC" ]; then
    echo "nvcc not found at $NVCC (the build found it there)"
    exit 1
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# One line per job: kind<TAB>source. xargs runs two nvcc at a time (CI has 2 cores).
for dir in "$PK_SOURCE_DIR"/problems/*/*/; do
    grep -q '"device": *"gpu"' "$dir/meta.json" 2>/dev/null || continue
    id=$(basename "$dir")
    suite=$(basename "$(dirname "$dir")")
    # shellcheck disable=SC2254
    case "$suite/$id" in ${PK_COMPILE_ONLY:-*}) ;; *) continue ;; esac
    if [ -z "$(find "$PK_BUILD_DIR" -name "pkprob_${suite}_$id.so" -print -quit 2>/dev/null)" ]; then
        printf 'module\t%s\n' "$dir/problem.cu"
    fi
    kind=candidate # "device_api": true: compile.c adds -DPK_DEVICE_API=1
    grep -q '"device_api": *true' "$dir/meta.json" && kind=candidate-api
    for f in "$dir"solutions/correct.cu "$dir"solutions/wrong.cu; do
        printf '%s\t%s\n' "$kind" "$f"
    done
    if [ "${PK_COLL_COMPILE_ALL:-0}" = 1 ]; then
        for f in "$dir"solutions/hostile_*.cu "$dir"solutions/shortcut_*.cu; do
            [ -e "$f" ] && printf '%s\t%s\n' "$kind" "$f"
        done
    fi
done >"$OUT/all-jobs"
# PK_COMPILE_SHARD=i/n: only every n-th job from the i-th (ctest runs the shards as separate
# tests, each within its own time limit, side by side under -j).
shard=${PK_COMPILE_SHARD:-0/1}
awk -F'\t' -v i="${shard%/*}" -v n="${shard#*/}" '(NR - 1) % n == i' "$OUT/all-jobs" >"$OUT/jobs"

export NVCC OUT PK_SOURCE_DIR
# shellcheck disable=SC2016
tr '\t' '\n' <"$OUT/jobs" | xargs -n 2 -P 2 sh -c '
    kind=$1 src=$2
    so="$OUT/$(echo "$src" | tr / _).so"
    if [ "$kind" = module ]; then # the include dirs problems/CMakeLists.txt gives a module
        set -- "-I$PK_SOURCE_DIR/problems/include" "-I$PK_SOURCE_DIR/common/include"
    elif [ "$kind" = candidate-api ]; then
        set -- "-I$PK_SOURCE_DIR/problems/include/candidate" -DPK_DEVICE_API=1
    else
        set -- "-I$PK_SOURCE_DIR/problems/include/candidate"
    fi
    if "$NVCC" -shared -Xcompiler -fPIC -O0 -std=c++17 -gencode arch=compute_90a,code=sm_90a \
        -cudart shared "$@" "$src" -o "$so" >"$so.log" 2>&1; then
        sym=solution
        [ "$kind" = module ] && sym=pk_problem_module_v1
        if nm -D --defined-only "$so" | grep -q " T $sym\$"; then
            echo "ok      $src"
        else
            echo "FAILED  $src: does not export $sym" | tee "$so.failed"
        fi
    else
        echo "FAILED  $src" | tee "$so.failed"
        cat "$so.log"
    fi
' sh

total=$(wc -l <"$OUT/jobs")
failed=$(find "$OUT" -name '*.failed' | wc -l)
echo "compiled $((total - failed))/$total GPU problem sources"
[ "$failed" -eq 0 ]
