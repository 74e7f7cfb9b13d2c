"""The runtime's module-level entry points: ``actorrt.run``, the resource views
(``cluster_resources``, ``available_resources``, ``pending_requests``) and ``get_gpu_ids``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from .._core._context import current_cell
from .._processes._scheduler import gpu_ids
from .._roles._role import ResourceViews
from .._sigterm import DEFAULT_GRACE, SIGTERM_EXIT_STATUS, OrderlySigterm, check_grace
from ..resources import PendingRequest
from ._root import Runtime, current_runtime

try:
    from asyncio import _get_running_loop as _running_loop
except ImportError:  # pragma: no cover - CPython always has it
    from asyncio.events import _get_running_loop as _running_loop

__all__ = [
    "available_resources",
    "cluster_resources",
    "get_gpu_ids",
    "pending_requests",
    "run",
]

T = TypeVar("T")


def cluster_resources() -> dict[str, float]:
    """Everything the cluster has, by resource name (GPU: the number of devices)."""
    return _on_owner(lambda views: views.cluster())


def available_resources() -> dict[str, float]:
    """What is free now; reserved placement groups are not free."""
    return _on_owner(lambda views: views.available())


def pending_requests() -> list[PendingRequest]:
    """Every waiting resource request, with the reason it waits (``.reason``)."""
    return _on_owner(lambda views: views.pending())


def _on_owner(read: Callable[[ResourceViews], T]) -> T:
    runtime = current_runtime()
    views = runtime.resource_views  # a worker process has none: it raises, saying why
    if _running_loop() is runtime.loop:
        return read(views)

    async def on_loop() -> T:
        return read(views)

    # From another thread (the sync facade's caller): read on the runtime's own loop.
    return asyncio.run_coroutine_threadsafe(on_loop(), runtime.loop).result()


def get_gpu_ids() -> list[int | str]:
    """The GPU ids this actor may use: those in ``CUDA_VISIBLE_DEVICES`` (ints where numeric).

    In an inline actor with a GPU grant, that grant's devices.
    """
    cell = current_cell.get()
    grant = getattr(cell, "grant", None)
    if grant is not None and os.environ.get("CUDA_VISIBLE_DEVICES") is None:
        ids: list[str] = list(gpu_ids(grant))
    else:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        ids = [part.strip() for part in visible.split(",") if part.strip()]
    return [int(i) if i.isdigit() else i for i in ids]


def run(
    main: Callable[[], Awaitable[T]] | Coroutine[Any, Any, T],
    *,
    sigterm_grace: float | None = DEFAULT_GRACE,
    **runtime_kwargs: Any,
) -> T:
    """Run ``main`` (an async function or a coroutine) with a fresh runtime on uvloop.

    Returns what ``main`` returns; the runtime shuts down when it ends.

    **Ctrl-C** cancels ``main`` (as ``asyncio.run`` does): the runtime shuts down in order
    (every actor's ``on_stop`` runs) and ``KeyboardInterrupt`` is raised. **SIGTERM** (how
    containers, Slurm and Kubernetes stop a program) does the same and then raises
    ``SystemExit(143)`` (128 + SIGTERM, the shell's convention), so the program ends with
    that status once ``finally`` blocks and ``atexit`` handlers have run. If the stop takes
    longer than ``sigterm_grace`` seconds, or a second SIGTERM comes, the process ends at
    once, by SIGTERM. SIGTERM is handled so only when ``run`` is called on the main thread
    with Python's default SIGTERM action in place (a handler the program installed is left
    alone).

    Args:
        main: the async function (called with no arguments) or the coroutine to run.
        sigterm_grace: seconds an orderly stop after SIGTERM may take; ``None`` leaves
            SIGTERM alone (Python's default: the process ends at once).
        **runtime_kwargs: the ``Runtime`` arguments.

    Raises:
        TypeError: ``main`` is neither; ``sigterm_grace`` is not a number.
        ValueError: ``sigterm_grace`` is not positive and finite.
        SystemExit: SIGTERM (status 143).
    """
    import uvloop

    if not (asyncio.iscoroutine(main) or callable(main)):
        raise TypeError(f"actorrt.run() takes an async function or coroutine, got {main!r}")
    grace = check_grace(sigterm_grace, "actorrt.run()")
    orderly: OrderlySigterm | None = None

    async def runner() -> T:
        nonlocal orderly
        task = asyncio.current_task()
        if grace is not None and task is not None:
            loop = asyncio.get_running_loop()

            def stop_main() -> None:
                loop.call_soon_threadsafe(task.cancel)

            orderly = OrderlySigterm(stop_main, grace, "actorrt.run()")
            orderly.install()
        async with Runtime(**runtime_kwargs):
            if asyncio.iscoroutine(main):
                return await main
            return await main()

    try:
        result: T = uvloop.run(runner())
    except asyncio.CancelledError:
        if orderly is not None and orderly.terminated:
            raise SystemExit(SIGTERM_EXIT_STATUS) from None
        raise
    finally:
        if orderly is not None:
            orderly.uninstall()
    if orderly is not None and orderly.terminated:
        raise SystemExit(SIGTERM_EXIT_STATUS)  # main caught the cancellation: still ending
    return result
