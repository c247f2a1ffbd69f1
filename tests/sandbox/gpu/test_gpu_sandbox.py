#!/usr/bin/python3
"""GPU acceptance: a 2-rank NCCL program runs inside `pkgym sandbox --gpus 0,1` and passes; the
same program deadlocked is killed at the wall limit, leaving no process and no GPU memory behind.
Skipped (77) without two GPUs. Env: SB_CLI, SB_NCCL_BIN."""
import json
import os
import subprocess
import sys
import time

# `pkgym sandbox` itself when built; the stand-alone CLI (the same pk_cmd_sandbox) otherwise.
PKGYM = os.environ.get("PKGYM", "")
CLI = [PKGYM, "sandbox"] if os.access(PKGYM, os.X_OK) else [os.environ["SB_CLI"]]
BIN = os.path.realpath(os.environ["SB_NCCL_BIN"])


def gpu_state():
    """(memory used per GPU in MiB, compute pids) from nvidia-smi, or None without it."""
    try:
        mem = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30).stdout.split()
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return [int(m) for m in mem], apps


def survivors():
    found = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.readlink(f"/proc/{pid}/exe") == BIN:
                found.append(pid)
        except OSError:
            pass
    return found


def run(wall_ms, extra):
    cmd = CLI + ["--gpus", "0,1", "--wall-ms", str(wall_ms), "--ro", os.path.dirname(BIN),
           "--env", "NCCL_DEBUG=WARN", "--", BIN] + extra
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=wall_ms / 1000 + 120)
    if p.returncode != 0:
        print(f"CLI failed ({p.returncode}): {p.stderr}")
        return None
    v = json.loads(p.stdout)
    print(f"  status={v['status']} exit_code={v['exit_code']} signal={v['signal']} "
          f"wall_ms={v['wall_ms']:.0f} detail={v['detail']!r} limits={v['limits']!r}")
    print("  stdout: " + v["stdout"].strip().replace("\n", "\n          "))
    print("  stderr: " + v["stderr"].strip()[-3000:].replace("\n", "\n          "))
    return v


def settle(before, case):
    """Waits up to 15 s for no survivors, no compute apps and memory back near the start."""
    problems = []
    for _ in range(30):
        state = gpu_state()
        problems = []
        if survivors():
            problems.append(f"processes left: {survivors()}")
        if state:
            mem, apps = state
            if apps:
                problems.append(f"GPU compute apps left: {apps}")
            if before and any(m > b + 256 for m, b in zip(mem, before[0])):
                problems.append(f"GPU memory used {mem} MiB, before {before[0]} MiB")
        if not problems:
            print(f"  {case}: no process left, GPU memory back to {state[0] if state else '?'} MiB")
            return []
        time.sleep(0.5)
    return [f"{case}: {p}" for p in problems]


def main():
    if not (os.path.exists("/dev/nvidia0") and os.path.exists("/dev/nvidia1")):
        print("needs 2 GPUs (/dev/nvidia0 and /dev/nvidia1): skipped")
        return 77
    before = gpu_state()
    print(f"GPU memory used before: {before[0] if before else 'nvidia-smi unavailable'} MiB")
    failures = []
    v = run(120000, [])
    if not v or v["status"] != "ok":
        failures.append("correct 2-rank all-reduce: want status ok")
    failures += settle(before, "after the correct run")
    v = run(20000, ["--deadlock"])
    if not v or v["status"] != "timeout":
        failures.append("deadlocked 2-rank program: want status timeout")
    elif v["wall_ms"] > 40000:
        failures.append(f"deadlock: the job took {v['wall_ms']:.0f} ms to end (limit 20000)")
    failures += settle(before, "after the deadlock")
    for f in failures:
        print("FAIL " + f)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
