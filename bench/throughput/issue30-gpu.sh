#!/usr/bin/env bash
# Issue 30 on a 2-GPU machine in one call (BUDGET_S, default 540 s with the build; every section
# is skipped when the time left cannot cover it, and skipped.txt and the results say which):
#  0. build (scripts/gpu-test: pkgym, pk-runner, bench_rollout, the problem modules);
#  1. lever 1 is safe: ctest collectives_gpu_rank_visibility_own (the correct all-reduce under
#     --rank-visibility own is `correct` and NCCL connects through P2P, not SHM/NET);
#  2. single `pkgym check` latency, warm (runs overlap the compile: the default), after one
#     untimed check, REPS (5) times with rank visibility all and REPS_OWN (3) with own: the
#     all-reduce (device API), pkb/13 (cuBLAS + device API, its correct.cu), and a copy of pkb/13
#     with "device_api": false and a host-API candidate
#     (bench/throughput/candidates/gemm_allreduce_host_api.cu: a cuBLAS problem without the
#     device API);
#  3. the 64 x 3 collectives batch (bench/rollout/gpu-batch.sh, cold; WARM_EPISODES (0) warm)
#     with rank visibility all, then own (lever 1 off and on; the other levers cannot be turned
#     off in one tree: every collective uses the device API, and the set-up diet is the code);
#  4. the interference test (bench/rollout/gpu-throughput.sh's section: the correct all-reduce
#     and the reference against itself, alone and under load: per-call CV and self-speedup);
#  5. the start-up probe (init_probe, K = 1 and 8 pairs at once, inside the sandbox) with lever 1
#     (own GPU only) and the runner side of lever 4 (no device communicator) on and off;
#  6. time allowing, the interference test under own.
# One markdown file, $OUT/issue30-results.md, holds every figure with its command.
#   bash bench/throughput/issue30-gpu.sh        (from the repository root; .debs as for gpu-test)
# BUDGET_S (540), REPS (5), REPS_OWN (3), SKIP_BUILD=1, EPISODES (64), WARM_EPISODES (0),
# SECTIONS (a subset of "visibility checks batch interference probe interference_own"; default
# all): e.g. a second call with SKIP_BUILD=1 SECTIONS="probe interference_own".
set -u
cd "$(dirname "$0")/../.."
root=$(pwd)
OUT=${OUT:-$root/build-gpu-logs/issue30}
mkdir -p "$OUT"
budget=${BUDGET_S:-540}
reps=${REPS:-5}
reps_own=${REPS_OWN:-3}
t_start=$(date +%s)
md=$OUT/issue30-results.md
left() { echo $((budget - ($(date +%s) - t_start))); }
say() { echo "[$(($(date +%s) - t_start)) s] $*" | tee -a "$OUT/progress.log"; }
need() { # need SECONDS WHAT KEY: 0 when there is time and KEY is in $SECTIONS (when set)
    if [ -n "${SECTIONS:-}" ] && [[ " $SECTIONS " != *" $3 "* ]]; then
        return 1
    fi
    if [ "$(left)" -lt "$1" ]; then
        say "SKIPPED $2: $(left) s left, needs $1 s"
        echo "$2" >>"$OUT/skipped.txt"
        return 1
    fi
}
: >"$OUT/skipped.txt"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    say "build"
    GPU_TEST_CTEST=0 GPU_TEST_TARGETS="pkgym pk-runner bench_rollout pk_problem_modules" \
        OUT="$OUT/build" scripts/gpu-test >"$OUT/build.log" 2>&1
fi
if [ -d /opt/pkdeps ]; then
    export LD_LIBRARY_PATH=/opt/pkdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PKGYM_SANDBOX_RO=/opt/pkdeps${PKGYM_SANDBOX_RO:+:$PKGYM_SANDBOX_RO}
fi
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
PKGYM=$root/build-gpu/env/pkgym
if [ ! -x "$PKGYM" ] || [ ! -x build-gpu/tests/rollout/bench_rollout ]; then
    say "build FAILED (see $OUT/build.log and $OUT/build/)"
    tail -30 "$OUT/build.log"
    exit 1
fi
say "built"
{
    echo "# Issue 30 on $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs): $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "Driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1), $(nproc) CPU cores, tree $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git status --porcelain 2>/dev/null | grep -q . && echo '+')."
    echo "Command: \`bash bench/throughput/issue30-gpu.sh\` (BUDGET_S=$budget REPS=$reps)."
    echo
} >"$md"

# --- 1. lever 1 keeps NCCL on NVLink ---
if need 60 "rank visibility test" visibility; then
    say "ctest collectives_gpu_rank_visibility_own"
    ctest --test-dir build-gpu -R '^collectives_gpu_rank_visibility_own$' --output-on-failure \
        --timeout 150 >"$OUT/visibility-ctest.log" 2>&1
    {
        echo "## 1. --rank-visibility own: correct, and NCCL on P2P"
        echo
        echo "\`ctest --test-dir build-gpu -R collectives_gpu_rank_visibility_own --output-on-failure\`"
        echo
        echo '```'
        grep -E '^(own|all|FAIL)|tests passed|Passed|Failed|Skipped' "$OUT/visibility-ctest.log"
        echo '```'
        echo
    } >>"$md"
fi

# --- 2. single-check latency ---
# A second problems root holding only pkb/13_gemm_allreduce_noapi: pkb/13's files with
# "device_api": false, and a copy of pkb/13's module under the name its id asks for.
probs=$OUT/problems
rm -rf "$probs"
noapi=$probs/pkb/13_gemm_allreduce_noapi
mkdir -p "$noapi"
cp problems/pkb/13_gemm_allreduce/prompt.md problems/pkb/13_gemm_allreduce/problem.cu "$noapi/"
python3 - problems/pkb/13_gemm_allreduce/meta.json "$noapi/meta.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["id"] = "13_gemm_allreduce_noapi"
m["device_api"] = False
json.dump(m, open(sys.argv[2], "w"), indent=1)
PY
mod=$(find build-gpu -name 'pkprob_pkb_13_gemm_allreduce.so' | head -1)
[ -n "$mod" ] && cp "$mod" "$(dirname "$mod")/pkprob_pkb_13_gemm_allreduce_noapi.so"

# one_check NAME VISIBILITY PROBLEM SOURCE: `pkgym check --json` into $OUT/NAME.json, wall in .wall
one_check() {
    local t0 t1
    t0=$(date +%s.%N)
    local root_env=()
    [[ "$3" == *_noapi ]] && root_env=(PKGYM_PROBLEMS_ROOT="$probs")
    env "${root_env[@]}" timeout 150 "$PKGYM" check --json --rank-visibility "$2" \
        --problem "$3" "$4" >"$OUT/$1.json" 2>"$OUT/$1.err"
    t1=$(date +%s.%N)
    echo "$t0 $t1" | awk '{printf "%.3f\n", $2 - $1}' >"$OUT/$1.wall"
}
checks_table() { # the table of section 2 from $OUT/chk-*.json
    python3 - "$OUT" <<'PY'
import glob, json, os, re, statistics, sys
out = sys.argv[1]
groups = {}
for f in sorted(glob.glob(os.path.join(out, "chk-*.json"))):
    m = re.match(r"chk-(.+)-(own|all)-(\d+)\.json$", os.path.basename(f))
    if not m:
        continue
    try:
        r = json.load(open(f))
    except (OSError, ValueError):
        r = {}
    wall = float(open(f[:-5] + ".wall").read())
    groups.setdefault((m.group(1), m.group(2)), []).append((wall, r))
print("| problem, candidate | visibility | n | status | wall s (median, min-max) | compile_ms | run_ms | run_warm_ms | run_init_ms | run_arena_ms |")
print("|---|---|---|---|---|---|---|---|---|---|")
def med(rs, key):
    v = [r.get("stages", {}).get(key) for _, r in rs]
    v = [x for x in v if isinstance(x, (int, float))]
    return "%.0f" % statistics.median(v) if v else "-"
for (name, vis), rs in sorted(groups.items()):
    walls = [w for w, _ in rs]
    status = ",".join(sorted(set(str(r.get("status")) for _, r in rs)))
    print("| %s | %s | %d | %s | %.2f (%.2f-%.2f) | %s | %s | %s | %s | %s |" % (
        name, vis, len(rs), status, statistics.median(walls), min(walls), max(walls),
        med(rs, "compile_ms"), med(rs, "run_ms"), med(rs, "run_warm_ms"), med(rs, "run_init_ms"),
        med(rs, "run_arena_ms")))
PY
}
if need 150 "single checks" checks; then
    say "single checks"
    AR_SOL=problems/collectives/allreduce/solutions/correct.cu
    P13_SOL=problems/pkb/13_gemm_allreduce/solutions/correct.cu
    HOST_SOL=bench/throughput/candidates/gemm_allreduce_host_api.cu
    one_check chk-warmup all collectives/allreduce "$AR_SOL" # file cache, locks, driver
    rm -f "$OUT"/chk-warmup.*
    for vis in all own; do
        n=$reps
        [ "$vis" = own ] && n=$reps_own
        for i in $(seq "$n"); do
            [ "$(left)" -lt 100 ] && break
            one_check "chk-allreduce.correct-$vis-$i" "$vis" collectives/allreduce "$AR_SOL"
            one_check "chk-pkb13.correct-$vis-$i" "$vis" pkb/13_gemm_allreduce "$P13_SOL"
            one_check "chk-pkb13noapi.host_api-$vis-$i" "$vis" pkb/13_gemm_allreduce_noapi "$HOST_SOL"
        done
    done
    {
        echo "## 2. One \`pkgym check\`, warm (run overlapping the compile)"
        echo
        echo "\`pkgym check --json --rank-visibility VIS --problem ID FILE\`, $reps times each with all and $reps_own with own, after one untimed check; pkb/13_gemm_allreduce_noapi is pkb/13 with \"device_api\": false (a copy in a second root, PKGYM_PROBLEMS_ROOT, with a copy of its module) and FILE bench/throughput/candidates/gemm_allreduce_host_api.cu. Goals: <= 1.5 s without the device API, <= 2.5 s with it."
        echo
        checks_table
        echo
    } >>"$md"
fi

# --- 3. the batch, lever 1 off and on ---
batch() { # batch NAME VISIBILITY
    local limit=$(($(left) - 20))
    [ "$limit" -gt 180 ] && limit=180
    PKGYM_RANK_VISIBILITY=$2 EPISODES=${EPISODES:-64} WARM_EPISODES=${WARM_EPISODES:-0} TURNS=3 \
        TRIALS=1 timeout "$limit" bench/rollout/gpu-batch.sh build-gpu >"$OUT/$1.log" 2>&1
    echo "exit $? (limit $limit s)" >>"$OUT/$1.log"
    {
        echo "### rank visibility $2"
        echo
        echo "\`PKGYM_RANK_VISIBILITY=$2 EPISODES=${EPISODES:-64} WARM_EPISODES=${WARM_EPISODES:-0} TURNS=3 TRIALS=1 bench/rollout/gpu-batch.sh build-gpu\`"
        echo
        echo '```'
        grep -v '^## \|^Device\|^\$ ' "$OUT/$1.log" | sed '/^$/d'
        echo '```'
        echo
    } >>"$md"
}
if need 150 "batch (all)" batch; then
    say "batch, visibility all"
    echo "## 3. The collectives batch (EPISODES x 3 turns), rank visibility all and own" >>"$md"
    echo >>"$md"
    batch batch-all all
    if need 130 "batch (own)" batch; then
        say "batch, visibility own"
        batch batch-own own
    fi
fi

# --- 4. interference (timing fidelity), default settings ---
interference() { # interference NAME [ENV=V...]
    local name=$1
    shift
    env "$@" SKIP_BUILD=1 SECTIONS=interference BUDGET_S=$(($(left) - 5)) OUT="$OUT/$name" \
        bash bench/rollout/gpu-throughput.sh >"$OUT/$name.log" 2>&1
    {
        echo "### ${*:-defaults}"
        echo
        echo "\`$* SKIP_BUILD=1 SECTIONS=interference bash bench/rollout/gpu-throughput.sh\` (targets: per-call CV <= 1%, reference against itself 1.00 +- 0.02)"
        echo
        grep -i -E '^\| (what|---|.*interfer|.*alone|.*load|.*itself|.*CV)' "$OUT/$name/table.md" 2>/dev/null ||
            tail -5 "$OUT/$name.log"
        echo
    } >>"$md"
}
if need 120 "interference" interference; then
    say "interference (defaults)"
    echo "## 4. Interference (timing fidelity)" >>"$md"
    echo >>"$md"
    interference interference-all
fi

# --- 5. start-up probe, the levers on and off ---
if need 60 "start-up probe" probe; then
    say "start-up probe"
    {
        echo "## 5. Start-up probe (init_probe: 2 ranks, context, communicator, 512 MiB window, dev comm, first all-reduce; inside \`pkgym sandbox --gpus 0,1\`)"
        echo
        echo "\`MODES=sandbox KS=\"1 8\" REPS=1 [PROBE_OWN_GPU=1] [PROBE_NO_DEV_COMM=1] bench/throughput/startup-scaling.sh build-gpu/env/pkgym\`"
        echo
    } >>"$md"
    nvcc -O2 -arch=sm_90a -o "$OUT/init_probe" bench/throughput/init_probe.cu -lnccl \
        >"$OUT/probe-build.log" 2>&1 || echo "(init_probe did not build: probe-build.log)" >>"$md"
    for v in "all GPUs, dev comm:" "own GPU, dev comm:PROBE_OWN_GPU=1" \
             "all GPUs, no dev comm:PROBE_NO_DEV_COMM=1" \
             "own GPU, no dev comm:PROBE_OWN_GPU=1 PROBE_NO_DEV_COMM=1"; do
        [ "$(left)" -lt 25 ] && { echo "(the rest skipped: time)" >>"$md"; break; }
        name=${v%%:*} envs=${v#*:}
        echo "### $name" >>"$md"
        echo >>"$md"
        lim=$(($(left) - 5))
        [ "$lim" -gt 90 ] && lim=90
        env $envs PROBE_BIN="$OUT/init_probe" MODES=sandbox KS="1 8" REPS=1 timeout "$lim" \
            bash bench/throughput/startup-scaling.sh "$PKGYM" >"$OUT/probe-$(echo "$name" | tr -c 'a-z0-9\n' _).md" 2>&1
        cat "$OUT/probe-$(echo "$name" | tr -c 'a-z0-9\n' _).md" >>"$md"
        echo >>"$md"
    done
fi

# --- 6. time allowing, interference under --rank-visibility own ---
if need 120 "interference (own)" interference_own; then
    say "interference (own)"
    interference interference-own PKGYM_RANK_VISIBILITY=own
fi

{
    echo "## Skipped"
    echo
    if [ -s "$OUT/skipped.txt" ]; then sed 's/^/- /' "$OUT/skipped.txt"; else echo "nothing"; fi
    echo
    echo "Total $(($(date +%s) - t_start)) s."
} >>"$md"
say "done: $md"
cat "$md"
