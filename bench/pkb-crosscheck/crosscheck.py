#!/usr/bin/env python3
"""Cross-checks pkgym's native reference against an independent implementation, on exactly
the inputs pkgym generated, and measures both against an fp64 evaluation.

Run under torchrun, one process per rank (what the dumps were made with):

    pkgym check --problem ID --reference --skip-timing --dump DIR [--regime iid]
    torchrun --nproc-per-node W crosscheck.py --dump DIR [DIR...] [--pkb PKB_DIR] [--device cuda|cpu]

Several dumps (of several problems, one world size) are checked in one run, so PyTorch and
the process group start once.

For every trial and rank it loads the inputs and pkgym's reference outputs, runs the problem's
adapter (adapters/<suite>_<id>.py: usually ParallelKernelBench's own solution() from --pkb; for
problems that are not PKB's (cuco/) a PyTorch solution() of ours, local/<LOCAL_REFERENCE>)
in the problem's dtypes and again on fp64 copies of the inputs, then reports, per output:
  - cross-check: pkgym's reference against the adapter, within pkgym's tolerance;
  - the largest error of each implementation against fp64, the (atol, rtol) pair derived from
    them, and whether the output's own tolerance accepts 4x either error at every element (the
    rule in docs/problems.md, "Tolerances");
  - the largest norm-wise error of each against fp64 and the norm_rtol derived from it, and the
    input regimes the trials drew (the calibration of issue #26: dump without --regime and
    with 5 trials, so every regime is seen).
Rank 0 prints one JSON object per dump and a summary line (--report FILE also appends each
object, on one line, to FILE); the exit status is 0 only when every comparison passed and every
allclose tolerance follows the rule.

--time-pkb (CUDA only) also times PKB's solution() on the first trial's inputs (time_pkb below):
pkb_us is its median per-call time, the slowest rank's per call, as pkgym times its reference,
so that a native reference much slower than PKB's own shows (docs/problems.md, "Tolerances"
and "How to port a ParallelKernelBench problem").
"""
import argparse
import importlib.util
import inspect
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
          "f64": torch.float64, "i32": torch.int32, "i64": torch.int64,
          "f8e4m3": torch.float8_e4m3fn, "i8": torch.int8, "u8": torch.uint8}
RAW = {"bf16": torch.int16, "f16": torch.int16, "f8e4m3": torch.uint8}  # raw bits, then viewed
SAFETY = 4.0  # the rule's margin over the larger measured error


def load(path, dtype_name, count, device):
    raw = RAW.get(dtype_name, DTYPES[dtype_name])
    t = torch.from_file(path, shared=False, size=count, dtype=raw)
    return t.view(DTYPES[dtype_name]).to(device)


def load_adapter(problem):
    adapters = os.path.join(HERE, "adapters")
    path = os.path.join(adapters, problem.replace("/", "_") + ".py")
    if not os.path.exists(path):
        raise RuntimeError("no adapter for %s (expected %s)" % (problem, path))
    if adapters not in sys.path:  # adapters import their shared helpers (adapters/_*.py)
        sys.path.append(adapters)
    spec = importlib.util.spec_from_file_location("adapter", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_pkb(pkb_dir, reference):
    path = os.path.join(pkb_dir, "reference", reference)
    spec = importlib.util.spec_from_file_location("pkb_reference", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_local(reference):
    """A reference written here (local/<name>), for problems that are not PKB's (cuco/): the
    adapter names it LOCAL_REFERENCE; it is run and timed as PKB's solution() is."""
    path = os.path.join(HERE, "local", reference)
    spec = importlib.util.spec_from_file_location("local_reference", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def round_up(x):
    """Up to 1, 2 or 5 times a power of ten (0 stays 0)."""
    if x <= 0:
        return 0.0
    e = math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * 10.0 ** e >= x * (1 - 1e-12):
            return m * 10.0 ** e
    return 10.0 ** (e + 1)


def rule_ratio(got, want, arg):
    """The largest SAFETY x |got - want| over what the output's own allclose tolerance allows at
    want (atol + atol_rms x rms(want) + rtol x |want|): at most 1 when the tolerance accepts 4x
    this implementation's error against fp64 everywhere (inf where it allows nothing)."""
    if not want.numel():
        return 0.0
    err = SAFETY * (got.double() - want).abs().nan_to_num(float("inf"))
    allow = arg["atol"] + arg["rtol"] * want.abs()
    if arg.get("atol_rms"):
        allow = allow + arg["atol_rms"] * float(want.pow(2).mean().sqrt())
    ratio = torch.where(err > 0, err / allow, torch.zeros_like(err))
    return float(ratio.nan_to_num(float("inf")).max())


def needed_atol_rms(got, want, arg):
    """The smallest atol_rms that, with the output's own atol and rtol, accepts 4x this
    implementation's error against fp64 at every element (the rule's fix for an output whose
    errors scale with the whole output, not the element: ramps, heavy tails, cancellation)."""
    w = want.double()
    if not w.numel():
        return 0.0
    rms = float(w.pow(2).mean().sqrt())
    short = SAFETY * (got.double() - w).abs().nan_to_num(float("inf")) - arg["atol"] - \
        arg["rtol"] * w.abs()
    worst = float(short.max())
    if worst <= 0:
        return 0.0
    return worst / rms if rms > 0 else float("inf")


class Errors:
    """Largest errors against fp64: relative where |want| >= 1e-3 max |want| ("big"), absolute
    where it is smaller (there a relative tolerance gives no room)."""

    def __init__(self):
        self.rel = 0.0
        self.small_abs = 0.0

    def add(self, got, want):
        if not want.numel():
            return
        err = (got.double() - want).abs()
        mag = want.abs()
        big = mag >= 1e-3 * max(float(mag.max()), 1e-300)
        if big.any():
            self.rel = max(self.rel, float((err[big] / mag[big]).max()))
        if (~big).any():
            self.small_abs = max(self.small_abs, float(err[~big].max()))


def norm_wise(got, want, arg):
    """The norm-wise error the harness checks (docs/problems.md, "Tolerances"): |got - want|_2
    over |want|_2, on the elements where rtol |want| >= atol (all of them when rtol is 0)."""
    g, w = got.double().flatten(), want.double().flatten()
    keep = (w.abs() * arg["rtol"] >= arg["atol"]) if arg["rtol"] > 0 else torch.ones_like(w).bool()
    if not keep.any():
        return 0.0
    ref = float(w[keep].norm())
    return float((g[keep] - w[keep]).norm()) / ref if ref > 0 else 0.0


def close(a, b, arg):
    """pkgym's checkers (docs/problems.md): allclose |a - b| <= atol + atol_rms rms(b) +
    rtol |b| with no NaN; exact; budget (a share of elements may miss by max_ulp; for floats
    the steps are counted in the dtype's codes, for integers as differences)."""
    atol, rtol = (0.0, 0.0) if arg["checker"] == "exact" else (arg["atol"], arg["rtol"])
    a64, b64 = a.double(), b.double()
    if arg.get("atol_rms"):
        atol += arg["atol_rms"] * float(b64.pow(2).mean().sqrt()) if b64.numel() else 0.0
    bad = ((a64 - b64).abs() > atol + rtol * b64.abs()) | a64.isnan() | b64.isnan()
    diff = float((a64 - b64).abs().nan_to_num(float("inf")).max()) if a.numel() else 0.0
    if arg["checker"] == "budget" and bad.any():
        if a.is_floating_point():
            bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
            def order(t):
                x = t.contiguous().view(bits).long()
                if t.element_size() < 8:
                    x = x & ((1 << (8 * t.element_size())) - 1)
                sign = 1 << (8 * t.element_size() - 1)
                return torch.where(x & sign != 0, -(x & (sign - 1)), x)
            steps = (order(a) - order(b)).abs()
        else:
            steps = (a.long() - b.long()).abs()
        ok = int(bad.sum()) <= int(arg["budget"] * a.numel()) and \
            int(steps[bad].max()) <= arg["max_ulp"] and not bool((a64.isnan() | b64.isnan()).any())
        return ok, diff
    return not bool(bad.any()), diff


def timing_stats(us):
    """problems/runner/stats.c's rn_timing_stats: median (the mean of the two middle samples for
    an even count), mean, min and CV (sample standard deviation over the mean)."""
    s, n = sorted(us), len(us)
    if not n:
        return {"median_us": None, "mean_us": None, "min_us": None, "cv": None, "iters": 0}
    mean = sum(s) / n
    cv = math.sqrt(sum((x - mean) ** 2 for x in s) / (n - 1)) / mean if n > 1 and mean > 0 else 0.0
    return {"median_us": s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2]),
            "mean_us": mean, "min_us": s[0], "cv": cv, "iters": n}


class CallTimer:
    """Brackets one call with events on the current stream (CUDA), or with the host clock after
    a barrier (CPU: only for testing the loop with --time-pkb-host; no L2 there to flush)."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.device = device
        self.flush_buf = None
        if self.cuda:
            props = torch.cuda.get_device_properties(device)
            l2 = int(getattr(props, "L2_cache_size", 0) or getattr(props, "l2_cache_size", 0)
                     or 50 << 20)
            # pkgym's flush: a read of 2 x L2 bytes of a buffer set once (backend_gpu.cu).
            self.flush_buf = torch.ones(2 * l2 // 4, dtype=torch.int32, device=device)

    def sync_ranks(self):
        if self.cuda:
            dist.barrier(device_ids=[self.device.index])
            torch.cuda.synchronize(self.device)
        else:
            dist.barrier()

    def flush_l2(self):
        if self.flush_buf is not None:
            self.flush_buf.sum()  # a read kernel on the current stream; the result is dropped

    def mark(self):
        if not self.cuda:
            return time.perf_counter()
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def elapsed_us(self, start, end):
        if not self.cuda:
            return (end - start) * 1e6
        return start.elapsed_time(end) * 1e3  # ms


def time_pkb(args, adapter, pkb, inputs, dims, world, rank, extra, device):
    """PKB's solution() timed per call, in pkgym's terms (problems/runner/timing.c).

    Every iteration calls the adapter's run() (the problem's dtypes) on fresh clones of the
    first trial's inputs: several solutions update their inputs in place (21/22 clip the
    gradients, 41-43 and 47 the Adam moments, 73 the logits), so a call never sees the values an
    earlier one left. Only the solution() call itself is timed: pkb.solution is replaced, for
    the duration, by a wrapper that flushes the L2 (a 2 x L2 read, as pkgym's epilogue does;
    it also evicts the clones' dirty lines) and then brackets the call alone with events on the
    current stream; the adapter's own work before and after (views, splits, the flattening of
    outputs) and the clones stay outside. args.pkb_warmup untimed iterations, then
    args.pkb_iters timed ones, twice:

    - "per call" (pkb_us): before each call, a dist.barrier() and torch.cuda.synchronize(), so
      the ranks start each call together from an idle GPU. The L2 flush (tens of us) is then
      the only head start the host has over the GPU: a solution that launches its kernels
      slower than the GPU runs them (PyTorch's per-op overhead) pays for that, and so does one
      that synchronizes with the host (.item(), .tolist(), boolean indexing).
    - "back to back" (pkb_timing.back_to_back): one barrier before the block, then the calls
      with no host synchronization between them, as pkgym runs its timed blocks: the host can
      run ahead by whole calls.

    Both take each call's time on every rank, then the slowest rank's per call, then the median
    over calls (and the CV), as pkgym does. What differs from pkgym's timing of its reference:
    the same input values in every call (pkgym draws fresh ones: here clones of one draw), no
    interleaving with a candidate and one block per mode instead of 2 interleaved blocks; the
    per-call mode also adds the barrier before every call. PKB's own utils/performance.py
    differs again: it reports the mean over back-to-back calls of one rank, with no flush (it
    cycles through input copies instead)."""
    timer = CallTimer(device)
    real = pkb.solution
    pending, state = [], {"timed": False, "sync_each": True, "calls": 0}

    def timed_solution(*a, **kw):
        state["calls"] += 1
        if state["sync_each"]:
            timer.sync_ranks()
        timer.flush_l2()
        t0 = timer.mark()
        out = real(*a, **kw)
        t1 = timer.mark()
        if state["timed"]:
            pending.append((t0, t1))
        return out

    def iterate(n):
        for _ in range(n):
            fresh = {k: v.clone() for k, v in inputs.items()}
            state["calls"] = 0
            got = adapter.run(pkb, fresh, dims, world, rank, **extra)
            if state["calls"] != 1:
                raise RuntimeError("the adapter called solution() %d times in one run()"
                                   % state["calls"])
            del fresh, got

    def block(sync_each):
        state["sync_each"], state["timed"] = sync_each, True
        del pending[:]
        timer.sync_ranks()
        iterate(args.pkb_iters)
        timer.sync_ranks()  # every event has completed
        mine = torch.tensor([timer.elapsed_us(a, b) for a, b in pending], dtype=torch.float64,
                            device=device)
        parts = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(parts, mine)
        per_call = torch.stack(parts).max(dim=0).values.tolist()  # the slowest rank, per call
        return timing_stats(per_call)

    pkb.solution = timed_solution
    try:
        state["timed"] = False
        timer.sync_ranks()
        iterate(args.pkb_warmup)
        per_call = block(True)
        back_to_back = block(False)
    finally:
        pkb.solution = real
    return dict(per_call, warmup=args.pkb_warmup, clock="cuda events" if timer.cuda else "host",
                back_to_back=back_to_back)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump", required=True, nargs="+")
    ap.add_argument("--pkb", default=os.environ.get("PKB_DIR"))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--report", help="also append each dump's JSON object, one a line, here")
    ap.add_argument("--time-pkb", action="store_true",
                    help="time PKB's solution() on the first trial's inputs (CUDA problems)")
    ap.add_argument("--time-pkb-host", action="store_true",
                    help="with --device cpu: time it by the host clock anyway (a test of the "
                    "timing loop, not a measurement)")
    ap.add_argument("--pkb-warmup", type=int, default=20, help="untimed calls first")
    ap.add_argument("--pkb-iters", type=int, default=50, help="timed calls per mode")
    args = ap.parse_args()
    if args.pkb_iters < 1 or args.pkb_warmup < 0:
        ap.error("--pkb-iters must be >= 1 and --pkb-warmup >= 0")
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", rank % torch.cuda.device_count()) if args.device == "cuda" \
        else torch.device("cpu")
    if args.device == "cuda":
        torch.cuda.set_device(device)
    failed, timed = [], 0
    for dump in args.dump:
        try:
            ok, report = check_dump(args, dump, rank, world, device)
        except Exception as e:  # one problem's adapter error must not hide the others
            ok, report = False, {"dump": dump, "error": repr(e)}
        if rank == 0:
            emit(args, report)
        timed += report.get("pkb_us") is not None
        if not ok:
            failed.append(dump)
        dist.barrier()
    if rank == 0:
        print("crosscheck: %d passed, %d failed%s%s" % (
            len(args.dump) - len(failed), len(failed),
            (": " + " ".join(failed)) if failed else "",
            "; PKB timed on %d of %d" % (timed, len(args.dump)) if args.time_pkb else ""))
    dist.destroy_process_group()
    return 0 if not failed else 1


def emit(args, report):
    """Rank 0's output for one dump: the JSON object, a line with PKB's time, and the object on
    one line in --report."""
    print(json.dumps(report, indent=1))
    if "pkb_us" in report:
        t = report["pkb_timing"]
        if report["pkb_us"] is None:
            print("pkb time %s: %s" % (report["problem"], t.get("skipped") or t.get("error")))
        else:
            b2b = t["back_to_back"]
            print("pkb time %s: %.1f us per call (cv %.1f%%), %.1f us back to back (cv %.1f%%), "
                  "%d calls, slowest rank per call, median" % (
                      report["problem"], report["pkb_us"], 100 * t["cv"], b2b["median_us"],
                      100 * b2b["cv"], t["iters"]))
    sys.stdout.flush()
    if args.report:
        with open(args.report, "a") as f:
            f.write(json.dumps(report) + "\n")


def ref_out_float(man, arg):
    return arg["dtype"] in ("bf16", "f16", "f32", "f64", "f8e4m3")


def load_trial(man, dump, t, rank, device, outputs=True):
    """Trial t's inputs and pkgym's reference outputs on this rank, by argument name."""
    inputs, ref_out = {}, {}
    for a in man["args"]:
        base = os.path.join(dump, "t%d_r%d_%s" % (t, rank, a["name"]))
        if a["role"] != "output":
            inputs[a["name"]] = load(base + ".bin", a["dtype"], a["count"], device)
        if a["role"] != "input" and outputs:
            ref_out[a["name"]] = load(base + ".out.bin", a["dtype"], a["count"], device)
    return inputs, ref_out


def run_extra(adapter, dump, t):
    """The call's params (meta.json "params", which may depend on the trial) and the trial, for
    adapters that take them."""
    extra = {}
    takes = inspect.signature(adapter.run).parameters
    params_path = os.path.join(dump, "t%d_params.json" % t)
    if "params" in takes and os.path.exists(params_path):
        with open(params_path) as f:
            extra["params"] = json.load(f)
    if "trial" in takes:
        extra["trial"] = t
    return extra


def check_dump(args, dump, rank, world, device):
    """Checks one dump; returns (every comparison passed and the rule holds, the report)."""
    with open(os.path.join(dump, "manifest.json")) as f:
        man = json.load(f)
    if man["world"] != world:
        raise RuntimeError("dump made at world %d, run with %d ranks" % (man["world"], world))
    adapter = load_adapter(man["problem"])
    pkb = load_pkb(args.pkb, adapter.PKB_REFERENCE) if getattr(adapter, "PKB_REFERENCE", None) \
        else None
    if getattr(adapter, "LOCAL_REFERENCE", None):  # cuco/: a reference of ours, local/<name>
        pkb = load_local(adapter.LOCAL_REFERENCE)
    if getattr(adapter, "PKB_REFERENCE", None) and pkb is None:
        raise RuntimeError("%s needs --pkb (a ParallelKernelBench checkout)" % man["problem"])
    outputs = [a for a in man["args"] if a["role"] != "input"]
    state = {a["name"]: {"pass": True, "max_diff": 0.0, "ref": Errors(), "alt": Errors(),
                         "ratio": 0.0, "norm_ref": 0.0, "norm_alt": 0.0, "need_rms": 0.0,
                         "by_regime": {}} for a in outputs}
    regimes = {}  # the input regimes the dump's trials drew (t<trial>_regimes.json), counted
    trials = 0
    while os.path.exists(os.path.join(dump, "t%d_r%d_%s%s.bin" % (
            trials, rank, man["args"][0]["name"],
            "" if man["args"][0]["role"] != "output" else ".out"))):
        trials += 1
    dims = man["dims"]
    for t in range(trials):
        reg_path = os.path.join(dump, "t%d_regimes.json" % t)
        trial_regime = "none"  # this trial's regimes, for the per-regime ratios below
        if os.path.exists(reg_path):
            with open(reg_path) as f:
                names = set(json.load(f).values())
            for name in names:
                regimes[name] = regimes.get(name, 0) + 1
            trial_regime = "+".join(sorted(names)) or "none"
        inputs, ref_out = load_trial(man, dump, t, rank, device)
        extra = run_extra(adapter, dump, t)
        got = adapter.run(pkb, {k: v.clone() for k, v in inputs.items()}, dims, world, rank,
                          **extra)
        as64 = {k: v.double() if v.is_floating_point() else v.clone() for k, v in inputs.items()}
        want = adapter.run(pkb, as64, dims, world, rank, fp64=True, **extra)
        for a in outputs:
            n = a["name"]
            if a["checker"] == "custom":  # the adapter judges outputs that are not unique
                ok, diff = adapter.compare(n, ref_out[n], got[n], inputs, dims, world, rank)
            else:
                ok, diff = close(ref_out[n], got[n].to(ref_out[n].dtype), a)
            s = state[n]
            s["pass"] &= ok
            s["max_diff"] = max(s["max_diff"], diff)
            if ref_out[n].is_floating_point() and a["checker"] != "custom":
                s["ref"].add(ref_out[n], want[n].double())
                s["alt"].add(got[n], want[n].double())
                by = s["by_regime"].setdefault(trial_regime, [0.0, 0.0, 0.0])
                if a["checker"] == "allclose":
                    r = max(rule_ratio(ref_out[n], want[n].double(), a),
                            rule_ratio(got[n], want[n].double(), a))
                    s["ratio"] = max(s["ratio"], r)
                    need = max(needed_atol_rms(ref_out[n], want[n], a),
                               needed_atol_rms(got[n], want[n], a))
                    s["need_rms"] = max(s["need_rms"], need)
                    by[0], by[1] = max(by[0], r), max(by[1], need)
                if a["checker"] in ("allclose", "budget"):
                    nr = norm_wise(ref_out[n], want[n], a)
                    na = norm_wise(got[n], want[n], a)
                    s["norm_ref"] = max(s["norm_ref"], nr)
                    s["norm_alt"] = max(s["norm_alt"], na)
                    by[2] = max(by[2], nr, na)
    report = {"problem": man["problem"], "world": world, "trials": trials, "dims": man["dims"],
              "regimes": regimes, "outputs": {}}
    all_ok = True
    for a in outputs:
        s = state[a["name"]]
        vals = torch.tensor([0.0 if s["pass"] else 1.0, s["max_diff"], s["ref"].small_abs,
                             s["ref"].rel, s["alt"].small_abs, s["alt"].rel,
                             min(s["ratio"], 1e300), s["norm_ref"], s["norm_alt"]],
                            dtype=torch.float64, device=device)
        dist.all_reduce(vals, op=dist.ReduceOp.MAX)
        failed, diff, rabs, rrel, aabs, arel, ratio, nref, nalt = vals.tolist()
        # Per regime (the same trials, so the same keys, on every rank): the rule's ratio, the
        # atol_rms that would make it hold, and the norm-wise error against fp64.
        keys = sorted(s["by_regime"])
        by = torch.tensor([min(v, 1e300) for k in keys for v in s["by_regime"][k]] or [0.0],
                          dtype=torch.float64, device=device)
        dist.all_reduce(by, op=dist.ReduceOp.MAX)
        by = by.tolist()
        need = torch.tensor([min(s["need_rms"], 1e300)], dtype=torch.float64, device=device)
        dist.all_reduce(need, op=dist.ReduceOp.MAX)
        rtol = round_up(SAFETY * max(rrel, arel))
        atol = round_up(SAFETY * max(rabs, aabs))
        # The rule holds when the output's tolerance accepts 4x either implementation's error
        # against fp64 at every element (atol_rms included); exact, budget and custom
        # checkers define their outputs otherwise (codes, counted flips, admissible sets).
        applies = a["checker"] == "allclose" and ref_out_float(man, a)
        follows = ratio <= 1.0 if applies else None
        all_ok &= not failed and follows is not False
        report["outputs"][a["name"]] = {
            "crosscheck": "pass" if not failed else "FAIL", "max_abs_diff": diff,
            "reference_vs_fp64": {"rel": rrel, "abs_near_zero": rabs},
            "independent_vs_fp64": {"rel": arel, "abs_near_zero": aabs},
            "tolerance": {"atol": a["atol"], "rtol": a["rtol"],
                          "atol_rms": a.get("atol_rms", 0.0), "checker": a["checker"]},
            "derived_tolerance": {"atol": atol, "rtol": rtol},
            # the norm-wise check's errors against fp64 and the norm_rtol the 4x rule gives
            # (issue #26: calibrate on the regimes, XC_REGIME=all with XC_TRIALS=5)
            "norm_wise_vs_fp64": {"reference": nref, "independent": nalt},
            "norm_rtol": a.get("norm_rtol"),
            "derived_norm_rtol": round_up(SAFETY * max(nref, nalt)) if nref or nalt else 0.0,
            "rule_ratio": ratio if applies else None,
            "tolerance_follows_rule": follows,
            "needed_atol_rms": float(need[0]) if applies else None,
            "by_regime": {k: {"rule_ratio": by[3 * i] if applies else None,
                              "needed_atol_rms": by[3 * i + 1] if applies else None,
                              "norm_wise_vs_fp64": by[3 * i + 2]} for i, k in enumerate(keys)}}
    if args.time_pkb:
        report.update(pkb_time_report(args, adapter, pkb, man, dump, trials, world, rank, device))
    return all_ok, report


def pkb_time_report(args, adapter, pkb, man, dump, trials, world, rank, device):
    """pkb_us (median per-call time of PKB's solution(), slowest rank per call), pkb_cv and
    pkb_timing (the details), or pkb_us null and the reason."""
    if pkb is None:
        skipped = "no PKB solution() (the adapter's own PyTorch implementation)"
    elif device.type != "cuda" and not args.time_pkb_host:
        skipped = "host problem"
    elif not trials:
        skipped = "no trial in the dump"
    else:
        skipped = None
    if skipped:
        return {"pkb_us": None, "pkb_cv": None, "pkb_timing": {"skipped": skipped}}
    inputs, _ = load_trial(man, dump, 0, rank, device, outputs=False)
    try:
        t = time_pkb(args, adapter, pkb, inputs, man["dims"], world, rank,
                     run_extra(adapter, dump, 0), device)
    except Exception as e:  # the cross-check's verdict stands; the time is missing, and says why
        return {"pkb_us": None, "pkb_cv": None, "pkb_timing": {"error": repr(e)}}
    return {"pkb_us": t["median_us"], "pkb_cv": t["cv"], "pkb_timing": t}


if __name__ == "__main__":
    sys.exit(main())
