#!/usr/bin/env python3
"""Scale-out acceptance on the CPU (issue #15): a broker (`pkgym serve --gpus none
--worker-bind`) and 3 workers started by `mpirun -np 3` (scripts/scale-out) on localhost run a
64-episode selftest batch; one worker is SIGKILLed while it holds jobs. Every request gets
exactly one reply, no step fails, the lost jobs went to other workers, and every verdict
equals the verdict of a single-machine run (a plain `pkgym serve`) of the same code.

--curve (issue #19): the same through a broker whose worker endpoint uses CURVE
(`--worker-curve-allow`), with 32 episodes to keep CI short; the workers get their keys from
PKGYM_WORKER_CURVE_* through scripts/scale-out (which passes them on with mpirun's -x), and
every worker must join with the allowed key."""
import os
import shutil
import signal
import sys
import tempfile
import time

from scaleout import (ACTIONS, Batch, WorkerKeys, action_text, broker, free_port,
                      reference_verdicts, start_mpirun_workers, wait_workers)

CURVE = "--curve" in sys.argv[1:]
EPISODES = 32 if CURVE else 64


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    port = free_port()
    keydir = tempfile.mkdtemp(prefix="pk-scale-out-keys-")
    keys = WorkerKeys(keydir) if CURVE else None
    srv = broker(port, *(keys.serve_args if keys else []))
    mpirun = log = None
    killed = {}
    try:
        c = srv.client(timeout_s=30)
        mpirun, log = start_mpirun_workers(3, port, os.path.join(srv.tmp, "workers"),
                                           os.path.join(srv.tmp, "workers.log"),
                                           keys.env if keys else None)
        workers = wait_workers(c, 3)
        if keys:
            want = WorkerKeys.public(keys.worker_pub)
            expect(c.stats()["broker"]["curve"], "the broker says its worker endpoint uses CURVE")
            expect(all(w["curve_key"] == want for w in workers),
                   f"every worker joined with the allowed key {want}: "
                   f"{[w['curve_key'] for w in workers]}")
            expect("(CURVE)" in srv.output(), "the worker endpoint was bound with CURVE")
        expect(sorted(w["launcher"]["kind"] for w in workers) == ["mpirun"] * 3,
               f"launchers {[w['launcher'] for w in workers]}")
        expect(sorted(w["launcher"]["local_rank"] for w in workers) == [0, 1, 2], "local ranks")
        for w in workers:
            expect(w["gpus"] == [] and w["capacity"]["host_slots"] >= 1,
                   f"a CPU worker announces host capacity: {w['capacity']}")

        def kill_one(batch):
            if killed or batch.steps_done() < 6:
                return
            live = [w for w in c.stats()["workers"] if "departed_at" not in w]
            busy = max(live, key=lambda w: w["jobs_in_flight"])
            if busy["jobs_in_flight"] > 0:
                os.kill(busy["pid"], signal.SIGKILL)
                killed.update(busy)

        plans = []
        for i in range(EPISODES):
            problem, solution = ACTIONS[i % len(ACTIONS)]
            plans.append((problem, [action_text(problem, solution)]))
        t0 = time.time()
        batch = Batch(srv.endpoint, srv.ctx)
        episodes, open_ids = batch.run(plans, timeout_s=240, on_progress=kill_one)
        wall = time.time() - t0
        time.sleep(1.5)  # a duplicate reply would arrive now
        while batch.recv(200) is not None:
            pass
        expect(not open_ids, f"{len(open_ids)} requests unanswered after 240 s")
        expect(killed, "no worker held a job when the kill was due")
        expect(not batch.duplicates(), f"requests answered twice: {batch.duplicates()}")
        expect(not batch.unanswered(), f"requests never answered: {batch.unanswered()}")
        expect(not batch.errors, f"error replies: {batch.errors[:5]}")
        st = c.stats()
        b = st["broker"]
        expect(b["workers_lost"] >= 1, f"the broker did not count the killed worker: {b}")
        expect(b["requeued"] >= 1, f"no job went to another worker: {b}")
        expect(b["lost_twice"] == 0 and b["no_worker"] == 0, f"jobs failed: {b}")
        lost = [w for w in st["workers"] if w.get("departed_at")]
        expect(any(w["name"] == killed["name"] and w["state"] == "lost" for w in lost),
               f"stats do not show {killed['name']} as lost: {lost}")

        ref = reference_verdicts(sorted(set(ACTIONS)))
        mismatches = []
        for i, (problem, solution) in enumerate(ACTIONS[i % len(ACTIONS)] for i in range(EPISODES)):
            got = batch.results[i][0]["info"]["status"]
            if got != ref[(problem, solution)]:
                mismatches.append((i, problem, solution, got, ref[(problem, solution)]))
        expect(not mismatches, f"verdicts differ from the single-machine run: {mismatches}")
        batch.close()
        print(f"scale-out{' (CURVE)' if CURVE else ''}: {EPISODES} episodes through 3 mpirun "
              f"workers in {wall:.1f} s; "
              f"killed {killed['name']} holding {killed['jobs_in_flight']} job(s); "
              f"requeued {b['requeued']}, stale results {b['stale_results']}; "
              f"verdicts match the single-machine run ({sorted(set(ref.values()))})")
    except Exception:
        print(srv.output())
        if log:
            log.flush()
            print(open(log.name).read())
        raise
    finally:
        if mpirun and mpirun.poll() is None:
            mpirun.send_signal(signal.SIGTERM)
            try:
                mpirun.wait(30)
            except Exception:
                os.killpg(mpirun.pid, signal.SIGKILL)
                mpirun.wait()
        wlog = ""
        if log:
            log.close()
            wlog = open(log.name).read()
        rc = srv.stop()
        srv.cleanup()
        shutil.rmtree(keydir, ignore_errors=True)
    expect(rc == 0, f"server exit code {rc}")
    # The two workers left must have stopped cleanly (under ASan: no leak, no error report).
    stopped = wlog.count("stopped:")
    bad = [m for m in ("AddressSanitizer", "LeakSanitizer", "runtime error:") if m in wlog]
    expect(stopped == 2 and not bad, f"workers: {stopped} stopped cleanly, reports {bad}:\n{wlog}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
