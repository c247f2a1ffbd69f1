#!/usr/bin/env python3
"""Wire fuzzing of a live `pkgym serve`: the libFuzzer seed corpus (this directory's corpus/)
mutated (bit flips, inserted, deleted and repeated bytes, truncation, splices, magic bytes) and
random msgpack requests, sent over a real connection, pipelined. Every frame must get exactly
one reply (a map with `ok`), and the server must keep serving and exit 0 on SIGTERM.

With --curve the server listens on loopback TCP with CURVE and the frames travel over an
authenticated, encrypted connection; in addition, raw TCP peers that do not speak CURVE (random
bytes, truncated ZMTP greetings, a NULL-mechanism greeting, a CURVE greeting followed by a
garbage HELLO) hammer the same port, and none of them may reach the request decoder.

    fuzz_wire.py [--curve] [--seconds S] [--seed N]
"""
import argparse
import os
import random
import socket
import sys
import time

import msgpack

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from pkserver import Server, running  # noqa: E402

MAGIC = [b"\x00", b"\xff", b"\xc1", b"\xc0", b"\xdf\xff\xff\xff\xff", b"\xdd\x7f\xff\xff\xff",
         b"\xdb\x00\x00\x00\x10", b"\x81", b"\x9f", b"\xa4step", b"\xa2op"]
OPS = ["hello", "list_problems", "get_problem", "reset", "step", "close", "trajectory",
       "stats", "bogus"]


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def corpus():
    seeds = []
    d = os.path.join(HERE, "corpus")
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            seeds.append(f.read())
    return seeds


def random_value(rng, depth=0):
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return rng.randint(-2**63, 2**64 - 1)
    if kind == 1:
        return rng.random() * 10 ** rng.randint(-5, 20)
    if kind == 2:
        return "".join(chr(rng.randint(1, 0x2ff)) for _ in range(rng.randint(0, 40)))
    if kind == 3:
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 20)))
    if kind == 4:
        return rng.choice([None, True, False])
    if kind == 5:
        return rng.choice(["selftest/scale", "a" * 32, "../../etc/passwd", "x\u00e9"])
    if kind == 6:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    return {rng.choice(["problem", "episode", "options", "seed", "id", "x"]):
            random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def structured(rng):
    req = {"op": rng.choice(OPS)}
    for _ in range(rng.randint(0, 4)):
        req[rng.choice(["problem", "episode", "action", "summary", "seed", "max_turns",
                        "options", "tags", "id", "group"])] = random_value(rng)
    if req["op"] == "reset" and rng.random() < 0.5:
        req["options"] = {"feedback": {"hooks": {"feedback": rng.choice(
            ["plugin:/tmp/x.so", "cmd:/bin/sh", "builtin", "nope", {"use": "/bin/sh"}])}}}
    try:
        return msgpack.packb(req, use_bin_type=rng.random() < 0.5)
    except (OverflowError, ValueError):
        return msgpack.packb({"op": "hello"})


def mutate(rng, seeds):
    data = bytearray(rng.choice(seeds))
    for _ in range(rng.randint(1, 6)):
        m = rng.randrange(7)
        if m == 0 and data:
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif m == 1:
            i = rng.randint(0, len(data))
            data[i:i] = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 8)))
        elif m == 2 and data:
            i = rng.randrange(len(data))
            del data[i:i + rng.randint(1, 8)]
        elif m == 3:
            data = data[:rng.randint(0, len(data))]
        elif m == 4 and data:
            i = rng.randrange(len(data))
            j = rng.randint(i, len(data))
            data[i:i] = data[i:j] * rng.randint(1, 4)
        elif m == 5:
            other = rng.choice(seeds)
            data = data[:rng.randint(0, len(data))] + other[rng.randint(0, len(other)):]
        else:
            i = rng.randint(0, len(data))
            data[i:i] = rng.choice(MAGIC)
    return bytes(data[:65536])


def pump(sock, frames, window=64):
    sent = got = 0
    while got < len(frames):
        while sent < len(frames) and sent - got < window:
            sock.send_multipart([b"", frames[sent]])
            sent += 1
        expect(sock.poll(30000), f"no reply after {got} of {len(frames)} frames")
        # The `id` is echoed as sent: it may be a str that is not UTF-8, or a map with map keys;
        # so bytes, and maps as lists of pairs.
        rep = msgpack.unpackb(sock.recv_multipart()[-1], raw=True, strict_map_key=False,
                              object_pairs_hook=list)
        expect(isinstance(rep, list) and any(k == b"ok" for k, _ in rep),
               f"reply without ok: {rep!r}")
        got += 1
    return got


def raw_tcp_peers(endpoint, rng, n=200):
    """Peers that do not speak CURVE: none may get a request through."""
    host, port = endpoint[len("tcp://"):].rsplit(":", 1)
    greeting = b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x00"
    null = greeting + b"NULL" + b"\x00" * 16 + b"\x00" + b"\x00" * 31
    curve = greeting + b"CURVE" + b"\x00" * 15 + b"\x00" + b"\x00" * 31
    hello = b"\x04\xc8\x05HELLO" + bytes(rng.getrandbits(8) for _ in range(194))
    shapes = [lambda: bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300))),
              lambda: greeting[:rng.randint(1, len(greeting))],
              lambda: null + b"\x04\x1a\x05READY\x0bSocket-Type\x00\x00\x00\x06DEALER",
              lambda: curve + hello,
              lambda: curve + bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 400)))]
    for i in range(n):
        with socket.create_connection((host, int(port)), timeout=5) as s:
            try:
                s.sendall(rng.choice(shapes)())
                s.settimeout(0.05)
                s.recv(4096)
            except OSError:
                pass  # reset or timeout: both fine
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--curve", action="store_true")
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("PK_FUZZ_SECONDS", 15)))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("PK_FUZZ_SEED", 1)))
    a = ap.parse_args()
    rng = random.Random(a.seed)
    seeds = corpus()
    with running(Server("--max-action-bytes", "65536", curve=a.curve), 5000) as srv:
        sock = srv.socket()
        before = srv.client().stats()["requests"]["total"]
        total = peers = 0
        end = time.time() + a.seconds
        while time.time() < end:
            frames = [mutate(rng, seeds) if rng.random() < 0.7 else structured(rng)
                      for _ in range(256)]
            total += pump(sock, frames)
            if a.curve:
                peers += raw_tcp_peers(srv.endpoint, rng, n=20)
        st = srv.client().stats()
        served = st["requests"]["total"] - before - 1
        expect(served == total, f"{total} frames sent, the server counted {served}: raw TCP "
                                "peers got requests through, or frames were lost")
        rep = srv.client().hello()
        expect(rep["ok"], "server alive")
        print(f"  {total} fuzzed frames, {total} replies"
              + (f"; {peers} raw TCP peers without CURVE, none got a request through"
                 f" (CURVE refusals counted: {st['clients']['curve_refused']})"
                 if a.curve else "")
              + f"; bad requests {st['requests']['bad']}")
        sock.close(0)
    print(f"wire fuzz{' (CURVE)' if a.curve else ''}: ok (seed {a.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
