"""When trials (or the whole experiment) stop: ``RunConfig(stop=...)``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["CombinedStopper", "FunctionStopper", "Stopper", "to_stopper"]


class Stopper:
    """Decides, per result, whether a trial stops (Ray Tune's ``Stopper``)."""

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        """Whether trial ``trial_id`` should stop after ``result``."""
        return False

    def stop_all(self) -> bool:
        """Whether the whole experiment should stop now."""
        return False


class _DictStopper(Stopper):
    """Stop a trial once any named metric reaches its value (``>=``), as Ray does."""

    def __init__(self, criteria: Mapping[str, Any]) -> None:
        for key, value in criteria.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"stop criterion {key!r} must be a number, got {value!r}")
        self.criteria = dict(criteria)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        for key, value in self.criteria.items():
            if key not in result:
                raise ValueError(
                    f"the stop criterion {key!r} is not in the trial's result; "
                    f"reported keys: {sorted(result)}"
                )
            if result[key] >= value:
                return True
        return False


class FunctionStopper(Stopper):
    """Stop a trial when ``function(trial_id, result)`` is true."""

    def __init__(self, function: Callable[[str, dict[str, Any]], bool]) -> None:
        self.function = function

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return bool(self.function(trial_id, result))


class CombinedStopper(Stopper):
    """Stop when any of the given stoppers says so."""

    def __init__(self, *stoppers: Stopper) -> None:
        self.stoppers = stoppers

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        # Every stopper sees every result (some keep state), so no short-circuit.
        verdicts = [s(trial_id, result) for s in self.stoppers]
        return any(verdicts)

    def stop_all(self) -> bool:
        return any(s.stop_all() for s in self.stoppers)


def to_stopper(stop: Any) -> Stopper:
    """``RunConfig.stop`` as a :class:`Stopper`."""
    if stop is None:
        return Stopper()
    if isinstance(stop, Stopper):
        return stop
    if isinstance(stop, Mapping):
        return _DictStopper(stop)
    if callable(stop):
        return FunctionStopper(stop)
    raise ValueError(f"stop must be a dict, a callable or a Stopper, got {stop!r}")
