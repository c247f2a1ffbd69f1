#!/usr/bin/env python3
"""pkgym_client.gym.PkgymEnv is a real gymnasium.Env: gymnasium's env checker passes, it is
registered (gymnasium.make("pkgym/Pkgym-v0")), its Text observation and action spaces contain
what reset and step return, the observation keys are the same after reset and step, info has the
episode id, seeds make the inputs reproducible, close frees the episode, and with a tokenizer the
prompt fits the token budget exactly. Needs gymnasium (PyPI, in a venv of the test's own)."""
import os
import re
import sys

import gymnasium
from gymnasium.utils import env_checker as ec
from gymnasium.utils.passive_env_checker import env_reset_passive_checker, env_step_passive_checker
from pkserver import SRC, Server, running

import pkgym_client.gym  # noqa: F401  (registers pkgym/Pkgym-v0)
from pkgym_client.gym import ENV_ID, PkgymEnv, UnicodeText

PROBLEM = "selftest/scale"
KEYS = {"prompt", "feedback", "turn", "messages"}


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def action(name):
    with open(os.path.join(SRC, "problems", "selftest", "scale", "solutions", name)) as f:
        return "```cuda\n" + f.read() + "\n```\nsummary"


class WordTokenizer:
    def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=True):
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"
        return re.findall(r"\w+|[^\w\s]", text) if tokenize else text


def main():
    with running(Server()) as srv:
        c = srv.client(timeout_s=300)
        # gymnasium's own checks (utils.env_checker.check_env), all but check_step_determinism:
        # step info carries the episode id (a fresh one per reset) and measured times.
        env = PkgymEnv(PROBLEM, client=c, max_turns=3)
        for space, what in ((env.action_space, "action"), (env.observation_space, "observation")):
            (ec.check_action_space if what == "action" else ec.check_observation_space)(space)
            ec.check_space_limit(space, what)
        for check in (ec.check_seed_deprecation, ec.check_reset_return_info_deprecation,
                      ec.check_reset_return_type, ec.check_reset_seed_determinism,
                      ec.check_reset_options, env_reset_passive_checker,
                      ec.check_returned_data_not_reused):
            check(env)
        env_step_passive_checker(env, env.action_space.sample())
        env.close()
        env.close()  # twice is allowed
        open_after_check = c.stats()["episodes_open"]
        expect(open_after_check == 0, f"{open_after_check} episodes left open by the checker")

        env = gymnasium.make(ENV_ID, problem=PROBLEM, endpoint=srv.endpoint, max_turns=2)
        expect(isinstance(env.unwrapped, gymnasium.Env) and env.spec.id == ENV_ID, "registered")
        space = env.observation_space
        expect(isinstance(space["prompt"], gymnasium.spaces.Text) and
               isinstance(env.action_space, gymnasium.spaces.Text), "Text spaces")
        obs, info = env.reset(seed=7)
        expect(set(obs) == KEYS and space.contains(obs), f"reset obs {sorted(obs)}")
        expect(obs["turn"] == 0 and obs["feedback"] == "", "reset turn/feedback")
        expect(re.fullmatch(r"[0-9a-f]{32}", info["episode"]) and info["problem"] == PROBLEM, info)
        ep = info["episode"]
        expect(env.action_space.contains(action("correct.cu")), "an answer is in the action space")
        obs, reward, term, trunc, info = env.step(action("correct.cu"))
        expect(set(obs) == KEYS and space.contains(obs), f"step obs {sorted(obs)}")
        expect(info["episode"] == ep and info["status"] == "correct" and reward > 0, info)
        expect(obs["turn"] == 1 and not term and not trunc, "turn 1")
        obs, reward, term, trunc, info = env.step("no code")
        expect(trunc and info["returns"] and info["status"] == "format_error", "truncated")
        traj = env.unwrapped.trajectory()
        expect(traj["seed"] == 7 and len(traj["turns"]) == 2, "seed 7 reached the server")
        env.close()
        expect(c.trajectory(ep)["done"], "closed episode readable")
        expect(c.stats()["episodes_open"] == 0, "close frees the episode")

        # reset(options={"problem": ...}) switches problems; reset options merge over defaults.
        env = PkgymEnv(PROBLEM, client=c, max_turns=1, options={"reward": {"gamma": 0.5}})
        obs, info = env.reset(options={"problem": "selftest/allreduce",
                                       "reward": {"penalty_format": 0.25}})
        expect(info["problem"] == "selftest/allreduce", info["problem"])
        expect(info["settings"]["reward"]["gamma"] == 0.5 and
               info["settings"]["reward"]["penalty_format"] == 0.25, info["settings"]["reward"])
        env.close()

        # Exact token budget: messages fitted, prompt = their rendering, within the budget.
        tok = WordTokenizer()
        first = len(tok.apply_chat_template(c.get_problem(PROBLEM)["messages"]))
        budget = first + 200
        env = PkgymEnv(PROBLEM, client=c, max_turns=3, tokenizer=tok, max_prompt_tokens=budget)
        obs, info = env.reset(seed=1)
        expect(info["settings"]["feedback"]["budget_tokens"] == 0, "server trimming off")
        for name in ("correct.cu", "wrong_rank.cu"):
            obs, *_ = env.step(action(name))
            n = len(tok.apply_chat_template(list(obs["messages"])))
            expect(n <= budget, f"{n} tokens over {budget}")
            expect(obs["prompt"] == tok.apply_chat_template(list(obs["messages"]), tokenize=False),
                   "prompt is the rendering of the fitted messages")
            expect(space.contains(obs), "fitted obs in the space")
        expect("omitted to fit the context" in "".join(m["content"] for m in obs["messages"]),
               "the budget trimmed something")
        env.close()
        expect(UnicodeText(5).contains("ünï") and not UnicodeText(2).contains("abc"), "UnicodeText")
        c.close()
    print(f"gymnasium {gymnasium.__version__} env: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
