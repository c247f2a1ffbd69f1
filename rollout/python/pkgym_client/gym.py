"""pkgym as a real Gymnasium environment (`pip install pkgym-client[gym]`).

    import gymnasium, pkgym_client.gym   # registers "pkgym/Pkgym-v0"
    env = gymnasium.make("pkgym/Pkgym-v0", problem="selftest/scale",
                         endpoint="tcp://127.0.0.1:5555", max_turns=4)
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(model(obs["prompt"]))

Observations are dicts with the same keys after reset and after step:
- prompt: the next-turn prompt (the server's, within its budget; with a token budget, the chat
  template's rendering of `messages`, within it exactly);
- feedback: this turn's feedback ("" after reset);
- turn: turns played so far (0 after reset);
- messages: the conversation as chat messages, a tuple of {"role", "content"} dicts.
The action is the model's whole response (text). info always has "episode" (the server's
episode id) and "problem"; after a step also the server's info (status, correct, speedup, ...,
returns once the episode ended).
"""
import gymnasium
from gymnasium import spaces

from .chat import UNTRIMMED, TokenBudget
from .client import Client, step_through_infra

ENV_ID = "pkgym/Pkgym-v0"
PRINTABLE = "".join(chr(c) for c in range(32, 127)) + "\n\t"


class UnicodeText(spaces.Text):
    """gymnasium's Text space for any Unicode text up to max_length characters (Text itself only
    admits its sampling charset). Samples are drawn from printable ASCII."""

    def __init__(self, max_length, *, min_length=0, seed=None):
        super().__init__(max_length, min_length=min_length, charset=PRINTABLE, seed=seed)

    def contains(self, x):
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self):
        return f"UnicodeText({self.min_length}, {self.max_length})"


ROLES = spaces.Text(9, min_length=4, charset="abcdefghijklmnopqrstuvwxyz")


class PkgymEnv(gymnasium.Env):
    """One pkgym episode at a time over a blocking Client.

    problem: a problem id (reset's options may name another: {"problem": id}).
    max_turns: the turn budget of each episode. group: a GRPO group label stored with it.
    options: default reset options (reward, feedback, check, stop_on_correct); reset's merge in.
    tokenizer + max_prompt_tokens: fit `messages` to max_prompt_tokens exactly (chat template
    tokens) and make `prompt` their rendering; the server's approximate trimming is turned off.
    infra_retries: a step answered infra_error (the server's own failure, before the
    candidate's code ran) is sent again this many times, with a warning; then step raises
    pkgym_client.InfraError: drop the sample, it is not the model's failure and has no reward.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, problem, endpoint=None, max_turns=4, group=None, options=None,
                 client=None, tokenizer=None, max_prompt_tokens=None, render_mode=None,
                 max_text_chars=1 << 22, infra_retries=1):
        self.problem = problem
        self.infra_retries = infra_retries
        self.max_turns = max_turns
        self.group = group
        self.options = dict(options or {})
        self._own_client = client is None
        self.client = client or (Client(endpoint) if endpoint else Client())
        self.render_mode = render_mode
        self.budget = None
        if tokenizer is not None or max_prompt_tokens is not None:
            if tokenizer is None or max_prompt_tokens is None:
                raise ValueError("a token budget needs both tokenizer and max_prompt_tokens")
            self.budget = TokenBudget(max_prompt_tokens, tokenizer=tokenizer)
        limits = self.client.hello()["limits"]
        text = UnicodeText(max_text_chars)
        self.observation_space = spaces.Dict({
            "prompt": text,
            "feedback": text,
            "turn": spaces.Discrete(limits["max_turns"] + 1),
            "messages": spaces.Sequence(spaces.Dict({"role": ROLES, "content": text})),
        })
        self.action_space = UnicodeText(limits["max_action_bytes"], min_length=1)
        self.episode = None
        self._last = None

    def _observation(self, raw):
        messages = raw["messages"]
        prompt = raw["prompt"]
        if self.budget is not None:
            messages = self.budget.fit(messages)
            prompt = self.budget.text(messages)
        return {"prompt": prompt, "feedback": raw.get("feedback") or "",
                "turn": int(raw.get("turn", 0)),
                "messages": tuple({"role": m["role"], "content": m["content"]} for m in messages)}

    def _reset_options(self, options):
        merged = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.options.items()}
        for k, v in (options or {}).items():
            merged[k] = dict(merged.get(k) or {}, **v) if isinstance(v, dict) else v
        if self.budget is not None:
            merged["feedback"] = dict(merged.get("feedback") or {}, **UNTRIMMED["feedback"])
        return merged

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        options = dict(options or {})
        problem = options.pop("problem", self.problem)
        if self.episode is not None:
            self.client.close_episode(self.episode)
            self.episode = None
        if seed is None:  # gymnasium seeds once, then draws: the server gets a seed either way
            seed = int(self.np_random.integers(0, 2**31 - 1))
        reply = self.client.reset(problem, seed=seed, max_turns=self.max_turns,
                                  options=self._reset_options(options) or None, group=self.group)
        self.episode = reply["episode"]
        obs = self._observation(reply["observation"])
        self._last = obs
        info = dict(reply["info"], episode=self.episode, problem=problem)
        return obs, info

    def step(self, action, summary=None):
        if self.episode is None:
            raise RuntimeError("step before reset")
        if not isinstance(action, str):
            raise TypeError(f"the action is the model's response text, not {type(action).__name__}")
        r = step_through_infra(self.client, self.episode, action, summary, self.infra_retries)
        obs = self._observation(r["observation"])
        self._last = obs
        info = dict(r["info"], episode=self.episode)
        return obs, float(r["reward"]), bool(r["terminated"]), bool(r["truncated"]), info

    def trajectory(self):
        return self.client.trajectory(self.episode)

    def render(self):
        if self.render_mode == "ansi" and self._last is not None:
            return self._last["prompt"]
        return None

    def close(self):
        if self.episode is not None:
            try:
                self.client.close_episode(self.episode)
            finally:
                self.episode = None
        if self._own_client:
            self.client.close()
        super().close()


def register_envs():
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point="pkgym_client.gym:PkgymEnv",
                           disable_env_checker=False)


register_envs()
__all__ = ["ENV_ID", "PkgymEnv", "UnicodeText", "register_envs"]
