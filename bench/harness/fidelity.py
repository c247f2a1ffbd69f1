#!/usr/bin/python3
"""Issue #12 acceptance on the GPU machine: honest kernels unchanged, and the cost of the
verification of timed calls, guard zones and the syscall scan.

usage: fidelity.py OLD_PKGYM   (env PKGYM: this tree's pkgym; OLD_PKGYM: the tree before #12)
Prints, as Markdown:
  - 10 full checks of collectives/allreduce correct.cu: speedup median and CV, candidate and
    reference medians, timed calls verified;
  - 5 checks of the reference timed against itself (1.00 +- 0.02 expected);
  - the wall time of a full `pkgym check` (compile, trials, timing) with this tree (as shipped,
    and with the runner's old CUDA/NCCL teardown) and the old one, interleaved, 5 each, and the
    ratios (target: at most 1.05).
"""
import json
import os
import statistics
import subprocess
import sys
import time

PKGYM = os.environ["PKGYM"]
OLD = sys.argv[1] if len(sys.argv) > 1 else None
SOL = "problems/collectives/allreduce/solutions/correct.cu"


def check(pkgym, *args, env=None):
    t0 = time.time()
    p = subprocess.run([pkgym, "check", "--json", "--problem", "collectives/allreduce"] +
                       list(args), capture_output=True, text=True, timeout=180,
                       env=dict(os.environ, **(env or {})))
    wall = time.time() - t0
    if p.returncode != 0:
        sys.exit("pkgym check failed: " + p.stderr[-400:])
    return json.loads(p.stdout), wall


def cv(xs):
    return statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 else 0.0


def main():
    rows, speedups = [], []
    for i in range(10):
        r, wall = check(PKGYM, SOL)
        verified = [c["detail"] for c in r["checks"] if c["name"] == "timing.outputs_verified"]
        rows.append("| %d | %s | %.3f | %.1f | %.1f | %.4f | %d | %.2f |" % (
            i + 1, r["status"], r["speedup"], r["candidate"]["median_us"],
            r["reference"]["median_us"], r["candidate"]["cv"], r["candidate"]["iters"], wall))
        if r["status"] == "correct":
            speedups.append(r["speedup"])
        if verified != ["ok"]:
            print("UNEXPECTED timing.outputs_verified:", verified)
    print("## 10 checks of collectives/allreduce correct.cu\n")
    print("| # | status | speedup | candidate us | reference us | candidate cv | timed calls | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("\nspeedup median %.4f, CV %.3f%% (target <= 1%%), %d/10 correct\n" % (
        statistics.median(speedups), 100 * cv(speedups), len(speedups)))
    self_speedups = []
    for i in range(5):
        r, _ = check(PKGYM, "--reference")
        self_speedups.append(r["speedup"])
    print("## The reference timed against itself (5 checks)\n")
    print(" ".join("%.4f" % s for s in self_speedups),
          "-> min %.4f max %.4f (target 1.00 +- 0.02)\n" % (min(self_speedups),
                                                           max(self_speedups)))
    if not OLD:
        return
    # Three trees interleaved (ABCABC...): this one as shipped (the runner exits without
    # tearing CUDA and NCCL down, #13), this one with the old teardown (like for like with the
    # old tree: the cost of #12's checks alone), and the tree before #12.
    variants = (("new", PKGYM, {}), ("new, teardown", PKGYM, {"PKGYM_RUNNER_TEARDOWN": "1"}),
                ("old", OLD, {}))
    walls = {v[0]: [] for v in variants}
    stages = {v[0]: [] for v in variants}
    for i in range(5):
        for name, pkgym, env in variants:
            r, wall = check(pkgym, SOL, env=env)
            walls[name].append(wall)
            stages[name].append(r["stages"])
    print("## Cost: full `pkgym check` wall time, this tree vs the tree before #12 (interleaved, 5 each)\n")
    print("| tree | median wall s | run ms | setup ms | check ms | timing ms | verify ms | teardown ms | total ms |")
    print("|---|---|---|---|---|---|---|---|---|")

    def med(name, key):
        xs = [s.get(key) for s in stages[name] if s.get(key) is not None]
        return "%.0f" % statistics.median(xs) if xs else "-"
    for name, _, _ in variants:
        print("| %s | %.3f | %s |" % (name, statistics.median(walls[name]), " | ".join(
            med(name, k) for k in ("run_ms", "run_setup_ms", "run_check_ms", "run_timing_ms",
                                   "run_verify_ms", "run_teardown_ms", "total_ms"))))
    old_wall = statistics.median(walls["old"])
    print("\nratio of median wall to the old tree's: teardown like for like %.4f, as shipped %.4f "
          "(target <= 1.05)" % (statistics.median(walls["new, teardown"]) / old_wall,
                                statistics.median(walls["new"]) / old_wall))

if __name__ == "__main__":
    main()
