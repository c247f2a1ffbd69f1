#!/usr/bin/python3
"""Harness acceptance measurements on the GPU machine (see docs/problems.md).

usage: measure.py OUT.md [PROBLEM] [SOLUTION]
Runs `pkgym check --json` (env PKGYM) and writes a Markdown table of:
  - launcher cost: fork vs mpi (run_setup_ms = process launch + CUDA/NCCL init + arena)
  - 10 evaluations of one submission: speedup median and CV, per-stage split
  - the reference timed against itself: speedup per run (1.00 +- 0.03 expected)
  - per-step overhead beyond compile and measured GPU work
"""
import json
import os
import statistics
import subprocess
import sys
import time

PKGYM = os.environ["PKGYM"]
SRC = os.environ.get("PK_SOURCE_DIR", ".")


def check(args):
    t0 = time.time()
    p = subprocess.run([PKGYM, "check", "--json", "--timeout-ms", "30000"] + args,
                       capture_output=True, text=True, timeout=120)
    wall = time.time() - t0
    if p.returncode != 0:
        return {"status": "harness_failure", "reason": p.stderr[-300:]}, wall
    return json.loads(p.stdout), wall


def cv(xs):
    return statistics.pstdev(xs) / statistics.mean(xs) if len(xs) > 1 else 0.0


def main():
    out = sys.argv[1]
    problem = sys.argv[2] if len(sys.argv) > 2 else "collectives/allreduce"
    sol = sys.argv[3] if len(sys.argv) > 3 else os.path.join(
        SRC, "problems", problem, "solutions", "correct.cu")
    lines = ["# Harness measurements", "",
             "Date: %s UTC. Device: %s. Problem %s, submission `%s`." % (
                 time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                 subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                capture_output=True, text=True).stdout.strip().replace("\n", ", "),
                 problem, os.path.relpath(sol, SRC)),
             "Command: `bench/harness/measure.py` through `scripts/gpu-test`.", ""]

    lines += ["## Launchers (3 runs each, 1 trial, no timing)", "",
              "| launcher | status | run_setup_ms (median) | run_ms (median) | check wall s |",
              "|---|---|---|---|---|"]
    for launcher in ("fork", "mpi"):
        runs = [check(["--problem", problem, sol, "--launcher", launcher, "--trials", "1",
                       "--skip-timing"]) for _ in range(3)]
        st = ",".join(sorted({r["status"] for r, _ in runs}))
        ok = [r for r, _ in runs if "stages" in r]
        setup = statistics.median(r["stages"]["run_setup_ms"] for r in ok) if ok else 0
        run = statistics.median(r["stages"]["run_ms"] for r in ok) if ok else 0
        lines.append("| %s | %s | %.0f | %.0f | %.2f |" % (
            launcher, st, setup, run, statistics.median(w for _, w in runs)))
        if not ok or st != "correct":
            lines.append("")
            lines.append("`%s` failure: %s" % (launcher, runs[0][0].get("reason", "")))

    lines += ["", "## 10 evaluations of the same submission (full check: compile, 5 trials, "
              "timing of both)", "",
              "| # | status | speedup | cand us | cand cv | ref us | ref cv | compile ms | "
              "setup ms | check ms | timing ms | total ms | wall s |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    evals = []
    for i in range(10):
        r, wall = check(["--problem", problem, sol])
        if "stages" not in r:
            lines.append("| %d | %s | | | | | | | | | | | %.2f |" % (i, r["status"], wall))
            continue
        s = r["stages"]
        evals.append((r, wall))
        lines.append("| %d | %s | %.4f | %.2f | %.4f | %.2f | %.4f | %.0f | %.0f | %.0f | %.0f | "
                     "%.0f | %.2f |" % (
                         i, r["status"], r["speedup"], r["candidate"]["median_us"],
                         r["candidate"]["cv"], r["reference"]["median_us"],
                         r["reference"]["cv"], s["compile_ms"], s["run_setup_ms"],
                         s["run_check_ms"], s["run_timing_ms"], s["total_ms"], wall))
    timed = [r for r, _ in evals if r.get("has_timing")]
    if timed:
        sp = [r["speedup"] for r in timed]
        over = [r["stages"]["total_ms"] - r["stages"]["compile_ms"] - r["stages"]["run_check_ms"]
                - r["stages"]["run_timing_ms"] for r in timed]
        lines += ["", "- speedup: median %.4f, CV %.2f%% over %d runs (target CV <= 2%% for "
                  "kernels >= 50 us; candidate median %.1f us)" % (
                      statistics.median(sp), 100 * cv(sp), len(sp),
                      statistics.median(r["candidate"]["median_us"] for r in timed)),
                  "- full check wall: median %.2f s (target <= 6 s)" % statistics.median(
                      w for _, w in evals),
                  "- overhead beyond compile and measured GPU work (prepare + symbols + process "
                  "launch + CUDA/NCCL init + arena): median %.0f ms (target <= 1000 ms)" %
                  statistics.median(over)]

    lines += ["", "## Reference against itself (5 runs, no compile)", "",
              "| # | status | speedup | ref us | ref cv | total ms |", "|---|---|---|---|---|---|"]
    selfs = []
    for i in range(5):
        r, wall = check(["--problem", problem, "--reference"])
        if r.get("has_timing"):
            selfs.append(r["speedup"])
            lines.append("| %d | %s | %.4f | %.2f | %.4f | %.0f |" % (
                i, r["status"], r["speedup"], r["reference"]["median_us"], r["reference"]["cv"],
                r["stages"]["total_ms"]))
        else:
            lines.append("| %d | %s | | | | |" % (i, r["status"]))
    if selfs:
        lines += ["", "- reference/reference speedup: min %.4f, max %.4f (target 1.00 +- 0.03)" % (
            min(selfs), max(selfs))]
    text = "\n".join(lines) + "\n"
    with open(out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
