"""Who is awaiting whom: the record the resource broker reads to find blocked actors.

An edge ``waiter -> target`` exists while actor ``waiter`` awaits, with no timeout, an ask
to actor ``target``: with ``await``, or from synchronous code with ``actorrt.get``. An
actor is blocked (docs/broker.md) when it awaits a resource request or an ask to a blocked
actor; this graph is the "ask" half of that definition. A wait with a timeout ends by
itself and is no edge, however it is bounded. Nor is an actor's wait on its own ask (one
that serves several messages at once: the asked message takes another of its slots; one that
serves one at a time is refused at the call): it waits on no other holder.

Each awaited answer is registered with its edge, so that when the broker proves the wait can
never end (a cycle of asks), :meth:`WaitGraph.fail` ends it with the error that says why.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Hashable
from typing import Any

Listener = Callable[[Hashable, Hashable, bool], None]

# Python 3.11's asyncio.wait_for runs what it bounds in a task of its own, released by a timer
# through this function: a task with it among its done callbacks is bounded by its awaiter.
_RELEASE_WAITER = getattr(asyncio.tasks, "_release_waiter", None)


def bounded_by_awaiter(unbounded: object = None) -> bool:
    """Whether the running task is bounded by ``asyncio.wait_for(..., timeout)`` (so a wait
    in it ends by itself and is no wait edge, like a wait with a timeout option). Python 3.12
    and later bound ``wait_for`` inside the awaiting task, where it cannot be seen.
    ``unbounded``: a task known to be awaited by nobody with a timeout (an actor's own)."""
    if _RELEASE_WAITER is None:
        return False
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return False
    if task is unbounded:
        return False
    callbacks = getattr(task, "_callbacks", None)
    if not callbacks:
        return False
    for entry in callbacks:
        callback = entry[0] if isinstance(entry, tuple) else entry
        if getattr(callback, "func", None) is _RELEASE_WAITER:
            return True
    return False
Answer = asyncio.Future[Any] | concurrent.futures.Future[Any]


class WaitGraph:
    """A multigraph of wait edges, counted so nested or concurrent awaits compose.

    ``listener(waiter, target, added)`` hears of every change of a pair's count (``added``:
    whether the pair still has an edge): the runtime passes that on to the broker (or, in a
    worker, to the owning runtime's broker), with whether the waiter can serve no other
    message now (:meth:`saturated`). Called on the runtime's loop only.
    """

    __slots__ = ("_answers", "_edges", "listener")

    def __init__(self) -> None:
        self._edges: dict[Hashable, dict[Hashable, int]] = {}
        self._answers: dict[tuple[Hashable, Hashable], list[Answer]] = {}
        self.listener: Listener | None = None

    def add(self, waiter: Hashable, target: Hashable, answer: Answer | None = None) -> None:
        if waiter == target:
            return  # a wait on its own ask: no edge (see the module's docstring)
        targets = self._edges.setdefault(waiter, {})
        targets[target] = targets.get(target, 0) + 1
        if answer is not None:
            self._answers.setdefault((waiter, target), []).append(answer)
        if self.listener is not None:
            self.listener(waiter, target, True)

    def remove(self, waiter: Hashable, target: Hashable, answer: Answer | None = None) -> None:
        if waiter == target:
            return
        if answer is not None:
            answers = self._answers.get((waiter, target))
            if answers is not None:
                try:
                    answers.remove(answer)
                except ValueError:
                    pass
                if not answers:
                    del self._answers[(waiter, target)]
        targets = self._edges.get(waiter)
        if targets is None:
            return
        count = targets.get(target, 0) - 1
        if count > 0:
            targets[target] = count
        else:
            targets.pop(target, None)
            if not targets:
                del self._edges[waiter]
        if self.listener is not None:
            self.listener(waiter, target, count > 0)

    def fail(self, waiter: Hashable, target: Hashable, error: BaseException) -> bool:
        """End every wait of ``waiter`` on ``target`` with ``error``; whether there was one."""
        failed = False
        for answer in list(self._answers.get((waiter, target), ())):
            if not answer.done():
                try:
                    answer.set_exception(error)
                except (asyncio.InvalidStateError, concurrent.futures.InvalidStateError):
                    continue  # answered in the meantime (from another thread)
                failed = True
        return failed

    def saturated(self, waiter: Hashable, max_concurrency: int) -> bool:
        """Whether ``waiter``, serving up to ``max_concurrency`` messages at once, has every
        one of them awaiting an ask (each recorded wait is one message's: a task its code
        started records none), so it cannot serve another message until one is answered."""
        targets = self._edges.get(waiter)
        return max_concurrency == 1 or (
            targets is not None and sum(targets.values()) >= max_concurrency
        )

    def waiting_on(self, waiter: Hashable) -> frozenset[Hashable]:
        """The targets ``waiter`` is awaiting right now."""
        return frozenset(self._edges.get(waiter, ()))

    def edges(self) -> list[tuple[Hashable, Hashable]]:
        """Every edge, once per distinct pair."""
        return [(w, t) for w, targets in self._edges.items() for t in targets]

    def forget(self, node: Hashable) -> None:
        """Drop every edge from ``node`` (it ended); the broker forgets it at release."""
        self._edges.pop(node, None)
