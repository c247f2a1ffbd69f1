#!/usr/bin/env python3
"""The ported problems' table, from the results `scripts/gpu-pass suite` keeps
(PK_MANIFEST_SAVE_DIR: one `pkgym check --json` per manifest entry).

usage: table.py RESULTS_DIR [PROBLEMS_DIR]

One row per problem: its dims, the reference's median time, the roofline floor (what no kernel
can beat: docs/problems.md) and the reference's share of it, the correct solution's verdict,
time and speedup, and the wrong solution's verdict. A missing result says so."""
import glob
import json
import os
import sys

RESULTS = sys.argv[1]
PROBLEMS = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
    os.path.dirname(__file__), "..", "..", "problems")


def load(problem, name):
    path = os.path.join(RESULTS, "%s_%s.json" % (problem.replace("/", "_"), name))
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def main():
    rows = []
    for meta_path in sorted(glob.glob(os.path.join(PROBLEMS, "*", "*", "meta.json"))):
        with open(meta_path) as f:
            meta = json.load(f)
        if meta.get("device") != "gpu":
            continue
        problem = "/".join(meta_path.split(os.sep)[-3:-1])
        good, bad = load(problem, "correct"), load(problem, "wrong")
        if good is None and bad is None:
            continue
        dims = ", ".join("%s=%s" % kv for kv in meta.get("dims", {}).items())
        ref = good["reference"]["median_us"] if good and good.get("has_timing") else None
        cand = good["candidate"]["median_us"] if good and good.get("has_timing") else None
        floor = good.get("roofline_floor_us") if good else None
        rows.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            problem, dims,
            "%.1f" % ref if ref else "-",
            "%.1f" % floor if floor else "-",
            "%.0f%%" % (100 * floor / ref) if ref and floor else "-",
            good["status"] if good else "missing",
            "%.1f" % cand if cand else "-",
            "%.2f" % good["speedup"] if good and good.get("has_timing") else "-",
            bad["status"] if bad else "missing"))
    print("| problem | dims | reference us | roofline floor us | floor/reference | correct.cu "
          "| correct us | speedup | wrong.cu |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
