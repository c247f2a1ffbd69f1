"""asyncio client: many requests in flight over one DEALER socket, replies matched by id."""
import asyncio
import itertools

import zmq
import zmq.asyncio

from . import curve
from .client import DEFAULT_ENDPOINT, check, decode, encode
from .group import reset_group, step_group


class AsyncClient:
    """curve_server_key / curve_client_key: as for Client."""

    def __init__(self, endpoint=DEFAULT_ENDPOINT, timeout_s=600.0, context=None,
                 curve_server_key=None, curve_client_key=None):
        self._ctx = context or zmq.asyncio.Context.instance()
        self._sock, self._watch = curve.connect_dealer(self._ctx, endpoint, curve_server_key,
                                                       curve_client_key)
        self._ids = itertools.count(1)
        self._waiting = {}
        self._reader = None
        self.timeout_s = timeout_s

    async def _read_replies(self):
        try:
            while True:
                frames = await self._sock.recv_multipart()
                reply = decode(frames[-1])
                fut = self._waiting.pop(reply.get("id"), None)
                if fut is not None and not fut.done():
                    fut.set_result(reply)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a broken socket or frame: fail every waiter now, not later
            for fut in self._waiting.values():
                if not fut.done():
                    fut.set_exception(e)
            self._waiting.clear()
            self._reader = None

    async def request(self, op, **fields):
        """Sends one request and awaits its reply map (ok or not)."""
        if self._reader is None:
            self._reader = asyncio.ensure_future(self._read_replies())
        rid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        await self._sock.send_multipart([b"", encode(dict(fields, op=op, id=rid))])
        try:
            return await asyncio.wait_for(fut, self.timeout_s)
        except asyncio.TimeoutError:
            self._watch.check()  # a refused handshake says so rather than "timeout"
            raise
        finally:
            self._waiting.pop(rid, None)

    async def call(self, op, **fields):
        return check(await self.request(op, **fields))

    async def reset(self, problem, **fields):
        return await self.call("reset", problem=problem,
                               **{k: v for k, v in fields.items() if v is not None})

    async def step(self, episode, action, summary=None):
        fields = {"episode": episode, "action": action}
        if summary is not None:
            fields["summary"] = summary
        return await self.call("step", **fields)

    async def hello(self):
        return await self.call("hello")

    async def list_problems(self, tags=None):
        return (await self.call("list_problems", **({"tags": tags} if tags else {})))["problems"]

    async def get_problem(self, problem):
        return await self.call("get_problem", problem=problem)

    async def close_episode(self, episode):
        return await self.call("close", episode=episode)

    async def trajectory(self, episode):
        return await self.call("trajectory", episode=episode)

    async def stats(self):
        return await self.call("stats")

    async def reset_group(self, problem, n, group=None, seed=None, **fields):
        """Opens a GRPO group: n episodes of one problem with one group label and one seed
        (a random one when None: every member sees the same inputs). The n resets are pipelined
        over this socket (one round trip); all or nothing: when any fails, the others are closed
        and the error is raised. Returns the n reset replies."""
        return await reset_group(self, problem, n, group, seed, **fields)

    async def step_group(self, episodes, actions, summaries=None):
        """Steps several episodes at once (pipelined); returns their replies in order. A failed
        step raises after every other step has been answered (no step is left in flight)."""
        return await step_group(self, episodes, actions, summaries)

    async def close(self):
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except asyncio.CancelledError:
                pass
        self._watch.close()
        self._sock.close(0)
