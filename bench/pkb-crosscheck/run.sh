#!/usr/bin/env bash
# Cross-checks one problem: dumps pkgym's inputs and reference outputs, then runs
# crosscheck.py under torchrun. Usage: run.sh PROBLEM [WORLD] [PKB_DIR]
#   PKGYM (default build/env/pkgym), DEVICE (cuda or cpu, default: cuda when a GPU is present),
#   XC_TIME_PKB (default 1: time PKB's solution() on a CUDA problem, crosscheck.py --time-pkb),
#   XC_REGIME (default iid: PKB's own inputs; all: every trial its secret regime, the
#   calibration of tolerances on them, with XC_TRIALS=5; or one regime's name)
set -euo pipefail
problem=$1 world=${2:-2} pkb=${3:-${PKB_DIR:-}}
here=$(cd "$(dirname "$0")" && pwd)
pkgym=${PKGYM:-$here/../../build/env/pkgym}
regime=${XC_REGIME:-iid}
regime_opt=$([ "$regime" = all ] || echo "--regime $regime")
dump=$(mktemp -d /tmp/pkb-xc.XXXXXX)
trap 'rm -rf "$dump"' EXIT
# Two trials (each a fresh draw) keep the dump of the larger problems to a few GiB.
"$pkgym" check --problem "$problem" --reference --skip-timing --world-size "$world" \
    --trials "${XC_TRIALS:-2}" $regime_opt --dump "$dump" --json >"$dump/check.json"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r["status"]=="correct" else "reference run: %s: %s" % (r["status"], r["reason"]))' "$dump/check.json"
dev=${DEVICE:-$([ -e /dev/nvidia0 ] && echo cuda || echo cpu)}
${TORCHRUN:-torchrun} --nproc-per-node "$world" --master-port "${XC_PORT:-29511}" \
    "$here/crosscheck.py" --dump "$dump" --device "$dev" ${pkb:+--pkb "$pkb"} \
    $([ "${XC_TIME_PKB:-1}" = 1 ] && echo --time-pkb)
