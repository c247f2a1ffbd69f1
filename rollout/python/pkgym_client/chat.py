"""The observation as chat messages, fitted to a context budget counted in real tokens.

The server sends `observation["messages"]`: system, user (the first prompt), then per turn an
assistant message (the code and summary the server extracted) and a user message (the turn's
feedback and the instruction to continue). The server trims them with its approximate token
count (docs/feedback.md). With a tokenizer, a trainer can do better: ask the server for the
untrimmed conversation (`UNTRIMMED`, in reset's options) and fit it here, exactly:

    budget = TokenBudget(max_tokens=4096, tokenizer=tok)       # counts tok.apply_chat_template
    messages = budget.fit(obs["messages"])                     # <= 4096 tokens, exactly
    prompt_ids = budget.token_ids(messages)

The rules are the server's: the earliest turns go first and the first user message says how many
were left out; when only the latest turn is left and still too long, the middle of its code is cut;
the system and first user messages are never cut (if they alone exceed the budget, fit raises
ContextBudgetError).
"""

# reset options that turn the server's approximate trimming off, for fitting here instead.
UNTRIMMED = {"feedback": {"budget_tokens": 0, "budget_chars": 0}}

OMITTED_NOTE = "({n} earlier attempts omitted to fit the context.)"
CUT_MARKER = "\n/* ... {n} characters omitted to fit the context ... */\n"


class ContextBudgetError(ValueError):
    """The system and first user messages alone exceed the budget."""


def hf_token_counter(tokenizer, add_generation_prompt=True, **template_kwargs):
    """count(messages) -> the number of tokens tokenizer.apply_chat_template makes of them."""

    def count(messages):
        return len(hf_token_ids(tokenizer, messages, add_generation_prompt, **template_kwargs))

    return count


def hf_token_ids(tokenizer, messages, add_generation_prompt=True, **template_kwargs):
    """The token ids of messages under tokenizer's chat template (a list of ints)."""
    out = tokenizer.apply_chat_template(list(messages), tokenize=True,
                                        add_generation_prompt=add_generation_prompt,
                                        **template_kwargs)
    if hasattr(out, "keys") and "input_ids" in out:  # transformers 5 returns a BatchEncoding
        out = out["input_ids"]
    if hasattr(out, "tolist"):
        out = out.tolist()
    if out and isinstance(out[0], list):
        out = out[0]
    return list(out)


def _with_note(first_user, omitted):
    if omitted == 0:
        return dict(first_user)
    note = OMITTED_NOTE.format(n=omitted)
    return dict(first_user, content=first_user["content"] + "\n\n" + note)


def _assemble(head, turns, first):
    """system + first user (with the note for the `first` dropped turns) + turns[first:]."""
    out = [dict(head[0]), _with_note(head[1], first)]
    for pair in turns[first:]:
        out.extend(dict(m) for m in pair)
    return out


def _cut_middle(content, keep):
    """content with the middle of its last fenced code block (else of itself) cut to keep chars."""
    start = content.find("```")
    start = content.find("\n", start) + 1 if start >= 0 else 0
    end = content.rfind("\n```")
    if end < start:
        start, end = 0, len(content)
    code = content[start:end]
    if keep >= len(code):
        return content
    head = keep * 2 // 3
    tail = keep - head
    cut = code[:head] + CUT_MARKER.format(n=len(code) - keep) + (code[-tail:] if tail else "")
    return content[:start] + cut + content[end:]


def fit_messages(messages, max_tokens, count):
    """The messages (a server observation's, or any system, user, (assistant, user)* list) within
    max_tokens as counted by count(messages). Returns a new list; the input is not changed."""
    messages = list(messages)
    if len(messages) < 2 or messages[0].get("role") != "system" or \
            messages[1].get("role") != "user" or len(messages) % 2:
        raise ValueError("expected system, user, then (assistant, user) pairs")
    head = messages[:2]
    turns = [messages[i:i + 2] for i in range(2, len(messages), 2)]
    if count(_assemble(head, turns, 0)) <= max_tokens:
        return _assemble(head, turns, 0)
    # Fewer turns never take more tokens: find the fewest to drop by bisection.
    lo, hi = 1, len(turns)  # drop lo..hi turns; hi always fits if anything does
    if count(_assemble(head, turns, len(turns))) > max_tokens:
        raise ContextBudgetError(
            f"the system and first user messages alone take "
            f"{count(_assemble(head, turns, len(turns)))} tokens; the budget is {max_tokens}")
    while lo < hi:
        mid = (lo + hi) // 2
        if count(_assemble(head, turns, mid)) <= max_tokens:
            hi = mid
        else:
            lo = mid + 1
    if lo < len(turns):
        return _assemble(head, turns, lo)
    # Only the latest turn left, and it does not fit: cut its code, keeping as much as fits.
    last = turns[-1]
    content = last[0]["content"]
    best, lo, hi = None, 0, len(content)
    while lo <= hi:
        keep = (lo + hi) // 2
        cand = [[dict(last[0], content=_cut_middle(content, keep)), last[1]]]
        msgs = _assemble(head, turns[:-1] + cand, len(turns) - 1)
        if count(msgs) <= max_tokens:
            best, lo = msgs, keep + 1
        else:
            hi = keep - 1
    return best if best is not None else _assemble(head, turns, len(turns))


class TokenBudget:
    """A context budget in real tokens: fit(messages) and token_ids(messages).

    tokenizer: a transformers tokenizer with a chat template; or count: any callable
    messages -> int (then token_ids needs the tokenizer)."""

    def __init__(self, max_tokens, tokenizer=None, count=None, **template_kwargs):
        if tokenizer is None and count is None:
            raise ValueError("TokenBudget needs a tokenizer or a count function")
        self.max_tokens = max_tokens
        self.tokenizer = tokenizer
        self.template_kwargs = template_kwargs
        self.count = count or hf_token_counter(tokenizer, **template_kwargs)

    def fit(self, messages):
        return fit_messages(messages, self.max_tokens, self.count)

    def token_ids(self, messages):
        if self.tokenizer is None:
            raise ValueError("token_ids needs the tokenizer")
        return hf_token_ids(self.tokenizer, messages, **self.template_kwargs)

    def text(self, messages):
        """The prompt text the chat template makes of messages (what was counted)."""
        if self.tokenizer is None:
            raise ValueError("text needs the tokenizer")
        return self.tokenizer.apply_chat_template(list(messages), tokenize=False,
                                                  add_generation_prompt=True,
                                                  **self.template_kwargs)
