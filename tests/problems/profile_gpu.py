#!/usr/bin/env python3
"""The profile stage on the GPU (docs/feedback.md, "Profiles"), through `pkgym check --profile`:

  1. the correct all-reduce, timed, then profiled at the summary level: still `correct` with its
     timing (the verdict and the speedup are the timed run's), a timeline with work on both
     ranks, and feedback text naming the slowest rank and the dominating kernel;
  2. the two hand-made overlap cases of pkb/13 (bench/profile/overlap_serial.cu: the GEMM, then
     the all-reduce, one stream; overlap_streams.cu: the all-reduce of each GEMM block on a second
     stream): the overlap fraction, computed here again from the raw timeline, is about 0 for the
     first and clearly larger for the second, and the text reports the same figure.

Label gpu: exits 77 (skipped) without 2 GPUs. Prints every figure it checks."""
import json
import os
import subprocess
import sys
import tempfile

SRC = os.environ.get("PK_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__),
                                                                    "..", "..")))
PKGYM = os.environ["PKGYM"]
# The GEMM and the all-reduce take comparable time here (K = 4096: ~0.2 ms each on H200).
OVERLAP_DIMS = os.environ.get("PK_PROFILE_OVERLAP_DIMS", "M=4096,N=4096,K=4096")


def gpus():
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def check(problem, source, *extra, svg=None):
    args = [PKGYM, "check", "--problem", problem, source, "--json", *extra]
    if svg:
        args += ["--profile-svg", svg]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise AssertionError(f"pkgym check exited {r.returncode}: {r.stderr[-2000:]}")
    return json.loads(r.stdout)


def union(spans):
    out = []
    for lo, hi in sorted(s for s in spans if s[1] > s[0]):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out


def overlap(raw, rank):
    """pk_profile_overlap again, from the stored raw timeline: (fraction, comm_ns)."""
    iv = [v for v in raw["timeline"] if v["rank"] == rank]
    comm = union([(v["start_ns"], v["end_ns"]) for v in iv if v["kind"] == "comm"])
    comp = union([(v["start_ns"], v["end_ns"]) for v in iv if v["kind"] == "compute"])
    total = sum(hi - lo for lo, hi in comm)
    both = sum(max(0, min(a[1], b[1]) - max(a[0], b[0])) for a in comm for b in comp)
    return (both / total if total else -1), total


def profiled(r, what):
    p = r.get("profile")
    assert r["status"] == "correct", f"{what}: {r['status']}: {r['reason']}"
    assert p and p["status"] in ("ok", "partial"), f"{what}: profile {p and p['status']}: " \
        f"{p and p['reason']}"
    print(f"{what}: profile {p['status']} in {p['cost_s']:.1f} s"
          + (f" ({p['reason']})" if p["reason"] else ""))
    print("  " + (p["text"] or "").replace("\n", "\n  "))
    raw = p["raw"]
    assert raw["trace_ok"], f"{what}: no timeline: {raw['trace_error']}"
    return p, raw


def allreduce(tmp):
    sol = os.path.join(SRC, "problems/collectives/allreduce/solutions/correct.cu")
    r = check("collectives/allreduce", sol, "--trials", "1", "--profile", "summary",
              svg=os.path.join(tmp, "allreduce.svg"))
    p, raw = profiled(r, "collectives/allreduce (timed, summary)")
    assert r["has_timing"] and r["speedup"] > 0, "the verdict and speedup of the timed run"
    ranks = {v["rank"] for v in raw["timeline"]}
    assert ranks == {0, 1}, f"timeline ranks {ranks}"
    assert "slowest rank:" in p["text"] and "dominating kernel:" in p["text"], p["text"]
    assert "<rect " in open(os.path.join(tmp, "allreduce.svg")).read(), "SVG has no box"


def overlap_cases():
    fractions = {}
    for name in ("overlap_serial", "overlap_streams"):
        sol = os.path.join(SRC, "bench", "profile", name + ".cu")
        r = check("pkb/13_gemm_allreduce", sol, "--dims", OVERLAP_DIMS, "--trials", "1",
                  "--skip-timing", "--profile", "summary")
        p, raw = profiled(r, f"pkb/13 {name} ({OVERLAP_DIMS})")
        worst = None
        for rank in (0, 1):
            f, comm = overlap(raw, rank)
            assert comm > 0, f"{name}: rank {rank} shows no communication"
            print(f"  {name}: rank {rank}: overlap {f:.3f} of {comm / 1e3:.1f} us")
            worst = f if worst is None else min(worst, f)
        # The text reports the slowest rank's fraction, rounded to a percent.
        slowest = int(p["text"].split("slowest rank: ")[1].split(",")[0])
        f, _ = overlap(raw, slowest)
        assert f"{100 * f:.0f}% of it" in p["text"], (f, p["text"])
        fractions[name] = worst
    serial, streams = fractions["overlap_serial"], fractions["overlap_streams"]
    assert serial <= 0.05, f"serialised GEMM and all-reduce: overlap {serial:.3f}"
    assert streams >= 0.25 and streams >= serial + 0.2, \
        f"two streams: overlap {streams:.3f} (serial {serial:.3f})"
    print(f"overlap: serial {serial:.3f}, two streams {streams:.3f}: ok")


def main():
    if not os.path.exists("/dev/nvidia0") or gpus() < 2:
        print("needs 2 GPUs: skipped")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        allreduce(tmp)
        overlap_cases()
    return 0


if __name__ == "__main__":
    sys.exit(main())
