#!/usr/bin/env python3
"""The broker's reliability and placement rules (issue #15), driven by scripted workers
(fakeworker.py) so that each case happens on purpose:
  - a worker lost mid-job: the job goes to another worker once, and its late result is
    discarded (the step is answered once, with the second worker's verdict);
  - lost on two workers: the step fails with `internal`, naming both;
  - a worker that returns after being counted lost is told to start a new session and is not
    sent the old job; a duplicated result is discarded;
  - a worker that lacks the problem, or has another version of it, gets no job, and the
    client gets `internal` saying which worker lacks what; a worker's own missing_problem
    answer reaches the client too;
  - a 2-GPU job goes only to a worker with 2 GPUs in one NVLink domain; an episode's turns
    stay on one GPU model while a worker of it is connected; a baseline measured on one GPU
    model is sent with later jobs to workers of that model only;
  - `pkgym eval` through the broker reports speedups per GPU model;
  - without --gpus none the server also evaluates on its own host (the in-process worker)."""
import sys
import time

import msgpack

from fakeworker import FakeWorker, problem_version
from pkserver import Server, running
from scaleout import action_text, free_port

HB = 100  # ms: the broker counts a worker lost after 4 silent heartbeats (400 ms)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


class Client:
    def __init__(self, srv):
        self.srv = srv
        self.sock = srv.socket()
        self.next_id = 1
        self.counts = {}

    def send(self, **fields):
        rid = self.next_id
        self.next_id += 1
        self.counts[rid] = 0
        self.sock.send_multipart([b"", msgpack.packb(dict(fields, id=rid))])
        return rid

    def wait(self, rid, timeout_s=20):
        deadline = time.time() + timeout_s
        found = None
        while time.time() < deadline:
            if not self.sock.poll(100):
                if found is not None:
                    return found
                continue
            rep = msgpack.unpackb(self.sock.recv_multipart()[-1], raw=False)
            self.counts[rep["id"]] = self.counts.get(rep["id"], 0) + 1
            if rep["id"] == rid:
                found = rep
        if found is None:
            raise AssertionError(f"no reply to request {rid}")
        return found

    def call(self, **fields):
        return self.wait(self.send(**fields))

    def episode(self, problem="selftest/scale"):
        rep = self.call(op="reset", problem=problem, max_turns=4)
        expect(rep["ok"], f"reset: {rep}")
        return rep["episode"]

    def step(self, ep, problem="selftest/scale", solution="wrong_rank.cu"):
        return self.send(op="step", episode=ep, action=action_text(problem, solution))

    def stats(self):
        return self.call(op="stats")

    def no_duplicates(self):
        dup = {k: v for k, v in self.counts.items() if v > 1}
        expect(not dup, f"answered twice: {dup}")


def start(*extra):
    port = free_port()
    srv = Server("--gpus", "none", "--worker-bind", f"tcp://127.0.0.1:{port}",
                 "--worker-heartbeat-ms", str(HB), "--worker-liveness", "4", *extra)
    return srv, f"tcp://127.0.0.1:{port}"


def wait_for(cond, what, timeout_s=10):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def live_workers(c):
    return [w["name"] for w in c.stats()["workers"] if "departed_at" not in w]


def case_requeue_and_stale(srv, ep_url):
    c = Client(srv)
    a = FakeWorker(srv.ctx, ep_url, "A", max_jobs=1)
    wait_for(lambda: live_workers(c) == ["A"], "A joined")
    ep = c.episode()
    rid = c.step(ep)
    job = a.next_job()
    expect(job["attempt"] == 1 and job["problem"] == "selftest/scale", f"job {job}")
    expect(job["version"] == problem_version("selftest/scale"), "problem version on the wire")
    a.silent = True  # lost mid-job
    wait_for(lambda: "A" not in live_workers(c), "A counted lost")
    b = FakeWorker(srv.ctx, ep_url, "B", max_jobs=1)
    job2 = b.next_job()
    expect(job2["id"] == job["id"] and job2["attempt"] == 2, f"requeued job {job2}")
    # A wakes up and sends its result: the broker believes A dead and discards it.
    a.silent = False
    a.result(job, status="correct", reason="stale, from A")
    wait_for(lambda: a.byes >= 1, "A told to start a new session")
    b.result(job2, status="incorrect", reason="from B")
    rep = c.wait(rid)
    expect(rep["ok"] and rep["info"]["status"] == "incorrect" and
           rep["info"]["reason"] == "from B", f"the step took B's verdict: {rep}")
    st = c.stats()["broker"]
    expect(st["stale_results"] >= 1 and st["requeued"] == 1, f"broker stats {st}")
    # A returns as a new session: it is not sent the old job.
    a.reconnect()
    wait_for(lambda: "A" in live_workers(c), "A back")
    a.no_job(0.5)
    # A duplicated result from B is discarded; the step was answered once.
    b.result(job2, status="correct", reason="duplicate")
    time.sleep(0.3)
    expect(c.stats()["broker"]["stale_results"] >= 2, "the duplicate was not discarded")
    # The episode goes on: its next step runs on a live worker.
    rid = c.step(ep)
    worker = None
    deadline = time.time() + 10
    while worker is None and time.time() < deadline:
        for w in (a, b):
            if not w.jobs.empty():
                worker = w
        time.sleep(0.05)
    expect(worker is not None, "the next step reached no worker")
    job3 = worker.next_job()
    expect(job3["id"] != job["id"] and job3["attempt"] == 1, f"a fresh job: {job3}")
    worker.result(job3, status="incorrect", reason="turn 2")
    rep = c.wait(rid)
    expect(rep["ok"] and rep["info"]["turn"] == 2, f"turn 2: {rep}")
    c.no_duplicates()
    for w in (a, b):
        w.stop()
    print("requeue: lost job went to B once, A's late result and B's duplicate discarded, "
          "returning A got no stale job")


def case_lost_twice(srv, ep_url):
    c = Client(srv)
    a = FakeWorker(srv.ctx, ep_url, "C", max_jobs=1)
    wait_for(lambda: "C" in live_workers(c), "C joined")
    ep = c.episode()
    rid = c.step(ep)
    a.next_job()
    a.silent = True
    b = FakeWorker(srv.ctx, ep_url, "D", max_jobs=1)
    job = b.next_job()
    expect(job["attempt"] == 2, f"second attempt {job}")
    b.silent = True
    rep = c.wait(rid, timeout_s=20)
    msg = rep.get("error", {}).get("message", "")
    expect(not rep["ok"] and rep["error"]["code"] == "internal", f"reply {rep}")
    expect("lost twice" in msg and "worker C" in msg and "worker D" in msg, msg)
    expect(c.stats()["broker"]["lost_twice"] == 1, "lost_twice counter")
    # No turn was recorded: the same action may be sent again.
    traj = c.call(op="trajectory", episode=ep)
    expect(traj["ok"] and traj["turns"] == [] and not traj["in_flight"], f"trajectory {traj}")
    c.no_duplicates()
    a.stop()
    b.stop()
    print(f"lost twice: internal: {msg[:100]}...")


def case_missing_problem(srv, ep_url):
    c = Client(srv)
    old = problem_version("selftest/scale")[::-1]
    a = FakeWorker(srv.ctx, ep_url, "E", problems=[["selftest/allreduce", "0" * 16]])
    b = FakeWorker(srv.ctx, ep_url, "F", problems=[["selftest/scale", old]])
    wait_for(lambda: {"E", "F"} <= set(live_workers(c)), "E and F joined")
    ep = c.episode()
    rep = c.wait(c.step(ep), timeout_s=20)
    msg = rep.get("error", {}).get("message", "")
    expect(not rep["ok"] and rep["error"]["code"] == "internal", f"reply {rep}")
    expect("E lacks the problem" in msg and f"F has version {old}" in msg, msg)
    a.no_job(0.1)
    b.no_job(0.1)
    # A worker that announced the problem but cannot run it says so; the client sees why.
    g = FakeWorker(srv.ctx, ep_url, "G")
    rid = c.step(ep)
    job = g.next_job()
    g.result(job, code="missing_problem", message="worker G lacks the module of problem "
             "'selftest/scale': module /x/pkprob_selftest_scale.so is not built")
    rep = c.wait(rid)
    expect(not rep["ok"] and "lacks the module" in rep["error"]["message"], f"reply {rep}")
    c.no_duplicates()
    for w in (a, b, g):
        w.stop()
    print(f"missing problem: {msg[:120]}...")


def case_placement_and_baselines(srv, ep_url):
    c = Client(srv)
    one = FakeWorker(srv.ctx, ep_url, "one-gpu-per-domain", gpus=2, max_world=1,
                     gpu_model="NVIDIA H200")
    two = FakeWorker(srv.ctx, ep_url, "h200x2", gpus=2, gpu_model="NVIDIA H200")
    wait_for(lambda: {"one-gpu-per-domain", "h200x2"} <= set(live_workers(c)), "GPU workers")
    problem = "collectives/allreduce"
    ep = c.episode(problem)
    rid = c.step(ep, problem, "correct.cu")
    job = two.next_job()
    one.no_job(0.2)
    expect(job["opts"]["baseline_us"] == 0, "no baseline cached yet")
    base = {"device": "NVIDIA H200", "driver": "fake", "nccl": "1", "world": 2, "us": 50.0}
    two.result(job, status="incorrect", reason="measured", baseline=base)
    expect(c.wait(rid)["ok"], "step 1")
    rid = c.step(ep, problem, "correct.cu")
    job = two.next_job()
    one.no_job(0.2)
    expect(job["opts"]["baseline_us"] == 50.0 and job["baseline"]["device"] == "NVIDIA H200",
           f"the H200 baseline goes with the next H200 job: {job['opts']} {job['baseline']}")
    two.result(job, status="incorrect", reason="second")
    rep = c.wait(rid)
    expect(rep["ok"] and rep["info"]["gpu"] == "NVIDIA H200", f"step 2 and its GPU: {rep}")
    # An H100 worker joins (idle, first in line): the episode's turns stay on the H200.
    other = FakeWorker(srv.ctx, ep_url, "h100x2", gpus=2, gpu_model="NVIDIA H100")
    wait_for(lambda: "h100x2" in live_workers(c), "h100x2 joined")
    rid = c.step(ep, problem, "correct.cu")
    job = two.next_job()
    other.no_job(0.2)
    two.result(job, status="incorrect", reason="third")
    expect(c.wait(rid)["ok"], "step 3")
    # With no H200 left, the episode goes on on the H100, and no H200 baseline goes with it.
    two.stop()
    wait_for(lambda: "h200x2" not in live_workers(c), "h200x2 gone")
    rid = c.step(ep, problem, "correct.cu")
    job = other.next_job()
    expect(job["opts"]["baseline_us"] == 0, f"no H200 baseline for an H100: {job['opts']}")
    other.result(job, status="incorrect", reason="h100")
    rep = c.wait(rid)
    expect(rep["ok"] and rep["info"]["gpu"] == "NVIDIA H100", f"step 4: {rep}")
    c.no_duplicates()
    one.stop()
    other.stop()
    print("placement: 2-GPU job only to 2 GPUs in one NVLink domain; an episode keeps its GPU "
          "model; baselines per GPU model")


def case_report_per_gpu_model(srv, ep_url):
    """`pkgym eval` through the broker with two GPU models: each trajectory stays on one model,
    and the report gives the speedups per model and warns that the run mixed them."""
    import json
    import os
    import subprocess
    import tempfile
    c = Client(srv)
    x = FakeWorker(srv.ctx, ep_url, "x", gpus=2, gpu_model="GPU-X", auto=("correct", 1.5),
                   max_jobs=64)
    y = FakeWorker(srv.ctx, ep_url, "y", gpus=2, gpu_model="GPU-Y", auto=("correct", 3.0),
                   max_jobs=64)
    wait_for(lambda: {"x", "y"} <= set(live_workers(c)), "x and y joined")
    tmp = tempfile.mkdtemp(prefix="pk-eval-models-")
    replay = os.path.join(tmp, "replay", "collectives", "allreduce")
    os.makedirs(replay)
    for k in (1, 2, 3):
        with open(os.path.join(replay, f"turn{k}.md"), "w") as f:
            f.write(action_text("selftest/allreduce", "correct.cu"))
    out = os.path.join(tmp, "out")
    p = subprocess.run([os.environ["PKGYM"], "eval", "--server", srv.endpoint, "--policy",
                        "replay:" + os.path.join(tmp, "replay"), "--problems",
                        "collectives/allreduce", "-G", "8", "-T", "3", "--out", out, "--quiet"],
                       capture_output=True, text=True, timeout=120)
    expect(p.returncode == 0, f"pkgym eval: {p.returncode} {p.stderr[-2000:]}")
    report = json.load(open(os.path.join(out, "report.json")))
    models = report["gpu_models"]
    expect(set(models) == {"GPU-X", "GPU-Y"}, f"one model per trajectory: {models}")
    expect(models["GPU-X"]["trajectories"] + models["GPU-Y"]["trajectories"] == 8, f"{models}")
    expect(models["GPU-X"]["mean_best_speedup"] == 1.5 and
           models["GPU-Y"]["mean_best_speedup"] == 3.0, f"speedups per model: {models}")
    md = open(os.path.join(out, "report.md")).read()
    expect("several GPU models" in md and "| GPU-Y |" in md, md)
    x.stop()
    y.stop()
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"report: speedups per GPU model {json.dumps(models)}")


def case_in_process_worker():
    """Without --gpus none the server also runs a worker of its own (here on the CPUs): it
    shows in stats and evaluates a step for real."""
    port = free_port()
    srv = Server("--worker-bind", f"tcp://127.0.0.1:{port}", "--worker-heartbeat-ms", str(HB))
    with running(srv):
        c = Client(srv)
        wait_for(lambda: "local" in live_workers(c), "the in-process worker", timeout_s=30)
        w = [w for w in c.stats()["workers"] if w["name"] == "local"][0]
        expect(w["capacity"]["host_slots"] >= 1 and w["launcher"]["kind"] == "none", f"{w}")
        ep = c.episode()
        rep = c.wait(c.step(ep, "selftest/scale", "correct.cu"), timeout_s=120)
        expect(rep["ok"] and rep["info"]["status"] == "correct", f"step: {rep}")
        expect(c.stats()["broker"]["completed"] == 1, "the step went through the broker")
    print("in-process worker: a server without --gpus none evaluates on its own host too")


def main():
    srv, ep_url = start("--worker-wait-s", "1")
    with running(srv):
        case_requeue_and_stale(srv, ep_url)
        case_lost_twice(srv, ep_url)
        case_missing_problem(srv, ep_url)
        case_placement_and_baselines(srv, ep_url)
        case_report_per_gpu_model(srv, ep_url)
    case_in_process_worker()
    return 0


if __name__ == "__main__":
    sys.exit(main())
