#!/usr/bin/env python3
"""CURVE end to end: `pkgym serve --curve-secret-key --curve-allow` on loopback TCP.

- an authorized Python client plays a selftest episode (correct kernel, then a wrong one);
- a key not in the allow directory, a client without CURVE and a client with the wrong server
  key are refused at the handshake (AuthenticationError; the server never sees a request);
- a key copied into the allow directory while the server runs is admitted at its next
  connection; the C client takes its keys from PKGYM_CURVE_SERVER_KEY/PKGYM_CURVE_CLIENT_KEY;
- per-client limits count per key: two connections with one key share the cap, another key
  has its own;
- start-up: a non-loopback tcp:// endpoint without CURVE is refused unless --insecure (which
  warns), a half CURVE configuration and a group-readable secret key are refused.
"""
import os
import shutil
import subprocess
import sys

from pkserver import SRC, Server, keygen, running

from pkgym_client import AuthenticationError, Client

PROBLEM = "selftest/scale"
SOLUTIONS = os.path.join(SRC, "problems", "selftest", "scale", "solutions")


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def action(name):
    with open(os.path.join(SOLUTIONS, name)) as f:
        return "```cuda\n" + f.read() + "\n```\n"


def refused(srv, **keys):
    c = Client(srv.endpoint, timeout_s=10, **keys)
    try:
        c.hello()
    except AuthenticationError as e:
        return str(e)
    finally:
        c.close()
    return None


def play_episode(srv):
    c = srv.client(timeout_s=300)
    ep = c.reset(PROBLEM, seed=1, max_turns=2)
    r1 = c.step(ep["episode"], action("correct.cu"))
    r2 = c.step(ep["episode"], action("wrong_rank.cu"))
    expect(r1["info"]["status"] == "correct" and r1["reward"] > 0, r1["info"])
    expect(r2["info"]["status"] == "incorrect" and r2["truncated"], r2["info"])
    expect(r2["info"]["returns"] is not None, "the episode ended with its returns")
    who = c.stats()["clients"]["you"]
    expect(who.startswith("key:"), f"an authenticated client is known by its key: {who}")
    c.close_episode(ep["episode"])
    c.close()
    print(f"  authorized client played {PROBLEM}: rewards {r1['reward']:.3f}, "
          f"{r2['reward']:.3f}; returns {r2['info']['returns']} (identity {who[:12]}...)")


def refusals(srv):
    before = srv.client().stats()["requests"]["total"]
    other_key, other_pub = keygen(os.path.join(srv.tmp, "keys", "other"))
    msg = refused(srv, curve_server_key=srv.server_pub, curve_client_key=other_key)
    expect(msg and "refused this client's CURVE key" in msg, f"unauthorized key: {msg}")
    print(f"  unauthorized key: {msg}")
    msg = refused(srv)
    expect(msg and "requires CURVE" in msg, f"plain client: {msg}")
    print("  client without CURVE: refused at the handshake")
    wrong_server, _ = keygen(os.path.join(srv.tmp, "keys", "impostor"))
    msg = refused(srv, curve_server_key=wrong_server, curve_client_key=srv.client_key)
    expect(msg and "handshake" in msg, f"wrong server key: {msg}")
    # Nothing of theirs reached the server.
    stats = srv.client().stats()
    expect(stats["requests"]["total"] == before + 1,
           f"refused clients got requests through? {before} -> {stats['requests']}")
    expect(stats["clients"]["curve_refused"] >= 1, stats["clients"])
    # The operator admits the key: the next connection gets in.
    shutil.copy(other_pub, srv.allow_dir)
    c = Client(srv.endpoint, timeout_s=10, curve_server_key=srv.server_pub,
               curve_client_key=other_key)
    expect(c.hello()["ok"], "a key added to the allow directory is admitted")
    c.close()
    print("  key added to the allow directory at run time: admitted")
    return other_key


def c_client(srv):
    bench = os.path.join(os.environ["PK_BUILD_DIR"], "tests", "env", "bench_server")
    env = dict(os.environ, PKGYM_CURVE_SERVER_KEY=srv.server_pub,
               PKGYM_CURVE_CLIENT_KEY=srv.client_key)
    out = subprocess.run([bench, "--endpoint", srv.endpoint, "--op", "hello", "--clients", "1",
                          "--seconds", "0.3"], env=env, capture_output=True, text=True,
                         timeout=60)
    expect("errors=0" in out.stdout and "requests=0 " not in out.stdout,
           f"C client with CURVE keys: {out.stdout} {out.stderr}")
    env.pop("PKGYM_CURVE_CLIENT_KEY")
    out = subprocess.run([bench, "--endpoint", srv.endpoint, "--op", "hello", "--clients", "1",
                          "--seconds", "0.3"], env=env, capture_output=True, text=True,
                         timeout=60)
    expect("PKGYM_CURVE_CLIENT_KEY" in out.stderr, f"half a configuration: {out.stderr}")
    print("  C client with PKGYM_CURVE_* keys: ok")


def per_key_limits(srv, other_key):
    same = [srv.client(), srv.client()]
    eps = [same[0].reset(PROBLEM)["episode"], same[1].reset(PROBLEM)["episode"]]
    r = same[1].request("reset", problem=PROBLEM)
    expect(not r.get("ok") and r["error"]["code"] == "overloaded" and
           "limits.max_client_episodes" in r["error"]["message"],
           f"two connections with one key share the cap: {r}")
    c = Client(srv.endpoint, timeout_s=10, curve_server_key=srv.server_pub,
               curve_client_key=other_key)
    expect(c.request("reset", problem=PROBLEM).get("ok"), "another key has its own cap")
    c.close()
    for cl, ep in zip(same, eps):
        cl.close_episode(ep)
        cl.close()
    print("  per-client cap counted per key across connections")


def start_fails(*args):
    tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"pkgym-curve-start-{os.getpid()}")
    proc = subprocess.run([os.environ["PKGYM"], "serve", "--data-dir", tmp, *args],
                          capture_output=True, text=True, timeout=60)
    shutil.rmtree(tmp, ignore_errors=True)
    expect(proc.returncode != 0, f"pkgym serve {args} should refuse to start:\n{proc.stderr}")
    return proc.stderr


def startup_checks(srv):
    err = start_fails("--bind", "tcp://0.0.0.0:0")
    expect("--insecure" in err and "CURVE" in err, err)
    print("  tcp://0.0.0.0 without CURVE: refused (" + err.strip().splitlines()[-1][:90] + "...)")
    err = start_fails("--bind", "tcp://127.0.0.1:0", "--curve-secret-key", srv.server_key)
    expect("--curve-allow" in err, err)
    loose = os.path.join(srv.tmp, "loose.key")
    shutil.copy(srv.server_key, loose)
    os.chmod(loose, 0o644)
    err = start_fails("--bind", "tcp://127.0.0.1:0", "--curve-secret-key", loose,
                      "--curve-allow", srv.allow_dir)
    expect("chmod 600" in err, err)
    insecure = Server("--bind", "tcp://0.0.0.0:*", "--insecure")
    try:
        expect("WARNING" in insecure.output() and "without CURVE" in insecure.output(),
               insecure.output())
    finally:
        rc = insecure.stop()
        insecure.cleanup()
    expect(rc == 0, f"insecure server exit code {rc}")
    print("  --insecure: serves, with a warning; half a CURVE setup and a loose key: refused")


def main():
    with running(Server("--max-client-episodes", "2", curve=True)) as srv:
        print(f"  endpoint {srv.endpoint}")
        play_episode(srv)
        other_key = refusals(srv)
        c_client(srv)
        per_key_limits(srv, other_key)
        startup_checks(srv)
    print("curve: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
