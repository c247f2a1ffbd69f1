#!/usr/bin/python3
"""Runs every submission listed in problems/*/*/solutions/expected.json through
`pkgym check --json` and compares the verdict with the manifest.

usage: run_manifest.py (--host | --gpu) [manifest...]
  --host: problems with "device": "host" (CI); --gpu: device problems (exit 77 without a GPU).
Manifest: {"problem": ID, "solutions": [entry...]} or {FILE: entry...} (problem taken from
the directory). Entry keys: file, status (a name or a list of accepted names), and optionally
rule, hung_ranks, hung_ranks_include, inputs_modified, failing_trial (the first failing
trial), failing_by (the first failure at that trial or before), status_at_dims ({preset: status},
the verdict at PK_MANIFEST_DIMS=preset where it differs), status_at_world ({"4": status}, the
verdict at that world size, from world_size or PK_MANIFEST_WORLD, where it differs), stdout_contains,
reason_contains, world_size, trials, run_timeout_ms, gpus, skip_timing, env (variables added to
pkgym's environment: the operator's, e.g. PKGYM_FAKE_SETUP_FAILURES to fake a set-up failure).
PK_MANIFEST_NO_WARM=1 passes --no-warm (by default runs are warmed during the compile).
PK_MANIFEST_SEED=S passes --seed S (scripts/manifest-seeds sweeps seeds: an expectation must
hold whatever the secret draws are).
PK_MANIFEST_DIMS=NAME passes --dims NAME to the problems that have that preset (pkb: PKB's own
base shape; every verdict must hold there too).
PK_MANIFEST_SAVE_DIR=DIR keeps each result as DIR/<suite>_<id>_<file>.json (bench tables).
PK_MANIFEST_SHARED=1 runs host submissions as jobs sharing one "GPU set": each gets --gpus
0..world-1 and one --lock-dir, so their trials and timing contend for the same timing locks
(docs/problems.md, "Sharing GPUs"); the verdicts must be those of running alone.
"""
import concurrent.futures
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

PKGYM = os.environ.get("PKGYM")
SRC = os.environ.get("PK_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def problem_device(problem_id):
    with open(os.path.join(SRC, "problems", problem_id, "meta.json")) as f:
        return json.load(f).get("device", "gpu")


def problem_world(problem_id):
    with open(os.path.join(SRC, "problems", problem_id, "meta.json")) as f:
        return int(json.load(f).get("world_size", 2))


def problem_presets(problem_id):
    with open(os.path.join(SRC, "problems", problem_id, "meta.json")) as f:
        return json.load(f).get("dims_presets", {})


def host_gpus():
    """GPUs the driver lists (its /proc entries; the device nodes where those are hidden)."""
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return len(glob.glob("/dev/nvidia[0-9]*"))


def job_world(job):
    problem, _, entry = job
    return int(entry.get("world_size") or problem_world(problem))


SHARED_LOCKS = None  # the lock directory of PK_MANIFEST_SHARED=1


def run_one(problem, sol_dir, entry):
    cmd = [PKGYM, "check", "--problem", problem, os.path.join(sol_dir, entry["file"]), "--json"]
    for key, flag in (("world_size", "--world-size"), ("trials", "--trials"),
                      ("run_timeout_ms", "--timeout-ms"), ("gpus", "--gpus")):
        if key in entry:
            cmd += [flag, str(entry[key])]
    if entry.get("status") == "timeout" and "run_timeout_ms" not in entry:
        cmd += ["--timeout-ms", "15000"]  # a hang needs no minute-long wait to be named
    if entry.get("skip_timing"):
        cmd.append("--skip-timing")
    if os.environ.get("PK_MANIFEST_SEED"):
        cmd += ["--seed", os.environ["PK_MANIFEST_SEED"]]
    preset = os.environ.get("PK_MANIFEST_DIMS")
    if preset and preset in problem_presets(problem):
        cmd += ["--dims", preset]  # e.g. pkb: PKB's own base shape, where the problem has it
    if os.environ.get("PK_MANIFEST_NO_WARM") == "1":
        cmd.append("--no-warm")  # the run sandbox starts after the compile (cold)
    if SHARED_LOCKS and problem_device(problem) == "host" and "gpus" not in entry:
        world = entry.get("world_size") or problem_world(problem)
        cmd += ["--gpus", ",".join(str(i) for i in range(world)), "--lock-dir", SHARED_LOCKS]
    env = dict(os.environ, **entry.get("env", {}))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    label = "%s %s%s" % (problem, entry["file"],
                         " (world %d)" % entry["world_size"] if "world_size" in entry else "")
    if proc.returncode != 0:
        return label, ["pkgym check exited %d: %s" % (proc.returncode, proc.stderr[-500:])], None
    res = json.loads(proc.stdout)
    save = os.environ.get("PK_MANIFEST_SAVE_DIR")
    if save:
        os.makedirs(save, exist_ok=True)
        name = "%s_%s.json" % (problem.replace("/", "_"), os.path.splitext(entry["file"])[0])
        with open(os.path.join(save, name), "w") as f:
            f.write(proc.stdout)
    errors = []
    want = entry["status"]
    if preset and preset in problem_presets(problem) and preset in entry.get("status_at_dims", {}):
        want = entry["status_at_dims"][preset]  # a verdict that differs at that shape, said why
    world = str(entry.get("world_size") or problem_world(problem))
    if world in entry.get("status_at_world", {}):
        want = entry["status_at_world"][world]  # e.g. a TP twin: no TP pair at W = 2 (pkb/74)
    statuses = want if isinstance(want, list) else [want]
    if res["status"] not in statuses:
        errors.append("status %s, expected %s (reason: %s)" %
                      (res["status"], want, res["reason"]))
    if "rule" in entry and res["status"] == "rejected" and res["rule"] != entry["rule"]:
        errors.append("rule %r, expected %r" % (res["rule"], entry["rule"]))
    if "hung_ranks" in entry and res["hung_ranks"] != entry["hung_ranks"]:
        errors.append("hung ranks %s, expected %s" % (res["hung_ranks"], entry["hung_ranks"]))
    missing = set(entry.get("hung_ranks_include", [])) - set(res["hung_ranks"])
    if res["status"] == "timeout" and missing:
        errors.append("hung ranks %s lack %s" % (res["hung_ranks"], sorted(missing)))
    if entry.get("inputs_modified") and not any(t["inputs_modified"] for t in res["trials"]):
        errors.append("no trial reports inputs_modified")
    if "failing_by" in entry:  # the first failure in trial N at the latest (an earlier one
        # may come from the secret input regime a trial draws)
        failing = [i for i, t in enumerate(res["trials"]) if not t["passed"]]
        if not failing or failing[0] > entry["failing_by"]:
            errors.append("first failing trial %s, expected by %d" % (failing[:1], entry["failing_by"]))
    if "failing_trial" in entry:
        failing = [i for i, t in enumerate(res["trials"]) if not t["passed"]]
        if failing[:1] != [entry["failing_trial"]]:
            errors.append("first failing trial %s, expected %d" % (failing[:1], entry["failing_trial"]))
    if "reason_contains" in entry and entry["reason_contains"] not in res["reason"]:
        errors.append("reason %r lacks %r" % (res["reason"], entry["reason_contains"]))
    if "stdout_contains" in entry and entry["stdout_contains"] not in (res["stdout_tail"] or ""):
        errors.append("stdout tail lacks %r" % entry["stdout_contains"])
    if res["status"] == "correct" and not (res["trials"] and all(t["passed"] for t in res["trials"])):
        errors.append("correct without passing trials")
    return label, errors, res


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "--host"
    manifests = sys.argv[2:] or sorted(glob.glob(os.path.join(SRC, "problems", "*", "*", "solutions", "expected.json")))
    want_device = "gpu" if mode == "--gpu" else "host"
    jobs = []
    for path in manifests:
        with open(path) as f:
            m = json.load(f)
        sol_dir = os.path.dirname(path)
        problem = m.get("problem") or "/".join(sol_dir.split(os.sep)[-3:-1])
        if problem_device(problem) != want_device:
            continue
        # Two forms: {"problem": ID, "solutions": [{"file": F, ...}]} or {F: {...}}.
        entries = m["solutions"] if "solutions" in m else [
            dict(v, file=k) for k, v in m.items() if isinstance(v, dict)]
        # PK_MANIFEST_WORLD=N runs every submission at world size N (issue #9's CPU pass).
        world = os.environ.get("PK_MANIFEST_WORLD")
        for entry in entries:
            if world:
                entry = dict(entry, world_size=int(world))
            jobs.append((problem, sol_dir, entry))
    if not jobs:
        print("no %s manifests found" % want_device)
        return 1
    if want_device == "gpu" and not os.path.exists("/dev/nvidia0"):
        print("no GPU: skipped")
        return 77
    if want_device == "gpu":
        # A job needs one GPU per rank (NCCL refuses two ranks on one GPU). On a host with
        # fewer, it could only fail at set-up (infra_error): that is a skip, not a verdict.
        have = host_gpus()
        fits = [j for j in jobs if job_world(j) <= have]
        for problem, _, entry in jobs:
            if job_world((problem, None, entry)) > have:
                print("skip %s %s: needs %d GPUs, the host has %d" %
                      (problem, entry["file"], job_world((problem, None, entry)), have))
        if not fits:
            print("no submission fits on %d GPU(s): skipped" % have)
            return 77
        jobs = fits
    workers = int(os.environ.get("PK_MANIFEST_JOBS", "2"))
    global SHARED_LOCKS
    if os.environ.get("PK_MANIFEST_SHARED") == "1":
        SHARED_LOCKS = tempfile.mkdtemp(prefix="pk-manifest-locks-")
        workers = max(workers, 3)
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        for label, errors, res in pool.map(lambda j: run_one(*j), jobs):
            extra = ""
            if res and res.get("has_timing"):
                extra = " speedup %.3f" % res["speedup"]
            if errors:
                failed += 1
                print("FAIL %s: %s" % (label, "; ".join(errors)))
            else:
                print("ok   %s -> %s%s%s" % (label, res["status"],
                                            " (%s)" % res["rule"] if res["rule"] else "", extra))
    if SHARED_LOCKS:
        shutil.rmtree(SHARED_LOCKS, ignore_errors=True)
    print("%d/%d submissions gave the expected verdict%s" % (
        len(jobs) - failed, len(jobs), " (sharing one GPU set)" if SHARED_LOCKS else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
