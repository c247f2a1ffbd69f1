#!/usr/bin/env python3
"""The archive of verified kernels through a real `pkgym serve` (issue 31), host-only selftest
problems, no GPU:
- a correct turn enters DATA/archive.sqlite with its plan, world size, dims, hardware, source;
- an episode without options.examples sees no other episode's kernel (no leak);
- an episode that asks for examples gets them in its prompt and messages, reported in
  info.examples and recorded in the archive's `uses` table;
- a hostile episode that asks, in every mode and with the largest k, for its own problem's
  kernels under scope other_problems never gets one; scope any does include them;
- examples go first out of the context budget; random retrieval is reproducible from the seed;
- bad options.examples are bad_request;
- the archive survives a restart, and an open episode with examples continues after it."""
import os
import sqlite3
import subprocess
import sys

from pkserver import SRC, Server

PROBLEM = "selftest/scale"
OTHER = "selftest/allreduce"
MARK = "KERNEL-MARKER-31"  # only in the kernel this test's episode writes
PLAN = "PLAN-MARKER-31: one pass, y = 3x + rank"


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_bad(reply, needle):
    expect(reply.get("ok") is False and reply["error"]["code"] == "bad_request",
           f"expected bad_request, got {reply}")
    expect(needle in reply["error"]["message"], f"'{needle}' not in {reply['error']}")


def solution(problem_id):
    suite, name = problem_id.split("/", 1)
    with open(os.path.join(SRC, "problems", suite, name, "solutions", "correct.cu")) as f:
        return f.read()


def marked_action():
    return f"```cuda\n// {MARK}\n{solution(PROBLEM)}\n```\n{PLAN}"


def archive_rows(data_dir, sql, *args):
    db = sqlite3.connect(os.path.join(data_dir, "archive.sqlite"))
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def seed_archive(data_dir):
    out = subprocess.run([os.environ["PKGYM"], "archive", "seed", "--data-dir", data_dir,
                          "--problems", "suite:selftest"], capture_output=True, text=True)
    expect(out.returncode == 0, f"archive seed: {out.stderr}")


def all_text(reply):
    obs = reply["observation"]
    return obs["prompt"] + "\n".join(m["content"] for m in obs["messages"])


def test_correct_turn_archived(c, data_dir):
    r = c.call("reset", problem=PROBLEM, seed=1, max_turns=2, options={"check": {"trials": 1}})
    ep = r["episode"]
    expect("examples" not in r["info"], "no info.examples without the option")
    s = c.call("step", episode=ep, action=marked_action())
    expect(s["info"]["status"] == "correct", f"the marked kernel is correct: {s['info']}")
    rows = archive_rows(data_dir, "SELECT problem_id, world_size, dims_json, plan, hardware,"
                        " source, speedup, code FROM entries WHERE code LIKE ?", f"%{MARK}%")
    expect(len(rows) == 1, f"one archived row for the marked kernel: {rows}")
    problem, world, dims, plan, hardware, source, speedup, code = rows[0]
    expect(problem == PROBLEM and world == 2 and dims == '{"n":65536}', f"row {rows[0][:3]}")
    expect(plan and PLAN in plan, f"the plan after the kernel is archived: {plan!r}")
    expect(hardware == "host" and source == f"episode:{ep}/turn:1", f"{hardware} {source}")
    expect(speedup > 0, f"a timed host run has a speedup: {speedup}")
    # The same kernel again: still one row (deduplicated by kernel hash per problem).
    s2 = c.call("step", episode=ep, action=marked_action())
    expect(s2["info"]["status"] == "correct", "correct again")
    n = archive_rows(data_dir, "SELECT count(*) FROM entries WHERE code LIKE ?", f"%{MARK}%")
    expect(n[0][0] == 1, f"deduplicated: {n}")
    return ep


def test_no_leak_without_option(c):
    r = c.call("reset", problem=OTHER, seed=2, max_turns=2)
    expect(MARK not in all_text(r) and "archive" not in r["observation"]["prompt"],
           "an episode without options.examples sees no archived kernel at reset")
    s = c.call("step", episode=r["episode"], action="No code yet.")
    expect(MARK not in all_text(s) and "Verified kernels" not in s["observation"]["prompt"],
           "... nor in its next prompt")
    c.call("close", episode=r["episode"])


def test_examples_given(c, data_dir):
    r = c.call("reset", problem=OTHER, seed=3, max_turns=3,
               options={"examples": {"k": 16, "mode": "alternate"}})
    ep = r["episode"]
    info = r["info"]["examples"]
    expect(r["info"]["settings"]["examples"] == {"k": 16, "mode": "alternate",
                                                "scope": "other_problems"}, "settings")
    expect(info["turn"] == 1 and info["mode_used"] == "similar", f"turn 1 is similar: {info}")
    ids = [e["id"] for e in info["entries"]]
    expect(ids and all(e["problem"] != OTHER for e in info["entries"]), f"entries {info}")
    expect(MARK in r["observation"]["prompt"], "the archived kernel of another problem is shown")
    expect(MARK in r["observation"]["messages"][1]["content"], "... in messages too")
    expect("Scope other_problems" in r["observation"]["prompt"], "the header says the scope")
    used = archive_rows(data_dir, "SELECT entry_id FROM uses WHERE episode_id = ? AND turn = 1"
                        " ORDER BY rank", ep)
    expect([u[0] for u in used] == ids, f"uses recorded {used} vs {ids}")
    s = c.call("step", episode=ep, action="No code yet.")
    expect(s["info"]["examples"]["turn"] == 2 and s["info"]["examples"]["mode_used"] == "random",
           f"turn 2 is random: {s['info']['examples']}")
    return ep


def test_hostile_own_problem(c):
    for mode in ("similar", "random", "alternate"):
        for seed in range(4):
            r = c.call("reset", problem=PROBLEM, seed=seed, max_turns=3,
                       options={"examples": {"k": 16, "mode": mode, "scope": "other_problems"}})
            replies = [r]
            for _ in range(2):
                replies.append(c.call("step", episode=r["episode"], action="No code."))
            for x in replies[:-1]:
                ex = x["info"]["examples"]
                expect(ex["entries"], f"{mode}: other problems' examples are given")
                expect(all(e["problem"] != PROBLEM for e in ex["entries"]),
                       f"{mode}: its own problem's entry was given: {ex}")
                expect(MARK not in all_text(x), f"{mode}: its own archived kernel leaked")
                expect(solution(PROBLEM).strip() not in x["observation"]["prompt"],
                       f"{mode}: the suite's own solution leaked")
            c.call("close", episode=r["episode"])
    # Scope any is the documented way to see them.
    r = c.call("reset", problem=PROBLEM, seed=9, max_turns=1,
               options={"examples": {"k": 16, "mode": "similar", "scope": "any"}})
    expect(r["info"]["examples"]["entries"][0]["problem"] == PROBLEM,
           f"scope any: its own problem ranks first: {r['info']['examples']}")
    expect("Scope any" in r["observation"]["prompt"], "the header says scope any")
    c.call("close", episode=r["episode"])


def test_budget_and_reproducibility(c):
    base = c.call("reset", problem=OTHER, seed=5, max_turns=1)["observation"]["prompt"]
    tight = {"budget_chars": len(base) + 40, "budget_tokens": 0}
    r = c.call("reset", problem=OTHER, seed=5, max_turns=1,
               options={"feedback": tight, "examples": {"k": 3, "mode": "similar"}})
    ex = r["info"]["examples"]
    expect(ex["retrieved"] > 0 and ex["entries"] == [] and ex["dropped_for_budget"] == ex["retrieved"],
           f"no example fits 40 characters: {ex}")
    expect(r["observation"]["prompt"] == base, "the prompt is the one without examples")
    roomy = {"budget_chars": 400000, "budget_tokens": 0}
    picks = []
    for _ in range(2):
        r = c.call("reset", problem=OTHER, seed=77, max_turns=1,
                   options={"feedback": roomy, "examples": {"k": 2, "mode": "random"}})
        picks.append([e["id"] for e in r["info"]["examples"]["entries"]])
        expect(len(r["observation"]["prompt"]) <= 400000, "within budget")
    expect(len(picks[0]) == 2 and picks[0] == picks[1], f"random from one seed repeats: {picks}")


def test_bad_options(c):
    for value, needle in [({"k": 0}, "options.examples.k"), ({"k": 17}, "options.examples.k"),
                          ({"k": "3"}, "options.examples.k"),
                          ({"mode": "nearest"}, "options.examples.mode"),
                          ({"scope": "all"}, "options.examples.scope"),
                          ({"scope": None}, "options.examples.scope"),
                          ({"leak": True}, "options.examples.leak"),
                          ("yes", "options.examples must be a map")]:
        expect_bad(c.request("reset", problem=PROBLEM, options={"examples": value}), needle)


def main():
    srv = Server("--gpus", "none", "--compile-workers", "1")
    data_dir = srv.data_dir
    try:
        seed_archive(data_dir)  # the suite's own examples, beside the server's open archive
        c = srv.client()
        test_correct_turn_archived(c, data_dir)
        test_no_leak_without_option(c)
        open_ep = test_examples_given(c, data_dir)
        test_hostile_own_problem(c)
        test_budget_and_reproducibility(c)
        test_bad_options(c)
        count = archive_rows(data_dir, "SELECT count(*) FROM entries")[0][0]
        st = c.call("stats")["archive"]
        expect(st == {"added": 1, "errors": 0}, f"stats.archive: the one new kernel: {st}")
        c.close()
        expect(srv.stop() == 0, "server exit 0")
        # Restart on the same data dir: the archive is kept, and the open episode continues with
        # its examples.
        srv2 = Server("--gpus", "none", "--compile-workers", "1", data_dir=data_dir)
        try:
            c = srv2.client()
            expect(archive_rows(data_dir, "SELECT count(*) FROM entries")[0][0] == count,
                   "the archive survives the restart")
            s = c.call("step", episode=open_ep, action="Still no code.")
            expect(s["info"]["examples"]["turn"] == 3 and s["info"]["examples"]["entries"],
                   f"the restored episode keeps its examples: {s['info'].get('examples')}")
            r = c.call("reset", problem=OTHER, seed=3, max_turns=1,
                       options={"examples": {"k": 16, "mode": "similar"}})
            expect(MARK in r["observation"]["prompt"], "entries of the last run are retrieved")
            c.close()
            expect(srv2.stop() == 0, "server exit 0 after the restart")
        finally:
            srv2.cleanup()
    except Exception:
        print(srv.output(), file=sys.stderr)
        raise
    finally:
        srv.cleanup()
    print("archive examples ok")


if __name__ == "__main__":
    main()
