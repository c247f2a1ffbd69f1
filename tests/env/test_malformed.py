#!/usr/bin/env python3
"""Malformed frames: random bytes, maps nested 1000 deep, huge strings, wrong types, bad
framing. Each gets bad_request naming the problem (when a reply is possible at all), and the
server keeps answering everyone else."""
import os
import random
import sys

import msgpack

from pkserver import Server, raw_request, running


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def bad(sock, frame, needle=None, ident=None):
    rep = raw_request(sock, frame)
    expect(rep.get("ok") is False and rep["error"]["code"] == "bad_request",
           f"expected bad_request, got {rep}")
    if needle:
        expect(needle in rep["error"]["message"], f"'{needle}' not in {rep['error']['message']}")
    if ident is not None:
        expect(rep.get("id") == ident, "id echoed")
    return rep


def nested(depth):
    """{"k": {"k": ... 0}} as raw msgpack (the Python packer stops at 512 levels)."""
    return b"\x81\xa1k" * depth + b"\x00"


def with_raw_field(fields, name, raw):
    """A request map whose field `name` holds already packed bytes."""
    out = bytes([0x80 | (len(fields) + 1)])
    for k, v in fields.items():
        out += msgpack.packb(k) + msgpack.packb(v)
    return out + msgpack.packb(name) + raw


def main():
    curve = "--curve" in sys.argv[1:]  # loopback TCP with CURVE, this client's key authorized
    with running(Server("--max-action-bytes", "65536", curve=curve)) as srv:
        s = srv.socket()
        limits = raw_request(s, msgpack.packb({"op": "hello"}))["limits"]
        max_req = limits["max_request_bytes"]
        # Not msgpack / not a map / no op / op of the wrong type.
        bad(s, b"\xc1\xc1", "not msgpack")
        bad(s, b"", "not msgpack")
        bad(s, msgpack.packb([1, 2, 3]), "not a msgpack map")
        bad(s, msgpack.packb("hello"), "not a msgpack map")
        bad(s, msgpack.packb({"id": 4}), "'op' is required", ident=4)
        bad(s, msgpack.packb({"op": 1, "id": 5}), "'op' must be a string", ident=5)
        bad(s, msgpack.packb({"op": "hello"}) + b"\x00", "trailing")
        bad(s, b"\xdf\xff\xff\xff\xff", "declares")
        bad(s, b"\xdb\x7f\xff\xff\xff" + b"a" * 10, "past the end")
        # Nesting: 1000 deep inside a field, and as the id.
        bad(s, with_raw_field({"op": "reset", "problem": "x"}, "options", nested(1000)),
            "deeper")
        bad(s, with_raw_field({"op": "hello"}, "id", nested(1000)), "deeper")
        bad(s, nested(1000), "deeper")
        rep = raw_request(s, with_raw_field({"op": "hello"}, "id", nested(30)))
        expect(rep["ok"], "an id nested 31 deep is accepted and echoed")
        # Huge strings: an action over the limit, a frame over the request limit, invalid UTF-8.
        rep = raw_request(s, msgpack.packb({"op": "reset", "problem": "nope/x"}))
        expect(rep["error"]["code"] == "unknown_problem", "reset of an unknown problem")
        bad(s, msgpack.packb({"op": "step", "episode": "e" * 32, "action": "a" * 70000, "id": 9}),
            "max_action_bytes", ident=9)
        bad(s, msgpack.packb({"op": "hello", "pad": "p" * (max_req + 10)}), "max_request_bytes")
        bad(s, msgpack.packb({"op": "get_problem", "problem": b"\xff\xfe".decode("latin-1")
                              .encode("latin-1")}, use_bin_type=True), "'problem'")
        bad(s, b"\x82\xa2op\xa4step\xa6action\xa3\xff\xfe\xfd", "UTF-8")
        bad(s, msgpack.packb({"op": "get_problem", "problem": "a\x00b"}), "NUL")
        # An op of invalid UTF-8 (issue 27, finding 8: it was `internal: out of memory`).
        bad(s, b"\x82\xa2op\xa4\xff\xfe\xfd\xfc\xa2id\x07", "'op' is not valid UTF-8", ident=7)
        # Wrong types for each typed field.
        for req, field in (({"op": "reset", "problem": 1}, "'problem'"),
                           ({"op": "reset", "problem": "a/b", "seed": 1.5}, "'seed'"),
                           ({"op": "reset", "problem": "a/b", "max_turns": "4"}, "'max_turns'"),
                           ({"op": "reset", "problem": "a/b", "group": []}, "'group'"),
                           ({"op": "step", "episode": 5, "action": "x"}, "'episode'"),
                           ({"op": "step", "episode": "e", "action": 5}, "'action'"),
                           ({"op": "close", "episode": None}, "'episode'"),
                           ({"op": "trajectory", "episode": {}}, "'episode'"),
                           ({"op": "list_problems", "tags": {"a": 1}}, "'tags'")):
            rep = raw_request(s, msgpack.packb(req))
            expect(rep["ok"] is False, f"{req} accepted")
            expect(rep["error"]["code"] in ("bad_request", "unknown_problem", "unknown_episode"),
                   f"{req}: {rep}")
            if rep["error"]["code"] == "bad_request":
                expect(field in rep["error"]["message"], f"{req}: {rep['error']['message']}")
        # A frame far beyond the limit: ZeroMQ drops that peer; the server stays up.
        big = srv.socket()
        big.send_multipart([b"", b"\xc4" + b"x" * (max_req * 5)])
        big.close(0)
        # Random bytes.
        rng = random.Random(5)
        for i in range(500):
            frame = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
            rep = raw_request(s, frame)
            expect(rep.get("ok") is False or rep.get("server"), f"random frame {frame!r}: {rep}")
        # Extra frames between the envelope and the body.
        s.send_multipart([b"", b"x" * 600, msgpack.packb({"op": "hello"})])
        expect(s.poll(5000), "reply to a multi-frame request")
        rep = msgpack.unpackb(s.recv_multipart()[-1])
        expect(rep["error"]["code"] == "bad_request", "multi-frame request")
        # Small extra frames too (issue 27, finding 8): they passed as an envelope.
        for frames in ([b"", b"x"], [b"", b""], [b"a"], [b"", b"", b""], [b"\x00" * 255]):
            s.send_multipart([*frames, msgpack.packb({"op": "hello"})])
            expect(s.poll(5000), f"reply to extra frames {frames!r}")
            rep = msgpack.unpackb(s.recv_multipart()[-1])
            expect(rep.get("error", {}).get("code") == "bad_request", f"extra frames {frames!r}")
        # Everyone else is still served.
        rep = raw_request(s, msgpack.packb({"op": "hello", "id": "after"}))
        expect(rep["ok"] and rep["id"] == "after", "server alive after malformed frames")
        st = raw_request(s, msgpack.packb({"op": "stats"}))
        expect(st["requests"]["bad"] >= 20, "bad requests counted")
        s.close(0)
    print(f"malformed frames{' (CURVE)' if curve else ''}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
