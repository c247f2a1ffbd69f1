#!/usr/bin/env python3
"""CURVE on the worker endpoint (issue #19 with #15's broker): `pkgym serve --worker-bind
--curve-secret-key --worker-curve-allow`.

- start-up: a non-loopback tcp:// worker endpoint without CURVE is refused unless --insecure
  (which warns); half a configuration is refused; with CURVE it binds tcp://0.0.0.0 quietly;
- refusals: workers with a key not in the allow directory, without CURVE, with the wrong
  server key, or with a client's key (allowed on the client endpoint only), are refused at
  the handshake: the broker never registers them and never gives them the job waiting in its
  queue; it counts them in stats (`workers_refused`, `handshakes_failed`); a real `pkgym
  worker` with a refused key, or without keys, exits 1 with an error naming its key and the
  option to fix; a worker key cannot play episodes on the client endpoint;
- an allowed worker then gets that job, and a real `pkgym worker` with its keys in
  PKGYM_WORKER_CURVE_* runs selftest steps; after the broker fell silent (SIGSTOP) the worker
  reconnects as a new session, handshakes again and keeps running steps (Paranoid Pirate).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import msgpack

from fakeworker import FakeWorker
from pkserver import SRC, Server, keygen
from scaleout import WorkerKeys, action_text, worker_args

from pkgym_client import AuthenticationError, Client
from pkgym_client import curve as pk_curve

PKGYM = os.environ["PKGYM"]
HB = 250  # ms; the worker and the broker count each other lost after 4 silent intervals


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def wait_for(cond, what, timeout_s=15):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def serve_fails(*args):
    tmp = tempfile.mkdtemp(prefix="pk-worker-curve-start-")
    p = subprocess.run([PKGYM, "serve", "--data-dir", os.path.join(tmp, "d"),
                        "--bind", f"ipc://{tmp}/s.sock", "--gpus", "none", *args],
                       capture_output=True, text=True, timeout=60)
    shutil.rmtree(tmp, ignore_errors=True)
    expect(p.returncode != 0, f"pkgym serve {args} should refuse to start:\n{p.stderr}")
    return p.stderr


def startup(keys):
    err = serve_fails("--worker-bind", "tcp://0.0.0.0:*")
    expect("worker endpoint" in err and "--worker-curve-allow" in err and "--insecure" in err,
           err)
    print("  tcp://0.0.0.0 worker endpoint without CURVE: refused")
    err = serve_fails("--worker-bind", "tcp://127.0.0.1:*", "--worker-curve-allow",
                      keys.allow)
    expect("--curve-secret-key" in err, err)
    err = serve_fails("--worker-bind", "tcp://127.0.0.1:*", "--curve-secret-key",
                      keys.server_key)
    expect("--worker-curve-allow" in err, err)
    err = serve_fails(*keys.serve_args)
    expect("--worker-bind" in err, err)
    print("  half a CURVE configuration: refused")
    # Ports picked by the kernel (`*`): no race with other tests for a free one.
    insecure = Server("--gpus", "none", "--worker-bind", "tcp://0.0.0.0:*", "--insecure")
    try:
        out = insecure.output()
        expect("WARNING: tcp://0.0.0.0:* is bound without CURVE" in out and
               re.search(r"worker endpoint tcp://0\.0\.0\.0:\d+ \(no CURVE\)", out), out)
    finally:
        expect(insecure.stop() == 0, "insecure server exit code")
        insecure.cleanup()
    secured = Server("--gpus", "none", "--worker-bind", "tcp://0.0.0.0:*", *keys.serve_args)
    try:
        out = secured.output()
        expect(re.search(r"worker endpoint tcp://0\.0\.0\.0:\d+ \(CURVE\)", out) and
               "WARNING" not in out, out)
    finally:
        expect(secured.stop() == 0, "secured server exit code")
        secured.cleanup()
    print("  --insecure: binds with a warning; with CURVE: binds tcp://0.0.0.0 without one")


def scale_out_dry_run(keys):
    """scripts/scale-out passes the workers' key variables on: mpirun with -x (remote ranks
    get only what -x names), srun with the environment it passes on by default."""
    env = dict(os.environ, SCALE_OUT_DRY_RUN="1", PKGYM=PKGYM, **keys.env)
    script = os.path.join(SRC, "scripts", "scale-out")
    mpi = subprocess.run([script, "mpirun", "-np", "2", "--", "--connect", "tcp://head:5600"],
                         env=env, capture_output=True, text=True, check=True).stdout
    expect("-x PKGYM_WORKER_CURVE_SERVER_KEY -x PKGYM_WORKER_CURVE_SECRET_KEY" in mpi, mpi)
    srun = subprocess.run([script, "srun", "-N", "4", "--", "--connect", "tcp://head:5600"],
                          env=env, capture_output=True, text=True, check=True).stdout
    expect(srun.startswith("srun --kill-on-bad-exit=0 --no-kill -N 4 ") and
           " worker --connect tcp://head:5600" in srun and "--export" not in srun, srun)
    env = {k: v for k, v in env.items() if not k.startswith("PKGYM_WORKER_CURVE")}
    mpi = subprocess.run([script, "mpirun", "-np", "2", "--", "--connect", "tcp://head:5600"],
                         env=env, capture_output=True, text=True, check=True).stdout
    expect("PKGYM_WORKER_CURVE" not in mpi, mpi)
    print("  scripts/scale-out: mpirun -x the key variables when set; srun passes them on")


class Steps:
    """Raw protocol over the server's client socket, so that a step can stay unanswered."""

    def __init__(self, srv):
        self.sock = srv.socket()
        self.next_id = 1

    def send(self, **fields):
        rid = self.next_id
        self.next_id += 1
        self.sock.send_multipart([b"", msgpack.packb(dict(fields, id=rid))])
        return rid

    def wait(self, rid, timeout_s=60):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.sock.poll(100):
                rep = msgpack.unpackb(self.sock.recv_multipart()[-1], raw=False)
                if rep.get("id") == rid:
                    return rep
        raise AssertionError(f"no reply to request {rid} in {timeout_s} s")

    def pending(self, within_s):
        return not self.sock.poll(int(within_s * 1000))

    def episode(self, problem="selftest/scale"):
        rep = self.wait(self.send(op="reset", problem=problem, max_turns=8))
        expect(rep["ok"], f"reset: {rep}")
        return rep["episode"]

    def step(self, ep, solution, problem="selftest/scale"):
        return self.send(op="step", episode=ep, action=action_text(problem, solution))

    def stats(self):
        return self.wait(self.send(op="stats"))


def run_worker(port, tmp, name, *extra, env_extra=None, timeout_s=30):
    """A real `pkgym worker` that the broker must refuse: its exit code and output."""
    p = subprocess.run([PKGYM, "worker", "--name", name, "--gpus", "none",
                        *worker_args(port, os.path.join(tmp, "wd")), *extra],
                       capture_output=True, text=True, timeout=timeout_s,
                       env=dict(os.environ, **(env_extra or {})))
    return p.returncode, p.stdout + p.stderr


def refusals_and_jobs(keys, tmp):
    srv = Server("--gpus", "none", "--worker-bind", "tcp://127.0.0.1:*", "--worker-heartbeat-ms",
                 str(HB), "--worker-liveness", "4", "--worker-curve-allow", keys.allow,
                 curve=True)
    # The port the kernel gave the worker endpoint, from the server's log.
    port = int(re.search(r"worker endpoint tcp://127\.0\.0\.1:(\d+) \(CURVE\)",
                         srv.output()).group(1))
    ep_url = f"tcp://127.0.0.1:{port}"
    # Server(curve=True) made its own key pair and client key; the workers need its key.
    keys.server_pub = srv.server_pub
    worker_pub = WorkerKeys.public(keys.worker_pub)
    fakes, procs = [], []
    try:
        c = Steps(srv)
        other_key, _ = keygen(os.path.join(tmp, "other"))
        impostor_key, _ = keygen(os.path.join(tmp, "impostor"))
        refused = {
            "not-allowed": pk_curve.resolve(srv.server_pub, other_key),
            "no-curve": None,
            "wrong-server-key": pk_curve.resolve(impostor_key, keys.worker_key),
            "client-key": pk_curve.resolve(srv.server_pub, srv.client_key),
        }
        for name, k in refused.items():
            fakes.append(FakeWorker(srv.ctx, ep_url, name, curve=k, heartbeat_ms=HB))
        ep = c.episode()
        rid = c.step(ep, "wrong_rank.cu")
        time.sleep(3)
        for f in fakes:
            f.no_job(0.01)
        expect(c.pending(0.1), "the step was answered without a worker")
        st = c.stats()
        b = st["broker"]
        expect(st["workers"] == [] and b["workers_joined"] == 0,
               f"a refused worker was registered: {st['workers']}")
        expect(b["curve"] and b["workers_refused"] >= 2 and b["handshakes_failed"] >= 2,
               f"refusals not counted: {b}")
        expect(st["clients"]["curve_refused"] == 0,
               f"worker refusals counted as client refusals: {st['clients']}")
        print(f"  4 scripted workers refused (workers_refused {b['workers_refused']}, "
              f"handshakes_failed {b['handshakes_failed']}); none got the queued job")
        rc, out = run_worker(port, tmp, "w-other", "--curve-server-key", srv.server_pub,
                             "--curve-secret-key", other_key)
        other_pub = WorkerKeys.public(other_key)
        expect(rc == 1 and f"refused this worker's CURVE key {other_pub}" in out and
               "--worker-curve-allow" in out, f"refused pkgym worker: rc {rc}\n{out}")
        # Ten times, each within 10 s: libzmq reports the mechanism mismatch only when the
        # broker's greeting left before it closed; otherwise the worker asks the broker's
        # greeting itself (pk_zmtp_probe.h). Without that, 12 of 40 such workers took 5.7-39 s
        # and one of 40 more over 60 s, retrying with back-off.
        for i in range(10):
            rc, out = run_worker(port, tmp, f"w-plain-{i}", timeout_s=10)
            expect(rc == 1 and "requires CURVE" in out and "--curve-secret-key" in out,
                   f"pkgym worker without keys: rc {rc}\n{out}")
        rc, out = run_worker(port, tmp, "w-half", "--curve-secret-key", keys.worker_key)
        expect(rc == 2 and "PKGYM_WORKER_CURVE_SERVER_KEY" in out, f"half keys: rc {rc}\n{out}")
        print("  pkgym worker with a refused key / without keys: exits 1 saying why")
        # A worker's key is no client key.
        try:
            Client(srv.endpoint, timeout_s=10, curve_server_key=srv.server_pub,
                   curve_client_key=keys.worker_key).hello()
            raise AssertionError("a worker key was admitted on the client endpoint")
        except AuthenticationError:
            pass
        # The allowed worker gets the job that waited.
        good = FakeWorker(srv.ctx, ep_url, "allowed", heartbeat_ms=HB,
                          curve=pk_curve.resolve(srv.server_pub, keys.worker_key))
        fakes.append(good)
        job = good.next_job(timeout_s=15)
        expect(job["problem"] == "selftest/scale", f"job {job}")
        good.result(job, status="incorrect", reason="from the allowed worker")
        rep = c.wait(rid)
        expect(rep["ok"] and rep["info"]["reason"] == "from the allowed worker", f"{rep}")
        st = c.stats()
        names = [w["name"] for w in st["workers"]]
        expect(names == ["allowed"] and st["workers"][0]["curve_key"] == worker_pub,
               f"workers {st['workers']}")
        for f in fakes[:4]:
            f.no_job(0.01)
        good.stop()
        wait_for(lambda: not [w for w in c.stats()["workers"] if "departed_at" not in w],
                 "the scripted worker gone")
        print("  the allowed key joined and got the queued job; the refused ones never did")

        # A real worker with its keys from the environment runs selftest steps.
        log_path = os.path.join(tmp, "worker.log")
        env = dict(keys.env, PKGYM_WORKER_CURVE_SERVER_KEY=srv.server_pub)
        log = open(log_path, "w")
        proc = subprocess.Popen([PKGYM, "worker", "--name", "real", "--gpus", "none",
                                 *worker_args(port, os.path.join(tmp, "wd"), HB)],
                                stdout=log, stderr=subprocess.STDOUT,
                                env=dict(os.environ, **env))
        procs.append((proc, log))
        for sol, status in (("correct.cu", "correct"), ("wrong_rank.cu", "incorrect")):
            rep = c.wait(c.step(ep, sol), timeout_s=120)
            expect(rep["ok"] and rep["info"]["status"] == status, f"{sol}: {rep}")
        real = [w for w in c.stats()["workers"] if w["name"] == "real"]
        expect(real and real[0]["curve_key"] == worker_pub, f"real worker {real}")
        # The broker falls silent: the worker counts it lost and reconnects as a new session
        # (a new socket, a new CURVE handshake); the broker takes the new session.
        srv.proc.send_signal(signal.SIGSTOP)
        time.sleep(HB * 4 / 1000.0 + 2.0)
        srv.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: c.stats()["broker"]["workers_joined"] >= 3, "the worker's new session",
                 timeout_s=30)
        rep = c.wait(c.step(ep, "correct.cu"), timeout_s=120)
        expect(rep["ok"] and rep["info"]["status"] == "correct", f"after reconnect: {rep}")
        log.flush()
        wlog = open(log_path).read()
        expect("reconnecting" in wlog and "CURVE: this worker's key " + worker_pub in wlog,
               f"worker log:\n{wlog}")
        b = c.stats()["broker"]
        print(f"  real worker: 3 steps, one after a reconnect with a new handshake "
              f"(workers_joined {b['workers_joined']}, completed {b['completed']})")
    except Exception:
        print(srv.output())
        for _, log in procs:
            log.flush()
            print(open(log.name).read())
        raise
    finally:
        for f in fakes:
            f.stop()
        for proc, log in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
            log.close()
        rc = srv.stop()
        srv.cleanup()
    expect(rc == 0, f"server exit code {rc}")
    for proc, _ in procs:
        expect(proc.returncode == 0, f"worker exit code {proc.returncode}")


def main():
    tmp = tempfile.mkdtemp(prefix="pk-worker-curve-")
    try:
        keys = WorkerKeys(tmp)
        scale_out_dry_run(keys)
        startup(keys)
        refusals_and_jobs(keys, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("worker curve: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
