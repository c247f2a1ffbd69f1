#!/usr/bin/env python3
"""A real TRL run: GRPOTrainer (trl, transformers, torch on the CPU) trains a tiny, randomly
initialized causal LM for 2 steps with PkgymRollout as its rollout_func against a live
`pkgym serve` on the selftest problems. Checks that:
- every completion is one turn of a pkgym episode, a GRPO group of G rows is G episodes of one
  pkgym group at one turn, and the second turn's prompts are the server's observations, fitted to
  max_prompt_tokens exactly by the tokenizer;
- the rewards the trainer received are the returns the trajectory store recorded for each
  (episode, turn) (read back through `trajectory` of the closed episodes, which reads the store);
- the loss of both steps is finite.
A random model writes no CUDA, so every episode would score the same and the advantages would
all be zero; the test's generate= wraps the trainer's own generation and, for half of the rows,
replaces the completion with a scripted answer (a correct and a wrong solution), so that rewards
differ within each group. Every completion, scripted or sampled, is tokenized and trained on."""
import math
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "env"))
from pkserver import SRC, Server  # noqa: E402

import tiny_lm  # noqa: E402
from pkgym_client.chat import hf_token_ids  # noqa: E402
from pkgym_client.integrations.trl import PkgymRollout, pkgym_reward  # noqa: E402

G, T, PROBLEM = 4, 2, "selftest/scale"


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def scripted(name, summary):
    with open(os.path.join(SRC, "problems", "selftest", "scale", "solutions", name)) as f:
        return f"```cuda\n{f.read()}\n```\n{summary}"


def main():
    import torch
    import transformers
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="pkgym-trl-")
    tiny_lm.build(SRC, os.path.join(tmp, "tiny"))
    tok = AutoTokenizer.from_pretrained(os.path.join(tmp, "tiny"))
    model = AutoModelForCausalLM.from_pretrained(os.path.join(tmp, "tiny"))
    answers = [scripted("correct.cu", "Scaled in one loop."),
               scripted("wrong_rank.cu", "Used the rank.")]
    generated = {"calls": 0, "rows": 0, "prompts": []}

    def generate(prompt_ids, trainer):
        generated["prompts"].append([list(p) for p in prompt_ids])
        completion_ids, logprobs = trainer._generate_single_turn(prompt_ids, None, {}, 1)
        generated["calls"] += 1
        generated["rows"] += len(completion_ids)
        completion_ids = [list(c) for c in completion_ids]
        for i in range(len(completion_ids)):
            if i % G < 2:  # rows 0, 1 of each group: scripted; 2, 3: the model's own
                completion_ids[i] = tok(answers[i % 2])["input_ids"] + [tok.eos_token_id]
        return completion_ids, logprobs

    received = []

    def recording_reward(completions=None, **kwargs):
        rewards = pkgym_reward(completions=completions, **kwargs)
        received.extend(zip(kwargs["pkgym_episode"], kwargs["pkgym_turn"], rewards))
        return rewards

    recording_reward.__name__ = "pkgym_reward"
    srv = Server()
    rollout = PkgymRollout(srv.endpoint, max_turns=T, generate=generate, timeout_s=300)
    try:
        dataset = rollout.dataset([PROBLEM], repeat=8)
        first = len(hf_token_ids(tok, dataset[0]["prompt"]))
        rollout.max_prompt_tokens = first + 250  # the longest turns 2 must be cut to fit
        args = GRPOConfig(output_dir=os.path.join(tmp, "out"), num_generations=G,
                          per_device_train_batch_size=G, steps_per_generation=T, max_steps=2,
                          max_completion_length=24, learning_rate=1e-3, logging_steps=1,
                          report_to=[], save_strategy="no", use_cpu=True, bf16=False,
                          seed=0, dataloader_num_workers=0)
        trainer = GRPOTrainer(model=model, processing_class=tok, reward_funcs=recording_reward,
                              args=args, train_dataset=dataset, rollout_func=rollout)
        trainer.train()
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        rows = rollout.last_rollout
        c = srv.client(timeout_s=60)
        expect(c.stats()["episodes_open"] == 0, "the rollout closed its episodes")
        store = {}
        episodes = sorted({r["pkgym_episode"] for r in rows})
        for ep in episodes:
            t = c.trajectory(ep)  # closed: answered from the trajectory store
            expect(t["done"] and not t["in_flight"] and len(t["turns"]) == T, f"episode {ep}")
            for turn, ret in enumerate(t["returns"], 1):
                store[(ep, turn)] = ret
            statuses = [x["status"] for x in t["turns"]]
            groups = {t["group"]}
        c.close()
    except Exception:
        print(srv.output()[-5000:])
        raise
    finally:
        rollout.close()
        rc = srv.stop()
        srv.cleanup()
    expect(rc == 0, f"server exit code {rc}")
    elapsed = time.monotonic() - t0

    expect(trainer.state.global_step == 2 and len(losses) == 2, f"2 steps, losses {losses}")
    expect(all(math.isfinite(x) for x in losses), f"finite losses {losses}")
    expect(generated["calls"] == T and generated["rows"] == G * T, f"generation {generated}")
    expect(len(rows) == G * T and len(episodes) == G, f"{len(rows)} rows, {len(episodes)} episodes")
    # Turn 1: the server's first messages; turn 2: its observation after turn 1, fitted exactly.
    budget = rollout.max_prompt_tokens
    turn1, turn2 = generated["prompts"]
    expect(all(p == turn1[0] for p in turn1) and len(turn1[0]) == first, "turn 1 prompts")
    for p in turn2:
        text = tok.decode(p)
        expect(len(p) <= budget, f"a turn-2 prompt of {len(p)} tokens, budget {budget}")
        expect("Result of attempt 1:" in text or "(1 earlier attempts omitted" in text,
               f"turn 2 is the server's observation: {text[-300:]}")
    cut = [p for p in turn2 if "characters omitted to fit the context" in tok.decode(p)]
    expect(cut, "the budget cut a turn-2 prompt")
    expect(all("Result of attempt 1:" in tok.decode(p) and len(p) > budget - 40 for p in cut),
           "a cut prompt keeps the feedback and fills the budget, not far under it")
    # Row layout: group k of the block is turn k+1 of the G episodes of one pkgym group.
    for k in range(T):
        grp = rows[k * G:(k + 1) * G]
        expect({r["pkgym_turn"] for r in grp} == {k + 1}, f"group {k} turns")
        expect(sorted(r["pkgym_episode"] for r in grp) == episodes, f"group {k} episodes")
    expect(len({r["pkgym_group"] for r in rows}) == 1, "one pkgym group")
    expect(len(groups) == 1 and groups == {rows[0]["pkgym_group"]}, "the store has the label")
    # The trainer received the store's returns, one per (episode, turn), all of them.
    expect(len(received) == G * T, f"{len(received)} rewards received")
    for ep, turn, reward in received:
        expect(abs(store[(ep, turn)] - reward) < 1e-9,
               f"{ep} turn {turn}: trainer got {reward}, store has {store[(ep, turn)]}")
    expect(sorted((e, t) for e, t, _ in received) == sorted(store), "every turn, once")
    expect(len({round(r, 9) for _, _, r in received}) > 1, "rewards differ within the groups")
    status = {r["pkgym_status"] for r in rows}
    expect({"correct", "incorrect"} <= status, f"statuses {status}")
    # The trainer's reward metric is the mean of what it received.
    logged = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    mean = sum(r for _, _, r in received) / len(received)
    expect(logged and abs(logged[0] - mean) < 1e-4, f"logged reward {logged} vs {mean}")
    print(f"trl {trl.__version__}, transformers {transformers.__version__}, "
          f"torch {torch.__version__}: 2 GRPO steps, losses {losses}, rewards "
          f"{sorted(r for _, _, r in received)}, statuses {sorted(status)}; {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
