"""The runtime running in this process, as the actor core sees it.

The core (refs, cells, ``ActorClass.spawn``, placement-group handles) never imports the
runtime: it reaches the one running in this process through this registry, typed by the
:class:`RuntimeServices` protocol, which names every service the core asks of a runtime.
``actorrt._runtime._root.Runtime`` registers itself here when it is entered and leaves when it
shuts down; one runtime runs per process at a time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from .._errors import NoRuntimeError, RuntimeAlreadyRunningError
from ._lifecycle import ActorServices

T = TypeVar("T")


class RuntimeServices(ActorServices, Protocol):
    """What the actor core asks of the runtime that runs it: what each actor's lifecycle
    needs (:class:`~actorrt._core._lifecycle.ActorServices`), and spawning."""

    async def spawn(self, actor_class: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Start an instance of ``actor_class`` (an ``ActorClass``) and wait for its
        constructor and ``on_start``; return its ``ActorRef``."""
        ...

    async def call_on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the runtime's loop from another thread's loop."""
        ...


_current: RuntimeServices | None = None
_lock = threading.Lock()


def current_services() -> RuntimeServices:
    """The running runtime as the core sees it; ``NoRuntimeError`` if there is none."""
    runtime = _current
    if runtime is None:
        raise NoRuntimeError(
            "no actorrt runtime is running in this process; start one with "
            "`async with actorrt.Runtime():`, `actorrt.run(main)` or `actorrt.init()`"
        )
    return runtime


def register(runtime: RuntimeServices) -> None:
    """Make ``runtime`` this process's runtime; ``RuntimeAlreadyRunningError`` if one runs."""
    global _current
    with _lock:
        if _current is not None:
            raise RuntimeAlreadyRunningError(
                f"a runtime is already running in process {os.getpid()}; one runtime "
                "runs per process: use it (actors reach it through refs) or shut it down "
                "first"
            )
        _current = runtime


def unregister(runtime: RuntimeServices) -> None:
    """``runtime`` has shut down: no runtime runs here any more (if it was the one)."""
    global _current
    with _lock:
        if _current is runtime:
            _current = None
