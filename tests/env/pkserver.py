"""Starts `pkgym serve` for a test on an ipc:// endpoint in a private temp dir and stops it with
SIGTERM, checking that it exits 0. Uses Debian's python3 (python3-zmq, python3-msgpack)."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("PK_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..", "..")))
sys.path.insert(0, os.path.join(SRC, "rollout", "python"))

import msgpack  # noqa: E402
import zmq  # noqa: E402

from pkgym_client import Client  # noqa: E402,F401


class Server:
    def __init__(self, *extra, data_dir=None, endpoint=None):
        self.tmp = tempfile.mkdtemp(prefix="pkgym-env-test-")
        self.endpoint = endpoint or f"ipc://{self.tmp}/server.sock"
        self.data_dir = data_dir or os.path.join(self.tmp, "data")
        pkgym = os.environ["PKGYM"]
        args = [pkgym, "serve", "--bind", self.endpoint, "--data-dir", self.data_dir]
        build = os.environ.get("PK_BUILD_DIR")
        if build:
            args += ["--modules", os.path.join(build, "problems", "modules")]
        args += list(extra)
        self.log_path = os.path.join(self.tmp, "server.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self.ctx = zmq.Context()
        self._wait_ready()

    def _wait_ready(self, timeout_s=30.0):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.output()}")
            s = self.socket()
            s.send_multipart([b"", msgpack.packb({"op": "hello"})])
            ok = s.poll(200)
            s.close(0)
            if ok:
                return
        raise RuntimeError(f"server not ready in {timeout_s} s:\n{self.output()}")

    def socket(self, kind=zmq.DEALER):
        s = self.ctx.socket(kind)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(self.endpoint)
        return s

    def client(self, timeout_s=60.0):
        return Client(self.endpoint, timeout_s=timeout_s, context=self.ctx)

    def output(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def stop(self, timeout_s=30.0, sig=signal.SIGTERM):
        """Sends sig (SIGTERM or SIGINT); returns the exit code (the server must exit 0)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        self.ctx.destroy(0)
        self.log.close()
        return self.proc.returncode

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def raw_request(sock, frame, timeout_ms=10000):
    """Sends one raw body frame over a DEALER socket, returns the decoded reply."""
    sock.send_multipart([b"", frame])
    if not sock.poll(timeout_ms):
        raise TimeoutError("no reply")
    return msgpack.unpackb(sock.recv_multipart()[-1], raw=False, strict_map_key=False)


def selftest_problems(client):
    return [p for p in client.list_problems() if p["id"].startswith("selftest/")]
