#!/usr/bin/env python3
"""Runs one GRPO group: G parallel episodes of one problem, T turns each, pipelined over one
asyncio DEALER socket; prints every turn's reward and discounted return, then the
group-normalized advantages (over all G*T samples, as in Kevin).

There is no language model here: a stand-in policy answers each turn with a response drawn
(seeded) from the files given by --responses (e.g. a problem's solutions/*.cu, which are
wrapped in a ```cuda block) plus, with --with-garbage, a response that has no code block.
Replace `policy` with your model's sampler.

  python3 rollout/python/examples/grpo_group.py --problem selftest/scale \
      --responses problems/selftest/scale/solutions/correct.cu \
      problems/selftest/scale/solutions/wrong_rank.cu --with-garbage -G 16 -T 4

(from the repository root, against `pkgym serve` on its default endpoint; --endpoint for
another)
"""
import argparse
import asyncio
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pkgym_client import AsyncClient  # noqa: E402


def load_responses(paths, with_garbage):
    out = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            out.append(f"Here is my kernel.\n```cuda\n{f.read()}\n```\n"
                       f"Summary: submitted {os.path.basename(p)}.")
    if with_garbage:
        out.append("I will think about it and answer next turn (no code block).")
    if not out:
        sys.exit("grpo_group: give --responses FILE... and/or --with-garbage")
    return out


def policy(rng, responses, prompt):
    """The stand-in for a model: ignores the prompt, returns one response."""
    return rng.choice(responses)


async def episode(client, args, responses, g):
    rng = random.Random(args.seed * 1000 + g)
    r = await client.reset(args.problem, seed=args.seed, max_turns=args.turns, group=args.group)
    ep, prompt = r["episode"], r["observation"]["prompt"]
    rewards, statuses, info = [], [], {}
    while True:
        s = await client.step(ep, policy(rng, responses, prompt))
        prompt = s["observation"]["prompt"]
        info = s["info"]
        rewards.append(s["reward"])
        statuses.append(info["status"])
        if s["terminated"] or s["truncated"]:
            break
    await client.call("close", episode=ep)
    return {"episode": ep, "rewards": rewards, "statuses": statuses, "returns": info["returns"]}


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", default="tcp://127.0.0.1:5555")
    ap.add_argument("--problem", required=True)
    ap.add_argument("-G", "--group-size", type=int, default=16)
    ap.add_argument("-T", "--turns", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--group", default="grpo-example")
    ap.add_argument("--responses", nargs="*", default=[])
    ap.add_argument("--with-garbage", action="store_true")
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    responses = load_responses(args.responses, args.with_garbage)
    client = AsyncClient(args.endpoint, timeout_s=args.timeout)
    try:
        results = await asyncio.gather(
            *(episode(client, args, responses, g) for g in range(args.group_size)))
    finally:
        await client.close()
    samples = [ret for res in results for ret in res["returns"]]
    mean = statistics.fmean(samples)
    std = statistics.pstdev(samples)
    print(f"group '{args.group}': {len(results)} episodes x {args.turns} turns of "
          f"{args.problem}; returns mean {mean:.4f} std {std:.4f}")
    for g, res in enumerate(results):
        adv = [(ret - mean) / (std + 1e-6) for ret in res["returns"]]
        print(f"  episode {g:2d} {res['episode'][:8]}")
        for t, (st, rw, ret, a) in enumerate(zip(res["statuses"], res["rewards"],
                                                 res["returns"], adv), 1):
            print(f"    turn {t}: {st:13s} reward {rw:8.4f} return {ret:8.4f} advantage {a:+.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
