#!/usr/bin/env python3
"""bench/pkb/table.py on synthetic results: the table without the cross-check's reports, and its
"PKB PyTorch us" and "reference / PKB" columns from RESULTS_DIR/crosscheck.jsonl (one JSON a
line, what scripts/gpu-pass keeps) and from --crosscheck LOG (gpu-crosscheck.sh's output:
indented JSON objects among other lines)."""
import json
import os
import subprocess
import sys
import tempfile

SRC = os.environ.get("PK_SOURCE_DIR",
                     os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TABLE = os.path.join(SRC, "bench", "pkb", "table.py")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


def write(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f)


def table(results, problems, *extra):
    r = subprocess.run([sys.executable, TABLE, results, problems, *extra],
                       capture_output=True, text=True)
    check(r.returncode == 0, "table.py exit %d: %s" % (r.returncode, r.stderr))
    return r.stdout.splitlines()


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def row(lines, problem):
    for line in lines:
        if line.startswith("| %s |" % problem):
            return cells(line)
    check(False, "no row for %s in %s" % (problem, lines))
    return []


def result(ref_us, cand_us):
    return {"status": "correct", "has_timing": True, "reference": {"median_us": ref_us},
            "candidate": {"median_us": cand_us}, "speedup": ref_us / cand_us,
            "roofline_floor_us": 50.0}


def report(problem, pkb_us, **kw):
    r = {"problem": problem, "world": 2, "trials": 2, "dims": {}, "outputs": {},
         "pkb_us": pkb_us, "pkb_cv": 0.01 if pkb_us else None,
         "pkb_timing": {"median_us": pkb_us} if pkb_us else {"skipped": "host problem"}}
    r.update(kw)
    return r


def main():
    with tempfile.TemporaryDirectory() as tmp:
        problems, results = os.path.join(tmp, "problems"), os.path.join(tmp, "results")
        for pid, device in (("a_slow", "gpu"), ("b_fast", "gpu"), ("c_untimed", "gpu"),
                            ("host", "host")):
            write(os.path.join(problems, "pkb", pid, "meta.json"),
                  {"device": device, "dims": {"M": 64}})
            write(os.path.join(results, "pkb_%s_correct.json" % pid), result(200.0, 100.0))
            write(os.path.join(results, "pkb_%s_wrong.json" % pid), {"status": "incorrect"})

        # Without reports: the nine columns, and no PKB column.
        plain = table(results, problems)
        check(len(cells(plain[0])) == 9 and "PKB PyTorch us" not in plain[0],
              "header without reports: %s" % plain[0])
        check(row(plain, "pkb/a_slow") == ["pkb/a_slow", "M=64", "200.0", "50.0", "25%",
                                           "correct", "100.0", "2.00", "incorrect"],
              "plain row: %s" % row(plain, "pkb/a_slow"))
        check(not any("pkb/host" in line for line in plain), "host problem listed")

        # RESULTS_DIR/crosscheck.jsonl: read without an option. A later report of a problem
        # replaces an earlier one; a null pkb_us (skipped) or a missing report shows "-".
        with open(os.path.join(results, "crosscheck.jsonl"), "w") as f:
            for r in (report("pkb/a_slow", 999.0), report("pkb/a_slow", 40.0),
                      report("pkb/b_fast", 400.0), report("pkb/c_untimed", None),
                      {"dump": "/tmp/x", "error": "RuntimeError('boom')"}):
                f.write(json.dumps(r) + "\n")
        lines = table(results, problems)
        head = cells(lines[0])
        check(head[-2:] == ["PKB PyTorch us", "reference / PKB"], "header: %s" % head)
        check(cells(lines[1]) == ["---"] * len(head), "separator: %s" % lines[1])
        check(row(lines, "pkb/a_slow")[-2:] == ["40.0", "5.00"],
              "a_slow: %s" % row(lines, "pkb/a_slow"))
        check(row(lines, "pkb/b_fast")[-2:] == ["400.0", "0.50"],
              "b_fast: %s" % row(lines, "pkb/b_fast"))
        check(row(lines, "pkb/c_untimed")[-2:] == ["-", "-"],
              "c_untimed: %s" % row(lines, "pkb/c_untimed"))
        check(all(len(cells(line)) == len(head) for line in lines), "ragged table")
        os.remove(os.path.join(results, "crosscheck.jsonl"))

        # --crosscheck LOG: gpu-crosscheck.sh's output, indented objects among other lines.
        log = os.path.join(tmp, "crosscheck.log")
        with open(log, "w") as f:
            f.write("=== torchrun (cuda): 2 dumps\nW1123 some torchrun warning {not json}\n")
            f.write(json.dumps(report("pkb/a_slow", 250.0), indent=1) + "\n")
            f.write("pkb time pkb/a_slow: 250.0 us per call\n")
            f.write(json.dumps(report("pkb/b_fast", 80.0), indent=1) + "\n")
            f.write("crosscheck: 2 passed, 0 failed; PKB timed on 2 of 2\n")
        lines = table(results, problems, "--crosscheck", log)
        check(row(lines, "pkb/a_slow")[-2:] == ["250.0", "0.80"],
              "log a_slow: %s" % row(lines, "pkb/a_slow"))
        check(row(lines, "pkb/b_fast")[-2:] == ["80.0", "2.50"],
              "log b_fast: %s" % row(lines, "pkb/b_fast"))
        check(row(lines, "pkb/c_untimed")[-2:] == ["-", "-"], "log c_untimed")
    print("test_pkb_table: %s" % ("FAILED (%d)" % len(failures) if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
