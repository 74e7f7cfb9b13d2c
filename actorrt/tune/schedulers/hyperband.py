"""Synchronous HyperBand (Li et al., 2017) as Ray Tune's ``HyperBandScheduler`` runs it.

Trials fill brackets in the order they are made. A band holds ``s_max + 1`` brackets, made
in turn for ``s = 0, 1, ..., s_max`` (``s_max + 1 = round(log(max_t) / log(eta)) + 1``);
bracket ``s`` takes ``n0 = ceil((s_max + 1) / (s + 1) * eta**s)`` trials and first runs them
to ``r0 = int(max_t * eta**-s)`` (in ``time_attr`` units). A trial reaching its bracket's
milestone is PAUSED (its actor stops and gives its resources back; it resumes from its
latest checkpoint). When every live trial of a bracket has reached the milestone, the bracket
halves: the best ``ceil(n / eta)`` go on (resumed) to the next milestone,
``int(min(r * eta, max_t))`` as Ray computes it (so bracket ``s``'s milestones are
``r0, r0 * eta, ...`` up to ``max_t``), and the others stop. A bracket whose halvings are
done stops its trials at the last milestone; while one halving is being carried out, a
trial the halving stops does not start another.

Trainables must report a checkpoint with (at least) each result at a milestone, and load it
when they start with one (``tune.get_checkpoint()``).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from ..experiment.trial import PAUSED, RUNNING
from .trial_scheduler import TrialScheduler

__all__ = ["HyperBandScheduler"]

logger = logging.getLogger("actorrt.tune")


class _Bracket:
    def __init__(
        self, time_attr: str, n0: int, r0: int, max_t: int, eta: float, s: int,
        stop_last_trials: bool,
    ) -> None:
        self.time_attr = time_attr
        self.n = self.n0 = n0
        self.r = self.r0 = r0
        self.max_t = max_t
        self.milestone = r0
        self.eta = eta
        self.halves = s
        self.s = s
        self.halved = False  # a halving has been carried out (Ray's is_being_processed)
        self.stop_last_trials = stop_last_trials
        self.live: dict[str, Any] = {}  # trial id -> the trial's latest result (or None)
        self.trials: dict[str, Any] = {}  # trial id -> trial, every trial that joined

    def time_of(self, result: dict[str, Any] | None) -> float:
        return 0.0 if result is None else float(result.get(self.time_attr, 0))

    def filled(self) -> bool:
        return len(self.live) == self.n

    def add(self, trial: Any) -> None:
        self.live[trial.trial_id] = None
        self.trials[trial.trial_id] = trial

    def iteration_done(self) -> bool:
        return all(self.time_of(r) >= self.milestone for r in self.live.values())

    def finished(self) -> bool:
        return self.stop_last_trials and self.halves == 0 and self.iteration_done()

    def goes_on(self, trial_id: str) -> bool:
        if not self.stop_last_trials and self.halves == 0:
            return True
        return self.time_of(self.live[trial_id]) < self.milestone

    def halve(self, metric: str, sign: float) -> tuple[list[str], list[str]]:
        """Ray's successive halving: the next milestone, and the good and bad trials."""
        self.halved = True
        if self.halves == 0 and not self.stop_last_trials:
            return list(self.live), []
        self.halves -= 1
        self.n = math.ceil(self.n / self.eta)
        self.r = int(min(self.r * self.eta, self.max_t))
        self.milestone = self.r
        ranked = sorted(self.live, key=lambda t: sign * float(self.live[t][metric]))
        return ranked[-self.n:], ranked[:-self.n]

    def __repr__(self) -> str:
        return (
            f"Bracket(s={self.s}, n={self.n}, milestone={self.milestone}, "
            f"live={len(self.live)}/{len(self.trials)})"
        )


class HyperBandScheduler(TrialScheduler):
    """Synchronous HyperBand (Ray Tune's ``HyperBandScheduler``); see the module docstring.

    Args:
        time_attr: the result key that measures progress (it must grow).
        metric, mode: what is optimised (default: ``TuneConfig``'s).
        max_t: the most ``time_attr`` a trial may use.
        reduction_factor: ``eta``, the halving rate.
        stop_last_trials: stop trials at the last milestone (``False``: the survivors run
            on until they end by themselves).
    """

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        max_t: int = 81,
        reduction_factor: float = 3,
        stop_last_trials: bool = True,
    ) -> None:
        super().__init__(metric, mode)
        if not max_t > 0:
            raise ValueError(f"max_t must be positive, got {max_t!r}")
        if not reduction_factor > 1:
            raise ValueError(f"reduction_factor must be above 1, got {reduction_factor!r}")
        self.time_attr = time_attr
        self.max_t = max_t
        self.eta = reduction_factor
        self.s_max_1 = round(math.log(max_t) / math.log(reduction_factor)) + 1
        self.stop_last_trials = stop_last_trials
        self.bands: list[list[_Bracket | None]] = [[]]
        self._current: _Bracket | None = None
        self._of: dict[str, _Bracket] = {}
        self._processing = False
        self.num_stopped = 0

    def n0(self, s: int) -> int:
        """How many trials bracket ``s`` takes."""
        return math.ceil(self.s_max_1 / (s + 1) * self.eta**s)

    def r0(self, s: int) -> int:
        """Bracket ``s``'s first milestone."""
        return int(self.max_t * self.eta ** (-s))

    def _sign(self) -> float:
        if self._metric is None or self._mode is None:
            raise ValueError(
                f"{type(self).__name__} needs a metric and a mode: pass them to it or to "
                "TuneConfig"
            )
        return 1.0 if self._mode == "max" else -1.0

    def on_trial_add(self, controller: Any, trial: Any) -> None:
        self._sign()
        if trial.trial_id in self._of:
            return
        bracket = self._current
        if bracket is None or bracket.filled():
            bracket = None
            while bracket is None:
                if len(self.bands[-1]) == self.s_max_1:
                    self.bands.append([])
                s = self._bracket_s(len(self.bands[-1]))
                if self.r0(s) > 0:
                    bracket = self._make_bracket(s)
                self.bands[-1].append(bracket)  # None: a bracket too small to run
            self._current = bracket
        bracket.add(trial)
        self._of[trial.trial_id] = bracket

    def _bracket_s(self, made: int) -> int:
        """The ``s`` of a band's next bracket, when it has ``made`` brackets: the least
        aggressive (``s = 0``) first."""
        return made

    def _make_bracket(self, s: int) -> _Bracket:
        return _Bracket(
            self.time_attr, self.n0(s), self.r0(s), self.max_t, self.eta, s,
            self.stop_last_trials,
        )

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> str:
        sign = self._sign()
        bracket = self._of.get(trial.trial_id)
        if bracket is None:
            self.on_trial_add(controller, trial)
            bracket = self._of[trial.trial_id]
        if self.time_attr not in result or self._metric not in result:
            return self.CONTINUE
        if trial.trial_id not in bracket.live:
            return self.STOP  # halved away while its result was on its way
        bracket.live[trial.trial_id] = result
        if bracket.goes_on(trial.trial_id):
            return self.CONTINUE
        return self._at_milestone(controller, bracket, trial, result, sign)

    def _at_milestone(
        self, controller: Any, bracket: _Bracket, trial: Any, result: dict[str, Any], sign: float
    ) -> str:
        """``trial`` reached its bracket's milestone with ``result``: the decision for it."""
        return self._process(controller, bracket, sign, current=trial.trial_id)

    def _process(
        self, controller: Any, bracket: _Bracket, sign: float, current: str | None = None
    ) -> str:
        """Halve the bracket if all its live trials are at the milestone; the decision for
        ``current`` (the trial reporting now): PAUSE by default."""
        action = self.PAUSE
        if not bracket.iteration_done() or self._processing:
            return action
        if bracket.finished():
            for trial_id in list(bracket.live):
                if trial_id != current and bracket.trials[trial_id].status == PAUSED:
                    controller.stop_trial(bracket.trials[trial_id])
            return self.STOP
        self._processing = True
        try:
            good, bad = bracket.halve(self._metric or "", sign)
            self.num_stopped += len(bad)
            for trial_id in bad:
                trial = bracket.trials[trial_id]
                bracket.live.pop(trial_id, None)
                if trial_id == current:
                    action = self.STOP
                else:
                    controller.stop_trial(trial)
            for trial_id in good:
                if not bracket.goes_on(trial_id):
                    if bracket.finished():  # already at the last milestone: it ends there
                        bracket.live.pop(trial_id, None)
                        if trial_id == current:
                            action = self.STOP
                        elif bracket.trials[trial_id].status == PAUSED:
                            controller.stop_trial(bracket.trials[trial_id])
                    continue
                if trial_id == current:
                    action = self.CONTINUE
                elif bracket.trials[trial_id].status == PAUSED:
                    controller.resume_trial(bracket.trials[trial_id])
        finally:
            self._processing = False
        return action

    def _remove(self, controller: Any, trial: Any) -> None:
        bracket = self._of.get(trial.trial_id)
        if bracket is None or trial.trial_id not in bracket.live:
            return
        bracket.live.pop(trial.trial_id)
        if bracket.live and not bracket.finished() and self._metric and self._mode:
            if bracket.halved and bracket.iteration_done() and not self._processing:
                logger.warning(
                    "tune: trial %s left %r after its first halving and the others wait "
                    "at its milestone: %s halves the bracket so they go on, where Ray's "
                    "HyperBandScheduler does not process a bracket again when a trial "
                    "leaves it (its trials would stay paused); see docs/porting.md",
                    getattr(trial, "trial_name", trial.trial_id), bracket,
                    type(self).__name__,
                )
            self._process(controller, bracket, self._sign())

    def on_trial_complete(self, controller: Any, trial: Any, result: dict[str, Any]) -> None:
        self._remove(controller, trial)

    def on_trial_error(self, controller: Any, trial: Any) -> None:
        self._remove(controller, trial)

    def on_trial_remove(self, controller: Any, trial: Any) -> None:
        self._remove(controller, trial)

    def on_no_running_trials(self, controller: Any) -> None:
        """Nothing runs: halve every bracket whose live trials are all paused (Ray's
        fallback in ``choose_trial_to_run``)."""
        for band in self.bands:
            for bracket in band:
                if bracket is None or not bracket.live:
                    continue
                statuses = {bracket.trials[t].status for t in bracket.live}
                if RUNNING not in statuses and PAUSED in statuses:
                    self._process(controller, bracket, self._sign())

    def debug_string(self) -> str:
        lines = [f"HyperBand: num_stopped={self.num_stopped}"]
        for i, band in enumerate(self.bands):
            lines.append(f"  band {i}: " + ", ".join(repr(b) for b in band if b is not None))
        return "\n".join(lines)
