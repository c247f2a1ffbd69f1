"""A feedback plugin is chosen per episode, by name, through reset's options: the operator
registers the terse and verbose example plugins (--hook NAME=plugin:...); two episodes of one
server, one with each, get their own feedback for the same response, and a third with no option
gets the built-in text. The plugins run in the sandbox."""
import json
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
    server = Server("--hook", f"terse=plugin:{TERSE}", "--hook", f"verbose=plugin:{VERBOSE}")
    try:
        c = server.client()
        builtin, _ = feedback_of(c, None)
        terse, settings = feedback_of(c, "terse")
        verbose, _ = feedback_of(c, {"use": "verbose", "timeout_ms": 10000})
        print("builtin:", builtin[:120].replace("\n", " | "))
        print("terse:  ", terse[:120].replace("\n", " | "))
        print("verbose:", verbose[:120].replace("\n", " | "))
        assert terse.startswith("compile_error: ") and "\n" not in terse, terse
        assert builtin != terse and verbose != terse and verbose != builtin
        assert settings["feedback"]["hooks"]["feedback"]["use"] == "terse", settings
        assert settings["feedback"]["hook_registry"] == {"terse": f"plugin:{TERSE}"}, \
            "the stored settings say which file the name stood for"
    finally:
        server.stop()
        server.cleanup()
    # The same registration from the feedback config, with a server-wide default hook.
    config = os.path.join(server.tmp + "-fb.json")
    with open(config, "w") as f:
        json.dump({"hook_registry": {"terse": f"plugin:{TERSE}"}, "hooks": {"feedback": "terse"}},
                  f)
    server = Server("--feedback-config", config)
    try:
        c = server.client()
        default, settings = feedback_of(c, None)
        assert default == terse, (default, terse)
        assert "hook_registry" in settings["feedback"], settings
        builtin_again, _ = feedback_of(c, "builtin")
        assert builtin_again == builtin
    finally:
        server.stop()
        server.cleanup()
        os.unlink(config)
    print("per-episode feedback plugins: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
