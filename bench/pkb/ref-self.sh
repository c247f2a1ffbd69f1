#!/usr/bin/env bash
# The reference timed against itself, for every GPU problem (issue #14: 1.00 +- 0.03), on the
# GPU machine. For each problem: REPS x `pkgym check --reference --json` (both sides timed now,
# no cache), REF_JOBS problems at a time (timing holds the GPUs alone through the per-GPU locks;
# set-up and trials overlap). Prints one markdown row per problem: every speedup, the worst
# distance from 1, and whether it is within the bound. Exit 1 when any is outside or failed.
#   bench/pkb/ref-self.sh [REGEX]     (default: every gpu problem; REPS=2 REF_JOBS=4 BOUND=0.03)
# REF_KEEP=DIR keeps every check's result JSON there (e.g. for bench/harness/timing_budget.py).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pkgym=${PKGYM:-$root/build-gpu/env/pkgym}
reps=${REPS:-2}
bound=${BOUND:-0.03}
work=$(mktemp -d /tmp/pk-refself.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$pkgym" problems list | awk '$2 == "gpu" { print $1 }' | grep -E "${1:-.}" >"$work/list"
[ -s "$work/list" ] || { echo "no problem matches" >&2; exit 2; }
one() { # problem -> speedups, one per line, or FAIL:<status>
    local p=$1 f="$work/${1//\//_}"
    for i in $(seq "$reps"); do
        "$pkgym" check --problem "$p" --reference --json >"$f.$i.json" 2>"$f.$i.err"
        python3 - "$f.$i.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("FAIL:no-json"); sys.exit()
ok = r.get("status") == "correct" and r.get("has_timing")
print("%.4f %.4f" % (r["speedup"], max(r["candidate"]["cv"], r["reference"]["cv"])) if ok
      else "FAIL:%s" % r.get("status"))
PY
    done >"$f.out"
    echo "$p done: $(tr '\n' ' ' <"$f.out")" >&2
}
export -f one; export pkgym reps work
xargs -P "${REF_JOBS:-4}" -I{} bash -c 'one {}' <"$work/list"
echo "| problem | speedups (reference / reference) | max abs(s - 1) | max CV of the timed calls | within $bound |"
echo "|---|---|---|---|---|"
rc=0
while read -r p; do
    f="$work/${p//\//_}.out"
    row=$(python3 - "$f" "$bound" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines() if sys.argv[1] else []
bad = [v for v in lines if v.startswith("FAIL")]
pairs = [[float(x) for x in v.split()] for v in lines if not v.startswith("FAIL")]
nums = [p[0] for p in pairs]
dev = max((abs(x - 1) for x in nums), default=float("nan"))
ok = not bad and nums and dev <= float(sys.argv[2])
print("%s | %s | %s | %s" % (" ".join(["%.4f" % x for x in nums] + bad) or "none",
                             "%.4f" % dev if nums else "-",
                             "%.1f%%" % (100 * max(p[1] for p in pairs)) if pairs else "-",
                             "yes" if ok else "**NO**"))
PY
)
    echo "| $p | $row |"
    case "$row" in *NO*) rc=1 ;; esac
done <"$work/list"
if [ -n "${REF_KEEP:-}" ]; then
    mkdir -p "$REF_KEEP" && cp "$work"/*.json "$REF_KEEP"/
fi
exit $rc
