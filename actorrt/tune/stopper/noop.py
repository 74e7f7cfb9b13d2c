"""``NoopStopper``: never stops anything."""

from __future__ import annotations

from .stopper import Stopper

__all__ = ["NoopStopper"]


class NoopStopper(Stopper):
    """Never stops anything (Ray's ``NoopStopper``)."""
