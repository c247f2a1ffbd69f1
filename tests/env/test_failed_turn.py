#!/usr/bin/env python3
"""A step whose turn cannot be recorded leaves no trace: the step is answered `internal`, the
episode keeps no turn that the store never got, and the next step is turn 1 again.

The failure is made real with a scripted worker (fakeworker.py) behind the broker: its result
carries a NaN speedup, which JSON cannot hold, so the turn's result cannot be encoded for the
store (env/src/ops_step.c, record_turn)."""
import os
import sqlite3
import sys
import time

import msgpack

from fakeworker import FakeWorker, verdict
from pkserver import Server
from scaleout import action_text, free_port


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def send_step(sock, rid, ep, action):
    sock.send_multipart([b"", msgpack.packb({"op": "step", "id": rid, "episode": ep,
                                             "action": action})])


def reply(sock, rid):
    expect(sock.poll(30000), f"no reply to request {rid}")
    rep = msgpack.unpackb(sock.recv_multipart()[-1], raw=False)
    expect(rep["id"] == rid, f"reply to {rep['id']}, want {rid}")
    return rep


def main():
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    srv = Server("--gpus", "none", "--worker-bind", url, "--worker-heartbeat-ms", "100",
                 "--worker-liveness", "20")
    worker = None
    try:
        c = srv.client()
        worker = FakeWorker(srv.ctx, url, "F", max_jobs=1, heartbeat_ms=100)
        deadline = time.time() + 30
        while c.call("stats")["broker"]["workers"] != 1:
            expect(time.time() < deadline, "the scripted worker did not join")
            time.sleep(0.05)
        ep = c.call("reset", problem="selftest/scale", max_turns=3)["episode"]
        action = action_text("selftest/scale", "correct.cu")
        sock = srv.socket()

        send_step(sock, 1, ep, action)
        job = worker.next_job()
        bad = worker._result(job, "correct", "NaN speedup")
        bad["result"] = dict(verdict("correct", "NaN speedup", speedup=1.0),
                             speedup=float("nan"))
        worker.cmds.put(("send", bad))
        rep = reply(sock, 1)
        expect(not rep["ok"] and rep["error"]["code"] == "internal" and
               "could not be encoded" in rep["error"]["message"], f"the failed step: {rep}")
        t = c.call("trajectory", episode=ep)
        expect(t["turns"] == [] and not t["in_flight"],
               f"the failed step left a turn in memory: {t['turns']}")

        send_step(sock, 2, ep, action)
        job = worker.next_job()
        worker.result(job, status="correct", reason="a sound result")
        rep = reply(sock, 2)
        expect(rep["ok"] and rep["observation"]["turn"] == 1 and rep["info"]["turn"] == 1,
               f"the next step must be turn 1: {rep}")
        t = c.call("trajectory", episode=ep)
        expect(len(t["turns"]) == 1 and t["turns"][0]["status"] == "correct",
               f"trajectory after the sound step: {t['turns']}")
        sock.close(0)
        c.close()
    except Exception:
        print(srv.output())
        raise
    finally:
        if worker:
            worker.stop()
        rc = srv.stop()
    db = sqlite3.connect(os.path.join(srv.data_dir, "trajectories.sqlite"))
    turns = db.execute("SELECT turn, status FROM turns").fetchall()
    db.close()
    srv.cleanup()
    expect(rc == 0, f"server exit code {rc}")
    expect(len(turns) == 1 and turns[0][0] == 1, f"stored turns {turns}")
    print("failed turn: answered internal, no turn kept; the next step is turn 1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
