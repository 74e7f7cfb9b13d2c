"""A fixed set of actors that takes values one at a time each: Ray's ``ActorPool``.

The pool sends a value to an idle actor at once (``fn(actor, value)``, which returns the
ask's handle) and queues it when every actor is busy. An actor is busy until its answer
arrives; then the next queued value goes to it, on whatever thread the answer came on, so a
pool keeps its actors fed while the caller reads results at its own pace. Results are read
in the order of submission (``get_next``, ``map``) or of arrival (``get_next_unordered``,
``map_unordered``).

Each reading method works two ways, as ``actorrt.wait`` does: from synchronous code it
blocks and returns the result; on a thread that runs an event loop it returns an awaitable
(``await pool.get_next()``), and the iterators of ``map`` are also async iterators
(``async for x in pool.map(...)``).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import math
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

from .._core._handle import AskHandle
from .._errors import ActorDiedError, ConnectionLostError
from ._sync import may_block

__all__ = ["ActorPool"]

TIMED_OUT = "Timed out waiting for result"


class _Item:
    """One submitted value: sent (``handle``) or still queued for an idle actor."""

    __slots__ = ("actor", "fn", "handle", "index", "settled", "value")

    def __init__(self, index: int, fn: Callable[[Any, Any], Any], value: Any) -> None:
        self.index = index
        self.fn = fn
        self.value = value
        self.handle: AskHandle[Any] | None = None
        self.actor: Any = None
        self.settled = False  # its answer has arrived


class ActorPool:
    """Runs values through a fixed set of actors, one value per actor at a time.

    ``fn(actor, value)`` sends the work and returns the ask's handle:
    ``pool.map(lambda a, v: a.double(v), values)`` (Ray's ``a.double.remote(v)``).

    Args:
        actors: the refs of the actors to use (more can be added with :meth:`push`).
        max_in_flight: values sent to one actor before its first answer (not in Ray,
            whose pools send one): 2 lets an actor start on its next value while the
            answer to the last travels back, which keeps short values from idling it; the
            second waits in the actor's mailbox, so a slower actor cannot hand it to a
            faster one.

    Raises:
        TypeError, ValueError: ``max_in_flight`` is not an int of at least 1.
    """

    def __init__(self, actors: Iterable[Any], *, max_in_flight: int = 1) -> None:
        if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int):
            raise TypeError(f"max_in_flight must be an int, got {max_in_flight!r}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self._depth = max_in_flight
        # Reentrant: an answer that has already come runs its callback inside submit().
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._async_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        # One entry per free place (max_in_flight per actor), and one per value in flight.
        members = list(actors)
        self._idle: list[Any] = [a for _ in range(max_in_flight) for a in members]
        self._busy: list[Any] = []
        self._dead: list[Any] = []  # actors whose answer said they died
        self._queued: collections.deque[_Item] = collections.deque()
        self._unread: dict[int, _Item] = {}  # submitted, result not returned yet, by index
        self._arrived: collections.deque[_Item] = collections.deque()  # in arrival order
        self._indexes = itertools.count()

    # Sending.

    def submit(self, fn: Callable[[Any, Any], AskHandle[Any]], value: Any) -> None:
        """Send ``value`` to an idle actor now (``fn(actor, value)``), or queue it until one
        is free. Its result comes back through ``get_next()`` / ``get_next_unordered()``."""
        if not callable(fn):
            raise TypeError(f"ActorPool.submit() takes fn(actor, value) first, got {fn!r}")
        with self._lock:
            item = _Item(next(self._indexes), fn, value)
            self._unread[item.index] = item
            if self._idle:
                self._send(item, self._idle.pop())
            else:
                self._queued.append(item)

    def map(self, fn: Callable[[Any, Any], AskHandle[Any]], values: Iterable[Any]) -> PoolResults:
        """Send every value (as :meth:`submit`) and iterate over the results in the order of
        ``values``: ``for r in pool.map(...)`` in synchronous code, ``async for`` in async
        code. Results not read from earlier submissions are dropped first (as in Ray)."""
        self._drop_unread()
        for value in values:
            self.submit(fn, value)
        return PoolResults(self, ordered=True)

    def map_unordered(
        self, fn: Callable[[Any, Any], AskHandle[Any]], values: Iterable[Any]
    ) -> PoolResults:
        """As :meth:`map`, with the results in the order they arrive."""
        self._drop_unread()
        for value in values:
            self.submit(fn, value)
        return PoolResults(self, ordered=False)

    def _send(self, item: _Item, actor: Any) -> None:
        """Send ``item`` to ``actor`` (lock held)."""
        handle = item.fn(actor, item.value)
        if not isinstance(handle, AskHandle):
            self._idle.append(actor)
            del self._unread[item.index]
            raise TypeError(
                "ActorPool's fn(actor, value) must return the handle of an ask, such as "
                f"`lambda a, v: a.method(v)`; it returned {type(handle).__name__}: {handle!r}"
            )
        item.handle, item.actor = handle, actor
        self._busy.append(actor)
        handle.add_done_callback(lambda _h: self._settled(item))

    def _settled(self, item: _Item) -> None:
        """``item``'s answer has arrived: its actor takes the next queued value (unless the
        answer says it died), and waiting readers are woken."""
        with self._lock:
            item.settled = True
            actor, item.fn, item.value = item.actor, _sent, None
            self._busy.remove(actor)
            if item.index in self._unread:
                self._arrived.append(item)
            if _died(item.handle) or actor in self._dead:
                if actor not in self._dead:
                    self._dead.append(actor)
                self._idle = [a for a in self._idle if a != actor]
            else:
                self._idle.append(actor)
            self._feed()
            self._wake()

    def _feed(self) -> None:
        while self._queued and self._idle:
            self._send(self._queued.popleft(), self._idle.pop())

    def _wake(self) -> None:
        self._changed.notify_all()
        for loop, waiter in self._async_waiters:
            loop.call_soon_threadsafe(_resolve, waiter)
        self._async_waiters.clear()

    def _drop_unread(self) -> None:
        with self._lock:
            for item in self._unread.values():
                if item.handle is None:
                    self._queued.remove(item)
            self._unread.clear()
            self._arrived.clear()

    # State.

    def has_next(self) -> bool:
        """Whether any submitted value's result has not been returned yet."""
        return bool(self._unread)

    def has_free(self) -> bool:
        """Whether an actor can take a value now and no value waits for one."""
        return bool(self._idle) and not self._queued

    def pop_idle(self) -> Any:
        """Take an idle actor (one with no value in flight) out of the pool and return it;
        ``None`` if none is."""
        with self._lock:
            if self._queued:
                return None
            for actor in reversed(self._idle):
                if actor not in self._busy:
                    self._idle = [a for a in self._idle if a != actor]
                    return actor
            return None

    def push(self, actor: Any) -> None:
        """Add ``actor`` to the pool (it takes a queued value at once, if any).

        Raises:
            ValueError: the actor is in the pool already.
        """
        with self._lock:
            if actor in self._idle or actor in self._busy:
                raise ValueError(f"{actor!r} already belongs to this ActorPool")
            if actor in self._dead:
                self._dead.remove(actor)
            self._idle.extend([actor] * self._depth)
            self._feed()

    # Reading.

    def get_next(self, timeout: float | None = None, ignore_if_timedout: bool = False) -> Any:
        """The result of the earliest submitted value not returned yet (its error is raised).

        Blocks in synchronous code; on a thread that runs an event loop it returns an
        awaitable of the result.

        Args:
            timeout: seconds to wait at most (``None``: no limit).
            ignore_if_timedout: on a timeout, skip that value for good (its result is
                dropped when it comes) before raising.

        Raises:
            StopIteration: nothing was submitted that has not been returned (at the call).
            TimeoutError: ``timeout`` passed first.
        """
        return self._read(True, timeout, ignore_if_timedout)

    def get_next_unordered(
        self, timeout: float | None = None, ignore_if_timedout: bool = False
    ) -> Any:
        """As :meth:`get_next`, but whichever result arrived first."""
        return self._read(False, timeout, ignore_if_timedout)

    def _read(self, ordered: bool, timeout: float | None, ignore: bool) -> Any:
        seconds = _check_timeout(timeout)
        if not self._unread:
            raise StopIteration("No more results to get: every submitted value was returned")
        if may_block():
            handle = self._wait_blocking(ordered, seconds, ignore).handle
            assert handle is not None
            if not handle.cancelled() and handle.exception() is None:
                return handle.result()  # arrived: no need to wait again
            return handle.result_blocking(None)  # raises the error, said as get() says it
        return self._read_async(ordered, seconds, ignore)

    async def _read_async(self, ordered: bool, seconds: float | None, ignore: bool) -> Any:
        item = await self._wait_async(ordered, seconds, ignore)
        assert item.handle is not None
        return await item.handle

    def _take(self, ordered: bool) -> _Item | None:
        """The next result to return, taken off the books, if it has arrived (lock held)."""
        arrived = self._arrived
        while arrived and arrived[0].index not in self._unread:
            arrived.popleft()  # returned already (in order), or dropped
        if ordered:
            item = self._unread[min(self._unread)]
            if not item.settled:
                return None
        else:
            if not arrived:
                return None
            item = arrived.popleft()
        del self._unread[item.index]
        return item

    def _timed_out(self, ordered: bool, ignore: bool) -> TimeoutError:
        """The error for a read whose time passed (lock held); ``ignore``: skip the value."""
        if not ignore:
            return TimeoutError(TIMED_OUT)
        index = min(self._unread) if ordered else next(iter(self._unread))
        item = self._unread.pop(index)
        if item.handle is None:
            self._queued.remove(item)
        return TimeoutError(f"{TIMED_OUT}; the value {item.value!r} was skipped")

    def _wait_blocking(self, ordered: bool, seconds: float | None, ignore: bool) -> _Item:
        deadline = None if seconds is None else time.monotonic() + seconds
        with self._lock:
            while (item := self._take(ordered)) is None:
                self._stopped_if_empty()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise self._timed_out(ordered, ignore)
                self._changed.wait(left)
            return item

    async def _wait_async(self, ordered: bool, seconds: float | None, ignore: bool) -> _Item:
        loop = asyncio.get_running_loop()
        deadline = None if seconds is None else loop.time() + seconds
        while True:
            with self._lock:
                item = self._take(ordered)
                if item is not None:
                    return item
                self._stopped_if_empty()
                left = None if deadline is None else deadline - loop.time()
                if left is not None and left <= 0:
                    raise self._timed_out(ordered, ignore)
                waiter: asyncio.Future[None] = loop.create_future()
                self._async_waiters.append((loop, waiter))
            try:
                await asyncio.wait([waiter], timeout=left)
            finally:
                waiter.cancel()

    def _stopped_if_empty(self) -> None:
        """A read with nothing left to return (another reader took it) (lock held)."""
        if not self._unread:
            raise StopIteration("No more results to get: every submitted value was returned")
        if not self._idle and not self._busy:
            raise ActorDiedError(
                f"every actor of the ActorPool has died; {len(self._queued)} value(s) still "
                "wait for one: push() a new actor, or read no further"
            )

    def __repr__(self) -> str:
        return (
            f"<actorrt.util.ActorPool free={len(self._idle)} in_flight={len(self._busy)} "
            f"queued={len(self._queued)} unread={len(self._unread)}>"
        )


class PoolResults:
    """The results of ``map``/``map_unordered``: an iterator (blocking) and an async
    iterator."""

    def __init__(self, pool: ActorPool, ordered: bool) -> None:
        self._pool = pool
        self._ordered = ordered

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        if not self._pool.has_next():
            raise StopIteration
        if not may_block():
            raise RuntimeError(
                "iterating over ActorPool.map() with `for` would block this thread's event "
                "loop; use `async for` here"
            )
        return self._pool._read(self._ordered, None, False)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        if not self._pool.has_next():
            raise StopAsyncIteration
        return await self._pool._read_async(self._ordered, None, False)


def _sent(_actor: Any, _value: Any) -> None:
    """What an item's ``fn`` becomes once sent (so the pool holds no reference to it)."""


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _died(handle: AskHandle[Any] | None) -> bool:
    """Whether the answer says its actor has died (so it takes no further value)."""
    if handle is None or handle.cancelled():
        return False
    return isinstance(handle.exception(), ActorDiedError | ConnectionLostError)


def _check_timeout(timeout: Any) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout must be a number of seconds or None, got {timeout!r}")
    if math.isnan(timeout) or timeout < 0:
        raise ValueError(f"timeout must be 0 or more seconds (or None), got {timeout!r}")
    return None if math.isinf(timeout) else float(timeout)
