#!/usr/bin/python3
"""Issue #26's cost on the GPU machine: a full `pkgym check` (compile, trials on the secret input
regimes, timing) of pkb/13 and pkb/73's correct example, with this tree and with the tree before
the regimes (OLD_PKGYM), interleaved, N each (env N, default 7). Target: median wall ratio <= 1.05.

usage: regime-cost.py OLD_PKGYM   (env PKGYM: this tree's pkgym)
Prints Markdown: one row per problem and tree with the median wall and stage times, then the
ratios. Exit 1 when a check is not `correct`.
"""
import json
import os
import statistics
import subprocess
import sys
import time

PROBLEMS = ("pkb/13_gemm_allreduce", "pkb/73_vocab_parallel_cross_entropy_loss")
STAGES = ("run_ms", "run_setup_ms", "run_check_ms", "run_timing_ms", "run_verify_ms", "total_ms")


def check(pkgym, problem):
    t0 = time.time()
    p = subprocess.run([pkgym, "check", "--json", "--problem", problem,
                        "problems/%s/solutions/correct.cu" % problem],
                       capture_output=True, text=True, timeout=300)
    wall = time.time() - t0
    try:
        r = json.loads(p.stdout)
    except ValueError:
        sys.exit("%s: no JSON (exit %d): %s" % (pkgym, p.returncode, p.stderr[-400:]))
    if r.get("status") != "correct":
        sys.exit("%s %s: %s %s" % (pkgym, problem, r.get("status"), r.get("reason", "")[:300]))
    return r, wall


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    trees = (("this tree", os.environ.get("PKGYM", "build-gpu/env/pkgym")), ("before", sys.argv[1]))
    n = int(os.environ.get("N", "7"))
    print("| problem | tree | median wall s | walls s | " + " | ".join(STAGES) + " |")
    print("|---|---|---|---|" + "---|" * len(STAGES))
    ratios = []
    for problem in PROBLEMS:
        walls = {t: [] for t, _ in trees}
        stages = {t: [] for t, _ in trees}
        for _ in range(n):  # interleaved, so the machine's drift hits both trees alike
            for name, pkgym in trees:
                r, wall = check(pkgym, problem)
                walls[name].append(wall)
                stages[name].append(r.get("stages", {}))
        for name, _ in trees:
            meds = []
            for k in STAGES:
                xs = [s[k] for s in stages[name] if s.get(k) is not None]
                meds.append("%.0f" % statistics.median(xs) if xs else "-")
            print("| %s | %s | %.3f | %s | %s |" % (
                problem, name, statistics.median(walls[name]),
                " ".join("%.2f" % w for w in walls[name]), " | ".join(meds)))
        ratio = statistics.median(walls["this tree"]) / statistics.median(walls["before"])
        ratios.append((problem, ratio))
    print()
    for problem, ratio in ratios:
        print("%s: median wall, this tree / before = %.4f (target <= 1.05): %s" % (
            problem, ratio, "yes" if ratio <= 1.05 else "NO"))


if __name__ == "__main__":
    main()
