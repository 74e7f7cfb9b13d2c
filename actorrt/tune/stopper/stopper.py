"""When trials (or the whole experiment) stop: the ``Stopper`` interface and ``CombinedStopper``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._controller._storage import flatten

__all__ = ["CombinedStopper", "Stopper", "metric_value", "positive_int"]


class Stopper:
    """Decides, per result, whether a trial stops (Ray Tune's ``Stopper``)."""

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        """Whether trial ``trial_id`` should stop after ``result``."""
        return False

    def stop_all(self) -> bool:
        """Whether the whole experiment should stop now."""
        return False


class CombinedStopper(Stopper):
    """Stop when any of the given stoppers says so."""

    def __init__(self, *stoppers: Stopper) -> None:
        for stopper in stoppers:
            if not isinstance(stopper, Stopper):
                raise ValueError(f"CombinedStopper takes Stopper instances, got {stopper!r}")
        self.stoppers = stoppers

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        # Every stopper sees every result (some keep state), so no short-circuit.
        verdicts = [s(trial_id, result) for s in self.stoppers]
        return any(verdicts)

    def stop_all(self) -> bool:
        return any(s.stop_all() for s in self.stoppers)


def positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def metric_value(stopper: str, metric: str, result: Mapping[str, Any]) -> float:
    value = flatten(result).get(metric)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(
            f"{stopper} watches {metric!r}, but the result has {metric}={value!r}; "
            f"reported keys: {sorted(flatten(result))}"
        )
    return float(value)
