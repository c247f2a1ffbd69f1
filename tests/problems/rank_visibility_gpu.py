#!/usr/bin/python3
"""GPU test of --rank-visibility own (issue 30, lever 1): the correct all-reduce of the
collectives suite (NCCL's device API, LSA barriers and NVLink loads through pk_peer) run with
each rank process seeing only its own GPU must still be `correct`, and NCCL must still connect
the ranks through P2P (NVLink), not SHM or NET, although neither process sees the other's GPU.

NCCL's transport lines ("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read") come from
PKGYM_NCCL_DEBUG=INFO with PKGYM_NCCL_DEBUG_SUBSYS=P2P,SHM,NET, which print only those
subsystems' lines; NCCL writes them to stdout, of which the result keeps the last part
(stdout_tail; stderr_tail is read too), so the test sees the last of them. It also runs the same check with `all` (the default) and prints both set-up times
(run_init_ms: CUDA context and communicator) for the record; it asserts only the verdicts and
the transports. Exits 77 (skipped) without two GPUs.

usage: rank_visibility_gpu.py   (PKGYM: the pkgym binary; PK_SOURCE_DIR: the source tree)
"""
import json
import os
import re
import subprocess
import sys

PKGYM = os.environ.get("PKGYM", "pkgym")
SRC = os.environ.get("PK_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
CORRECT = os.path.join(SRC, "problems", "collectives", "allreduce", "solutions", "correct.cu")


def host_gpus():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
        return len([l for l in out.stdout.splitlines() if l.startswith("GPU ")])
    except (OSError, subprocess.SubprocessError):
        return 0


def check(mode):
    env = dict(os.environ, PKGYM_NCCL_DEBUG="INFO", PKGYM_NCCL_DEBUG_SUBSYS="P2P,SHM,NET")
    cmd = [PKGYM, "check", "--problem", "collectives/allreduce", CORRECT, "--trials", "1",
           "--skip-timing", "--rank-visibility", mode, "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        print("FAIL %s: pkgym check exited %d\n%s%s" % (mode, p.returncode, p.stdout, p.stderr))
        return None
    return json.loads(p.stdout)


def main():
    if not os.path.exists("/dev/nvidia0") or host_gpus() < 2:
        print("needs 2 GPUs: skipped")
        return 77
    failed = 0
    for mode in ("own", "all"):
        r = check(mode)
        if r is None:
            failed += 1
            continue
        # NCCL logs to stdout unless NCCL_DEBUG_FILE says otherwise; look at both tails.
        err = (r.get("stdout_tail") or "") + "\n" + (r.get("stderr_tail") or "")
        via = re.findall(r"via (P2P|SHM|NET)\S*", err)
        p2p = len(re.findall(r"via P2P", err))
        other = len(re.findall(r"via (SHM|NET)", err))
        st = r.get("stages", {})
        print("%s: status %s, transports %s (P2P lines %d, SHM/NET lines %d), run_init_ms %s, "
              "run_arena_ms %s" % (mode, r.get("status"), sorted(set(via)), p2p, other,
                                   st.get("run_init_ms"), st.get("run_arena_ms")))
        if r.get("status") != "correct":
            print("FAIL %s: status %s: %s" % (mode, r.get("status"), r.get("reason")))
            failed += 1
        if p2p == 0 or other:
            print("FAIL %s: NCCL did not connect through P2P only; stderr tail:\n%s" % (mode, err))
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
