"""Streams: generator methods whose items reach the caller as they are produced.

A generator method ``items`` of an actor class becomes three messages of the actor:
``items`` starts the generator and answers a stream id, ``items.next`` advances it by up to
a batch of items, and ``items.close`` closes it. The generator therefore runs only inside
messages, one at a time with the actor's others: its code keeps the mailbox discipline, in
an inline actor and in a worker process alike, and a stream is ordinary asks on the wire.

The caller's :class:`Stream` pulls: it asks for the next batch as soon as it has one, so the
producer runs at most one batch ahead of the consumer (backpressure: a slow consumer holds
at most two batches, and the generator is not advanced further), each item arrives once and
in order, an exception the generator raises ends the stream at the caller with that
exception, and closing the stream (``aclose()``, leaving ``async for`` by ``break``, or the
stream being collected) closes the generator in the actor.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from .._notebook import must_await
from ._handle import AskHandle

NEXT = ".next"
CLOSE = ".close"
DEFAULT_BATCH = 16

_ids = itertools.count(1)


class _Open:
    """The generators an actor instance has started and not finished."""

    def __init__(self) -> None:
        self.by_instance: weakref.WeakKeyDictionary[Any, dict[int, Any]] = (
            weakref.WeakKeyDictionary()
        )
        self.by_id: dict[int, dict[int, Any]] = {}  # instances that refuse weak refs

    def of(self, instance: Any) -> dict[int, Any]:
        try:
            return self.by_instance.setdefault(instance, {})
        except TypeError:
            return self.by_id.setdefault(id(instance), {})


_open = _Open()


class _Failed:
    """In place of a generator that raised after some items of its last step."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


def stream_methods(
    name: str, start: Callable[..., Any], is_async: bool
) -> dict[str, tuple[Callable[..., Any], bool]]:
    """The method-table entries of generator method ``name``: ``start(instance, *args)``
    makes the generator."""

    def begin(instance: Any, *args: Any, **kwargs: Any) -> int:
        stream_id = next(_ids)
        _open.of(instance)[stream_id] = start(instance, *args, **kwargs)
        return stream_id

    def generator(instance: Any, stream_id: int) -> Any:
        try:
            gen = _open.of(instance)[stream_id]
        except KeyError:
            raise LookupError(
                f"stream {stream_id} of {name}() has ended (closed, finished, or its actor "
                "restarted)"
            ) from None
        if isinstance(gen, _Failed):  # the items before the error went with the last step
            del _open.of(instance)[stream_id]
            raise gen.error
        return gen

    def failed(instance: Any, stream_id: int, items: list[Any], error: BaseException) -> None:
        """The generator raised: the caller gets the items made before, then the error."""
        if items and isinstance(error, Exception):
            _open.of(instance)[stream_id] = _Failed(error)
        else:
            _open.of(instance).pop(stream_id, None)
            raise error

    if is_async:

        async def advance(instance: Any, stream_id: int, n: int) -> tuple[list[Any], bool]:
            gen = generator(instance, stream_id)
            items: list[Any] = []
            try:
                while len(items) < n:
                    items.append(await gen.__anext__())
            except StopAsyncIteration:
                _open.of(instance).pop(stream_id, None)
                return items, True
            except BaseException as error:
                failed(instance, stream_id, items, error)
            return items, False

        async def close(instance: Any, stream_id: int) -> None:
            gen = _open.of(instance).pop(stream_id, None)
            if gen is not None and not isinstance(gen, _Failed):
                await gen.aclose()

        return {name: (begin, False), name + NEXT: (advance, True), name + CLOSE: (close, True)}

    def advance_sync(instance: Any, stream_id: int, n: int) -> tuple[list[Any], bool]:
        gen = generator(instance, stream_id)
        items: list[Any] = []
        try:
            while len(items) < n:
                items.append(next(gen))
        except StopIteration:
            _open.of(instance).pop(stream_id, None)
            return items, True
        except BaseException as error:
            failed(instance, stream_id, items, error)
        return items, False

    def close_sync(instance: Any, stream_id: int) -> None:
        gen = _open.of(instance).pop(stream_id, None)
        if gen is not None and not isinstance(gen, _Failed):
            gen.close()

    return {name: (begin, False), name + NEXT: (advance_sync, False),
            name + CLOSE: (close_sync, False)}


def is_stream(methods: Any, name: str) -> bool:
    """Whether ``name`` is a generator method among ``methods`` (a table or a name set)."""
    return name + NEXT in methods


def check_may_block(name: str) -> None:
    """Refuse a ``for`` over the stream of ``name()`` on a thread that runs an event loop."""
    if must_await():
        raise RuntimeError(
            f"iterating over {name}() with `for` would block this thread's event loop; use "
            "`async for` here"
        )


def check_batch(batch_size: Any) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise TypeError(f"batch_size must be an int, got {batch_size!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    return batch_size


class Stream:
    """The items of one generator-method call, as the actor produces them.

    ``async for item in ref.items(n)`` in async code; ``for item in ref.items(n)`` in
    synchronous code (it blocks). The call was sent when the method was called. Raises
    what the generator raised; ``aclose()`` (or ``close()``) stops it early.
    """

    def __init__(self, method: Callable[[str], Any], name: str, opened: AskHandle[Any],
                 batch_size: int, loop: asyncio.AbstractEventLoop) -> None:
        self._method = method  # name -> the MethodRef that sends it
        self._loop = loop
        self._name = name
        self._opened = opened
        self._batch = batch_size
        self._stream_id: int | None = None
        self._pending: AskHandle[Any] | None = None
        self._items: collections.deque[Any] = collections.deque()
        self._ended = False

    def _pull(self) -> AskHandle[Any]:
        handle: AskHandle[Any] = self._method(self._name + NEXT)(
            self._stream_id, self._batch
        )
        return handle

    def _arrived(self, batch: tuple[list[Any], bool]) -> None:
        items, finished = batch
        self._items.extend(items)
        if finished:
            self._ended = True
        else:
            self._pending = self._pull()  # the next batch is made while this one is read

    # Async.

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def start(self) -> None:
        """Wait until the actor has started the generator (it runs once items are asked for);
        raises what starting it raised (``ActorDiedError`` when the actor had ended)."""
        if self._stream_id is not None or self._ended:
            return
        try:
            self._stream_id = await self._opened
        except BaseException:
            self._ended = True
            raise
        self._pending = self._pull()

    async def __anext__(self) -> Any:
        while not self._items:
            if self._ended:
                raise StopAsyncIteration
            try:
                if self._stream_id is None:
                    await self.start()
                assert self._pending is not None
                pending, self._pending = self._pending, None
                self._arrived(await pending)
            except BaseException:
                self._ended = True
                raise
        return self._items.popleft()

    async def aclose(self) -> None:
        """Stop the stream: the generator is closed in the actor (``GeneratorExit`` there)."""
        if self._end_early():
            await self._method(self._name + CLOSE)(self._stream_id)

    # Sync.

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        check_may_block(self._name)
        while not self._items:
            if self._ended:
                raise StopIteration
            try:
                if self._stream_id is None:
                    self._stream_id = self._opened.result_blocking(None)
                    self._pending = self._pull()
                assert self._pending is not None
                pending, self._pending = self._pending, None
                self._arrived(pending.result_blocking(None))
            except BaseException:
                self._ended = True
                raise
        return self._items.popleft()

    def close(self) -> None:
        """Stop the stream without waiting: the generator is closed in the actor soon."""
        if self._end_early():
            self._method(self._name + CLOSE).tell(self._stream_id)

    def _end_early(self) -> bool:
        """End here; whether the actor's generator is still open and must be closed."""
        if self._ended:
            return False
        self._ended = True
        self._items.clear()
        if self._stream_id is None:
            if not self._opened.done() or self._opened.cancelled():
                return False  # not started: nothing in the actor to close, once it answers
            if self._opened.exception() is not None:
                return False
            self._stream_id = self._opened.result()
        return True

    def __del__(self) -> None:
        # A stream dropped unfinished closes its generator, from the actor's loop (this may
        # run on any thread, at any time).
        if not self._ended and self._stream_id is not None:
            close = self._method(self._name + CLOSE)
            try:
                self._loop.call_soon_threadsafe(_tell_quietly, close, self._stream_id)
            except RuntimeError:  # the loop has closed: the actor is gone with it
                pass

    def __repr__(self) -> str:
        state = "ended" if self._ended else "open"
        return f"<actorrt.Stream {self._name}() {state}>"


def _tell_quietly(close: Any, stream_id: int) -> None:
    try:
        close.tell(stream_id)
    except Exception:  # the actor may have ended since: nothing is left to close
        pass
