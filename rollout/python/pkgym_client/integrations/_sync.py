"""A private event loop with one AsyncClient, for integrations whose trainer calls them
synchronously (TRL's rollout_func)."""
import asyncio

from ..aio import AsyncClient


class SyncRunner:
    def __init__(self, endpoint, timeout_s):
        self.loop = asyncio.new_event_loop()
        self.client = self.run(self._make(endpoint, timeout_s))

    @staticmethod
    async def _make(endpoint, timeout_s):
        return AsyncClient(endpoint, timeout_s=timeout_s)

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def close(self):
        if not self.loop.is_closed():
            self.run(self.client.close())
            self.loop.close()
