#!/bin/sh
# The profile stage's plumbing on a CPU machine (docs/feedback.md, "Profiles"): a host problem
# (PKGYM_PROFILE_HOST_PROBLEMS=1) profiled at the full level with a stand-in for ncu
# (fixtures/profile/fake-ncu, PKGYM_NCU) that checks the options the stage passes and writes a
# hand-written ncu CSV log. Both profiler runs go through the sandbox and pk-runner's
# --profile-call; the timeline records nothing (no CUDA in a host problem), so the profile is
# `partial`, never a failure of the verdict; the metrics come from the CSV.
set -u
fix=$PK_SOURCE_DIR/tests/problems/fixtures/profile
sol=$PK_SOURCE_DIR/problems/selftest/allreduce/solutions/correct.cu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export PKGYM_NCU=$fix/fake-ncu PKGYM_SANDBOX_RO=$fix PKGYM_PROFILE_HOST_PROBLEMS=1
"$PKGYM" check --problem selftest/allreduce "$sol" --trials 1 --profile full \
    --profile-seconds 60 --profile-svg "$tmp/t.svg" --json >"$tmp/r.json" ||
    fail "pkgym check exited $?"
python3 - "$tmp/r.json" <<'PY' || fail "$(head -c 3000 "$tmp/r.json")"
import json, sys
r = json.load(open(sys.argv[1]))
p = r["profile"]
assert r["status"] == "correct" and r["has_timing"], (r["status"], r["reason"])
assert p["level"] == "full" and p["status"] == "partial", (p["status"], p["reason"])
assert p["reason"].startswith("timeline: "), p["reason"]
assert "metrics" not in p["reason"], p["reason"]  # the fake ncu accepted every option
raw = p["raw"]
assert raw["ncu_ok"] and not raw["trace_ok"] and len(raw["kernels"]) == 4, raw
assert raw["nvlink_measured"], raw
t = p["text"]
for needle in ("Profile (full, 2 ranks, one call):", "- slowest rank: 1,",
               "bound: memory (DRAM 64% of peak", "NVLink on rank 1", "- timeline: not recorded"):
    assert needle in t, (needle, t)
assert p["cost_s"] > 0, p
print("fake ncu: profile", p["status"], "in %.1f s;" % p["cost_s"], p["reason"])
print(t)
PY
grep -q "<svg" "$tmp/t.svg" || fail "no SVG written"
# The text form shows the profile's line and text after the verdict.
"$PKGYM" check --problem selftest/allreduce "$sol" --trials 1 --skip-timing --profile summary \
    --profile-seconds 60 >"$tmp/r.txt" || fail "pkgym check (text) exited $?"
grep -q "^profile: summary, partial: timeline: " "$tmp/r.txt" || fail "$(cat "$tmp/r.txt")"
grep -q "dominating kernel: " "$tmp/r.txt" || fail "$(cat "$tmp/r.txt")"
# An ncu that lists NVLink's counters but may not read them fails a whole run: the stage asks
# once more without them, and says why NVLink is not measured.
PKGYM_FAKE_NCU_NVLINK=1 "$PKGYM" check --problem selftest/allreduce "$sol" --trials 1 \
    --skip-timing --profile full --profile-seconds 60 --json >"$tmp/n.json" ||
    fail "pkgym check (NVLink refused) exited $?"
python3 - "$tmp/n.json" <<'PY' || fail "$(head -c 3000 "$tmp/n.json")"
import json, sys
p = json.load(open(sys.argv[1]))["profile"]
assert p["status"] == "partial" and "metrics" not in p["reason"], (p["status"], p["reason"])
raw = p["raw"]
assert raw["ncu_ok"] and raw["nvlink_inaccessible"] and len(raw["kernels"]) == 4, raw
print("fake ncu, NVLink refused: profile", p["status"], p["reason"])
PY
# `pkgym eval` (replay of the suite's own turns, an embedded server with a budget): the
# profiled turn's timeline is an SVG of the report, listed in report.md and report.json.
"$PKGYM" eval --policy replay:"$PK_SOURCE_DIR/rollout/replay" --problems selftest/allreduce \
    -G 1 -T 3 --options '{"profile":"full"}' --serve-arg=--profile-per-minute=10 \
    --out "$tmp/eval" --quiet || fail "pkgym eval exited $?"
grep -q "^| selftest/allreduce | 1 | 3 | partial | .* | \`profile-selftest_allreduce-t1-turn3.svg\` |$" \
    "$tmp/eval/report.md" || fail "report.md: $(tail -8 "$tmp/eval/report.md")"
grep -q "<svg" "$tmp/eval/profile-selftest_allreduce-t1-turn3.svg" || fail "no eval SVG"
python3 - "$tmp/eval/report.json" <<'PY' || fail "report.json"
import json, sys
turns = json.load(open(sys.argv[1]))["trajectories"][0]["turns"]
assert [t.get("profile", {}).get("status") for t in turns] == ["skipped", "skipped", "partial"], turns
assert turns[2]["profile"]["svg"] == "profile-selftest_allreduce-t1-turn3.svg", turns[2]
PY
echo "ok"
