#!/usr/bin/env python3
"""The ported problems' table, from the results `scripts/gpu-pass suite` keeps
(PK_MANIFEST_SAVE_DIR: one `pkgym check --json` per manifest entry).

usage: table.py RESULTS_DIR [PROBLEMS_DIR] [--crosscheck FILE ...]

One row per problem: its dims, the reference's median time, the roofline floor (what no kernel
can beat: docs/problems.md) and the reference's share of it, the correct solution's verdict,
time and speedup, and the wrong solution's verdict. A missing result says so.

With the cross-check's reports (bench/pkb-crosscheck/crosscheck.py --time-pkb), two more
columns: PKB's own PyTorch solution() timed the same way (pkb_us: median per-call time, slowest
rank per call) and reference / PKB, above 1 where pkgym's native reference is the slower one (a
possible strawman). The reports are RESULTS_DIR/crosscheck.jsonl when it exists (scripts/gpu-pass
puts them there) and every --crosscheck FILE: one JSON object a line, or the log of
gpu-crosscheck.sh (its JSON objects among other lines). A later report of a problem replaces an
earlier one."""
import argparse
import glob
import json
import os
import sys


def load(results, problem, name):
    path = os.path.join(results, "%s_%s.json" % (problem.replace("/", "_"), name))
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def crosscheck_reports(paths):
    """{problem: report} from the cross-check's output files: every JSON object that starts a
    line and has a "problem" key (lines that are not JSON, such as torchrun's warnings, are
    skipped)."""
    reports = {}
    dec = json.JSONDecoder()
    for path in paths:
        with open(path) as f:
            text = f.read()
        pos = 0
        while True:
            at = text.find("{", pos)
            if at < 0:
                break
            if at > 0 and text[at - 1] != "\n":  # only objects that start a line
                pos = at + 1
                continue
            try:
                obj, end = dec.raw_decode(text, at)
            except ValueError:
                pos = at + 1
                continue
            if isinstance(obj, dict) and "problem" in obj:
                reports[obj["problem"]] = obj
            pos = end
    return reports


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", metavar="RESULTS_DIR")
    ap.add_argument("problems", metavar="PROBLEMS_DIR", nargs="?", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "problems"))
    ap.add_argument("--crosscheck", action="append", default=[], metavar="FILE",
                    help="the cross-check's reports (crosscheck.py --report, or its log)")
    args = ap.parse_args()
    paths = [os.path.join(args.results, "crosscheck.jsonl")]
    paths = [p for p in paths if os.path.exists(p)] + args.crosscheck
    xc = crosscheck_reports(paths)
    pkb_cols = bool(paths)
    rows = []
    for meta_path in sorted(glob.glob(os.path.join(args.problems, "*", "*", "meta.json"))):
        with open(meta_path) as f:
            meta = json.load(f)
        if meta.get("device") != "gpu":
            continue
        problem = "/".join(meta_path.split(os.sep)[-3:-1])
        good, bad = load(args.results, problem, "correct"), load(args.results, problem, "wrong")
        if good is None and bad is None:
            continue
        dims = ", ".join("%s=%s" % kv for kv in meta.get("dims", {}).items())
        ref = good["reference"]["median_us"] if good and good.get("has_timing") else None
        cand = good["candidate"]["median_us"] if good and good.get("has_timing") else None
        floor = good.get("roofline_floor_us") if good else None
        cells = [
            problem, dims,
            "%.1f" % ref if ref else "-",
            "%.1f" % floor if floor else "-",
            "%.0f%%" % (100 * floor / ref) if ref and floor else "-",
            good["status"] if good else "missing",
            "%.1f" % cand if cand else "-",
            "%.2f" % good["speedup"] if good and good.get("has_timing") else "-",
            bad["status"] if bad else "missing"]
        if pkb_cols:
            pkb = xc.get(problem, {}).get("pkb_us")
            cells += ["%.1f" % pkb if pkb else "-", "%.2f" % (ref / pkb) if ref and pkb else "-"]
        rows.append("| %s |" % " | ".join(cells))
    head = ["problem", "dims", "reference us", "roofline floor us", "floor/reference",
            "correct.cu", "correct us", "speedup", "wrong.cu"]
    if pkb_cols:
        head += ["PKB PyTorch us", "reference / PKB"]
    print("| %s |" % " | ".join(head))
    print("|%s" % ("---|" * len(head)))
    print("\n".join(rows))
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
