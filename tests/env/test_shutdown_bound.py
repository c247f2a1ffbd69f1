#!/usr/bin/env python3
"""Issue 27, finding 8: a server stops within a bound of SIGTERM whatever its candidates do.

A step runs a candidate whose rank 1 spins (selftest/scale, hang_rank1.cu) with the longest
run timeout a client may ask for (options.check.run_timeout_ms); the server gets SIGTERM while
it runs, with a 1 s grace. A running stage is not interrupted by the grace, so before the fix
the server stayed up until that run timeout (an hour); now it exits at the grace plus the
shutdown slack (10 s) with status 3, saying why.

It also plays the other half of finding 8: a server that dies without cleaning up (here the
bound's exit, as SIGKILL would) leaves its job directory, model code in it, under
$TMPDIR/pkgym-jobs; the next start removes it, and keeps the directory of a live process (this
test holds the owner lock of a planted one)."""
import fcntl
import glob
import os
import shutil
import signal
import sys
import tempfile
import time

import msgpack

from pkserver import SRC, Server

GRACE_MS = 1000
SLACK_S = 10
BOUND_S = GRACE_MS / 1000 + SLACK_S + 20  # generous: a loaded machine is slow to exit


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    path = os.path.join(SRC, "problems", "selftest", "scale", "solutions", "hang_rank1.cu")
    with open(path) as f:
        code = f.read()
    action = f"```cuda\n{code}\n```\n"
    tmpdir = tempfile.mkdtemp(prefix="pkgym-bound-")
    os.environ["TMPDIR"] = tmpdir  # the servers' job root: $TMPDIR/pkgym-jobs
    jobs = os.path.join(tmpdir, "pkgym-jobs")
    srv = Server("--compile-workers", "1", "--gpus", "none", "--shutdown-grace-ms",
                 str(GRACE_MS))
    try:
        c = srv.client()
        ep = c.call("reset", problem="selftest/scale", max_turns=2,
                    options={"check": {"trials": 1, "skip_timing": True,
                                       "run_timeout_ms": 3600000}})["episode"]
        sock = srv.socket()
        sock.send_multipart([b"", msgpack.packb({"op": "step", "id": 1, "episode": ep,
                                                 "action": action})])
        deadline = time.time() + 120
        while c.call("stats")["jobs"]["running"] != 1:
            expect(time.time() < deadline, "the hanging step never started running")
            time.sleep(0.05)
        t_sig = time.time()
        srv.proc.send_signal(signal.SIGTERM)
        try:
            srv.proc.wait(BOUND_S)
        except Exception:
            raise AssertionError(f"still up {BOUND_S} s after SIGTERM:\n{srv.output()}")
        took = time.time() - t_sig
        log = srv.output()
        print(f"stopped {took:.1f} s after SIGTERM, exit {srv.proc.returncode}")
        expect(srv.proc.returncode == 3, f"exit {srv.proc.returncode}:\n{log}")
        expect("exiting now" in log, log)
        expect(took >= GRACE_MS / 1000 + SLACK_S - 1, f"exited after {took:.1f} s only")
        sock.close(0)
        c.close()
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
        srv.ctx.destroy(0)
        srv.log.close()
    left = glob.glob(os.path.join(jobs, f"job-{srv.proc.pid}-*"))
    expect(left, f"no job directory left by the stopped server in {os.listdir(jobs)}")
    # A live process's job directory: it holds its owner lock, as a running server does.
    mine = os.path.join(jobs, f"job-{os.getpid()}-0-0000beef")
    os.mkdir(mine, 0o700)
    owner = open(os.path.join(jobs, f"job-{os.getpid()}.owner"), "w")
    fcntl.flock(owner, fcntl.LOCK_EX)
    # The same data directory: the episode is back, the dead server's jobs are gone.
    again = Server("--gpus", "none", data_dir=srv.data_dir)
    try:
        c = again.client()
        rep = c.call("stats")
        expect(rep["episodes_open"] >= 1, f"the episode was not restored: {rep}")
        gone = [d for d in left if os.path.exists(d)]
        expect(not gone, f"job directories of the dead server still there: {gone}")
        expect(os.path.isdir(mine), "the job directory of a live process was removed")
        expect("removed 1 job director" in again.output(), again.output())
        expect(again.stop() == 0, "the restarted server did not stop cleanly")
    finally:
        owner.close()
        again.cleanup()
        srv.cleanup()
        shutil.rmtree(tmpdir, ignore_errors=True)
    print("shutdown bound: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
