"""A feedback plugin is chosen per episode through reset's options: two episodes of one server,
one with the terse example plugin and one with the verbose one, get their own feedback for the
same response, and a third with no option gets the built-in text."""
import os
import sys

from pkserver import Server, SRC

TERSE, VERBOSE = sys.argv[1], sys.argv[2]
PROBLEM = "selftest/allreduce"
with open(os.path.join(SRC, "rollout", "replay", "selftest", "allreduce", "turn1.md")) as f:
    RESPONSE = f.read()  # a kernel that does not compile


def feedback_of(c, hooks):
    options = {"feedback": {"hooks": {"feedback": hooks}}} if hooks else None
    ep = c.reset(PROBLEM, seed=1, max_turns=2, options=options)
    r = c.step(ep["episode"], RESPONSE)
    assert r["info"]["status"] == "compile_error", r["info"]
    fb = r["observation"]["feedback"]
    stored = c.call("trajectory", episode=ep["episode"])
    assert stored["turns"][0]["feedback"] == fb, "the store keeps the plugin's text"
    c.call("close", episode=ep["episode"])
    return fb, ep["info"]["settings"]


def main():
    for path in (TERSE, VERBOSE):
        assert os.path.exists(path), f"plugin not built: {path}"
    server = Server()
    try:
        c = server.client()
        builtin, _ = feedback_of(c, None)
        terse, settings = feedback_of(c, f"plugin:{TERSE}")
        verbose, _ = feedback_of(c, f"plugin:{VERBOSE}")
        print("builtin:", builtin[:120].replace("\n", " | "))
        print("terse:  ", terse[:120].replace("\n", " | "))
        print("verbose:", verbose[:120].replace("\n", " | "))
        assert terse.startswith("compile_error: ") and "\n" not in terse, terse
        assert builtin != terse and verbose != terse and verbose != builtin
        assert TERSE in str(settings["feedback"]), "the episode's settings name its plugin"
    finally:
        server.stop()
        server.cleanup()
    print("per-episode feedback plugins: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
