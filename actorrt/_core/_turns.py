"""One loop callback for the turns of every idle inline actor a message has reached.

An idle inline actor has no task (``MailboxServing._take_turn`` serves it); the actors that
messages reach are queued here and take their turns in one callback, in the order they were
reached, so a burst of asks to many idle actors schedules one callback, not one each.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
from typing import Protocol


class Turn(Protocol):
    """An actor that can take a turn (``actorrt._core._serving.MailboxServing``)."""

    loop: asyncio.AbstractEventLoop
    _context: contextvars.Context | None

    def _take_turn(self) -> None: ...

    def _after_failed_turn(self) -> None: ...

    def describe(self) -> str: ...


class Turns:
    """The parked inline actors a message has reached, each to take its turn
    (``MailboxServing._take_turn``) in one loop callback for all of them: no scheduled
    callback is made per actor, which a burst of asks to many idle actors would otherwise
    keep alive, one each, until the loop reaches them. Actors made ready by the turns being
    taken wait for the next callback, behind what the loop has scheduled meanwhile."""

    __slots__ = ("_context", "ready", "scheduled")

    def __init__(self) -> None:
        self.ready: collections.deque[Turn] = collections.deque()
        self.scheduled = False
        # The callback's own context, empty: each turn runs in its actor's context, and no
        # copy of the sender's is made per callback.
        self._context = contextvars.Context()

    def add(self, actor: Turn) -> None:
        self.ready.append(actor)
        if not self.scheduled:
            self.scheduled = True
            actor.loop.call_soon(self._take, context=self._context)

    def _take(self) -> None:
        self.scheduled = False
        ready = self.ready
        for _ in range(len(ready)):  # those added meanwhile wait for the next callback
            actor = ready.popleft()
            context = actor._context
            try:
                if context is None:
                    actor._take_turn()
                else:
                    context.run(actor._take_turn)
            except Exception as exc:  # a defect here; the others still take their turn
                actor.loop.call_exception_handler(
                    {"message": f"serving {actor.describe()} failed", "exception": exc}
                )
                actor._after_failed_turn()
