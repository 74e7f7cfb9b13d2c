"""What a spawn in flight waits for now: for the error of a spawn whose time ran out.

A bounded spawn (``spawn_timeout``) puts a fresh :class:`SpawnProgress` in a context
variable before it starts. Every task the spawn starts copies that context, and so sees the
same object: the layers that do the work (the broker's request, the worker pool, the fork
server, the worker's constructor) each note the step they wait on with :func:`waiting_for`,
without being told whose spawn it is. When the time runs out, the error names the last
step noted. Where no bounded spawn is in flight, noting does nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = ["SpawnProgress", "tracked", "waiting_for"]


class SpawnProgress:
    """The step one spawn waits on now, in words: ``"... it was waiting for <step>"``."""

    __slots__ = ("step",)

    def __init__(self) -> None:
        self.step = "its start to begin"


_current: ContextVar[SpawnProgress | None] = ContextVar("actorrt_spawn_progress", default=None)


def waiting_for(step: str) -> None:
    """Note that the spawn in flight in this context (if any) now waits for ``step``."""
    progress = _current.get()
    if progress is not None:
        progress.step = step


@contextlib.contextmanager
def tracked() -> Iterator[SpawnProgress]:
    """Track the spawn started inside this block (and in the tasks it starts)."""
    progress = SpawnProgress()
    token = _current.set(progress)
    try:
        yield progress
    finally:
        _current.reset(token)
