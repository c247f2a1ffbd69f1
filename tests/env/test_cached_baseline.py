#!/usr/bin/env python3
"""Acceptance of issue 17: an episode played with a cached baseline shows the same baseline
figure in the step reply (info.baseline_us, info.baseline), in the trajectory store (the
baseline_us column and the stored result), in `pkgym export --verified` and in the feedback
text the model reads, never 0. Then `pkgym serve --remeasure-baseline` times the reference
again on the same data dir. Host selftest problem (selftest/scale), no GPU.

Host timings are wall-clock and noisy (CV often above the default --baseline-max-cv 0.1, so a
default server would keep measuring the reference): the first server raises the limit so
that the first episode's baseline is cached."""
import json
import os
import sqlite3
import subprocess
import sys

from checks import check, close, failures
from pkserver import SRC, Server

PKGYM = os.environ["PKGYM"]
PROBLEM = "selftest/scale"


def correct_action():
    with open(os.path.join(SRC, "problems", "selftest", "scale", "solutions", "correct.cu")) as f:
        return f"Here is my kernel.\n```cuda\n{f.read()}\n```\nSummary: scale on the host."


def play_correct(c, group):
    r = c.reset(PROBLEM, max_turns=1, group=group)
    s = c.step(r["episode"], correct_action())
    check(s["info"]["status"] == "correct", f"correct.cu judged {s['info']['status']}: "
          f"{s['info']['reason']}")
    return r["episode"], s


def main():
    first = srv = Server("--gpus", "none", "--compile-workers", "1", "--baseline-max-cv", "1000")
    data_dir = srv.data_dir
    try:
        c = srv.client(timeout_s=300)
        # 1. The first correct turn times the reference and caches it.
        ep1, s1 = play_correct(c, "first")
        b1 = s1["info"]["baseline"]
        check(b1 is not None and b1["source"] == "measured", f"first baseline measured: {b1}")
        base = s1["info"]["baseline_us"]
        check(base > 0 and base == b1["us"], f"info.baseline_us {base} == baseline.us")
        check(b1["iters"] > 0 and b1["cv"] >= 0 and b1["measured_at"] > 1.6e9,
              f"CV, repetitions and time of the measurement: {b1}")

        # 2. The next one uses the cached baseline: the reference is not timed.
        ep2, s2 = play_correct(c, "second")
        info = s2["info"]
        b2 = info["baseline"]
        check(b2 is not None and b2["source"] == "cached", f"second baseline cached: {b2}")
        check(info["baseline_us"] == base, f"info.baseline_us {info['baseline_us']} is the "
              f"cached {base}, not 0")
        check(b2["us"] == base and b2["iters"] == b1["iters"] and b2["cv"] == b1["cv"],
              "the cached entry keeps the measurement's CV and repetitions")
        check(abs(b2["measured_at"] - b1["measured_at"]) < 1.0, "and when it was taken")
        check(close(info["speedup"], base / info["time_us"]), "speedup = cached baseline / time")
        fb = s2["observation"]["feedback"]
        figure = f"baseline {base:.1f} us"
        check(figure in fb, f"feedback names the cached baseline ({figure}): {fb}")
        check("baseline 0.0 us" not in fb, "feedback never says baseline 0.0")
        t = c.trajectory(ep2)
        prompt2 = t["turns"][0]["prompt"]
        res = t["turns"][0]["result"]
        check(res["reference"]["median_us"] == 0, "the reference was not timed in this step")
        check(close(res["baseline"]["us"], base) and res["baseline"]["source"] == "cached",
              f"the stored result carries the cached baseline: {res['baseline']}")
        stats = c.stats()
        check(stats["cache"]["baseline_hits"] >= 1, f"a baseline cache hit: {stats['cache']}")
        # The reward parts sum to the reward (Kevin: 0.3 + speedup).
        parts = info["reward_parts"]
        check(close(parts["total"], s2["reward"]) and close(parts["correctness"], 0.3) and
              close(parts["speedup_term"], info["speedup"]) and
              close(parts["speedup"], info["speedup"]), f"reward parts {parts}")
        c.close()
    finally:
        check(srv.stop() == 0, "server exit code")

    db = os.path.join(data_dir, "trajectories.sqlite")
    # 3. The store: the baseline_us column of the cached turn, turns numbered from 1.
    con = sqlite3.connect(db)
    rows = con.execute("SELECT turn, baseline_us, feedback FROM turns WHERE episode_id = ?",
                       (ep2,)).fetchall()
    con.close()
    check(len(rows) == 1 and rows[0][0] == 1, f"one turn, numbered 1: {rows}")
    check(rows and rows[0][1] is not None and close(rows[0][1], base),
          f"store baseline_us {rows and rows[0][1]} == {base}")
    check(rows and figure in rows[0][2], "stored feedback names the cached baseline")

    # 4. The verified export.
    p = subprocess.run([PKGYM, "export", "--db", db, "--verified", "--episode", ep2],
                       capture_output=True, text=True, timeout=60)
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    check(p.returncode == 0 and len(lines) == 1, f"export: rc {p.returncode}, {len(lines)} lines")
    if lines:
        v = lines[0]
        check(close(v["baseline_us"], base), f"export baseline_us {v['baseline_us']} == {base}")
        check(v["baseline_source"] == "cached" and v["turn"] == 1, f"export record {v}")
        check(close(v["speedup"], info["speedup"], 1e-8), "export speedup")
        check(v["prompt"] == prompt2 and v["prompt"], "export carries the turn's exact prompt")

    # 5. --remeasure-baseline: the same data dir, the reference timed again.
    srv = Server("--gpus", "none", "--compile-workers", "1", "--baseline-max-cv", "1000",
                 "--remeasure-baseline", "--data-dir", data_dir)
    try:
        c = srv.client(timeout_s=300)
        ep3, s3 = play_correct(c, "third")
        b3 = s3["info"]["baseline"]
        check(b3 is not None and b3["source"] == "measured", f"remeasured: {b3}")
        res = c.trajectory(ep3)["turns"][0]["result"]
        check(res["reference"]["median_us"] > 0, "the reference was timed again")
        check(c.stats()["cache"]["baseline_hits"] == 0, "no cache hit with --remeasure-baseline")
        c.close()
    finally:
        check(srv.stop() == 0, "server exit code")
        srv.cleanup()
        first.cleanup()
    p = subprocess.run([PKGYM, "serve", "--help"], capture_output=True, text=True, timeout=30)
    check("--remeasure-baseline" in p.stdout and "--baseline-max-cv" in p.stdout and
          "--baseline-max-age-s" in p.stdout, "serve --help lists the baseline options")
    print("cached baseline:", "FAIL" if failures else f"ok ({base:.2f} us everywhere)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
