#!/usr/bin/env python3
"""The observation's chat form: reset and step observations have the same keys (prompt,
feedback, turn, messages); `messages` is system, user (the first prompt), then per turn an
assistant message (the extracted code and summary, reasoning removed) and a user message (that
turn's feedback and the instruction to continue); get_problem returns the first messages; the
feedback budgets trim the earliest turns first and say so. Host-only selftest problem."""
import os
import sys

from pkserver import SRC, Server, running

PROBLEM = "selftest/scale"
OBS_KEYS = {"prompt", "feedback", "turn", "messages"}
CONTINUE = "Restart your reasoning process and generate new, complete code."


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def solution(name):
    with open(os.path.join(SRC, "problems", "selftest", "scale", "solutions", name)) as f:
        return f.read().strip()


def roles(messages):
    return [m["role"] for m in messages]


def check_first(c, r):
    obs = r["observation"]
    expect(set(obs) == OBS_KEYS, f"reset observation keys {sorted(obs)}")
    expect(obs["turn"] == 0 and obs["feedback"] == "", f"reset turn/feedback {obs['turn']!r}")
    m = obs["messages"]
    expect(roles(m) == ["system", "user"], f"first roles {roles(m)}")
    expect(m[1]["content"] == obs["prompt"], "the first user message is the first prompt")
    expect("CUDA" in m[0]["content"], f"system message {m[0]['content']!r}")
    g = c.get_problem(PROBLEM)
    expect(g["messages"] == m, "get_problem's messages are a new episode's")


def test_turns(c):
    r = c.reset(PROBLEM, max_turns=3, seed=5)
    check_first(c, r)
    ep = r["episode"]
    correct, wrong = solution("correct.cu"), solution("wrong_rank.cu")
    s1 = c.step(ep, "<think>SECRET-REASONING</think>\nHere it is.\n```cuda\n" + correct +
                "\n```\nScaled in one loop.")
    s2 = c.step(ep, "Only a plan this time, no code.")
    s3 = c.step(ep, "```cuda\n" + wrong + "\n```\nUsed the wrong rank.")
    for i, s in enumerate((s1, s2, s3), 1):
        obs = s["observation"]
        expect(set(obs) == OBS_KEYS, f"step observation keys {sorted(obs)}")
        expect(obs["turn"] == i == s["info"]["turn"], f"turn {obs['turn']} vs {i}")
        m = obs["messages"]
        expect(roles(m) == ["system", "user"] + ["assistant", "user"] * i, f"roles {roles(m)}")
        expect(m[-1]["content"].startswith(f"Result of attempt {i}:\n"), m[-1]["content"][:60])
        expect(obs["feedback"] in m[-1]["content"], "the last user message quotes the feedback")
        expect(m[-1]["content"].endswith(CONTINUE), "the last user message says to continue")
    m = s3["observation"]["messages"]
    expect(s1["info"]["status"] == "correct", f"turn 1 {s1['info']['status']}")
    expect(correct in m[2]["content"] and "Scaled in one loop." in m[2]["content"],
           f"turn 1's assistant message: {m[2]['content'][:200]!r}")
    expect("SECRET-REASONING" not in str(m) and "Here it is." not in m[2]["content"],
           "reasoning reaches no message")
    expect(s2["info"]["status"] == "format_error", f"turn 2 {s2['info']['status']}")
    expect(m[4]["content"].startswith("```cuda\n\n```"), f"no code on turn 2: {m[4]['content']!r}")
    expect(wrong in m[6]["content"], "turn 3's code")
    # Earlier messages do not change as the episode goes on (a trainer may cache their tokens).
    expect(s1["observation"]["messages"] == m[:4], "messages only grow")
    return ep, m


def test_budget(c, full):
    """A character budget that fits the system, first user and latest turn only."""
    keep_last = sum(len(x["content"]) for x in full[:2] + full[-2:])
    budget = keep_last + 200
    expect(sum(len(x["content"]) for x in full) > budget, "the full conversation exceeds it")
    r = c.reset(PROBLEM, max_turns=3, seed=5, options={"feedback": {"budget_chars": budget,
                                                                    "budget_tokens": 0}})
    ep = r["episode"]
    correct, wrong = solution("correct.cu"), solution("wrong_rank.cu")
    c.step(ep, "```cuda\n" + correct + "\n```\nScaled in one loop.")
    c.step(ep, "Only a plan this time, no code.")
    s = c.step(ep, "```cuda\n" + wrong + "\n```\nUsed the wrong rank.")
    m = s["observation"]["messages"]
    total = sum(len(x["content"]) for x in m)
    expect(total <= budget, f"{total} characters over the budget {budget}")
    expect(roles(m)[:2] == ["system", "user"] and roles(m)[-2:] == ["assistant", "user"],
           f"roles {roles(m)}")
    dropped = (len(full) - len(m)) // 2
    expect(dropped >= 1, f"nothing dropped: {roles(m)}")
    expect(f"({dropped} earlier attempts omitted to fit the context.)" in m[1]["content"],
           f"the first user message says what was dropped: {m[1]['content'][-120:]!r}")
    expect(m[-1] == full[-1] and m[-2] == full[-2], "the latest turn is kept whole")
    # No budget at all: everything, and the first message without a note.
    r = c.reset(PROBLEM, max_turns=1, options={"feedback": {"budget_tokens": 0}})
    s = c.step(r["episode"], "no code")
    expect(len(s["observation"]["messages"]) == 4 and "omitted" not in
           s["observation"]["messages"][1]["content"], "no budget, nothing dropped")


def main():
    with running(Server()) as srv:
        c = srv.client(timeout_s=300)
        _, full = test_turns(c)
        test_budget(c, full)
        c.close()
    print("chat messages: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
