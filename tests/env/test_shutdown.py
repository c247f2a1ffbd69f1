#!/usr/bin/env python3
"""SIGTERM with a step in flight: the step still gets its reply, the turn is in the store,
and the server exits 0 within the grace period."""
import os
import signal
import sqlite3
import sys
import time

import msgpack

from pkserver import SRC, Server, selftest_problems


def action_for(problem_id):
    """The problem's correct solution when there is one (it compiles for seconds, so it is in
    flight when the signal comes), else code that at least names the entry point."""
    suite, name = problem_id.split("/", 1)
    path = os.path.join(SRC, "problems", suite, name, "solutions", "correct.cu")
    code = open(path).read() if os.path.exists(path) else \
        'extern "C" int solution(void) { return 0; }'
    return f"```cuda\n{code}\n```\n"


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    srv = Server("--shutdown-grace-ms", "20000")
    try:
        c = srv.client()
        probs = selftest_problems(c) or c.list_problems()
        pid = probs[0]["id"]
        ep = c.call("reset", problem=pid, max_turns=2)["episode"]
        c.close()
        s = srv.socket()
        s.send_multipart([b"", msgpack.packb({"op": "step", "id": 1, "episode": ep,
                                              "action": action_for(pid)})])
        time.sleep(0.2)
        expect(not s.poll(0), "the step finished before the signal: nothing was in flight")
        t0 = time.time()
        srv.proc.send_signal(signal.SIGTERM)
        expect(s.poll(60000), "the step in flight got no reply")
        rep = msgpack.unpackb(s.recv_multipart()[-1], raw=False)
        expect(rep["id"] == 1, "reply id")
        expect(rep["ok"] or rep["error"]["code"] == "internal", f"reply {rep}")
        srv.proc.wait(60)
        took = time.time() - t0
        expect(srv.proc.returncode == 0, f"exit code {srv.proc.returncode}")
        expect(took < 25, f"shutdown took {took:.1f} s")
        db = sqlite3.connect(os.path.join(srv.data_dir, "trajectories.sqlite"))
        n = db.execute("SELECT COUNT(*) FROM turns").fetchone()[0]
        db.close()
        expect(n == (1 if rep["ok"] else 0), f"{n} stored turns for reply ok={rep['ok']}")
        print(f"shutdown: ok (step {'completed' if rep['ok'] else rep['error']}, "
              f"{took:.1f} s)")
    except Exception:
        print(srv.output())
        raise
    finally:
        rc = srv.stop()
        srv.cleanup()
    expect(rc == 0, f"server exit code {rc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
