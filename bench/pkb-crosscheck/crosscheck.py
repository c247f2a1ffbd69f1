#!/usr/bin/env python3
"""Cross-checks pkgym's native reference against an independent implementation, on exactly
the inputs pkgym generated, and measures both against an fp64 evaluation.

Run under torchrun, one process per rank (what the dumps were made with):

    pkgym check --problem ID --reference --skip-timing --dump DIR
    torchrun --nproc-per-node W crosscheck.py --dump DIR [DIR...] [--pkb PKB_DIR] [--device cuda|cpu]

Several dumps (of several problems, one world size) are checked in one run, so PyTorch and
the process group start once.

For every trial and rank it loads the inputs and pkgym's reference outputs, runs the problem's
adapter (adapters/<suite>_<id>.py: usually ParallelKernelBench's own solution() from --pkb)
in the problem's dtypes and again on fp64 copies of the inputs, then reports, per output:
  - cross-check: pkgym's reference against the adapter, within pkgym's tolerance;
  - the largest error of each implementation against fp64, the (atol, rtol) pair derived from
    them, and whether the output's own tolerance accepts 4x either error at every element (the
    rule in docs/problems.md, "Tolerances").
Rank 0 prints one JSON object per dump and a summary line; the exit status is 0 only when every
comparison passed and every allclose tolerance follows the rule.
"""
import argparse
import importlib.util
import inspect
import json
import math
import os
import sys

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
    path = os.path.join(HERE, "adapters", problem.replace("/", "_") + ".py")
    if not os.path.exists(path):
        raise RuntimeError("no adapter for %s (expected %s)" % (problem, path))
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump", required=True, nargs="+")
    ap.add_argument("--pkb", default=os.environ.get("PKB_DIR"))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", rank % torch.cuda.device_count()) if args.device == "cuda" \
        else torch.device("cpu")
    if args.device == "cuda":
        torch.cuda.set_device(device)
    failed = []
    for dump in args.dump:
        try:
            ok = check_dump(args, dump, rank, world, device)
        except Exception as e:  # one problem's adapter error must not hide the others
            if rank == 0:
                print(json.dumps({"dump": dump, "error": repr(e)}))
            ok = False
        if not ok:
            failed.append(dump)
        dist.barrier()
    if rank == 0:
        print("crosscheck: %d passed, %d failed%s" % (len(args.dump) - len(failed), len(failed),
                                                       (": " + " ".join(failed)) if failed else ""))
    dist.destroy_process_group()
    return 0 if not failed else 1


def ref_out_float(man, arg):
    return arg["dtype"] in ("bf16", "f16", "f32", "f64", "f8e4m3")


def check_dump(args, dump, rank, world, device):
    with open(os.path.join(dump, "manifest.json")) as f:
        man = json.load(f)
    if man["world"] != world:
        raise RuntimeError("dump made at world %d, run with %d ranks" % (man["world"], world))
    adapter = load_adapter(man["problem"])
    pkb = load_pkb(args.pkb, adapter.PKB_REFERENCE) if getattr(adapter, "PKB_REFERENCE", None) \
        else None
    if getattr(adapter, "PKB_REFERENCE", None) and pkb is None:
        raise RuntimeError("%s needs --pkb (a ParallelKernelBench checkout)" % man["problem"])
    outputs = [a for a in man["args"] if a["role"] != "input"]
    state = {a["name"]: {"pass": True, "max_diff": 0.0, "ref": Errors(), "alt": Errors(),
                         "ratio": 0.0} for a in outputs}
    trials = 0
    while os.path.exists(os.path.join(dump, "t%d_r%d_%s%s.bin" % (
            trials, rank, man["args"][0]["name"],
            "" if man["args"][0]["role"] != "output" else ".out"))):
        trials += 1
    for t in range(trials):
        inputs, ref_out = {}, {}
        for a in man["args"]:
            base = os.path.join(dump, "t%d_r%d_%s" % (t, rank, a["name"]))
            if a["role"] != "output":
                inputs[a["name"]] = load(base + ".bin", a["dtype"], a["count"], device)
            if a["role"] != "input":
                ref_out[a["name"]] = load(base + ".out.bin", a["dtype"], a["count"], device)
        dims = man["dims"]
        # The call's params (meta.json "params", which may depend on the trial), for adapters
        # that take them.
        extra = {}
        takes = inspect.signature(adapter.run).parameters
        params_path = os.path.join(dump, "t%d_params.json" % t)
        if "params" in takes and os.path.exists(params_path):
            with open(params_path) as f:
                extra["params"] = json.load(f)
        if "trial" in takes:
            extra["trial"] = t
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
                if a["checker"] == "allclose":
                    s["ratio"] = max(s["ratio"], rule_ratio(ref_out[n], want[n].double(), a),
                                     rule_ratio(got[n], want[n].double(), a))
    report = {"problem": man["problem"], "world": world, "trials": trials, "dims": man["dims"],
              "outputs": {}}
    all_ok = True
    for a in outputs:
        s = state[a["name"]]
        vals = torch.tensor([0.0 if s["pass"] else 1.0, s["max_diff"], s["ref"].small_abs,
                             s["ref"].rel, s["alt"].small_abs, s["alt"].rel,
                             min(s["ratio"], 1e300)], dtype=torch.float64, device=device)
        dist.all_reduce(vals, op=dist.ReduceOp.MAX)
        failed, diff, rabs, rrel, aabs, arel, ratio = vals.tolist()
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
            "rule_ratio": ratio if applies else None,
            "tolerance_follows_rule": follows}
    if rank == 0:
        print(json.dumps(report, indent=1))
    return all_ok


if __name__ == "__main__":
    sys.exit(main())
