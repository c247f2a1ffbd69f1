#!/usr/bin/env python3
"""Acceptance: a GRPO group of 16 episodes x 4 turns on a selftest problem, run end to end
from the Python asyncio client by rollout/python/examples/grpo_group.py. Checks every turn's
printed return against an independent recomputation from the printed rewards (sum, gamma 0.4)
and the advantages' normalization."""
import glob
import os
import re
import statistics
import subprocess
import sys

from pkserver import SRC, Server, running, selftest_problems

G, T, GAMMA = 16, 4, 0.4


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    with running(Server(), 5000) as srv:
        c = srv.client()
        probs = selftest_problems(c)
        c.close()
        chosen = None
        for p in probs:
            suite, name = p["id"].split("/", 1)
            # Solutions that hang would only measure the run timeout.
            sols = sorted(f for f in glob.glob(os.path.join(SRC, "problems", suite, name,
                                                            "solutions", "*.cu"))
                          if "hang" not in os.path.basename(f))
            if sols:
                chosen = (p["id"], sols)
                break
        expect(chosen, "no served selftest problem has solutions/*.cu (this test's fixture)")
        pid, sols = chosen
        cmd = [sys.executable, os.path.join(SRC, "rollout", "python", "examples", "grpo_group.py"),
               "--endpoint", srv.endpoint, "--problem", pid, "-G", str(G), "-T", str(T),
               "--responses", *sols, "--with-garbage"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        print(out.stdout[-3000:])
        expect(out.returncode == 0, f"example failed: {out.stderr}")
        turns = re.findall(r"turn (\d): (\w+)\s+reward\s+(-?[\d.]+) return\s+(-?[\d.]+) "
                           r"advantage ([-+][\d.]+)", out.stdout)
        expect(len(turns) == G * T, f"{len(turns)} turn lines, want {G * T}")
        returns = []
        for g in range(G):
            ep = turns[g * T:(g + 1) * T]
            expect([int(t[0]) for t in ep] == list(range(1, T + 1)), "turn numbering")
            rewards = [float(t[2]) for t in ep]
            acc = 0.0
            want = []
            for r in reversed(rewards):
                acc = r + GAMMA * acc
                want.append(acc)
            want.reverse()
            got = [float(t[3]) for t in ep]
            expect(all(abs(a - b) < 2e-4 for a, b in zip(got, want)), f"returns {got} != {want}")
            returns += got
        statuses = {t[1] for t in turns}
        expect("format_error" in statuses, "the garbage response gives format_error")
        adv = [float(t[4]) for t in turns]
        expect(abs(statistics.fmean(adv)) < 1e-3, "advantages have mean 0")
        if statistics.pstdev(returns) > 1e-6:
            expect(abs(statistics.pstdev(adv) - 1) < 1e-2, "advantages have std 1")
        print(f"grpo group: ok ({G}x{T} on {pid}, statuses {sorted(statuses)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
