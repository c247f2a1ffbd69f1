#!/usr/bin/python3
"""How close honest timing phases come to their budget (docs/problems.md, "Phase budgets").

usage: timing_budget.py DIR...   (result JSONs, e.g. PK_MANIFEST_SAVE_DIR of run_manifest.py)

For every timed result: timing's exclusive hold of the GPU locks (stages.run_timing_hold_ms:
what the budget bounds; run_timing_ms adds the wait for the locks and the post-timing check),
the runner's estimate (stages.run_timing_expect_ms) and the budget the harness derived from it
(3 x estimate + 1 s, at least 2 s, at most the run limit, taken as 60 s). Prints one row per result, sorted by
timing / budget, and a summary line; exit 1 when an honest (correct) result used more than
half its budget, the margin we want before a loaded machine could cut an honest job short.
"""
import glob
import json
import os
import sys

FACTOR, SLACK_MS, FLOOR_MS, RUN_LIMIT_MS = 3, 1000, 2000, 60000


def budget(expect):
    return min(max(FACTOR * expect + SLACK_MS, FLOOR_MS), RUN_LIMIT_MS)


def main():
    rows = []
    for d in sys.argv[1:]:
        for path in sorted(glob.glob(os.path.join(d, "*.json"))):
            try:
                with open(path) as f:
                    r = json.load(f)
            except (OSError, ValueError):
                continue
            s = r.get("stages") or {}
            timing, expect = s.get("run_timing_hold_ms", 0), s.get("run_timing_expect_ms", 0)
            if not r.get("has_timing") or timing <= 0 or expect <= 0:
                continue
            b = budget(expect)
            rows.append((timing / b, os.path.basename(path), r["status"], timing, expect, b))
    if not rows:
        print("no timed results with an estimate")
        return 1
    rows.sort(reverse=True)
    print("| result | status | held ms | expected ms | held / expected | budget ms | held / budget |")
    print("|---|---|---|---|---|---|---|")
    for share, name, status, timing, expect, b in rows:
        print("| %s | %s | %.0f | %.0f | %.2f | %.0f | %.3f |" %
              (name, status, timing, expect, timing / expect, b, share))
    worst = max(r[3] / r[4] for r in rows)
    honest = [r for r in rows if r[2] == "correct"]
    top = max((r[0] for r in honest), default=0)
    print("\n%d timed results; largest held / expected %.2f; largest held / budget of a correct "
          "one %.3f (want <= 0.5)" % (len(rows), worst, top))
    return 1 if top > 0.5 else 0


if __name__ == "__main__":
    sys.exit(main())
