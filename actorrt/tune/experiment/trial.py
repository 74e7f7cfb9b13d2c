"""A trial as the controller sees it: config, resources, status, results, checkpoints."""

from __future__ import annotations

import math
import shutil
from typing import Any, NamedTuple

from ..._shared._checkpoint import Checkpoint
from .._controller._trial_config import CheckpointConfig
from .._worker._checkpoint_dirs import checkpoint_index
from ..execution.placement_groups import PlacementGroupFactory
from ._lifecycle import AttemptEnd, TrialState, check_transition

__all__ = ["ERROR", "PAUSED", "PENDING", "RUNNING", "TERMINATED", "CheckpointRecord", "Trial"]

PENDING, RUNNING, PAUSED = TrialState.PENDING, TrialState.RUNNING, TrialState.PAUSED
TERMINATED, ERROR = TrialState.TERMINATED, TrialState.ERROR


class CheckpointRecord(NamedTuple):
    """A persisted checkpoint of a trial, as the controller keeps it."""

    path: str
    score: float  # its rank among the trial's checkpoints (higher is better); NaN: unranked
    iteration: int  # the training_iteration of the result it came with
    time_total_s: float


class Trial:
    """One trial: a config and everything that happened to it.

    ``Trial.PENDING``, ``RUNNING``, ``PAUSED``, ``TERMINATED`` and ``ERROR`` are its
    statuses, as Ray names them; ``str(trial)`` is ``<trainable name>_<trial id>``, as in
    Ray (``trial_name`` is that unless ``TuneConfig(trial_name_creator=)`` named it).

    Attributes:
        trial_id: ``"<experiment tag>_<index>"``.
        trial_name: shown in output; names the actor.
        config: the resolved config.
        resources: what it reserves.
        status: a :class:`TrialState` (a ``str``): ``PENDING`` (waiting for its
            resources), ``RUNNING``, ``PAUSED`` (a scheduler paused it and gave its
            resources back), ``TERMINATED`` (ended normally, or stopped) or ``ERROR``.
            The controller changes it with :meth:`set_status`, which checks the step.
        last_result: its latest result, with Tune's automatic fields.
        path: its folder.
        error: the exception that ended it, when it errored.
        error_text: the exception with its traceback (from the trial's process).
        num_failures: failed attempts so far.
    """

    PENDING, RUNNING, PAUSED, TERMINATED, ERROR = PENDING, RUNNING, PAUSED, TERMINATED, ERROR

    def __init__(
        self,
        trial_id: str,
        trial_name: str,
        config: dict[str, Any],
        resources: PlacementGroupFactory | None,
        path: str,
    ) -> None:
        self.trial_id = trial_id
        self.trial_name = trial_name
        suffix = f"_{trial_id}"
        # The trainable's name, as Ray's Trial.trainable_name (read off a default name).
        self.trainable_name = trial_name.removesuffix(suffix) if trial_name.endswith(
            suffix
        ) else ""
        self.config = config
        self.resources = resources
        self.path = path
        self._status = PENDING
        self.last_result: dict[str, Any] = {}
        self.num_results = 0
        self.error: BaseException | None = None
        self.error_text = ""
        self.config_error = False  # its error says its resources are declared wrongly
        self.num_failures = 0
        self.stop_asked = False  # it is to end for good at its next report
        self.ending: AttemptEnd | None = None  # what its running attempt's end leads to
        self.checkpoints: list[CheckpointRecord] = []
        self.checkpoint_count = 0  # the index of its next checkpoint folder
        self.attempts = 0  # attempts started in this run: a later one checks the folder
        self.pid: int | None = None
        self.restart_with: tuple[dict[str, Any], CheckpointRecord] | None = None
        # ResourceChangingScheduler: the new factory and its group, reserved at a result
        # (``resize``); the attempt then ends (``AttemptEnd.RESIZE``) and the trial
        # restarts in that group, which the controller holds (``group``) until it ends.
        self.resize: tuple[PlacementGroupFactory, Any] | None = None
        self.resized = False  # its next attempt is its first with new resources
        self.group: Any = None

    @property
    def status(self) -> TrialState:
        return self._status

    @status.setter
    def status(self, value: str) -> None:
        # Set as an attribute (Ray's tests and schedulers do): any state, by name.
        self._status = _state(value)

    def set_status(self, status: str) -> None:
        """Move the trial to ``status`` (Ray's ``Trial.set_status``), checking that the
        step is one of the lifecycle's (see :mod:`._lifecycle`)."""
        new = _state(status)
        check_transition(self.trial_name, self._status, new)
        self._status = new

    @property
    def placement_group_factory(self) -> PlacementGroupFactory | None:
        """Ray's name for :attr:`resources`."""
        return self.resources

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The latest checkpoint, as Ray's ``Trial.checkpoint`` (equal to the same folder's
        ``Checkpoint`` from a result or an analysis)."""
        return Checkpoint(self.checkpoints[-1].path) if self.checkpoints else None

    @property
    def checkpoint_path(self) -> str | None:
        """The latest checkpoint's folder."""
        return self.checkpoints[-1].path if self.checkpoints else None

    def add_checkpoint(
        self, path: str, result: dict[str, Any], keep: CheckpointConfig | None
    ) -> None:
        """Record a persisted checkpoint; delete the worst beyond ``num_to_keep``."""
        self.record_checkpoint(path, result, keep)
        self.prune_checkpoints(keep)

    def record_checkpoint(
        self, path: str, result: dict[str, Any], keep: CheckpointConfig | None
    ) -> CheckpointRecord:
        """Record a persisted checkpoint (as the latest); return its record."""
        attr = keep.checkpoint_score_attribute if keep else None
        score = float(result.get(attr, math.nan)) if attr else float(len(self.checkpoints))
        if keep and keep.checkpoint_score_order == "min" and attr:
            score = -score
        record = CheckpointRecord(
            path, score, int(result.get("training_iteration", 0)),
            float(result.get("time_total_s", 0.0)),
        )
        self.checkpoints.append(record)
        # The next index is past this one (an attempt skips an index another one took).
        index = checkpoint_index(path)
        self.checkpoint_count = max(self.checkpoint_count + 1, (index or 0) + 1)
        return record

    def prune_checkpoints(self, keep: CheckpointConfig | None) -> None:
        """Keep the ``num_to_keep`` best checkpoints and the latest (a retry restarts from
        it), as Ray does: the latest may be one more; delete the others."""
        if keep is None or keep.num_to_keep is None:
            return
        # Best first: NaN scores last; of equal scores, the newer ranks higher.
        ranked = sorted(
            enumerate(self.checkpoints),
            key=lambda ic: (not math.isnan(ic[1].score), ic[1].score, ic[0]),
            reverse=True,
        )
        kept = {c.path for _, c in ranked[: keep.num_to_keep]} | {self.checkpoints[-1].path}
        for record in [c for c in self.checkpoints if c.path not in kept]:
            self.checkpoints.remove(record)
            shutil.rmtree(record.path, ignore_errors=True)

    def restart_from(self, config: dict[str, Any], donor: Trial) -> None:
        """Restart this trial (same actor, same reservation) with ``config`` from ``donor``'s
        latest checkpoint (PBT's exploit); takes effect at its next report."""
        if not donor.checkpoints:
            raise ValueError(f"trial {donor.trial_id} has no checkpoint to restart from")
        self.restart_with = (config, donor.checkpoints[-1])

    def __str__(self) -> str:
        if not self.trainable_name:
            return self.trial_name
        return f"{self.trainable_name}_{self.trial_id}"

    def __repr__(self) -> str:
        return f"Trial({self.trial_name}, {self.status})"


def _state(value: str) -> TrialState:
    """``value`` as a :class:`TrialState`; a name that is none raises, naming them."""
    try:
        return TrialState(value)
    except ValueError:
        allowed = ", ".join(s.value for s in TrialState)
        raise ValueError(f"trial status must be one of {allowed}; got {value!r}") from None
