"""The training function's side: ``train.report``, ``get_checkpoint``, ``get_context``,
``get_dataset_shard``.

A training worker process runs one training function at a time, so the session is a
module global set by the worker around the call (not a context variable: user code may
start its own threads and report from them).
"""

from __future__ import annotations

import contextlib
import pickle
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import actorrt

from .._shared._checkpoint import Checkpoint
from .._shared._deprecation import warn_migration
from .._shared._trial_hook import enclosing_trial
from ._checkpoint_store import checkpoint_name, store
from ._unsupported import reject


@dataclass(frozen=True)
class WorkerInfo:
    """Where one worker sits in the gang (sent by the coordinator)."""

    world_rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int


class TrainContext:
    """Where this training worker sits in the gang (``train.get_context()``)."""

    __slots__ = ("_experiment", "_info")

    def __init__(self, info: WorkerInfo, experiment_name: str) -> None:
        self._info = info
        self._experiment = experiment_name

    def get_world_rank(self) -> int:
        """This worker's rank among all workers, ``0..world_size-1``."""
        return self._info.world_rank

    def get_local_rank(self) -> int:
        """This worker's rank among the workers on its node."""
        return self._info.local_rank

    def get_world_size(self) -> int:
        """How many workers the gang has."""
        return self._info.world_size

    def get_local_world_size(self) -> int:
        """How many workers of the gang run on this node."""
        return self._info.local_world_size

    def get_node_rank(self) -> int:
        """The rank of this worker's node among the gang's nodes."""
        return self._info.node_rank

    def get_experiment_name(self) -> str:
        """The run's name (its folder under ``storage_path``)."""
        return self._experiment

    def __repr__(self) -> str:
        i = self._info
        return (
            f"TrainContext(world_rank={i.world_rank}, local_rank={i.local_rank}, "
            f"world_size={i.world_size}, local_world_size={i.local_world_size}, "
            f"node_rank={i.node_rank})"
        )


@dataclass(frozen=True)
class ReportedCheckpoint:
    """A checkpoint reported with ``train.report`` and the metrics reported with it
    (Ray Train V2's ``ReportedCheckpoint``)."""

    checkpoint: Checkpoint
    metrics: dict[str, Any]


class Session:
    """One training function's run in one worker."""

    def __init__(
        self,
        context: TrainContext,
        run_dir: Path,
        restore: Checkpoint | None,
        next_index: int,
        score_attribute: str | None,
        push: Callable[[dict[str, Any], str | None, list[dict[str, Any]]], None],
        datasets: Mapping[str, Any] | None = None,
        rendezvous: Any = None,
    ) -> None:
        self.datasets = dict(datasets or {})
        self.rendezvous = rendezvous  # rank 0's TrainWorker, which holds the meetings
        self.collectives = 0
        self.context = context
        self.run_dir = run_dir
        self.restore = restore
        self.next_index = next_index
        self.score_attribute = score_attribute
        self.push = push
        self.reports = 0
        self.reported: list[tuple[Path, dict[str, Any]]] = []  # this attempt's checkpoints
        self.lock = threading.Lock()

    def report(self, metrics: Mapping[str, Any], checkpoint: Checkpoint | None) -> None:
        plain = _plain_metrics(metrics)
        if checkpoint is not None and not isinstance(checkpoint, Checkpoint):
            raise TypeError(
                "checkpoint must be a train.Checkpoint (Checkpoint.from_directory(path)), "
                f"got {checkpoint!r}"
            )
        attr = self.score_attribute
        if checkpoint is not None and attr is not None:
            score = plain.get(attr)
            if isinstance(score, bool) or not isinstance(score, int | float):
                raise ValueError(
                    f"CheckpointConfig ranks checkpoints by {attr!r}, so a report with a "
                    f"checkpoint needs that metric as a number; got "
                    f"{attr}={score!r} among {sorted(plain)}"
                )
        with self.lock:
            index = self.next_index + self.reports  # the same on every rank (see below)
            self.reports += 1
            stored = None
            if checkpoint is not None:
                stored = store(checkpoint, self.run_dir, index).path
            run_metrics = plain
            every = [plain]  # each rank's metrics, for the trainer's UserCallbacks
            if self.rendezvous is not None:
                # A barrier, as in Ray Train V2: past it, every rank's files of this
                # report are in their folder, and no rank runs ahead of the others. It
                # also hands every rank rank 0's metrics (the run's), and rank 0 every
                # rank's.
                rank0 = self.context.get_world_rank() == 0
                shared = self.meet("train.report()", pickle.dumps(plain), gather=rank0)
                if rank0 and isinstance(shared, list):
                    every = [pickle.loads(one) for one in shared]
                elif isinstance(shared, bytes):
                    run_metrics = pickle.loads(shared)
            folder = self.run_dir / checkpoint_name(index)
            if folder.is_dir():  # past the barrier: some rank wrote this report's files
                self.reported.append((folder, run_metrics))
            if self.context.get_world_rank() == 0:
                if stored is None and folder.is_dir():
                    stored = str(folder)  # only other ranks wrote this report's files
                self.push(plain, stored, every)  # rank 0's metrics are the run's

    def meet(self, what: str, value: bytes | None = None, gather: bool = False) -> Any:
        """This rank's next collective call (``what`` names it): wait until every rank
        has made it, and return rank 0's ``value`` (with ``gather``, every rank's, in
        rank order). Alone, return ``value`` at once."""
        if self.rendezvous is None:
            return [value] if gather else value
        number = self.collectives
        self.collectives += 1
        rank = self.context.get_world_rank()
        world = self.context.get_world_size()
        return actorrt.get(self.rendezvous.meet(world, rank, number, value, what, gather))


_session: Session | None = None
_hook_context: TrainContext | None = None  # while a Backend hook's call runs here


@contextlib.contextmanager
def hook_context(context: TrainContext) -> Iterator[None]:
    """``get_context()`` answers ``context`` in the block (a ``Backend`` hook's call to
    this worker, before or after its training function runs)."""
    global _hook_context
    saved, _hook_context = _hook_context, context
    try:
        yield
    finally:
        _hook_context = saved


def set_session(session: Session | None) -> None:
    global _session
    _session = session


def current_session(what: str) -> Session:
    """The running training function's session (``what`` names the caller).

    Raises:
        RuntimeError: called outside a training function.
    """
    return _current(what)


def _current(what: str) -> Session:
    if _session is None:
        raise RuntimeError(
            f"train.{what}() works inside a training function run by a trainer "
            "(DataParallelTrainer / TorchTrainer) or a Tune trial, not here"
        )
    return _session


def report(
    metrics: Mapping[str, Any],
    checkpoint: Checkpoint | None = None,
    checkpoint_dir_name: str | None = None,
    **ray_options: Any,
) -> None:
    """Report metrics (and optionally a checkpoint) from the training function.

    Every worker calls it the same number of times: as in Ray Train V2, it is a barrier
    across ranks (with ``actorrt.train.collective``'s calls, in the same order on every
    rank). A checkpoint from any rank is copied into the report's folder,
    ``checkpoint_<index>`` in the run's folder, where the ``k``-th report of every rank
    has the same index: the ranks' files of one report are merged there, as V2 does.
    Past the barrier, rank 0's metrics (with the folder, if any rank wrote one) go to
    the coordinator and become the run's results. Checkpoints are kept per
    ``CheckpointConfig``; other ranks' metrics are not kept. Where Ray would wait for
    ever, a rank whose function returns before a report the others wait at fails them
    with ``RuntimeError`` naming it.

    Args:
        metrics: a dict of metric name to value; numpy and torch scalars become floats.
        checkpoint: a ``Checkpoint`` to keep (``Checkpoint.from_directory(d)``).

    Called in a Tune function trainable (outside any trainer), it is ``tune.report``,
    as in Ray 2.7-2.40 where ``train.report`` was the spelling for both.

    Raises:
        RuntimeError: called outside a training function or a Tune trial.
        TypeError: metrics that are not a dict with string keys, or a bad checkpoint.
        ValueError: a checkpoint without the ``checkpoint_score_attribute`` metric.
        RuntimeError: another rank returned without this report, or made another
            collective call here.
        TypeError: Ray's ``checkpoint_dir_name`` or upload options (not supported: the
            message names docs/porting.md).
    """
    reject("train.report", {"checkpoint_dir_name": checkpoint_dir_name, **ray_options})
    if _session is None:
        trial = enclosing_trial()
        if trial is not None:
            _warn_in_tune("report")
            trial.report(_plain_metrics(metrics), checkpoint)
            return
    _current("report").report(metrics, checkpoint)


def get_checkpoint() -> Checkpoint | None:
    """The checkpoint to resume from: the latest one rank 0 reported before this attempt
    (after a failure), or ``None`` on a fresh start. Every rank gets the same one. In a
    Tune function trainable, the trial's latest checkpoint (``tune.get_checkpoint()``)."""
    if _session is None:
        trial = enclosing_trial()
        if trial is not None:
            _warn_in_tune("get_checkpoint")
            return trial.checkpoint
    return _current("get_checkpoint").restore


def get_all_reported_checkpoints() -> list[ReportedCheckpoint]:
    """The checkpoints this run's ``train.report`` calls have reported so far and that
    ``CheckpointConfig(num_to_keep=...)`` still keeps, oldest first, each with the metrics
    reported with it (Ray Train V2's ``get_all_reported_checkpoints``). Every rank gets
    the same list: a report is a barrier, so its files are in place once it returns. A
    restarted attempt lists what it reported itself (the checkpoint it resumed from is
    ``train.get_checkpoint()``).

    Raises:
        RuntimeError: called outside a training function.
    """
    session = _current("get_all_reported_checkpoints")
    with session.lock:
        return [
            ReportedCheckpoint(Checkpoint(str(folder)), dict(metrics))
            for folder, metrics in session.reported
            if folder.is_dir()
        ]


def get_context() -> TrainContext:
    """This worker's ranks and sizes in the gang. In a Tune function trainable, the
    trial's context (``tune.get_context()``: trial id, name and folder; rank 0 of 1)."""
    if _session is None:
        if _hook_context is not None:
            return _hook_context
        trial = enclosing_trial()
        if trial is not None:
            _warn_in_tune("get_context")
            context: TrainContext = trial.context
            return context
    return _current("get_context").context


def get_dataset_shard(name: str) -> Any:
    """This worker's shard of the dataset given to the trainer as ``datasets={name: ...}``:
    a ``DataShard`` with ``iter_batches`` and ``iter_torch_batches``. The shards of all
    workers are disjoint and together hold every row.

    Raises:
        RuntimeError: called outside a training function.
        KeyError: no dataset of that name was given (the message lists the names).
    """
    session = _current("get_dataset_shard")
    if name not in session.datasets:
        raise KeyError(
            f"no dataset named {name!r} was given to the trainer; datasets= has "
            f"{sorted(session.datasets) or 'none'}"
        )
    return session.datasets[name]


def _warn_in_tune(name: str) -> None:
    """Ray Train V2 raises ``DeprecationWarning`` for ``ray.train.<name>`` in a function
    passed to Tune; actorrt still takes Ray 2.7-2.40's spelling, and warns. Calls from
    actorrt's own callbacks (the boosting libraries' report callbacks) do not warn."""
    caller = sys._getframe(2).f_globals.get("__name__", "")
    if caller == "actorrt" or caller.startswith("actorrt."):
        return
    warn_migration(
        f"`ray.train.{name}` is deprecated when running in a function passed to Ray Tune. "
        f"Please use the equivalent `ray.tune` API instead (`ray.tune.{name}`): Ray Train V2 "
        "raises DeprecationWarning here; actorrt still runs Ray 2.7-2.40's spelling as "
        "tune's (docs/porting.md)",
        stacklevel=3,
    )


def _plain_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(metrics, Mapping):
        raise TypeError(f"metrics must be a dict of name to value, got {metrics!r}")
    plain: dict[str, Any] = {}
    for key, value in metrics.items():
        if not isinstance(key, str):
            raise TypeError(f"metric names are strings, got {key!r} in {dict(metrics)!r}")
        plain[key] = _plain(value)
    return plain


def _plain(value: Any) -> Any:
    """numpy / torch scalars (anything whose ``item()`` works) as Python numbers."""
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except (ValueError, RuntimeError, TypeError):  # more than one element
            return value
    return value
