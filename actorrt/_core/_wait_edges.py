"""One actor's wait on several answers at once (``actorrt.wait``), as wait edges.

An actor that waits, with no timeout, for ``needed`` of several ask or task handles is
blocked on them as an ``await`` of one is (``_core._waits``): each unanswered handle it needs
is an edge to that handle's actor, so a cycle through the wait is reported as a deadlock
instead of hanging. While more handles are unanswered than it needs, any one answer could end
the wait, so it waits on none of them in particular and records no edge (the broker's edges
all must be met); from the moment every unanswered handle is needed, each is an edge until
its answer comes. As for an ``await``, edges begin once the wait has lasted ``EDGE_DELAY``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ._context import RunningActor
from ._handle import EDGE_DELAY, AskHandle
from ._waits import Answer


class WaitEdges:
    """The edges of one wait of ``waiter`` for ``needed`` of ``handles``; made and used on
    the waiter's loop. ``answer`` is what the wait waits on: the broker's proof of a deadlock
    fails it with the error that says why."""

    __slots__ = ("_answer", "_closed", "_graph", "_needed", "_pending", "_recorded",
                 "_started", "_timer", "_waiter_id")

    def __init__(
        self, waiter: RunningActor, handles: list[AskHandle[Any]], needed: int, answer: Answer
    ) -> None:
        self._graph = waiter.runtime.waits
        self._waiter_id = waiter.actor_id
        self._answer = answer
        self._pending = [h for h in handles if not h.done()]
        self._needed = needed
        self._recorded: dict[int, tuple[AskHandle[Any], str]] = {}  # id(handle) -> target
        self._started = self._closed = False
        for handle in self._pending:
            handle.add_done_callback(self._settled)
        self._timer = waiter.loop.call_later(EDGE_DELAY, self._start)

    def _start(self) -> None:
        self._started = True
        self._update()

    def _settled(self, handle: AskHandle[Any]) -> None:
        if self._closed:
            return
        try:
            self._pending.remove(handle)
        except ValueError:
            return
        self._needed -= 1
        recorded = self._recorded.pop(id(handle), None)
        if recorded is not None:
            self._graph.remove(self._waiter_id, recorded[1], self._answer)

    def _update(self) -> None:
        if self._closed or not self._started or self._needed < len(self._pending):
            return
        for handle in self._pending:
            if id(handle) not in self._recorded:
                target = handle.target_id
                self._recorded[id(handle)] = (handle, target)
                self._graph.add(self._waiter_id, target, self._answer)

    def end(self) -> None:
        """The wait is over: every edge it has goes."""
        if self._closed:
            return
        self._closed = True
        self._timer.cancel()
        for handle in self._pending:
            handle.remove_done_callback(self._settled)
        for _, target in self._recorded.values():
            self._graph.remove(self._waiter_id, target, self._answer)
        self._recorded.clear()


def waiting_actor_task(waiter: RunningActor | None) -> bool:
    """Whether the running task is ``waiter``'s own (one that serves its messages), whose
    waits block the actor; a task its code started leaves it free to serve."""
    if waiter is None:
        return False
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return False
    return task is not None and waiter.serves_in(task)
