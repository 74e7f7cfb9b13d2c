"""The actor of the spawn bursts, in a module of its own: each of a thousand workers imports
the module of its class, and this one imports nothing but actorrt (a test module would bring
pytest into every worker)."""

from __future__ import annotations

import os

import actorrt


@actorrt.actor
class Member:
    def where(self) -> tuple[str | None, int]:
        return os.environ.get("ACTORRT_NODE_IP"), os.getpid()
