#!/usr/bin/python3
"""The hostile corpus: every program gets its expected verdict from `pkgym sandbox`, and the host
is unchanged afterwards (no survivors, mounts, temp dirs, cgroups or files outside the work dir).

Env: SB_CLI (the sandbox CLI), SB_HOSTILE_DIR (the corpus binaries), PK_BUILD_DIR."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

CLI = os.environ["SB_CLI"]
HOSTILE = os.path.realpath(os.environ["SB_HOSTILE_DIR"])
CORPUS_DIRS = [HOSTILE]  # and the copy the unprivileged cases run from
BUILD = os.environ.get("PK_BUILD_DIR", os.getcwd())
NVCC = "/usr/local/cuda/bin/nvcc"

failures = []
cli_pids = []


def fail(case, msg):
    failures.append(f"{case}: {msg}")
    print(f"FAIL {case}: {msg}", flush=True)


PREEXEC = None  # run in the CLI's process before its exec (stale_cgroups_of_a_dead_caller)


def sandbox(args, cmd, env=None, timeout=120):
    p = subprocess.Popen([CLI] + args + ["--"] + cmd, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, preexec_fn=PREEXEC)
    cli_pids.append(p.pid)
    out, err = p.communicate(timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"CLI exited {p.returncode}: {err.decode(errors='replace')}")
    return json.loads(out)


def expect(case, v, status, **fields):
    ok = v["status"] == status
    for k, want in fields.items():
        ok = ok and v[k] == want
    shown = {k: v[k] for k in ("status", "exit_code", "signal", "wall_ms", "detail")}
    if not ok:
        fail(case, f"want status={status} {fields}, got {shown}; stdout={v['stdout'][:300]!r} "
             f"stderr={v['stderr'][:300]!r}")
    else:
        print(f"ok   {case}: {shown}", flush=True)
    return ok


def survivors():
    """Processes on the host running a corpus binary."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if any(exe.startswith(d + "/") for d in CORPUS_DIRS):
            found.append(f"{pid}:{exe}")
    return found


def beating(path):
    """True if the file at path is still being touched."""
    if not os.path.exists(path):
        return False
    before = os.stat(path).st_mtime_ns
    time.sleep(0.3)
    return os.path.exists(path) and os.stat(path).st_mtime_ns != before


def artifacts():
    """Every sandbox temp dir and cgroup on the host now, whoever made it."""
    found = set()
    for name in os.listdir("/tmp"):
        if name.startswith(("pk-sbroot-", "pk-sbwork-")):
            found.add("/tmp/" + name)
    for hier in ("memory", "pids", "cpuacct", "unified", ""):
        base = os.path.join("/sys/fs/cgroup", hier)
        for root, dirs, _ in os.walk(base):
            if root.count("/") > base.count("/") + 3:
                dirs[:] = []
                continue
            found.update(os.path.join(root, d) for d in dirs if d.startswith("pkgym-sb-"))
    return found


# What was there before the first job: not ours. A caller killed mid-job (env_scale_out and
# env_server_restart SIGKILL servers on purpose) leaves its roots and cgroups behind for good,
# named by its pid; pids are reused (pid_max 32768), so one of our CLI runs may well get the
# pid of such a dead caller. Only artifacts that appeared during this test and carry one of our
# CLIs' pids are ours.
PREEXISTING = artifacts()


def leftovers():
    """Our sandboxes' temp dirs, mounts and cgroups still present on the host."""
    def ours(path):
        name = os.path.basename(path)
        if path in PREEXISTING:
            return False
        if name.startswith("pkgym-sb-"):
            return any(name.startswith(f"pkgym-sb-{p}-") for p in cli_pids)
        return any(name.startswith((f"pk-sbroot-{p}-", f"pk-sbwork-{p}-")) for p in cli_pids)
    left = sorted(a for a in artifacts() if ours(a))
    with open("/proc/self/mountinfo") as f:
        left += [l.strip() for l in f if "pk-sbroot-" in l or "pk-sbwork-" in l]
    return left


def job_cgroup_dirs(pid):
    """Where the sandbox puts the cgroups of job 1 of process pid (sb_cgroup.c's layout)."""
    name = f"pkgym-sb-{pid}-1"
    own = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctls, path = line.rstrip("\n").split(":", 2)
            for c in ctls.split(",") if ctls else [""]:
                own[c] = (ctls, "" if path == "/" else path)
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return [f"/sys/fs/cgroup{own[''][1]}/{name}"] if "" in own else []
    dirs = []
    for c in ("memory", "pids", "cpuacct"):
        if c in own:
            mnt = f"/sys/fs/cgroup/{own[c][0]}"
            mnt = mnt if os.path.exists(mnt) else f"/sys/fs/cgroup/{c}"
            dirs.append(f"{mnt}{own[c][1]}/{name}")
    return dirs


def stale_cgroups_of_a_dead_caller(normal, run_bomb, top):
    """A caller killed mid-job leaves its cgroups (pkgym-sb-<pid>-<n>), and pids are reused:
    a process that gets such a pid must still run its jobs in cgroups of their own, with the same
    limits as ever (not without them), and leave the dead caller's alone. The CLI's one job is
    job 1; the stale directories are made in the CLI's own process, just before its exec."""
    made_list = os.path.join(top, "stale-cgroups")
    case = "memory_bomb (stale cgroups named like its own)"
    if not job_cgroup_dirs(os.getpid()):
        print(f"note: {case} not tested (no cgroup hierarchy)")
        return

    def plant():  # in the child, between fork and exec: same pid as the CLI
        with open(made_list, "w") as f:
            for d in job_cgroup_dirs(os.getpid()):
                try:
                    os.mkdir(d)
                    f.write(d + "\n")
                except OSError:
                    pass

    global PREEXEC
    PREEXEC = plant
    gone = []
    try:
        v = run_bomb(["--mem-mb", "64", "--wall-ms", "20000"])
    finally:
        PREEXEC = None
        with open(made_list) as f:
            planted = f.read().split()
        for d in planted:
            try:
                os.rmdir(d)  # still there, so the job left it alone
            except OSError as e:
                gone.append(f"{d}: {e}")
    if not planted:
        print(f"note: {case} not tested (cannot create cgroups here)")
        return
    if expect(case, v, normal["status"]) and v["limits"] != normal["limits"]:
        fail(case, f"limits {v['limits']!r}, without stale cgroups {normal['limits']!r}")
    for g in gone:
        fail(case, f"the stale cgroup {g}")


def main():
    if not os.path.exists(HOSTILE + "/segv"):
        print(f"corpus not built in {HOSTILE}", file=sys.stderr)
        return 1
    top = tempfile.mkdtemp(prefix="pk-hostile-test-")
    try:
        return run_corpus(top)
    finally:
        for d in [top] + CORPUS_DIRS[1:]:
            shutil.rmtree(d, ignore_errors=True)


def run_corpus(top):
    secret = os.path.join(top, "server-secret.txt")
    with open(secret, "w") as f:
        f.write("the reward seed: 1234\n")

    def wd(name):
        d = tempfile.mkdtemp(prefix=f"work-{name}-", dir=top)
        return d

    def run(name, args=(), extra=(), workdir=None, env=None):
        w = workdir or wd(name)
        return w, sandbox(["--ro", HOSTILE, "--workdir", w] + list(args),
                          [os.path.join(HOSTILE, name)] + list(extra), env=env)

    # Crashes and runaway resources.
    expect("segv", run("segv")[1], "signal", signal=11)
    expect("abort", run("abort")[1], "signal", signal=6)
    expect("exit137", run("exit137")[1], "exit", exit_code=137, signal=0)
    v = run("spin", ["--cpu-ms", "300", "--wall-ms", "20000"])[1]
    if expect("spin (cpu limit)", v, "timeout") and v["wall_ms"] > 5000:
        fail("spin (cpu limit)", f"took {v['wall_ms']} ms to stop")
    w, v = run("sleeper", ["--wall-ms", "300"], workdir=wd("sleeper-wall"))
    if expect("sleeper (wall limit)", v, "timeout") and not 250 <= v["wall_ms"] < 3000:
        fail("sleeper (wall limit)", f"wall_ms {v['wall_ms']} not near the 300 ms limit")
    for bomb in ("fork_bomb", "thread_bomb"):
        v = run(bomb, ["--pids", "32", "--wall-ms", "20000"])[1]
        if expect(bomb, v, "ok"):
            n = int(v["stdout"].split("=")[1].split()[0])
            if n >= 32:
                fail(bomb, f"{n} created under a pids limit of 32")
    v = run("memory_bomb", ["--mem-mb", "64", "--wall-ms", "20000"])[1]
    if "memory=cgroup" in v["limits"]:
        expect("memory_bomb", v, "memory")
    elif "memory=rlimit-as" in v["limits"]:
        expect("memory_bomb (RLIMIT_AS fallback: malloc refused)", v, "exit", exit_code=2)
    else:
        fail("memory_bomb", f"no memory limit applied: {v['limits']}")
    stale_cgroups_of_a_dead_caller(v, lambda args: run("memory_bomb", args)[1], top)
    v = run("stdout_flood", ["--output-cap", "65536", "--wall-ms", "60000"])[1]
    if expect("stdout_flood (10 GB)", v, "output_limit", truncated=True):
        if len(v["stdout"]) != 65536 or v["wall_ms"] > 20000:
            fail("stdout_flood", f"kept {len(v['stdout'])} bytes, took {v['wall_ms']} ms")
    w, v = run("huge_file", ["--fsize-mb", "8"])
    expect("huge_file", v, "output_limit")
    size = os.path.getsize(os.path.join(w, "huge.bin")) if os.path.exists(os.path.join(w, "huge.bin")) else 0
    if size > 8 << 20:
        fail("huge_file", f"file grew to {size} bytes past the 8 MiB limit")

    # Escape and tampering attempts.
    v = run("read_secrets", extra=["/etc/shadow", "/etc/hostname", secret,
                                    os.path.join(BUILD, "CMakeCache.txt"), "/root/.bashrc",
                                    "/proc/1/root/etc/shadow"])[1]
    expect("read_secrets", v, "ok")
    # (/tmp inside is private: writing there succeeds and is checked below, not here.)
    canaries = [os.path.join(BUILD, "tests", "pk-sandbox-canary"), "/usr/pk-sandbox-canary",
                "/pk-sandbox-canary", "/etc/pk-sandbox-canary", os.path.join(BUILD, "pk-canary")]
    # Inside, /tmp is a private tmpfs: a build tree under the host's /tmp (a CI clone) shows up
    # there as writable scratch, so for those paths only the host check below decides.
    refused = [c for c in canaries if not c.startswith("/tmp/")]
    v = run("write_outside", extra=refused)[1]
    expect("write_outside", v, "ok")
    if len(refused) < len(canaries):
        run("write_outside", extra=[c for c in canaries if c not in refused])
    for c in canaries:
        if os.path.exists(c):
            fail("write_outside", f"{c} exists on the host")
            os.unlink(c)
    tmp_canary = f"pk-sandbox-private-tmp-{os.getpid()}"
    v = sandbox(["--workdir", wd("private-tmp")],
                ["/bin/sh", "-c", f"echo x > /tmp/{tmp_canary} && echo y > /dev/shm/{tmp_canary}"])
    expect("private /tmp and /dev/shm", v, "ok")
    for d in ("/tmp", "/dev/shm"):
        if os.path.exists(os.path.join(d, tmp_canary)):
            fail("private /tmp and /dev/shm", f"{d}/{tmp_canary} reached the host")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    v = run("connect_host", extra=[str(listener.getsockname()[1])])[1]
    expect("connect_host", v, "ok")
    try:
        listener.accept()
        fail("connect_host", "the host listener accepted a connection")
    except BlockingIOError:
        pass
    listener.close()
    w, v = run("daemon")
    expect("daemon (double fork)", v, "ok")
    if beating(os.path.join(w, "heartbeat")):
        fail("daemon (double fork)", "the daemon outlived the job")
    w, v = run("setsid_ignore_term", ["--wall-ms", "500"])
    expect("setsid child ignoring SIGTERM", v, "timeout")
    if beating(os.path.join(w, "heartbeat")):
        fail("setsid child ignoring SIGTERM", "the child outlived the job")
    v = run("kill_parent")[1]
    if expect("kill_parent", v, "ok") and "still supervised" not in v["stdout"]:
        fail("kill_parent", "no report from the program")
    expect("ptrace_sibling", run("ptrace_sibling")[1], "ok")
    v = run("denied_syscalls")[1]
    expect("denied_syscalls", v, "ok")
    expect("view (pid/net namespaces, fds)", run("view")[1], "ok")
    w, v = run("setuid_file")
    expect("setuid_file", v, "ok")
    for name in os.listdir(w):
        if os.stat(os.path.join(w, name)).st_mode & 0o6000:
            fail("setuid_file", f"{name} is setuid/setgid on the host")

    # GPU nodes: none without --gpus; with a fake device dir, only the assigned one.
    v = run("gpu_nodes")[1]
    if expect("gpu_nodes (no GPU assigned)", v, "ok") and "present" in v["stdout"]:
        fail("gpu_nodes (no GPU assigned)", v["stdout"])
    fake = os.path.join(top, "fakedev")
    os.mkdir(fake)
    for n in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        open(os.path.join(fake, n), "w").close()
    # Capability nodes: cap1 like MIG config (0400, root only), cap2 like an instance (0444).
    os.mkdir(os.path.join(fake, "nvidia-caps"))
    for n, mode in (("nvidia-cap1", 0o400), ("nvidia-cap2", 0o444)):
        open(os.path.join(fake, "nvidia-caps", n), "w").close()
        os.chmod(os.path.join(fake, "nvidia-caps", n), mode)
    # The driver's list (fake): minors permuted against PCI order, and GPU 2's node missing.
    # GPU i is the i-th bus id in PCI order; its node is /dev/nvidia<its minor>.
    proc = os.path.join(top, "fakeproc")
    for bus, minor in (("0000:3A:00.0", 0), ("0000:18:00.0", 1), ("0000:5d:00.0", 3)):
        os.makedirs(os.path.join(proc, "gpus", bus))
        with open(os.path.join(proc, "gpus", bus, "information"), "w") as f:
            f.write(f"Model: \t\t NVIDIA H200\nGPU UUID: \t GPU-{bus.lower()}\n"
                    f"Bus Location: \t {bus}\nDevice Minor: \t {minor}\n")
    env = dict(os.environ, PKGYM_SANDBOX_DEVROOT=fake, PKGYM_DRIVER_PROC=proc)
    v = run("gpu_nodes", ["--gpus", "0"], env=env)[1]
    if expect("gpu_nodes (GPU 0, minor 1)", v, "ok"):
        lines = set(v["stdout"].splitlines())
        for want in ("present /dev/nvidia1", "absent /dev/nvidia0", "present /dev/nvidiactl",
                     "present /dev/nvidia-uvm", "absent /dev/nvidia-uvm-tools",
                     "absent /dev/nvidia-caps/nvidia-cap1", "present /dev/nvidia-caps/nvidia-cap2",
                     "visible GPU-0000:18:00.0"):
            if want not in lines:
                fail("gpu_nodes (GPU 0, minor 1)", f"missing '{want}' in {sorted(lines)}")
    v = run("gpu_nodes", ["--gpus", "1,0"], env=env)[1]
    if expect("gpu_nodes (GPUs 1,0)", v, "ok"):
        lines = set(v["stdout"].splitlines())
        for want in ("present /dev/nvidia0", "present /dev/nvidia1",
                     "visible GPU-0000:3a:00.0,GPU-0000:18:00.0"):
            if want not in lines:
                fail("gpu_nodes (GPUs 1,0)", f"missing '{want}' in {sorted(lines)}")
    v = run("gpu_nodes", ["--gpus", "2"], env=env)[1]
    if expect("gpu_nodes (GPU 2, node missing)", v, "setup_error") and "nvidia3" not in v["detail"]:
        fail("gpu_nodes (GPU 2, node missing)", v["detail"])
    v = run("gpu_nodes", ["--gpus", "5"], env=env)[1]
    expect("gpu_nodes (GPU 5 not on host)", v, "setup_error")
    v = run("gpu_nodes", ["--gpus", "0"], env=dict(env, PKGYM_DRIVER_PROC=top + "/nodriver"))[1]
    expect("gpu_nodes (no driver list)", v, "setup_error")

    # nvcc, given a file that includes a host file, must not find it.
    w = wd("nvcc")
    with open(os.path.join(w, "k.cu"), "w") as f:
        f.write('#include "/etc/passwd"\n#include "' + secret + '"\nint main() { return 0; }\n')
    v = sandbox(["--workdir", w, "--wall-ms", "60000"], [NVCC, "-c", "k.cu", "-o", "k.o"])
    with open("/etc/passwd") as f:
        host_line = f.readline().strip()
    if expect("nvcc #include \"/etc/passwd\"", v, "exit"):
        if "/etc/passwd" not in v["stderr"] or host_line in v["stderr"] or "1234" in v["stderr"]:
            fail("nvcc #include", f"unexpected compiler output: {v['stderr'][:400]!r}")
    v = sandbox(["--workdir", wd("missing")], ["/no/such/binary"])
    if expect("missing command", v, "setup_error") and "execve" not in v["detail"]:
        fail("missing command", v["detail"])

    # Unprivileged (as nobody), where the kernel lets users create user namespaces.
    setpriv = shutil.which("setpriv")
    nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"] if setpriv else []
    if os.geteuid() == 0 and setpriv and subprocess.run(
            nobody + ["unshare", "--user", "--map-root-user", "true"]).returncode == 0:
        # The checkout may sit where nobody cannot reach (a 0700 home directory): run from a
        # world-readable copy, as a user would install the CLI, not from the build tree.
        public = tempfile.mkdtemp(prefix="pk-hostile-public-")
        os.chmod(public, 0o755)
        CORPUS_DIRS.append(public)
        cli = os.path.join(public, "pk_sandbox_cli")
        shutil.copy2(CLI, cli)
        for name in ("view", "segv", "sleeper"):
            shutil.copy2(os.path.join(HOSTILE, name), os.path.join(public, name))
        for name, args, status in (("view", [], "ok"), ("segv", [], "signal"),
                                   ("sleeper", ["--wall-ms", "300"], "timeout")):
            # setpriv execs the CLI: same pid, so its leftovers are looked for too.
            p = subprocess.Popen(nobody + [cli, "--ro", public] + args + ["--", os.path.join(public, name)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            cli_pids.append(p.pid)
            out, err = p.communicate(timeout=60)
            v = json.loads(out) if p.returncode == 0 else {"status": f"CLI rc {p.returncode}",
                                                             "exit_code": 0, "signal": 0,
                                                             "wall_ms": 0, "detail": err,
                                                             "stdout": "", "stderr": ""}
            expect(f"unprivileged {name}", v, status)
    else:
        print("note: unprivileged runs not tested here (not root, no setpriv, or no user namespaces)")

    # The host is unchanged.
    time.sleep(0.2)
    for s in survivors():
        fail("host unchanged", f"survivor {s}")
    for l in leftovers():
        fail("host unchanged", f"left behind: {l}")
    with open(secret) as f:
        if f.read() != "the reward seed: 1234\n":
            fail("host unchanged", "the secret file changed")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
