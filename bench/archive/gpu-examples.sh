#!/usr/bin/env bash
# Issue 31 on 2 GPUs: a replay-policy evaluation of the collectives and 8 ported PKB problems,
# without and then with archive examples (`pkgym eval --compare-examples`), on one embedded
# server whose archive is seeded from the suite's own solutions. Prints the side-by-side report
# and whether the examples reached every prompt of the `with` arm within its context budget
# (checked in the trajectory store: each stored prompt, its examples header, its length against
# the episode's budget_chars and budget_tokens).
#   bench/archive/gpu-examples.sh BUILD_DIR [RESULTS_FILE]
# BUILD_DIR: the built tree (build-gpu: pkgym at build-gpu/env/pkgym). G (2 trajectories per
# problem), EXAMPLES ('{"k":3,"mode":"alternate","scope":"other_problems"}'), PKB (the 8 ported
# problems), GPUS (0,1) size it. Exit 0 when the examples reached the prompts within budget,
# 1 when not, 77 without 2 GPUs.
set -euo pipefail
build=$(cd "${1:?usage: gpu-examples.sh BUILD_DIR [RESULTS_FILE]}" && pwd)
out=${2:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
pkgym=$build/env/pkgym
G=${G:-2}
examples=${EXAMPLES:-'{"k":3,"mode":"alternate","scope":"other_problems"}'}
pkb=${PKB:-"12_allgather_gemm 13_gemm_allreduce 16_gemm_reducescatter 18_tp_rms_norm 21_clip_grad_norm_no_ep 23_grad_acc_loss 40_ddp 73_vocab_parallel_cross_entropy_loss"}
gpus=${GPUS:-0,1}
n_gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
if [ "${n_gpus:-0}" -lt 2 ]; then
    echo "gpu-examples: needs 2 GPUs, found ${n_gpus:-0}: not run" >&2
    exit 77
fi
[ -x "$pkgym" ] || { echo "gpu-examples: no $pkgym (build it first)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/pk-bench-archive-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# The replay policy: the collectives' (make-collectives.sh) and the same three turns for each
# PKB problem: a compile error, wrong.cu, correct.cu.
"$src/rollout/replay/make-collectives.sh" "$tmp/replay" >/dev/null
problems=$(ls "$tmp/replay/collectives" | sed 's|^|collectives/|' | paste -sd,)
for name in $pkb; do
    dir=$src/problems/pkb/$name d=$tmp/replay/pkb/$name
    [ -f "$dir/solutions/correct.cu" ] && [ -f "$dir/solutions/wrong.cu" ] || {
        echo "gpu-examples: pkb/$name has no solutions/correct.cu and wrong.cu" >&2
        exit 2
    }
    mkdir -p "$d"
    response() { printf '%s\n\n```cuda\n' "$1"; cat "$2"; printf '```\n\nSummary: %s\n' "$3"; }
    sed 's/pk_ctx \*ctx/pkctx *ctx/' "$dir/solutions/correct.cu" >"$d/.turn1.cu"
    sed '1,/^[^/]/{/^\/\//d}' "$dir/solutions/wrong.cu" >"$d/.turn2.cu"
    response "A first fused kernel." "$d/.turn1.cu" "first attempt" >"$d/turn1.md"
    response "Fixed the type name in the entry point." "$d/.turn2.cu" "reworked" >"$d/turn2.md"
    response "Fixed the wrong values." "$dir/solutions/correct.cu" "the exchange, then the fused compute" >"$d/turn3.md"
    rm -f "$d/.turn1.cu" "$d/.turn2.cu"
    problems=$problems,pkb/$name
done

log=$tmp/results.md
cmd=("$pkgym" eval --policy "replay:$tmp/replay" --problems "$problems" -G "$G" -T 3
     --data-dir "$tmp/data" --out "$tmp/eval" --quiet --examples "$examples" --compare-examples
     --serve-arg --gpus --serve-arg "$gpus")
{
    echo "## archive examples, without and with (issue 31): $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "Device: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs), driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1), $(nproc) CPU cores; commit $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo
    echo "\$ pkgym archive seed --data-dir DATA"
    echo "\$ pkgym eval --policy replay:REPLAY --problems $problems -G $G -T 3 --examples '$examples' --compare-examples --serve-arg --gpus --serve-arg $gpus"
    echo
} >"$log"
"$pkgym" archive seed --data-dir "$tmp/data" 2>&1 | tee -a "$log"
set +e
"${cmd[@]}"
rc=$?
set -e
[ "$rc" -le 3 ] || { echo "gpu-examples: pkgym eval exited $rc" >&2; exit 1; }
cat "$tmp/eval/examples_compare.md" >>"$log"

# Did the examples reach the prompts, within the budget? Read back from the stores.
set +e
/usr/bin/python3 "$src/bench/archive/prompts_within_budget.py" "$tmp/data" "$tmp/eval" >>"$log"
verdict=$?
set -e
cat "$log"
[ -z "$out" ] || { cat "$log" >>"$out"; echo "appended to $out"; }
exit "$verdict"
