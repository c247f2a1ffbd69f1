#!/usr/bin/env python3
"""SIGTERM with work queued behind a running step (docs/protocol.md, "Shutdown"): queued and
compiled work proceeds until the grace ends, then the rest is cancelled and answered.

One compile worker and one host slot (`--compile-workers 1 --gpus none`), so the queue is
forced: step A (selftest/scale, rank 1 spins) holds the only run slot until its run timeout
(RUN_MS); steps B and C (correct code) are submitted behind it, one compiling and one waiting
for the compile worker, when the signal comes. Two servers, two graces:
- a long grace: A ends with its own verdict (timeout), then B and C compile, run and are
  answered with real verdicts (correct), all within the grace; three turns are stored;
- a short grace that ends while A still runs: A is not interrupted (a running stage finishes
  and is answered), B and C are cancelled and answered `internal`; one turn is stored.
In both the server exits 0 and every step gets exactly one reply.

The broker (`--worker-bind`) keeps the same rule for jobs queued at it, with a scripted worker
(fakeworker.py) of one job's capacity: step A at the worker, step B queued at the broker.
Long grace: the worker answers A after the signal, then B still goes to it and is answered.
Short grace, the worker silent: A and B are both cancelled (the broker does not wait for
work at a worker past the grace)."""
import os
import signal
import sqlite3
import sys
import time

import msgpack

from fakeworker import FakeWorker
from pkserver import SRC, Server
from scaleout import free_port

PROBLEM = "selftest/scale"
RUN_MS = 10000  # A's run timeout: how long A holds the run slot
LONG_GRACE_MS = 60000
SHORT_GRACE_MS = 1000


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def action(name, note=""):
    path = os.path.join(SRC, "problems", "selftest", "scale", "solutions", name)
    with open(path) as f:  # a missing fixture is a failure, not a skip
        code = f.read()
    # note makes sources differ, so that no compile is shared (pk_key_gate, compile cache)
    return f"```cuda\n{code}\n// {note}\n```\n"


def stats_jobs(c):
    return c.call("stats")["jobs"]


def wait_for(c, what, cond, timeout_s=60.0):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        jobs = stats_jobs(c)
        if cond(jobs):
            return jobs
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}; jobs {stats_jobs(c)}")


def stored_turns(srv):
    db = sqlite3.connect(os.path.join(srv.data_dir, "trajectories.sqlite"))
    try:
        return db.execute("SELECT COUNT(*) FROM turns").fetchone()[0]
    finally:
        db.close()


def play(grace_ms):
    """Queues A (running), B and C (behind it), sends SIGTERM; returns the replies by step
    name, seconds from the signal to the server's exit, and the number of stored turns."""
    srv = Server("--compile-workers", "1", "--gpus", "none", "--shutdown-grace-ms", str(grace_ms))
    try:
        c = srv.client()
        check = {"trials": 1, "skip_timing": True}
        eps = {}
        for name, run_ms in (("A", RUN_MS), ("B", None), ("C", None)):
            opts = dict(check, run_timeout_ms=run_ms) if run_ms else check
            eps[name] = c.call("reset", problem=PROBLEM, max_turns=2,
                               options={"check": opts})["episode"]
        sock = srv.socket()

        def step(rid, name, code):
            sock.send_multipart([b"", msgpack.packb({"op": "step", "id": rid,
                                                     "episode": eps[name], "action": code})])

        step(1, "A", action("hang_rank1.cu", "A"))
        wait_for(c, "A's run", lambda j: j["running"] == 1)
        t_running = time.time()
        step(2, "B", action("correct.cu", "B"))
        step(3, "C", action("correct.cu", "C"))
        # B on the only compile worker, C queued for it, A still on the only run slot.
        wait_for(c, "B and C queued", lambda j: j["compiling"] + j["queued_compile"] == 2 and
                 j["running"] == 1)
        t_sig = time.time()
        left_ms = RUN_MS - (t_sig - t_running) * 1000
        expect(left_ms > SHORT_GRACE_MS + 2000,
               f"A has only {left_ms:.0f} ms left to run at the signal: the short grace would "
               "not end during A's run (raise RUN_MS)")
        srv.proc.send_signal(signal.SIGTERM)
        replies = {}
        while len(replies) < 3:
            expect(sock.poll(120000), f"no reply in 120 s; got {sorted(replies)}")
            rep = msgpack.unpackb(sock.recv_multipart()[-1], raw=False)
            expect(rep["id"] not in replies, f"step {rep['id']} answered twice")
            replies[rep["id"]] = rep
        srv.proc.wait(120)
        took = time.time() - t_sig
        expect(srv.proc.returncode == 0, f"exit code {srv.proc.returncode}")
        sock.close(0)
        return {"A": replies[1], "B": replies[2], "C": replies[3]}, took, stored_turns(srv)
    except Exception:
        print(srv.output())
        raise
    finally:
        srv.stop()
        srv.cleanup()


def broker_stats(c):
    return c.call("stats")["broker"]


def play_broker(grace_ms, answer):
    """A at the scripted worker, B queued at the broker, SIGTERM; with answer, the worker
    answers every job it gets. Returns the replies, seconds to exit, jobs the worker got."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    srv = Server("--gpus", "none", "--worker-bind", url, "--worker-heartbeat-ms", "100",
                 "--worker-liveness", "20", "--shutdown-grace-ms", str(grace_ms))
    worker = None
    try:
        c = srv.client()
        worker = FakeWorker(srv.ctx, url, "F", max_jobs=1, heartbeat_ms=100)
        deadline = time.time() + 30
        while broker_stats(c)["workers"] != 1:
            expect(time.time() < deadline, "the scripted worker did not join")
            time.sleep(0.05)
        eps = {n: c.call("reset", problem=PROBLEM, max_turns=2)["episode"] for n in "AB"}
        sock = srv.socket()
        for rid, name in ((1, "A"), (2, "B")):
            sock.send_multipart([b"", msgpack.packb({"op": "step", "id": rid, "episode": eps[name],
                                                     "action": action("correct.cu", name)})])
        job_a = worker.next_job()
        deadline = time.time() + 30
        while (broker_stats(c)["queued"], broker_stats(c)["dispatched"]) != (1, 1):
            expect(time.time() < deadline, f"B not queued behind A: {broker_stats(c)}")
            time.sleep(0.05)
        t_sig = time.time()
        srv.proc.send_signal(signal.SIGTERM)
        got = [job_a]
        if answer:
            time.sleep(0.5)  # into the grace
            worker.result(job_a, status="incorrect", reason="A, answered within the grace")
            job_b = worker.next_job(timeout_s=10)  # B reaches the worker during the grace
            got.append(job_b)
            worker.result(job_b, status="correct", reason="B, answered within the grace")
        replies = {}
        while len(replies) < 2:
            expect(sock.poll(60000), f"no reply in 60 s; got {sorted(replies)}")
            rep = msgpack.unpackb(sock.recv_multipart()[-1], raw=False)
            expect(rep["id"] not in replies, f"step {rep['id']} answered twice")
            replies[rep["id"]] = rep
        srv.proc.wait(60)
        took = time.time() - t_sig
        expect(srv.proc.returncode == 0, f"exit code {srv.proc.returncode}")
        if not answer:
            worker.no_job(0.2)  # B never reached the worker
        sock.close(0)
        return {"A": replies[1], "B": replies[2]}, took, got
    except Exception:
        print(srv.output())
        raise
    finally:
        if worker:
            worker.stop()
        srv.stop()
        srv.cleanup()


def status(rep):
    return rep["info"]["status"] if rep.get("ok") else f"error {rep['error']}"


def main():
    # Long grace: everything queued behind A proceeds and completes within the grace.
    reps, took, turns = play(LONG_GRACE_MS)
    print(f"grace {LONG_GRACE_MS} ms: " + ", ".join(f"{k}: {status(v)}" for k, v in reps.items()) +
          f"; exit after {took:.1f} s; {turns} stored turn(s)")
    expect(reps["A"].get("ok") and reps["A"]["info"]["status"] == "timeout",
           f"A (spins past its run timeout) must end with its own verdict: {reps['A']}")
    for name in ("B", "C"):
        expect(reps[name].get("ok") and reps[name]["info"]["status"] == "correct",
               f"{name}, queued behind a running step, must be completed within the grace: "
               f"{reps[name]}")
    expect(took < LONG_GRACE_MS / 1000, f"the long-grace shutdown took {took:.1f} s")
    expect(turns == 3, f"{turns} stored turns, want 3")

    # Short grace: it ends while A runs; A finishes, B and C are cancelled and answered.
    reps, took, turns = play(SHORT_GRACE_MS)
    print(f"grace {SHORT_GRACE_MS} ms: " + ", ".join(f"{k}: {status(v)}" for k, v in reps.items()) +
          f"; exit after {took:.1f} s; {turns} stored turn(s)")
    expect(reps["A"].get("ok") and reps["A"]["info"]["status"] == "timeout",
           f"A was running when the grace ended: it is not interrupted: {reps['A']}")
    for name in ("B", "C"):
        rep = reps[name]
        expect(not rep.get("ok") and rep["error"]["code"] == "internal" and
               "shut down" in rep["error"]["message"],
               f"{name}, still queued when the grace ended, must be cancelled: {rep}")
    # The server waits for A's run (its own timeout bounds it), not for B's and C's.
    expect(took < RUN_MS / 1000 + 5, f"the short-grace shutdown took {took:.1f} s")
    expect(turns == 1, f"{turns} stored turns, want 1 (A's)")

    # The broker: B, queued at it, reaches the worker within a long grace.
    reps, took, got = play_broker(LONG_GRACE_MS, answer=True)
    print(f"broker, grace {LONG_GRACE_MS} ms: " +
          ", ".join(f"{k}: {status(v)}" for k, v in reps.items()) + f"; exit after {took:.1f} s")
    expect(reps["A"].get("ok") and reps["A"]["info"]["reason"].startswith("A, answered"),
           f"A: {reps['A']}")
    expect(reps["B"].get("ok") and reps["B"]["info"]["status"] == "correct",
           f"B, queued at the broker, must be completed within the grace: {reps['B']}")
    expect(took < 10, f"the broker waited {took:.1f} s after its last job")
    # ... and with a short grace and a silent worker, both are cancelled when it ends.
    reps, took, got = play_broker(SHORT_GRACE_MS, answer=False)
    print(f"broker, grace {SHORT_GRACE_MS} ms: " +
          ", ".join(f"{k}: {status(v)}" for k, v in reps.items()) + f"; exit after {took:.1f} s")
    for name, where in (("A", "returned this job's result"), ("B", "reached a worker")):
        rep = reps[name]
        expect(not rep.get("ok") and rep["error"]["code"] == "internal" and
               "shut down" in rep["error"]["message"] and where in rep["error"]["message"],
               f"{name} must be cancelled when the grace ends: {rep}")
    expect(SHORT_GRACE_MS / 1000 - 0.2 < took < SHORT_GRACE_MS / 1000 + 5,
           f"the broker's short-grace shutdown took {took:.1f} s")
    print("shutdown grace: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
