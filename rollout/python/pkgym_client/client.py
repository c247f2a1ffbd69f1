"""Blocking client: one DEALER socket; each reply is matched to its request by id."""
import itertools
import logging
import time

import msgpack
import zmq

from . import curve

DEFAULT_ENDPOINT = "tcp://127.0.0.1:5555"


class ServerError(Exception):
    """A reply with ok=false. code is one of the protocol's error codes."""

    def __init__(self, code, message, reply=None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.reply = reply


class InfraError(ServerError):
    """A step answered `infra_error`: the evaluation failed twice (the server already ran it
    again, on other GPUs where it had any) before the candidate's code was loaded. Not the
    model's failure: no turn was recorded and there is no reward. Send the same action again
    or drop the sample; never score it (docs/protocol.md)."""


def check(reply):
    """Returns reply, or raises ServerError (InfraError for infra_error) on a failure."""
    if not reply.get("ok"):
        err = reply.get("error") or {}
        code = err.get("code", "internal")
        cls = InfraError if code == "infra_error" else ServerError
        raise cls(code, err.get("message", ""), reply)
    return reply


LOG = logging.getLogger("pkgym_client")


def step_through_infra(client, episode, action, summary=None, retries=1):
    """client.step, sending the same action again after an infra_error up to `retries` times;
    each time says so (logger pkgym_client). The last InfraError is raised: the caller drops
    the sample (it is not the model's failure and has no reward)."""
    for attempt in range(retries + 1):
        try:
            return client.step(episode, action, summary)
        except InfraError as e:
            if attempt == retries:
                LOG.warning("pkgym: episode %s: infra_error again, not the model's failure; "
                            "drop this sample (no reward): %s", episode, e.message)
                raise
            LOG.warning("pkgym: episode %s: infra_error, not the model's failure; sending the "
                        "same action again: %s", episode, e.message)


def encode(request):
    return msgpack.packb(request, use_bin_type=True)


def decode(frame):
    return msgpack.unpackb(frame, raw=False, strict_map_key=False)


class Client:
    """curve_server_key / curve_client_key: for a server with CURVE (pkgym_client.curve);
    default: PKGYM_CURVE_SERVER_KEY / PKGYM_CURVE_CLIENT_KEY when set. A server that refuses
    the handshake raises curve.AuthenticationError."""

    def __init__(self, endpoint=DEFAULT_ENDPOINT, timeout_s=600.0, context=None,
                 curve_server_key=None, curve_client_key=None):
        self._ctx = context or zmq.Context.instance()
        self._sock, self._watch = curve.connect_dealer(self._ctx, endpoint, curve_server_key,
                                                       curve_client_key)
        self._ids = itertools.count(1)
        self.timeout_s = timeout_s

    def close(self):
        self._watch.close()
        self._sock.close(0)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def request(self, op, **fields):
        """Sends one request and returns its reply map (ok or not)."""
        rid = next(self._ids)
        msg = dict(fields, op=op, id=rid)
        self._sock.send_multipart([b"", encode(msg)])
        deadline = time.monotonic() + self.timeout_s
        while True:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0 or not self._watch.wait(left_ms):
                raise TimeoutError(f"no reply to {op} within {self.timeout_s} s")
            reply = decode(self._sock.recv_multipart()[-1])
            if reply.get("id") == rid:
                return reply
            # a late reply to an earlier request that timed out: drop it

    def call(self, op, **fields):
        """Like request, but raises ServerError on a failure reply."""
        return check(self.request(op, **fields))

    def hello(self):
        return self.call("hello")

    def list_problems(self, tags=None):
        return self.call("list_problems", **({"tags": tags} if tags else {}))["problems"]

    def get_problem(self, problem):
        return self.call("get_problem", problem=problem)

    def reset(self, problem, seed=None, max_turns=None, options=None, group=None):
        fields = {"problem": problem}
        for k, v in (("seed", seed), ("max_turns", max_turns), ("options", options),
                     ("group", group)):
            if v is not None:
                fields[k] = v
        return self.call("reset", **fields)

    def step(self, episode, action, summary=None):
        fields = {"episode": episode, "action": action}
        if summary is not None:
            fields["summary"] = summary
        return self.call("step", **fields)

    def close_episode(self, episode):
        return self.call("close", episode=episode)

    def trajectory(self, episode):
        return self.call("trajectory", episode=episode)

    def stats(self):
        return self.call("stats")
