#!/usr/bin/env python3
"""Load: 64 concurrent DEALER clients x 100 pipelined requests each, no reply lost or
mismatched; then the server's RSS stays flat over 100k requests. --curve: the same over
loopback TCP with CURVE."""
import random
import sys
import time

import msgpack
import zmq

from pkserver import Server, asan_without_quarantine, running, selftest_problems


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def make_request(rng, cid, i, problem_ids):
    """A mix of ops, each with a reply whose content we can check against the request."""
    rid = [cid, i]
    kind = rng.randrange(5)
    if kind == 0:
        return {"op": "hello", "id": rid}, lambda r: r["ok"] and r["protocol"] == 1
    if kind == 1 and problem_ids:
        pid = rng.choice(problem_ids)
        return ({"op": "get_problem", "problem": pid, "id": rid},
                lambda r: r["ok"] and r["problem"]["id"] == pid)
    if kind == 2:
        return ({"op": "no_such_op_%d" % i, "id": rid},
                lambda r: r["error"]["code"] == "unknown_op" and str(i) in r["error"]["message"])
    if kind == 3:
        ep = "%032x" % (cid * 1000 + i)
        return ({"op": "trajectory", "episode": ep, "id": rid},
                lambda r: r["error"]["code"] == "unknown_episode" and ep in r["error"]["message"])
    return {"op": "list_problems", "id": rid}, lambda r: r["ok"] and "problems" in r


def concurrent_clients(srv, problem_ids, n_clients=64, per_client=100):
    rng = random.Random(11)
    socks, pending = [], {}
    for cid in range(n_clients):
        s = srv.socket()
        socks.append(s)
        for i in range(per_client):
            req, check = make_request(rng, cid, i, problem_ids)
            pending[(cid, i)] = check
            s.send_multipart([b"", msgpack.packb(req)])
    poller = zmq.Poller()
    for s in socks:
        poller.register(s, zmq.POLLIN)
    got = 0
    deadline = time.time() + 120
    while pending and time.time() < deadline:
        for s, _ in poller.poll(1000):
            while True:
                try:
                    frames = s.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                rep = msgpack.unpackb(frames[-1], raw=False)
                key = tuple(rep["id"])
                expect(socks[key[0]] is s, f"reply {key} arrived on another client's socket")
                check = pending.pop(key, None)
                expect(check is not None, f"duplicate or unknown reply {key}")
                expect(check(rep), f"reply {key} does not match its request: {rep}")
                got += 1
    for s in socks:
        s.close(0)
    expect(not pending, f"{len(pending)} replies lost")
    print(f"  {n_clients} clients x {per_client} requests: {got} replies, none lost or mismatched")


def pump(sock, requests, window=256):
    """Sends the requests keeping `window` in flight; checks every reply is ok or an error."""
    sent = recv = 0
    n = len(requests)
    while recv < n:
        while sent < n and sent - recv < window:
            sock.send_multipart([b"", requests[sent]])
            sent += 1
        expect(sock.poll(30000), "server stopped answering")
        rep = msgpack.unpackb(sock.recv_multipart()[-1], raw=False)
        expect("ok" in rep, "reply without ok")
        recv += 1


def flat_rss(srv, problem_ids, total=100_000):
    sock = srv.socket()
    pid = problem_ids[0] if problem_ids else "none/none"
    mix = [msgpack.packb(r) for r in (
        {"op": "hello", "id": 1},
        {"op": "get_problem", "problem": pid, "id": "x"},
        {"op": "list_problems", "tags": ["a", "b"], "id": [1, 2]},
        {"op": "step", "episode": "0" * 32, "action": "a" * 4096, "id": 2},
        {"op": "reset", "problem": "no/such", "options": {"reward": {"gamma": 0.5}}},
        {"op": "bogus", "id": {"k": "v"}},
    )] + [b"\x93\x01\x02", b"\xc1garbage", msgpack.packb({"op": "hello", "pad": "z" * 20000})]
    batch = [mix[i % len(mix)] for i in range(total // 10)]
    pump(sock, batch)  # warm-up: allocator pools, zmq buffers
    before = srv.rss_kib()
    for _ in range(9):
        pump(sock, batch)
    # Episodes too: open and close some, so their memory is returned.
    if problem_ids:
        c = srv.client()
        for _ in range(200):
            ep = c.call("reset", problem=pid)["episode"]
            c.call("close", episode=ep)
        c.close()
    after = srv.rss_kib()
    sock.close(0)
    growth = after - before
    print(f"  RSS over {total} requests: {before} KiB -> {after} KiB ({growth:+d} KiB)")
    expect(growth < 4096, f"RSS grew by {growth} KiB")


def main():
    curve = "--curve" in sys.argv[1:]  # loopback TCP with CURVE, this client's key authorized
    asan_without_quarantine()  # RSS is measured
    with running(Server(curve=curve)) as srv:
        c = srv.client()
        problem_ids = [p["id"] for p in selftest_problems(c)] or \
            [p["id"] for p in c.list_problems()]
        c.close()
        concurrent_clients(srv, problem_ids)
        flat_rss(srv, problem_ids)
    print(f"load{' (CURVE)' if curve else ''}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
