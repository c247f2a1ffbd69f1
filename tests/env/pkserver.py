"""Starts `pkgym serve` for a test on an ipc:// endpoint in a private temp dir and stops it with
SIGTERM, checking that it exits 0. With curve=True it serves loopback TCP with CURVE instead
(keys made by `pkgym keygen`; this client's key is authorized). Uses Debian's python3
(python3-zmq, python3-msgpack)."""
import contextlib
import os
import re
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
from pkgym_client import curve as pk_curve  # noqa: E402


def asan_without_quarantine():
    """For tests that measure the server's RSS. Under AddressSanitizer freed blocks wait in a
    quarantine (256 MiB, plus a per-thread one) before reuse, so RSS moved by +-120 MiB between
    identical runs and read as growth or shrinkage; without it ASan still checks every access.
    The server inherits this environment; other builds ignore the variable."""
    asan = os.environ.get("ASAN_OPTIONS", "")
    os.environ["ASAN_OPTIONS"] = ":".join(
        filter(None, [asan, "quarantine_size_mb=0", "thread_local_quarantine_size_kb=0"]))


def keygen(base):
    """A key pair made by `pkgym keygen` (BASE.key, BASE.pub)."""
    subprocess.run([os.environ["PKGYM"], "keygen", base], check=True, capture_output=True)
    return base + ".key", base + ".pub"


class Server:
    def __init__(self, *extra, curve=False, data_dir=None, endpoint=None, prefix=()):
        """prefix: a command the server runs under (e.g. nsenter into a namespace)."""
        self.tmp = tempfile.mkdtemp(prefix="pkgym-env-test-")
        self.data_dir = data_dir or os.path.join(self.tmp, "data")
        self.curve_keys = None
        self.fixed_endpoint = endpoint
        pkgym = os.environ["PKGYM"]
        if curve:
            keys = os.path.join(self.tmp, "keys")
            allow = os.path.join(keys, "allow")
            os.makedirs(allow)
            self.server_key, self.server_pub = keygen(os.path.join(keys, "server"))
            self.client_key, client_pub = keygen(os.path.join(keys, "client"))
            shutil.copy(client_pub, allow)
            self.allow_dir = allow
            self.curve_keys = pk_curve.resolve(self.server_pub, self.client_key)
            bind = ["--bind", "tcp://127.0.0.1:*", "--curve-secret-key", self.server_key,
                    "--curve-allow", allow]
            self.endpoint = None  # the port the server picked, read from its log
        else:
            self.endpoint = self.fixed_endpoint or f"ipc://{self.tmp}/server.sock"
            bind = ["--bind", self.endpoint]
            if self.endpoint.endswith(":*"):  # a port the server picks, read from its log
                self.endpoint = None
        args = [*prefix, pkgym, "serve", *bind, "--data-dir", self.data_dir]
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
            if self.endpoint is None:
                m = re.search(r"bound (tcp://127\.0\.0\.1:\d+) \((?:no )?CURVE\)", self.output())
                if not m:
                    time.sleep(0.1)
                    continue
                self.endpoint = m.group(1)
            s = self.socket()
            s.send_multipart([b"", msgpack.packb({"op": "hello"})])
            ok = s.poll(200)
            s.close(0)
            if ok:
                return
        raise RuntimeError(f"server not ready in {timeout_s} s:\n{self.output()}")

    def socket(self, kind=zmq.DEALER, keys="default"):
        """A connected socket; with a CURVE server, this test's authorized key unless keys says
        otherwise (None: no CURVE, or a pk_curve.resolve() triple)."""
        s = self.ctx.socket(kind)
        s.setsockopt(zmq.LINGER, 0)
        pk_curve.apply(s, self.curve_keys if keys == "default" else keys)
        s.connect(self.endpoint)
        return s

    def client(self, timeout_s=60.0):
        if self.curve_keys:
            return Client(self.endpoint, timeout_s=timeout_s, context=self.ctx,
                          curve_server_key=self.server_pub, curve_client_key=self.client_key)
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


@contextlib.contextmanager
def running(srv, log_tail=None):
    """`with running(Server(...)) as srv:` runs the body against srv. If the body raises, the
    server's log (its last log_tail characters, or all of it) is printed before the error
    propagates; either way the server is stopped and its temp dir removed; after a body that
    did not raise, the server must have exited 0 (AssertionError otherwise)."""
    try:
        yield srv
    except Exception:
        out = srv.output()
        print(out[-log_tail:] if log_tail else out)
        raise
    finally:
        rc = srv.stop()
        srv.cleanup()
    if rc != 0:
        raise AssertionError(f"server exit code {rc}")


def raw_request(sock, frame, timeout_ms=10000):
    """Sends one raw body frame over a DEALER socket, returns the decoded reply."""
    sock.send_multipart([b"", frame])
    if not sock.poll(timeout_ms):
        raise TimeoutError("no reply")
    return msgpack.unpackb(sock.recv_multipart()[-1], raw=False, strict_map_key=False)


def selftest_problems(client):
    return [p for p in client.list_problems() if p["id"].startswith("selftest/")]
