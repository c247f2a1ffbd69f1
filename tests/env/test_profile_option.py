#!/usr/bin/env python3
"""The profile option end to end on the host-only selftest problems (docs/feedback.md,
"Profiles"): reset's options.profile is validated and kept in the settings; a server without
--profile-per-minute refuses it; with a budget of one profile per minute, an incorrect turn takes
nothing from it, the first correct turn takes it (a host problem: then skipped, nothing of it runs
on a GPU) and the next correct turn is skipped for the budget, said in the step's info, the
feedback and the stored result, while the verdict and the reward stay those of the timed run."""
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile

from pkserver import SRC, Server, running

PROBLEM = "selftest/allreduce"


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_error(reply, code, needle):
    expect(reply.get("ok") is False, f"expected error {code}, got {reply}")
    expect(reply["error"]["code"] == code, f"expected {code}, got {reply['error']}")
    expect(needle in reply["error"]["message"], f"'{needle}' not in {reply['error']}")


def action(name):
    with open(os.path.join(SRC, "problems", *PROBLEM.split("/"), "solutions", name)) as f:
        return f"```cuda\n{f.read()}\n```\nSummary: {name}"


def off_by_default():
    with running(Server()) as srv:
        c = srv.client()
        r = c.call("reset", problem=PROBLEM)
        expect(r["info"]["settings"]["profile"] == "none", f"default: {r['info']['settings']}")
        r = c.call("reset", problem=PROBLEM, options={"profile": "none"})
        expect(r["info"]["settings"]["profile"] == "none", "explicit none")
        for level in ("summary", "full"):
            expect_error(c.request("reset", problem=PROBLEM, options={"profile": level}),
                         "bad_request", "profiling is off on this server")
        for bad in ("fast", "Full", 1, None, ["full"]):
            expect_error(c.request("reset", problem=PROBLEM, options={"profile": bad}),
                         "bad_request", 'options.profile must be one of "none", "summary", "full"')
        step = c.call("step", episode=r["episode"], action=action("correct.cu"))
        expect("profile" not in step["info"], "no profile asked: no info.profile")


def budget():
    with running(Server("--profile-per-minute", "1", "--profile-seconds", "30")) as srv:
        c = srv.client()
        r = c.call("reset", problem=PROBLEM, max_turns=4, options={"profile": "full"})
        expect(r["info"]["settings"]["profile"] == "full", "settings keep the level")
        ep = r["episode"]

        wrong = c.call("step", episode=ep, action=action("wrong_subtle.cu"))
        p = wrong["info"]["profile"]
        expect(wrong["info"]["status"] == "incorrect", f"wrong_subtle: {wrong['info']['status']}")
        expect(p["status"] == "skipped" and "not correct" in p["reason"], f"incorrect: {p}")

        first = c.call("step", episode=ep, action=action("correct.cu"))
        p = first["info"]["profile"]
        expect(first["info"]["status"] == "correct", f"correct.cu: {first['info']}")
        expect(p["level"] == "full" and p["status"] == "skipped", f"first correct: {p}")
        expect(p["reason"].startswith("host problem"), f"took the budget, then: {p}")

        second = c.call("step", episode=ep, action=action("correct.cu"))
        p = second["info"]["profile"]
        expect(second["info"]["status"] == "correct", "the step never fails for a profile")
        expect(p["status"] == "skipped" and p["reason"].startswith("budget (1 profiles per minute"),
               f"over budget: {p}")
        expect(p["cost_s"] is None and p["raw"] is None, f"nothing ran: {p}")
        expect(second["reward"] > 0 and second["info"]["speedup"] is not None,
               "the reward and the speedup of the timed run")
        fb = second["observation"]["feedback"]
        expect("Profile: skipped this turn (the server's profile budget)." in fb, fb)
        c.call("close", episode=ep)

        db = sqlite3.connect(os.path.join(srv.data_dir, "trajectories.sqlite"))
        rows = db.execute("SELECT result_json FROM turns WHERE episode_id = ? ORDER BY turn",
                          (ep,)).fetchall()
        db.close()
        stored = [json.loads(r[0]).get("profile") for r in rows]
        expect(len(stored) == 3, f"three turns stored, got {len(stored)}")
        expect(stored[0]["status"] == "skipped" and "not correct" in stored[0]["reason"],
               f"stored: {stored[0]}")
        expect(stored[1]["reason"].startswith("host problem"), f"stored: {stored[1]}")
        expect(stored[2]["status"] == "skipped" and stored[2]["reason"].startswith("budget"),
               f"stored: {stored[2]}")


def server_options():
    """The budget's options are bounded (pkgym serve --help)."""
    for args in (["--profile-per-minute", "601"], ["--profile-per-minute", "-1"],
                 ["--profile-seconds", "0"], ["--profile-seconds", "601"]):
        r = subprocess.run([os.environ["PKGYM"], "serve", *args], capture_output=True, text=True,
                           timeout=30)
        expect(r.returncode == 2 and args[0] in r.stderr, f"{args}: {r.returncode} {r.stderr}")
    r = subprocess.run([os.environ["PKGYM"], "serve", "--help"], capture_output=True, text=True,
                       timeout=30)
    expect("--profile-per-minute" in r.stdout and "profiling off" in r.stdout, "--help")


def restart():
    """An open episode keeps its profile level over a restart, even on a server restarted
    without profiling: its budget of 0 then skips every profile (budget)."""
    data = tempfile.mkdtemp(prefix="pkgym-profile-restart-")
    try:
        with running(Server("--profile-per-minute", "5", data_dir=data)) as srv:
            c = srv.client()
            ep = c.call("reset", problem=PROBLEM, max_turns=3,
                        options={"profile": "summary"})["episode"]
        with running(Server(data_dir=data)) as srv:
            c = srv.client()
            step = c.call("step", episode=ep, action=action("correct.cu"))
            p = step["info"]["profile"]
            expect(p["level"] == "summary", f"restored level: {p}")
            expect(p["status"] == "skipped" and p["reason"].startswith("budget (0 profiles"),
                   f"restored, no profiling here: {p}")
            c.call("close", episode=ep)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def main():
    server_options()
    off_by_default()
    budget()
    restart()
    print("profile option: ok")


if __name__ == "__main__":
    main()
