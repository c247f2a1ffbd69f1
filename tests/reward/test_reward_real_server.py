"""Acceptance: `pkgym reward` reproduces the online rewards and returns of a real `pkgym serve`
run (server reward config plus per-episode overrides), on a host selftest problem (no GPU)."""
import json
import os
import subprocess
import sys

SRC = os.environ["PK_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SRC, "tests", "env"))
from pkserver import Server  # noqa: E402

PKGYM = os.environ["PKGYM"]
PROBLEM = "selftest/allreduce"
SOLUTIONS = os.path.join(SRC, "problems", "selftest", "allreduce", "solutions")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def response(name):
    if name is None:
        return "I will answer next turn (no code block)."
    with open(os.path.join(SOLUTIONS, name + ".cu"), encoding="utf-8") as f:
        return f"Here is my kernel.\n```cuda\n{f.read()}\n```\nSummary: {name}."


# Per episode: reward overrides (reset options) and the responses of its turns.
EPISODES = [
    (None, ["correct", None, "correct"]),
    ({"mode": "max", "transform": "log2", "penalty_format": 0.25},
     [None, "correct", "compile_error"]),
    ({"r_compile": 0.1, "r_run": 0.2, "gamma": 0.5}, ["compile_error", "correct", None]),
]


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def main():
    srv_tmp_cfg = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"pk-reward-cfg-{os.getpid()}")
    with open(srv_tmp_cfg, "w") as f:
        json.dump({"gamma": 0.8, "w_correct": 0.5}, f)
    srv = Server("--reward-config", srv_tmp_cfg)
    os.unlink(srv_tmp_cfg)
    online = {}
    try:
        c = srv.client(timeout_s=300)
        served = [p["id"] for p in c.list_problems()]
        if PROBLEM not in served:
            raise AssertionError(f"{PROBLEM}, this test's fixture, is not served ({served})")
        for i, (reward, names) in enumerate(EPISODES):
            r = c.reset(PROBLEM, seed=7 + i, max_turns=len(names), group=f"g{i % 2}",
                        options={"reward": reward} if reward else None)
            ep, scores, statuses = r["episode"], [], []
            for name in names:
                s = c.step(ep, response(name))
                scores.append(s["reward"])
                statuses.append(s["info"]["status"])
            online[ep] = (scores, s["info"]["returns"], statuses)
            c.close_episode(ep)
        c.close()
    finally:
        code = srv.stop()
        check(code == 0, f"server exit {code}")
    db = os.path.join(srv.data_dir, "trajectories.sqlite")
    try:
        p = subprocess.run([PKGYM, "reward", "--db", db, "--json"], capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 0, f"pkgym reward: rc {p.returncode}: {p.stderr}")
        res = json.loads(p.stdout)
        check(res["mismatches"] == 0 and res["unfinished"] == 0, "no mismatch, all finished")
        check(len(res["episodes"]) == len(EPISODES), "every episode stored")
        n_correct = 0
        for e in res["episodes"]:
            scores, returns, statuses = online[e["episode_id"]]
            check([t["status"] for t in e["turns"]] == statuses, f"statuses {e['episode_id']}")
            check(all(close(t["score"], s) for t, s in zip(e["turns"], scores)),
                  f"scores {e['episode_id']}: {[t['score'] for t in e['turns']]} vs {scores}")
            check(all(close(t["return"], r) for t, r in zip(e["turns"], returns)),
                  f"returns {e['episode_id']}: {[t['return'] for t in e['turns']]} vs {returns}")
            n_correct += statuses.count("correct")
        check(n_correct >= 2, f"the run has correct turns ({n_correct}): {online}")
        # The stored per-episode config mattered: the server default alone does not reproduce.
        cfg = os.path.join(srv.tmp, "server-default.json")
        with open(cfg, "w") as f:
            json.dump({"gamma": 0.8, "w_correct": 0.5}, f)
        p = subprocess.run([PKGYM, "reward", "--db", db, "--config", cfg, "--verify"],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 1, f"overrides are visible: rc {p.returncode}")
        p = subprocess.run([PKGYM, "export", "--db", db, "--verified", "--all-turns"],
                           capture_output=True, text=True, timeout=60)
        lines = [json.loads(x) for x in p.stdout.splitlines()]
        check(p.returncode == 0 and len(lines) == n_correct,
              f"export --verified --all-turns: {len(lines)}")
        check(all("solution" in x["code"] and x["task_prompt"] for x in lines), "export fields")
        # Without --all-turns: one line per kernel and problem (issue 31).
        kernels = {(x["problem_id"], x["kernel_hash"]) for x in lines}
        p = subprocess.run([PKGYM, "export", "--db", db, "--verified"], capture_output=True,
                           text=True, timeout=60)
        dedup = [json.loads(x) for x in p.stdout.splitlines()]
        check(p.returncode == 0 and len(dedup) == len(kernels),
              f"export --verified: {len(dedup)} lines, {len(kernels)} distinct kernels")
    finally:
        srv.cleanup()
    print("reward vs real server:", "FAIL" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
