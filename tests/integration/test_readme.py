#!/usr/bin/env python3
"""README quick starts, run as written: test_readme.py NAME... runs the README's blocks marked
`<!-- quickstart: NAME -->` against a live `pkgym serve`, swapping only the endpoint (and, for
trl, the model name for a tiny model built locally, and bf16 off: there is no GPU). Each block must exit 0 and leave what it
says it does: episodes in the trajectory store (python, gym, trl), a parquet file of rows that
name the problems (verl), an interaction config verl's registry loads (verl-config)."""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "env"))
from pkserver import SRC, Server, running  # noqa: E402

ENDPOINT = "tcp://127.0.0.1:5555"


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def blocks():
    with open(os.path.join(SRC, "README.md")) as f:
        text = f.read()
    found = re.findall(r"<!-- quickstart: ([\w-]+) -->\n```\w+\n(.*?)\n```", text, re.S)
    return dict(found)


def run_python(code, cwd, timeout=900):
    path = os.path.join(cwd, "quickstart.py")
    with open(path, "w") as f:
        f.write(code)
    env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "rollout", "python"))
    p = subprocess.run([sys.executable, path], cwd=cwd, capture_output=True, text=True,
                       timeout=timeout, env=env)
    print(p.stdout[-3000:])
    expect(p.returncode == 0, f"the quick start failed ({p.returncode}):\n{p.stderr[-5000:]}")
    return p.stdout


def main(names):
    qs = blocks()
    for name in names:
        expect(name in qs, f"no quick start '{name}' in README.md (found {sorted(qs)})")
    srv = Server()
    tmp = tempfile.mkdtemp(prefix="pkgym-readme-")
    with running(srv, 3000):
        for name in names:
            code = qs[name]
            expect(ENDPOINT in code, f"{name}: the block names no endpoint")
            code = code.replace(ENDPOINT, srv.endpoint)
            before = srv.client().stats()["requests"]["episodes_started"]
            if name == "trl":
                import tiny_lm
                model_dir = tiny_lm.build(SRC, os.path.join(tmp, "tiny"))
                expect('MODEL = "Qwen/Qwen3-0.6B"' in code, "trl: the model line changed")
                code = code.replace('"Qwen/Qwen3-0.6B"', repr(model_dir))
                # No GPU here: TRL's default bf16 needs one.
                expect("report_to=[]))" in code, "trl: the GRPOConfig line changed")
                code = code.replace("report_to=[]))", "report_to=[], use_cpu=True, bf16=False))")
            if name == "verl-config":
                from verl.interactions.utils.interaction_registry import \
                    initialize_interactions_from_config
                path = os.path.join(tmp, "interaction_config.yaml")
                with open(path, "w") as f:
                    f.write(code + "\n")
                imap = initialize_interactions_from_config(path)
                expect(type(imap["pkgym"]).__name__ == "PkgymInteraction" and
                       imap["pkgym"].endpoint == srv.endpoint, f"verl-config: {imap}")
                print(f"{name}: verl's registry loaded {type(imap['pkgym']).__name__}")
                continue
            out = run_python(code, tmp)
            started = srv.client().stats()["requests"]["episodes_started"] - before
            if name in ("python", "gym"):
                expect(started == 1, f"{name}: {started} episodes")
                expect(("returns [" in out) if name == "python" else
                       ("['feedback', 'messages', 'prompt', 'turn']" in out), f"{name}: {out}")
            elif name == "trl":
                expect(started == 4, f"trl: {started} episodes (2 steps: one group of 4 episodes x 2 turns)")
            elif name == "verl":
                import pandas as pd
                df = pd.read_parquet(os.path.join(tmp, "pkgym_train.parquet"))
                kw = [x["interaction_kwargs"]["problem"] for x in df["extra_info"]]
                expect(kw == ["selftest/scale", "selftest/allreduce"], f"verl rows {kw}")
            print(f"quick start {name}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
