"""Helpers for the scale-out tests (docs/scale-out.md): a broker (`pkgym serve --worker-bind`),
workers started by scripts/scale-out (mpirun) or directly, and a batch driver that pipelines
many episodes over one DEALER socket and counts the replies of every request id."""
import os
import socket
import subprocess
import time

import msgpack
import zmq

from pkserver import SRC, Server

PKGYM = os.environ.get("PKGYM", "")

# (problem, solution file) -> the action; a spread of verdicts.
ACTIONS = [
    ("selftest/allreduce", "correct.cu"),
    ("selftest/allreduce", "wrong_subtle.cu"),
    ("selftest/allreduce", "forbidden_collective.cu"),
    ("selftest/allreduce", "segfault.cu"),
    ("selftest/allreduce", "compile_error.cu"),
    ("selftest/allreduce", "modifies_input.cu"),
    ("selftest/scale", "correct.cu"),
    ("selftest/scale", "wrong_rank.cu"),
    ("selftest/allgather", "correct.cu"),
    ("selftest/allgather", "wrong_order.cu"),
]


def action_text(problem, solution):
    suite, name = problem.split("/", 1)
    with open(os.path.join(SRC, "problems", suite, name, "solutions", solution)) as f:
        return "```cuda\n" + f.read() + "\n```\n"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def broker(port, *extra, heartbeat_ms=250, data_dir=None):
    args = ["--gpus", "none", "--worker-bind", f"tcp://127.0.0.1:{port}",
            "--worker-heartbeat-ms", str(heartbeat_ms), "--worker-liveness", "4"]
    return Server(*args, *extra, data_dir=data_dir)


def worker_args(port, data_dir, heartbeat_ms=250):
    args = ["--connect", f"tcp://127.0.0.1:{port}", "--compile-workers", "1",
            "--heartbeat-ms", str(heartbeat_ms), "--liveness", "4", "--data-dir", data_dir,
            "--grace-ms", "5000"]
    build = os.environ.get("PK_BUILD_DIR")
    if build:
        args += ["--modules", os.path.join(build, "problems", "modules")]
    return args


def start_mpirun_workers(n, port, data_dir, log_path, env_extra=None):
    # Local ranks only: mpirun needs no ssh (a CI image may have none).
    env = dict(os.environ, PKGYM=PKGYM, OMPI_MCA_plm_rsh_agent="false", **(env_extra or {}))
    cmd = [os.path.join(SRC, "scripts", "scale-out"), "mpirun", "-np", str(n), "--oversubscribe",
           "--"] + worker_args(port, data_dir)
    log = open(log_path, "w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True), log


def start_worker(port, data_dir, name, log_path, *extra, env_extra=None):
    log = open(log_path, "a")
    return subprocess.Popen([PKGYM, "worker", "--name", name] + worker_args(port, data_dir) +
                            list(extra), stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, **(env_extra or {}))), log


class WorkerKeys:
    """CURVE keys for a broker's worker endpoint (docs/scale-out.md, "Security"): the server's
    key pair, one worker key pair whose .pub is in the allow directory, and `serve_args` for
    `pkgym serve`. Made by `pkgym keygen` in dir."""

    def __init__(self, dir):
        from pkserver import keygen
        self.dir = dir
        self.allow = os.path.join(dir, "worker-allow")
        os.makedirs(self.allow)
        self.server_key, self.server_pub = keygen(os.path.join(dir, "server"))
        self.worker_key, self.worker_pub = keygen(os.path.join(dir, "worker"))
        subprocess.run(["cp", self.worker_pub, self.allow], check=True)
        self.serve_args = ["--curve-secret-key", self.server_key,
                           "--worker-curve-allow", self.allow]
        self.env = {"PKGYM_WORKER_CURVE_SERVER_KEY": self.server_pub,
                    "PKGYM_WORKER_CURVE_SECRET_KEY": self.worker_key}

    @staticmethod
    def public(path):
        """The 40-character public key of a key file."""
        from pkgym_client import curve
        return curve.load_key_file(path)[0].decode()


def wait_workers(client, n, timeout_s=60):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        st = client.stats()
        live = [w for w in st.get("workers", []) if "departed_at" not in w]
        if len(live) >= n:
            return live
        time.sleep(0.2)
    raise AssertionError(f"{n} workers did not connect in {timeout_s} s")


class Batch:
    """Drives episodes (one step each, or a list of actions) over one DEALER socket and counts
    every reply by request id. on_progress(batch) runs after each step reply."""

    def __init__(self, endpoint, ctx):
        self.sock = ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)
        self.next_id = 1
        self.pending = {}   # id -> (kind, episode index)
        self.replies = {}   # id -> count
        self.results = {}   # episode index -> [step replies]
        self.errors = []

    def send(self, kind, index, **fields):
        rid = self.next_id
        self.next_id += 1
        self.pending[rid] = (kind, index)
        self.replies[rid] = 0
        self.sock.send_multipart([b"", msgpack.packb(dict(fields, id=rid))])
        return rid

    def recv(self, timeout_ms):
        if not self.sock.poll(timeout_ms):
            return None
        rep = msgpack.unpackb(self.sock.recv_multipart()[-1], raw=False, strict_map_key=False)
        rid = rep.get("id")
        self.replies[rid] = self.replies.get(rid, 0) + 1
        return rep

    def run(self, plans, timeout_s, on_progress=None, reset_fields=None):
        """plans: list of (problem, [actions]). Returns when every episode has its replies."""
        episodes = {}
        todo = {}
        for i, (problem, actions) in enumerate(plans):
            todo[i] = list(actions)
            self.results[i] = []
            self.send("reset", i, op="reset", problem=problem, max_turns=len(actions),
                      **(reset_fields or {}))
        open_ids = set(self.pending)
        deadline = time.time() + timeout_s
        while open_ids and time.time() < deadline:
            rep = self.recv(500)
            if rep is None:
                continue
            rid = rep.get("id")
            if rid not in open_ids:
                continue  # a duplicate, or a stats reply: counted in self.replies
            open_ids.discard(rid)
            kind, i = self.pending[rid]
            if not rep.get("ok"):
                self.errors.append((kind, i, rep.get("error")))
                if kind == "step":
                    self.results[i].append(rep)
                continue
            if kind == "reset":
                episodes[i] = rep["episode"]
            else:
                self.results[i].append(rep)
            if todo[i]:
                open_ids.add(self.send("step", i, op="step", episode=episodes[i],
                                       action=todo[i].pop(0)))
            if kind == "step" and on_progress:
                on_progress(self)
        return episodes, open_ids

    def steps_done(self):
        return sum(len(r) for r in self.results.values())

    def duplicates(self):
        return {rid: n for rid, n in self.replies.items() if n > 1}

    def unanswered(self):
        return [rid for rid, n in self.replies.items() if n == 0]

    def close(self):
        self.sock.close(0)


def reference_verdicts(pairs, timeout_s=300):
    """The single-machine run: each (problem, solution) once on a plain local server."""
    srv = Server("--gpus", "none")
    try:
        batch = Batch(srv.endpoint, srv.ctx)
        plans = [(problem, [action_text(problem, solution)]) for problem, solution in pairs]
        _, open_ids = batch.run(plans, timeout_s=timeout_s)
        if open_ids or batch.errors:
            raise AssertionError(f"reference run: {len(open_ids)} unanswered, {batch.errors}")
        out = {pair: batch.results[i][0]["info"]["status"] for i, pair in enumerate(pairs)}
        batch.close()
        return out
    finally:
        srv.stop()
        srv.cleanup()
