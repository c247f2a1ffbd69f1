#!/usr/bin/env python3
"""A failure of ours is never the model's (#25), through a real `pkgym serve`.

The set-up failure is faked by the operator's environment (PKGYM_FAKE_SETUP_FAILURES: the first
N runs of the server fail their set-up, before the candidate's code is loaded), never by the
candidate. One such failure: the scheduler runs the step again and the turn is scored as usual.
Failures on every run: the step is answered with the protocol error infra_error naming the
cause, no turn is recorded (reply, trajectory, store), the same action may be sent again, and
the clients (Env, gym's step helper) retry once, say so, and raise InfraError; `pkgym eval`
retries once, says so, and leaves such trajectories out of every figure of its report."""
import json
import logging
import os
import sqlite3
import subprocess
import sys
import tempfile

from pkserver import SRC, Server
from pkgym_client import Env, InfraError
from pkgym_client.client import LOG

PROBLEM = "selftest/allreduce"


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def action(name):
    with open(os.path.join(SRC, "problems", PROBLEM, "solutions", name)) as f:
        return f"```cuda\n{f.read()}\n```\nSummary: {name}"


def serve(fake_failures):
    os.environ["PKGYM_FAKE_SETUP_FAILURES"] = str(fake_failures)
    try:
        return Server()
    finally:
        del os.environ["PKGYM_FAKE_SETUP_FAILURES"]


def stored_turns(srv):
    db = sqlite3.connect(os.path.join(srv.data_dir, "trajectories.sqlite"), timeout=5)
    try:
        return db.execute("SELECT COUNT(*) FROM turns").fetchone()[0]
    finally:
        db.close()


def one_failure_is_retried():
    srv = serve(1)
    try:
        c = srv.client()
        ep = c.reset(PROBLEM, seed=7, max_turns=2)["episode"]
        r = c.step(ep, action("correct.cu"))
        expect(r["info"]["status"] == "correct", f"status {r['info']['status']}: {r['info']}")
        expect(r["reward"] > 0, f"reward {r['reward']}")
        infra = c.call("stats")["infra"]
        expect(infra["errors"] == 1 and infra["retries"] == 1 and infra["failed"] == 0 and
               infra["steps_answered"] == 0, f"stats.infra {infra}")
        expect("run again once" in srv.output(), "no log line for the retry")
        expect(stored_turns(srv) == 1, "the retried turn is stored once")
    finally:
        srv.stop()
        srv.cleanup()


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def repeated_failures_are_never_scored():
    srv = serve(1000)
    try:
        c = srv.client()
        ep = c.reset(PROBLEM, seed=7, max_turns=2)["episode"]
        try:
            c.step(ep, action("correct.cu"))
            raise AssertionError("a step whose runs all failed set-up got a reply with a reward")
        except InfraError as e:
            expect(e.code == "infra_error", e.code)
            for needle in ("failed twice before the candidate's code was loaded",
                           "device setup failed: faked", "no turn recorded"):
                expect(needle in e.message, f"'{needle}' not in {e.message!r}")
        t = c.trajectory(ep)
        expect(t["turns"] == [] and not t["in_flight"], f"trajectory {t['turns']}")
        expect(stored_turns(srv) == 0, "an infra_error reached the store")
        infra = c.call("stats")["infra"]
        expect(infra["errors"] == 2 and infra["retries"] == 1 and infra["failed"] == 1 and
               infra["steps_answered"] == 1, f"stats.infra {infra}")
        # Host slots are no GPUs: none leaves the pool.
        expect(infra["gpus_removed"] == [], f"gpus_removed {infra['gpus_removed']}")

        # The client sends it once more, says so, then raises InfraError (drop the sample).
        rec = Records()
        LOG.addHandler(rec)
        env = Env(PROBLEM, client=c, max_turns=2, infra_retries=1)
        env.reset(seed=7)
        try:
            env.step(action("correct.cu"))
            raise AssertionError("Env.step returned after infra_errors")
        except InfraError:
            pass
        LOG.removeHandler(rec)
        expect(len(rec.lines) == 2 and "sending the same action again" in rec.lines[0] and
               "drop this sample" in rec.lines[1], f"client log {rec.lines}")
        infra = c.call("stats")["infra"]
        expect(infra["steps_answered"] == 3, f"stats.infra {infra}")
        expect(stored_turns(srv) == 0, "an infra_error reached the store")
        expect(env.trajectory()["turns"] == [], "Env's episode has a turn")
    finally:
        srv.stop()
        srv.cleanup()


def eval_leaves_them_out():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ev")
        env = dict(os.environ, PKGYM_FAKE_SETUP_FAILURES="1000")
        p = subprocess.run(
            [os.environ["PKGYM"], "eval", "--policy", f"replay:{SRC}/rollout/replay",
             "--problems", "selftest/scale", "-G", "2", "-T", "2", "--out", out,
             "--serve-arg", "--gpus", "--serve-arg", "none"],
            capture_output=True, text=True, timeout=280, env=env)
        # 3: some trajectories stopped on an error (here infra_error, in no figure).
        expect(p.returncode == 3, f"eval rc {p.returncode}: {p.stderr[-800:]}")
        for needle in ("infra_error, not the model's failure; sending the same action again",
                       "this trajectory is dropped from every figure"):
            expect(needle in p.stderr, f"eval's stderr lacks {needle!r}: {p.stderr[-800:]}")
        r = json.load(open(os.path.join(out, "report.json")))
        o = r["overall"]
        expect(o["infra_dropped"] == 2 and o["trajectories"] == 0 and o["errors"] == 0 and
               o["correct"] == 0, f"overall {o}")
        # Turns that never ran (a compile error in the replay) are recorded; none that ran.
        trajs = r["trajectories"]
        expect(all(t["infra_error"] and all(u["status"] in ("compile_error", "format_error")
                                            for u in t["turns"]) for t in trajs),
               f"trajectories {trajs}")
        md = open(os.path.join(out, "report.md")).read()
        expect("2 trajectories stopped on `infra_error`" in md, "report.md does not say so")
        db = sqlite3.connect(os.path.join(out, "data", "trajectories.sqlite"))
        stored = db.execute("SELECT status FROM turns").fetchall()
        expect(len(stored) == sum(len(t["turns"]) for t in trajs), f"stored turns {stored}")
        db.close()


def main():
    one_failure_is_retried()
    repeated_failures_are_never_scored()
    eval_leaves_them_out()
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
