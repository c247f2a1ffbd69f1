#!/usr/bin/env python3
"""Security controls of issue #19, end to end against a real `pkgym serve`.

1. The two-request chain of the issue: a `step` with a correct selftest kernel whose constructor
   makes raw system calls writing a marker file under the host's /tmp, then a `reset` naming
   `plugin:<that .so>` as the feedback hook. Since issue #12 the raw-syscall scan rejects the
   kernel at step 1 (rule raw_syscall) and nothing is cached; the test then compiles the same
   object itself (as if a kernel got past the scan) and replays request 2 with its path: the
   reset must be refused (`bad_request`) and the marker must never appear on the host. (Before
   the fix the step passed, the object was cached, the reset was accepted and the next step's
   feedback hook dlopened it outside the sandbox: the marker appeared.)
2. Hooks by name only: a `cmd:` path, an unregistered name and a `hook_registry` in reset's
   options are `bad_request` with a message saying hooks are chosen by name.
3. The data directory is 0700, the compile cache's directories 0700 and its objects 0600.
4. Even a hook the operator registered on purpose (here: the very cached object) runs in the
   sandbox: its constructor's marker does not appear on the host, and the built-in feedback is
   used.
"""
import glob
import os
import secrets
import stat
import subprocess
import sys

from pkserver import Server

PROBLEM = "selftest/scale"

# The correct selftest/scale solution plus a constructor that writes MARKER with raw system
# calls: no libc symbol, so no symbol check sees it, and no MPI symbol either, so the object
# loads anywhere (an object with undefined MPI symbols would fail dlopen before its
# constructor ran).
KERNEL = r"""
#include "pk_ctx.h"

static long raw3(long n, long a, long b, long c) {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}

__attribute__((constructor)) static void leave_marker(void) {
    static const char path[] = "MARKER";
    long fd = raw3(2 /* open */, (long)path, 0101 /* O_WRONLY|O_CREAT */, 0644);
    if (fd >= 0) {
        raw3(1 /* write */, fd, (long)"ran\n", 4);
        raw3(3 /* close */, fd, 0, 0);
    }
}

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        y[i] = 3.0f * x[i] + (float)ctx->rank;
    return 0;
}
"""


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def step_with_kernel(c, marker):
    ep = c.reset(PROBLEM, seed=3, max_turns=2)["episode"]
    action = "My kernel:\n```cuda\n" + KERNEL.replace("MARKER", marker) + "\n```\n"
    r = c.step(ep, action)
    c.call("close", episode=ep)
    return r["info"]


CLEAN = KERNEL[KERNEL.index("extern"):]  # the same solution without the constructor


def build_hostile_object(tmp, marker):
    """The hostile kernel as a shared object, built here: what request 2 would name if a kernel
    had got past the raw-syscall scan and into the compile cache."""
    src = os.path.join(tmp, "hostile.c")
    so = os.path.join(tmp, "hostile.so")
    body = KERNEL[:KERNEL.index("extern")].replace('#include "pk_ctx.h"', "")
    with open(src, "w") as f:
        f.write(body.replace("MARKER", marker))
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", so, src], check=True)
    return so


def two_request_chain(srv, marker):
    c = srv.client(timeout_s=300)
    info = step_with_kernel(c, marker)
    print(f"  step 1: {info['status']} ({info['reason'][:80]})")
    expect(info["status"] == "rejected" and "raw system calls" in info["reason"],
           f"the hostile kernel is rejected by the raw-syscall scan (issue #12): {info}")
    expect(not os.path.exists(marker), "the constructor wrote on the host")
    cached = glob.glob(os.path.join(srv.data_dir, "cache", "compile", "*", "*.so"))
    expect(not cached, f"a rejected object is never cached, found {cached}")
    ep = c.reset(PROBLEM, seed=3, max_turns=2)["episode"]
    r = c.step(ep, "My kernel:\n```cuda\n#include \"pk_ctx.h\"\n" + CLEAN + "\n```\n")
    c.call("close", episode=ep)
    expect(r["info"]["status"] == "correct", f"the clean kernel: {r['info']}")
    cached = glob.glob(os.path.join(srv.data_dir, "cache", "compile", "*", "*.so"))
    expect(len(cached) == 1, f"one cached object expected, found {cached}")
    print(f"  cached object of the clean kernel: {cached[0]}")
    so = build_hostile_object(srv.tmp, marker)

    # Request 2: the cached object as this episode's feedback plugin.
    r = c.request("reset", problem=PROBLEM, seed=4, max_turns=2,
                  options={"feedback": {"hooks": {"feedback": f"plugin:{so}"}}})
    if r.get("ok"):
        # The old server accepted it; its next step runs the feedback hook: show what happens.
        c.request("step", episode=r["episode"], action="no code block at all")
    print(f"  reset naming plugin:<cached .so>: {r.get('error') or 'ACCEPTED'}")
    marker_seen = os.path.exists(marker)
    expect(not marker_seen, "the constructor ran OUTSIDE the sandbox: the marker file "
                            f"{marker} appeared on the host")
    expect(not r.get("ok") and r["error"]["code"] == "bad_request",
           f"the reset naming a path must be bad_request, got {r}")
    expect("not a registered hook name" in r["error"]["message"], r["error"]["message"])
    c.close()
    return so, cached[0]


def names_only(srv):
    c = srv.client()
    cases = [
        ({"hooks": {"history": "cmd:/bin/sh"}}, "not a registered hook name"),
        ({"hooks": {"summarize": {"use": "/usr/bin/python3"}}}, "not a registered hook name"),
        ({"hooks": {"feedback": "terse"}}, 'no hook named "terse"'),
        ({"hook_registry": {"x": "cmd:/bin/sh"}, "hooks": {"feedback": "x"}},
         "only the operator registers hooks"),
    ]
    for feedback, needle in cases:
        r = c.request("reset", problem=PROBLEM, options={"feedback": feedback})
        expect(not r.get("ok") and r["error"]["code"] == "bad_request", f"{feedback}: {r}")
        expect(needle in r["error"]["message"], f"{feedback}: {r['error']['message']}")
    print(f"  {len(cases)} hook options naming paths or unregistered hooks: bad_request")
    c.close()


def private_files(srv, so):
    expect(mode(srv.data_dir) == 0o700, f"data dir mode {mode(srv.data_dir):o}")
    compile_dir = os.path.dirname(os.path.dirname(so))
    for d in (os.path.join(srv.data_dir, "cache"), compile_dir, os.path.dirname(so)):
        expect(mode(d) == 0o700, f"{d} mode {mode(d):o}")
    expect(mode(so) == 0o600, f"cached object mode {mode(so):o}")
    print("  data dir, cache dirs 0700; cached object 0600")


def registered_object_stays_sandboxed(data_dir, so, marker):
    """The operator registers the hostile object itself as a hook: it still runs sandboxed."""
    srv = Server("--hook", f"cached=plugin:{so}", data_dir=data_dir)
    try:
        c = srv.client(timeout_s=300)
        ep = c.reset(PROBLEM, seed=5, max_turns=2,
                     options={"feedback": {"hooks": {"feedback": "cached"}}})["episode"]
        r = c.step(ep, "no code block at all")
        expect(r["info"]["status"] == "format_error", r["info"])
        expect(not os.path.exists(marker),
               "a registered hook's constructor ran outside the sandbox")
        # "no pk_summarizer_plugin_v1()": dlopen succeeded, so the constructor did run, in
        # the sandbox.
        expect("feedback hook cached" in srv.output() and "no pk_summarizer_plugin_v1" in
               srv.output() and "used the built-in" in srv.output(),
               "the object loads but is no plugin: the built-in feedback is used and logged\n" +
               srv.output())
        print("  the hostile object registered as a hook: loaded in the sandbox, no marker, "
              "built-in feedback")
        c.close()
    finally:
        rc = srv.stop()
        srv.cleanup()
    expect(rc == 0, f"server exit code {rc}")


def main():
    marker = f"/tmp/pkgym-sec-marker-{os.getpid()}-{secrets.token_hex(4)}"
    srv = Server()
    keep = os.path.join(srv.tmp + "-data")
    try:
        so, cached = two_request_chain(srv, marker)
        names_only(srv)
        private_files(srv, cached)
    except Exception:
        print(srv.output())
        raise
    finally:
        rc = srv.stop()
        if os.path.exists(marker):
            os.unlink(marker)
    expect(rc == 0, f"server exit code {rc}")
    try:
        os.rename(srv.data_dir, keep)  # the same store and cache for a second server
        hostile = os.path.join(keep, "hostile.so")
        os.rename(so, hostile)
        srv.cleanup()
        registered_object_stays_sandboxed(keep, hostile, marker)
    finally:
        if os.path.exists(marker):
            os.unlink(marker)
        import shutil
        shutil.rmtree(keep, ignore_errors=True)
    print("security: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
