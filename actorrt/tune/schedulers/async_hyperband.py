"""ASHA: asynchronous successive halving, Ray Tune's ``AsyncHyperBandScheduler``."""

from __future__ import annotations

import math
import random
from typing import Any

from .trial_scheduler import TrialScheduler

__all__ = ["ASHAScheduler", "AsyncHyperBandScheduler"]


def percentile(values: list[float], q: float) -> float:
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
            cutoff = percentile(scores, (1 - 1 / self.rf) * 100) if scores else None
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
