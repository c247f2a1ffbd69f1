#!/usr/bin/env python3
"""`pkgym eval` records what a trainer needs and says what it did (issue 17), on the selftest
suite with an embedded server that has no GPU:
- a run id and --group: episodes are grouped LABEL/<problem>; report.json records each
  trajectory's episode id, group and seed; two runs into one store never share a
  normalization set;
- the store is kept (OUT/data, or --data-dir), and its turns are the report's, numbered from 1
  in both;
- GPU problems the server cannot run are left out with the reason; the summary counts only
  the problems that ran; a replay selection without responses names make-collectives.sh;
- speedups with a high CV are flagged (--noisy-cv)."""
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

PKGYM = os.environ["PKGYM"]
SRC = os.environ["PK_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SRC, "tests", "env"))
from checks import check, failures  # noqa: E402

REPLAY = os.path.join(SRC, "rollout", "replay")
NO_GPU = ["--serve-arg", "--gpus", "--serve-arg", "none", "--serve-arg", "--compile-workers",
          "--serve-arg", "1"]
OPTIONS = '{"check": {"trials": 2}}'


def run(*args, timeout=300):
    p = subprocess.run([PKGYM, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def reward_json(db, *flags):
    rc, out, err = run("reward", "--db", db, "--json", *flags)
    check(rc == 0, f"reward {flags}: rc {rc}: {err}")
    return json.loads(out)


def first_run(tmp):
    out = os.path.join(tmp, "r1")
    rc, _, err = run("eval", "--policy", f"replay:{REPLAY}",
                     "--problems", "selftest/scale,collectives/allreduce", "-G", "2", "-T", "3",
                     "--options", OPTIONS, "--out", out, "--group", "mygrp", "--noisy-cv", "1e-9",
                     *NO_GPU)
    check(rc == 0, f"eval: rc {rc}: {err}")
    check("collectives/allreduce left out: needs 2 GPUs; the server has 0" in err,
          f"says what was left out: {err}")
    r = json.load(open(os.path.join(out, "report.json")))
    st = r["settings"]
    db = os.path.join(out, "data", "trajectories.sqlite")
    check(re.match(r"^eval-\d{8}T\d{6}Z-[0-9a-f]{6}$", st["run_id"]) is not None,
          f"run id {st['run_id']}")
    check(st["group"] == "mygrp" and st["store"] == db, f"settings {st}")
    check(os.path.exists(db), "the store is kept")
    check(os.path.exists(os.path.join(out, "serve.log")), "the server's log is kept")
    probs = {p["id"]: p for p in r["problems"]}
    left = probs["collectives/allreduce"]
    check(left["skipped"] and left["reason"] == "needs 2 GPUs; the server has 0",
          f"left out with its reason: {left}")
    check(r["overall"]["problems_run"] == 1 and r["overall"]["problems_left_out"] == 1,
          f"counts: {r['overall']}")
    check(r["overall"]["trajectories"] == 2 and r["overall"]["errors"] == 0,
          "the summary counts only the problem that ran")
    md = open(os.path.join(out, "report.md")).read()
    check("1 problem x 2 trajectories x 3 turns" in md, "report.md counts the problems that ran")
    check("- collectives/allreduce: needs 2 GPUs; the server has 0" in md, "left out in md")
    check(f"Trajectory store (kept): `{db}`" in md, "report.md says where the store is")
    trajs = r["trajectories"]
    check(len(trajs) == 2, f"{len(trajs)} trajectories")
    for t in trajs:
        check(re.match(r"^[0-9a-f]{32}$", t["episode"] or "") is not None, f"episode id {t}")
        check(t["group"] == "mygrp/selftest/scale", f"group {t['group']}")
        check(isinstance(t["seed"], int) and t["seed"] >= 0, f"seed {t['seed']}")
        check([u["turn"] for u in t["turns"]] == [1, 2, 3], "report turns numbered from 1")
        for u in t["turns"]:
            timed = u["status"] == "correct" and u["speedup"] > 0
            check(u["noisy"] == timed, f"--noisy-cv 1e-9 flags every timed speedup: {u}")
            check(u["baseline_source"] in (("measured", "cached") if timed else ("none",)), f"{u}")
    check(r["overall"]["noisy_best_speedups"] == 2, f"noisy bests {r['overall']}")
    check("**Noisy speedups:** 2 best speedups" in md, "report.md warns about noisy speedups")
    # The store holds the same episodes, turns and seeds, numbered the same way.
    res = reward_json(db, "--group", "mygrp/selftest/scale")
    by_id = {e["episode_id"]: e for e in res["episodes"]}
    check(sorted(by_id) == sorted(t["episode"] for t in trajs), "the report's episodes are stored")
    for t in trajs:
        e = by_id.get(t["episode"])
        if not e:
            continue
        check([(u["turn"], u["status"]) for u in e["turns"]] ==
              [(u["turn"], u["status"]) for u in t["turns"]], "same turn numbers and statuses")
        check(e["seed"] == t["seed"] and e["group"] == t["group"], "same seed and group")
        check(all(abs(u["score"] - v["reward"]) < 1e-9 for u, v in zip(e["turns"], t["turns"])),
              "same rewards")
    return out, db, st["run_id"]


def second_run(tmp, db, run_id1):
    """Another run into the same store, with the default group (its run id): group
    normalization keeps the two runs apart."""
    out = os.path.join(tmp, "r2")
    rc, _, err = run("eval", "--policy", f"replay:{REPLAY}", "--problems", "selftest/scale",
                     "-G", "1", "-T", "1", "--options", OPTIONS, "--out", out, "--data-dir",
                     os.path.dirname(db), "--noisy-cv", "1000", "--quiet", *NO_GPU)
    check(rc == 0, f"second eval: rc {rc}: {err}")
    r = json.load(open(os.path.join(out, "report.json")))
    run_id2 = r["settings"]["run_id"]
    check(run_id2 != run_id1, "each run has its own id")
    (t,) = r["trajectories"]
    check(t["group"] == f"{run_id2}/selftest/scale", f"default group is the run id: {t['group']}")
    check(r["settings"]["store"] == db, "--data-dir: the store reported")
    check(not any(u["noisy"] for u in t["turns"]), "--noisy-cv 1000 flags nothing")
    check(r["overall"]["noisy_best_speedups"] == 0, "no noisy best")
    res = reward_json(db, "--normalize", "group")
    sets = {s["key"]: s for s in res["sets"]}
    check(sets.get("mygrp/selftest/scale", {}).get("trajectories") == 2 and
          sets.get(f"{run_id2}/selftest/scale", {}).get("trajectories") == 1,
          f"one set per run and problem: {sorted(sets)}")
    check(res["ungrouped"] == 0, "every eval episode has a group")


def selection_messages(tmp):
    empty = os.path.join(tmp, "empty-replay")
    os.mkdir(empty)
    rc, _, err = run("eval", "--policy", f"replay:{empty}", "--problems", "selftest/scale",
                     "-G", "1", "-T", "1", "--out", os.path.join(tmp, "r3"), "--quiet", *NO_GPU)
    check(rc == 2 and "rollout/replay/make-collectives.sh" in err,
          f"no responses: names the script (rc {rc}): {err}")
    rc, _, err = run("eval", "--policy", f"replay:{REPLAY}", "--problems",
                     "collectives/allreduce", "-G", "1", "-T", "1",
                     "--out", os.path.join(tmp, "r4"), "--quiet", *NO_GPU)
    check(rc == 2 and "1 need more GPUs than the server has (0)" in err,
          f"nothing can run: exit 2 and why (rc {rc}): {err}")
    rc, out, _ = run("eval", "--help")
    check(rc == 0 and "KEPT" in out and "OUT/data" in out and "--group" in out and
          "--run-id" in out and "--noisy-cv" in out, "--help says the store is kept")
    rc, _, err = run("eval", "--server", "ipc:///nonexistent", "--data-dir", tmp,
                     "--policy", f"replay:{REPLAY}")
    check(rc == 2 and "--data-dir" in err, "--data-dir with --server is refused")
    rc, _, err = run("eval", "--policy", f"replay:{REPLAY}", "--group", "bad group")
    check(rc == 2 and "--group" in err, "a bad --group is refused")


def main():
    with tempfile.TemporaryDirectory(prefix="pk-eval-records-") as tmp:
        out, db, run_id = first_run(tmp)
        second_run(tmp, db, run_id)
        selection_messages(tmp)
    print("eval records:", "FAIL" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
