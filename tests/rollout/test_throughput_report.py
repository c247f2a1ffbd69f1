#!/usr/bin/python3
"""bench/rollout/throughput_report.py, which prints the table of the one-shot GPU run of
issue 13, on a directory laid out as gpu-throughput.sh leaves it: a real bench_rollout log
(selftest suite, a few episodes, no GPU), start-up probe outputs, `pkgym check --json`
results and nvidia-smi samples. Each target is judged right both ways (a good and a bad
figure), so the GPU run's table can be trusted.

usage: test_throughput_report.py BENCH_ROLLOUT SOURCE_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

BENCH, SRC = sys.argv[1], sys.argv[2]
REPORT = os.path.join(SRC, "bench", "rollout", "throughput_report.py")


def write(d, name, text):
    with open(os.path.join(d, name), "w") as f:
        f.write(text)


def result(status="correct", median=215.0, cv=0.002, speedup=1.4, reason="", teardown=0.0):
    return json.dumps({"status": status, "reason": reason, "has_timing": status == "correct",
                       "candidate": {"median_us": median, "cv": cv}, "speedup": speedup,
                       "stages": {"compile_ms": 2500.0, "run_ms": 400.0, "run_setup_ms": 300.0,
                                  "run_teardown_ms": teardown, "run_lock_wait_ms": 12.0}})


PROBE = """step (ms)                 rank 0  rank 1
cuda context               450.2   455.1
nccl comm init             380.0   379.0
comm+arena teardown        %s   %s
wall incl. fork+exit      %s
"""


def fixture(d, good):
    write(d, "gpus.csv", "index, name\n0, NVIDIA H200\n")
    write(d, "idle-gpu.csv", "0, 4\n1, 4\n")
    write(d, "probe-teardown-1.txt", PROBE % ("505.0", "503.0", "1420.0"))
    write(d, "probe-exit-1.txt", PROBE % ("0.0", "0.0", "950.0" if good else "1500.0"))
    for i in (1, 2, 3):
        write(d, "check-fast-%d.json" % i, result())
        write(d, "check-fast-%d.wall" % i, "2.8\n" if good else "3.4\n")
    write(d, "check-teardown-1.json", result(teardown=505.0))
    write(d, "check-teardown-1.wall", "3.3\n")
    for i in (1, 2, 3, 4):
        write(d, "if-alone-%d.json" % i, result(median=215.0 + i * 0.1))
        write(d, "if-alone-%d.wall" % i, "3.0\n")
        write(d, "if-loaded-%d.json" % i, result(median=(216.0 if good else 222.0) + i * 0.1,
                                                 cv=0.004 if good else 0.03))
        write(d, "if-loaded-%d.wall" % i, "3.0\n")
    for i in (1, 2, 3):
        write(d, "if-ref-alone-%d.json" % i, result(speedup=1.001))
        write(d, "if-ref-alone-%d.wall" % i, "1.5\n")
        write(d, "if-ref-loaded-%d.json" % i, result(speedup=0.999 if good else 1.05))
        write(d, "if-ref-loaded-%d.wall" % i, "1.5\n")
    os.mkdir(os.path.join(d, "load"))
    write(d, os.path.join("load", "1-1.json"), result())
    budget = "within the 10000 ms budget of %s, which holds the GPUs %s"
    write(d, "hung-trial.json", result("timeout", reason="rank 1 of 2 did not finish " + budget % (
        "a correctness check", "shared with other jobs")))
    write(d, "hung-trial.wall", "13.2\n")
    write(d, "hung-timing.json", result("timeout", reason="rank 1 of 2 did not finish " + (
        budget % ("timing", "exclusively") if good else "within the 60000 ms run limit")))
    write(d, "hung-timing.wall", "24.0\n" if good else "63.0\n")
    for i in (1, 2):
        write(d, "hung-other-%d.json" % i, result())
        write(d, "hung-other-%d.wall" % i, "21.0\n")
    write(d, "batch-apps.csv", "1.0, 00000000:19:00.0, 111, %d\n1.0, 00000000:19:00.0, 222, 2100\n"
          % (2300 if good else 9000))
    write(d, "batch-gpu.csv", "1.0, 0, 4400, 50\n1.0, 1, 4300, 40\n")
    write(d, "after-batch-apps.csv", "" if good else "333, 2100\n")
    write(d, "after-batch-gpu.csv", "0, 4\n1, 6\n")
    write(d, "after-batch-procs.txt", "")
    write(d, "end-apps.csv", "")
    write(d, "end-gpu.csv", "0, 4\n1, 4\n")


def report(d):
    out = subprocess.run([sys.executable, REPORT, d], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def find(table, start):
    rows = [l for l in table.splitlines() if l.startswith("| " + start)]
    assert rows, "no row %r in\n%s" % (start, table)
    return rows[0]


def main():
    d = tempfile.mkdtemp(prefix="pk-test-report-")
    try:
        # A real bench_rollout table: the report must read its columns.
        log = subprocess.run(
            [BENCH, "--replay", os.path.join(SRC, "rollout", "replay"), "--cache-dir",
             os.path.join(d, "cache"), "--suite", "selftest", "--episodes", "2",
             "--warm-episodes", "2", "--turns", "2", "--trials", "1", "--gpus", "none"],
            capture_output=True, text=True, timeout=300, cwd=SRC)
        assert log.returncode == 0, log.stderr
        shutil.rmtree(os.path.join(d, "cache"))
        for good in (True, False):
            sub = os.path.join(d, "good" if good else "bad")
            os.mkdir(sub)
            fixture(sub, good)
            # The collectives' estimate line, as a GPU batch prints it (host problems: 0).
            write(sub, "batch.log", log.stdout + "device memory estimate per job and GPU "
                  "(MiB): collectives/allreduce=2776\n")
            t = report(sub)
            want = "yes |" if good else "NO |"
            for start in ("process wall", "one `pkgym check`", "correct all-reduce median",
                          "CV of the timed calls", "reference against itself, under load",
                          "hung in timing", "after the batch",
                          "64 x 3 collectives batch: device memory"):
                r = find(t, start)
                assert r.endswith(want), "%s: %r should end with %r" % (
                    "good" if good else "bad", r, want)
            for start in ("hung in a trial", "correct checks next to them",
                          "reference against itself, alone", "at the end"):
                assert find(t, start).endswith("yes |"), find(t, start)
            cold = find(t, "64 x 3 collectives batch, cold")
            sps = [l for l in log.stdout.splitlines() if l.startswith("| cold |")][0]
            assert "%.2f steps/s" % float(sps.split("|")[4]) in cold, (cold, sps)
            assert cold.endswith("NO |"), cold  # a host batch is far from 5 steps/s
            assert "warm" in find(t, "64 x 3 collectives batch, warm")
        print("ok: the report reads every section and judges each target both ways")
        return 0
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
