#!/bin/sh
# The rooflines on the GPU (docs/problems.md, "Roofline"):
#  1. with peaks 1000x too low for this GPU, the correct all-reduce looks impossibly fast and
#     is rejected (rule roofline_floor);
#  2. with the real peaks it is correct, and the result, `pkgym check` and the feedback name
#     both figures: the roofline floor and the no-overlap roofline;
#  3. `pkgym eval` (replay of the suite's own turns) reports both for the problem.
[ -e /dev/nvidia0 ] || { echo "no GPU: skipped"; exit 77; }
# The all-reduce needs 2 GPUs (one per rank): on fewer it could only fail at set-up.
[ "$(ls /proc/driver/nvidia/gpus 2>/dev/null | wc -l)" -ge 2 ] || { echo "needs 2 GPUs: skipped"; exit 77; }
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
sol=$PK_SOURCE_DIR/problems/collectives/allreduce/solutions/correct.cu
cat >"$tmp/hw.json" <<'JSON'
{"gpus": [{"match": "NVIDIA", "hbm_tbps": 0.0048, "nvlink_gbps": 0.478,
  "tflops": {"bf16": 0.9894, "fp16": 0.9894, "fp8": 1.9789, "tf32": 0.4947, "fp32": 0.0669}}]}
JSON
out=$(PKGYM_HARDWARE_JSON=$tmp/hw.json "$PKGYM" check --problem collectives/allreduce "$sol" \
      --trials 1 --json)
echo "$out" | grep -q '"status":"rejected"' && echo "$out" | grep -q '"rule":"roofline_floor"' ||
    fail "expected rejected/roofline_floor: $(echo "$out" | head -c 600)"

"$PKGYM" check --problem collectives/allreduce "$sol" --trials 1 --json >"$tmp/real.json" ||
    fail "pkgym check --json exited $?"
/usr/bin/python3 - "$tmp/real.json" <<'PY' || fail "real peaks: $(head -c 600 "$tmp/real.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == "correct", r["status"]
floor, no_overlap = r["roofline_floor_us"], r["roofline_no_overlap_us"]
# One phase: the two agree. 32 Mi bf16 at 2 ranks: 2*n bytes per direction over NVLink.
assert floor > 0 and abs(floor - no_overlap) < 1e-6 * floor, (floor, no_overlap)
assert r["candidate"]["median_us"] >= 0.9 * floor, (r["candidate"], floor)
(chk,) = [c for c in r["checks"] if c["name"] == "roofline_floor"]
assert chk["passed"] and "roofline floor" in chk["detail"] and "no-overlap" in chk["detail"], chk
print("check --json: floor %.1f us, no-overlap %.1f us, median %.1f us"
      % (floor, no_overlap, r["candidate"]["median_us"]))
PY
"$PKGYM" check --problem collectives/allreduce "$sol" --trials 1 >"$tmp/real.txt" ||
    fail "pkgym check exited $?"
grep -q '^roofline: floor .* us (perfect overlap; no kernel can beat it), no-overlap .* us' \
    "$tmp/real.txt" || fail "pkgym check prints no rooflines: $(cat "$tmp/real.txt")"

"$PK_SOURCE_DIR/rollout/replay/make-collectives.sh" "$tmp/replay" >/dev/null
"$PKGYM" eval --policy "replay:$tmp/replay" --problems collectives/allreduce -G 1 -T 3 \
    --options '{"check": {"trials": 1}}' --out "$tmp/eval" --quiet || fail "pkgym eval exited $?"
/usr/bin/python3 - "$tmp/eval" <<'PY' || fail "eval report"
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/report.json"))
(p,) = r["problems"]
rl = p["roofline"]
assert rl and rl["floor_us"] > 0 and rl["no_overlap_us"] > 0 and rl["best_time_us"] > 0, p
md = open(d + "/report.md").read()
assert "| collectives/allreduce |" in md and "roofline floor" in md and "no-overlap" in md, md
print("eval report: best %.1f us = %.0f%% of the no-overlap roofline, %.0f%% of the floor"
      % (rl["best_time_us"], rl["best_percent_of_no_overlap"], rl["best_percent_of_floor"]))
PY
echo "rooflines: ok"
