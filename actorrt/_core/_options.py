"""Actor options: validated where they are given, so a bad value fails at that call."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from ..resources import (
    GroupTarget,
    Resources,
    parse_bundles,
    parse_strategy,
    resources_from_options,
)
from ._lifecycle import (
    RESTART_BACKOFF_INITIAL,
    RESTART_BACKOFF_MAX,
    RESTART_BACKOFF_RESET,
    Backoff,
)

DEFAULT_MAILBOX_SIZE = 100_000


@dataclasses.dataclass(frozen=True, slots=True)
class ActorOptions:
    """The options an actor is spawned with.

    Attributes:
        name: register the actor under this name (``actorrt.get_actor``); unique per runtime.
        max_restarts: restarts after a crash (``-1``: unlimited; ``0``: none).
        restart_backoff_s: seconds before the first restart after a crash; each further
            crash doubles it, up to ``restart_backoff_max_s``.
        restart_backoff_max_s: the longest delay before a restart (at least
            ``restart_backoff_s``).
        restart_backoff_reset_s: an incarnation that ran this many seconds before it
            crashed was healthy: the next delay is ``restart_backoff_s`` again.
        max_concurrency: messages processed at once (``1``: one at a time, across awaits).
        mailbox_size: messages the mailbox holds before plain tells raise.
        process: ``True``: run in a worker process; ``False``: inline on the spawner's
            event loop; ``None`` (default): a worker process when the actor asks for CPUs
            or GPUs, else inline.
        worker_env: extra environment variables for the actor's worker process (a dict;
            stored sorted, as pairs).
        num_cpus, num_gpus, memory, resources: what the actor needs (memory in bytes;
            ``resources`` custom amounts by name); spawning waits until it is granted.
        placement: ``"auto"`` (inside the spawner's placement group, if any), ``"cluster"``
            (outside any group), a ``PlacementGroup`` (any bundle with room) or
            ``pg.bundle(i)``.
        placement_group: bundles (a list of resource dicts) reserved atomically for this
            actor, which runs in bundle 0 and holds the group: its children go into the
            group, and the group is removed when the actor ends.
        strategy: the ``placement_group`` strategy (``PACK``, ``SPREAD``, ``STRICT_PACK``,
            ``STRICT_SPREAD``).
        spawn_timeout: seconds that ``spawn()`` may take, from the call until the actor has
            started (resources granted, constructor and ``on_start`` run); past it the spawn
            raises ``TimeoutError`` saying what it was waiting for (its resources, the fork
            server, its worker process to connect, its constructor), its request is
            withdrawn and the half-started actor ended. A bounded spawn is never a wait
            edge of the deadlock check.
    """

    name: str | None = None
    max_restarts: int = 0
    restart_backoff_s: float = RESTART_BACKOFF_INITIAL
    restart_backoff_max_s: float = RESTART_BACKOFF_MAX
    restart_backoff_reset_s: float = RESTART_BACKOFF_RESET
    max_concurrency: int = 1
    mailbox_size: int = DEFAULT_MAILBOX_SIZE
    process: bool | None = None
    worker_env: tuple[tuple[str, str], ...] = ()
    num_cpus: float | None = None
    num_gpus: float | None = None
    memory: int | None = None
    resources: tuple[tuple[str, float], ...] = ()
    placement: Any = "auto"
    placement_group: tuple[Any, ...] | None = None
    strategy: str = "PACK"
    spawn_timeout: float | None = None

    def merged(self, **changes: Any) -> ActorOptions:
        """These options with ``changes`` applied, each validated."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            allowed = ", ".join(f.name for f in dataclasses.fields(self))
            raise TypeError(f"unknown actor option(s) {', '.join(unknown)}; allowed: {allowed}")
        for key, value in changes.items():
            validate: Callable[[Any], None] = _VALIDATORS[key]
            validate(value)
        if "worker_env" in changes:
            changes["worker_env"] = tuple(sorted(dict(changes["worker_env"] or {}).items()))
        if "resources" in changes:
            changes["resources"] = tuple(sorted(dict(changes["resources"] or {}).items()))
        if changes.get("placement_group") is not None:
            changes["placement_group"] = tuple(changes["placement_group"])
        merged = dataclasses.replace(self, **changes)
        merged.own_resources()  # the combination is valid, or this raises here
        if merged.restart_backoff_max_s < merged.restart_backoff_s:
            raise ValueError(
                f"restart_backoff_max_s ({merged.restart_backoff_max_s!r}) must be at least "
                f"restart_backoff_s ({merged.restart_backoff_s!r})"
            )
        return merged

    def backoff(self) -> Backoff:
        """A fresh restart backoff with these options' delays."""
        return Backoff(
            self.restart_backoff_s, self.restart_backoff_max_s, self.restart_backoff_reset_s
        )

    def own_resources(self) -> Resources:
        """What the actor itself asks for (with ``placement_group``: bundle 0 by default)."""
        own = resources_from_options(
            num_cpus=self.num_cpus,
            num_gpus=self.num_gpus,
            memory=self.memory,
            resources=dict(self.resources),
        )
        if self.placement_group is not None and not own:
            return parse_bundles(self.placement_group, allow_empty_head=True)[0]
        return own

    def portable(self) -> ActorOptions:
        """These options as they travel to another process: a placement group object
        becomes its plain target (group id and bundle)."""
        if isinstance(self.placement, str | GroupTarget):
            return self
        return dataclasses.replace(self, placement=self.placement.target())

    def runs_in_process(self) -> bool:
        """Where the actor runs: ``process`` if given, else a process for CPUs or GPUs."""
        if self.process is not None:
            return self.process
        own = self.own_resources().to_dict()
        return bool(own.get("CPU") or own.get("GPU"))

    def needs_grant(self) -> bool:
        return self.placement_group is not None or bool(self.own_resources())


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


def _process(value: Any) -> None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"process must be True, False or None, got {value!r}")


def _worker_env(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, dict | tuple):
        raise TypeError(f"worker_env must be a dict of str to str, got {value!r}")
    for key, item in dict(value).items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise TypeError(
                f"worker_env must map str to str; got {key!r}: {item!r} "
                f"({type(item).__name__})"
            )


def _placement(value: Any) -> None:
    if value in ("auto", "cluster") or hasattr(value, "target") or isinstance(value, GroupTarget):
        return
    raise ValueError(
        f"placement must be 'auto', 'cluster', a PlacementGroup or pg.bundle(i), got {value!r}"
    )


def _group(value: Any) -> None:
    if value is not None:
        parse_bundles(list(value), allow_empty_head=True)


def _amount(option: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value is not None:
            resources_from_options(**{option: value})

    return check


def _seconds(key: str, value: Any, *, zero: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        kind = type(value).__name__
        raise TypeError(f"{key} must be a number of seconds, got {value!r} ({kind})")
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        least = "0 or more" if zero else "above 0"
        raise ValueError(f"{key} must be a finite number of seconds, {least}; got {value!r}")


def _timeout(key: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{key} must be a number of seconds or None, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{key} must be a finite number of seconds above 0, got {value!r}")


def _strategy(value: Any) -> None:
    parse_strategy(value)


_VALIDATORS: dict[str, Callable[[Any], None]] = {
    "num_cpus": _amount("num_cpus"),
    "num_gpus": _amount("num_gpus"),
    "memory": _amount("memory"),
    "resources": _amount("resources"),
    "placement": _placement,
    "placement_group": _group,
    "strategy": _strategy,
    "process": _process,
    "worker_env": _worker_env,
    "name": _name,
    "max_restarts": lambda v: _int("max_restarts", v, -1),
    "max_concurrency": lambda v: _int("max_concurrency", v, 1),
    "mailbox_size": lambda v: _int("mailbox_size", v, 1),
    "spawn_timeout": lambda v: _timeout("spawn_timeout", v),
    "restart_backoff_s": lambda v: _seconds("restart_backoff_s", v, zero=True),
    "restart_backoff_max_s": lambda v: _seconds("restart_backoff_max_s", v, zero=True),
    "restart_backoff_reset_s": lambda v: _seconds("restart_backoff_reset_s", v, zero=False),
}
