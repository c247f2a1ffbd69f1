#!/usr/bin/env python3
"""Issue 27, finding 1: no client can abort the server through the ROUTER's routing ids.

libzmq 4.3.4 gives a peer that sends no routing id the id [0x00, counter] and asserts
(`socket_base.cpp:2130`, SIGABRT) when that id is already held. The counter started at the same
value on every start, and `stats.clients.you` showed it, so a client could claim the id the
next peer would get. The attack of the issue, each way a client could know the next id:

- from `stats.clients.you` (its own id, plus one, two, three);
- from the counter's start as unseeded glibc rand() gives it (the same on every start);

- every id of that form from 0x00 00000000 on, and around the counter's start (many of them);

then anonymous peers connect, DEALER and REQ, and every one must be served, the server alive.
On plain ipc:// and loopback tcp:// endpoints (a ZMQ_STREAM socket speaking ZMTP itself:
peers never name themselves, the server names them) and on loopback tcp:// with CURVE (an
authorized key: the ZAP handler gives clients routing ids of the server's choosing). Also:
`you` shows no routing id any more. Before the fix the first variant aborted the server; with
a predictable counter, test_routing_attack (C) shows the old path abort and the server now
survive."""
import ctypes
import re
import sys

import msgpack
import zmq

from pkserver import Server, raw_request

HELLO = msgpack.packb({"op": "hello"})


def unseeded_counter_start():
    """What libzmq 4.3.4's generate_random() returns when nothing seeded rand()."""
    libc = ctypes.CDLL("libc.so.6")
    libc.srand(1)
    low = libc.rand()
    high = libc.rand()
    return ((high << 31) | low) & 0xFFFFFFFF


def auto_id(n):
    return b"\x00" + (n & 0xFFFFFFFF).to_bytes(4, "big")


def attack(server, label):
    probe = server.socket()
    you = raw_request(probe, msgpack.packb({"op": "stats"}))["clients"]["you"]
    print(f"{label}: stats.clients.you = {you}")
    claims = []
    m = re.fullmatch(r"peer:00([0-9a-f]{8})", you)
    if m:
        mine = int(m.group(1), 16)
        claims += [auto_id(mine + k) for k in (1, 2, 3)]
    start = unseeded_counter_start()
    claims += [auto_id(start + k) for k in range(64)]
    claims += [auto_id(k) for k in range(64)]
    held = []
    for rid in claims:
        s = server.socket_with_id(rid)
        # Each claim is sent a request, so that its id is surely attached when the next
        # anonymous peers arrive (no reply is required: a duplicate id may be ignored).
        s.send_multipart([b"", HELLO])
        s.poll(500)
        held.append(s)
    for i in range(16):
        if i % 2:
            s = server.socket(zmq.REQ)
            s.send(HELLO)
            assert s.poll(10000), f"{label}: anonymous REQ peer {i}: no reply"
            reply = msgpack.unpackb(s.recv(), raw=False)
        else:
            s = server.socket()
            reply = raw_request(s, HELLO, timeout_ms=10000)
        assert reply.get("ok") is True, f"{label}: anonymous peer {i}: {reply}"
        s.close(0)
    for s in held[:8]:  # the claimers are served too, each under the server's name for it
        reply = raw_request(s, HELLO, timeout_ms=10000)
        assert reply.get("ok") is True, f"{label}: claimer: {reply}"
    assert server.proc.poll() is None, f"{label}: the server exited:\n{server.output()}"
    for s in held:
        s.close(0)
    probe.close(0)
    assert not re.fullmatch(r"peer:00[0-9a-f]{8}", you), \
        f"{label}: stats shows a generated routing id: {you}"


def socket_with_id(self, rid):
    s = self.ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.ROUTING_ID, rid)
    if self.curve_keys:
        from pkgym_client import curve as pk_curve
        pk_curve.apply(s, self.curve_keys)
    s.connect(self.endpoint)
    return s


Server.socket_with_id = socket_with_id


def plain_ws_refused():
    """A plain ws:// endpoint could only be a ROUTER (no STREAM transport): refused at start,
    naming the reason and the alternatives, for clients and for workers."""
    import os
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory(prefix="pkgym-ws-") as tmp:
        for flag in ("--bind", "--worker-bind"):
            args = [os.environ["PKGYM"], "serve", "--data-dir", os.path.join(tmp, "data"),
                    "--gpus", "none", "--bind", f"ipc://{tmp}/s.sock"]
            if flag == "--bind":
                args[-2:] = ["--bind", "ws://127.0.0.1:*"]
            else:
                args += ["--worker-bind", "ws://127.0.0.1:*"]
            p = subprocess.run(args, capture_output=True, text=True, timeout=60)
            assert p.returncode != 0, f"{flag} ws:// was served:\n{p.stderr}"
            for words in ("finding 1", "tcp:// or ipc://", "--curve-secret-key"):
                assert words in p.stderr, f"{flag} ws://: {words!r} not in:\n{p.stderr}"


def main():
    plain_ws_refused()
    for label, kw in (("ipc", {}), ("tcp", {"endpoint": "tcp://127.0.0.1:*"}),
                      ("tcp+CURVE", {"curve": True})):
        server = Server("--gpus", "none", **kw)
        try:
            attack(server, label)
            log = server.output()
            assert "Assertion failed" not in log, log
            rc = server.stop()
            assert rc == 0, f"{label}: exit {rc}:\n{log}"
        finally:
            if server.proc.poll() is None:
                server.proc.kill()
            server.cleanup()
    print("routing ids: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
