"""The sweeps the dashboard shows: a protocol a sweep library implements, and a registry.

``actorrt.tune`` registers one :class:`SweepSource` per ``fit()`` (its live trials, from
the controller's memory); ``actorrt dashboard FOLDER`` registers one that reads a finished
or running experiment's folder. The dashboard reads the trial files themselves
(``result.json``, ``output.log``, ``error.txt``, ``checkpoint_*``) through ``_files``, off
the loop.
"""

from __future__ import annotations

import itertools
from typing import Any, Protocol

__all__ = [
    "AUTO_FIELDS",
    "MAX_SWEEPS",
    "SweepSource",
    "register_sweep",
    "server_closed",
    "server_started",
    "serving",
    "sweeps",
    "unregister_sweep",
]

#: Fields Tune adds to every result; never candidates for "the" metric.
AUTO_FIELDS = frozenset(
    {
        "training_iteration", "time_this_iter_s", "time_total_s", "time_since_restore",
        "iterations_since_restore", "timestamp", "pid", "trial_id", "date", "hostname",
        "done", "checkpoint_dir_name", "node_ip", "experiment_id", "experiment_tag",
        "should_checkpoint",
    }
)  # fmt: skip

MAX_SWEEPS = 16  # the newest sweeps kept; older ones leave the dashboard


class SweepSource(Protocol):
    """One experiment as the dashboard reads it."""

    @property
    def name(self) -> str:
        """The experiment's name (its folder's)."""
        ...

    @property
    def path(self) -> str:
        """The experiment folder."""
        ...

    @property
    def metric(self) -> str | None:
        """The objective (``a/b`` for nested), or ``None``."""
        ...

    @property
    def mode(self) -> str | None:
        """``"min"``, ``"max"`` or ``None``."""
        ...

    @property
    def running(self) -> bool:
        """Whether the experiment runs now."""
        ...

    async def trials(self) -> list[dict[str, Any]]:
        """Each trial as plain data: ``name``, ``id``, ``status`` (lower case), ``config``,
        ``path`` (its folder), ``last_result``, ``num_results``, ``error`` (one line, or
        ``None``). Called on the loop: reading files must happen in a thread."""
        ...


_sweeps: dict[str, SweepSource] = {}
_numbers = itertools.count(1)
_serving = 0  # dashboards this process serves now


def serving() -> bool:
    """Whether this process serves a dashboard now: a sweep library registers its sweeps
    only then (so a process without one keeps no sweep's trials)."""
    return _serving > 0


def server_started() -> None:
    global _serving
    _serving += 1


def server_closed() -> None:
    global _serving
    _serving = max(0, _serving - 1)


def register_sweep(source: SweepSource) -> str:
    """Show ``source``; returns its key in the API (its name, made unique)."""
    key = source.name
    while key in _sweeps:
        key = f"{source.name}-{next(_numbers)}"
    _sweeps[key] = source
    while len(_sweeps) > MAX_SWEEPS:
        del _sweeps[next(iter(_sweeps))]
    return key


def unregister_sweep(key: str) -> None:
    """Stop showing the sweep registered as ``key`` (nothing when it is not shown)."""
    _sweeps.pop(key, None)


def sweeps() -> dict[str, SweepSource]:
    """The sweeps shown, oldest first."""
    return dict(_sweeps)
