#!/usr/bin/python3
"""On the GPU machine: every collectives solution through `pkgym check`, with the manifest
checks of tests/problems/run_manifest.py, as one table with the timings, keeping every result
JSON. Runs all correct.cu first (timed), then the rest with --skip-timing (their verdicts do
not depend on timing), and starts nothing new after --budget seconds.

usage: gpu_report.py [--budget S] [--jsonl FILE] [ID...]   (env: PKGYM, PK_SOURCE_DIR)"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import run_manifest  # noqa: E402  (the harness's generic manifest runner)

IDS = ["allreduce", "allgather", "broadcast", "reduce", "scatter", "gather", "reducescatter",
       "alltoall"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=1e9)
    ap.add_argument("--jsonl")
    ap.add_argument("ids", nargs="*", default=IDS)
    a = ap.parse_args()
    if not os.path.exists("/dev/nvidia0"):
        print("skipped: no GPU")
        return 77
    run_manifest.PKGYM = os.environ["PKGYM"]
    src = os.environ["PK_SOURCE_DIR"]
    jobs = []
    for pid in a.ids:
        sdir = os.path.join(src, "problems", "collectives", pid, "solutions")
        man = json.load(open(os.path.join(sdir, "expected.json")))
        for name, exp in man.items():
            entry = dict(exp, file=name)
            if name != "correct.cu":
                entry["skip_timing"] = True
            jobs.append((name != "correct.cu", f"collectives/{pid}", sdir, entry))
    jobs.sort(key=lambda j: j[0])  # stable: every correct.cu first
    out = open(a.jsonl, "a") if a.jsonl else None
    t0, failed, done = time.monotonic(), 0, 0
    print(f"{'problem':26} {'file':28} {'verdict':22} {'cand us':>9} {'ref us':>9} "
          f"{'speedup':>7} {'floor us':>8} {'no-ovl us':>9}  check")
    for _, problem, sdir, entry in jobs:
        if time.monotonic() - t0 > a.budget:
            print(f"{problem:26} {entry['file']:28} not run (budget of {a.budget:.0f} s spent)")
            failed += 1
            continue
        label, errors, res = run_manifest.run_one(problem, sdir, entry)
        done += 1
        if out and res:
            out.write(json.dumps(dict(res, problem=problem, file=entry["file"])) + "\n")
            out.flush()
        verdict = (res or {}).get("status", "none") + (
            "/" + res["rule"] if res and res.get("rule") else "")
        t = res and res.get("has_timing")
        print(f"{problem:26} {entry['file']:28} {verdict:22} "
              f"{res['candidate']['median_us'] if t else 0:9.1f} "
              f"{res['reference']['median_us'] if t else 0:9.1f} "
              f"{res['speedup'] if t else 0:7.3f} {(res or {}).get('roofline_floor_us', 0):8.1f} "
              f"{(res or {}).get('roofline_no_overlap_us', 0):9.1f}  "
              + ("ok" if not errors else "FAIL: " + "; ".join(errors)[:300]), flush=True)
        failed += bool(errors)
    print(f"{done}/{len(jobs)} run, {failed} unexpected or not run, {time.monotonic() - t0:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
