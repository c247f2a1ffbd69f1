#!/usr/bin/env python3
"""Every example command in the docs is a test (issue 17).

Sources: README.md, docs/*.md, rollout/README.md, rollout/python/README.md (their ```sh
blocks, backslash continuations joined, trailing "# comments" dropped), and the example
command in the docstring of each rollout/python/examples/*.py.

tests/docs/doc_commands.json says how each command is checked; a command added to or changed
in the docs fails this test until the table says how to check it, and a table entry whose
command is gone fails too. Checks:
- run:    run as written (sh -c) in a scratch directory laid out like the repository (build/,
          problems/, rollout/ are links), after the table's `setup` steps, with the table's
          declared substitutions only (an endpoint, smaller -G/-T); exit 0 and every `expect`
          string in its output or in the named file;
- gpu:    needs a GPU: run like `run` where /dev/nvidia0 exists, else only the option check;
- syntax: a script: it exists, is executable, and `bash -n` accepts it (the scripts install
          packages or build everything; CI runs them itself through .ci/run);
- ctest:  a ctest selection: run with -N, it must select at least one test;
- covered: a command a named ctest already runs (the test must exist);
- untested: a command no machine of ours can run (docker: no engine); the table says why, and
          the summary counts it, so it is never mistaken for a tested one.
Every pkgym command, and every inline `pkgym SUB ...` span of the same docs, is also checked
against `pkgym SUB --help`: each --option must exist. Synopsis blocks (``` blocks that start
with "pkgym SUB") must list exactly the options of the "usage:" lines of its --help."""
import ast
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SRC = os.environ["PK_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SRC, "tests", "env"))
from checks import check, failures  # noqa: E402

BUILD = os.environ["PK_BUILD_DIR"]
PKGYM = os.environ["PKGYM"]
PYTHON = os.environ.get("PK_PYTHON", "/usr/bin/python3")
TABLE = os.path.join(SRC, "tests", "docs", "doc_commands.json")
DOCS = (["README.md"] + sorted(os.path.relpath(p, SRC) for p in glob.glob(f"{SRC}/docs/*.md")) +
        ["rollout/README.md", "rollout/python/README.md"])
HAVE_GPU = os.path.exists("/dev/nvidia0")


def fenced_blocks(text):
    """(info string, [lines]) of every fenced block."""
    blocks, cur, info = [], None, None
    for line in text.split("\n"):
        m = re.match(r"^\s*```(\S*)\s*$", line)
        if m and cur is None:
            cur, info = [], m.group(1)
        elif m:
            blocks.append((info, cur))
            cur = None
        elif cur is not None:
            cur.append(line)
    return blocks


def join_lines(lines):
    out, acc = [], ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            acc += line.rstrip()[:-1].rstrip() + " "
            continue
        acc += line.strip() if acc else line.strip()
        out.append(acc)
        acc = ""
    return [re.sub(r"\s{2,}#.*$", "", c).strip() for c in out if c.strip()]


def doc_commands():
    """{command: "file:block"} from the docs' shell blocks and the examples' docstrings."""
    cmds = {}
    for rel in DOCS:
        for info, lines in fenced_blocks(open(os.path.join(SRC, rel)).read()):
            if info in ("sh", "bash", "shell", "console"):
                for c in join_lines(lines):
                    cmds.setdefault(re.sub(r"\s+", " ", c), rel)
    for path in sorted(glob.glob(f"{SRC}/rollout/python/examples/*.py")):
        doc = ast.get_docstring(ast.parse(open(path).read())) or ""
        lines = doc.split("\n")
        for i, line in enumerate(lines):
            if line.strip().startswith("python3 "):
                block = [line]
                while block[-1].rstrip().endswith("\\") and i + len(block) < len(lines):
                    block.append(lines[i + len(block)])
                for c in join_lines(block):
                    cmds.setdefault(re.sub(r"\s+", " ", c), os.path.relpath(path, SRC))
    return cmds


_help_cache = {}


def help_text(sub):
    if sub not in _help_cache:
        p = subprocess.run([PKGYM, *sub.split(), "--help"], capture_output=True, text=True,
                           timeout=30)
        _help_cache[sub] = p.stdout + p.stderr
    return _help_cache[sub]


def options(text):
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))


def check_options(cmd, where):
    """Every --option of every pkgym invocation in cmd exists in its --help."""
    for m in re.finditer(r"(?:^|[\s;&|(`])(?:build/env/)?pkgym\s+([a-z]+)([^;&|`]*)", cmd):
        sub, rest = m.group(1), m.group(2)
        if sub not in ("serve", "eval", "check", "problems", "reward", "export", "sandbox"):
            continue
        helped = options(help_text(sub))
        for opt in sorted(options(rest)):
            if opt == "--help":
                continue
            check(opt in helped, f"{where}: `pkgym {sub}` has no option {opt}: {cmd}")


def inline_spans():
    """Inline `pkgym ...` code spans of the docs (they may run over a line break)."""
    spans = []
    for rel in DOCS:
        text = open(os.path.join(SRC, rel)).read()
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        for m in re.finditer(r"`((?:build/env/)?pkgym [^`]+)`", text):
            spans.append((rel, re.sub(r"\s+", " ", m.group(1))))
    return spans


def synopses():
    """(file, subcommand, text) of the synopsis blocks: ``` blocks starting with pkgym SUB."""
    out = []
    for rel in DOCS:
        for info, lines in fenced_blocks(open(os.path.join(SRC, rel)).read()):
            if info == "" and lines and re.match(r"^pkgym [a-z]+", lines[0].strip()):
                out.append((rel, lines[0].split()[1], " ".join(lines)))
    return out


def usage_part(help_out):
    """The "usage:" lines of a --help text (up to the first blank line)."""
    part = []
    for line in help_out.split("\n"):
        if not line.strip() and part:
            break
        if part or line.startswith("usage:"):
            part.append(line)
    return "\n".join(part)


class Scratch:
    """A directory laid out like the repository, with a server when a command needs one."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="pk-doc-commands-")
        os.symlink(BUILD, os.path.join(self.dir, "build"))
        for d in ("problems", "rollout", "scripts"):
            os.symlink(os.path.join(SRC, d), os.path.join(self.dir, d))
        self.server = None
        self.endpoint = f"ipc://{self.dir}/serve.sock"

    def start_server(self):
        if self.server:
            return
        self.log = open(os.path.join(self.dir, "serve.log"), "w")
        # The default --data-dir (./pkgym-data) in the scratch dir: where the docs look.
        self.server = subprocess.Popen([PKGYM, "serve", "--bind", self.endpoint, "--gpus", "none",
                                        "--compile-workers", "1"], cwd=self.dir,
                                       stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(100):
            if os.path.exists(f"{self.dir}/serve.sock"):
                return
            time.sleep(0.1)

    def write(self, name, text, mode=0o644):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)

    def close(self):
        if self.server:
            self.server.terminate()
            check(self.server.wait(60) == 0, "the scratch server exits 0")
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


POLICY = """#!/usr/bin/env python3
# A stand-in policy: answers each turn with the problem's solutions/correct.cu.
import json, os, sys
obs = json.load(sys.stdin)
suite, name = obs["problem"].split("/")
print("```cuda\\n" + open(os.path.join("problems", suite, name, "solutions",
                                        "correct.cu")).read() + "\\n```")
"""


def setup(scratch, steps):
    for step in steps:
        if step == "server":
            scratch.start_server()
        elif step == "policy":
            scratch.write("my_policy", POLICY, 0o755)
        elif step == "ablation":
            # The shape users copy from info.settings (pkgym reward --config takes it).
            scratch.write("ablation.json", json.dumps({"reward": {"gamma": 0.8, "mode": "max"}}))
        elif step == "kernel":
            shutil.copy(os.path.join(SRC, "problems/collectives/allreduce/solutions/correct.cu"),
                        os.path.join(scratch.dir, "my_kernel.cu"))
        else:
            check(False, f"unknown setup step {step}")


def run_entry(scratch, cmd, entry):
    setup(scratch, entry.get("setup", []))
    run = cmd
    for old, new in entry.get("subst", {}).items():
        check(old in run, f"substitution '{old}' not in: {cmd}")
        run = run.replace(old, new.replace("{endpoint}", scratch.endpoint))
    # `python3` is the Python the tests use (Debian's, with python3-zmq and python3-msgpack).
    env = dict(os.environ, PATH=os.path.dirname(PYTHON) + os.pathsep + os.environ["PATH"])
    p = subprocess.run(["sh", "-c", run], cwd=scratch.dir, capture_output=True, text=True,
                       timeout=entry.get("timeout", 300), env=env)
    out = p.stdout + p.stderr
    if not check(p.returncode == 0, f"`{run}` exited {p.returncode}:\n{out[-2000:]}"):
        return
    target = out
    if "file" in entry:
        path = os.path.join(scratch.dir, entry["file"])
        target = open(path).read() if os.path.exists(path) else ""
    for want in entry.get("expect", []):
        check(want in target, f"`{run}`: '{want}' not in its output")
    if "min_lines" in entry:
        check(len(target.splitlines()) >= entry["min_lines"],
              f"`{run}`: {len(target.splitlines())} lines, want >= {entry['min_lines']}")


def main():
    table = json.load(open(TABLE))["commands"]
    cmds = doc_commands()
    for cmd, where in cmds.items():
        check(cmd in table, f"{where}: a doc command the table does not cover (add it to "
              f"tests/docs/doc_commands.json): {cmd}")
    for cmd in table:
        check(cmd in cmds, f"doc_commands.json: no doc has this command any more: {cmd}")
    ctests = subprocess.run(["ctest", "--test-dir", BUILD, "-N"], capture_output=True,
                            text=True).stdout
    scratch = Scratch()
    counts = {}
    try:
        for cmd, where in cmds.items():  # in document order
            entry = table.get(cmd)
            if not entry:
                continue
            check_options(cmd, where)
            kind = entry["check"]
            counts[kind] = counts.get(kind, 0) + 1
            if kind == "run" or (kind == "gpu" and HAVE_GPU):
                run_entry(scratch, cmd, entry)
            elif kind == "gpu":
                counts["gpu (options only, no GPU here)"] = counts.pop("gpu") + counts.get(
                    "gpu (options only, no GPU here)", 0)
            elif kind == "syntax":
                path = os.path.join(SRC, cmd.split()[0])
                check(os.access(path, os.X_OK), f"{cmd}: {path} is not an executable file")
                p = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
                check(p.returncode == 0, f"{cmd}: bash -n: {p.stderr}")
                check(entry.get("why"), f"{cmd}: a syntax-only check says why")
            elif kind == "ctest":
                words = cmd.split()
                check(words[:3] == ["ctest", "--test-dir", "build"], f"ctest form: {cmd}")
                p = subprocess.run(["ctest", "--test-dir", BUILD, *words[3:], "-N"],
                                   capture_output=True, text=True)
                n = re.search(r"Total Tests: (\d+)", p.stdout)
                check(n and int(n.group(1)) > 0, f"`{cmd}` selects no test:\n{p.stdout}")
            elif kind == "untested":
                check(entry.get("why"), f"{cmd}: an untested command says why")
            elif kind == "covered":
                check(re.search(rf"Test\s+#\d+: {re.escape(entry['by'])}\n", ctests),
                      f"{cmd}: covered by ctest '{entry['by']}', which does not exist")
            else:
                check(False, f"unknown check '{kind}' for {cmd}")
    finally:
        scratch.close()
    for rel, span in inline_spans():
        check_options(span, f"{rel} (inline)")
    for rel, sub, text in synopses():
        doc_opts, help_opts = options(text), options(usage_part(help_text(sub)))
        check(doc_opts == help_opts, f"{rel}: the `pkgym {sub}` synopsis differs from --help: "
              f"only in the doc {sorted(doc_opts - help_opts)}, only in --help "
              f"{sorted(help_opts - doc_opts)}")
    print(f"doc commands: {len(cmds)} ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}); "
          f"{len(inline_spans())} inline spans, {len(synopses())} synopses:",
          "FAIL" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
