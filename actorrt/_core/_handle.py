"""The future-like handle an ask returns.

The message was sent when the method was called; the handle only waits for the answer. It
can be awaited (any number of times), passed to ``actorrt.get``, or polled with ``done()``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import time
from collections.abc import Callable, Generator
from typing import Any, Final, Generic, Protocol, TypeVar

from .._errors import AskTimeoutError, ConnectionLostError, DeadlockError
from ._context import RunningActor, current_cell, running_actor

try:
    from asyncio import _get_running_loop as _running_loop
except ImportError:  # pragma: no cover - CPython always has it
    from asyncio.events import _get_running_loop as _running_loop


class Target(Protocol):
    """What a handle needs of the actor it waits on: an inline cell or a proxy."""

    actor_id: str
    inline: bool

    def describe(self) -> str: ...

    async def lost(self) -> BaseException: ...

    def withdraw(self, answer: asyncio.Future[Any] | concurrent.futures.Future[Any]) -> None:
        """The caller gave up on the ask that ``answer`` (cancelled by now) belongs to: an
        actor elsewhere is told, so a queued message is dropped there too."""
        ...

T = TypeVar("T")

# An actor's wait on an ask becomes a wait edge only once it has lasted this long: most asks
# are answered sooner, and an edge costs a message to the owning runtime when the waiter is
# in a worker process. The runtime's deadlock check runs this much sooner after an edge
# (``actorrt._processes._scheduler``), so a deadlock is reported as soon as before.
EDGE_DELAY = 0.01


class _LazyEdge:
    """A wait edge added after ``EDGE_DELAY`` unless the wait ended first."""

    # __slots__ for speed: one per ask an actor awaits.
    __slots__ = ("_args", "_graph", "_timer", "added")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        graph: Any,
        waiter: str,
        target: str,
        answer: asyncio.Future[Any] | concurrent.futures.Future[Any],
    ) -> None:
        self._graph = graph
        self._args = (waiter, target, answer)
        self.added = False
        self._timer = loop.call_later(EDGE_DELAY, self._add)

    def _add(self) -> None:
        self.added = True
        self._graph.add(*self._args)

    def end(self) -> None:
        if self.added:
            self._graph.remove(*self._args)
        else:
            self._timer.cancel()


# The class of the futures an event loop makes (``loop.create_future()``; uvloop's too).
_LOOP_FUTURE: Final = asyncio.Future


def _same(waiter: RunningActor, target: Target) -> bool:
    """Whether the waiting actor is the one it asks (a cell is both)."""
    return waiter is target  # type: ignore[comparison-overlap]


class AskHandle(Generic[T]):
    """The pending answer to one ask.

    Awaiting it gives the method's return value, or raises the exception the method raised
    (or :class:`~actorrt.ActorDiedError` when the actor ended first, or
    :class:`~actorrt.AskTimeoutError` when a timeout was set and passed).

    A caller that gives up (its timeout passes, the task awaiting the handle is cancelled, or
    it calls :meth:`cancel`) withdraws the message: if the actor has not begun it yet, it is
    dropped and never runs, also in a worker process. One that has begun runs to its end,
    sync or async (``ref.kill()`` is what cuts a running message short); its answer is
    discarded.
    """

    # __slots__ for speed: one handle is built per ask.
    __slots__ = ("_callbacks", "_cell", "_deadline", "_fut", "_method")

    def __init__(
        self,
        fut: asyncio.Future[T] | concurrent.futures.Future[T],
        cell: Target,
        method: str,
        deadline: float | None,
    ) -> None:
        self._fut = fut
        self._cell = cell
        self._method = method
        self._deadline = deadline
        self._callbacks: _Callback | list[_Callback] | None = None

    def __await__(self) -> Generator[Any, None, T]:
        fut = self._fut
        # The common case first, for speed: the loop's own future, answered with a value
        # already (a pipelined caller's), no timeout, awaited outside an actor.
        if (
            type(fut) is _LOOP_FUTURE
            and fut.done()
            and self._deadline is None
            and not fut.cancelled()
            and fut.exception() is None
            and current_cell.get() is None
        ):
            return fut.__await__()
        if isinstance(fut, concurrent.futures.Future):
            return self._await_foreign().__await__()
        if self._deadline is not None:
            return self._await_deadline().__await__()
        waiter = current_cell.get()
        if waiter is None and (
            self._cell.inline or (fut.done() and not fut.cancelled() and fut.exception() is None)
        ):
            return fut.__await__()  # nothing to record and nothing to translate
        return self._await_recorded(waiter)

    def _await_recorded(self, waiter: RunningActor | None) -> Generator[Any, None, T]:
        # An actor awaiting an ask with no timeout is a wait edge (docs/broker.md, "blocked").
        # Only its own waits count: a task its code started (asyncio.create_task) leaves the
        # actor free to serve its mailbox, so that task's wait blocks nothing.
        graph = None
        if waiter is not None:
            task = asyncio.current_task()
            if task is not None and waiter.serves_in(task):
                graph = waiter.runtime.waits
        if graph is not None:
            assert waiter is not None
            if _same(waiter, self._cell) and waiter.max_concurrency == 1 and not self._fut.done():
                raise self._self_ask_error()
            if self._fut.done():
                graph = None  # answered already: it never waits
            else:
                target = self._cell.actor_id
                edge = _LazyEdge(waiter.loop, graph, waiter.actor_id, target, self._fut)
        try:
            try:
                result: T = yield from self._fut  # type: ignore[misc]
            except asyncio.CancelledError:
                if self._fut.cancelled():  # the awaiting task was cancelled: it gave up
                    self._cell.withdraw(self._fut)
                raise
            except ConnectionLostError:
                if self._cell.inline:
                    raise
                # The actor's process went away: say how, not that a socket closed.
                error = yield from self._cell.lost().__await__()
                raise error from None
            return result
        finally:
            if graph is not None:
                edge.end()

    async def _await_deadline(self) -> T:
        assert isinstance(self._fut, asyncio.Future) and self._deadline is not None
        if self._fut.cancelled():
            raise self._timeout_error()  # awaited again after its timeout passed
        remaining = self._deadline - time.monotonic()
        try:
            return await asyncio.wait_for(asyncio.shield(self._fut), max(remaining, 0.0))
        except TimeoutError:
            self.cancel()
            raise self._timeout_error() from None
        except asyncio.CancelledError:
            self.cancel()
            raise
        except ConnectionLostError:
            if self._cell.inline:
                raise
            raise (await self._cell.lost()) from None

    async def _await_foreign(self) -> T:
        assert isinstance(self._fut, concurrent.futures.Future)
        if self._fut.cancelled() and self._deadline is not None:
            raise self._timeout_error()
        wrapped = asyncio.wrap_future(self._fut)
        remaining = None if self._deadline is None else self._deadline - time.monotonic()
        try:
            if remaining is None:
                return await asyncio.shield(wrapped)
            return await asyncio.wait_for(asyncio.shield(wrapped), max(remaining, 0.0))
        except TimeoutError:
            self.cancel()
            raise self._timeout_error() from None
        except asyncio.CancelledError:
            self.cancel()
            raise

    def cancel(self, msg: Any = None) -> bool:
        """Give up on this ask: a message the actor has not begun is dropped and never runs
        (in a worker process too); one already running runs to its end, sync or async, and
        its answer is discarded. Awaiting the handle afterwards raises
        ``asyncio.CancelledError`` (``AskTimeoutError`` once a timeout passed); ``msg``
        is that error's message, as for ``asyncio.Future.cancel``.

        Safe from any thread. Returns ``False`` when the answer had arrived already (nothing
        to give up), ``True`` otherwise.
        """
        fut = self._fut
        if fut.done():
            return False
        if isinstance(fut, concurrent.futures.Future):
            fut.cancel()
            self._cell.withdraw(fut)
            return True
        loop = fut.get_loop()
        if _running_loop() is loop:
            self._give_up(fut, msg)
        else:
            loop.call_soon_threadsafe(self._give_up, fut, msg)
        return True

    def _give_up(self, fut: asyncio.Future[Any], msg: Any = None) -> None:
        if fut.cancel(msg):
            self._cell.withdraw(fut)

    def _timeout_error(self) -> AskTimeoutError:
        return AskTimeoutError(
            f"{self._cell.describe()}.{self._method}() did not answer within its timeout; "
            "it was withdrawn (a message not begun yet is dropped; one running runs to its end)"
        )

    def _self_ask_error(self) -> DeadlockError:
        return DeadlockError(
            f"ask deadlock: {self._cell.describe()} awaits its own answer to "
            f"{self._method}(), but it handles one message at a time, so that message can only "
            "run once the current one returns; the wait fails at once (the message stays "
            f"queued and runs later). To fix: call the method directly (self.{self._method}()), "
            "use .tell(), or give the actor max_concurrency > 1"
        )

    def result_blocking(self, timeout: float | None) -> T:
        """Wait from a thread that runs no event loop (``actorrt.get``).

        From an actor's synchronous method, a wait with no timeout is a wait edge, as an
        ``await`` is (docs/broker.md, "blocked")."""
        bounded = timeout is not None or self._deadline is not None
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            timeout = left if timeout is None else min(timeout, left)
        fut = self._fut
        cf = fut if isinstance(fut, concurrent.futures.Future) else _bridge(fut)
        waiter = None if bounded else running_actor()
        if waiter is not None:
            if _same(waiter, self._cell) and waiter.max_concurrency == 1 and not cf.done():
                raise self._self_ask_error()
            # Recorded only once the wait has lasted EDGE_DELAY, as an awaited one is.
            _settled_within(cf, EDGE_DELAY if timeout is None else 0.0)
            if cf.done():
                waiter = None
        if waiter is not None:
            try:
                waiter.loop.call_soon_threadsafe(
                    waiter.runtime.waits.add, waiter.actor_id, self._cell.actor_id, cf
                )
            except RuntimeError:  # the loop has closed: nothing to record
                waiter = None
        try:
            return self._result_blocking(cf, timeout)
        finally:
            if waiter is not None:
                try:
                    waiter.loop.call_soon_threadsafe(
                        waiter.runtime.waits.remove, waiter.actor_id, self._cell.actor_id, cf
                    )
                except RuntimeError:
                    pass

    def _result_blocking(self, cf: concurrent.futures.Future[T], timeout: float | None) -> T:
        fut = self._fut
        try:
            return cf.result(timeout=None if timeout is None else max(timeout, 0.0))
        except ConnectionLostError:
            if self._cell.inline or isinstance(fut, concurrent.futures.Future):
                raise
            lost = asyncio.run_coroutine_threadsafe(self._cell.lost(), fut.get_loop())
            raise lost.result() from None
        except concurrent.futures.CancelledError:
            if self._deadline is not None and time.monotonic() >= self._deadline:
                raise self._timeout_error() from None
            raise
        except concurrent.futures.TimeoutError:
            if self._deadline is not None and time.monotonic() >= self._deadline:
                self.cancel()
                raise self._timeout_error() from None
            raise

    @property
    def target_id(self) -> str:
        """The id of the actor the answer waits on now (for a wait edge)."""
        return self._cell.actor_id

    def done(self) -> bool:
        """Whether the answer (or an error) has arrived."""
        return self._fut.done()

    def result(self) -> T:
        """The answer, if it has arrived; raises ``asyncio.InvalidStateError`` if not."""
        if not self._fut.done():
            raise asyncio.InvalidStateError(f"the answer of {self._method}() has not arrived")
        return self._fut.result()

    # The future protocol (what asyncio.wait and asyncio.as_completed call), so that handles
    # can be waited for with asyncio's own tools as well as with actorrt.wait.

    def cancelled(self) -> bool:
        """Whether the ask was given up (``cancel()``, a timeout, a cancelled awaiter)."""
        return self._fut.cancelled()

    def exception(self) -> BaseException | None:
        """The error the answer carries (``None`` for a value), once it has arrived; raises
        ``asyncio.InvalidStateError`` before, ``asyncio.CancelledError`` if it was given up."""
        fut = self._fut
        if not fut.done():
            raise asyncio.InvalidStateError(f"the answer of {self._method}() has not arrived")
        if fut.cancelled():
            raise asyncio.CancelledError(f"the ask {self._method}() was given up")
        return fut.exception()

    def add_done_callback(
        self,
        fn: Callable[[AskHandle[T]], object],
        *,
        context: contextvars.Context | None = None,
    ) -> None:
        """Call ``fn(handle)`` once the answer (or an error) has arrived, as an
        ``asyncio.Future`` does: on the event loop of the thread that added it, soon after;
        added from a thread that runs no loop, on the thread that settles the answer."""
        callback = _Callback(self, fn, context, _running_loop())
        # The first registration is kept as it is, the later ones in a list: asyncio.gather
        # adds one per handle, and each object kept costs the cyclic garbage collector.
        held = self._callbacks
        if held is None:
            self._callbacks = callback
        elif isinstance(held, list):
            held.append(callback)
        else:
            self._callbacks = [held, callback]
        _on_future_loop(self._fut, self._fut.add_done_callback, callback)

    def remove_done_callback(self, fn: Callable[[AskHandle[T]], object]) -> int:
        """Forget every registration of ``fn``; returns how many there were."""
        held = self._callbacks
        if held is None:
            return 0
        registered = held if isinstance(held, list) else [held]
        removed = [c for c in registered if c.fn == fn]
        kept = [c for c in registered if c.fn != fn]
        self._callbacks = None if not kept else kept[0] if len(kept) == 1 else kept
        for callback in removed:
            callback.live = False  # a relay already on its way does nothing
            if isinstance(self._fut, asyncio.Future):  # a thread-safe one cannot forget
                _on_future_loop(self._fut, self._fut.remove_done_callback, callback)
        return len(removed)

    # The rest of asyncio's future protocol, for an inline actor's answer on this loop with
    # no timeout: there the handle is a future to asyncio (``asyncio.isfuture``), so
    # ``asyncio.gather``, ``wait``, ``shield`` and ``ensure_future`` take it as it is instead
    # of wrapping each handle in a task of its own (a task, its coroutine, a weak reference
    # and a scheduled step per ask). Elsewhere (a worker-process actor, whose lost
    # connection is translated when awaited; a timeout; an ask from another thread) it is
    # an awaitable, which asyncio wraps, so those rules still apply.

    @property
    def _asyncio_future_blocking(self) -> bool | None:
        # Not inside an actor: there asyncio wraps the handle in a task whose await records
        # the wait (``_await_recorded``), so a gathered ask that closes a cycle, or asks the
        # actor itself, is still a DeadlockError rather than a wait forever.
        if (
            self._deadline is None
            and self._cell.inline
            and type(self._fut) is _LOOP_FUTURE
            and current_cell.get() is None
        ):
            return False
        return None

    @_asyncio_future_blocking.setter
    def _asyncio_future_blocking(self, value: bool) -> None:
        # Set by a task only on a future yielded to it bare; a handle never is (awaiting it
        # yields the answer's own future).
        pass

    def get_loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the answer arrives on (``asyncio.Future.get_loop``)."""
        fut = self._fut
        if isinstance(fut, concurrent.futures.Future):
            raise RuntimeError(f"the answer of {self._method}() belongs to no event loop")
        return fut.get_loop()

    @property
    def _cancel_message(self) -> Any:
        return getattr(self._fut, "_cancel_message", None)

    def _make_cancelled_error(self) -> asyncio.CancelledError:
        fut = self._fut
        if isinstance(fut, asyncio.Future):
            return fut._make_cancelled_error()  # type: ignore[attr-defined, no-any-return]
        return asyncio.CancelledError(f"the ask {self._method}() was given up")

    def __repr__(self) -> str:
        state = "done" if self._fut.done() else "pending"
        return f"<actorrt.AskHandle {self._cell.describe()}.{self._method}() {state}>"


class _Callback:
    """One ``add_done_callback`` registration: calls ``fn(handle)`` on the loop it was added
    from, once the answer's future is settled."""

    __slots__ = ("context", "fn", "handle", "live", "loop")

    def __init__(
        self,
        handle: AskHandle[Any],
        fn: Callable[[Any], object],
        context: contextvars.Context | None,
        loop: asyncio.AbstractEventLoop | None,
    ) -> None:
        self.handle = handle
        self.fn = fn
        self.live = True
        self.context = context
        self.loop = loop

    def __call__(self, _settled: object) -> None:
        # Registered on the answer's future itself (no bound method made per registration).
        loop = self.loop
        if loop is None or _running_loop() is loop:
            self.call()
            return
        try:
            loop.call_soon_threadsafe(self.call)
        except RuntimeError:  # the adder's loop has closed: nobody is left to tell
            pass

    def call(self) -> None:
        if not self.live:
            return
        self.live = False  # once
        if self.context is None:
            self.fn(self.handle)
        else:
            self.context.run(self.fn, self.handle)


def _on_future_loop(
    fut: asyncio.Future[Any] | concurrent.futures.Future[Any],
    call: Callable[[Any], Any],
    arg: Any,
) -> None:
    """Call ``call(arg)`` where it is safe for ``fut``: at once for a thread-safe future or
    on its own loop, else handed to the loop that owns it."""
    if isinstance(fut, concurrent.futures.Future) or _running_loop() is fut.get_loop():
        call(arg)
        return
    try:
        fut.get_loop().call_soon_threadsafe(call, arg)
    except RuntimeError:  # its loop has closed: the future will never settle
        pass


def _bridge(fut: asyncio.Future[T]) -> concurrent.futures.Future[T]:
    """A thread-safe view of a future that belongs to another thread's loop."""
    cf: concurrent.futures.Future[T] = concurrent.futures.Future()

    def copy(source: asyncio.Future[T]) -> None:
        if cf.done():  # ended by the wait's own side (a proven deadlock)
            return
        if source.cancelled():
            cf.cancel()
        elif (exc := source.exception()) is not None:
            cf.set_exception(exc)
        else:
            cf.set_result(source.result())

    loop = fut.get_loop()
    loop.call_soon_threadsafe(lambda: fut.add_done_callback(copy))
    return cf


class ThreadWait:
    """An awaitable (also for ``actorrt.get``) over work already handed to the runtime's loop
    from another thread."""

    __slots__ = ("_cf",)

    def __init__(self, cf: concurrent.futures.Future[Any]) -> None:
        self._cf = cf

    def __await__(self) -> Generator[Any, None, Any]:
        return asyncio.wrap_future(self._cf).__await__()

    def result_blocking(self, timeout: float | None) -> Any:
        return self._cf.result(timeout)

    def done(self) -> bool:
        return self._cf.done()


def _settled_within(cf: concurrent.futures.Future[Any], seconds: float) -> None:
    """Wait up to ``seconds`` for ``cf`` to be settled, whatever its outcome (the future's
    own wait: cheaper than ``concurrent.futures.wait``, which builds a waiter per call)."""
    try:
        cf.exception(timeout=seconds)
    except (TimeoutError, concurrent.futures.CancelledError):
        pass
