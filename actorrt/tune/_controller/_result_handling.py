"""What happens at each report of a trial: the result is checked and recorded, the scheduler,
the searcher and the stopper hear of it, and the answer to the trial is the decision.

Reports reach the controller through the report bus (:mod:`._bus`): each ``tune.report``
in a trial process is one ask, answered with ``CONTINUE``, ``STOP`` or ``SAVE_AND_STOP``.
Where no scheduler or stop criterion decides on results, a trial sends up to
``REPORTS_AHEAD`` of them before reading their answers (``Session.send``).
A scheduler's ``PAUSE`` ends the trial's attempt here (:meth:`._scheduler_actions.
SchedulerActions._pause`); a PBT exploit takes the donor's checkpoint now, while it exists.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ..._shared._checkpoint import Checkpoint
from ..context import CONTINUE, SAVE_AND_STOP, STOP
from ..experiment.trial import RUNNING, Trial
from ..schedulers.trial_scheduler import TrialScheduler
from ..trainable.trainable import Trainable
from ._result_checks import flat_view
from ._scheduler_actions import SchedulerActions

__all__ = ["ResultHandler"]


class ResultHandler(SchedulerActions):
    """Handles each report and checkpoint of a trial (see the module docstring)."""

    def on_result(self, trial_id: str, result: dict[str, Any], checkpoint: str | None) -> str:
        """A trial's report: record it, and decide whether the trial goes on. Once its
        attempt was answered a stop, the results it had sent ahead of that answer
        (``TrialSpec.reports_ahead``) are dropped: in lockstep it would not have made them."""
        trial = self._by_id.get(trial_id)
        if trial is None or trial.status != RUNNING or trial.answered_stop:
            return STOP
        decision = self._on_result(trial, result, checkpoint)
        if decision != CONTINUE:
            trial.answered_stop = True
        return decision

    def _on_result(self, trial: Trial, result: dict[str, Any], checkpoint: str | None) -> str:
        # A trial that reports done=True has finished, as in Ray.
        reported_done = bool(result.get("done", False))
        if not self._record(trial, result, checkpoint):
            return STOP
        decision = self._decide(trial, result, checkpoint, reported_done)
        if decision is None:
            return STOP
        self.callbacks.trial_result(self.trials, trial, result)
        self.progress.result(trial, result)
        if checkpoint is not None:
            self.callbacks.checkpoint(self.trials, trial, Checkpoint(checkpoint))
        if self._fatal is not None:
            return STOP
        if decision == SAVE_AND_STOP:
            return SAVE_AND_STOP
        return STOP if decision == STOP else CONTINUE

    def _record(self, trial: Trial, result: dict[str, Any], checkpoint: str | None) -> bool:
        """Add Tune's automatic fields to the result, check it, and store it (and its
        checkpoint); ``False`` when the experiment ends instead."""
        result["trial_id"] = trial.trial_id
        result["date"] = time.strftime("%Y-%m-%d_%H-%M-%S")
        result["hostname"] = self._hostname
        result["done"] = bool(result.get("done", False))
        trial.pid = result.get("pid")
        if self._fatal is not None:
            return False  # the experiment is ending
        try:
            self.checks.check(trial.trial_name, flat_view(result))
        except (TypeError, ValueError) as exc:
            self._fail(exc)
            return False
        if checkpoint is not None:
            result["checkpoint_dir_name"] = os.path.basename(checkpoint)
        trial.last_result = result
        trial.num_results += 1
        try:
            self.storage.append_result(trial.path, {**result, "config": trial.config})
            if checkpoint is not None:  # recorded after its result: a resume keeps the result
                self._add_checkpoint(trial, checkpoint, result)
        except OSError as exc:  # the disk is full, most likely: the experiment cannot go on
            self._fail(exc)
            return False
        return True

    def _decide(
        self, trial: Trial, result: dict[str, Any], checkpoint: str | None, reported_done: bool
    ) -> str | None:
        """What the scheduler, the searcher and the stopper make of the result, applied to
        the trial's attempt (PBT's restart, a pause, a resize); ``None`` when the scheduler
        or the searcher raised, which ends the experiment."""
        # The stop criteria first, as in Ray: a trial that meets them (or reports done=True)
        # stops, and neither the scheduler nor the searcher acts on that result (a PBT
        # exploit of a finished trial would run it past its stop).
        view = flat_view(result)  # nested metrics under "a/b" names too, as in Ray
        stopped = bool(self.stopper(trial.trial_id, view)) or reported_done
        if self.stopper.stop_all():
            self.stop_all("stopper")
        decision: str = STOP
        if not stopped:
            # Then the scheduler: it may add to the result (HyperBandForBOHB's
            # hyperband_info) what the searcher reads. What either raises ends the experiment.
            try:
                decision = self.scheduler.on_trial_result(self, trial, view)
                if decision != TrialScheduler.STOP:
                    self.searcher.on_trial_result(trial.trial_id, view)
            except Exception as exc:
                self._fail(exc)
                return None
        if decision == STOP or trial.stop_asked:
            decision = STOP
            trial.restart_with = None  # a PBT exploit of a trial that ends is dropped
            result["done"] = True  # the trial ends with this result, as in Ray
        elif decision == TrialScheduler.PAUSE and trial.restart_with is not None:
            self._take_donor_checkpoint(trial)
            decision = STOP  # this attempt ends here; _attempts starts the next (PBT)
        # A class trainable is saved when it is paused or resized, as Ray saves it.
        save = checkpoint is None and self._saves_itself()
        if decision == TrialScheduler.PAUSE:
            self._pause(trial, checkpoint is not None or save)
            decision = SAVE_AND_STOP if save else STOP  # resume_trial starts the next
        if trial.resize is not None:
            if decision in (STOP, SAVE_AND_STOP):  # it ends anyway: no new group needed
                self._forget(self._drop_resize(trial))
            else:
                self._begin_resize(trial, checkpoint is not None or save)
                decision = SAVE_AND_STOP if save else STOP  # _swap_group starts the next
        return decision

    def _saves_itself(self) -> bool:
        """Whether the trainable is a class ``Trainable``, which the controller can ask to
        save a checkpoint at any report (a function trainable saves only what it reports)."""
        return isinstance(self.trainable, type) and issubclass(self.trainable, Trainable)

    def on_checkpoint(self, trial_id: str, path: str) -> None:
        trial = self._by_id.get(trial_id)
        if trial is not None:
            self._add_checkpoint(trial, path, trial.last_result)
            self.callbacks.checkpoint(self.trials, trial, Checkpoint(path))
