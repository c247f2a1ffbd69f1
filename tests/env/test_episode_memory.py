#!/usr/bin/env python3
"""Issue 27, finding 4: memory per open episode is bounded. Every turn's action used to stay in
memory (2 episodes x 64 turns of 1 MiB: +136 MiB). Now a turn keeps, once stored, only what the
next prompt needs (code, summary, feedback); `trajectory` reads the rest from the store, every
byte of it. What episodes hold is charged to the episode, its client and the server
(`stats.clients.your_bytes`, `held_bytes`), and a step that would take one past its limit is
refused naming it: `bad_request` for limits.max_episode_bytes (the episode can never take it),
`overloaded` for limits.max_client_bytes and limits.max_held_bytes."""
import sys

import msgpack

from pkserver import Server, asan_without_quarantine, raw_request, running

PROBLEM = "selftest/scale"
MIB = 1 << 20


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def req(sock, timeout_ms=30000, **fields):
    return raw_request(sock, msgpack.packb(fields), timeout_ms=timeout_ms)


def big_action(i):
    """About 1 MiB without a code block: a format_error turn, nothing compiled or kept."""
    return f"turn {i}: no code here. " + chr(ord("a") + i % 26) * (MIB - 64)


def code_action(kib):
    """A code block of kib KiB that defines no entry point (format_error), whose code the
    episode keeps for its next prompt."""
    return "```cuda\n" + ("int x;  // padding\n" * (kib * 1024 // 20)) + "```\n"


def actions_not_kept(srv):
    s = srv.socket()
    eps = [req(s, op="reset", problem=PROBLEM, max_turns=32)["episode"] for _ in range(2)]
    rss0 = srv.rss_kib()
    sent = {ep: [] for ep in eps}
    for i in range(32):
        for ep in eps:
            action = big_action(i)
            rep = req(s, op="step", episode=ep, action=action)
            expect(rep.get("ok") and rep["info"]["status"] == "format_error", rep)
            sent[ep].append(action)
    grown_mib = (srv.rss_kib() - rss0) / 1024
    clients = req(s, op="stats")["clients"]
    print(f"  64 turns of 1 MiB: RSS +{grown_mib:.1f} MiB, held {clients['held_bytes']} bytes")
    expect(clients["your_bytes"] < 4 * MIB and clients["held_bytes"] < 4 * MIB,
           f"what the episodes hold: {clients}")
    expect(grown_mib < 32, f"RSS grew {grown_mib:.1f} MiB for 64 MiB of actions")
    for ep in eps:  # nothing is lost: the store has every action
        traj = req(s, op="trajectory", episode=ep)
        got = [t["action"] for t in traj["turns"]]
        expect(got == sent[ep], "trajectory must return every action as sent")
        expect(all(t["prompt"] for t in traj["turns"]), "every turn's prompt")
    s.close(0)


def episode_cap(srv):
    s = srv.socket()
    ep = req(s, op="reset", problem=PROBLEM, max_turns=32)["episode"]
    for turn in range(1, 12):
        rep = req(s, op="step", episode=ep, action=code_action(200))
        if not rep.get("ok"):
            break
    expect(not rep.get("ok") and rep["error"]["code"] == "bad_request"
           and "limits.max_episode_bytes" in rep["error"]["message"],
           f"step {turn} of 200 KiB of code each: {rep}")
    print(f"  episode limit, step {turn}: {rep['error']['message']}")
    rep = req(s, op="step", episode=ep, action="small, no code")
    expect(rep.get("ok"), f"a small step still fits: {rep}")
    s.close(0)


def client_cap(srv):
    a, b = srv.socket(), srv.socket()
    refused = None
    for _ in range(4):  # episodes of a, each filled to its own limit
        ep = req(a, op="reset", problem=PROBLEM, max_turns=32)["episode"]
        for _ in range(12):
            rep = req(a, op="step", episode=ep, action=code_action(200))
            if not rep.get("ok"):
                break
        if rep["error"]["code"] == "overloaded":
            refused = rep
            break
        expect("limits.max_episode_bytes" in rep["error"]["message"], rep)
    expect(refused and "limits.max_client_bytes" in refused["error"]["message"],
           f"client a over its limit: {refused}")
    print(f"  client limit: {refused['error']['message']}")
    other = req(b, op="reset", problem=PROBLEM)["episode"]
    rep = req(b, op="step", episode=other, action=code_action(200))
    expect(rep.get("ok"), f"client b is not affected: {rep}")
    a.close(0)
    b.close(0)


def main():
    asan_without_quarantine()  # RSS is measured
    srv = Server("--max-episode-bytes", str(2 * MIB), "--max-client-bytes", str(5 * MIB))
    with running(srv, 4000):
        limits = srv.client().hello()["limits"]
        expect(limits["max_episode_bytes"] == 2 * MIB and limits["max_client_bytes"] == 5 * MIB,
               limits)
        actions_not_kept(srv)
        episode_cap(srv)
        client_cap(srv)
    print("episode memory: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
