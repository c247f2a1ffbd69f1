#!/usr/bin/env python3
"""The TRL and verl integrations given infra_error (#25), with a scripted async client (no
TRL, verl or server needed): the step is sent once more and the log says so; a second
infra_error drops the sample (TRL: neutral reward, the mean of the rest of its group, flagged
pkgym_dropped; verl: InfraError by default, or the sequence ended with dropped=true and no
score), never a reward that counts it as the model's failure."""
import asyncio
import logging
import os
import sys

sys.path.insert(0, os.path.join(os.environ["PK_SOURCE_DIR"], "rollout", "python"))

from pkgym_client import InfraError  # noqa: E402
from pkgym_client.client import LOG  # noqa: E402
from pkgym_client.integrations.trl import PkgymRollout  # noqa: E402
from pkgym_client.integrations.verl import PkgymInteraction  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def reply(status, reward, done=False):
    return {"observation": {"prompt": "p", "feedback": "f", "turn": 1,
                            "messages": [{"role": "user", "content": "next"}]},
            "reward": reward, "terminated": False, "truncated": done,
            "info": {"turn": 1, "status": status, "correct": status == "correct",
                     "speedup": None, "returns": [reward] if done else None}}


class ScriptedClient:
    """step(episode): infra_error for the first `bad[episode]` calls, then a correct turn."""

    def __init__(self, bad):
        self.bad = dict(bad)
        self.calls = {}
        self.closed = []

    async def step(self, episode, action, summary=None):
        self.calls[episode] = self.calls.get(episode, 0) + 1
        if self.calls[episode] <= self.bad.get(episode, 0):
            raise InfraError("infra_error", f"{episode}: device setup failed (fake)")
        return reply("correct", 1.0, done=True)

    async def close_episode(self, episode):
        self.closed.append(episode)


def trl_steps():
    rec = Records()
    LOG.addHandler(rec)
    ac = ScriptedClient({"once": 1, "twice": 2})
    out = asyncio.run(PkgymRollout()._step_live(ac, ["ok", "once", "twice", "gone"],
                                                ["a"] * 4, [True, True, True, False]))
    LOG.removeHandler(rec)
    check(out[0]["info"]["status"] == "correct" and out[1]["info"]["status"] == "correct",
          f"live episodes stepped: {out[:2]}")
    check(isinstance(out[2], InfraError), f"a second infra_error is returned: {out[2]!r}")
    check(out[3] is None and "gone" not in ac.calls, "a dropped episode is not stepped")
    check(ac.calls == {"ok": 1, "once": 2, "twice": 2}, f"calls {ac.calls}")
    check(sum("sending the same action again" in line for line in rec.lines) == 2,
          f"log {rec.lines}")


def trl_neutral_rows():
    G = 3
    ok = reply("correct", 0.9)
    blocks = [{"first_group": 0, "turns": 2, "episodes": ["e0", "e1", "e2"], "group": "g",
               "problem": "p", "dropped": [0, 2, 0], "steps": [[ok, ok], [ok], [ok, ok]]}]
    keys = ("pkgym_reward", "pkgym_score", "pkgym_return", "pkgym_status", "pkgym_episode",
            "pkgym_turn", "pkgym_group", "pkgym_problem", "pkgym_dropped")
    extra = {k: [None] * 6 for k in keys}
    # The kept episodes' rows (turn t, episode g at row t*G+g), as _play fills them.
    for row, r in ((0, 0.2), (2, 0.6), (3, 1.0), (5, 2.0)):
        extra["pkgym_reward"][row] = r
        extra["pkgym_dropped"][row] = False
    PkgymRollout._neutral_rows(blocks, G, extra)
    check(abs(extra["pkgym_reward"][1] - 0.4) < 1e-12, f"turn 1 neutral {extra['pkgym_reward']}")
    check(abs(extra["pkgym_reward"][4] - 1.5) < 1e-12, f"turn 2 neutral {extra['pkgym_reward']}")
    check(extra["pkgym_dropped"] == [False, True, False, False, True, False],
          f"dropped {extra['pkgym_dropped']}")
    check(extra["pkgym_status"][1] == "correct" and extra["pkgym_status"][4] == "infra_error",
          f"statuses {extra['pkgym_status']}")
    check(all(extra[k][r] is not None for k in keys for r in (1, 4)), "every field filled")


def verl(mode, bad):
    it = PkgymInteraction({"infra_error": mode})
    ac = ScriptedClient({"ep": bad})
    it._client = ac
    it._instances["i"] = {"episode": "ep", "problem": "p", "rewards": [], "returns": None,
                          "done": False, "closed": False}
    msgs = [{"role": "assistant", "content": "code"}]
    return it, ac, asyncio.run(it.generate_response("i", msgs))


def verl_cases():
    it, ac, (done, text, reward, meta) = verl("raise", 1)
    check(done and meta["status"] == "correct" and reward == 1.0 and ac.calls["ep"] == 2,
          f"verl: one infra_error is sent again: {meta} {ac.calls}")
    try:
        verl("raise", 2)
        check(False, "verl 'raise': a second infra_error did not raise")
    except InfraError:
        pass
    it, ac, (done, text, reward, meta) = verl("end", 2)
    check(done and meta.get("dropped") is True and meta["status"] == "infra_error",
          f"verl 'end': {meta}")
    check(asyncio.run(it.calculate_score("i")) is None, "verl: a dropped episode has a score")
    check(ac.closed == ["ep"], f"verl: the dropped episode is closed: {ac.closed}")
    try:
        PkgymInteraction({"infra_error": "ignore"})
        check(False, "verl: an unknown infra_error mode was accepted")
    except ValueError:
        pass


def main():
    trl_steps()
    trl_neutral_rows()
    verl_cases()
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
