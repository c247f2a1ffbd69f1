"""A cmd: policy for the eval test. Reads the observation JSON on stdin, checks its fields
(exit 1 on a bad one, which makes eval report an error), answers turn 1 with the shipped
correct response and turn 2 with text that has no code block (a format error)."""
import json
import os
import sys

obs = json.load(sys.stdin)
for key, kind in (("problem", str), ("trajectory", int), ("turn", int), ("prompt", str)):
    if not isinstance(obs.get(key), kind):
        sys.exit("observation field %r missing or not %s" % (key, kind.__name__))
if not obs["prompt"]:
    sys.exit("empty prompt")
if (obs["turn"] == 1) != (obs.get("feedback") is None):
    sys.exit("feedback must be absent on turn 1 and present after it")
if obs["turn"] == 1:
    replay = os.path.join(os.environ["PK_SOURCE_DIR"], "rollout", "replay")
    with open(os.path.join(replay, obs["problem"], "turn3.md")) as f:
        sys.stdout.write(f.read())
else:
    print("I am out of ideas and write no code this turn.")
