#!/usr/bin/env python3
"""GPU machine: hello lists the GPUs NVML sees, matching `nvidia-smi -L`. Skipped (77) when
there is no GPU."""
import shutil
import subprocess
import sys


def main():
    smi = shutil.which("nvidia-smi")
    if not smi:
        print("SKIP: no nvidia-smi")
        return 77
    listed = subprocess.run([smi, "-L"], capture_output=True, text=True)
    gpus = [line for line in listed.stdout.splitlines() if line.startswith("GPU ")]
    if listed.returncode != 0 or not gpus:
        print("SKIP: no GPU")
        return 77
    try:
        from pkserver import Server
    except ImportError as e:
        print(f"FAIL: this test needs python3-zmq and python3-msgpack ({e})")
        return 1
    srv = Server()
    try:
        hello = srv.client().call("hello")
    finally:
        rc = srv.stop()
        srv.cleanup()
    got = hello["gpus"]
    print(got)
    ok = rc == 0 and len(got) == len(gpus) and all(
        g["index"] == i and g["memory_mib"] > 0 and g["name"] in gpus[i] for i, g in enumerate(got))
    print("gpu hello: " + ("ok" if ok else f"MISMATCH with nvidia-smi: {gpus}"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
