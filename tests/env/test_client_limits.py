#!/usr/bin/env python3
"""Per-client limits: open episodes and steps in flight are capped per client identity (here the
ZeroMQ routing id of an ipc:// connection; test_curve.py covers CURVE keys). Over a cap the
answer is `overloaded` naming the limit; other clients are not affected; the slot comes back
when the episode is closed or the step answered."""
import os
import sys

import msgpack

from pkserver import SRC, Server, raw_request, running

PROBLEM = "selftest/scale"
with open(os.path.join(SRC, "problems", "selftest", "scale", "solutions", "correct.cu")) as f:
    ACTION = "```cuda\n" + f.read() + "\n```\n"


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def overloaded(rep, limit):
    return (not rep.get("ok") and rep["error"]["code"] == "overloaded"
            and limit in rep["error"]["message"])


def episodes_cap(srv):
    a, b = srv.socket(), srv.socket()
    req = msgpack.packb({"op": "reset", "problem": PROBLEM})
    eps = [raw_request(a, req)["episode"] for _ in range(2)]
    rep = raw_request(a, req)
    expect(overloaded(rep, "limits.max_client_episodes"), f"third episode of a: {rep}")
    print(f"  client a, third episode: {rep['error']['message']}")
    other = raw_request(b, req)
    expect(other.get("ok"), f"client b is not affected: {other}")
    stats = raw_request(a, msgpack.packb({"op": "stats"}))["clients"]
    expect(stats["your_episodes"] == 2 and stats["you"].startswith("peer:"), stats)
    raw_request(a, msgpack.packb({"op": "close", "episode": eps[0]}))
    again = raw_request(a, req)
    expect(again.get("ok"), f"a closed one, so it may open one again: {again}")
    for s, ep in ((a, eps[1]), (a, again["episode"]), (b, other["episode"])):
        raw_request(s, msgpack.packb({"op": "close", "episode": ep}))
    a.close(0)
    b.close(0)


def steps_cap(srv):
    a = srv.socket()
    eps = [raw_request(a, msgpack.packb({"op": "reset", "problem": PROBLEM}))["episode"]
           for _ in range(2)]
    # Two steps pipelined: the first is evaluated (compile + run), the second is over the cap.
    for i, ep in enumerate(eps):
        a.send_multipart([b"", msgpack.packb({"op": "step", "episode": ep, "action": ACTION,
                                              "id": i})])
    replies = {}
    while len(replies) < 2:
        expect(a.poll(120000), "no reply to a step")
        rep = msgpack.unpackb(a.recv_multipart()[-1], raw=False)
        replies[rep["id"]] = rep
    expect(replies[0].get("ok") and replies[0]["info"]["status"] == "correct", replies[0])
    expect(overloaded(replies[1], "limits.max_client_steps"), f"second step: {replies[1]}")
    print(f"  client a, second step in flight: {replies[1]['error']['message']}")
    rep = raw_request(a, msgpack.packb({"op": "step", "episode": eps[1], "action": ACTION}),
                      timeout_ms=120000)
    expect(rep.get("ok"), f"once the first is answered, a step goes through: {rep}")
    a.close(0)


def main():
    with running(Server("--max-client-episodes", "2", "--max-client-steps", "1")) as srv:
        limits = srv.client().hello()["limits"]
        expect(limits["max_client_episodes"] == 2 and limits["max_client_steps"] == 1, limits)
        episodes_cap(srv)
        steps_cap(srv)
    print("client limits: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
