#!/usr/bin/python3
"""Example command hook: a compact history.

Reads the request JSON on stdin and prints {"text": ...}. For "history" it shows every earlier
turn's summary and feedback but only the latest turn's code, dropping the earliest turns when the
prompt would exceed the budget. Other hooks get the built-in text back unchanged.
"""
import json
import re
import sys


def approx_tokens(text):
    """Same approximation as pk_approx_tokens: ~4 word characters or 1 punctuation mark per
    token, 1 per newline."""
    tokens = 0
    for run in re.findall(r"[A-Za-z0-9_\u0080-\U0010ffff]+|[^\sA-Za-z0-9_]|\n", text):
        tokens += (len(run.encode()) + 3) // 4 if run[0].isalnum() or run[0] == "_" or ord(run[0]) >= 0x80 else 1
    return tokens


def fits(text, req):
    chars, tokens = req.get("budget_chars", 0), req.get("budget_tokens", 0)
    return (not chars or len(text.encode()) <= chars) and (not tokens or approx_tokens(text) <= tokens)


def render(req, turns, dropped):
    parts = [req["task_prompt"], "", "Earlier attempts (code shown for the latest only):"]
    if dropped:
        parts.append(f"({dropped} earliest attempts not shown.)")
    for i, t in enumerate(turns):
        parts.append(f"Attempt {t['turn']}: {t['feedback']}")
        parts.append(f"  Summary: {t['summary']}")
        if i == len(turns) - 1:
            parts.append("```cuda\n" + (t["code"] or "") + "\n```")
    parts += ["", req["continue"]]
    return "\n".join(parts)


def history(req):
    turns = req["turns"]
    for first in range(len(turns) + 1):
        text = render(req, turns[first:], first)
        if fits(text, req):
            return text
    return req["builtin"]


def main():
    req = json.load(sys.stdin)
    text = history(req) if req.get("hook") == "history" else req["builtin"]
    json.dump({"text": text}, sys.stdout)


if __name__ == "__main__":
    main()
