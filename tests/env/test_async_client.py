#!/usr/bin/env python3
"""The asyncio client against a real server: hello, problems, close_episode, trajectory, stats;
reset_group opens a GRPO group in one call (one label, one seed, every member the same inputs)
and is all or nothing; step_group steps a group at once. Host-only selftest problem."""
import asyncio
import os
import sys
import time

from pkserver import SRC, Server, running

from pkgym_client import AsyncClient, ServerError

PROBLEM = "selftest/scale"


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def action(name):
    with open(os.path.join(SRC, "problems", "selftest", "scale", "solutions", name)) as f:
        return "```cuda\n" + f.read() + "\n```\nsummary"


async def run(endpoint):
    ac = AsyncClient(endpoint, timeout_s=300)
    try:
        h = await ac.hello()
        expect(h["protocol"] == 1 and h["server"]["name"] == "pkgym", f"hello {h}")
        probs = await ac.list_problems(tags=["selftest"])
        expect(PROBLEM in [p["id"] for p in probs], f"list_problems {probs}")
        g = await ac.get_problem(PROBLEM)
        expect(g["problem"]["id"] == PROBLEM and g["messages"][0]["role"] == "system", "get_problem")
        base = (await ac.stats())["episodes_open"]

        # A group of 4 in one call: one label, one seed, all open.
        t0 = time.monotonic()
        replies = await ac.reset_group(PROBLEM, 4, group="g-async", max_turns=2)
        reset_s = time.monotonic() - t0
        eps = [r["episode"] for r in replies]
        expect(len(set(eps)) == 4, f"4 distinct episodes {eps}")
        seeds = {r["info"]["settings"]["seed"] for r in replies}
        groups = {r["info"]["settings"]["group"] for r in replies}
        expect(len(seeds) == 1 and None not in seeds, f"one shared seed {seeds}")
        expect(groups == {"g-async"}, f"group labels {groups}")
        expect((await ac.stats())["episodes_open"] == base + 4, "4 episodes open")

        # step_group: two correct, two wrong, all at once; same seed so same inputs.
        acts = [action("correct.cu"), action("wrong_rank.cu")] * 2
        s1 = await ac.step_group(eps, acts)
        expect([s["info"]["status"] for s in s1] == ["correct", "incorrect"] * 2,
               f"statuses {[s['info']['status'] for s in s1]}")
        s2 = await ac.step_group(eps, ["no code"] * 4)
        expect(all(s["truncated"] and s["info"]["returns"] for s in s2), "episodes ended")

        # trajectory and close_episode.
        t = await ac.trajectory(eps[0])
        expect(t["group"] == "g-async" and len(t["turns"]) == 2 and t["done"], f"trajectory {t}")
        c = await ac.close_episode(eps[0])
        expect(c["episode"] == eps[0] and c["turns"] == 2, f"close {c}")
        try:
            await ac.step(eps[0], "x")
            raise AssertionError("step after close succeeded")
        except ServerError as e:
            expect(e.code == "unknown_episode", f"step after close: {e.code}")
        for e in eps[1:]:
            await ac.close_episode(e)
        expect((await ac.stats())["episodes_open"] == base, "all closed")

        # All or nothing: a bad option fails every reset, and nothing stays open.
        try:
            await ac.reset_group(PROBLEM, 3, options={"check": {"trials": 0}})
            raise AssertionError("a group with a bad option opened")
        except ServerError as e:
            expect(e.code == "bad_request" and "3 of 3 resets failed" in e.message, str(e))
        # ...and when only some fail (the open-episode limit), the opened ones are closed.
        limit = h["limits"]["max_episodes"]
        try:
            await ac.reset_group(PROBLEM, limit + 2, max_turns=1)
            raise AssertionError("a group over max_episodes opened")
        except ServerError as e:
            expect(e.code == "overloaded" and "were closed" in e.message, str(e))
        expect((await ac.stats())["episodes_open"] == base, "no episode left open")

        # A default group: a fresh label and a random shared seed.
        replies = await ac.reset_group(PROBLEM, 2)
        settings = [r["info"]["settings"] for r in replies]
        expect(settings[0]["group"] == settings[1]["group"] and settings[0]["group"], "label")
        expect(settings[0]["seed"] == settings[1]["seed"] is not None, "shared seed")
        for r in replies:
            await ac.close_episode(r["episode"])
        return reset_s
    finally:
        await ac.close()


def main():
    with running(Server("--max-episodes", "16")) as srv:
        reset_s = asyncio.run(run(srv.endpoint))
    print(f"async client: ok (a group of 4 reset in {reset_s * 1000:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
