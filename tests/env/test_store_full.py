#!/usr/bin/env python3
"""Issue 27, finding 5: a full disk never costs committed work. The data directory is a small
tmpfs (a real full disk: ENOSPC, SQLITE_FULL), mounted in a private mount namespace that a holder
process keeps alive across server restarts. A turn answered while the disk is full says so
(`info.store_error`, `info.stored_turns`); once there is room again the next turn's commit stores
the missed turn too, so the store has no gap, and a restart restores the episode with every
turn. Before the fix the store kept turns 1 and 3, and the restart dropped the episode
(`unknown_episode`). A server killed while a turn is unstored restores the episode as far as it
was stored."""
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile

import msgpack

from pkserver import Server, raw_request

PROBLEM = "selftest/scale"
# No code block: a format_error turn (nothing compiled), big enough that its commit needs new
# pages in the store's write-ahead log, so it fails while the disk is full.
ACTION = "no code here. " + "x" * (400 << 10)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


class Holder:
    """A process holding a user and mount namespace with a tmpfs mounted on path."""

    def __init__(self, path, size="24m"):
        os.makedirs(path)
        self.proc = subprocess.Popen(
            ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
             'mount -t tmpfs -o size="$1" tmpfs "$0" && echo mounted && exec sleep 3600', path,
             size], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if line != "mounted":
            self.proc.kill()
            raise RuntimeError("cannot mount a tmpfs in a user namespace (unshare -rm)")
        self.path = path
        self.view = f"/proc/{self.proc.pid}/root{path}"  # the tmpfs, as seen from here
        self.prefix = ["nsenter", "-t", str(self.proc.pid), "-U", "-m", "--preserve-credentials"]

    def fill(self):
        """Fills the tmpfs until ENOSPC."""
        chunk = b"\0" * (64 << 10)
        with open(os.path.join(self.view, "filler"), "wb") as f:
            try:
                while True:
                    f.write(chunk)
                    f.flush()
            except OSError as e:
                expect(e.errno == 28, f"filling the tmpfs: {e}")

    def free(self):
        os.unlink(os.path.join(self.view, "filler"))

    def stored_turns(self, ep):
        """The turns of ep in the store, read from a copy (SQLite resolves the /proc/PID/root
        link to this namespace's path; the server is idle when this is called)."""
        copy = tempfile.mkdtemp(prefix="pkgym-store-copy-")
        try:
            for name in ("trajectories.sqlite", "trajectories.sqlite-wal"):
                if os.path.exists(os.path.join(self.view, name)):
                    shutil.copy(os.path.join(self.view, name), copy)
            db = sqlite3.connect(os.path.join(copy, "trajectories.sqlite"))
            rows = [r[0] for r in db.execute(
                "SELECT turn FROM turns WHERE episode_id = ? ORDER BY turn", (ep,))]
            db.close()
            return rows
        finally:
            shutil.rmtree(copy, ignore_errors=True)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def call(srv, timeout_ms=30000, **req):
    s = srv.socket()
    try:
        return raw_request(s, msgpack.packb(req), timeout_ms=timeout_ms)
    finally:
        s.close(0)


def step(srv, ep, turn):
    rep = call(srv, op="step", episode=ep, action=ACTION)
    expect(rep.get("ok") and rep["info"]["turn"] == turn, f"step {turn}: {rep}")
    return rep


def gap_is_filled(holder):
    srv = Server(data_dir=holder.path, prefix=holder.prefix)
    try:
        ep = call(srv, op="reset", problem=PROBLEM, max_turns=6)["episode"]
        rep = step(srv, ep, 1)
        expect("store_error" not in rep["info"], f"turn 1 before the disk is full: {rep['info']}")
        holder.fill()
        rep = step(srv, ep, 2)
        info = rep["info"]
        expect("store_error" in info, f"turn 2 on a full disk must say it is not stored: {info}")
        print(f"  full disk: turn 2 answered with store_error: {info['store_error']}")
        traj = call(srv, op="trajectory", episode=ep)
        expect([t["turn"] for t in traj["turns"]] == [1, 2], "turn 2 is kept in memory")
        holder.free()
        rep = step(srv, ep, 3)
        expect("store_error" not in rep["info"], f"turn 3 with room again: {rep['info']}")
        turns = holder.stored_turns(ep)
        expect(turns == [1, 2, 3], f"the store has turns {turns}: a gap (issue 27, finding 5)")
        expect(info.get("stored_turns") == 1, f"turn 2's reply says how far it is stored: {info}")
        stats = call(srv, op="stats")
        expect(stats["requests"]["store_errors"] >= 1, stats["requests"])
    finally:
        expect(srv.stop() == 0, "server exit code")
    again = Server(data_dir=holder.path, prefix=holder.prefix)
    try:
        rep = call(again, op="step", episode=ep, action=ACTION)
        expect(rep.get("ok") and rep["info"]["turn"] == 4,
               f"restored with its 3 turns, the next is turn 4: {rep}")
    finally:
        expect(again.stop() == 0, "restarted server exit code")
    print("  store after the disk had room again: turns 1-3, restored: ok")


def killed_while_unstored(holder):
    srv = Server(data_dir=holder.path, prefix=holder.prefix)
    try:
        ep = call(srv, op="reset", problem=PROBLEM, max_turns=6)["episode"]
        step(srv, ep, 1)
        holder.fill()
        rep = step(srv, ep, 2)
        expect("store_error" in rep["info"], f"turn 2 on a full disk: {rep['info']}")
    finally:
        srv.stop(sig=signal.SIGKILL)
    holder.free()
    again = Server(data_dir=holder.path, prefix=holder.prefix)
    try:
        rep = call(again, op="step", episode=ep, action=ACTION)
        expect(rep.get("ok") and rep["info"]["turn"] == 2,
               f"restored as far as it was stored (turn 1); the next is turn 2: {rep}")
        expect(holder.stored_turns(ep) == [1, 2], holder.stored_turns(ep))
    finally:
        expect(again.stop() == 0, "restarted server exit code")
    print("  killed with turn 2 unstored: restored with turn 1: ok")


def main():
    tmp = tempfile.mkdtemp(prefix="pkgym-store-full-")
    holder = Holder(os.path.join(tmp, "data"))
    try:
        gap_is_filled(holder)
        killed_while_unstored(holder)
    finally:
        holder.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("store full: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
