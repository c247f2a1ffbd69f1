#!/usr/bin/env bash
# Issue #13 (throughput) on a 2-GPU machine in one call, <= 9 minutes: builds, then measures
#  1. start-up: bench/throughput/init_probe per rank, exit with and without teardown;
#  2. one `pkgym check` of the all-reduce (warm, default fast exit) against the old teardown
#     path (PKGYM_RUNNER_TEARDOWN=1);
#  3. interference: the correct all-reduce and the reference against itself, alone and while
#     LOAD_JOBS loops of other checks (--reference --skip-timing: set-up and trials only) run
#     on the same GPUs;
#  4. hung jobs among others: one hangs in a trial (holds the GPUs shared), one in timing
#     (holds them alone), four correct checks at the same time;
#  5. the 64 x 3 collectives batch, cold then warm compile cache (bench/rollout/gpu-batch.sh),
#     while nvidia-smi samples the jobs' processes and memory (it gets what time is left);
#  6. nvidia-smi right after it: no process, memory back to the idle figure;
#  7. interference under load again with PKGYM_LOCK_SETUP=1 (the arena set-up holds the locks);
#  8. time allowing, the batch at other jobs-per-GPU settings.
# Every section is skipped when the time left cannot cover it. Logs and raw results go to
# $OUT (default build-gpu-logs/throughput); the table (bench/rollout/throughput_report.py)
# is printed last and kept as $OUT/table.md.
#   bash bench/rollout/gpu-throughput.sh          (from the repository root, with .debs)
# BUDGET_S (530), LOAD_JOBS (4), SKIP_BUILD=1 (reuse build-gpu), VARIANTS ("16 4": the
# jobs-per-GPU of section 8), SECTIONS (default all: a subset of "init check interference hung
# batch locksetup variants").
set -u
cd "$(dirname "$0")/../.."
root=$(pwd)
OUT=${OUT:-$root/build-gpu-logs/throughput}
mkdir -p "$OUT"
budget=${BUDGET_S:-530}
t_start=$(date +%s)
left() { echo $((budget - ($(date +%s) - t_start))); }
say() { echo "[$(($(date +%s) - t_start)) s] $*" | tee -a "$OUT/progress.log"; }
need() { # need SECONDS WHAT [KEY]: 0 when there is time and KEY is in $SECTIONS (when set)
    if [ -n "${SECTIONS:-}" ] && [ -n "${3:-}" ] && [[ " $SECTIONS " != *" $3 "* ]]; then
        return 1
    fi
    if [ "$(left)" -lt "$1" ]; then
        say "SKIPPED $2: $(left) s left, needs $1 s"
        echo "$2" >>"$OUT/skipped.txt"
        return 1
    fi
}
now() { date +%s.%N; }

say "start; budget $budget s; results in $OUT"
: >"$OUT/skipped.txt"
nvidia-smi --query-gpu=index,name,memory.total,memory.used,compute_mode,driver_version \
    --format=csv >"$OUT/gpus.csv" 2>&1
nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits >"$OUT/idle-gpu.csv" 2>&1
nvidia-smi topo -m >"$OUT/topo.txt" 2>&1
cat "$OUT/gpus.csv"

# --- build (scripts/gpu-test unpacks .debs into /opt/pkdeps and configures build-gpu) ---
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
AR=collectives/allreduce
AR_SOL=$root/problems/collectives/allreduce/solutions

# check NAME [ENV=V...] -- ARGS: one `pkgym check --json` into $OUT/NAME.json, wall into .wall
check() {
    local name=$1
    shift
    local envs=()
    while [ "$1" != "--" ]; do
        envs+=("$1")
        shift
    done
    shift
    local t0 t1
    t0=$(now)
    env "${envs[@]}" timeout 150 "$PKGYM" check --json "$@" >"$OUT/$name.json" 2>"$OUT/$name.err"
    t1=$(now)
    echo "$t0 $t1" | awk '{printf "%.3f\n", $2 - $1}' >"$OUT/$name.wall"
}

# --- 1. start-up probe ---
if need 40 "init probe" init; then
    say "init probe"
    if nvcc -O2 -arch=sm_90a -o "$OUT/init_probe" bench/throughput/init_probe.cu -lnccl \
        >"$OUT/probe-build.log" 2>&1; then
        for i in 1 2 3; do
            "$OUT/init_probe" 2 512 >"$OUT/probe-teardown-$i.txt" 2>&1
            PROBE_NO_TEARDOWN=1 "$OUT/init_probe" 2 512 >"$OUT/probe-exit-$i.txt" 2>&1
        done
    else
        say "init_probe did not build (probe-build.log)"
    fi
fi

# --- 2. one pkgym check, fast exit vs teardown ---
if need 40 "single check" check; then
    say "single checks"
    for i in 1 2 3; do
        check "check-fast-$i" -- --problem "$AR" "$AR_SOL/correct.cu"
    done
    for i in 1 2; do
        check "check-teardown-$i" PKGYM_RUNNER_TEARDOWN=1 -- --problem "$AR" "$AR_SOL/correct.cu"
    done
fi

# --- 3. interference ---
load_start() { # load_start NAME [ENV=V...]: LOAD_JOBS loops of set-up + trials
    local name=$1
    shift
    mkdir -p "$OUT/$name"
    rm -f "$OUT/$name.stop"
    load_pids=()
    for k in $(seq 1 "${LOAD_JOBS:-4}"); do
        (
            n=0
            while [ ! -e "$OUT/$name.stop" ]; do
                n=$((n + 1))
                env "$@" timeout 120 "$PKGYM" check --json --problem "$AR" --reference \
                    --skip-timing >"$OUT/$name/$k-$n.json" 2>/dev/null
            done
        ) &
        load_pids+=($!)
    done
    sleep 5 # the loops are in set-up and trials by now
}
load_stop() {
    touch "$OUT/$1.stop"
    wait "${load_pids[@]}" 2>/dev/null
}
if need 110 "interference" interference; then
    say "interference: alone"
    for i in 1 2 3 4; do check "if-alone-$i" -- --problem "$AR" "$AR_SOL/correct.cu"; done
    for i in 1 2 3; do check "if-ref-alone-$i" -- --problem "$AR" --reference; done
    say "interference: under load"
    load_start load
    for i in 1 2 3 4; do check "if-loaded-$i" -- --problem "$AR" "$AR_SOL/correct.cu"; done
    for i in 1 2 3; do check "if-ref-loaded-$i" -- --problem "$AR" --reference; done
    load_stop load
fi
# --- 4. hung jobs among others ---
if need 80 "hung jobs" hung; then
    say "hung jobs among others"
    # Correct, but rank 1 spins on the host from its 8th call: past the trials (5 + 0..2),
    # in the timing warm-up, which holds the GPUs alone.
    sed 's/^extern "C" int solution(/static int solution_impl(/' "$AR_SOL/correct.cu" \
        >"$OUT/hang_timing.cu"
    cat >>"$OUT/hang_timing.cu" <<'EOF'
extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t n) {
    static int calls;
    volatile int spin = ++calls > 7 && ctx->rank == 1;
    while (spin) {
    }
    return solution_impl(ctx, x, y, n);
}
EOF
    hung_pids=()
    check hung-trial -- --problem "$AR" "$AR_SOL/hostile_hang.cu" &
    hung_pids+=($!)
    check hung-timing -- --problem "$AR" "$OUT/hang_timing.cu" &
    hung_pids+=($!)
    for i in 1 2 3 4; do
        check "hung-other-$i" -- --problem "$AR" "$AR_SOL/correct.cu" &
        hung_pids+=($!)
    done
    wait "${hung_pids[@]}"
fi

# --- 5. the batch, with the GPUs sampled ---
batch() { # batch NAME EPISODES WARM_EPISODES [ENV=V...]
    local name=$1 episodes=$2 warm=$3 limit
    shift 3
    limit=$(($(left) - 30))
    [ "$limit" -gt 330 ] && limit=330
    rm -f "$OUT/$name.sampling-stop"
    ( # one sample a second: every compute process with its memory, and each GPU's memory
        while [ ! -e "$OUT/$name.sampling-stop" ]; do
            t=$(date +%s.%N)
            nvidia-smi --query-compute-apps=gpu_bus_id,pid,used_memory \
                --format=csv,noheader,nounits 2>/dev/null | sed "s/^/$t, /" >>"$OUT/$name-apps.csv"
            nvidia-smi --query-gpu=index,memory.used,utilization.gpu \
                --format=csv,noheader,nounits 2>/dev/null | sed "s/^/$t, /" >>"$OUT/$name-gpu.csv"
            sleep 1
        done
    ) &
    local sampler=$!
    env "$@" EPISODES="$episodes" WARM_EPISODES="$warm" TURNS=3 TRIALS=1 \
        timeout "$limit" bench/rollout/gpu-batch.sh build-gpu >"$OUT/$name.log" 2>&1
    echo "exit $?" >>"$OUT/$name.log"
    touch "$OUT/$name.sampling-stop"
    wait "$sampler" 2>/dev/null
}
if need 90 "batch" batch; then
    say "batch 64 x 3, cold then warm"
    batch batch 64 64
    say "batch done"
fi

# --- 6. nothing left behind ---
sleep 3
nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits >"$OUT/after-batch-gpu.csv" 2>&1
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits \
    >"$OUT/after-batch-apps.csv" 2>&1
pgrep -af 'pk-runner|mpirun|cicc|ptxas' >"$OUT/after-batch-procs.txt" 2>&1

# --- 7. interference again, the arena set-up holding the locks shared ---
if need 60 "interference with PKGYM_LOCK_SETUP=1" locksetup; then
    say "interference: under load, set-up holding the locks shared"
    load_start load-ls PKGYM_LOCK_SETUP=1
    for i in 1 2 3 4; do
        check "if-locksetup-$i" PKGYM_LOCK_SETUP=1 -- --problem "$AR" "$AR_SOL/correct.cu"
    done
    load_stop load-ls
fi

# --- 8. other co-residency settings ---
for k in ${VARIANTS:-16 4}; do
    if need 170 "batch with $k jobs per GPU" variants; then
        say "batch 32 x 3 cold, 64 x 3 warm, $k jobs per GPU"
        batch "batch-jpg$k" 32 64 JOBS_PER_GPU="$k"
    fi
done

sleep 2
nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits >"$OUT/end-gpu.csv" 2>&1
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits \
    >"$OUT/end-apps.csv" 2>&1
say "done; table:"
python3 bench/rollout/throughput_report.py "$OUT" | tee "$OUT/table.md"
