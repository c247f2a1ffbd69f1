#!/usr/bin/env python3
"""`trajectory` of closed and expired episodes: read back from the trajectory store, the same
reply (every turn's action, summary, status, score, result with its measurements, feedback,
and the returns) as while the episode was in memory. An id found neither in memory nor in the
store still gets unknown_episode. Host-only selftest problems; no GPU needed."""
import os
import shutil
import sys
import tempfile
import time

import msgpack

from pkserver import SRC, Server, running, selftest_problems

PROBLEM = "selftest/scale"  # host-only, with solutions/correct.cu
NO_CODE = "No code this turn, only a plan."
TURN_FIELDS = {"turn", "prompt", "action", "summary", "code", "status", "score", "result", "feedback",
               "started_at", "finished_at"}
REPLY_FIELDS = {"ok", "id", "episode", "problem", "group", "seed", "max_turns", "done",
                "in_flight", "settings", "turns", "returns"}


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_error(reply, code, needle=None):
    expect(reply.get("ok") is False, f"expected error {code}, got {reply}")
    expect(reply["error"]["code"] == code, f"expected {code}, got {reply['error']}")
    if needle:
        expect(needle in reply["error"]["message"], f"'{needle}' not in {reply['error']}")


def body(reply):
    """The reply without the echoed request id."""
    return {k: v for k, v in reply.items() if k != "id"}


def expect_same(after, before, what):
    a, b = body(after), body(before)
    for k in sorted(set(a) | set(b)):
        expect(a.get(k) == b.get(k), f"{what}: field '{k}' differs:\n  after: {a.get(k)!r}\n"
               f"  before: {b.get(k)!r}")


def check_shape(t):
    expect(set(t) == REPLY_FIELDS, f"reply fields {sorted(t)}")
    for i, turn in enumerate(t["turns"]):
        expect(set(turn) == TURN_FIELDS, f"turn fields {sorted(turn)}")
        expect(turn["turn"] == i + 1, "turns are numbered from 1")


def correct_action(problem_id):
    """The problem's correct solution; a missing one is a failure (the fixture of this test)."""
    suite, name = problem_id.split("/", 1)
    path = os.path.join(SRC, "problems", suite, name, "solutions", "correct.cu")
    with open(path) as f:
        return f"```cuda\n{f.read()}\n```\nSummary: the reference approach"


def test_finished_episode(c, pid):
    """Played to its turn budget, then closed: same turns, returns, settings, seed, group."""
    r = c.call("reset", problem=pid, seed=11, max_turns=2, group="g-traj",
               options={"reward": {"gamma": 0.7, "penalty_format": 0.25}})
    ep = r["episode"]
    expect(r["info"]["settings"]["seed_source"] == "client", "a client's seed")
    s1 = c.call("step", episode=ep, action=NO_CODE, summary="first plan")
    s2 = c.call("step", episode=ep, action=NO_CODE + " Still none.")
    expect(s2["truncated"] and s2["info"]["returns"], "episode ended")
    before = c.call("trajectory", episode=ep)
    check_shape(before)
    expect(before["done"] and not before["in_flight"], "done before close")
    closed = c.call("close", episode=ep)
    expect(closed["turns"] == 2 and closed["done"], f"close reply {closed}")
    after = c.call("trajectory", episode=ep)
    check_shape(after)
    expect_same(after, before, "finished episode after close")
    # Spot checks against the step replies themselves, not only against `before`.
    expect(after["seed"] == 11 and after["group"] == "g-traj" and after["max_turns"] == 2,
           "episode fields")
    expect(after["settings"]["reward"]["gamma"] == 0.7, "settings")
    expect(after["returns"] == s2["info"]["returns"], "returns as in the last step reply")
    expect([t["score"] for t in after["turns"]] == [s1["reward"], s2["reward"]], "scores")
    expect(after["turns"][0]["summary"] == "first plan", "summary")
    expect(after["turns"][1]["action"] == NO_CODE + " Still none.", "action")
    expect(after["turns"][0]["feedback"] == s1["observation"]["feedback"], "feedback")
    # The exact prompt each turn answered: reset's, then the one step 1 returned.
    expect(after["turns"][0]["prompt"] == r["observation"]["prompt"], "turn 1 prompt")
    expect(after["turns"][1]["prompt"] == s1["observation"]["prompt"], "turn 2 prompt")
    expect(all(t["status"] == "format_error" for t in after["turns"]), "statuses")
    expect(after["turns"][0]["result"]["status"] == "format_error", "stored result")
    # Closed stays closed for everything else.
    expect_error(c.request("step", episode=ep, action=NO_CODE), "unknown_episode")
    expect_error(c.request("close", episode=ep), "unknown_episode")
    return ep, after


def test_unfinished_episode(c, pid):
    """Closed before its end and without a seed: done false, no returns, the drawn seed."""
    r = c.call("reset", problem=pid, max_turns=3)
    ep = r["episode"]
    seed = r["info"]["settings"]["seed"]
    expect(isinstance(seed, int) and 0 <= seed < 2 ** 53, f"a drawn seed {seed}")
    expect(r["info"]["settings"]["seed_source"] == "drawn", "seed_source drawn")
    c.call("step", episode=ep, action=NO_CODE)
    before = c.call("trajectory", episode=ep)
    c.call("close", episode=ep)
    after = c.call("trajectory", episode=ep)
    expect_same(after, before, "unfinished episode after close")
    expect(not after["done"] and after["returns"] is None, "not done, no returns")
    expect(after["seed"] == seed and after["group"] is None, "the drawn seed, no group")
    expect(len(after["turns"]) == 1, "one turn")
    # An episode closed right after reset: in the store with no turns.
    empty = c.call("reset", problem=pid)["episode"]
    c.call("close", episode=empty)
    t = c.call("trajectory", episode=empty)
    expect(t["turns"] == [] and not t["done"] and t["problem"] == pid, f"empty episode {t}")


def test_evaluated_turn(c, pid):
    """A compiled and run turn: its measurements come back from the stored result JSON."""
    action = correct_action(pid)
    ep = c.call("reset", problem=pid, seed=5, max_turns=2)["episode"]
    s = c.call("step", episode=ep, action=action)
    expect(s["info"]["status"] == "correct", f"correct.cu judged {s['info']['status']}")
    before = c.call("trajectory", episode=ep)
    c.call("close", episode=ep)
    after = c.call("trajectory", episode=ep)
    expect_same(after, before, "evaluated episode after close")
    res = after["turns"][0]["result"]
    expect(res["status"] == "correct" and isinstance(res.get("checks"), list), f"result {res}")
    expect(after["turns"][0]["code"] and "solution" in after["turns"][0]["code"], "code")


def test_close_with_step_in_flight(srv, c, pid):
    """close while the step evaluates, then trajectory: the in-memory state (in_flight); after
    the step's reply, the store has the turn."""
    action = correct_action(pid)
    ep = c.call("reset", problem=pid, max_turns=1)["episode"]
    sock = srv.socket()
    for rid, req in ((1, {"op": "step", "episode": ep, "action": action}),
                     (2, {"op": "close", "episode": ep}),
                     (3, {"op": "trajectory", "episode": ep})):
        sock.send_multipart([b"", msgpack.packb(dict(req, id=rid))])
    replies = {}
    while len(replies) < 3:
        expect(sock.poll(300000), "no reply in 300 s")
        rep = msgpack.unpackb(sock.recv_multipart()[-1], raw=False)
        replies[rep["id"]] = rep
    sock.close(0)
    expect(replies[2]["ok"] and replies[3]["ok"], f"close/trajectory failed: {replies}")
    step = replies[1]
    expect(step["ok"], f"step failed: {step}")
    # Sent together, the trajectory is served before the evaluation ends (from memory).
    mid = replies[3]
    expect(len(mid["turns"]) == (0 if mid["in_flight"] else 1), f"trajectory mid-step: {mid}")
    print(f"  trajectory sent with the step: in_flight={mid['in_flight']}")
    after = c.call("trajectory", episode=ep)
    expect(not after["in_flight"] and len(after["turns"]) == 1, f"after the step: {after}")
    expect(after["turns"][0]["status"] == step["info"]["status"], "the in-flight turn is stored")
    expect(after["done"] and after["returns"] == step["info"]["returns"], "returns stored")


def test_unknown(c):
    expect_error(c.request("trajectory", episode="0" * 32), "unknown_episode", "0" * 32)
    expect_error(c.request("trajectory", episode="not-an-id"), "unknown_episode")
    expect_error(c.request("trajectory"), "bad_request", "'episode'")
    expect_error(c.request("trajectory", episode=7), "bad_request", "'episode'")


def test_expired_and_restart(pid):
    """An expired episode is read from the store; so is a closed one after a restart on the
    same data dir."""
    data = tempfile.mkdtemp(prefix="pkgym-env-traj-data-")
    try:
        srv = Server("--episode-idle-s", "1", "--data-dir", data)
        try:
            c = srv.client()
            ep = c.call("reset", problem=pid, seed=2, max_turns=2)["episode"]
            c.call("step", episode=ep, action=NO_CODE)
            before = c.call("trajectory", episode=ep)
            deadline = time.time() + 20
            while c.call("stats")["episodes_open"] and time.time() < deadline:
                time.sleep(0.5)
            expect_error(c.request("step", episode=ep, action=NO_CODE), "unknown_episode")
            expect(c.call("stats")["requests"]["episodes_expired"] >= 1, "expired")
            expect_same(c.call("trajectory", episode=ep), before, "expired episode")
            c.close()
        finally:
            expect(srv.stop() == 0, "server exit code")
            srv.cleanup()
        srv = Server("--data-dir", data)
        try:
            c = srv.client()
            expect_same(c.call("trajectory", episode=ep), before, "after a restart")
            expect_error(c.request("trajectory", episode="f" * 32), "unknown_episode")
            c.close()
        finally:
            expect(srv.stop() == 0, "server exit code")
            srv.cleanup()
    finally:
        shutil.rmtree(data, ignore_errors=True)


def main():
    srv = Server()
    pid = PROBLEM
    with running(srv):
        c = srv.client(timeout_s=300)
        served = [p["id"] for p in selftest_problems(c)]
        expect(pid in served, f"{pid}, this test's fixture, is not served ({served})")
        print(f"using {pid}")
        test_finished_episode(c, pid)
        test_unfinished_episode(c, pid)
        test_evaluated_turn(c, pid)
        test_close_with_step_in_flight(srv, c, pid)
        test_unknown(c)
        c.close()
    test_expired_and_restart(pid)
    print("trajectory after close: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
