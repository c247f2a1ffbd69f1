#!/usr/bin/env python3
"""Protocol v1 conformance: every op and every error code, against a real `pkgym serve`
on the host-only selftest problems (no GPU needed)."""
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
import time

import msgpack
import zmq

from pkserver import SRC, Client, Server, raw_request, running, selftest_problems
from pkgym_client import Env

ERROR_CODES = {"bad_request", "unknown_op", "unknown_problem", "unknown_episode", "episode_done",
               "busy", "overloaded", "internal", "infra_error"}
STATUSES = {"format_error", "rejected", "compile_error", "runtime_error", "timeout", "incorrect",
            "correct"}
NO_CODE = "I am not sure yet; no code this turn."


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_error(reply, code, needle=None):
    expect(reply.get("ok") is False, f"expected error {code}, got {reply}")
    expect(reply["error"]["code"] == code, f"expected {code}, got {reply['error']}")
    expect(reply["error"]["code"] in ERROR_CODES, "error code outside the protocol")
    if needle:
        expect(needle in reply["error"]["message"], f"'{needle}' not in {reply['error']}")


def solution_action(problem_id, name):
    suite, pname = problem_id.split("/", 1)
    path = os.path.join(SRC, "problems", suite, pname, "solutions", name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f"```cuda\n{f.read()}\n```\nSummary: {name}"


def test_hello(c):
    r = c.call("hello")
    expect(r["protocol"] == 1, "protocol")
    expect(r["server"]["name"] == "pkgym" and r["server"]["version"], "server")
    expect(isinstance(r["gpus"], list), "gpus")
    for g in r["gpus"]:
        expect({"index", "name", "memory_mib"} <= set(g), "gpu fields")
    expect(r["problems"] == len(c.list_problems()), "problem count")
    for k in ("max_action_bytes", "max_summary_bytes", "max_request_bytes", "max_episodes",
              "episode_idle_s", "max_turns", "queue_limit"):
        expect(k in r["limits"], f"limits.{k}")


def test_list_and_get(c, pid):
    probs = c.list_problems()
    expect(all({"id", "title", "category", "world_size", "tags"} <= set(p) for p in probs),
           "problem fields")
    p = next(p for p in probs if p["id"] == pid)
    if p["tags"]:
        tagged = c.list_problems(tags=[p["tags"][0]])
        expect(pid in [q["id"] for q in tagged], "tag filter keeps the problem")
        expect(all(p["tags"][0] in q["tags"] for q in tagged), "tag filter")
    expect(c.list_problems(tags=["no-such-tag-xyz"]) == [], "unknown tag gives nothing")
    expect_error(c.request("list_problems", tags="x"), "bad_request", "'tags'")
    expect_error(c.request("list_problems", tags=[1]), "bad_request", "'tags'")
    g = c.call("get_problem", problem=pid)
    expect(g["problem"]["id"] == pid and len(g["prompt"]) > 0, "get_problem")
    expect_error(c.request("get_problem", problem="nope/nope"), "unknown_problem")
    expect_error(c.request("get_problem"), "bad_request", "'problem'")
    expect_error(c.request("get_problem", problem=5), "bad_request", "'problem'")


def test_reset(c, pid):
    r = c.call("reset", problem=pid, seed=7, max_turns=3, group="g1",
               options={"reward": {"gamma": 0.8}, "check": {"trials": 2}})
    expect(len(r["episode"]) == 32, "episode id")
    expect(r["observation"]["turn"] == 0 and len(r["observation"]["prompt"]) > 0, "observation")
    s = r["info"]["settings"]
    expect(s["reward"]["gamma"] == 0.8 and s["reward"]["w_correct"] == 0.3, "reward merged")
    expect(s["check"]["trials"] == 2 and s["max_turns"] == 3 and s["seed"] == 7, "settings")
    expect(s["group"] == "g1" and r["info"]["problem"]["id"] == pid, "info")
    c.call("close", episode=r["episode"])
    expect_error(c.request("reset"), "bad_request", "'problem'")
    expect_error(c.request("reset", problem="nope/x"), "unknown_problem")
    expect_error(c.request("reset", problem=pid, seed="x"), "bad_request", "'seed'")
    expect_error(c.request("reset", problem=pid, max_turns=0), "bad_request", "'max_turns'")
    expect_error(c.request("reset", problem=pid, group=3), "bad_request", "'group'")
    expect_error(c.request("reset", problem=pid, options=[1]), "bad_request", "'options'")
    expect_error(c.request("reset", problem=pid, options={"rewrd": {}}), "bad_request",
                 "options.rewrd")
    expect_error(c.request("reset", problem=pid, options={"reward": {"gama": 1}}), "bad_request",
                 "gama")
    expect_error(c.request("reset", problem=pid, options={"check": {"trials": "x"}}),
                 "bad_request", "options.check.trials")
    expect_error(c.request("reset", problem=pid, options={"feedback": {"nope": 1}}),
                 "bad_request", "options.feedback")
    if not c.call("hello")["gpus"]:
        expect_error(c.request("reset", problem="collectives/allreduce"), "bad_request", "GPUs")


def test_format_error_episode(c, pid):
    """Two turns without code: status format_error, the configured penalty as reward, the
    discounted returns at the end, then episode_done; trajectory and close."""
    pen, gamma = 0.5, 0.4
    r = c.call("reset", problem=pid, max_turns=2,
               options={"reward": {"penalty_format": pen, "gamma": gamma}})
    ep = r["episode"]
    s1 = c.call("step", episode=ep, action=NO_CODE)
    expect(s1["info"]["status"] == "format_error" and s1["info"]["turn"] == 1, "turn 1 status")
    expect(abs(s1["reward"] + pen) < 1e-9, f"reward {s1['reward']} != -{pen}")
    expect(not s1["terminated"] and not s1["truncated"], "episode continues")
    expect(s1["info"]["returns"] is None and s1["info"]["correct"] is False, "no returns yet")
    expect(s1["info"]["speedup"] is None, "no speedup")
    expect(len(s1["observation"]["feedback"]) > 0, "feedback")
    expect(r["observation"]["prompt"] != s1["observation"]["prompt"], "next prompt differs")
    s2 = c.call("step", episode=ep, action=NO_CODE, summary="second try")
    expect(s2["truncated"] and not s2["terminated"], "turn budget used up")
    want = [-pen + gamma * -pen, -pen]
    got = s2["info"]["returns"]
    expect(len(got) == 2 and all(abs(a - b) < 1e-9 for a, b in zip(got, want)),
           f"returns {got} != {want}")
    expect_error(c.request("step", episode=ep, action=NO_CODE), "episode_done")
    t = c.call("trajectory", episode=ep)
    expect(t["done"] and len(t["turns"]) == 2 and t["returns"] == got, "trajectory")
    expect(t["turns"][0]["action"] == NO_CODE and t["turns"][1]["summary"] == "second try",
           "trajectory keeps action and summary")
    expect(all(x["status"] == "format_error" and x["feedback"] for x in t["turns"]),
           "trajectory statuses")
    expect(t["turns"][0]["result"]["status"] == "format_error", "trajectory result")
    c.call("close", episode=ep)
    expect_error(c.request("step", episode=ep, action=NO_CODE), "unknown_episode")
    stored = c.call("trajectory", episode=ep)  # closed: read back from the store
    expect({k: v for k, v in stored.items() if k != "id"} == {k: v for k, v in t.items()
                                                              if k != "id"},
           "trajectory after close differs")
    expect_error(c.request("trajectory", episode="0" * 32), "unknown_episode")
    expect_error(c.request("close", episode=ep), "unknown_episode")
    expect_error(c.request("step", episode="x" * 32, action=NO_CODE), "unknown_episode")
    expect_error(c.request("step", action=NO_CODE), "bad_request", "'episode'")
    fresh = c.call("reset", problem=pid)["episode"]
    expect_error(c.request("step", episode=fresh), "bad_request", "'action'")
    expect_error(c.request("step", episode=fresh, action=NO_CODE, summary=3), "bad_request",
                 "'summary'")
    c.call("close", episode=fresh)
    return ep


def test_evaluated_steps(c, server, pid):
    """A step whose code is evaluated: busy while in flight, a real status after."""
    action = solution_action(pid, "correct.cu")
    expect(action is not None, f"no solutions/correct.cu for {pid}")
    r = c.call("reset", problem=pid, max_turns=2, seed=3)
    ep = r["episode"]
    sock = server.socket()
    sock.send_multipart([b"", msgpack.packb({"op": "step", "id": 1, "episode": ep,
                                             "action": action})])
    sock.send_multipart([b"", msgpack.packb({"op": "step", "id": 2, "episode": ep,
                                             "action": action})])
    replies = {}
    while len(replies) < 2:
        expect(sock.poll(300000), "no step reply in 300 s")
        rep = msgpack.unpackb(sock.recv_multipart()[-1], raw=False)
        replies[rep["id"]] = rep
    sock.close(0)
    expect_error(replies[2], "busy")
    s = replies[1]
    expect(s["ok"], f"step failed: {s}")
    info = s["info"]
    expect(info["status"] in STATUSES, "status")
    expect(info["status"] == "correct", f"correct.cu judged {info['status']}: {info['reason']}")
    expect(info["correct"] is True and s["reward"] >= 0.3, f"reward {s['reward']}")
    expect(isinstance(info["checks"], list) and info["compile_ms"] >= 0, "measurements")
    for ch in info["checks"]:
        expect({"name", "passed", "detail"} <= set(ch), "check fields")
    st = c.call("stats")
    expect(st["steps_done"] >= 1 and st["episodes_open"] >= 1, "stats counts")
    c.call("close", episode=ep)


BAD_BYTES_CODE = r"""```cuda
#include <stdio.h>
#include "pk_ctx.h"
extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    fputs("bad bytes: \xff\xfe\xc3(\n", stderr);
    return 1;
}
```
"""


def test_candidate_output_not_utf8(c, problem_ids):
    """A candidate printing invalid UTF-8: the turn is still answered, with U+FFFD."""
    if "selftest/scale" not in problem_ids:
        print("  no selftest/scale: invalid-UTF-8 output check not run")
        return
    ep = c.call("reset", problem="selftest/scale", max_turns=1)["episode"]
    s = c.call("step", episode=ep, action=BAD_BYTES_CODE)
    expect(s["info"]["status"] == "runtime_error", f"status {s['info']['status']}")
    expect("\ufffd" in s["observation"]["feedback"], "invalid bytes replaced in feedback")
    t = c.call("trajectory", episode=ep)
    expect("\ufffd" in (t["turns"][0]["result"]["stderr_tail"] or ""), "stored stderr repaired")
    c.call("close", episode=ep)


def test_env_wrapper(c, pid):
    """The Gymnasium-style Env: reset -> (obs, info); step -> 5-tuple."""
    env = Env(pid, max_turns=2, client=c)
    obs, info = env.reset(seed=5, options={"reward": {"penalty_format": 1.0}})
    expect(obs["turn"] == 0 and obs["prompt"] and info["settings"]["seed"] == 5, "Env.reset")
    obs, reward, terminated, truncated, info = env.step(NO_CODE)
    expect(reward == -1.0 and not terminated and not truncated and info["turn"] == 1, "Env.step")
    expect(obs["feedback"] and obs["prompt"], "Env.step observation")
    first = env.episode
    env.reset()  # closes the previous episode
    expect(len(c.call("trajectory", episode=first)["turns"]) == 1, "closed episode's turn stored")
    *_, truncated, info = env.step(NO_CODE)
    *_, truncated, info = env.step(NO_CODE)
    expect(truncated and len(info["returns"]) == 2, "Env episode ends after max_turns")
    env.close()


def test_ids_and_framing(server):
    sock = server.socket()
    for ident in (7, "abc", [1, {"k": None}], {"x": 1.5}, None, b"\x00\x01", -3, 2**63):
        rep = raw_request(sock, msgpack.packb({"op": "hello", "id": ident}, use_bin_type=True))
        expect(rep["ok"] and rep["id"] == ident, f"id {ident!r} echoed as {rep.get('id')!r}")
        rep = raw_request(sock, msgpack.packb({"op": "nope", "id": ident}, use_bin_type=True))
        expect_error(rep, "unknown_op", "nope")
        expect(rep["id"] == ident, "id echoed on error")
    rep = raw_request(sock, msgpack.packb({"op": "hello"}))
    expect("id" not in rep, "no id when none was sent")
    sock.close(0)
    # DEALER without the empty delimiter frame, and REQ.
    d = server.socket()
    d.send(msgpack.packb({"op": "hello", "id": 1}))
    expect(d.poll(5000), "reply to a bare DEALER frame")
    expect(msgpack.unpackb(d.recv_multipart()[-1])["ok"], "bare DEALER")
    d.close(0)
    q = server.socket(zmq.REQ)
    q.send(msgpack.packb({"op": "hello", "id": 2}))
    expect(q.poll(5000), "reply to REQ")
    expect(msgpack.unpackb(q.recv())["id"] == 2, "REQ")
    q.close(0)


def test_stats(c):
    s = c.call("stats")
    for k in ("episodes_open", "steps_in_flight", "steps_done", "queue_depth", "gpu", "cache",
              "uptime_s"):
        expect(k in s, f"stats.{k}")
    expect("occupancy" in s["gpu"] and "compile_hits" in s["cache"], "stats details")


def test_limits(pid):
    """overloaded at max_episodes; idle expiry frees the slot; a second --bind; SIGINT."""
    bind_dir = tempfile.mkdtemp(prefix="pkgym-env-bind-")
    second = f"ipc://{bind_dir}/second.sock"
    srv = Server("--max-episodes", "2", "--episode-idle-s", "1", "--bind", second)
    try:
        other = Client(second, timeout_s=10, context=srv.ctx)
        expect(other.call("hello")["protocol"] == 1, "hello on the second endpoint")
        other.close()
        c = srv.client()
        e1 = c.call("reset", problem=pid)["episode"]
        c.call("reset", problem=pid)
        expect_error(c.request("reset", problem=pid), "overloaded", "max_episodes")
        time.sleep(2.5)
        expect_error(c.request("step", episode=e1, action=NO_CODE), "unknown_episode",
                     "expired")
        c.call("reset", problem=pid)
        expect(c.call("stats")["episodes_open"] == 1, "expired episodes freed")
        c.close()
    finally:
        expect(srv.stop(sig=signal.SIGINT) == 0, "server exit code after SIGINT")
        srv.cleanup()
        shutil.rmtree(bind_dir, ignore_errors=True)


def test_internal(pid):
    """The store locked by another process: reset fails with `internal`, the server lives."""
    srv = Server()
    try:
        c = srv.client()
        db = sqlite3.connect(os.path.join(srv.data_dir, "trajectories.sqlite"), timeout=1)
        db.execute("BEGIN EXCLUSIVE")
        sock = srv.socket()
        sock.send_multipart([b"", msgpack.packb({"op": "reset", "problem": pid, "id": "r"})])
        # The store writes off the serving thread: hello is answered while the reset waits.
        t0 = time.time()
        c.call("hello")
        expect(time.time() - t0 < 1.0, "hello blocked behind a store write")
        expect(sock.poll(30000), "no reply to the reset")
        expect_error(msgpack.unpackb(sock.recv_multipart()[-1], raw=False), "internal", "store")
        sock.close(0)
        db.rollback()
        db.close()
        c.call("hello")
        c.call("reset", problem=pid)
        c.close()
    finally:
        expect(srv.stop() == 0, "server exit code")
        srv.cleanup()


def main():
    with running(Server()) as srv:
        c = srv.client(timeout_s=300)
        probs = selftest_problems(c)
        # The selftest suite is this test's fixture: without it the test fails, never skips.
        pid = next((p["id"] for p in probs if solution_action(p["id"], "correct.cu")), None)
        expect(pid, f"no served selftest problem has solutions/correct.cu (served: {probs})")
        print(f"using {pid}")
        test_hello(c)
        test_list_and_get(c, pid)
        test_reset(c, pid)
        test_format_error_episode(c, pid)
        test_env_wrapper(c, pid)
        test_ids_and_framing(srv)
        test_stats(c)
        test_evaluated_steps(c, srv, pid)
        test_candidate_output_not_utf8(c, [p["id"] for p in probs])
        expect_error(c.request("fly"), "unknown_op", "fly")
        c.close()
    test_limits(pid)
    test_internal(pid)
    print("protocol conformance: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
