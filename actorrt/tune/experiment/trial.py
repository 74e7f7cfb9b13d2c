"""A trial as the controller sees it: config, resources, status, results, checkpoints."""

from __future__ import annotations

import math
import shutil
from typing import Any

from ..._shared._checkpoint import Checkpoint
from .._controller._trial_config import CheckpointConfig
from .._worker._checkpoint_dirs import checkpoint_index
from ..execution.placement_groups import PlacementGroupFactory

__all__ = ["Trial"]

PENDING, RUNNING, TERMINATED, ERROR = "PENDING", "RUNNING", "TERMINATED", "ERROR"
PAUSED = "PAUSED"  # a scheduler paused it: its actor is stopped, it resumes from a checkpoint


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
        status: ``PENDING`` (waiting for its resources), ``RUNNING``, ``PAUSED`` (a
            scheduler paused it and gave its resources back), ``TERMINATED`` (ended
            normally, or stopped) or ``ERROR``.
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
        self.status = PENDING
        self.last_result: dict[str, Any] = {}
        self.num_results = 0
        self.error: BaseException | None = None
        self.error_text = ""
        self.config_error = False
        self.num_failures = 0
        self.should_stop = False
        self.checkpoints: list[tuple[str, float, int, float]] = []  # path, score, iter, time
        self.checkpoint_count = 0  # the index of its next checkpoint folder
        self.attempts = 0  # attempts started in this run: a later one checks the folder
        self.pid: int | None = None
        self.restart_with: tuple[dict[str, Any], tuple[str, float, int, float]] | None = None
        self.resume_after_stop = False  # resumed while its paused actor still winds down
        self.pausing = False  # its current attempt ends in a pause, not an end
        # ResourceChangingScheduler: the new factory and its group, reserved at a result
        # (``resize``); the attempt then ends (``resizing``) and the trial restarts in that
        # group, which the controller holds (``group``) until the trial ends.
        self.resize: tuple[PlacementGroupFactory, Any] | None = None
        self.resizing = False
        self.resized = False  # its next attempt is its first with new resources
        self.group: Any = None

    @property
    def placement_group_factory(self) -> PlacementGroupFactory | None:
        """Ray's name for :attr:`resources`."""
        return self.resources

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The latest checkpoint, as Ray's ``Trial.checkpoint`` (equal to the same folder's
        ``Checkpoint`` from a result or an analysis)."""
        return Checkpoint(self.checkpoints[-1][0]) if self.checkpoints else None

    @property
    def checkpoint_path(self) -> str | None:
        """The latest checkpoint's folder."""
        return self.checkpoints[-1][0] if self.checkpoints else None

    def add_checkpoint(
        self, path: str, result: dict[str, Any], keep: CheckpointConfig | None
    ) -> None:
        """Record a persisted checkpoint; delete the worst beyond ``num_to_keep``."""
        self.record_checkpoint(path, result, keep)
        self.prune_checkpoints(keep)

    def record_checkpoint(
        self, path: str, result: dict[str, Any], keep: CheckpointConfig | None
    ) -> tuple[str, float, int, float]:
        """Record a persisted checkpoint (as the latest); return its record."""
        attr = keep.checkpoint_score_attribute if keep else None
        score = float(result.get(attr, math.nan)) if attr else float(len(self.checkpoints))
        if keep and keep.checkpoint_score_order == "min" and attr:
            score = -score
        record = (
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
            key=lambda ic: (not math.isnan(ic[1][1]), ic[1][1], ic[0]),
            reverse=True,
        )
        kept = {c[0] for _, c in ranked[: keep.num_to_keep]} | {self.checkpoints[-1][0]}
        for record in [c for c in self.checkpoints if c[0] not in kept]:
            self.checkpoints.remove(record)
            shutil.rmtree(record[0], ignore_errors=True)

    def restart_from(self, config: dict[str, Any], donor: Trial) -> None:
        """Restart this trial (same actor, same reservation) with ``config`` from ``donor``'s
        latest checkpoint (PBT's exploit); takes effect at its next report."""
        if not donor.checkpoints:
            raise ValueError(f"trial {donor.trial_id} has no checkpoint to restart from")
        self.restart_with = (config, donor.checkpoints[-1])

    def restore_spec(self) -> dict[str, Any]:
        """Where a (re)started attempt begins: the latest checkpoint, its iteration."""
        if not self.checkpoints:
            return {"checkpoint": None, "iteration": 0, "time_total_s": 0.0}
        path, _, iteration, time_total = self.checkpoints[-1]
        return {"checkpoint": path, "iteration": iteration, "time_total_s": time_total}

    def __str__(self) -> str:
        if not self.trainable_name:
            return self.trial_name
        return f"{self.trainable_name}_{self.trial_id}"

    def __repr__(self) -> str:
        return f"Trial({self.trial_name}, {self.status})"
