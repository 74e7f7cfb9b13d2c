"""``actorrt.wait``: the first of several answers to arrive, as ``ray.wait`` gives them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .._core._context import RunningActor, current_cell, running_actor
from .._core._handle import AskHandle
from .._core._wait_edges import WaitEdges, waiting_actor_task
from .._core._waits import bounded_by_awaiter
from ._objects import ObjectRef
from ._sync import may_block, mistake_hint

__all__ = ["wait"]

Waitable = AskHandle[Any] | ObjectRef[Any]
Split = tuple[list[Waitable], list[Waitable]]


def wait(
    handles: Sequence[AskHandle[Any] | ObjectRef[Any]],
    *,
    num_returns: int = 1,
    timeout: float | None = None,
    fetch_local: bool = True,
) -> Any:
    """Wait until ``num_returns`` of ``handles`` have their answers, or ``timeout`` passes.

    Returns ``(ready, not_ready)``: two lists that together hold every handle once, each in
    the order of ``handles``. ``ready`` holds at most ``num_returns`` handles whose answer
    (a value or an error) has arrived; read them with ``await``, ``actorrt.get`` or
    ``handle.result()``. An ``ObjectRef`` of ``actorrt.put`` is ready from the start (its
    value is there to read), as Ray's are. With a ``timeout`` it returns when that many are
    ready or the time
    has passed, whichever comes first (``timeout=0`` only looks); without one it waits for
    exactly ``num_returns``. A handle whose ask has a timeout option counts as ready when
    its answer comes, not when its timeout passes (awaiting it then raises
    ``AskTimeoutError``).

    Inside an actor, a wait with no timeout is a wait edge for the deadlock check, as an
    ``await`` of a handle is: on the actor of each unanswered handle it needs, from the
    moment it needs every unanswered one (``num_returns`` of all of them, or all those left);
    a cycle through it raises ``DeadlockError`` here instead of hanging. Waiting for fewer
    than are unanswered waits on none of them in particular, and is no edge.

    From synchronous code (a script after ``actorrt.init()``, a worker-process actor's sync
    method) it blocks and returns the lists; on a thread that runs an event loop it returns
    an awaitable of them: ``ready, rest = await actorrt.wait(handles)``.

    Args:
        handles: a list of ask handles (what ``ref.method(...)`` and task calls return)
            and ``ObjectRef``s, each at most once.
        num_returns: how many answers to wait for: at least 1, at most ``len(handles)``.
        timeout: seconds to wait at most (``None``: no limit).
        fetch_local: accepted for Ray's signature and ignored (there is no object store).

    Raises:
        TypeError: ``handles`` is not a list, or holds something other than ask handles
            and object refs (a stream's items are read with ``async for``, not waited on);
            ``num_returns`` is not an int; ``timeout`` is not a number.
        ValueError: a handle appears twice; ``num_returns`` below 1 or above the number of
            handles; ``timeout`` negative.
        DeadlockError: inside an actor, the wait is part of a cycle of waits that can
            never end.
    """
    del fetch_local  # Ray's: whether to pull objects to this node; there are none to pull
    items = _checked(handles, num_returns, timeout)
    if timeout is not None and math.isinf(timeout):
        timeout = None
    if may_block():
        return _wait_blocking(items, num_returns, timeout)
    return _wait_async(items, num_returns, timeout)


def _checked(handles: Any, num_returns: Any, timeout: Any) -> list[Waitable]:
    if isinstance(handles, AskHandle | ObjectRef):
        raise TypeError(
            f"actorrt.wait() takes a list of ask handles, got a single one ({handles!r}): "
            "write actorrt.wait([handle])"
        )
    if not isinstance(handles, list | tuple):
        raise TypeError(
            f"actorrt.wait() takes a list of ask handles, got {type(handles).__name__}: "
            f"{handles!r}"
        )
    for index, item in enumerate(handles):
        if not isinstance(item, AskHandle | ObjectRef):
            raise TypeError(
                f"actorrt.wait() takes ask handles (what ref.method(...) and task calls "
                f"return) and object refs; item {index} is {type(item).__name__}: "
                f"{item!r}{mistake_hint(item)}"
            )
    if len({id(item) for item in handles}) != len(handles):
        raise ValueError(
            "actorrt.wait() takes each handle at most once; the list holds one twice"
        )
    if isinstance(num_returns, bool) or not isinstance(num_returns, int):
        raise TypeError(f"num_returns must be an int, got {num_returns!r}")
    if handles and not 1 <= num_returns <= len(handles):
        raise ValueError(
            f"num_returns must be from 1 to the number of handles ({len(handles)}), "
            f"got {num_returns}"
        )
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise TypeError(f"timeout must be a number of seconds or None, got {timeout!r}")
        if math.isnan(timeout) or timeout < 0:
            raise ValueError(f"timeout must be 0 or more seconds (or None), got {timeout!r}")
    return list(handles)


def _pending(handles: list[Waitable]) -> list[AskHandle[Any]]:
    """The handles whose answers have not come (an object ref is never one)."""
    return [h for h in handles if isinstance(h, AskHandle) and not h.done()]


def _split(handles: list[Waitable], num_returns: int) -> Split:
    ready: list[Waitable] = []
    rest: list[Waitable] = []
    for handle in handles:
        arrived = isinstance(handle, ObjectRef) or handle.done()
        (ready if arrived and len(ready) < num_returns else rest).append(handle)
    return ready, rest


def _wait_blocking(handles: list[Waitable], num_returns: int, timeout: float | None) -> Split:
    pending = _pending(handles)
    needed = num_returns - (len(handles) - len(pending))
    if not handles or needed <= 0 or timeout == 0:
        return _split(handles, num_returns)
    enough: concurrent.futures.Future[None] = concurrent.futures.Future()
    lock = threading.Lock()
    arrived = 0

    def settled(_handle: AskHandle[Any]) -> None:
        nonlocal arrived
        with lock:
            arrived += 1
            if arrived < needed or enough.done():
                return
        try:
            enough.set_result(None)
        except concurrent.futures.InvalidStateError:
            pass  # failed by a deadlock report meanwhile

    for handle in pending:
        handle.add_done_callback(settled)
    waiter = running_actor() if timeout is None else None
    end_edges = _edges_from_thread(waiter, pending, needed, enough)
    try:
        concurrent.futures.wait([enough], timeout)
    finally:
        end_edges()
        for handle in pending:
            handle.remove_done_callback(settled)
    _raise_deadlock(enough)
    return _split(handles, num_returns)


def _edges_from_thread(
    waiter: RunningActor | None,
    pending: list[AskHandle[Any]],
    needed: int,
    enough: concurrent.futures.Future[None],
) -> Callable[[], None]:
    """The wait edges of a synchronous method's wait, kept on its actor's loop; returns
    what ends them."""
    if waiter is None:
        return _nothing
    made: list[WaitEdges] = []
    ended = False

    def make() -> None:
        if not ended:
            made.append(WaitEdges(waiter, pending, needed, enough))

    def end() -> None:
        nonlocal ended
        ended = True
        for edges in made:
            edges.end()

    try:
        waiter.loop.call_soon_threadsafe(make)
    except RuntimeError:  # the loop has closed: nothing to record
        return _nothing

    def end_soon() -> None:
        try:
            waiter.loop.call_soon_threadsafe(end)
        except RuntimeError:
            pass

    return end_soon


def _nothing() -> None:
    pass


def _raise_deadlock(enough: asyncio.Future[None] | concurrent.futures.Future[None]) -> None:
    """Raise the deadlock error the broker failed the wait with, if it did."""
    if enough.done() and not enough.cancelled():
        error = enough.exception()
        if error is not None:
            raise error


async def _wait_async(
    handles: list[Waitable], num_returns: int, seconds: float | None
) -> Split:
    pending = _pending(handles)
    needed = num_returns - (len(handles) - len(pending))
    if not handles or needed <= 0 or seconds == 0:
        return _split(handles, num_returns)
    enough = asyncio.get_running_loop().create_future()
    arrived = 0

    def settled(_handle: AskHandle[Any]) -> None:
        nonlocal arrived
        arrived += 1
        if arrived >= needed and not enough.done():
            enough.set_result(None)

    for handle in pending:
        handle.add_done_callback(settled)
    waiter = current_cell.get()
    edges = None
    if seconds is None and waiting_actor_task(waiter) and not bounded_by_awaiter():
        assert waiter is not None
        edges = WaitEdges(waiter, pending, needed, enough)
    try:
        await asyncio.wait([enough], timeout=seconds)
    finally:
        if edges is not None:
            edges.end()
        for handle in pending:
            handle.remove_done_callback(settled)
        if not enough.done():
            enough.cancel()
    _raise_deadlock(enough)
    return _split(handles, num_returns)
