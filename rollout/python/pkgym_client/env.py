"""A Gymnasium-style view of one pkgym episode at a time."""
from .client import Client, step_through_infra


class Env:
    """reset(seed=None, options=None) -> (obs, info);
    step(action) -> (obs, reward, terminated, truncated, info).

    obs is the server's observation, with the same keys after reset and step: prompt,
    feedback ("" after reset), turn, messages (docs/protocol.md). pkgym_client.gym.PkgymEnv is
    the gymnasium.Env with spaces.

    A step answered infra_error (the server's own failure, before the candidate's code ran) is
    sent again up to infra_retries times, with a warning; then step raises InfraError: drop
    the sample, it is not the model's failure and has no reward.
    """

    def __init__(self, problem, endpoint=None, max_turns=4, group=None, client=None,
                 infra_retries=1):
        self.problem = problem
        self.infra_retries = infra_retries
        self.max_turns = max_turns
        self.group = group
        self._own_client = client is None
        self.client = client or (Client(endpoint) if endpoint else Client())
        self.episode = None

    def reset(self, seed=None, options=None):
        if self.episode is not None:
            self.client.close_episode(self.episode)
        reply = self.client.reset(self.problem, seed=seed, max_turns=self.max_turns,
                                  options=options, group=self.group)
        self.episode = reply["episode"]
        return reply["observation"], reply["info"]

    def step(self, action, summary=None):
        if self.episode is None:
            raise RuntimeError("step before reset")
        r = step_through_infra(self.client, self.episode, action, summary, self.infra_retries)
        return r["observation"], r["reward"], r["terminated"], r["truncated"], r["info"]

    def trajectory(self):
        return self.client.trajectory(self.episode)

    def close(self):
        if self.episode is not None:
            self.client.close_episode(self.episode)
            self.episode = None
        if self._own_client:
            self.client.close()
