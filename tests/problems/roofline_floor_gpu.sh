#!/bin/sh
# The roofline floor rejects a time below the physical lower bound: with peaks 1000x too low
# for this GPU, the correct all-reduce looks impossibly fast and must be rejected.
[ -e /dev/nvidia0 ] || { echo "no GPU: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/hw.json" <<'JSON'
{"gpus": [{"match": "NVIDIA", "bf16_tflops": 0.989, "hbm_tbps": 0.0048, "nvlink_gbps": 0.478}]}
JSON
out=$(PKGYM_HARDWARE_JSON=$tmp/hw.json "$PKGYM" check --problem collectives/allreduce \
      "$PK_SOURCE_DIR/problems/collectives/allreduce/solutions/correct.cu" --trials 1 --json)
echo "$out" | grep -q '"status":"rejected"' && echo "$out" | grep -q '"rule":"roofline_floor"' || {
    echo "FAIL: expected rejected/roofline_floor: $(echo "$out" | head -c 600)"
    exit 1
}
out=$("$PKGYM" check --problem collectives/allreduce \
      "$PK_SOURCE_DIR/problems/collectives/allreduce/solutions/correct.cu" --trials 1 --json)
echo "$out" | grep -q '"status":"correct"' || { echo "FAIL: real peaks: $(echo "$out" | head -c 600)"; exit 1; }
echo "roofline floor: ok"
