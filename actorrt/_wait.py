"""``actorrt.wait``: the first of several answers to arrive, as ``ray.wait`` gives them."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence
from typing import Any

from ._core._handle import AskHandle
from ._sync import may_block

__all__ = ["wait"]

Split = tuple[list[AskHandle[Any]], list[AskHandle[Any]]]


def wait(
    handles: Sequence[AskHandle[Any]],
    *,
    num_returns: int = 1,
    timeout: float | None = None,
    fetch_local: bool = True,
) -> Any:
    """Wait until ``num_returns`` of ``handles`` have their answers, or ``timeout`` passes.

    Returns ``(ready, not_ready)``: two lists that together hold every handle once, each in
    the order of ``handles``. ``ready`` holds at most ``num_returns`` handles whose answer
    (a value or an error) has arrived; read them with ``await``, ``actorrt.get`` or
    ``handle.result()``. With a ``timeout`` it returns when that many are ready or the time
    has passed, whichever comes first (``timeout=0`` only looks); without one it waits for
    exactly ``num_returns``. A handle whose ask has a timeout option counts as ready when
    its answer comes, not when its timeout passes (awaiting it then raises
    ``AskTimeoutError``). Waiting is no wait edge for the deadlock check.

    From synchronous code (a script after ``actorrt.init()``, a worker-process actor's sync
    method) it blocks and returns the lists; on a thread that runs an event loop it returns
    an awaitable of them: ``ready, rest = await actorrt.wait(handles)``.

    Args:
        handles: a list of ask handles (what ``ref.method(...)`` and task calls return),
            each at most once.
        num_returns: how many answers to wait for: at least 1, at most ``len(handles)``.
        timeout: seconds to wait at most (``None``: no limit).
        fetch_local: accepted for Ray's signature and ignored (there is no object store).

    Raises:
        TypeError: ``handles`` is not a list, or holds something other than ask handles;
            ``num_returns`` is not an int; ``timeout`` is not a number.
        ValueError: a handle appears twice; ``num_returns`` below 1 or above the number of
            handles; ``timeout`` negative.
    """
    del fetch_local  # Ray's: whether to pull objects to this node; there are none to pull
    items = _checked(handles, num_returns, timeout)
    if timeout is not None and math.isinf(timeout):
        timeout = None
    if may_block():
        return _wait_blocking(items, num_returns, timeout)
    return _wait_async(items, num_returns, timeout)


def _checked(handles: Any, num_returns: Any, timeout: Any) -> list[AskHandle[Any]]:
    if isinstance(handles, AskHandle):
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
        if not isinstance(item, AskHandle):
            hint = " (a coroutine: await it, or pass the handles of asks)" if (
                asyncio.iscoroutine(item)
            ) else ""
            raise TypeError(
                f"actorrt.wait() takes ask handles (what ref.method(...) and task calls "
                f"return); item {index} is {type(item).__name__}: {item!r}{hint}"
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


def _split(handles: list[AskHandle[Any]], num_returns: int) -> Split:
    ready: list[AskHandle[Any]] = []
    rest: list[AskHandle[Any]] = []
    for handle in handles:
        (ready if handle.done() and len(ready) < num_returns else rest).append(handle)
    return ready, rest


def _wait_blocking(handles: list[AskHandle[Any]], num_returns: int, timeout: float | None) -> Split:
    pending = [h for h in handles if not h.done()]
    needed = num_returns - (len(handles) - len(pending))
    if not handles or needed <= 0 or timeout == 0:
        return _split(handles, num_returns)
    enough = threading.Event()
    lock = threading.Lock()
    arrived = 0

    def settled(_handle: AskHandle[Any]) -> None:
        nonlocal arrived
        with lock:
            arrived += 1
            if arrived >= needed:
                enough.set()

    for handle in pending:
        handle.add_done_callback(settled)
    try:
        enough.wait(timeout)
    finally:
        for handle in pending:
            handle.remove_done_callback(settled)
    return _split(handles, num_returns)


async def _wait_async(
    handles: list[AskHandle[Any]], num_returns: int, seconds: float | None
) -> Split:
    pending = [h for h in handles if not h.done()]
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
    try:
        await asyncio.wait([enough], timeout=seconds)
    finally:
        enough.cancel()
        for handle in pending:
            handle.remove_done_callback(settled)
    return _split(handles, num_returns)
