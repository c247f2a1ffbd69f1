#!/usr/bin/env bash
# Issue 32's GPU pass, one device call on 2xH200 (about 5-6 minutes; it stops itself before
# PASS_BUDGET_S, default 420, build included): builds, then, five streams at once,
#   - the correct all-reduce (collectives/allreduce), pkb/13 and pkb/15, each profiled at the
#     summary and the full level (`pkgym check --profile L --trials 1 --skip-timing`): the result
#     JSON, the feedback text, the SVG timeline and the cost in seconds of each;
#   - ctest's problems_profile_gpu: the all-reduce timed then profiled, and the two hand-made
#     overlap cases (overlap_serial.cu, overlap_streams.cu) with their overlap fractions;
#   - ncu variants for kernels that wait on other ranks (below; VARIANTS=0 leaves them out);
# and first the facts: ncu's version and which of the metrics the stage asks for it knows
# (NVLink's nvltx/nvlrx included). Everything lands in $OUT (default build-gpu-logs/profile),
# summed up in $OUT/profile-report.md for bench/results/.
#
#   bash bench/profile/gpu-profile.sh           # carry .debs and .whl as for scripts/gpu-test
#   BUILD=0 bash bench/profile/gpu-profile.sh   # the build-gpu there is current
#
# --timeout-ms 120000: a profiler run may hold the GPU locks for at most 3/4 of the run limit
# (docs/feedback.md, "Profiles"), 90 s here; PROFILE_S bounds each profile (default 100 s).
# The streams share the two GPUs: the timing locks keep each profiled call alone on them,
# but a profile's cost includes its waits for the others' locked phases (said in the report).
set -u
cd "$(dirname "$0")/../.."
root=$(pwd)
OUT=${OUT:-$root/build-gpu-logs}/profile
mkdir -p "$OUT"
t_start=$(date +%s)
left() { echo $((${PASS_BUDGET_S:-420} - ($(date +%s) - t_start))); }
lim() { local l=$(($(left) - $1)); [ "$l" -ge 10 ] || l=10; echo "$l"; } # a timeout, >= 10 s
say() { echo "[$(($(date +%s) - t_start)) s] $*" | tee -a "$OUT/pass.log"; }

if [ "${BUILD:-1}" = 1 ]; then
    say "build (scripts/gpu-test, no ctest)"
    GPU_TEST_CTEST=0 OUT=$OUT/build timeout 240 scripts/gpu-test >"$OUT/build.log" 2>&1
    say "build exit $?"
fi
if [ -d /opt/pkdeps ]; then
    export LD_LIBRARY_PATH=/opt/pkdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PKGYM_SANDBOX_RO=/opt/pkdeps${PKGYM_SANDBOX_RO:+:$PKGYM_SANDBOX_RO}
fi
[ -d .whl ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/pk-site .whl/*.whl >/dev/null 2>&1 && export PYTHONPATH=/tmp/pk-site
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
export PKGYM=$root/build-gpu/env/pkgym PK_SOURCE_DIR=$root PK_BUILD_DIR=$root/build-gpu
[ -x "$PKGYM" ] || { say "no $PKGYM: the build failed (build.log)"; exit 1; }

say "facts"
{
    echo "## Facts"
    echo
    echo '```'
    nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader
    ncu --version 2>&1 | tail -1
    ls -l "$root/build-gpu/problems/pk-cupti-trace.so" 2>&1
    echo '```'
    echo
    echo "Metrics of the stage this ncu knows (\`ncu --query-metrics\`, base names):"
    echo
    echo '```'
    timeout 60 ncu --query-metrics >"$OUT/query-metrics.txt" 2>&1
    for m in gpu__time_duration dram__throughput sm__throughput sm__warps_active \
             sm__pipe_tensor_op_hmma_cycles_active sm__pipe_tensor_op_gmma_cycles_active \
             sm__pipe_fma_cycles_active smsp__average_warp_latency_issue_stalled_long_scoreboard \
             smsp__average_warp_latency_issue_stalled_wait nvltx__bytes nvlrx__bytes; do
        if grep -q "^$m " "$OUT/query-metrics.txt"; then echo "yes $m"; else echo "NO  $m"; fi
    done
    echo "all nvl* metrics listed: $(grep -o '^nvl[a-z_]*' "$OUT/query-metrics.txt" | sort -u | tr '\n' ' ')"
    echo '```'
} >"$OUT/facts.md" 2>&1

# One problem at both levels, one after the other: NAME PROBLEM SOLUTION.
levels() {
    local name=$1 problem=$2 sol=$3
    for level in summary full; do
        local t0=$(date +%s)
        timeout "$(lim 20)" "$PKGYM" check --problem "$problem" "$sol" --trials 1 \
            --skip-timing --timeout-ms 120000 --profile "$level" --profile-seconds "${PROFILE_S:-100}" \
            --profile-svg "$OUT/$name-$level.svg" --json >"$OUT/$name-$level.json" \
            2>"$OUT/$name-$level.err"
        echo "$name $level exit $? wall $(( $(date +%s) - t0 )) s" >>"$OUT/walls.txt"
    done
}
# ncu and kernels that wait for other ranks (the all-reduce's two-shot kernel): a replayed or
# serialized kernel waits forever. Three ways around it, measured on the all-reduce at the
# full level, each bounded to 30 s (--timeout-ms 40000): one ncu lock file per rank
# (PKGYM_PROFILE_RANK_TMPDIR=1), application replay, ncu's lockstep launch across processes;
# and NCCL's kernels under ncu (the stage leaves them out by name): overlap_serial.cu (a GEMM,
# then ncclAllReduce) without the filter.
variants() {
    local ar=problems/collectives/allreduce/solutions/correct.cu
    for v in rank_tmpdir app_replay lockstep nccl_unfiltered; do
        local t0=$(date +%s) envs=(PKGYM_PROFILE_VARIANT=$v) problem=collectives/allreduce sol=$ar
        case $v in
        rank_tmpdir) envs=(PKGYM_PROFILE_RANK_TMPDIR=1) ;;
        app_replay) envs=("PKGYM_PROFILE_NCU_ARGS=--replay-mode application") ;;
        lockstep) envs=("PKGYM_PROFILE_NCU_ARGS=--communicator tcp --communicator-num-peers 2 --lockstep-kernel-launch") ;;
        nccl_unfiltered) envs=(PKGYM_PROFILE_NCU_FILTER=) problem=pkb/13_gemm_allreduce
                         sol=bench/profile/overlap_serial.cu ;;
        esac
        env "${envs[@]}" timeout "$(lim 20)" "$PKGYM" check --problem "$problem" "$sol" \
            --trials 1 --skip-timing --timeout-ms 40000 --profile full --profile-seconds 60 \
            --json >"$OUT/variant-$v.json" 2>"$OUT/variant-$v.err"
        echo "variant $v exit $? wall $(( $(date +%s) - t0 )) s" >>"$OUT/walls.txt"
    done
}
say "profiles (3 problems x 2 levels), ncu variants and ctest problems_profile_gpu, at once"
levels allreduce collectives/allreduce problems/collectives/allreduce/solutions/correct.cu &
levels pkb13 pkb/13_gemm_allreduce problems/pkb/13_gemm_allreduce/solutions/correct.cu &
levels pkb15 pkb/15_combined_sharded_gemms problems/pkb/15_combined_sharded_gemms/solutions/correct.cu &
[ "${VARIANTS:-1}" = 1 ] && variants &
( t0=$(date +%s)
  timeout "$(lim 15)" ctest --test-dir build-gpu -R '^problems_profile_gpu$' \
      --output-on-failure --timeout 600 >"$OUT/ctest-profile-gpu.log" 2>&1
  echo "ctest problems_profile_gpu exit $? wall $(( $(date +%s) - t0 )) s" >>"$OUT/walls.txt" ) &
wait
say "done; report"

python3 - "$OUT" <<'PY' >"$OUT/profile-report.md" 2>&1
import json, os, sys
out = sys.argv[1]
print("# Profiles on 2xH200 (issue 32)\n")
print(open(os.path.join(out, "facts.md")).read())
print("## Profiles (`pkgym check --profile L --trials 1 --skip-timing`, three problems and the "
      "ctest at once)\n")
print("| problem | level | verdict | profile | cost s | reason |\n|---|---|---|---|---|---|")
texts = []
for name in ("allreduce", "pkb13", "pkb15"):
    for level in ("summary", "full"):
        path = os.path.join(out, f"{name}-{level}.json")
        try:
            r = json.load(open(path))
        except Exception as e:
            err = open(path[:-5] + ".err").read()[-300:] if os.path.exists(path[:-5] + ".err") else ""
            print(f"| {name} | {level} | no result ({e}) | | | {err!r} |")
            continue
        p = r.get("profile") or {}
        print(f"| {name} | {level} | {r['status']} | {p.get('status')} | "
              f"{p.get('cost_s', 0):.1f} | {(p.get('reason') or '').replace('|', '/')} |")
        raw = p.get("raw") or {}
        texts.append((name, level, p.get("text") or "(no text)", len(raw.get("kernels", [])),
                      len(raw.get("timeline", []))))
print("\nWalls:\n\n```\n" + open(os.path.join(out, "walls.txt")).read() + "```\n")
print("## ncu variants (full level, 30 s cap; the all-reduce, nccl_unfiltered: "
      "overlap_serial.cu on pkb/13)\n")
print("| variant | profile | kernels from ncu | cost s | reason |\n|---|---|---|---|---|")
for v in ("rank_tmpdir", "app_replay", "lockstep", "nccl_unfiltered"):
    try:
        r = json.load(open(os.path.join(out, f"variant-{v}.json")))
        p = r.get("profile") or {}
        nk = len((p.get("raw") or {}).get("kernels", []))
        print(f"| {v} | {p.get('status')} | {nk} | {p.get('cost_s', 0):.1f} | "
              f"{(p.get('reason') or '').replace('|', '/')} |")
    except Exception as e:
        print(f"| {v} | no result ({e}) | | | |")
print()
for name, level, text, nk, ni in texts:
    print(f"### {name}, {level} ({nk} kernels from ncu, {ni} timeline intervals; "
          f"SVG: `{name}-{level}.svg`)\n\n```\n{text}```\n")
log = os.path.join(out, "ctest-profile-gpu.log")
if os.path.exists(log):
    lines = [l for l in open(log).read().splitlines()
             if "overlap" in l or "profile" in l or "FAIL" in l or "Passed" in l or "Error" in l]
    print("## ctest problems_profile_gpu (timed all-reduce, overlap cases)\n\n```")
    print("\n".join(lines[-60:]))
    print("```")
PY
say "report: $OUT/profile-report.md"
# The device tool brings back a limited number of files: the big query list goes in a tarball.
gzip -f "$OUT/query-metrics.txt" 2>/dev/null
cat "$OUT/profile-report.md" | head -150
