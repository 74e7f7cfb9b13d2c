"""Actor options: validated where they are given, so a bad value fails at that call."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

DEFAULT_MAILBOX_SIZE = 100_000


@dataclasses.dataclass(frozen=True, slots=True)
class ActorOptions:
    """The options an actor is spawned with (DESIGN.md §3 "Defining and spawning").

    Attributes:
        name: register the actor under this name (``actorrt.get_actor``); unique per runtime.
        max_restarts: restarts after a crash (``-1``: unlimited; ``0``: none).
        max_concurrency: messages processed at once (``1``: one at a time, across awaits).
        mailbox_size: messages the mailbox holds before plain tells raise.
    """

    name: str | None = None
    max_restarts: int = 0
    max_concurrency: int = 1
    mailbox_size: int = DEFAULT_MAILBOX_SIZE

    def merged(self, **changes: Any) -> ActorOptions:
        """These options with ``changes`` applied, each validated."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            allowed = ", ".join(f.name for f in dataclasses.fields(self))
            raise TypeError(f"unknown actor option(s) {', '.join(unknown)}; allowed: {allowed}")
        for key, value in changes.items():
            validate: Callable[[Any], None] = _VALIDATORS[key]
            validate(value)
        return dataclasses.replace(self, **changes)


def _int(key: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{key} must be an int, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{key} must be at least {minimum}, got {value}")


def _name(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value:
        raise TypeError(f"name must be a non-empty string or None, got {value!r}")


_VALIDATORS: dict[str, Callable[[Any], None]] = {
    "name": _name,
    "max_restarts": lambda v: _int("max_restarts", v, -1),
    "max_concurrency": lambda v: _int("max_concurrency", v, 1),
    "mailbox_size": lambda v: _int("mailbox_size", v, 1),
}
