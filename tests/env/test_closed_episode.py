#!/usr/bin/env python3
"""Issue 27, finding 6: a closed episode never comes back. A restart with a short
--episode-idle-s used to drop the journal's `closed` row of an episode it did not restore, and a
later restart with the default limit restored the closed episode. Also: an episode that expired
at a restart (idle past the limit) stays expired at the next one, and an open episode is still
restored (the control)."""
import os
import shutil
import sys
import tempfile
import time

import msgpack

from pkserver import Server, raw_request

PROBLEM = "selftest/scale"


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def call(srv, **req):
    s = srv.socket()
    try:
        return raw_request(s, msgpack.packb(req))
    finally:
        s.close(0)


def reset(srv):
    rep = call(srv, op="reset", problem=PROBLEM, max_turns=4)
    expect(rep.get("ok"), rep)
    return rep["episode"]


def is_open(srv, ep):
    """Whether ep is an open episode of srv: a step without a code block (a cheap format_error
    turn, nothing compiled) is answered for an open episode, `unknown_episode` otherwise."""
    rep = call(srv, op="step", episode=ep, action="no code block here")
    if not rep.get("ok") and rep["error"]["code"] == "unknown_episode":
        return False
    expect(rep.get("ok") and rep["info"]["status"] == "format_error", rep)
    return True


def run(data_dir):
    first = Server(data_dir=data_dir)
    try:
        closed = reset(first)
        idle = reset(first)
        expect(call(first, op="close", episode=closed).get("ok"), "close")
    finally:
        expect(first.stop() == 0, "first server exit code")
    # Older than 1 s at the next start: both are past its idle limit.
    time.sleep(1.5)
    second = Server("--episode-idle-s", "1", data_dir=data_dir)
    try:
        expect(call(second, op="stats")["requests"]["episodes_restored"] == 0, "short limit")
        expect(not is_open(second, closed), "closed episode restored by the short-limit restart")
        expect(not is_open(second, idle), "idle episode restored by the short-limit restart")
        fresh = reset(second)
        # The closed one's turns stay readable from the store.
        traj = call(second, op="trajectory", episode=closed)
        expect(traj.get("ok") and traj["episode"] == closed, traj)
    finally:
        expect(second.stop() == 0, "second server exit code")
    third = Server(data_dir=data_dir)
    try:
        log = third.output()
        expect(call(third, op="stats")["requests"]["episodes_restored"] == 1,
               f"only the fresh episode is restored:\n{log}")
        expect(not is_open(third, closed), "a closed episode came back (issue 27, finding 6)")
        expect(not is_open(third, idle), "an episode expired at a restart came back")
        expect(is_open(third, fresh), "the open episode was not restored")
    finally:
        expect(third.stop() == 0, "third server exit code")
    print("closed episode: stays closed across restarts: ok")


def main():
    tmp = tempfile.mkdtemp(prefix="pkgym-closed-")
    try:
        run(os.path.join(tmp, "data"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
