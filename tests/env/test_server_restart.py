#!/usr/bin/env python3
"""Server crash and restart (issue #15): a broker with two workers runs a batch of episodes;
the server is SIGKILLed while steps are in flight and started again on the same data dir and
endpoints. The episodes continue where the store has them (their next steps are turns 2, 3,
...), a step that was being evaluated at the crash is answered `internal` saying so when the
client sends it again (then it runs), nothing committed before the crash is lost or changed,
the workers join the new server by themselves, and a closed episode stays closed."""
import os
import signal
import sqlite3
import sys
import time

import msgpack
import zmq

from pkserver import Server
from scaleout import action_text, broker, free_port, start_worker, wait_workers

EPISODES = 8
TURNS = 3
ROTATION = [("selftest/scale", ["wrong_rank.cu", "correct.cu", "correct.cu"]),
            ("selftest/allreduce", ["wrong_subtle.cu", "segfault.cu", "correct.cu"])]


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def snapshot(data_dir):
    db = sqlite3.connect(os.path.join(data_dir, "trajectories.sqlite"))
    rows = db.execute("SELECT episode_id, turn, action, status, score, result_json, feedback"
                      " FROM turns").fetchall()
    db.close()
    return {(r[0], r[1]): r[2:] for r in rows}


class Driver:
    """Episodes over one DEALER socket; after a restart it sends again every request that got
    no reply (as a client does when its server went away)."""

    def __init__(self, ctx, endpoint):
        self.ctx, self.endpoint = ctx, endpoint
        self.sock = None
        self.connect()
        self.next_id = 1
        self.outstanding = {}  # id -> (request, episode index)
        self.replies = {}      # id -> count
        self.eps = {}
        self.turns = {i: [] for i in range(EPISODES)}
        self.interrupted = []

    def connect(self):
        if self.sock:
            self.sock.close(0)
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(self.endpoint)

    def send(self, req, i):
        rid = self.next_id
        self.next_id += 1
        req = dict(req, id=rid)
        self.outstanding[rid] = (req, i)
        self.replies[rid] = 0
        self.sock.send_multipart([b"", msgpack.packb(req)])

    def plan(self, i):
        return ROTATION[i % len(ROTATION)]

    def start(self):
        for i in range(EPISODES):
            self.send({"op": "reset", "problem": self.plan(i)[0], "max_turns": TURNS}, i)

    def next_step(self, i):
        k = len(self.turns[i])
        if k < TURNS:
            problem, sols = self.plan(i)
            self.send({"op": "step", "episode": self.eps[i],
                       "action": action_text(problem, sols[k])}, i)

    def pump(self, until, timeout_s):
        deadline = time.time() + timeout_s
        while not until() and time.time() < deadline:
            if not self.sock.poll(200):
                continue
            rep = msgpack.unpackb(self.sock.recv_multipart()[-1], raw=False)
            rid = rep["id"]
            self.replies[rid] = self.replies.get(rid, 0) + 1
            if rid not in self.outstanding:
                continue
            req, i = self.outstanding.pop(rid)
            if req["op"] == "reset":
                expect(rep["ok"], f"reset {rep}")
                self.eps[i] = rep["episode"]
                self.next_step(i)
            elif rep["ok"]:
                expect(rep["info"]["turn"] == len(self.turns[i]) + 1,
                       f"episode {i}: turn {rep['info']['turn']} after {len(self.turns[i])}")
                self.turns[i].append(rep["info"]["status"])
                self.next_step(i)
            else:
                err = rep["error"]
                expect(err["code"] == "internal" and "server restarted" in err["message"],
                       f"episode {i}: {err}")
                self.interrupted.append((i, err["message"]))
                self.send({k: v for k, v in req.items() if k != "id"}, i)  # again

    def resend_all(self):
        pending = list(self.outstanding.values())
        self.outstanding.clear()
        for req, i in pending:
            self.send({k: v for k, v in req.items() if k != "id"}, i)

    def done(self):
        return all(len(t) == TURNS for t in self.turns.values())


def main():
    port = free_port()
    srv = broker(port, "--shutdown-grace-ms", "2000")
    workers, logs = [], []
    srv2 = None
    try:
        for k in range(2):
            w, log = start_worker(port, os.path.join(srv.tmp, "workers"), f"w{k}",
                                  os.path.join(srv.tmp, "workers.log"))
            workers.append(w)
            logs.append(log)
        c = srv.client(timeout_s=30)
        wait_workers(c, 2)
        d = Driver(srv.ctx, srv.endpoint)
        d.start()
        # A closed episode must stay closed after the restart.
        ep_closed = c.reset("selftest/scale", max_turns=2)["episode"]
        c.close_episode(ep_closed)
        d.pump(lambda: sum(len(t) for t in d.turns.values()) >= EPISODES, 180)
        expect(c.stats()["steps_in_flight"] > 0, "nothing in flight at the kill")
        c.close()
        before = snapshot(srv.data_dir)
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait()
        print(f"killed the server with {len(before)} turns committed, "
              f"{sum(1 for r, _ in d.outstanding.values() if r['op'] == 'step')} step(s) "
              f"unanswered")

        # Replies the old server sent before it died are read first: only requests that got
        # none are sent again (a client that sent a step twice would run two turns).
        d.pump(lambda: False, 1.0)
        srv2 = Server("--gpus", "none", "--worker-bind", f"tcp://127.0.0.1:{port}",
                      "--worker-heartbeat-ms", "250", "--worker-liveness", "4",
                      data_dir=srv.data_dir, endpoint=srv.endpoint)
        c2 = srv2.client(timeout_s=30)
        wait_workers(c2, 2)
        st = c2.stats()
        expect(st["requests"]["episodes_restored"] >= EPISODES,
               f"episodes were not restored: {st['requests']}")
        # The client's socket reconnects to the same endpoint by itself; it sends again what
        # got no reply.
        d.resend_all()
        d.pump(d.done, 240)
        expect(d.done(), f"episodes did not finish: {[len(t) for t in d.turns.values()]}")
        expect(not d.outstanding, f"unanswered: {list(d.outstanding)[:5]}")
        expect(not [r for r, n in d.replies.items() if n > 1], "a request answered twice")
        expect(d.interrupted, "no step was answered as interrupted by the restart")
        after = snapshot(srv.data_dir)
        lost = [k for k in before if k not in after]
        changed = [k for k in before if k in after and before[k] != after[k]]
        expect(not lost and not changed, f"committed turns lost {lost} or changed {changed}")
        db = sqlite3.connect(os.path.join(srv.data_dir, "trajectories.sqlite"))
        for i, ep in d.eps.items():
            n, ret = db.execute("SELECT (SELECT COUNT(*) FROM turns WHERE episode_id = ?),"
                                " returns_json FROM episodes WHERE id = ?", (ep, ep)).fetchone()
            expect(n == TURNS and ret, f"episode {i}: {n} turns, returns {ret}")
        db.close()
        rep = c2.request("step", episode=ep_closed, action="```cuda\nx\n```")
        expect(not rep["ok"] and rep["error"]["code"] == "unknown_episode",
               f"a closed episode came back: {rep}")
        print(f"restart: {EPISODES} episodes x {TURNS} turns finished across a SIGKILL; "
              f"{len(before)} committed turns intact; {len(d.interrupted)} interrupted step(s) "
              f"answered internal: {d.interrupted[0][1][:90]}...")
        c2.close()
    except Exception:
        print(srv.output())
        if srv2:
            print(srv2.output())
        for log in logs:
            log.flush()
            print(open(log.name).read())
        raise
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        worker_rcs = []
        for w in workers:
            try:
                worker_rcs.append(w.wait(30))
            except Exception:
                w.kill()
                worker_rcs.append("hung")
        for log in logs:
            log.close()
        rc = srv2.stop() if srv2 else 0
        srv.ctx.destroy(0)
        srv.cleanup()
        if srv2:
            srv2.cleanup()
    expect(rc == 0, f"server exit code {rc}")
    expect(worker_rcs == [0, 0], f"workers did not stop cleanly on SIGTERM: {worker_rcs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
