#!/usr/bin/env python3
"""Any GPU subset, in any order (#25): inside `pkgym sandbox --gpus LIST`, CUDA's device i is
the i-th GPU of LIST (by PCI bus id, against nvidia-smi's numbering), and a 2-rank
`collectives/allreduce` through `pkgym check --gpus LIST` is correct. Subsets: GPU 1 alone,
"1,0", the two highest-numbered GPUs in both orders; with 4 GPUs or more also 0,3 / 1,2 /
3,2 and all of them reversed. Needs 2 GPUs (exit 77 without)."""
import json
import os
import subprocess
import sys

SB_CLI = os.environ["SB_CLI"]
IDENTITY = os.environ["SB_IDENTITY_BIN"]
PKGYM = os.environ["PKGYM"]
SRC = os.environ["PK_SOURCE_DIR"]


def norm(bus):
    """'00000000:18:00.0' (nvidia-smi) and '0000:18:00.0' (CUDA) alike."""
    dom, rest = bus.strip().lower().split(":", 1)
    return f"{int(dom, 16):x}:{rest}"


def host_gpus():
    """Bus ids by host index: nvidia-smi's numbering, else (no nvidia-smi) the driver's list
    in PCI order."""
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=index,pci.bus_id",
                            "--format=csv,noheader"], capture_output=True, text=True)
    except FileNotFoundError:
        p = None
    if p is None or p.returncode != 0:
        d = "/proc/driver/nvidia/gpus"
        return sorted(norm(b) for b in os.listdir(d)) if os.path.isdir(d) else []
    out = {}
    for line in p.stdout.splitlines():
        i, bus = line.split(",")
        out[int(i)] = norm(bus)
    return [out[i] for i in sorted(out)]


def inside(gpus):
    # The probe lives in the build tree, which a sandbox shows only when asked (--ro).
    p = subprocess.run([SB_CLI, "--gpus", ",".join(map(str, gpus)), "--wall-ms", "120000",
                        "--ro", os.path.dirname(IDENTITY), "--", IDENTITY],
                       capture_output=True, text=True, timeout=200)
    v = json.loads(p.stdout)
    return v


def main():
    buses = host_gpus()
    if not buses or len(buses) < 2:
        print("needs 2 GPUs: skipped")
        return 77
    n = len(buses)
    subsets = [[1], [1, 0], [n - 2, n - 1], [n - 1, n - 2]]
    if n >= 4:
        subsets += [[0, 3], [1, 2], [3, 2], list(range(n - 1, -1, -1))]
    failures = []
    for s in subsets:
        v = inside(s)
        want = [f"dev {i} {buses[g]}" for i, g in enumerate(s)]
        got = [ln for ln in v.get("stdout", "").splitlines() if ln.startswith("dev ")]
        got = [f"dev {ln.split()[1]} {norm(ln.split()[2])}" for ln in got]
        ok = v.get("status") == "ok" and f"count {len(s)}" in v["stdout"] and got == want
        print(f"{'ok  ' if ok else 'FAIL'} sandbox --gpus {s}: {v.get('status')} {got}")
        if not ok:
            failures.append(f"--gpus {s}: want {want}, got {v.get('status')} "
                            f"{v.get('stdout', '')[:300]!r} {v.get('detail', '')}")
        if len(s) not in (2, 4, 8):
            continue  # collectives/allreduce runs at world size 2, 4 or 8
        sol = os.path.join(SRC, "problems", "collectives", "allreduce", "solutions", "correct.cu")
        p = subprocess.run([PKGYM, "check", "--problem", "collectives/allreduce", sol, "--json",
                            "--gpus", ",".join(map(str, s)), "--world-size", str(len(s)),
                            "--trials", "2"], capture_output=True, text=True, timeout=300)
        res = json.loads(p.stdout) if p.returncode == 0 else {}
        ok = res.get("status") == "correct"
        print(f"{'ok  ' if ok else 'FAIL'} check --gpus {s}: {res.get('status')} "
              f"{res.get('reason', p.stderr[-200:])}")
        if not ok:
            failures.append(f"check --gpus {s}: {res.get('status')} {res.get('reason')}")
    for f in failures:
        print("FAIL " + f)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
