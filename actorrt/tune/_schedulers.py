"""Trial schedulers: decide, at each result, whether a trial goes on.

``on_trial_result`` returns ``CONTINUE``, ``PAUSE`` or ``STOP``; a stopped trial ends as
TERMINATED (it was not an error), a paused one is resumed later from its checkpoint. Hooks
receive the controller as their first argument, as in Ray Tune, and run on the controller's
event loop: keep them quick.
"""

from __future__ import annotations

import math
import random
from typing import Any

__all__ = [
    "ASHAScheduler",
    "AsyncHyperBandScheduler",
    "FIFOScheduler",
    "MedianStoppingRule",
    "TrialScheduler",
]


class TrialScheduler:
    """The base of every scheduler (Ray Tune's interface)."""

    CONTINUE = "CONTINUE"
    PAUSE = "PAUSE"
    STOP = "STOP"

    def __init__(self, metric: str | None = None, mode: str | None = None) -> None:
        if mode not in (None, "min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        self._metric = metric
        self._mode = mode

    @property
    def metric(self) -> str | None:
        return self._metric

    @property
    def mode(self) -> str | None:
        return self._mode

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Take the experiment's metric and mode where none was given here."""
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        return True

    def on_trial_add(self, controller: Any, trial: Any) -> None:
        """A trial was created."""

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> str:
        """A trial reported ``result``; return ``CONTINUE`` or ``STOP``."""
        return self.CONTINUE

    def on_trial_complete(self, controller: Any, trial: Any, result: dict[str, Any]) -> None:
        """A trial ended normally (finished or stopped)."""

    def on_trial_error(self, controller: Any, trial: Any) -> None:
        """A trial ended with an error."""

    def on_trial_remove(self, controller: Any, trial: Any) -> None:
        """A trial was removed."""

    def debug_string(self) -> str:
        return type(self).__name__


class FIFOScheduler(TrialScheduler):
    """Runs every trial to its end, in the order they were made (the default)."""


def _percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation between closest ranks."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class _Bracket:
    """One bracket of successive halving: rungs at ``grace * rf**(k + offset)``."""

    def __init__(self, grace: float, max_t: float, rf: float, offset: int) -> None:
        self.rf = rf
        count = int(round(math.log(max_t / grace) / math.log(rf), 9)) - offset + 1
        # Highest milestone first: a result past several rungs is judged at the highest.
        self.rungs: list[tuple[float, dict[str, float]]] = [
            (grace * rf ** (k + offset), {}) for k in reversed(range(max(count, 0)))
        ]

    def on_result(self, trial_id: str, t: float, score: float) -> bool:
        """Record the trial at the highest rung it has reached; whether it may go on."""
        for milestone, recorded in self.rungs:
            if t < milestone or trial_id in recorded:
                continue
            scores = [s for s in recorded.values() if not math.isnan(s)]
            cutoff = _percentile(scores, (1 - 1 / self.rf) * 100) if scores else None
            recorded[trial_id] = score
            return cutoff is None or score >= cutoff
        return True


class AsyncHyperBandScheduler(TrialScheduler):
    """ASHA: asynchronous successive halving (Li et al., 2018), Ray Tune's default early stop.

    Rungs sit at ``grace_period * reduction_factor**k`` (in ``time_attr`` units) up to
    ``max_t``. When a trial reaches a rung, it goes on only if its score is in the top
    ``1/reduction_factor`` of the scores recorded at that rung so far; so about
    ``1/reduction_factor`` of the trials pass each rung. A trial reaching ``max_t`` stops.

    Args:
        time_attr: the result key that measures progress (``training_iteration``).
        metric, mode: what is optimised (default: ``TuneConfig``'s).
        max_t: the most ``time_attr`` a trial may use.
        grace_period: no trial stops before this much ``time_attr``.
        reduction_factor: the halving rate (``> 1``).
        brackets: the number of brackets (each with its rungs offset by one more factor);
            a new trial joins one at random, weighted toward brackets with more rungs.
        stop_last_trials: stop trials that reach ``max_t``.
        seed: seeds the bracket choice.
    """

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        max_t: float = 100,
        grace_period: float = 1,
        reduction_factor: float = 4,
        brackets: int = 1,
        stop_last_trials: bool = True,
        seed: int | None = None,
    ) -> None:
        super().__init__(metric, mode)
        if not grace_period > 0:
            raise ValueError(f"grace_period must be positive, got {grace_period!r}")
        if not max_t > 0 or max_t < grace_period:
            raise ValueError(
                f"max_t must be positive and at least grace_period={grace_period}, got {max_t!r}"
            )
        if not reduction_factor > 1:
            raise ValueError(f"reduction_factor must be above 1, got {reduction_factor!r}")
        if isinstance(brackets, bool) or not isinstance(brackets, int) or brackets < 1:
            raise ValueError(f"brackets must be a positive int, got {brackets!r}")
        self.time_attr = time_attr
        self.max_t = max_t
        self.grace_period = grace_period
        self.reduction_factor = reduction_factor
        self.stop_last_trials = stop_last_trials
        self.brackets = [
            _Bracket(grace_period, max_t, reduction_factor, s) for s in range(brackets)
        ]
        self._rng = random.Random(seed)
        self._of: dict[str, _Bracket] = {}

    def on_trial_add(self, controller: Any, trial: Any) -> None:
        sizes = [len(b.rungs) for b in self.brackets]
        weights = [math.exp(s - max(sizes)) for s in sizes]
        self._of[trial.trial_id] = self._rng.choices(self.brackets, weights)[0]

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> str:
        if self._metric is None or self._mode is None:
            raise ValueError(
                "ASHAScheduler needs a metric and a mode: pass them to it or to TuneConfig"
            )
        if self.time_attr not in result or self._metric not in result:
            return self.CONTINUE
        t = result[self.time_attr]
        if self.stop_last_trials and t >= self.max_t:
            return self.STOP
        bracket = self._of.get(trial.trial_id)
        if bracket is None:
            self.on_trial_add(controller, trial)
            bracket = self._of[trial.trial_id]
        score = float(result[self._metric])
        if self._mode == "min":
            score = -score
        return self.CONTINUE if bracket.on_result(trial.trial_id, t, score) else self.STOP

    def on_trial_complete(self, controller: Any, trial: Any, result: dict[str, Any]) -> None:
        self._of.pop(trial.trial_id, None)

    def on_trial_error(self, controller: Any, trial: Any) -> None:
        self._of.pop(trial.trial_id, None)

    def debug_string(self) -> str:
        lines = [f"ASHA: {len(self.brackets)} bracket(s), max_t={self.max_t}"]
        for i, bracket in enumerate(self.brackets):
            rungs = ", ".join(f"{m:g}: {len(r)}" for m, r in bracket.rungs)
            lines.append(f"  bracket {i}: {rungs}")
        return "\n".join(lines)


ASHAScheduler = AsyncHyperBandScheduler


class MedianStoppingRule(TrialScheduler):
    """Stop a trial whose best score is worse than the median of the others' running means.

    At each result past ``grace_period`` (in ``time_attr`` units), the trial's best score so
    far is compared with the median, over the other trials that have reached the same
    ``time_attr``, of their mean score up to that point. Below it (for ``mode="max"``), the
    trial stops, once at least ``min_samples_required`` others are there to compare with.

    Args:
        time_attr: the result key that measures progress.
        metric, mode: what is optimised (default: ``TuneConfig``'s).
        grace_period: no trial stops before this much ``time_attr``.
        min_samples_required: how many other trials the median needs.
        hard_stop: ``True``: a trial below the median ends. ``False``: it is paused
            instead (its actor stops and gives its resources back) and, once nothing else
            runs or waits, resumed from its latest checkpoint and let run to its end
            without being compared again, as in Ray.
    """

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        grace_period: float = 60.0,
        min_samples_required: int = 3,
        hard_stop: bool = True,
    ) -> None:
        super().__init__(metric, mode)
        if grace_period < 0:
            raise ValueError(f"grace_period must be >= 0, got {grace_period!r}")
        if isinstance(min_samples_required, bool) or min_samples_required < 1:
            raise ValueError(
                f"min_samples_required must be a positive int, got {min_samples_required!r}"
            )
        self.time_attr = time_attr
        self.grace_period = grace_period
        self.min_samples_required = min_samples_required
        self.hard_stop = bool(hard_stop)
        self._history: dict[str, list[tuple[float, float]]] = {}
        self._paused: set[str] = set()  # paused once (hard_stop=False): never compared again

    def _running_mean(self, trial_id: str, t: float) -> float:
        scores = [s for when, s in self._history[trial_id] if when <= t]
        return sum(scores) / len(scores)

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> str:
        if self._metric is None or self._mode is None:
            raise ValueError(
                "MedianStoppingRule needs a metric and a mode: pass them to it or to TuneConfig"
            )
        if self.time_attr not in result or self._metric not in result:
            return self.CONTINUE
        if trial.trial_id in self._paused:
            return self.CONTINUE  # resumed after a pause: it runs on to its end (Ray's FIFO)
        t = float(result[self.time_attr])
        score = float(result[self._metric]) * (1 if self._mode == "max" else -1)
        history = self._history.setdefault(trial.trial_id, [])
        history.append((t, score))
        if t < self.grace_period:
            return self.CONTINUE
        others = [
            self._running_mean(other, t)
            for other, points in self._history.items()
            if other != trial.trial_id and points[-1][0] >= t
        ]
        if len(others) < self.min_samples_required:
            return self.CONTINUE
        best = max(s for _, s in history)
        if best >= _percentile(others, 50):
            return self.CONTINUE
        if self.hard_stop:
            return self.STOP
        self._paused.add(trial.trial_id)
        return self.PAUSE

    def on_no_running_trials(self, controller: Any) -> None:
        """Nothing runs or waits: resume the trials this rule paused (Ray resumes paused
        trials once no other trial is waiting to run)."""
        for trial in controller.trials:
            if trial.trial_id in self._paused and trial.status == "PAUSED":  # (._trial imports us)
                controller.resume_trial(trial)

    def on_trial_remove(self, controller: Any, trial: Any) -> None:
        self._history.pop(trial.trial_id, None)
