#!/usr/bin/env python3
"""The table of bench/rollout/gpu-throughput.sh (issue #13), from the files it left in OUT.

usage: throughput_report.py OUT_DIR

Every row says what was measured, the target, the figure and whether it holds ("yes", "NO",
or "-" when there is no target). A section that did not run says so. Standard library only
(the GPU machine's Python has no extras)."""
import csv
import glob
import json
import os
import re
import statistics
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
rows = []


def row(what, target, measured, ok=None):
    verdict = "-" if ok is None else ("yes" if ok else "NO")
    rows.append("| %s | %s | %s | %s |" % (what, target, measured, verdict))


def path(*parts):
    return os.path.join(OUT, *parts)


def read(name):
    try:
        with open(path(name)) as f:
            return f.read()
    except OSError:
        return None


def load_json(name):
    text = read(name)
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def wall(name):
    text = read(name)
    try:
        return float(text) if text else None
    except ValueError:
        return None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec="%.1f"):
    return "n/a" if x is None else spec % x


# --- 1. start-up probe ---
def probe(files):
    steps, walls = {}, []
    for name in files:
        text = read(name) or ""
        for line in text.splitlines():
            if line.startswith("wall incl. fork+exit"):
                m = re.search(r"([\d.]+)", line[24:])
                if m:
                    walls.append(float(m.group(1)))
            elif len(line) > 24 and not line.startswith("step"):
                vals = [float(v) for v in line[24:].split() if re.match(r"^[\d.]+$", v)]
                if vals:
                    steps.setdefault(line[:24].strip(), []).extend(vals)
    return {k: med(v) for k, v in steps.items()}, med(walls)


def section_probe():
    td = sorted(glob.glob(path("probe-teardown-*.txt")))
    ex = sorted(glob.glob(path("probe-exit-*.txt")))
    if not td:
        row("start-up probe", "-", "not run")
        return
    steps, wall_td = probe([os.path.basename(f) for f in td])
    _, wall_ex = probe([os.path.basename(f) for f in ex])
    parts = ", ".join("%s %s" % (k, fmt(v, "%.0f")) for k, v in steps.items() if k != "total")
    row("start-up per rank, ms (median of %d runs x 2 ranks)" % len(td), "-", parts)
    ok = wall_ex < wall_td if wall_td and wall_ex else None
    row("process wall (fork to exit), with teardown vs exit without it, ms",
        "exit is faster", "%s vs %s" % (fmt(wall_td, "%.0f"), fmt(wall_ex, "%.0f")), ok)


# --- 2. single check ---
def checks(prefix):
    out = []
    for f in sorted(glob.glob(path(prefix + "-*.json"))):
        name = os.path.basename(f)[:-5]
        out.append((name, load_json(name + ".json"), wall(name + ".wall")))
    return out


def section_single():
    fast, td = checks("check-fast"), checks("check-teardown")
    if not fast:
        row("single pkgym check", "<= 3.0 s", "not run")
        return
    w_fast = med([w for _, _, w in fast])
    w_td = med([w for _, _, w in td])
    st = [r["status"] for _, r, _ in fast if r] + [r["status"] for _, r, _ in td if r]
    stages = [r["stages"] for _, r, _ in fast if r]
    detail = ""
    if stages:
        detail = " (compile %s, run after go %s, of which set-up %s; statuses %s)" % (
            fmt(med([s["compile_ms"] for s in stages]) / 1000, "%.2f s"),
            fmt(med([s["run_ms"] for s in stages]) / 1000, "%.2f s"),
            fmt(med([s["run_setup_ms"] for s in stages]) / 1000, "%.2f s"), ",".join(st))
    row("one `pkgym check` of the all-reduce, wall (median of %d)" % len(fast), "<= 3.0 s",
        fmt(w_fast, "%.2f s") + detail, w_fast is not None and w_fast <= 3.0)
    if td:
        tds = [r["stages"].get("run_teardown_ms", 0) for _, r, _ in td if r]
        row("... with the old teardown (PKGYM_RUNNER_TEARDOWN=1), median of %d" % len(td),
            "slower than fast exit", "%s (teardown %s ms)" % (fmt(w_td, "%.2f s"),
                                                          fmt(med(tds), "%.0f")),
            w_td is not None and w_fast is not None and w_fast <= w_td)


# --- 3. batch ---
def batch_rows(name):
    text = read(name + ".log") or ""
    header, out = None, {}
    for line in text.splitlines():
        if line.startswith("| phase |"):
            header = [c.strip() for c in line.strip("|").split("|")]
        elif header and re.match(r"^\| (cold|warm) \|", line):
            cells = [c.strip() for c in line.strip("|").split("|")]
            out[cells[0]] = dict(zip(header, cells))
    est = re.search(r"collectives/allreduce=(\d+)", text)
    jpg = re.search(r"(\d+) jobs per GPU", text)
    return out, int(est.group(1)) if est else None, jpg.group(1) if jpg else "?"


def samples(name):
    per_proc, per_gpu_count, gpu_mem = [], {}, {}
    for line in (read(name + "-apps.csv") or "").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4 and parts[3].isdigit():
            per_proc.append(int(parts[3]))
            key = (parts[0], parts[1])
            per_gpu_count[key] = per_gpu_count.get(key, 0) + 1
    for line in (read(name + "-gpu.csv") or "").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4 and parts[2].isdigit():
            gpu_mem[parts[1]] = max(gpu_mem.get(parts[1], 0), int(parts[2]))
    return per_proc, max(per_gpu_count.values()) if per_gpu_count else 0, gpu_mem


def section_batch(name, label, targets):
    phases, est, jpg = batch_rows(name)
    if not phases:
        tail = (read(name + ".log") or "").strip().splitlines()[-2:]
        row(label, "-", "no result (%s)" % " / ".join(tail) if tail else "not run")
        return
    for ph in ("cold", "warm"):
        r = phases.get(ph)
        target = targets.get(ph)
        if not r:
            row("%s, %s" % (label, ph), ">= %s steps/s" % target if target else "-",
                "did not finish")
            continue
        sps = float(r.get("steps/s", "0") or 0)
        row("%s, %s (%s jobs per GPU)" % (label, ph, jpg),
            ">= %s steps/s" % target if target else "-",
            "%.2f steps/s, %s steps, median %s ms, p90 %s ms; GPUs held %s, kernel-busy %s, "
            "timing %s; lock wait %s ms/run; most jobs on one GPU %s; %s" % (
                sps, r.get("steps"), r.get("median step ms"), r.get("p90 step ms"),
                r.get("GPUs held"), r.get("GPU kernel-busy"), r.get("GPU timing (alone)"),
                r.get("lock wait per run ms"), r.get("most jobs on one GPU"), r.get("outcomes")),
            sps >= target if target else None)
    per_proc, peak_procs, gpu_mem = samples(name)
    if per_proc:
        row("%s: device memory per job process (sampled each second)" % label,
            "<= estimate %s MiB" % est if est else "-",
            "median %d MiB, max %d MiB; most processes on one GPU %d; peak GPU memory %s MiB"
            % (statistics.median(per_proc), max(per_proc), peak_procs,
               "/".join(str(v) for _, v in sorted(gpu_mem.items()))),
            max(per_proc) <= est if est else None)


# --- 4. nothing left behind ---
def section_left_behind(prefix, label):
    apps = read(prefix + "-apps.csv")
    gpus = read(prefix + "-gpu.csv")
    if apps is None or gpus is None:
        row(label, "-", "not measured")
        return
    procs = [l for l in apps.splitlines() if l.strip() and "No running" not in l]
    idle = {}
    for line in (read("idle-gpu.csv") or "").splitlines():
        p = [x.strip() for x in line.split(",")]
        if len(p) == 2 and p[1].isdigit():
            idle[p[0]] = int(p[1])
    extra = []
    for line in gpus.splitlines():
        p = [x.strip() for x in line.split(",")]
        if len(p) == 2 and p[1].isdigit():
            extra.append(int(p[1]) - idle.get(p[0], 0))
    others = [l for l in (read("after-batch-procs.txt") or "").splitlines() if l.strip()]
    if prefix != "after-batch":
        others = []
    ok = not procs and not others and extra and max(extra) <= 64
    row(label, "no process, memory back to idle",
        "%d GPU processes, %d job processes, memory above idle %s MiB" % (
            len(procs), len(others), "/".join(str(e) for e in extra) or "n/a"), bool(ok))


# --- 5. interference ---
def timings(prefix):
    out = []
    for name, r, _ in checks(prefix):
        if r and r.get("has_timing"):
            out.append(r)
    return out


def section_interference():
    alone, loaded = timings("if-alone"), timings("if-loaded")
    if not alone:
        row("interference", "-", "not run")
        return
    m_alone = med([r["candidate"]["median_us"] for r in alone])
    m_loaded = med([r["candidate"]["median_us"] for r in loaded])
    if m_loaded:
        d = m_loaded / m_alone - 1
        row("correct all-reduce median, alone vs under load (%d / %d checks)" % (
            len(alone), len(loaded)), "within 1%",
            "%.1f vs %.1f us (%+.2f%%)" % (m_alone, m_loaded, 100 * d), abs(d) <= 0.01)
    cvs = [r["candidate"]["cv"] for r in alone + loaded]
    row("CV of the timed calls, every check (alone and loaded)", "<= 1%",
        "max %.2f%% (alone %s, loaded %s)" % (
            100 * max(cvs), "/".join("%.2f" % (100 * r["candidate"]["cv"]) for r in alone),
            "/".join("%.2f" % (100 * r["candidate"]["cv"]) for r in loaded)), max(cvs) <= 0.01)
    for label, prefix in (("alone", "if-ref-alone"), ("under load", "if-ref-loaded")):
        refs = [r["speedup"] for r in timings(prefix)]
        if refs:
            row("reference against itself, %s (%d checks)" % (label, len(refs)), "1.00 +- 0.02",
                ", ".join("%.3f" % x for x in refs), all(abs(x - 1) <= 0.02 for x in refs))
    load = [load_json(os.path.relpath(f, OUT)) for f in glob.glob(path("load", "*.json"))]
    load = [r for r in load if r]
    if load:
        st = {}
        for r in load:
            st[r["status"]] = st.get(r["status"], 0) + 1
        row("load: set-up + trials jobs done meanwhile", "all correct",
            "%d (%s), lock wait median %s ms" % (
                len(load), ", ".join("%s %d" % kv for kv in st.items()),
                fmt(med([r["stages"]["run_lock_wait_ms"] for r in load]), "%.0f")),
            set(st) == {"correct"})
    ls = timings("if-locksetup")
    if ls:
        m = med([r["candidate"]["median_us"] for r in ls])
        d = m / m_alone - 1
        row("... under load with PKGYM_LOCK_SETUP=1 (set-up holds the locks shared)",
            "within 1%", "%.1f us (%+.2f%%), CV max %.2f%%" % (
                m, 100 * d, 100 * max(r["candidate"]["cv"] for r in ls)), abs(d) <= 0.01)


# --- 6. hung jobs ---
def section_hung():
    trial, timing = load_json("hung-trial.json"), load_json("hung-timing.json")
    if trial is None and timing is None:
        row("hung jobs among others", "-", "not run")
        return
    for label, r, name, phrase in (("hung in a trial", trial, "hung-trial", "correctness check"),
                                   ("hung in timing", timing, "hung-timing", "budget of timing")):
        w = wall(name + ".wall")
        if not r:
            row(label, "timeout by its budget", "no result (%s)" % (read(name + ".err") or "")[-200:],
                False)
            continue
        ok = r["status"] == "timeout" and "budget" in r["reason"] and phrase in r["reason"]
        row(label, "timeout by its phase budget, well before 60 s",
            "%s after %s s: %s" % (r["status"], fmt(w), r["reason"][:160]),
            bool(ok and w is not None and w < 45))
    others = checks("hung-other")
    if others:
        walls = [w for _, _, w in others]
        st = [r["status"] if r else "none" for _, r, _ in others]
        row("correct checks next to them", "all correct, none waits a run limit",
            "%s; wall %s s" % (",".join(st), "/".join(fmt(w) for w in walls)),
            all(s == "correct" for s in st) and max(w or 999 for w in walls) < 60)


section_probe()
section_single()
section_batch("batch", "64 x 3 collectives batch", {"cold": 5, "warm": 7})
section_left_behind("after-batch", "after the batch (nvidia-smi, 3 s later)")
section_interference()
section_hung()
for log in sorted(glob.glob(path("batch-jpg*.log"))):
    name = os.path.basename(log)[:-4]
    section_batch(name, "batch (32 cold, 64 warm) with %s jobs per GPU" % name[9:], {})
section_left_behind("end", "at the end")
skipped = [l for l in (read("skipped.txt") or "").splitlines() if l.strip()]
if skipped:
    row("sections skipped for time", "-", ", ".join(skipped))

gpus = (read("gpus.csv") or "").strip().splitlines()
print("## issue 13 throughput, %s" % (gpus[1] if len(gpus) > 1 else "unknown device"))
print()
print("| what | target | measured | holds |")
print("|---|---|---|---|")
for r in rows:
    print(r)
