"""Clients for the pkgym environment server (protocol v1, docs/protocol.md).

- Client: blocking, one request at a time.
- AsyncClient: asyncio, many requests in flight over one DEALER socket; GRPO groups
  (reset_group, step_group).
- Env: a minimal Gymnasium-style reset/step over a Client (no gymnasium needed);
  pkgym_client.gym.PkgymEnv is the real gymnasium.Env.
- pkgym_client.chat: chat messages fitted to a budget in real tokens.
- pkgym_client.integrations.trl / .verl: TRL's GRPOTrainer rollout_func, verl's interaction.
"""
from .aio import AsyncClient
from .client import Client, InfraError, ServerError
from .curve import AuthenticationError
from .env import Env

__all__ = ["AsyncClient", "AuthenticationError", "Client", "Env", "InfraError", "ServerError"]
__version__ = "0.1.0"
PROTOCOL = 1
