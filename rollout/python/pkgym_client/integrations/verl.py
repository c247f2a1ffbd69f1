"""pkgym as a verl multi-turn interaction (verl's BaseInteraction).

interaction_config.yaml (actor_rollout_ref.rollout.multi_turn.interaction_config_path):

    interaction:
      - name: pkgym
        class_name: pkgym_client.integrations.verl.PkgymInteraction
        config: {endpoint: "tcp://127.0.0.1:5555", max_turns: 4}

and each dataset row carries extra_info.interaction_kwargs = {"name": "pkgym", "problem": id}
(`verl_rows` builds such rows, with the problem's first chat messages as the prompt).

verl's agent loop calls start_interaction(request_id, **interaction_kwargs) once per rollout,
then, after each model turn, generate_response(request_id, messages, **interaction_kwargs): the
last assistant message is stepped on the server, and verl gets (should_terminate, the next user
message, the turn's reward, metadata). calculate_score is the episode's return once it ended;
finalize_interaction closes the episode.

Checked against verl 0.7.1, the last release with verl.interactions (0.8.0 and 0.9.x on PyPI no
longer ship it). verl 0.7.1's ToolAgentLoop never calls finalize_interaction, so an episode is
closed here as soon as it ends; one that verl abandons earlier (max_assistant_turns, response
length) is closed by finalize_interaction if called, else by the server's idle expiry.
Without verl installed, PkgymInteraction derives from a copy of BaseInteraction's interface.

A step answered infra_error (the server failed before the candidate's code ran, twice: not the
model's failure, no turn recorded) is sent once more, with a warning (logger pkgym_client). If
it fails again: config infra_error "raise" (default) raises pkgym_client.InfraError, so the
rollout fails loudly instead of scoring the sample; "end" ends the sequence with metadata
{status: "infra_error", dropped: true} (reward 0.0 only because verl needs a number: filter
such samples out by that flag), and calculate_score returns None for it.
"""
import uuid

from ..client import DEFAULT_ENDPOINT, LOG, Client, InfraError

try:  # verl <= 0.7.1
    from verl.interactions.base import BaseInteraction
except ImportError:  # verl absent, or a version without interactions
    class BaseInteraction:
        """verl 0.7.1's BaseInteraction interface (verl/interactions/base.py)."""

        def __init__(self, config):
            self.config = config
            self.name = config.get("name", "interaction_agent")

        async def start_interaction(self, instance_id=None, **kwargs):
            return instance_id if instance_id is not None else str(uuid.uuid4())

        async def generate_response(self, instance_id, messages, **kwargs):
            raise NotImplementedError

        async def calculate_score(self):
            return 0.0

        async def finalize_interaction(self):
            pass

RESPONSES = ("message", "feedback")
INFRA_ERROR_MODES = ("raise", "end")


def _text(content):
    if isinstance(content, list):  # typed content blocks
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return content or ""


class PkgymInteraction(BaseInteraction):
    """config: endpoint, max_turns (default 4), options (reset options), problem (default
    problem when interaction_kwargs names none), response: "message" (the server's next user
    chat message: this turn's feedback and the instruction to continue; default) or "feedback"
    (the feedback alone), timeout_s, infra_error: "raise" (default) or "end" (module doc)."""

    def __init__(self, config):
        super().__init__(config)
        self.endpoint = config.get("endpoint", DEFAULT_ENDPOINT)
        self.max_turns = int(config.get("max_turns", 4))
        self.options = dict(config.get("options") or {})
        self.default_problem = config.get("problem")
        self.response = config.get("response", "message")
        if self.response not in RESPONSES:
            raise ValueError(f"response must be one of {RESPONSES}, not {self.response!r}")
        self.timeout_s = float(config.get("timeout_s", 600.0))
        self.infra_error = config.get("infra_error", "raise")
        if self.infra_error not in INFRA_ERROR_MODES:
            raise ValueError(f"infra_error must be one of {INFRA_ERROR_MODES}, "
                             f"not {self.infra_error!r}")
        self._client = None
        self._instances = {}

    async def _ac(self):
        if self._client is None:
            from ..aio import AsyncClient  # created on verl's running loop

            self._client = AsyncClient(self.endpoint, timeout_s=self.timeout_s)
        return self._client

    async def start_interaction(self, instance_id=None, problem=None, seed=None, group=None,
                                options=None, max_turns=None, **kwargs):
        if instance_id is None:
            instance_id = str(uuid.uuid4())
        problem = problem or self.default_problem
        if not problem:
            raise ValueError("no problem: give interaction_kwargs.problem or config.problem")
        merged = dict(self.options)
        for k, v in (options or {}).items():
            merged[k] = dict(merged.get(k) or {}, **v) if isinstance(v, dict) else v
        ac = await self._ac()
        reply = await ac.reset(problem, seed=seed, group=group, options=merged or None,
                               max_turns=int(max_turns or self.max_turns))
        self._instances[instance_id] = {"episode": reply["episode"], "problem": problem,
                                        "rewards": [], "returns": None, "done": False,
                                        "closed": False}
        return instance_id

    def _state(self, instance_id):
        st = self._instances.get(instance_id)
        if st is None:
            raise KeyError(f"no pkgym interaction {instance_id!r} (start_interaction first)")
        return st

    async def generate_response(self, instance_id, messages, **kwargs):
        st = self._state(instance_id)
        meta = {"episode": st["episode"], "problem": st["problem"]}
        if st["done"]:
            return True, "", 0.0, dict(meta, returns=st["returns"])
        answers = [m for m in messages if m.get("role") == "assistant"]
        if not answers:
            raise ValueError("no assistant message to evaluate")
        ac = await self._ac()
        # The protocol refuses NUL in strings; a sampled response may decode to one.
        action = _text(answers[-1].get("content")).replace("\x00", "\ufffd")
        r = await self._step(ac, st, action)
        if r is None:  # dropped (infra_error "end")
            return True, "", 0.0, dict(meta, status="infra_error", dropped=True)
        reward = float(r["reward"])
        st["rewards"].append(reward)
        done = bool(r["terminated"] or r["truncated"])
        info = r["info"]
        if done:
            st["done"] = True
            st["returns"] = info.get("returns")
            await self._close(st)
        obs = r["observation"]
        text = obs["messages"][-1]["content"] if self.response == "message" else obs["feedback"]
        meta.update(turn=info["turn"], status=info["status"], correct=info["correct"],
                    speedup=info.get("speedup"), returns=st["returns"])
        return done, text, reward, meta

    async def _step(self, ac, st, action):
        """ac.step, once more after an infra_error; a second one raises, or drops the episode
        (None) under infra_error "end"."""
        try:
            return await ac.step(st["episode"], action)
        except InfraError as e:
            LOG.warning("pkgym: episode %s: infra_error, not the model's failure; sending the "
                        "same action again: %s", st["episode"], e.message)
        try:
            return await ac.step(st["episode"], action)
        except InfraError as e:
            LOG.warning("pkgym: episode %s: infra_error again, not the model's failure; %s: %s",
                        st["episode"], "the sample is dropped (metadata dropped=true)"
                        if self.infra_error == "end" else "raising InfraError", e.message)
            if self.infra_error != "end":
                raise
        st["done"] = st["dropped"] = True
        await self._close(st)
        return None

    async def calculate_score(self, instance_id=None, **kwargs):
        """The episode's discounted return (the first turn's) once it ended; before that the
        latest turn's reward (0.0 before any); None for a dropped episode (infra_error)."""
        st = self._state(instance_id)
        if st.get("dropped"):
            return None
        if st["returns"]:
            return float(st["returns"][0])
        return st["rewards"][-1] if st["rewards"] else 0.0

    async def _close(self, st):
        if not st["closed"]:
            st["closed"] = True
            await (await self._ac()).close_episode(st["episode"])

    async def finalize_interaction(self, instance_id=None, **kwargs):
        st = self._instances.pop(instance_id, None)
        if st is not None:
            await self._close(st)

    async def aclose(self):
        """Closes every open episode and the connection (not part of verl's interface)."""
        for iid in list(self._instances):
            await self.finalize_interaction(iid)
        if self._client is not None:
            await self._client.close()
            self._client = None


def verl_rows(problems, endpoint=DEFAULT_ENDPOINT, name="pkgym", data_source="pkgym"):
    """Dataset rows for verl's RLHFDataset: prompt = the problem's first chat messages,
    extra_info.interaction_kwargs = {name, problem}. Write them with pandas to parquet."""
    rows = []
    with Client(endpoint) as c:
        for i, pid in enumerate(problems):
            rows.append({"data_source": data_source,
                         "prompt": c.get_problem(pid)["messages"],
                         "ability": "cuda-kernels",
                         "reward_model": {"style": "interaction", "ground_truth": ""},
                         "extra_info": {"index": i, "problem": pid,
                                        "interaction_kwargs": {"name": name, "problem": pid}}})
    return rows
