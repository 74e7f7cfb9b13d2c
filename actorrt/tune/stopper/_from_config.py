"""``RunConfig(stop=...)`` as a :class:`Stopper`: a dict of thresholds, a function or a stopper."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._controller._storage import flatten
from .function_stopper import FunctionStopper
from .stopper import Stopper

__all__ = ["to_stopper"]


class _DictStopper(Stopper):
    """Stop a trial once any named metric reaches its value (``>=``), as Ray does; nested
    metrics are named with ``/`` (``"info/loss"``), and ``{"done": True}`` stops a trial
    when it reports ``done``."""

    def __init__(self, criteria: Mapping[str, Any]) -> None:
        for key, value in criteria.items():
            if isinstance(value, Mapping):
                raise ValueError(
                    f"stop criterion {key!r} is a dict; name nested metrics with slashes "
                    f"instead, as Ray does: {{'{key}/<name>': value}}"
                )
            if not isinstance(value, int | float):
                raise ValueError(f"stop criterion {key!r} must be a number, got {value!r}")
        self.criteria = dict(criteria)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        flat = flatten(result)
        for key, value in self.criteria.items():
            if key not in flat:
                raise ValueError(
                    f"the stop criterion {key!r} is not in the trial's result; "
                    f"reported keys: {sorted(flat)}"
                )
            if flat[key] >= value:
                return True
        return False


def to_stopper(stop: Any) -> Stopper:
    """``RunConfig.stop`` as a :class:`Stopper`."""
    if stop is None:
        return Stopper()
    if isinstance(stop, Stopper):
        return stop
    if isinstance(stop, Mapping):
        return _DictStopper(stop)
    if not isinstance(stop, type) and FunctionStopper.is_valid_function(stop):
        return FunctionStopper(stop)
    raise ValueError(f"stop must be a dict, a callable or a Stopper, got {stop!r}")
