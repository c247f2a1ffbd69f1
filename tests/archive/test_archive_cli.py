#!/usr/bin/env python3
"""The archive from the command line (issue 31), host-only selftest problems, no GPU:
1. `pkgym eval` (replay policy, embedded server) with --examples --compare-examples fills the
   archive of its data dir with the correct turns of the run, and its report puts the two arms
   side by side, with every prompt of the `with` arm carrying examples within its budget;
2. a second eval on the same --data-dir (a restarted server) finds the archive as it was;
3. `pkgym archive` list, show, export, import, seed, and their errors;
4. `pkgym export --verified`: one line per kernel and problem, best first per problem, with
   task, plan, code, speedup and kernel_hash; --all-turns keeps every correct turn."""
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

PKGYM = os.environ["PKGYM"]
SRC = os.environ["PK_SOURCE_DIR"]
REPLAY = os.path.join(SRC, "rollout", "replay")
SERVE = ["--serve-arg", "--gpus", "--serve-arg", "none", "--serve-arg", "--compile-workers",
         "--serve-arg", "1"]


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def run(*args, ok=True):
    p = subprocess.run([PKGYM, *args], capture_output=True, text=True)
    if ok:
        expect(p.returncode == 0, f"pkgym {' '.join(args)} exited {p.returncode}:\n{p.stderr}")
    return p


def archive_rows(data, sql):
    db = sqlite3.connect(os.path.join(data, "archive.sqlite"))
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def correct_turns(data):
    db = sqlite3.connect(os.path.join(data, "trajectories.sqlite"))
    try:
        return db.execute("SELECT e.problem_id, t.code, t.speedup, t.summary FROM turns t JOIN"
                          " episodes e ON e.id = t.episode_id WHERE t.status = 'correct'").fetchall()
    finally:
        db.close()


def khash(code):
    return hashlib.sha256(code.strip().encode()).hexdigest()


def test_eval_fills_archive(tmp):
    out, data = os.path.join(tmp, "ev"), os.path.join(tmp, "data")
    run("eval", "--policy", f"replay:{REPLAY}", "--problems", "suite:selftest", "-G", "2", "-T",
        "3", "--out", out, "--data-dir", data, "--quiet", "--options",
        '{"check": {"trials": 1}}', "--examples", '{"k": 2, "mode": "alternate"}',
        "--compare-examples", *SERVE)
    turns = correct_turns(data)
    expect(turns, "the run has correct turns")
    rows = archive_rows(data, "SELECT problem_id, kernel_hash, source, hardware, world_size,"
                        " speedup FROM entries")
    want = {(p, khash(c)) for p, c, _, _ in turns}
    expect({(r[0], r[1]) for r in rows} == want,
           f"one archive entry per correct kernel and problem: {rows} vs {want}")
    expect(all(r[2].startswith("episode:") and r[3] == "host" and r[4] == 2 for r in rows),
           f"provenance and hardware: {rows}")
    for p, h in want:  # the best measurement of each kernel is kept
        best = max(s for q, c, s, _ in turns if q == p and khash(c) == h)
        got = [r[5] for r in rows if (r[0], r[1]) == (p, h)][0]
        expect(abs(got - best) <= 1e-6 * max(1.0, best), f"{p}: archived speedup {got}, best {best}")
    cmp = json.load(open(os.path.join(out, "examples_compare.json")))
    expect(set(cmp["overall"]) == {"without", "with"} and cmp["examples_seen"], "compare json")
    for arm in ("without", "with"):
        o = cmp["overall"][arm]
        expect("pass@k" in o and "fast_1" in o and len(o["best_so_far_by_turn"]) == 3, arm)
    seen = cmp["examples_seen"]
    expect(seen["prompts"] > 0 and seen["prompts_with_examples"] == seen["prompts"]
           and seen["shown"] > 0 and seen["errors"] == 0, f"examples reached the prompts: {seen}")
    without = json.load(open(os.path.join(out, "without", "report.json")))
    expect("examples" not in without, "the arm without examples asked for none")
    md = open(os.path.join(out, "examples_compare.md")).read()
    expect("| overall |" in md and "Best speedup so far by turn" in md, md)
    # Every prompt of the `with` arm's episodes named the scope; none of the other arm's did.
    db = sqlite3.connect(os.path.join(data, "trajectories.sqlite"))
    prompts = db.execute("SELECT e.group_id, t.prompt FROM turns t JOIN episodes e"
                         " ON e.id = t.episode_id").fetchall()
    db.close()
    for group, prompt in prompts:
        has = "Scope other_problems" in prompt
        expect(has == ("-with/" in group), f"group {group}: examples in prompt {has}")
    return data, len(rows)


def test_restart_keeps_archive(tmp, data, n):
    run("eval", "--policy", f"replay:{REPLAY}", "--problems", "selftest/scale", "-G", "1", "-T",
        "1", "--out", os.path.join(tmp, "ev2"), "--data-dir", data, "--quiet", "--examples",
        '{"k": 3, "mode": "similar"}', *SERVE)
    rep = json.load(open(os.path.join(tmp, "ev2", "report.json")))
    expect(rep["examples"]["shown"] == 2, f"a new server retrieves the kept entries: {rep['examples']}")
    expect(archive_rows(data, "SELECT count(*) FROM entries")[0][0] >= n, "archive kept")


def test_archive_commands(tmp, data):
    lst = run("archive", "list", "--data-dir", data).stdout
    expect("selftest/scale" in lst and "episode:" in lst, lst)
    js = [json.loads(l) for l in run("archive", "list", "--data-dir", data, "--json").stdout.splitlines()]
    expect(js and all(j["problem"]["title"] and j["code"] for j in js), "list --json")
    shown = run("archive", "show", "--data-dir", data, str(js[0]["id"])).stdout
    expect(js[0]["code"] in shown and js[0]["kernel_hash"] in shown, shown)
    exp = os.path.join(tmp, "archive.jsonl")
    run("archive", "export", "--data-dir", data, "--out", exp)
    lines = open(exp).read().splitlines()
    expect(len(lines) == len(js), "export: every entry")
    other = os.path.join(tmp, "other.sqlite")
    imp = run("archive", "import", "--archive", other, exp).stderr
    expect(f"{len(lines)} new entr" in imp, imp)
    imp = run("archive", "import", "--archive", other, exp).stderr
    expect("0 new entries" in imp, f"import twice: deduplicated: {imp}")
    seed_dir = os.path.join(tmp, "seeded")
    out = run("archive", "seed", "--data-dir", seed_dir, "--problems", "suite:selftest").stderr
    n_sol = len([p for p in os.listdir(os.path.join(SRC, "problems", "selftest"))
                 if os.path.exists(os.path.join(SRC, "problems", "selftest", p, "solutions",
                                                "correct.cu"))])
    expect(f"{n_sol} new entr" in out, out)
    # Errors: clear messages, exit 2, nothing written.
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write(lines[0] + "\n{\"problem_id\": \"x/y\"}\n")
    for args, needle in [(("archive", "import", "--archive", os.path.join(tmp, "b.sqlite"), bad),
                          "bad.jsonl:2:"),
                         (("archive", "show", "--data-dir", data, "abc"), "positive integer"),
                         (("archive", "show", "--data-dir", data, "99999"), "no entry 99999"),
                         (("archive", "list", "--data-dir", os.path.join(tmp, "none")), "no archive at"),
                         (("archive", "list", "--data-dir", data, "--archive", exp), "not both"),
                         (("archive", "list", "--frob"), "--frob"),
                         (("archive", "prune"), "unknown action 'prune'"),
                         (("archive", "import", "--archive", other), "FILE.jsonl is required"),
                         (("archive", "seed", "--data-dir", seed_dir, "--problems", "tag:nope"),
                          "no problem matches"),
                         (("export", "--db", "x", "--all-turns"), "--all-turns goes with --verified")]:
        p = run(*args, ok=False)
        expect(p.returncode == 2 and needle in p.stderr, f"{args}: {p.returncode} {p.stderr}")
    expect(run("archive", "--help").stdout.startswith("usage: pkgym archive list"), "help")


def test_export_verified(tmp, data):
    db = os.path.join(data, "trajectories.sqlite")
    turns = correct_turns(data)
    lines = [json.loads(l) for l in run("export", "--db", db, "--verified").stdout.splitlines()]
    keys = [(l["problem_id"], l["kernel_hash"]) for l in lines]
    expect(len(keys) == len(set(keys)) == len({(p, khash(c)) for p, c, _, _ in turns}),
           f"one line per kernel and problem: {len(keys)} lines, {len(turns)} correct turns")
    expect(len(turns) > len(lines), "the replay repeats kernels, so some were left out")
    for l in lines:
        expect(l["task"] == l["task_prompt"] and l["plan"] == l["summary"] and l["code"]
               and l["kernel_hash"] == khash(l["code"]), "task, plan, code, kernel_hash")
    probs = [l["problem_id"] for l in lines]
    expect(probs == sorted(probs), "grouped by problem")
    for p in set(probs):
        s = [l["speedup"] for l in lines if l["problem_id"] == p]
        expect(s == sorted(s, reverse=True), f"{p}: best first {s}")
        best = max(sp for q, _, sp, _ in turns if q == p)
        expect(s[0] == best, f"{p}: the first line is the best turn")
    every = run("export", "--db", db, "--verified", "--all-turns").stdout.splitlines()
    expect(len(every) == len(turns), "--all-turns: every correct turn")


def main():
    tmp = tempfile.mkdtemp(prefix="pk-archive-cli-")
    try:
        data, n = test_eval_fills_archive(tmp)
        test_restart_keeps_archive(tmp, data, n)
        test_archive_commands(tmp, data)
        test_export_verified(tmp, data)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("archive cli ok")


if __name__ == "__main__":
    main()
