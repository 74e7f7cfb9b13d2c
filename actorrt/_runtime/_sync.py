"""The synchronous facade: a runtime on a background thread for plain scripts.

``init()`` starts a runtime on a thread that runs uvloop (through an anyio blocking
portal); ``get()`` waits for any awaitable of the API from synchronous code; ``shutdown()``
stops the runtime. The facade's thread is where the actors run; the script's thread only
sends messages and waits.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import inspect
import threading
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import uvloop

from .._core._context import current_cell, running_actor
from .._core._handle import AskHandle, ThreadWait
from .._errors import AskTimeoutError, RuntimeAlreadyRunningError
from .._notebook import must_await
from .._sigterm import DEFAULT_GRACE, SIGTERM_EXIT_STATUS, OrderlySigterm, check_grace
from ._objects import ObjectRef
from ._ray_init import ray_init_args
from ._root import Runtime, current_runtime

T = TypeVar("T")

_lock = threading.Lock()
_facade: _Facade | None = None


class _Facade:
    """A runtime held open on a portal thread until ``shutdown()``."""

    def __init__(self, runtime_kwargs: dict[str, Any], grace: float | None) -> None:
        import anyio.from_thread  # only the sync facade needs it: not at ``import actorrt``

        self._portal_cm: contextlib.AbstractContextManager[Any] = (
            anyio.from_thread.start_blocking_portal(
                "asyncio",
                {"loop_factory": uvloop.new_event_loop},
                name="actorrt-runtime",
            )
        )
        self.portal = self._portal_cm.__enter__()
        try:
            self.runtime = Runtime(**runtime_kwargs)
            self.portal.call(self.runtime.__aenter__)
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise
        self.orderly: OrderlySigterm | None = None
        if grace is not None:
            self.orderly = OrderlySigterm(_terminated, grace, "the actorrt runtime")
            self.orderly.install()

    def close(self) -> None:
        try:
            self.portal.call(self.runtime.shutdown)
        finally:
            self._portal_cm.__exit__(None, None, None)
            if self.orderly is not None:
                self.orderly.uninstall()


def _terminated() -> None:
    """SIGTERM while ``init()``'s runtime runs: end the script as an uncaught exception
    would, so ``finally`` blocks run and ``shutdown()`` (at exit) stops every actor."""
    raise SystemExit(SIGTERM_EXIT_STATUS)


def init(
    address: str | None = None, *, sigterm_grace: float | None = DEFAULT_GRACE, **kwargs: Any
) -> Runtime:
    """Start a runtime on a background thread, for synchronous scripts.

    Takes the same keyword arguments as ``Runtime``, and Ray's ``ray.init`` arguments:
    ``num_cpus``, ``num_gpus``, ``resources`` are used; ``ignore_reinit_error=True``
    returns the running runtime instead of raising; ``logging_level`` sets the
    ``"actorrt"`` logger's level; ``runtime_env={"env_vars": {...}}`` sets the worker
    processes' environment; ``include_dashboard=True`` (with ``dashboard_host``,
    ``dashboard_port``) serves the dashboard (docs/dashboard.md); the others (``local_mode``,
    ``log_to_driver``, ``namespace``, ``configure_logging``, ...) are ignored with one
    warning naming them. ``shutdown()`` (also registered to run at exit) stops the runtime.

    **SIGTERM** (how containers, Slurm and Kubernetes stop a program), while the runtime
    runs, raises ``SystemExit(143)`` in the main thread, as Ctrl-C raises
    ``KeyboardInterrupt``: ``finally`` blocks run, and ``shutdown()`` at exit stops every
    actor in order (``on_stop`` runs). If that takes longer than ``sigterm_grace`` seconds,
    or a second SIGTERM comes, the process ends at once, by SIGTERM. Only when ``init()`` is
    called on the main thread with Python's default SIGTERM action in place (a handler the
    program installed is left alone); ``sigterm_grace=None`` leaves SIGTERM alone.

    ``address``, as in Ray: an actorrt cluster's head ``"HOST:PORT"``, ``"auto"`` for the head
    started on this machine, or ``"local"`` for this machine alone. Left out, it is
    ``$ACTORRT_ADDRESS`` when set, else the head started on this machine when one runs there
    (a line in the log says so), else this machine alone (docs/cluster.md).

    Raises:
        RuntimeAlreadyRunningError: a runtime is already running in this process (and
            not ``ignore_reinit_error``).
        ValueError: an address of another form (a Ray Client ``ray://`` one, say), or
            resources given to a program that joins a cluster; ``sigterm_grace`` not
            positive and finite.
        TypeError: an argument that is neither Ray's nor actorrt's; ``sigterm_grace`` not
            a number.
    """
    global _facade
    grace = check_grace(sigterm_grace, "actorrt.init()")
    runtime_kwargs, reinit_ok = ray_init_args(address, kwargs)
    with _lock:
        try:
            running = current_runtime()
        except RuntimeError:
            pass
        else:
            if reinit_ok:
                return running
            raise RuntimeAlreadyRunningError(
                "actorrt.init(): a runtime is already running in this process; "
                "call actorrt.shutdown() first"
            )
        _facade = _Facade(runtime_kwargs, grace)
        return _facade.runtime


def shutdown() -> None:
    """Stop the runtime ``init()`` started, and its thread. Does nothing if none runs."""
    global _facade
    with _lock:
        facade, _facade = _facade, None
    if facade is not None:
        facade.close()


def is_initialized() -> bool:
    """Whether ``init()`` has started a runtime that is still running."""
    return _facade is not None


atexit.register(shutdown)


def get(awaitable: Any, *, timeout: float | None = None) -> Any:
    """Wait for an awaitable of the API from synchronous code, and return its result.

    Takes an ask handle, a coroutine (``Worker.spawn()``, ``ref.stop()``, ...), an
    ``ObjectRef`` of ``put``, any other awaitable, or a list or tuple of them (returns a
    list). Raises what the awaitable
    raises; ``TimeoutError`` after ``timeout`` seconds. Called on a thread whose event loop
    is running, it raises ``RuntimeError``: use ``await`` there; in a Jupyter notebook's cell
    it waits, as ``ray.get`` does (the runtime runs on ``init()``'s thread).
    """
    if not may_block():
        if inspect.iscoroutine(awaitable):
            awaitable.close()
        raise RuntimeError(
            "actorrt.get() was called on a thread that runs an event loop, where it would "
            "block that loop; use `await` instead"
        )
    deadline = None if timeout is None else time.monotonic() + timeout
    if isinstance(awaitable, list | tuple):
        results = []
        try:
            for item in awaitable:
                results.append(_get_one(item, deadline))
        finally:
            for rest in awaitable[len(results) + 1 :]:
                if inspect.iscoroutine(rest):
                    rest.close()  # never started: close it rather than leak it
        return results
    return _get_one(awaitable, deadline)


def _get_one(awaitable: Any, deadline: float | None) -> Any:
    if isinstance(awaitable, ObjectRef):
        return awaitable.value()  # in shared memory here: nothing to wait for
    left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
    if isinstance(awaitable, AskHandle | ThreadWait):
        try:
            return awaitable.result_blocking(left)
        except AskTimeoutError:
            raise
        except TimeoutError:
            raise TimeoutError(f"actorrt.get() timed out waiting for {awaitable!r}") from None
    if not inspect.isawaitable(awaitable):
        raise TypeError(
            f"actorrt.get() takes an awaitable (an ask handle, a coroutine of the API) or a "
            f"list of them, got {type(awaitable).__name__}: {awaitable!r}"
            f"{mistake_hint(awaitable)}"
        )
    try:
        runtime = current_runtime()
    except BaseException:
        if inspect.iscoroutine(awaitable):
            awaitable.close()  # it will never run; closing it avoids a "never awaited" warning
        raise
    context = contextvars.copy_context()
    if current_cell.get() is None and (actor := running_actor()) is not None:
        # A thread a worker-process actor's code started: what it asks for is that actor's.
        context.run(current_cell.set, actor)
    future = context.run(asyncio.run_coroutine_threadsafe, _await(awaitable), runtime.loop)
    try:
        return future.result(left)
    except TimeoutError:
        future.cancel()
        raise TimeoutError(f"actorrt.get() timed out after waiting for {awaitable!r}") from None


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


def mistake_hint(item: Any) -> str:
    """What to do instead, for a thing ``get`` and ``wait`` do not take where that is a
    common mistake ("" otherwise)."""
    if inspect.iscoroutine(item):
        return " (a coroutine: await it, or pass the handles of asks)"
    if hasattr(item, "__anext__") and hasattr(item, "__next__"):
        return " (a stream of items: read them with `for`, or `async for` in async code)"
    return ""


def may_block() -> bool:
    """Whether a blocking call (``get()``, ``Tuner.fit()``, ``Trainer.fit()``) may wait on
    this thread: one that runs no event loop, or a Jupyter kernel's cell (see
    ``_notebook.must_await``), so long as the runtime does not run on that same loop,
    where waiting could never end."""
    if must_await():
        return False
    loop = _running_loop()
    try:
        return loop is None or current_runtime().loop is not loop
    except RuntimeError:  # no runtime yet: init() starts one on its own thread
        return True


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
