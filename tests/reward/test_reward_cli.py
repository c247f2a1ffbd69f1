"""`pkgym reward` and `pkgym export` end to end, on a store written through pk_store.

Scores are recomputed here independently (in Python, from the stored result JSON) and
compared with what pkgym prints, so the C and Python implementations check each other.
"""
import itertools
import json
import math
import os
import sqlite3
import subprocess
import sys
import tempfile

PKGYM = os.environ["PKGYM"]
FIXTURE = os.environ["PK_REWARD_FIXTURE"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    p = subprocess.run([PKGYM, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def close(a, b, tol=1e-9):
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


DEFAULT = dict(gamma=0.4, mode="sum", w_correct=0.3, transform="raw", clip_lo=0.0,
               clip_hi=10.0, r_compile=0.0, r_run=0.0, penalty_rejected=0.0,
               penalty_format=0.0, baseline="reference")


def score(cfg, status, result):
    speedup = 0.0
    if result:
        if cfg["baseline"] == "roofline":
            t = result.get("candidate", {}).get("median_us", 0)
            speedup = result.get("roofline_us", 0) / t if t > 0 else 0.0
        else:
            speedup = result.get("speedup", 0.0)
    term = 0.0
    if speedup > 0:
        term = {"raw": speedup, "log2": math.log2(speedup),
                "clip": min(max(speedup, cfg["clip_lo"]), cfg["clip_hi"])}[cfg["transform"]]
    s = cfg["w_correct"] + term if status == "correct" else 0.0
    if status in ("runtime_error", "timeout", "incorrect", "correct"):
        s += cfg["r_compile"]
    if status in ("incorrect", "correct"):
        s += cfg["r_run"]
    s -= cfg["penalty_rejected"] if status == "rejected" else 0.0
    s -= cfg["penalty_format"] if status == "format_error" else 0.0
    return s


def returns(cfg, scores):
    out, nxt = [0.0] * len(scores), None
    for t in range(len(scores) - 1, -1, -1):
        if nxt is None:
            r = scores[t]
        elif cfg["mode"] == "max":
            r = max(scores[t], cfg["gamma"] * nxt)
        else:
            r = scores[t] + cfg["gamma"] * nxt
        out[t], nxt = r, r
    return out


def expected(db, cfg, key):
    """Per episode: scores, returns; then advantages normalized per `key` set."""
    con = sqlite3.connect(db)
    eps = {}
    for eid, problem, group in con.execute("SELECT id, problem_id, group_id FROM episodes"):
        rows = con.execute("SELECT status, result_json FROM turns WHERE episode_id=?"
                           " ORDER BY turn", (eid,)).fetchall()
        s = [score(cfg, st, json.loads(r) if r else None) for st, r in rows]
        eps[eid] = dict(key=problem if key == "problem" else group, scores=s,
                        returns=returns(cfg, s))
    con.close()
    sets = {}
    for e in eps.values():
        sets.setdefault(e["key"], []).extend(e["returns"])
    for e in eps.values():
        rs = sets[e["key"]]
        mean = sum(rs) / len(rs)
        std = math.sqrt(sum((r - mean) ** 2 for r in rs) / len(rs))
        e["adv"] = [(r - mean) / (std + 1e-4) for r in e["returns"]]
    return eps


def compare(out, exp, label):
    n = 0
    for e in out["episodes"]:
        x = exp[e["episode_id"]]
        for t in e["turns"]:
            i = t["turn"] - 1  # turns are numbered from 1
            for k, want in (("score", x["scores"][i]), ("return", x["returns"][i]),
                            ("advantage", x["adv"][i])):
                check(close(t[k], want), f"{label}: {e['episode_id']} turn {i} {k} "
                                         f"{t[k]} != {want}")
            n += 1
    check(n == 48, f"{label}: {n} turns compared, want 48")


with tempfile.TemporaryDirectory() as d:
    db = os.path.join(d, "trajectories.db")
    subprocess.run([FIXTURE, db], check=True)

    # 1. Stored configs reproduce the online scores and returns.
    rc, out, err = run("reward", "--db", db)
    check(rc == 0, f"verify with stored configs: rc {rc}: {err}")
    check("0 turn(s) differ" in out and "1 trajectory(ies) without online returns" in out,
          "table footer reports no mismatch and one unfinished trajectory")
    rc, out, err = run("reward", "--db", db, "--json")
    check(rc == 0, "verify --json")
    res = json.loads(out)
    check(res["mismatches"] == 0 and res["unfinished"] == 1 and res["config"] is None,
          "JSON summary of the stored-config run")
    con = sqlite3.connect(db)
    stored_cfg = {eid: json.loads(c) for eid, c in
                  con.execute("SELECT id, config_json FROM episodes")}
    con.close()
    for e in res["episodes"]:
        c = dict(DEFAULT)
        c.update(stored_cfg[e["episode_id"]].get("reward", stored_cfg[e["episode_id"]]))
        x = expected(db, c, "problem")[e["episode_id"]]
        check([t["turn"] for t in e["turns"]] == [1, 2, 3, 4], "turns numbered from 1")
        for t in e["turns"]:
            check(close(t["score"], x["scores"][t["turn"] - 1]),
                  f"stored cfg score {e['episode_id']}")
            check(close(t["return"], x["returns"][t["turn"] - 1]), "stored cfg return")
            if e["finished"]:
                check(close(t["return"], t["online_return"]), "online return reproduced")
    check(len(res["episodes"]) == 12, "12 trajectories")
    n_correct = sum(t["status"] == "correct" for e in res["episodes"] for t in e["turns"])
    check(n_correct >= 3, f"fixture has correct turns ({n_correct})")

    # 2. Another config: every value matches the independent recomputation.
    cfg = {"gamma": 0.8, "transform": "clip", "clip_lo": 0.5, "clip_hi": 2.0, "r_run": 0.05,
           "penalty_rejected": 0.3}
    cfg_path = os.path.join(d, "ablation.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    full = dict(DEFAULT, **cfg)
    for key in ("problem", "group"):
        rc, out, err = run("reward", "--db", db, "--config", cfg_path, "--json",
                           "--normalize", key)
        check(rc == 0, f"--config --normalize {key}: rc {rc}: {err}")
        res = json.loads(out)
        check(res["normalize"] == key and res["config"]["gamma"] == 0.8, "JSON header")
        check(sorted(s["key"] for s in res["sets"]) ==
              (["allgather", "allreduce"] if key == "problem" else ["g0", "g1"]), "set keys")
        compare(res, expected(db, full, key), f"config/{key}")
    # Metrics over the same trajectories: pass@k (Chen et al.) and best@k by brute force.
    rc, out, err = run("reward", "--db", db, "--config", cfg_path, "--json", "--k", "3",
                       "--p", "1.2")
    res = json.loads(out)
    for m in res["metrics"]["problems"]:
        trajs = [e for e in res["episodes"] if e["problem_id"] == m["problem_id"]]
        best = [max([t["speedup"] for t in e["turns"] if t["status"] == "correct"] or [0.0])
                for e in trajs]
        n, c = len(trajs), sum(b > 0 for b in best)
        fast = sum(any(t["status"] == "correct" and t["speedup"] >= 1.2 for t in e["turns"])
                   for e in trajs)
        subsets = list(itertools.combinations(best, 3))
        check(m["trajectories"] == n and m["correct"] == c, f"metrics counts {m}")
        check(close(m["pass_at_k"], 1 - math.comb(n - c, 3) / math.comb(n, 3)), f"pass@3 {m}")
        check(close(m["best_at_k"], sum(max(x) for x in subsets) / len(subsets)), f"best@3 {m}")
        check(close(m["avg_at_k"], sum(best) / n), f"avg@3 {m}")
        check(close(m["fast_p"], fast / n), f"fast_1.2 {m}")
    rc, out, err = run("reward", "--db", db, "--config", cfg_path)
    check(rc == 0 and "allreduce-0" in out and "advantage" in out and "pass@k" in out,
          "table output")
    rc, out, err = run("reward", "--db", db, "--config", cfg_path, "--verify")
    check(rc == 1 and "differ" in err, "--verify fails when the config changes the rewards")

    # 3. A tampered online score or return is caught.
    con = sqlite3.connect(db)
    con.execute("UPDATE turns SET score = score + 0.001 WHERE episode_id='allreduce-1'"
                " AND turn=2")
    con.commit()
    con.close()
    rc, out, err = run("reward", "--db", db)
    check(rc == 1 and "MISMATCH" in out, f"tampered score detected (rc {rc})")
    rc, out, err = run("reward", "--db", db, "--json")
    check(rc == 1 and json.loads(out)["mismatches"] >= 1, "tampered score in JSON")

    # 4. Errors say what is wrong.
    with open(cfg_path, "w") as f:
        f.write('{"gama": 0.5}')
    rc, out, err = run("reward", "--db", db, "--config", cfg_path)
    check(rc == 2 and "gama" in err, "unknown config key named")
    rc, out, err = run("reward", "--db", os.path.join(d, "missing.db"))
    check(rc == 2 and "cannot open" in err, "missing store")
    rc, out, err = run("reward", "--db", db, "--normalize", "task")
    check(rc == 2, "bad --normalize")

    # 5. Export: one line per trajectory; --verified one per correct turn.
    rc, out, err = run("export", "--db", db)
    lines = [json.loads(l) for l in out.splitlines()]
    check(rc == 0 and len(lines) == 12, f"export: {len(lines)} lines")
    first = lines[0]
    check(first["task_prompt"] == "Implement the collective." and len(first["turns"]) == 4,
          "trajectory line fields")
    check(all(k in first["turns"][0] for k in ("prompt", "action", "summary", "code", "status",
                                                 "score", "feedback", "result")), "turn fields")
    check([t["turn"] for t in first["turns"]] == [1, 2, 3, 4], "export turns numbered from 1")
    check(sum(l["online_returns"] is None for l in lines) == 1, "one unfinished in export")
    out_path = os.path.join(d, "verified.jsonl")
    rc, out, err = run("export", "--db", db, "--verified", "--out", out_path)
    with open(out_path) as f:
        ver = [json.loads(l) for l in f]
    check(rc == 0 and len(ver) == n_correct, f"verified: {len(ver)} lines, want {n_correct}")
    check(all(v["code"].startswith("__global__") and v["speedup"] > 0 and v["summary"] == "plan"
              and v["result"]["status"] == "correct" for v in ver), "verified records")

    check(all(v["turn"] >= 1 and "prompt" in v and v["baseline_source"] == "measured"
              and v["baseline_us"] == 100.0 for v in ver), "verified: turn, prompt, baseline")

    # 6. Filters: --problem, --group, --episode, --since on reward and export.
    con = sqlite3.connect(db)
    con.execute("UPDATE episodes SET created_at = 1000")
    con.execute("UPDATE episodes SET created_at = 2000000000 WHERE id IN"
                " ('allreduce-2', 'allgather-3')")
    con.commit()
    con.close()

    def ids(*flags):
        rc, out, err = run("reward", "--db", db, "--json", "--config", cfg_path, *flags)
        check(rc in (0, 1), f"reward {flags}: rc {rc}: {err}")
        got = sorted(e["episode_id"] for e in json.loads(out)["episodes"])
        rc, out, err = run("export", "--db", db, *flags)
        check(rc == 0, f"export {flags}: rc {rc}: {err}")
        exp_ids = sorted(json.loads(l)["episode_id"] for l in out.splitlines())
        check(got == exp_ids, f"reward and export select the same episodes for {flags}")
        return got

    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    check(ids("--problem", "allgather") == [f"allgather-{j}" for j in range(6)], "--problem")
    check(ids("--problem", "allgather", "--problem", "allreduce") ==
          sorted(f"{p}-{j}" for p in ("allgather", "allreduce") for j in range(6)),
          "--problem twice: either")
    check(ids("--group", "g1") == sorted(f"{p}-{j}" for p in ("allgather", "allreduce")
                                         for j in (1, 3, 5)), "--group")
    check(ids("--group", "g1", "--problem", "allreduce") ==
          ["allreduce-1", "allreduce-3", "allreduce-5"], "--group and --problem")
    check(ids("--episode", "allreduce-4", "--episode", "allgather-0") ==
          ["allgather-0", "allreduce-4"], "--episode")
    check(ids("--since", "2030-01-01") == ["allgather-3", "allreduce-2"], "--since date")
    check(ids("--since", "1999999999") == ["allgather-3", "allreduce-2"], "--since epoch")
    check(ids("--since", "30000d") == sorted(f"{p}-{j}" for p in ("allgather", "allreduce")
                                            for j in range(6)) == ids(), "--since age")
    check(ids("--since", "1d") == ["allgather-3", "allreduce-2"], "--since 1d")
    check(ids("--problem", "nope") == [], "no match")
    rc, out, err = run("reward", "--db", db, "--since", "yesterday")
    check(rc == 2 and "--since" in err, "bad --since named")
    rc, out, err = run("export", "--db", db, "--problem")
    check(rc == 2 and "needs a value" in err, "--problem without a value")

    # 7. --config takes {"reward": {...}}, the shape of info.settings and reset's options.
    with open(cfg_path, "w") as f:
        json.dump({"reward": cfg, "feedback": {"budget_tokens": 8192}, "max_turns": 4,
                   "stop_on_correct": False}, f)
    rc, out, err = run("reward", "--db", db, "--config", cfg_path, "--json")
    check(rc == 0, f"settings-shaped config: rc {rc}: {err}")
    check(json.loads(out)["config"]["gamma"] == 0.8 and
          json.loads(out)["config"]["clip_hi"] == 2.0, "settings-shaped config read")
    with open(cfg_path, "w") as f:
        json.dump({"reward": cfg, "gama": 1}, f)
    rc, out, err = run("reward", "--db", db, "--config", cfg_path)
    check(rc == 2 and "gama" in err, "unknown key next to 'reward' named")

    # 8. --normalize group never merges episodes without a group: each is its own set.
    con = sqlite3.connect(db)
    con.execute("UPDATE episodes SET group_id = NULL WHERE id IN ('allreduce-0', 'allgather-0')")
    con.commit()
    con.close()
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    rc, out, err = run("reward", "--db", db, "--config", cfg_path, "--json", "--normalize",
                       "group")
    res = json.loads(out)
    check(rc == 0 and res["ungrouped"] == 2 and "2 episode(s) have no group" in err,
          f"ungrouped counted and said: {err}")
    keys = sorted(st["key"] for st in res["sets"])
    check(keys == ["(ungrouped) allgather-0", "(ungrouped) allreduce-0", "g0", "g1"],
          f"ungrouped episodes are sets of their own: {keys}")
    check(all(st["trajectories"] == 1 for st in res["sets"] if st["ungrouped"]), "one each")
    rc, out, err = run("reward", "--db", db, "--config", cfg_path, "--normalize", "group")
    check("each is normalized on its own" in out, "the table says so too")

print("reward cli:", "FAIL" if failures else "ok")
sys.exit(1 if failures else 0)
