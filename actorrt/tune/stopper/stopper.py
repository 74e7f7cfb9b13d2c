"""When trials (or the whole experiment) stop: ``RunConfig(stop=...)``."""

from __future__ import annotations

import collections
import datetime
import inspect
import logging
import math
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

from .._controller._storage import flatten

__all__ = [
    "CombinedStopper",
    "ExperimentPlateauStopper",
    "FunctionStopper",
    "MaximumIterationStopper",
    "NoopStopper",
    "Stopper",
    "TimeoutStopper",
    "TrialPlateauStopper",
    "to_stopper",
]

logger = logging.getLogger("actorrt.tune")


class Stopper:
    """Decides, per result, whether a trial stops (Ray Tune's ``Stopper``)."""

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        """Whether trial ``trial_id`` should stop after ``result``."""
        return False

    def stop_all(self) -> bool:
        """Whether the whole experiment should stop now."""
        return False


class NoopStopper(Stopper):
    """Never stops anything (Ray's ``NoopStopper``)."""


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


class FunctionStopper(Stopper):
    """Stop a trial when ``function(trial_id, result)`` is true."""

    def __init__(self, function: Callable[[str, dict[str, Any]], bool]) -> None:
        if not self.is_valid_function(function) or not _takes_two(function):
            raise ValueError(
                f"FunctionStopper takes a function (trial_id, result) -> bool, got {function!r}"
            )
        self.function = function

    @classmethod
    def is_valid_function(cls, fn: Any) -> bool:
        """Whether ``fn`` is a stop function rather than a ``Stopper`` (as Ray decides it).

        Raises:
            ValueError: ``fn`` has a ``stop_all`` method but is not a ``Stopper``.
        """
        is_function = callable(fn) and not isinstance(fn, Stopper)
        if is_function and hasattr(fn, "stop_all"):
            raise ValueError(
                f"{fn!r} has stop_all() but is not a tune.Stopper: subclass tune.Stopper "
                "so it is used as one"
            )
        return is_function

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return bool(self.function(trial_id, result))


def _takes_two(fn: Any) -> bool:
    try:
        inspect.signature(fn).bind("trial", {})
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): take it on trust
        return True
    return True


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


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def _metric_value(stopper: str, metric: str, result: Mapping[str, Any]) -> float:
    value = flatten(result).get(metric)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(
            f"{stopper} watches {metric!r}, but the result has {metric}={value!r}; "
            f"reported keys: {sorted(flatten(result))}"
        )
    return float(value)


class MaximumIterationStopper(Stopper):
    """Stop each trial after ``max_iter`` results (Ray's ``MaximumIterationStopper``)."""

    def __init__(self, max_iter: int) -> None:
        self._max_iter = _positive_int("max_iter", max_iter)
        self._iter: collections.Counter[str] = collections.Counter()

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self._iter[trial_id] += 1
        return self._iter[trial_id] >= self._max_iter


class TrialPlateauStopper(Stopper):
    """Stop a trial once ``metric`` has plateaued: the standard deviation of its last
    ``num_results`` values is at most ``std`` (Ray's ``TrialPlateauStopper``).

    Args:
        metric: the metric to watch.
        std: the largest standard deviation that counts as a plateau.
        num_results: how many of the latest values to look at.
        grace_period: never stop a trial before this many results.
        metric_threshold: with ``mode``, stop only once the metric is better than this
            (below it for ``"min"``, above it for ``"max"``).
        mode: ``"min"`` or ``"max"``; needed with ``metric_threshold``.
    """

    def __init__(
        self,
        metric: str,
        std: float = 0.01,
        num_results: int = 4,
        grace_period: int = 4,
        metric_threshold: float | None = None,
        mode: str | None = None,
    ) -> None:
        if not isinstance(metric, str) or not metric:
            raise ValueError(f"metric must be a metric name, got {metric!r}")
        if mode not in (None, "min", "max"):
            raise ValueError(f"mode must be 'min', 'max' or None, got {mode!r}")
        if metric_threshold is not None and mode is None:
            raise ValueError(
                "TrialPlateauStopper: metric_threshold needs mode='min' or mode='max'"
            )
        self._metric, self._std, self._mode = metric, float(std), mode
        self._num_results = _positive_int("num_results", num_results)
        self._grace = _positive_int("grace_period", grace_period, 0)
        self._threshold = metric_threshold
        self._window: dict[str, collections.deque[float]] = collections.defaultdict(
            lambda: collections.deque(maxlen=self._num_results)
        )
        self._count: collections.Counter[str] = collections.Counter()

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        value = _metric_value("TrialPlateauStopper", self._metric, result)
        self._count[trial_id] += 1
        window = self._window[trial_id]
        window.append(value)
        if self._count[trial_id] < self._grace or len(window) < self._num_results:
            return False
        if self._threshold is not None:
            if self._mode == "min" and value > self._threshold:
                return False
            if self._mode == "max" and value < self._threshold:
                return False
        return statistics.pstdev(window) < self._std  # strictly below, as in Ray


class TimeoutStopper(Stopper):
    """Stop the whole experiment after ``timeout`` (seconds, or a ``datetime.timedelta``),
    as Ray's ``TimeoutStopper``: the time counts from the first check (the first result),
    and across a restore only the time the experiment ran. Running trials are stopped
    and count as finished."""

    def __init__(self, timeout: float | datetime.timedelta) -> None:
        if isinstance(timeout, datetime.timedelta):
            timeout = timeout.total_seconds()
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ValueError(
                f"timeout must be a positive number of seconds or a timedelta, got {timeout!r}"
            )
        self._timeout = float(timeout)
        self._budget = self._timeout
        self._last_check: float | None = None

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        now = time.time()
        if self._last_check is not None:
            self._budget -= now - self._last_check
        self._last_check = now
        if self._budget <= 0:
            logger.info("tune: TimeoutStopper: %.4g s reached, stopping", self._timeout)
            return True
        return False

    def __setstate__(self, state: dict[str, Any]) -> None:
        state["_last_check"] = None  # a restored experiment: the time between runs is free
        self.__dict__.update(state)


class ExperimentPlateauStopper(Stopper):
    """Stop the whole experiment once the best ``top`` values of ``metric`` over all
    trials have plateaued (standard deviation at most ``std``) for ``patience`` more
    results (Ray's ``ExperimentPlateauStopper``)."""

    def __init__(
        self, metric: str, std: float = 0.001, top: int = 10, mode: str = "min", patience: int = 0
    ) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        if not isinstance(metric, str) or not metric:
            raise ValueError(f"metric must be a metric name, got {metric!r}")
        if not (isinstance(std, int | float) and math.isfinite(std) and std > 0):
            raise ValueError(f"std must be a positive number, got {std!r}")
        self._metric, self._std, self._mode = metric, float(std), mode
        self._top = _positive_int("top", top, 2)
        self._patience = _positive_int("patience", patience, 0)
        self._values: list[float] = []
        self._iterations = 0

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        value = _metric_value("ExperimentPlateauStopper", self._metric, result)
        self._values.append(value)
        self._values.sort(reverse=self._mode == "max")
        del self._values[self._top :]
        if self.has_plateaued():
            self._iterations += 1
        else:
            self._iterations = 0
        return self.stop_all()

    def has_plateaued(self) -> bool:
        """Whether the best ``top`` values are as close together as ``std`` asks."""
        return len(self._values) == self._top and statistics.pstdev(self._values) <= self._std

    def stop_all(self) -> bool:
        return self.has_plateaued() and self._iterations >= self._patience


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
