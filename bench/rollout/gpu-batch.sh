#!/usr/bin/env bash
# Rollout benchmark on the collectives (needs 2 GPUs): a batch of 64 concurrent episodes,
# 3 turns each (compile error, incorrect, correct: the replay built from the suite's
# solutions), straight into the scheduler + harness: fraction of time the GPUs are held by
# runs, steps/s, median step latency with a cold and then a warm compile cache.
#   bench/rollout/gpu-batch.sh BUILD_DIR [RESULTS_FILE]
# EPISODES (64), WARM_EPISODES (16), TURNS (3), TRIALS (1) size it; JOBS_PER_GPU and
# GPU_MEM_MB set the co-residency (default: the scheduler's); it prints one table.
set -euo pipefail
build=$(cd "${1:?usage: gpu-batch.sh BUILD_DIR [RESULTS_FILE]}" && pwd)
out=${2:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
episodes=${EPISODES:-64} warm=${WARM_EPISODES:-16} turns=${TURNS:-3} trials=${TRIALS:-1}
n_gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
if [ "${n_gpus:-0}" -lt 2 ]; then
    echo "gpu-batch: needs 2 GPUs, found ${n_gpus:-0}: not run" >&2
    exit 77
fi
gpus=$(seq -s, 0 $((n_gpus - 1)))
tmp=$(mktemp -d /tmp/pk-bench-gpu-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$src/rollout/replay/make-collectives.sh" "$tmp/replay" >/dev/null
# EXCLUDE="scatter gather": leave those collectives out of the batch.
for x in ${EXCLUDE:-}; do rm -rf "$tmp/replay/collectives/$x"; done
share=()
[ -z "${JOBS_PER_GPU:-}" ] || share+=(--jobs-per-gpu "$JOBS_PER_GPU")
[ -z "${GPU_MEM_MB:-}" ] || share+=(--gpu-mem-mb "$GPU_MEM_MB")
log=$tmp/results.md
{
    echo "## collectives GPU batch: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "Device: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs), driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1), $(nproc) CPU cores"
    echo
    echo "\$ bench_rollout --suite collectives --episodes $episodes --warm-episodes $warm --turns $turns --trials $trials --gpus $gpus ${share[*]}"
    echo
} >"$log"
cd "$src"
"$build/tests/rollout/bench_rollout" --replay "$tmp/replay" --cache-dir "$tmp/cache" \
    --suite collectives --episodes "$episodes" --warm-episodes "$warm" --turns "$turns" \
    --trials "$trials" --gpus "$gpus" "${share[@]}" | tee -a "$log"
[ -z "$out" ] || { cat "$log" >>"$out"; echo "appended to $out"; }
