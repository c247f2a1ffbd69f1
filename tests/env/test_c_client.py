#!/usr/bin/env python3
"""The C client (pk_client) against a real server: runs c_client_check (argv[1])."""
import subprocess
import sys

from pkserver import Server, selftest_problems


def main():
    srv = Server()
    try:
        c = srv.client()
        probs = selftest_problems(c) or c.list_problems()
        c.close()
        out = subprocess.run([sys.argv[1], srv.endpoint, probs[0]["id"]], capture_output=True,
                             text=True, timeout=120)
        print(out.stdout + out.stderr)
        if out.returncode != 0:
            print(srv.output())
            return 1
    finally:
        rc = srv.stop()
        srv.cleanup()
    if rc != 0:
        print(f"server exit code {rc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
