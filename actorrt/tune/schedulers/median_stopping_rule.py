"""The median stopping rule: stop a trial that does worse than the others' median."""

from __future__ import annotations

from typing import Any

from .async_hyperband import percentile
from .trial_scheduler import TrialScheduler

__all__ = ["MedianStoppingRule"]


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
        if best >= percentile(others, 50):
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
