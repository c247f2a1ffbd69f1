#!/usr/bin/env python3
"""crosscheck.py's timing of PKB's solution() (time_pkb), under torchrun with 2 ranks:

    torchrun --nproc-per-node 2 pkb_crosscheck_timing.py CROSSCHECK_PY cuda|cpu

- a solution that updates its input in place leaves the caller's inputs unchanged (every call
  gets fresh clones), and every call saw the original values;
- the time is the slowest rank's per call: rank r sleeps (r + 1) ms inside solution(), so the
  median and the minimum are the last rank's, not rank 0's;
- an adapter that calls solution() twice in one run() is refused;
- the statistics are problems/runner/stats.c's (median of an even count, CV with n - 1).
On cuda the calls are bracketed by CUDA events (the GPU sits idle while the host sleeps, so the
events see the sleep, less the L2 flush before the start event); on cpu by the host clock."""
import argparse
import importlib.util
import sys
import time
import types

import torch
import torch.distributed as dist


def main():
    spec = importlib.util.spec_from_file_location("crosscheck", sys.argv[1])
    xc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(xc)
    cuda = sys.argv[2] == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", rank % torch.cuda.device_count()) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    args = argparse.Namespace(pkb_warmup=3, pkb_iters=10)
    fails = []

    def check(cond, what):
        if not cond:
            fails.append(what)

    # 1. In place: solution() doubles x and records the sum it started from.
    seen = []

    def inplace(x):
        seen.append(float(x.sum()))
        return x.mul_(2)

    pkb = types.SimpleNamespace(solution=inplace)
    adapter = types.SimpleNamespace(
        run=lambda pkb, inputs, dims, world, rank: {"y": pkb.solution(inputs["x"])})
    x = torch.ones(1024, device=dev)
    t = xc.time_pkb(args, adapter, pkb, {"x": x}, {}, world, rank, {}, dev)
    check(torch.equal(x, torch.ones_like(x)), "the caller's input changed")
    check(seen == [1024.0] * (3 + 2 * 10), "a call saw changed inputs: %s" % seen[:8])
    check(pkb.solution is inplace, "pkb.solution not restored")
    check(t["iters"] == 10 and t["back_to_back"]["iters"] == 10 and t["warmup"] == 3,
          "counts: %s" % t)
    check(t["clock"] == ("cuda events" if cuda else "host"), "clock %s" % t["clock"])

    # 2. The slowest rank per call: rank r sleeps (r + 1) ms.
    slow = types.SimpleNamespace(solution=lambda x: time.sleep((rank + 1) * 1e-3) or x)
    t = xc.time_pkb(args, adapter, slow, {"x": x}, {}, world, rank, {}, dev)
    last = world * 1000.0
    check(0.9 * last <= t["median_us"] < last + 1500, "median %.0f us, slowest rank %.0f us"
          % (t["median_us"], last))
    check(t["min_us"] >= 0.9 * last, "min %.0f us below the slowest rank's %.0f us"
          % (t["min_us"], last))

    # 3. Two solution() calls in one run() are refused, on every rank.
    twice = types.SimpleNamespace(
        run=lambda pkb, inputs, dims, world, rank: {"y": pkb.solution(pkb.solution(inputs["x"]))})
    try:
        xc.time_pkb(args, twice, types.SimpleNamespace(solution=lambda x: x), {"x": x}, {},
                    world, rank, {}, dev)
        check(False, "two calls per run() accepted")
    except RuntimeError as e:
        check("2 times" in str(e), "message: %s" % e)

    # 4. rn_timing_stats.
    s = xc.timing_stats([4.0, 1.0, 3.0, 2.0])
    check((s["median_us"], s["mean_us"], s["min_us"]) == (2.5, 2.5, 1.0), "stats %s" % s)
    check(abs(s["cv"] - (5.0 / 3) ** 0.5 / 2.5) < 1e-12, "cv %s" % s["cv"])
    check(xc.timing_stats([3.0, 1.0, 2.0])["median_us"] == 2.0, "odd median")

    print("rank %d: %s" % (rank, "ok" if not fails else "FAILED: " + "; ".join(fails)),
          flush=True)
    bad = torch.tensor([float(bool(fails))], device=dev)
    dist.all_reduce(bad)
    dist.destroy_process_group()
    return 1 if bad.item() else 0


if __name__ == "__main__":
    sys.exit(main())
