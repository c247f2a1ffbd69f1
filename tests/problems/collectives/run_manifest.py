#!/usr/bin/python3
"""Runs every solution of a collectives problem through `pkgym check` on the GPUs and
compares each verdict with the problem's solutions/expected.json.

usage: run_manifest.py ID [ID...]    (ids under problems/collectives)
Env: PKGYM, PK_SOURCE_DIR (set by ctest); PK_SLOW_TESTS=1 also runs entries marked "slow";
PK_CHECK_ARGS adds options to every `pkgym check`; PK_COLL_RESULTS=DIR keeps each result JSON.
Exits 77 (skipped) without a GPU."""
import json
import os
import shlex
import subprocess
import sys
import time


def parse_result(stdout):
    """The JSON object `pkgym check --json` prints (the last one, if it printed more)."""
    dec, result, i = json.JSONDecoder(), None, 0
    while True:
        i = stdout.find("{", i)
        if i < 0:
            return result
        try:
            obj, end = dec.raw_decode(stdout, i)
            if isinstance(obj, dict) and "status" in obj:
                result = obj
            i = end
        except json.JSONDecodeError:
            i += 1


def mismatches(exp, res):
    """What differs between the expectation and the result, as short phrases."""
    want = exp["status"] if isinstance(exp["status"], list) else [exp["status"]]
    got = res.get("status")
    out = []
    if got not in want:
        out.append(f"status {got} (want {'/'.join(want)})")
    if got == "rejected" and exp.get("rule") and res.get("rule") != exp["rule"]:
        out.append(f"rule {res.get('rule')!r} (want {exp['rule']!r})")
    if exp.get("inputs_modified") and not any(t.get("inputs_modified")
                                              for t in res.get("trials", [])):
        out.append("no trial reports inputs_modified")
    missing = set(exp.get("hung_ranks_include", [])) - set(res.get("hung_ranks", []))
    if got == "timeout" and missing:
        out.append(f"hung_ranks {res.get('hung_ranks')} lack {sorted(missing)}")
    return out


def run_problem(pkgym, src, pid, keep):
    sdir = os.path.join(src, "problems", "collectives", pid, "solutions")
    manifest = json.load(open(os.path.join(sdir, "expected.json")))
    extra = shlex.split(os.environ.get("PK_CHECK_ARGS", ""))
    failures = 0
    for name, exp in manifest.items():
        if exp.get("slow") and os.environ.get("PK_SLOW_TESTS") != "1":
            print(f"{pid:14} {name:28} skipped (slow; PK_SLOW_TESTS=1 runs it)")
            continue
        cmd = [pkgym, "check", "--problem", f"collectives/{pid}", os.path.join(sdir, name),
               "--json"] + extra
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            print(f"{pid:14} {name:28} FAIL: pkgym check ran over 600 s")
            failures += 1
            continue
        wall = time.monotonic() - t0
        res = parse_result(p.stdout)
        if p.returncode != 0 or res is None:
            print(f"{pid:14} {name:28} FAIL: pkgym check exit {p.returncode}, "
                  f"no result\n{p.stdout[-1500:]}{p.stderr[-1500:]}")
            failures += 1
            continue
        if keep:
            with open(os.path.join(keep, f"{pid}__{name}.json"), "w") as f:
                json.dump(res, f, indent=1)
        bad = mismatches(exp, res)
        timing = ""
        if res.get("has_timing"):
            timing = (f" cand {res['candidate']['median_us']:.1f} us, ref "
                      f"{res['reference']['median_us']:.1f} us, speedup {res['speedup']:.3f}, "
                      f"roofline {res.get('roofline_us', 0):.1f} us")
        rule = f"/{res['rule']}" if res.get("rule") else ""
        verdict = "ok  " if not bad else "FAIL"
        print(f"{pid:14} {name:28} {verdict} {res['status']}{rule}{timing} ({wall:.0f} s)"
              + (f": {'; '.join(bad)}; reason: {res.get('reason', '')[:200]}" if bad else ""))
        failures += bool(bad)
    return failures


def main():
    if not os.path.exists("/dev/nvidia0"):
        print("skipped: no GPU (/dev/nvidia0 is absent)")
        return 77
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    keep = os.environ.get("PK_COLL_RESULTS")
    if keep:
        os.makedirs(keep, exist_ok=True)
    failures = sum(run_problem(os.environ["PKGYM"], os.environ["PK_SOURCE_DIR"], pid, keep)
                   for pid in sys.argv[1:])
    print(f"{failures} solution(s) with an unexpected verdict")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
