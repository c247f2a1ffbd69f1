#!/usr/bin/env python3
"""pkgym_client.chat: the server's untrimmed conversation (UNTRIMMED options) fitted to budgets
counted by a tokenizer-like counter, exactly: the result fits, and keeping one more turn (or more
of the cut code) would not; the earliest turns go first with the note; the latest turn's code is
cut in the middle before it is dropped; a budget below the first messages is an error. The
counter here is a deterministic stand-in for a tokenizer (words and punctuation of the chat
rendering); test_integration_trl runs the same with a real transformers tokenizer."""
import os
import re
import sys

from pkserver import SRC, Server, running

from pkgym_client.chat import (UNTRIMMED, ContextBudgetError, TokenBudget, _assemble,
                               fit_messages, hf_token_counter)

PROBLEM = "selftest/scale"


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def render(messages):
    return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"


def count(messages):
    return len(re.findall(r"\w+|[^\w\s]", render(messages)))


class FakeTokenizer:
    """apply_chat_template as transformers has it, over the same rendering."""

    def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=True):
        text = render(messages)
        return [hash(t) % 1000 for t in re.findall(r"\w+|[^\w\s]", text)] if tokenize else text


def conversation(c):
    code = open(os.path.join(SRC, "problems", "selftest", "scale", "solutions",
                             "correct.cu")).read()
    r = c.reset(PROBLEM, max_turns=4, options=UNTRIMMED)
    ep = r["episode"]
    for i in range(4):
        s = c.step(ep, f"```cuda\n{code}\n// attempt {i + 1}\n```\nAttempt {i + 1} summary.")
    return s["observation"]["messages"]


def kept_turns(m):
    return [int(x) for x in re.findall(r"Attempt (\d) summary", "".join(y["content"] for y in m))]


def main():
    with running(Server()) as srv:
        c = srv.client(timeout_s=300)
        full = conversation(c)
        c.close()
    expect(len(full) == 10 and kept_turns(full) == [1, 2, 3, 4], "untrimmed: all 4 turns")
    total = count(full)
    head = count(_assemble(full[:2], [full[i:i + 2] for i in range(2, 10, 2)], 4))
    seen = set()
    for budget in range(total + 5, head - 1, -7):
        m = fit_messages(full, budget, count)
        n = count(m)
        expect(n <= budget, f"budget {budget}: {n} tokens")
        turns = kept_turns(m)
        seen.add(len(turns))
        expect(turns == list(range(5 - len(turns), 5)), f"the latest turns, in order: {turns}")
        dropped = 4 - len(turns)
        if 0 < dropped < 4:
            expect(f"({dropped} earlier attempts omitted to fit the context.)" in m[1]["content"],
                   "the note")
            # Exact: keeping one more turn would not fit.
            more = _assemble(full[:2], [full[i:i + 2] for i in range(2, 10, 2)], dropped - 1)
            expect(count(more) > budget, f"budget {budget}: turn {dropped} would have fit")
        cut = "characters omitted to fit the context" in "".join(x["content"] for x in m)
        if cut:
            expect(len(turns) == 1 and m[-2]["content"].startswith("```cuda\n")
                   and m[-2]["content"].rstrip().endswith("Attempt 4 summary."),
                   f"the cut keeps the fence and the summary: {turns} {m[-2]['content']!r}")
            seen.add("cut")
    expect({0, 1, 2, 3, 4, "cut"} <= seen, f"budgets exercised every case: {seen}")
    try:
        fit_messages(full, head - 1, count)
        raise AssertionError("a budget below the first messages fitted")
    except ContextBudgetError as e:
        expect(str(head) in str(e), str(e))
    # TokenBudget over a tokenizer's apply_chat_template counts the same tokens.
    b = TokenBudget(head + 600, tokenizer=FakeTokenizer())
    m = b.fit(full)
    expect(len(b.token_ids(m)) == count(m) <= head + 600, "TokenBudget")
    expect(hf_token_counter(FakeTokenizer())(full) == total, "hf_token_counter")
    expect(full[0]["content"] == m[0]["content"], "the input is not changed")
    print(f"chat budget: ok ({total} tokens untrimmed, budgets {head}..{total + 5})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
