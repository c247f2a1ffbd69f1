#!/usr/bin/env python3
"""GPU machine (2+ GPUs): issue 17 on real GPUs with collectives/allreduce.
- Cached baseline: the first correct turn times the reference. When its CV is within the
  default --baseline-max-cv (0.1) the next correct turn uses it from the cache (the reference
  not timed) and the step reply, the store, `pkgym export --verified` and the feedback show the
  same baseline; when it is noisier, the next turn times the reference again (not cached).
- options.check.world_size: 2 runs where the server has 2 GPUs; a world size above the GPUs
  the server has is refused at reset, naming both counts.
Skipped (77) without a GPU."""
import json
import os
import shutil
import sqlite3
import subprocess
import sys

from checks import check, close, failures

PKGYM = os.environ["PKGYM"]


def main():
    smi = shutil.which("nvidia-smi")
    listed = subprocess.run([smi, "-L"], capture_output=True, text=True) if smi else None
    n_gpus = sum(line.startswith("GPU ") for line in listed.stdout.splitlines()) if listed else 0
    if n_gpus < 2:
        print(f"SKIP: needs 2 GPUs, found {n_gpus}")
        return 77
    try:
        from pkserver import SRC, Server
        from pkgym_client import ServerError
    except ImportError as e:
        print(f"FAIL: this test needs python3-zmq and python3-msgpack ({e})")
        return 1
    with open(os.path.join(SRC, "problems/collectives/allreduce/solutions/correct.cu")) as f:
        action = f"```cuda\n{f.read()}\n```\nSummary: LSA all-reduce."
    srv = Server()
    try:
        c = srv.client(timeout_s=600)
        slots = c.hello()["gpu_slots"]
        check(slots == n_gpus, f"hello.gpu_slots {slots} == {n_gpus}")
        r = c.reset("collectives/allreduce", max_turns=1, options={"check": {"world_size": 2}})
        check(r["info"]["settings"]["check"]["world_size"] == 2, "world_size 2 in effect")
        s1 = c.step(r["episode"], action)
        info1 = s1["info"]
        check(info1["status"] == "correct", f"correct.cu: {info1['status']} {info1['reason']}")
        b1 = info1["baseline"]
        check(b1 and b1["source"] == "measured", f"first baseline measured: {b1}")
        r2 = c.reset("collectives/allreduce", max_turns=1)
        s2 = c.step(r2["episode"], action)
        info2 = s2["info"]
        b2 = info2["baseline"]
        print(f"baseline 1: {b1}\nbaseline 2: {b2}")
        if b1["cv"] <= 0.1:
            check(b2["source"] == "cached" and info2["baseline_us"] == b1["us"],
                  f"a steady baseline is reused from the cache: {b2}")
            figure = f"baseline {b1['us']:.1f} us"
            check(figure in s2["observation"]["feedback"], f"feedback: {figure}")
            res = c.trajectory(r2["episode"])["turns"][0]["result"]
            check(res["reference"]["median_us"] == 0, "the reference was not timed")
        else:
            check(b2["source"] == "measured", f"a noisy baseline (CV {b1['cv']}) is not reused")
        # The smallest of allreduce's world sizes (2, 4, 8) above the GPUs the server has.
        too_many = next((w for w in (4, 8) if w > n_gpus), None)
        if too_many:
            try:
                c.reset("collectives/allreduce", options={"check": {"world_size": too_many}})
                check(False, f"world_size {too_many} accepted with {n_gpus} GPUs")
            except ServerError as e:
                check(e.code == "bad_request" and f"needs {too_many} GPUs" in e.message and
                      f"has {n_gpus}" in e.message, f"refused: {e.message}")
        c.close()
    finally:
        check(srv.stop() == 0, "server exit code")
    db = os.path.join(srv.data_dir, "trajectories.sqlite")
    con = sqlite3.connect(db)
    (col,) = con.execute("SELECT baseline_us FROM turns WHERE episode_id = ?",
                         (r2["episode"],)).fetchone()
    con.close()
    check(close(col, info2["baseline_us"]), f"store baseline_us {col} == {info2['baseline_us']}")
    p = subprocess.run([PKGYM, "export", "--db", db, "--verified", "--episode", r2["episode"]],
                       capture_output=True, text=True, timeout=60)
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    check(len(lines) == 1 and close(lines[0]["baseline_us"], info2["baseline_us"]),
          f"export baseline_us: {lines}")
    srv.cleanup()
    print("gpu truth:", "FAIL" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
