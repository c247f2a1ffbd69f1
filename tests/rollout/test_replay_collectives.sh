#!/usr/bin/env bash
# rollout/replay/make-collectives.sh builds, for every collective with test solutions, the
# three demo turns: the code of turn 3 is correct.cu byte for byte, turn 2 is wrong.cu's code,
# turn 1 is correct.cu with the entry point's parameter type misspelt (and nothing else).
set -euo pipefail
: "${PK_SOURCE_DIR:?}"
tmp=$(mktemp -d /tmp/pk-test-replay-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$PK_SOURCE_DIR/rollout/replay/make-collectives.sh" "$tmp" >/dev/null
/usr/bin/python3 - "$PK_SOURCE_DIR" "$tmp" <<'PY'
import glob, os, re, sys
src, out = sys.argv[1], sys.argv[2]
def code(path):
    blocks = re.findall(r"```cuda\n(.*?)```", open(path).read(), re.S)
    assert len(blocks) == 1, path
    return blocks[0]
names = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
               for p in glob.glob(src + "/problems/collectives/*/solutions/correct.cu"))
assert names, "no collectives with solutions"
made = sorted(os.listdir(out + "/collectives"))
assert made == names, (made, names)
for n in names:
    sol = src + "/problems/collectives/%s/solutions/" % n
    d = out + "/collectives/" + n
    correct = open(sol + "correct.cu").read()
    assert code(d + "/turn3.md") == correct, n
    t1 = code(d + "/turn1.md")
    assert "const pkctx *ctx" in t1 and t1.replace("const pkctx *ctx", "const pk_ctx *ctx") == correct, n
    wrong = open(sol + "wrong.cu").read()
    t2 = code(d + "/turn2.md")
    assert wrong.endswith(t2) and not t2.startswith("//"), n
print("replay for %d collectives ok" % len(names))
PY
