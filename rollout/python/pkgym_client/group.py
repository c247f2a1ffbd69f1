"""GRPO groups over the asyncio client: G episodes opened and stepped together.

The protocol has no batched op: the G requests are pipelined over one DEALER socket, so a group
costs one round trip, and the server handles them as it handles any concurrent requests (each
reset is committed to the trajectory store before its reply). The client makes it all or
nothing (docs/integrations.md says why this is not a server op)."""
import asyncio
import secrets
import uuid

from .client import InfraError, ServerError


async def reset_group(ac, problem, n, group=None, seed=None, **fields):
    if n < 1:
        raise ValueError("a group has at least one episode")
    group = group or f"g-{uuid.uuid4().hex[:12]}"
    seed = secrets.randbits(31) if seed is None else seed
    fields = {k: v for k, v in fields.items() if v is not None}
    replies = await asyncio.gather(
        *(ac.request("reset", problem=problem, group=group, seed=seed, **fields) for _ in range(n)),
        return_exceptions=True)
    failed = [r for r in replies if isinstance(r, BaseException) or not r.get("ok")]
    if failed:
        opened = [r["episode"] for r in replies if isinstance(r, dict) and r.get("ok")]
        await asyncio.gather(*(ac.request("close", episode=e) for e in opened),
                             return_exceptions=True)
        first = failed[0]
        if isinstance(first, BaseException):
            raise first
        err = first.get("error") or {}
        cls = InfraError if err.get("code") == "infra_error" else ServerError
        raise cls(err.get("code", "internal"),
                          f"{err.get('message', '')} ({len(failed)} of {n} resets failed; "
                          f"the {len(opened)} opened were closed)", first)
    return replies


async def step_group(ac, episodes, actions, summaries=None):
    if len(episodes) != len(actions) or (summaries is not None and len(summaries) != len(actions)):
        raise ValueError("episodes, actions (and summaries) must have the same length")
    summaries = summaries or [None] * len(actions)
    replies = await asyncio.gather(
        *(ac.step(e, a, s) for e, a, s in zip(episodes, actions, summaries)),
        return_exceptions=True)
    for r in replies:
        if isinstance(r, BaseException):
            raise r
    return replies
