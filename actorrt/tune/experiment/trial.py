"""A trial as the controller sees it: config, resources, status, results, checkpoints."""

from __future__ import annotations

import math
import shutil
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

from ..._shared._checkpoint import Checkpoint
from .._controller._trial_config import CheckpointConfig
from .._worker._checkpoint_dirs import checkpoint_index
from ..execution.placement_groups import PlacementGroupFactory
from ._lifecycle import AttemptEnd, TrialState, check_transition

__all__ = [
    "ERROR", "PAUSED", "PENDING", "RUNNING", "TERMINATED", "CheckpointRecord", "Trial",
    "trainable_name_of",
]

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
        trainable_name: str = "",
        *,
        config: dict[str, Any] | None = None,
        trial_id: str | None = None,
        trial_name: str | None = None,
        path: str = "",
        placement_group_factory: PlacementGroupFactory | dict[str, float] | None = None,
        experiment_tag: str = "",
        evaluated_params: dict[str, Any] | None = None,
        stopping_criterion: dict[str, float] | None = None,
        trial_name_creator: Callable[[Trial], str] | None = None,
        trial_dirname_creator: Callable[[Trial], str] | None = None,
        max_failures: int = 0,
        stub: bool = False,
        **ray_only: Any,
    ) -> None:
        """Ray's constructor: ``Trial(trainable_name, config=..., trial_id=...)``.

        ``trial_name`` and ``path`` are actorrt's (the controller names the trial and
        its folder); Ray's arguments about storage, syncing and logging
        (``storage=``, ``sync_config=``, ``log_to_file=``, ...) are taken and kept as
        attributes, with no effect: the controller decides those things.
        """
        unknown = sorted(set(ray_only) - _RAY_ONLY_ARGS)
        if unknown:
            raise TypeError(
                f"Trial() got unexpected keyword argument(s) {', '.join(unknown)}; it "
                f"takes trainable_name, config, trial_id, trial_name, path, "
                f"placement_group_factory and Ray's {', '.join(sorted(_RAY_ONLY_ARGS))}"
            )
        for name, value in ray_only.items():
            setattr(self, name.lstrip("_"), value)
        self.trial_id = trial_id if trial_id is not None else self.generate_id()
        self.trainable_name = trainable_name
        self.stub = stub
        self.config = config if config is not None else {}
        self.evaluated_params = evaluated_params or {}
        self.experiment_tag = experiment_tag
        self.stopping_criterion = stopping_criterion or {}
        self.max_failures = max_failures
        if isinstance(placement_group_factory, dict):
            placement_group_factory = PlacementGroupFactory([placement_group_factory])
        self.resources = placement_group_factory
        self.path = path
        self.trial_name = trial_name or _default_name(trainable_name, self.config, self.trial_id)
        if trial_name_creator is not None:
            self.trial_name = str(trial_name_creator(self))
        self.custom_dirname = (
            str(trial_dirname_creator(self)) if trial_dirname_creator is not None else None
        )
        self._status = PENDING
        self.last_result: dict[str, Any] = {}
        self.num_results = 0
        self.error: BaseException | None = None
        self.error_text = ""
        self.config_error = False  # its error says its resources are declared wrongly
        self.num_failures = 0
        self.stop_asked = False  # it is to end for good at its next report
        self.answered_stop = False  # its running attempt was answered a stop at a result
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

    @staticmethod
    def generate_id() -> str:
        """A new trial id (Ray's: eight hex digits)."""
        return uuid.uuid4().hex[:8]

    def __str__(self) -> str:
        """Its name, as Ray's: the one ``trial_name_creator`` gave, else the default."""
        return self.trial_name

    __repr__ = __str__


def _state(value: str) -> TrialState:
    """``value`` as a :class:`TrialState`; a name that is none raises, naming them."""
    try:
        return TrialState(value)
    except ValueError:
        allowed = ", ".join(s.value for s in TrialState)
        raise ValueError(f"trial status must be one of {allowed}; got {value!r}") from None


# Ray's Trial() arguments about storage, syncing and logging: kept, with no effect here.
_RAY_ONLY_ARGS = frozenset({
    "storage", "experiment_path", "experiment_dir_name", "sync_config", "checkpoint_config",
    "export_formats", "restore_path", "log_to_file", "_setup_default_resource", "local_dir",
})


def _default_name(trainable_name: str, config: dict[str, Any], trial_id: str) -> str:
    """A trial's name when nothing names it, as Ray's: ``<trainable name>_<trial id>``,
    with the config's ``env`` between them where it has one."""
    if not trainable_name:
        return trial_id
    env = config.get("env")
    if env is not None:
        trainable_name += f"_{env.__name__ if isinstance(env, type) else env}"
    return f"{trainable_name}_{trial_id}".replace("/", "_")


def trainable_name_of(trial_name: str, trial_id: str) -> str:
    """The trainable's name read off a default trial name (``""`` for a custom one)."""
    suffix = f"_{trial_id}"
    return trial_name.removesuffix(suffix) if trial_name.endswith(suffix) else ""
