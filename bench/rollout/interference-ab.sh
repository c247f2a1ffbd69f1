#!/usr/bin/env bash
# What disturbs timing under sharing (issue #13; GPU machine)? The reference timed against
# itself for every GPU problem, REF_JOBS (4) problems at a time, under three lock settings,
# interleaved over ROUNDS (2) rounds so that drift hits all three alike:
#   none:  PKGYM_LOCK_SETUP=0                    (set-up and exit overlap other jobs' timing)
#   setup: the default                           (CUDA/NCCL set-up under the shared locks)
#   both:  PKGYM_LOCK_EXIT=1                     (set-up and the ranks' exit under them)
# Each prints bench/pkb/ref-self.sh's table into $OUT/ab-<variant>-<round>.md, then a summary:
# per variant, how many problems stayed within 1.00 +- BOUND and the worst distance.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OUT=${OUT:-$root/build-gpu-logs/interference-ab}
mkdir -p "$OUT"
for round in $(seq "${ROUNDS:-2}"); do
    for v in none setup both; do
        case $v in
        none) envs="PKGYM_LOCK_SETUP=0 PKGYM_LOCK_EXIT=0" ;;
        setup) envs="PKGYM_LOCK_EXIT=0" ;;
        both) envs="PKGYM_LOCK_EXIT=1" ;;
        esac
        echo "[$(date +%T)] round $round, $v"
        env $envs REPS=1 bash "$root/bench/pkb/ref-self.sh" ${REGEX:-} >"$OUT/ab-$v-$round.md" \
            2>"$OUT/ab-$v-$round.log"
    done
done
python3 - "$OUT" "${BOUND:-0.03}" <<'PY'
import glob, os, re, sys
out, bound = sys.argv[1], float(sys.argv[2])
print("| locks held during | checks | within 1.00 +- %g | worst abs(s - 1) | median max CV |" % bound)
print("|---|---|---|---|---|")
names = {"none": "trials (old)", "setup": "trials, set-up (default)", "both": "trials, set-up, exit"}
for v in ("none", "setup", "both"):
    devs, cvs, fails = [], [], 0
    for f in sorted(glob.glob(os.path.join(out, "ab-%s-*.md" % v))):
        for line in open(f):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 5 or not re.match(r"^[a-z]", cells[0]) or cells[0] == "problem":
                continue
            for x in cells[1].split():
                if x.startswith("FAIL"):
                    fails += 1
                else:
                    devs.append(abs(float(x) - 1))
            if cells[3].endswith("%"):
                cvs.append(float(cells[3][:-1]))
    n = len(devs) + fails
    within = sum(d <= bound for d in devs)
    cvs.sort()
    print("| %s | %d | %d (%d failed) | %s | %s |" % (
        names[v], n, within, fails, "%.4f" % max(devs) if devs else "-",
        "%.1f%%" % cvs[len(cvs) // 2] if cvs else "-"))
PY
