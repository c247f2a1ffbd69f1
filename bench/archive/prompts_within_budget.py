#!/usr/bin/env python3
"""Did archive examples reach the prompts, within their budget? (bench/archive/gpu-examples.sh)
Reads a `pkgym eval --compare-examples` run: DATA (its --data-dir: the trajectory store and the
archive) and OUT (its report directory). Every stored prompt of the `with` arm's episodes must
carry the examples header and fit its episode's budget_chars and budget_tokens; no prompt of
the `without` arm may carry one. Prints the counts and a verdict; exit 0 yes, 1 no.
   prompts_within_budget.py DATA OUT"""
import json
import sqlite3
import sys

HEADER = "## Verified kernels from the archive"


def approx_tokens(text):
    """pk_approx_tokens (summarizer_hooks/src/text_util.c), over the UTF-8 bytes."""
    tokens = run = 0
    for b in text.encode() + b"\0":
        if b and (chr(b).isalnum() and b < 0x80 or b == ord("_") or b >= 0x80):
            run += 1
            continue
        tokens += (run + 3) // 4
        run = 0
        if not b:
            break
        if not chr(b).isspace() or b == ord("\n"):
            tokens += 1
    return tokens


def main(data, out):
    db = sqlite3.connect(f"{data}/trajectories.sqlite")
    rows = db.execute("SELECT e.group_id, e.config_json, t.prompt FROM turns t JOIN episodes e"
                      " ON e.id = t.episode_id").fetchall()
    arms = {"with": [0, 0, 0], "without": [0, 0, 0]}  # prompts, with examples, over budget
    for group, config, prompt in rows:
        arm = arms["with" if "-with/" in (group or "") else "without"]
        fb = json.loads(config)["feedback"]
        over = (fb["budget_chars"] > 0 and len(prompt.encode()) > fb["budget_chars"]) or \
               (fb["budget_tokens"] > 0 and approx_tokens(prompt) > fb["budget_tokens"])
        arm[0] += 1
        arm[1] += HEADER in prompt
        arm[2] += over
    seen = json.load(open(f"{out}/with/report.json")).get("examples", {})
    uses = sqlite3.connect(f"{data}/archive.sqlite").execute(
        "SELECT count(*) FROM uses").fetchone()[0]
    w, wo = arms["with"], arms["without"]
    print(f"\nStored prompts, with examples asked: {w[0]} answered, {w[1]} carried examples, "
          f"{w[2]} over budget; without: {wo[0]} answered, {wo[1]} carried examples.")
    print(f"Replies of the with arm: {json.dumps(seen)}; rows in the archive's uses: {uses}")
    ok = w[0] > 0 and w[1] == w[0] and w[2] == 0 and wo[1] == 0 and seen.get("errors", 1) == 0
    print(f"\nexamples reached every prompt of the with arm within its budget: "
          f"{'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
