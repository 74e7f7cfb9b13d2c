"""What a scheduler does to trials through the controller it is given (the methods of
Ray's ``TuneController`` that schedulers and allocation functions call).

Schedulers run on the controller's event loop and are handed the controller as their first
argument. They may pause a trial (HyperBand: its attempt ends at this report and its actor
gives its resources back), resume a paused one, stop one for good, and ask for new resources
for a running one (``ResourceChangingScheduler``: granted, the trial restarts in its new
group). While a restored experiment's results are replayed to the scheduler, none of these
changes anything.
"""

from __future__ import annotations

import logging

import actorrt

from ..execution.placement_groups import PlacementGroupFactory
from ..experiment._lifecycle import AttemptEnd
from ..experiment.trial import ERROR, PAUSED, PENDING, RUNNING, TERMINATED, Trial
from ._resize import ClusterTotals, try_reserve
from ._trial_launch import TrialLauncher

__all__ = ["SchedulerActions"]

logger = logging.getLogger("actorrt.tune")


class SchedulerActions(TrialLauncher):
    """The controller's methods for schedulers (see the module docstring)."""

    # ----------------------------------------- paused trials (HyperBand)

    def _pause(self, trial: Trial, checkpointed: bool) -> None:
        """A scheduler paused the trial at this report: its attempt ends, its actor stops
        and gives its resources back; :meth:`resume_trial` starts it again from its latest
        checkpoint."""
        trial.set_status(PAUSED)
        trial.ending = AttemptEnd.PAUSE
        if not checkpointed and not self._warned_pause:
            self._warned_pause = True
            logger.warning(
                "tune: trial %s was paused at a result without a checkpoint: it will resume "
                "from %s and repeat the iterations since; report a checkpoint with every "
                "result when a scheduler pauses trials (HyperBand)",
                trial.trial_name, trial.checkpoint_path or "the start",
            )
        self.progress.trial_status(trial, "paused")
        self._notify()

    def _has_task(self, trial: Trial) -> bool:
        """Whether the trial's task has yet to pass its resume check (a done task may
        still be listed: its done-callback has not run)."""
        return any(t is trial and not task.done() for task, t in self._tasks.items())

    def resume_trial(self, trial: Trial) -> None:
        """Start a paused trial again (from its latest checkpoint), when its resources are
        free; for schedulers (Ray's unpause)."""
        if trial.status != PAUSED or self._stopping or self._replaying:
            return
        trial.set_status(PENDING)
        if self._has_task(trial):
            trial.ending = AttemptEnd.RELAUNCH  # its paused actor is still stopping
        else:
            self._submit(trial)
        self._notify()

    def stop_trial(self, trial: Trial) -> None:
        """End a trial for good, as TERMINATED (for schedulers, as Ray's ``stop_trial``): a
        paused one now, a running one at its next report."""
        if self._replaying:
            return
        if trial.status == PAUSED:
            self._complete(trial)
        elif trial.status in (RUNNING, PENDING):
            trial.stop_asked = True

    def _resume_stranded(self) -> None:
        """Nothing runs or waits, yet trials are paused: let the scheduler decide (HyperBand
        halves what it has), then resume whatever is still paused, so nothing hangs."""
        if not any(t.status == PAUSED for t in self.trials):
            return
        decide = getattr(self.scheduler, "on_no_running_trials", None)
        if decide is not None:
            decide(self)
        if self._tasks:
            return
        paused = [t for t in self.trials if t.status == PAUSED]
        if paused:
            logger.warning(
                "tune: nothing runs and %d trial(s) are paused that the scheduler did not "
                "resume (%s); resuming them so the experiment can finish",
                len(paused), ", ".join(t.trial_name for t in paused[:5]),
            )
            for trial in paused:
                self.resume_trial(trial)

    # ----------------------------- changing resources (ResourceChanging)

    def get_live_trials(self) -> list[Trial]:
        """Trials that have not ended (Ray's ``get_live_trials``)."""
        return [t for t in self.trials if t.status not in (TERMINATED, ERROR)]

    def cluster_resources(self) -> dict[str, float]:
        """Everything the cluster has (what allocation functions share out)."""
        return actorrt.cluster_resources()

    @property
    def _resource_updater(self) -> ClusterTotals:
        """Ray's controller attribute that allocation functions read totals from
        (``get_num_cpus()``, ``get_num_gpus()``)."""
        return ClusterTotals()

    def resize_trial(self, trial: Trial, resources: PlacementGroupFactory) -> bool:
        """Ask for ``resources`` for a running trial, without waiting (see ``_resize``):
        ``True`` when it restarts with them from this result's checkpoint; ``False`` when
        it keeps running as it is (the reason is logged at INFO)."""
        if (
            self._replaying or self._stopping or trial.status != RUNNING or trial.stop_asked
            or trial.restart_with is not None or trial.resize is not None
            or trial.resources is None or resources == trial.resources
        ):
            return False
        group = try_reserve(trial, resources, self._pending)
        if group is None:
            return False
        trial.resize = (resources, group)
        return True

    def _begin_resize(self, trial: Trial, checkpointed: bool) -> None:
        assert trial.resize is not None and trial.resources is not None
        trial.ending = AttemptEnd.RESIZE
        trial.set_status(PENDING)
        if not checkpointed:
            logger.warning(
                "tune: trial %s changes resources at a result without a checkpoint: it "
                "restarts from %s and repeats the iterations since; report a checkpoint "
                "with every result under ResourceChangingScheduler",
                trial.trial_name, trial.checkpoint_path or "the start",
            )
        self.progress.trial_status(
            trial, f"resources {trial.resources.group_bundles} -> {trial.resize[0].group_bundles}"
        )
        self._notify()
