#!/usr/bin/python3
"""Checks the collectives suite's data without a GPU: every meta.json against the schema the
harness loader reads, the arithmetic of counts and rooflines at every world size, prompts,
and solution manifests; then, when `pkgym problems show` is built, that the loader accepts
every problem."""
import ast
import json
import os
import subprocess
import sys

SRC = os.environ["PK_SOURCE_DIR"]
SUITE = os.path.join(SRC, "problems", "collectives")
IDS = ["allreduce", "allgather", "broadcast", "reduce", "scatter", "gather", "reducescatter",
       "alltoall"]
SIGNATURE = ('extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, '
             '__nv_bfloat16 *y, size_t n)')
HOST_NCCL = {"ncclAllReduce", "ncclReduceScatter", "ncclAllGather", "ncclReduce", "ncclBroadcast",
             "ncclBcast", "ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd",
             "ncclAlltoAll", "ncclGather", "ncclScatter"}
ROOTED_CHECK = {"reduce", "gather"}  # only the root's output is defined
STATUSES = {"format_error", "rejected", "compile_error", "runtime_error", "timeout",
            "incorrect", "correct"}
# NVLink bytes each rank must move in one direction (the larger of what it sends and what it
# receives), bf16 = 2 bytes, no in-switch reduction (NVLS is off): docs/problems.md, Roofline.
# Written out independently of the meta.json expressions, which must agree at every world size.
NVLINK_PER_DIRECTION = {
    # reduce-scatter + all-gather: 2(W-1)/W of its 2n bytes out and in
    "allreduce": lambda n, w: 2 * (w - 1) / w * 2 * n,
    "allgather": lambda n, w: (w - 1) * 2 * n,  # W-1 foreign blocks arrive
    "broadcast": lambda n, w: 2 * n,  # each non-root receives n; the root sends n at least once
    "reduce": lambda n, w: 2 * n,  # the root receives at least one value per output element
    "scatter": lambda n, w: (w - 1) * 2 * n,  # W-1 blocks leave the root
    "gather": lambda n, w: (w - 1) * 2 * n,  # W-1 blocks reach the root
    "reducescatter": lambda n, w: (w - 1) / w * 2 * n,  # contributions to W-1 foreign blocks
    "alltoall": lambda n, w: (w - 1) / w * 2 * n,  # W-1 of W blocks out and in
}
MATH_DTYPES = {"bf16", "fp16", "fp8", "tf32", "fp32"}
errors = []


def fail(where, msg):
    errors.append(f"{where}: {msg}")


def evaluate(expr, dims):
    """Arithmetic over dims and `world` only (+ - * / and parentheses)."""
    tree = ast.parse(expr, mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Expression, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div,
                                 ast.Constant, ast.Name, ast.Load, ast.UnaryOp, ast.USub)):
            raise ValueError(f"unsupported syntax {type(node).__name__}")
        if isinstance(node, ast.Name) and node.id not in dims:
            raise ValueError(f"unknown name {node.id}")
    return eval(compile(tree, "<expr>", "eval"), {"__builtins__": {}}, dict(dims))


def check_meta(pid, m):
    w = f"{pid}/meta.json"
    for key, typ in [("id", str), ("title", str), ("category", str), ("device", str),
                     ("launcher", str), ("world_size", int), ("world_sizes", list),
                     ("entry", str), ("signature", str), ("dims", dict), ("root", int),
                     ("args", list), ("scratch_bytes", int), ("tolerance", dict),
                     ("trials", int), ("timing", dict), ("allowed_calls", list),
                     ("forbidden_calls", list), ("tags", list), ("roofline", dict)]:
        if not isinstance(m.get(key), typ):
            fail(w, f"'{key}' missing or not {typ.__name__}")
    if errors:
        return
    if m["id"] != pid or m["category"] != "Collective primitive" or m["device"] != "gpu":
        fail(w, "id/category/device")
    if m["entry"] != "solution" or m["signature"] != SIGNATURE:
        fail(w, "entry point or signature differs from the suite's")
    if m["world_size"] not in m["world_sizes"] or m["launcher"] not in ("fork", "mpi"):
        fail(w, "world_size not in world_sizes, or unknown launcher")
    if not HOST_NCCL <= set(m["forbidden_calls"]):
        fail(w, f"forbidden_calls lacks {sorted(HOST_NCCL - set(m['forbidden_calls']))}")
    if pid not in m["tags"] or "collective" not in m["tags"]:
        fail(w, "tags must name the collective")
    if set(m["tolerance"]) != {"atol", "rtol"} or m["trials"] < 1:
        fail(w, "tolerance/trials")
    args = m["args"]
    if [(a.get("name"), a.get("role"), a.get("dtype")) for a in args] != [
            ("x", "input", "bf16"), ("y", "output", "bf16")]:
        fail(w, "args must be x (bf16 input) then y (bf16 output)")
        return
    want_check = "root" if pid in ROOTED_CHECK else "all"
    if args[1].get("check") != want_check:
        fail(w, f"y check must be '{want_check}'")
    phases = m["roofline"].get("phases")
    if not phases:
        fail(w, "roofline has no phases")
        return
    for world in m["world_sizes"]:
        dims = dict(m["dims"], world=world)
        if not 0 <= m["root"] < world:
            fail(w, f"root outside world {world}")
        for a in args:
            count = evaluate(a["count"], dims)
            # Whole 16-byte vectors per rank block: every count and every n/W block.
            if count != int(count) or int(count) % 8:
                fail(w, f"{a['name']} count {count} at world {world} is not a multiple of 8")
        if m["dims"]["n"] % (8 * world):
            fail(w, f"n is not a multiple of 8*world at world {world}")
        if len(phases) == 1:
            got = evaluate(phases[0]["nvlink_bytes"], dims)
            want = NVLINK_PER_DIRECTION[pid](m["dims"]["n"], world)
            if abs(got - want) > 1e-9 * want:
                fail(w, f"nvlink_bytes {got:.0f} at world {world}: the per-direction rule gives "
                        f"{want:.0f}")
        for ph in phases:
            if ph.get("dtype") not in MATH_DTYPES:
                fail(w, f"roofline {ph.get('name')} needs dtype, one of {sorted(MATH_DTYPES)}")
            for key in ("flops", "hbm_bytes", "nvlink_bytes"):
                v = evaluate(ph[key], dims)
                if v < 0:
                    fail(w, f"roofline {ph['name']}.{key} < 0 at world {world}")
            # Every collective here moves data across NVLink and touches HBM.
            if evaluate(ph["nvlink_bytes"], dims) <= 0 or evaluate(ph["hbm_bytes"], dims) <= 0:
                fail(w, f"roofline {ph['name']} has no traffic at world {world}")


def check_prompt(pid, m):
    path = os.path.join(SUITE, pid, "prompt.md")
    text = open(path, encoding="utf-8").read()
    sig = m["signature"].replace("extern \"C\" ", "")
    if sig not in text:
        fail(f"{pid}/prompt.md", "does not state the exact signature")
    if str(m["dims"]["n"]) not in text:
        fail(f"{pid}/prompt.md", "does not state n")
    if text.count("```cuda") < 1 or len(text.splitlines()) > 130:
        fail(f"{pid}/prompt.md", "needs a ```cuda example and at most ~120 lines")


def check_manifest(pid):
    d = os.path.join(SUITE, pid, "solutions")
    man = json.load(open(os.path.join(d, "expected.json")))
    sources = {f for f in os.listdir(d) if f.endswith(".cu")}
    if set(man) != sources:
        fail(f"{pid}/solutions/expected.json", f"lists {sorted(man)} but has {sorted(sources)}")
    if man.get("correct.cu", {}).get("status") != "correct" or \
            man.get("wrong.cu", {}).get("status") != "incorrect":
        fail(f"{pid}/solutions/expected.json", "needs correct.cu: correct, wrong.cu: incorrect")
    for name, exp in man.items():
        st = exp.get("status")
        sts = st if isinstance(st, list) else [st]
        if not sts or not set(sts) <= STATUSES:
            fail(f"{pid}/solutions/expected.json", f"{name}: bad status {st!r}")
        if "rejected" in sts and not exp.get("rule"):
            fail(f"{pid}/solutions/expected.json", f"{name}: rejected needs a rule")


def check_loader(pkgym):
    """The harness loader accepts every problem: `show --json` returns its meta.json and
    `show` its prompt."""
    before = len(errors)
    if not os.access(pkgym, os.X_OK):
        fail("pkgym", f"{pkgym} is not an executable (build the pkgym target)")
        return
    for pid in IDS:
        where = f"pkgym problems show collectives/{pid}"
        r = subprocess.run([pkgym, "problems", "show", f"collectives/{pid}", "--json"],
                           capture_output=True, text=True, timeout=60)
        out = r.stdout + r.stderr
        try:
            loaded = json.loads(r.stdout) if r.returncode == 0 else None
        except ValueError:
            loaded = None
        disk = json.load(open(os.path.join(SUITE, pid, "meta.json")))
        if loaded != disk:
            fail(where + " --json", f"exit {r.returncode}, not the meta.json on disk: {out[:200]}")
        r = subprocess.run([pkgym, "problems", "show", f"collectives/{pid}"],
                           capture_output=True, text=True, timeout=60)
        prompt = open(os.path.join(SUITE, pid, "prompt.md"), encoding="utf-8").read()
        if r.returncode != 0 or r.stdout.strip() != prompt.strip():
            fail(where, f"exit {r.returncode}, output is not prompt.md")
    if len(errors) == before:
        print(f"pkgym problems show: the loader accepts all {len(IDS)} problems")


def main():
    found = sorted(e for e in os.listdir(SUITE) if os.path.isdir(os.path.join(SUITE, e)))
    if found != sorted(IDS):
        fail("problems/collectives", f"expected {sorted(IDS)}, found {found}")
    for pid in IDS:
        try:
            m = json.load(open(os.path.join(SUITE, pid, "meta.json")))
            check_meta(pid, m)
            check_prompt(pid, m)
            check_manifest(pid)
        except (OSError, ValueError, KeyError, SyntaxError) as e:
            fail(pid, f"{type(e).__name__}: {e}")
    if os.environ.get("PKGYM"):
        check_loader(os.environ["PKGYM"])
    for e in errors:
        print("FAIL", e)
    print(f"{len(IDS)} problems checked, {len(errors)} problem(s) found")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
