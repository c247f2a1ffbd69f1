#!/usr/bin/env python3
"""The verl interaction through verl's own interface, no GPU: verl 0.7.1's interaction registry
loads PkgymInteraction from an interaction config file (as verl's ToolAgentLoop does), and the
test drives it the way ToolAgentLoop._handle_interacting_state does: start_interaction(request_id,
**interaction_kwargs), then per model turn generate_response(request_id, messages,
**interaction_kwargs) with the conversation so far, appending its answer as the next user message
and its reward to turn_scores, until it says to stop. Checks the rewards against the trajectory
store, the next user message against the server's observation, calculate_score against the
episode's return, that ended and abandoned episodes are closed, and verl_rows' dataset rows."""
import asyncio
import os
import sys
import tempfile
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "env"))
from pkserver import SRC, Server, running  # noqa: E402

PROBLEM = "selftest/scale"


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def answer(name, summary):
    with open(os.path.join(SRC, "problems", "selftest", "scale", "solutions", name)) as f:
        return f"<think>plan</think>\n```cuda\n{f.read()}\n```\n{summary}"


async def rollout(interaction, row, responses):
    """ToolAgentLoop's interaction handling, turn by turn (verl 0.7.1)."""
    kwargs = row["extra_info"]["interaction_kwargs"]
    messages = list(row["prompt"])
    request_id = uuid.uuid4().hex
    await interaction.start_interaction(request_id, **kwargs)
    turn_scores, metas = [], []
    for text in responses:
        messages.append({"role": "assistant", "content": text})
        done, user, reward, meta = await interaction.generate_response(request_id, messages,
                                                                       **kwargs)
        messages.append({"role": "user", "content": user})
        turn_scores.append(reward)
        metas.append(meta)
        if done:
            break
    return request_id, messages, turn_scores, metas


async def run(srv, config_path):
    import verl
    from verl.interactions.base import BaseInteraction
    from verl.interactions.utils.interaction_registry import initialize_interactions_from_config

    from pkgym_client.integrations.verl import PkgymInteraction, verl_rows

    imap = initialize_interactions_from_config(config_path)
    interaction = imap["pkgym"]
    expect(isinstance(interaction, PkgymInteraction) and isinstance(interaction, BaseInteraction),
           f"registry gave {type(interaction)}")
    rows = verl_rows([PROBLEM], endpoint=srv.endpoint)
    expect(rows[0]["extra_info"]["interaction_kwargs"] == {"name": "pkgym", "problem": PROBLEM},
           rows[0]["extra_info"])
    c = srv.client(timeout_s=60)
    expect(rows[0]["prompt"] == c.get_problem(PROBLEM)["messages"], "rows' prompt")

    # A whole episode: 3 turns (max_turns from the config), ended by the server.
    responses = [answer("correct.cu", "Scaled."), "only words, no code",
                 answer("wrong_rank.cu", "Wrong rank."), "a 4th turn is never sent"]
    rid, messages, scores, metas = await rollout(interaction, rows[0], responses)
    expect(len(scores) == 3, f"{len(scores)} turns before done")
    ep = metas[0]["episode"]
    t = c.trajectory(ep)  # closed as soon as it ended: read from the store
    expect(t["done"] and [x["score"] for x in t["turns"]] == scores,
           f"turn_scores {scores} vs store {[x['score'] for x in t['turns']]}")
    expect([x["status"] for x in t["turns"]] == ["correct", "format_error", "incorrect"],
           [x["status"] for x in t["turns"]])
    expect([m["status"] for m in metas] == [x["status"] for x in t["turns"]], "metadata status")
    expect("plan" not in t["turns"][0]["code"], "reasoning removed by the server")
    expect(metas[-1]["returns"] == t["returns"], "the last metadata has the returns")
    score = await interaction.calculate_score(rid)
    expect(abs(score - t["returns"][0]) < 1e-9, f"calculate_score {score} vs {t['returns'][0]}")
    # The user messages verl appended are the server's next user chat messages.
    users = [m["content"] for m in messages if m["role"] == "user"][1:]
    for i, (u, turn) in enumerate(zip(users, t["turns"]), 1):
        expect(u.startswith(f"Result of attempt {i}:\n") and turn["feedback"] in u, f"user {i}")
    try:
        c.call("close", episode=ep)
        raise AssertionError("the ended episode was still open")
    except Exception as e:
        expect(getattr(e, "code", "") == "unknown_episode", f"close again: {e}")
    await interaction.finalize_interaction(rid)

    # An abandoned rollout (verl stopped after one turn): finalize closes it.
    rid, _, scores, metas = await rollout(interaction, rows[0], responses[:1])
    expect(len(scores) == 1 and c.stats()["episodes_open"] == 1, "one open")
    expect(await interaction.calculate_score(rid) == scores[0], "score before the end")
    await interaction.finalize_interaction(rid)
    expect(c.stats()["episodes_open"] == 0, "finalize closed it")
    expect(not c.trajectory(metas[0]["episode"])["done"], "abandoned, not ended")
    await interaction.aclose()
    c.close()
    return verl.__version__


def main():
    srv = Server()
    tmp = tempfile.mkdtemp(prefix="pkgym-verl-")
    config = os.path.join(tmp, "interaction_config.yaml")
    with open(config, "w") as f:
        f.write("interaction:\n"
                "  - name: pkgym\n"
                "    class_name: pkgym_client.integrations.verl.PkgymInteraction\n"
                f"    config: {{endpoint: \"{srv.endpoint}\", max_turns: 3}}\n")
    with running(srv, 5000):
        version = asyncio.run(run(srv, config))
    print(f"verl {version} interaction: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
