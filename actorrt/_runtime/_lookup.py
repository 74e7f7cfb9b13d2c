"""``actorrt.get_actor(name)``: the lookup of a named actor, awaited.

Ray's ``ray.get_actor(name)`` returns the handle itself. Here the lookup may have to ask the
owning runtime (from a worker process), so it is awaited; what :func:`get_actor` returns says
so when it is used as the ref, and warns when it is never awaited, so a port that forgot the
``await`` is told at once instead of holding a coroutine.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Generator
from typing import Any

from .._core._ref import ActorRef
from ._root import current_runtime

__all__ = ["ActorLookup", "get_actor"]


class ActorLookup:
    """What :func:`get_actor` returns: await it for the ref.

    Ray's ``ray.get_actor(name)`` returns the handle itself; here the lookup may have to ask
    the owning runtime (from a worker process), so it is awaited: ``ref = await
    actorrt.get_actor(name)``, or ``actorrt.get(actorrt.get_actor(name))`` in synchronous
    code. Using it as if it were the ref raises an ``AttributeError`` that says so, and one
    that is never awaited warns (``RuntimeWarning``) when it is dropped.
    """

    __slots__ = ("_awaited", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._awaited = False

    def __await__(self) -> Generator[Any, None, ActorRef[Any]]:
        self._awaited = True
        return _get_actor(self._name).__await__()

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        self._awaited = True  # told now: no second warning when dropped
        raise AttributeError(
            f"actorrt.get_actor({self._name!r}) gives an awaitable, not the actor's ref (Ray's "
            f"ray.get_actor returns the handle at once): write `ref = await "
            f"actorrt.get_actor({self._name!r})`, or in synchronous code `ref = "
            f"actorrt.get(actorrt.get_actor({self._name!r}))`, then use ref.{attribute}"
        )

    def __repr__(self) -> str:
        return f"<actorrt.get_actor({self._name!r}): await it for the ref>"

    def __del__(self) -> None:
        if not self._awaited:
            warnings.warn(
                f"actorrt.get_actor({self._name!r}) was never awaited, so no actor was looked "
                f"up: write `await actorrt.get_actor({self._name!r})`",
                RuntimeWarning,
                stacklevel=2,
            )


def get_actor(name: str) -> ActorLookup:
    """The live actor registered as ``name``: ``ref = await actorrt.get_actor(name)``.

    Raises ``TypeError`` at once when ``name`` is not a string; awaiting it raises
    ``ActorNotFoundError`` when no live actor has that name. See :class:`ActorLookup` for
    why it is awaited, unlike Ray's.
    """
    if not isinstance(name, str):
        raise TypeError(f"actor names are strings, got {name!r}")
    return ActorLookup(name)


async def _get_actor(name: str) -> ActorRef[Any]:
    runtime = current_runtime()
    if asyncio.get_running_loop() is not runtime.loop:
        return await runtime.call_on_loop(runtime.find_actor(name))
    return await runtime.find_actor(name)
