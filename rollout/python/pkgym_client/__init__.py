"""Clients for the pkgym environment server (protocol v1, docs/protocol.md).

- Client: blocking, one request at a time.
- AsyncClient: asyncio, many requests in flight over one DEALER socket.
- Env: Gymnasium-style reset/step over a Client.
"""
from .aio import AsyncClient
from .client import Client, ServerError
from .curve import AuthenticationError
from .env import Env

__all__ = ["AsyncClient", "AuthenticationError", "Client", "Env", "ServerError"]
PROTOCOL = 1
