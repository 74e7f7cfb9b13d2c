"""Generator tasks: a call of a generator task function streams its items to the caller.

The call takes a runner of its lane as any call does and starts the function's generator
there through the runner's generator method (``_core._streams``): the items come in batches,
pulled by the caller, so the generator runs at most one batch ahead of the consumer; each item
arrives once and in order; an exception the function raises ends the stream at the caller with
that exception; closing the stream (``aclose()``, ``close()``, leaving ``async for`` by
``break``, or dropping it) closes the generator in its worker. The runner carries that one
call until the stream ends, then goes back to its lane (handed on, kept warm, or stopped). A
call whose worker process dies before the generator has started is run again on a fresh
runner, up to ``max_retries`` times; once it has started, its death ends the stream with
``ActorDiedError`` (the items delivered cannot be taken back).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

from .._core._actor import ActorClass
from .._core._streams import Stream, check_may_block
from .._errors import ActorDiedError
from ._task_lanes import RETRIED, Lane, hand_on, own, runner_for, stop_quietly

try:
    from asyncio import _get_running_loop as _running_loop
except ImportError:  # pragma: no cover - CPython always has it
    from asyncio.events import _get_running_loop as _running_loop

__all__ = ["TaskStream", "open_stream"]

Opened = tuple[Lane, Any, Stream]  # the lane, the runner, the runner's stream of the call


async def open_stream(
    lane: Lane,
    runner_class: ActorClass[Any],
    method: str,
    call: tuple[Any, tuple[Any, ...], dict[str, Any]],
    max_retries: int,
) -> Opened:
    """Take a runner of ``lane`` and start the generator there (``call``: what the runner's
    generator ``method`` takes: the function as sent, its args and kwargs)."""
    for attempt in itertools.count():
        runner = await runner_for(lane, runner_class)
        stream: Stream = getattr(runner, method)(*call)
        try:
            await stream.start()
        except ActorDiedError as died:
            if died.reason not in RETRIED or 0 <= max_retries <= attempt:
                raise
            continue
        except BaseException:
            own(asyncio.ensure_future(stop_quietly(runner)))
            raise
        return lane, runner, stream
    raise AssertionError("unreachable")  # pragma: no cover


class TaskStream:
    """The items of one call of a generator task, as its worker produces them.

    ``async for item in f(x)`` in async code; ``for item in f(x)`` in synchronous code (it
    blocks). The call was sent when the function was called. Raises what the function
    raised; ``aclose()`` (or ``close()``) stops it early, closing the generator in its worker.
    """

    def __init__(
        self,
        opening: asyncio.Future[Opened] | concurrent.futures.Future[Opened],
        loop: asyncio.AbstractEventLoop,
        name: str,
    ) -> None:
        self._opening = opening
        self._loop = loop
        self._name = name
        self._opened: Opened | None = None
        self._closed = False  # closed by the caller
        self._released = False  # its runner went back to the lane (or was stopped)

    # Async.

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        if self._closed:
            raise StopAsyncIteration
        if self._opened is None:
            opening = self._opening
            if isinstance(opening, concurrent.futures.Future):
                self._opened = await asyncio.wrap_future(opening)
            else:
                self._opened = await asyncio.shield(opening)
        try:
            return await self._opened[2].__anext__()
        except BaseException as error:
            self._ended_by(error)
            raise

    async def aclose(self) -> None:
        """Stop the stream: the generator is closed in its worker (``GeneratorExit``)."""
        if self._begin_close():
            assert self._opened is not None
            await self._opened[2].aclose()
            self._release(reuse=True)

    # Sync.

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        check_may_block(self._name)
        if self._closed:
            raise StopIteration
        if self._opened is None:
            opening = self._opening
            if isinstance(opening, concurrent.futures.Future):
                self._opened = opening.result()
            else:
                self._opened = asyncio.run_coroutine_threadsafe(
                    _awaited(opening), self._loop
                ).result()
        try:
            return next(self._opened[2])
        except BaseException as error:
            self._ended_by(error)
            raise

    def close(self) -> None:
        """Stop the stream without waiting: the generator is closed in its worker soon."""
        if self._begin_close():
            assert self._opened is not None
            self._opened[2].close()
            self._release(reuse=True)

    # The runner's way back.

    def _begin_close(self) -> bool:
        """Close here; whether the stream was open, with its runner, and must close there."""
        if self._closed or self._released:
            self._closed = True
            return False
        self._closed = True
        if self._opened is None:
            if self._opening.done():
                if not self._opening.cancelled() and self._opening.exception() is None:
                    self._opened = self._opening.result()
                    return True
                return False
            # Not started yet: the runner it gets, if any, goes back once it has it.
            self._opening.add_done_callback(self._opened_after_close)
            self._opening.cancel()
            return False
        return True

    def _opened_after_close(self, opening: Any) -> None:
        if opening.cancelled() or opening.exception() is not None:
            return
        self._opened = opening.result()
        self._opened[2].close()
        self._release(reuse=True)

    def _ended_by(self, error: BaseException) -> None:
        """The stream ended (its end, the function's exception, its worker's death, or the
        caller's wait cancelled): the runner goes back, unless its state is unknown."""
        finished = isinstance(error, StopIteration | StopAsyncIteration)
        raised = isinstance(error, Exception) and not isinstance(error, ActorDiedError)
        self._release(reuse=finished or raised)

    def _release(self, reuse: bool) -> None:
        if self._released or self._opened is None:
            return
        self._released = True
        lane, runner, _ = self._opened

        def back() -> None:
            if not (reuse and (hand_on(lane, runner) or lane.park(runner))):
                own(asyncio.ensure_future(stop_quietly(runner)))

        if _running_loop() is self._loop:
            back()
        else:
            try:
                self._loop.call_soon_threadsafe(back)
            except RuntimeError:  # the runtime has ended, and its runners with it
                pass

    def __del__(self) -> None:
        # Dropped unfinished: the runner's stream closes its generator by itself; the runner
        # goes back to its lane.
        if not self._released and self._opened is not None:
            self._release(reuse=True)

    def __repr__(self) -> str:
        state = "ended" if self._closed or self._released else "open"
        return f"<actorrt.TaskStream {self._name}() {state}>"


async def _awaited(future: asyncio.Future[Opened]) -> Opened:
    return await asyncio.shield(future)
