"""The runtime: owns every actor of this process and shuts them all down.

One runtime runs per process at a time. ``async with Runtime()`` runs it inside the
caller's event loop (embedding in a service); ``actorrt.run(main)`` gives a coroutine a fresh
runtime on uvloop; ``actorrt.init()`` runs one on a background thread for plain scripts.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import os
import secrets
import threading
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from ._cell import ActorCell
from ._context import current_cell
from ._errors import (
    ActorNotFoundError,
    NoRuntimeError,
    RuntimeAlreadyRunningError,
    RuntimeClosedError,
)
from ._ref import ActorRef
from ._waits import WaitGraph

if TYPE_CHECKING:
    from ._actor import ActorClass

logger = logging.getLogger("actorrt")

T = TypeVar("T")
A = TypeVar("A")

_current: Runtime | None = None
_current_lock = threading.Lock()


def current_runtime() -> Runtime:
    """The runtime running in this process; ``NoRuntimeError`` if there is none."""
    runtime = _current
    if runtime is None:
        raise NoRuntimeError(
            "no actorrt runtime is running in this process; start one with "
            "`async with actorrt.Runtime():`, `actorrt.run(main)` or `actorrt.init()`"
        )
    return runtime


class Runtime:
    """An actor runtime bound to the event loop it is entered on.

    Args:
        shutdown_timeout: seconds that leaving the ``async with`` block gives actors to stop
            gracefully (their queued messages run, then ``on_stop``) before the rest are
            killed.

    Example::

        async with actorrt.Runtime() as rt:
            counter = await Counter.spawn()
            print(await counter.incr())
    """

    def __init__(self, *, shutdown_timeout: float = 10.0) -> None:
        if isinstance(shutdown_timeout, bool) or not isinstance(shutdown_timeout, int | float):
            raise TypeError(f"shutdown_timeout must be a number, got {shutdown_timeout!r}")
        if not math.isfinite(shutdown_timeout) or shutdown_timeout < 0:
            raise ValueError(f"shutdown_timeout must be >= 0 and finite, got {shutdown_timeout}")
        self.shutdown_timeout = float(shutdown_timeout)
        self.runtime_id = secrets.token_hex(4)
        self.waits = WaitGraph()
        self.closed = False
        self._closing = False
        self._entered = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._actors: dict[str, ActorCell] = {}
        self._names: dict[str, ActorCell] = {}
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("this Runtime has not been entered with `async with`")
        return self._loop

    async def __aenter__(self) -> Runtime:
        global _current
        if self._entered:
            raise RuntimeError("a Runtime can be entered once; create a new one")
        with _current_lock:
            if _current is not None:
                raise RuntimeAlreadyRunningError(
                    f"a runtime is already running in process {os.getpid()}; one runtime "
                    "runs per process: use it (actors reach it through refs) or shut it down "
                    "first"
                )
            _current = self
        self._entered = True
        self._loop = asyncio.get_running_loop()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()

    async def shutdown(self) -> None:
        """Stop every actor (gracefully, then by kill after ``shutdown_timeout``)."""
        global _current
        if self.closed or self._closing:
            return
        self._closing = True
        try:
            await self._stop_all()
            await self._await_tasks()
        finally:
            self.closed = True
            with _current_lock:
                if _current is self:
                    _current = None

    async def _stop_all(self) -> None:
        roots = [cell for cell in self._actors.values() if cell.parent is None]
        for cell in self._actors.values():
            cell._end_reason = cell._end_reason or ("runtime shut down", None)
        if not roots:
            return
        stops = [asyncio.ensure_future(cell.stop()) for cell in roots]
        _done, pending = await asyncio.wait(stops, timeout=self.shutdown_timeout)
        if pending:
            stuck = [c.describe() for c in self._actors.values()]
            logger.warning(
                "actors did not stop within %.1f s, killing them: %s",
                self.shutdown_timeout,
                ", ".join(stuck),
            )
            for cell in list(self._actors.values()):
                cell.kill_nowait()
            await asyncio.wait(stops)
        for cell in list(self._actors.values()):  # anything spawned during the shutdown
            cell.kill_nowait()
            await asyncio.shield(cell.died)

    async def _await_tasks(self) -> None:
        """Wait until every actor task has returned, not merely reported its end."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))

    # ------------------------------------------------------------------ actors

    async def spawn(
        self, actor_class: ActorClass[A], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> ActorRef[A]:
        """Start an actor and wait for its constructor and ``on_start``."""
        parent = current_cell.get()
        if asyncio.get_running_loop() is not self.loop:
            return await self.call_on_loop(self._spawn(actor_class, args, kwargs, None))
        if parent is not None and parent.runtime is not self:
            parent = None
        return await self._spawn(actor_class, args, kwargs, parent)

    async def _spawn(
        self,
        actor_class: ActorClass[A],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        parent: ActorCell | None,
    ) -> ActorRef[A]:
        if self._closing:
            raise RuntimeClosedError("the runtime is shutting down; no new actors start")
        if parent is not None and not parent.accepting and parent.died.done():
            raise RuntimeClosedError(f"{parent.describe()} has ended; it cannot spawn")
        cell = ActorCell(self, actor_class, args, kwargs, parent, self._new_id())
        self._register(cell)
        started: asyncio.Future[None] = self.loop.create_future()
        cell.start(started)
        assert cell.task is not None
        self._tasks.add(cell.task)
        cell.task.add_done_callback(self._tasks.discard)
        try:
            await asyncio.shield(started)
        except asyncio.CancelledError:
            cell.kill_nowait()  # the caller gave up: withdraw the half-started actor
            raise
        except BaseException:
            await asyncio.shield(cell.died)
            raise
        return ActorRef(cell)

    def _new_id(self) -> str:
        return f"{self.runtime_id}-{next(self._ids)}"

    def _register(self, cell: ActorCell) -> None:
        if cell.name is not None:
            existing = self._names.get(cell.name)
            if existing is not None:
                raise ValueError(
                    f"the name {cell.name!r} is taken by {existing.describe()}; names are "
                    "unique among live actors"
                )
            self._names[cell.name] = cell
        self._actors[cell.actor_id] = cell
        if cell.parent is not None:
            cell.parent.children.add(cell)

    def forget(self, cell: ActorCell) -> None:
        """Drop an ended actor from the registries."""
        self._actors.pop(cell.actor_id, None)
        if cell.name is not None and self._names.get(cell.name) is cell:
            del self._names[cell.name]
        self.waits.forget(cell.actor_id)

    def get_actor(self, name: str) -> ActorRef[Any]:
        if not isinstance(name, str):
            raise TypeError(f"actor names are strings, got {name!r}")
        cell = self._names.get(name)
        if cell is None:
            known = ", ".join(sorted(map(repr, self._names))) or "none"
            raise ActorNotFoundError(
                f"no live actor is named {name!r} (named actors: {known})"
            )
        return ActorRef(cell)

    def live_actors(self) -> list[ActorRef[Any]]:
        """Refs to every actor that has not ended."""
        return [ActorRef(cell) for cell in self._actors.values()]

    async def call_on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the runtime's loop from another thread's loop."""
        if self.closed:
            coro.close()
            raise RuntimeClosedError("the runtime has shut down")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return await asyncio.wrap_future(future)


async def get_actor(name: str) -> ActorRef[Any]:
    """The ref of the live actor registered as ``name``; ``ActorNotFoundError`` if none."""
    runtime = current_runtime()
    if asyncio.get_running_loop() is not runtime.loop:

        async def lookup() -> ActorRef[Any]:
            return runtime.get_actor(name)

        return await runtime.call_on_loop(lookup())
    return runtime.get_actor(name)


def run(main: Callable[[], Awaitable[T]] | Coroutine[Any, Any, T], **runtime_kwargs: Any) -> T:
    """Run ``main`` (an async function or a coroutine) with a fresh runtime on uvloop.

    Returns what ``main`` returns; the runtime shuts down when it ends.
    """
    import uvloop

    async def runner() -> T:
        async with Runtime(**runtime_kwargs):
            if asyncio.iscoroutine(main):
                return await main
            if callable(main):
                return await main()
            raise TypeError(f"actorrt.run() takes an async function or coroutine, got {main!r}")

    if not (asyncio.iscoroutine(main) or callable(main)):
        raise TypeError(f"actorrt.run() takes an async function or coroutine, got {main!r}")
    result: T = uvloop.run(runner())
    return result
