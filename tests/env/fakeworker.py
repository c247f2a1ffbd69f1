"""A scripted worker that speaks the broker's wire (docs/scale-out.md, "Wire") from Python, to
drive the broker into the cases a real worker rarely produces: falling silent mid-job, a
result sent after the broker gave up on it, duplicate results, wrong problem versions. It
produces no verdicts of its own: the tests hand it the result to send."""
import hashlib
import os
import queue
import threading
import time

import msgpack
import zmq

from pkserver import SRC


def problem_version(problem_id):
    """The version a real worker announces: SHA-256 of meta.json, a NUL, and problem.cu."""
    suite, name = problem_id.split("/", 1)
    d = os.path.join(SRC, "problems", suite, name)
    h = hashlib.sha256()
    with open(os.path.join(d, "meta.json"), "rb") as f:
        h.update(f.read() + b"\0")
    pcu = os.path.join(d, "problem.cu")
    if os.path.exists(pcu):
        with open(pcu, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def verdict(status, reason, gpu_name="", speedup=None):
    """A result map (the wire's eval result) with only status, reason, GPU and speedup set."""
    return {"status": status, "reason": reason, "rule": "", "checks": [], "trials": [],
            "has_timing": speedup is not None, "speedup": speedup or 0.0,
            "candidate": {"median_us": 10.0}, "reference": {"median_us": 10.0 * (speedup or 0)},
            "world_size": 2, "hung_ranks": [], "exit_code": 0, "signal": 0, "launcher": "mpi",
            "gpu_name": gpu_name}


class FakeWorker:
    def __init__(self, ctx, endpoint, name, problems=None, gpus=0, max_world=None,
                 host_slots=1, max_jobs=4, gpu_model="", heartbeat_ms=100, auto=None, curve=None):
        self.ctx, self.endpoint, self.name = ctx, endpoint, name
        self.curve = curve            # CURVE keys (pkgym_client.curve.resolve()), or None
        self.problems = problems if problems is not None else [
            [p, problem_version(p)] for p in ("selftest/scale", "selftest/allreduce",
                                              "collectives/allreduce")]
        self.gpus, self.max_jobs, self.host_slots = gpus, max_jobs, host_slots
        self.max_world = gpus if max_world is None else max_world
        self.gpu_model = gpu_model
        self.heartbeat_ms = heartbeat_ms
        self.auto = auto              # (status, speedup): answer every job at once
        self.jobs = queue.Queue()     # jobs received (decoded maps)
        self.byes = 0
        self.silent = False           # stop heartbeats (and everything else)
        self.cmds = queue.Queue()
        self.session = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _ready(self):
        gpus = [{"index": i, "name": self.gpu_model, "memory_mib": 1, "uuid": f"GPU-{i}"}
                for i in range(self.gpus)]
        return {"t": "ready", "protocol": 1, "name": self.name, "host": "fake", "pid": 0,
                "gpus": gpus, "nvlink_domains": [list(range(self.max_world))] if self.gpus
                else [],
                "host_info": {"gpu_model": self.gpu_model or "none", "driver": "fake",
                              "nccl": "1", "cpu_model": "fake-cpu"},
                "capacity": {"compile_workers": 1, "gpu_slots": self.gpus,
                             "host_slots": self.host_slots, "max_jobs": self.max_jobs,
                             "max_world": self.max_world},
                "problems": self.problems, "missing": []}

    def _connect(self):
        self.session += 1
        s = self.ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.ROUTING_ID, f"{self.name}#{self.session}".encode())
        if self.curve:
            s.curve_serverkey, s.curve_publickey, s.curve_secretkey = self.curve
        s.connect(self.endpoint)
        self._send(s, self._ready())
        return s

    @staticmethod
    def _send(sock, msg):
        # Never blocks: a socket whose handshake was refused has no pipe to queue into.
        try:
            sock.send(msgpack.packb(msg), zmq.NOBLOCK)
        except zmq.Again:
            pass

    def _run(self):
        sock = self._connect()
        last = 0.0
        while not self.stopping:
            while not self.cmds.empty():
                cmd, arg = self.cmds.get()
                if cmd == "send":
                    self._send(sock, arg)
                elif cmd == "reconnect":
                    sock.close(0)
                    sock = self._connect()
            if sock.poll(20):
                msg = msgpack.unpackb(sock.recv(), raw=False, strict_map_key=False)
                if not self.silent:
                    if msg["t"] == "job" and self.auto:
                        self._send(sock, self._result(msg, self.auto[0], "auto",
                                                      speedup=self.auto[1]))
                    elif msg["t"] == "job":
                        msg["session"] = self.session
                        self.jobs.put(msg)
                    elif msg["t"] == "bye":
                        self.byes += 1
            now = time.time()
            if not self.silent and now - last > self.heartbeat_ms / 1000.0:
                self._send(sock, {"t": "hb"})
                last = now
        sock.close(0)

    def next_job(self, timeout_s=10):
        return self.jobs.get(timeout=timeout_s)

    def no_job(self, within_s):
        try:
            job = self.jobs.get(timeout=within_s)
        except queue.Empty:
            return True
        raise AssertionError(f"{self.name} got a job it should not have: {job}")

    def _result(self, job, status, reason, code="ok", message="", baseline=None, speedup=None):
        r = {"t": "result", "id": job["id"], "attempt": job["attempt"],
             "code": code, "message": message, "worker_ms": 1.0,
             "baseline": baseline or {"device": "", "driver": "", "nccl": "", "world": 0,
                                      "us": 0.0}}
        if code == "ok":
            r["result"] = verdict(status, reason or f"from {self.name}", self.gpu_model, speedup)
        return r

    def result(self, job, status="incorrect", reason="", code="ok", message="", baseline=None):
        self.cmds.put(("send", self._result(job, status, reason, code, message, baseline)))

    def reconnect(self):
        self.cmds.put(("reconnect", None))

    def stop(self):
        self.stopping = True
        self.thread.join(5)
