#!/usr/bin/env bash
# `pkgym eval` end to end on the selftest suite (host ranks over MPI, no GPU):
#  1. embedded server, the shipped replay policy, 2 problems x G=2 x T=3: every turn's status is the one
#     its response was written for, and the report (JSON, Markdown, SVG) holds the metrics;
#  2. a running server (--server) and a cmd: policy;
#  3. bad usage exits 2.
set -euo pipefail
: "${PKGYM:?}" "${PK_SOURCE_DIR:?}"
PY=/usr/bin/python3
tmp=$(mktemp -d /tmp/pk-test-eval-XXXXXX)
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
opts='{"stop_on_correct": false, "check": {"trials": 2}}'

# 1. Embedded server, replay policy.
"$PKGYM" eval --policy "replay:$PK_SOURCE_DIR/rollout/replay" \
    --problems selftest/scale,selftest/allreduce \
    -G 2 -T 3 --options "$opts" --out "$tmp/r1" --quiet \
    --serve-arg --gpus --serve-arg none --serve-arg --compile-workers --serve-arg 1 \
    || fail "eval (replay) exited $?"
"$PY" - "$tmp/r1" <<'PYEOF' || fail "replay report"
import json, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
r = json.load(open(d + "/report.json"))
want = {1: ["compile_error", "incorrect", "correct"], 2: ["compile_error", "incorrect", "correct"]}
seen = set()
for t in r["trajectories"]:
    got = [x["status"] for x in t["turns"]]
    exp = want[t["trajectory"]]
    if t["problem"] == "selftest/scale" and t["trajectory"] == 2:
        exp = ["correct", "incorrect", "correct"]  # traj2/turn1.md overrides turn1.md
    assert got == exp, (t["problem"], t["trajectory"], got, exp)
    assert t["error"] is None, t["error"]
    assert len(t["returns"]) == 3, t
    seen.add((t["problem"], t["trajectory"]))
assert len(seen) == 4, seen
probs = {p["id"]: p for p in r["problems"]}
assert set(probs) == {"selftest/allreduce", "selftest/scale"}, probs
for p in probs.values():
    assert p["trajectories"] == 2 and p["correct"] == 2, p
    assert p["pass@k"]["1"] == 1.0 and p["pass@k"]["2"] == 1.0, p
    assert p["best_speedup"] > 0 and p["best@k"]["2"] >= p["avg@k"]["2"] > 0, p
    assert p["turn_status_counts"]["correct"] >= 2, p
bsf = r["overall"]["best_so_far_by_turn"]
assert len(bsf) == 3 and bsf[0] > 0 and bsf[0] <= bsf[1] <= bsf[2], bsf  # scale traj2 at turn 1
assert r["steps"] == 12 and r["overall"]["errors"] == 0, r["steps"]
md = open(d + "/report.md").read()
assert "| selftest/scale | 2 | 100% |" in md, md
svg = ET.parse(d + "/turn_scaling.svg").getroot()
lines = [e for e in svg.iter() if e.tag.endswith("polyline")]
assert len(lines) == 3, len(lines)  # 2 problems and the mean
print("replay report ok")
PYEOF

# 2. A running server and a cmd: policy.
sock="ipc://$tmp/serve.sock"
"$PKGYM" serve --bind "$sock" --gpus none --compile-workers 1 --data-dir "$tmp/data" \
    >"$tmp/serve.log" 2>&1 &
server_pid=$!
PK_SOURCE_DIR="$PK_SOURCE_DIR" "$PKGYM" eval --server "$sock" \
    --policy "cmd:$PY $PK_SOURCE_DIR/tests/rollout/eval_policy.py" --problems selftest/scale \
    -G 1 -T 2 --options "$opts" --out "$tmp/r2" --quiet \
    || { cat "$tmp/serve.log" >&2; fail "eval (cmd) exited $?"; }
"$PY" - "$tmp/r2" <<'PYEOF' || fail "cmd report"
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
(t,) = r["trajectories"]
assert [x["status"] for x in t["turns"]] == ["correct", "format_error"], t
assert t["turns"][0]["reward"] > 0 and t["turns"][1]["reward"] == 0, t
print("cmd report ok")
PYEOF

# 3. Bad usage.
set +e
"$PKGYM" eval --problems all >/dev/null 2>&1; [ $? -eq 2 ] || fail "no --policy: want exit 2"
"$PKGYM" eval --server "$sock" --policy "replay:$PK_SOURCE_DIR/rollout/replay" \
    --problems selftest/nope --quiet 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "no problem 'selftest/nope'" "$tmp/err" || fail "unknown problem"
echo "ok"
