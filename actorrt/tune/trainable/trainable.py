"""The class trainable API: subclass ``tune.Trainable``.

A trial of a class trainable runs in its trial-driver process: the class is built with the
trial's config (``setup(config)`` runs), then ``step()`` is called once per iteration; each
returned dict is one reported result. Checkpoints are taken every
``CheckpointConfig.checkpoint_frequency`` iterations and at the end when
``checkpoint_at_end`` is set; a retried trial calls ``load_checkpoint`` first.
"""

from __future__ import annotations

import datetime
import os
import pickle
import socket
import tempfile
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..._shared._checkpoint import Checkpoint

if TYPE_CHECKING:
    from ..execution.placement_groups import PlacementGroupFactory

# A dict returned by save_checkpoint is pickled into this file of the checkpoint folder.
DICT_CHECKPOINT_FILE = "_dict_checkpoint.pkl"
# A path returned by save_checkpoint (Ray allows one inside checkpoint_dir) is kept here,
# relative to the folder, so load_checkpoint gets it wherever the folder has moved.
PATH_CHECKPOINT_FILE = "_path_checkpoint.txt"

__all__ = ["Trainable"]


def store_state(folder: str, state: Any) -> None:
    """Keep what ``save_checkpoint(folder)`` returned: None, a dict, or a path in ``folder``.

    Raises:
        ValueError: a returned path lies outside ``folder``, or the value is of another type.
    """
    if state is None:
        return
    if isinstance(state, str | os.PathLike):
        relative = os.path.relpath(os.fspath(state), folder)
        if relative == ".." or relative.startswith(".." + os.sep) or os.path.isabs(relative):
            raise ValueError(
                f"save_checkpoint returned the path {os.fspath(state)!r}, which is not inside "
                f"its checkpoint_dir {folder!r}: return None, a dict, or a path inside it"
            )
        with open(os.path.join(folder, PATH_CHECKPOINT_FILE), "w") as f:
            f.write(relative)
        return
    if not isinstance(state, Mapping):
        raise ValueError(
            f"save_checkpoint must return None, a dict or a path inside checkpoint_dir, "
            f"got {type(state).__name__}: {state!r}"
        )
    with open(os.path.join(folder, DICT_CHECKPOINT_FILE), "wb") as f:
        pickle.dump(state, f)


def load_state(folder: str) -> Any:
    """What ``load_checkpoint`` gets for a checkpoint ``folder``: the dict or path that
    ``save_checkpoint`` returned, else the folder."""
    blob = os.path.join(folder, DICT_CHECKPOINT_FILE)
    if os.path.exists(blob):
        with open(blob, "rb") as f:
            return pickle.load(f)
    marker = os.path.join(folder, PATH_CHECKPOINT_FILE)
    if os.path.exists(marker):
        with open(marker) as f:
            return os.path.join(folder, f.read())
    return folder


class Trainable:
    """Base class for class trainables (Ray Tune's ``tune.Trainable``).

    Override :meth:`setup`, :meth:`step`, and for checkpointing :meth:`save_checkpoint`
    and :meth:`load_checkpoint`; optionally :meth:`cleanup`. Every hook runs in the trial's
    worker process, on the trial's own thread (it may block). An exception from any hook
    errors the trial (retried per ``FailureConfig``).

    Attributes:
        config: the trial's config.
        iteration: iterations completed (``training_iteration`` of the last result).
        trial_id, trial_name, trial_dir: where the trial is.
        trial_resources: what the trial reserved (a ``PlacementGroupFactory``).
    """

    def __init__(self, config: dict[str, Any] | None = None, **info: Any) -> None:
        self.config: dict[str, Any] = dict(config or {})
        self.iteration = int(info.get("iteration", 0))
        self.trial_id: str = info.get("trial_id", "")
        self.trial_name: str = info.get("trial_name", "")
        self.trial_dir: str = info.get("trial_dir", "")
        self._time_total = 0.0
        self._trial_resources: PlacementGroupFactory | None = info.get("trial_resources")
        self.setup(dict(self.config))

    @property
    def training_iteration(self) -> int:
        """Ray's name for :attr:`iteration`."""
        return self.iteration

    @property
    def trial_resources(self) -> PlacementGroupFactory | None:
        """What this trial reserved (its factory); under ``ResourceChangingScheduler`` the
        trial restarts from its checkpoint with the new resources when they change."""
        return self._trial_resources

    @property
    def logdir(self) -> str:
        """The trial's directory (Ray's older name)."""
        return self.trial_dir

    def setup(self, config: dict[str, Any]) -> None:
        """Prepare the trial (load data, build a model). Runs once, before the first step."""

    def step(self) -> dict[str, Any]:
        """Run one iteration and return its metrics. Put ``done: True`` in it to finish,
        ``should_checkpoint: True`` to have a checkpoint taken after this iteration."""
        raise NotImplementedError(f"{type(self).__name__} must override step()")

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any] | str | None:
        """Save the state into ``checkpoint_dir`` (or return a dict, pickled for you)."""
        return None

    def load_checkpoint(self, checkpoint: dict[str, Any] | str) -> None:
        """Restore from what :meth:`save_checkpoint` saved: its directory, or its dict."""

    def update_resources(self, new_resources: PlacementGroupFactory) -> None:
        """The trial's resources changed (``ResourceChangingScheduler``): called with the
        new ones before :meth:`load_checkpoint` in the restarted trial. The default does
        nothing; :attr:`trial_resources` already gives the new resources."""

    def cleanup(self) -> None:
        """Release what :meth:`setup` acquired. Runs when the trial ends, however it ends."""

    # -------------------------------------------- driving one by hand, as Ray's tests do

    def train(self) -> dict[str, Any]:
        """Run one :meth:`step` and return its result with Tune's automatic fields
        (``training_iteration``, ``time_this_iter_s``, ``time_total_s``, ``done``, ...),
        as Ray's ``Trainable.train()`` does. Tune calls :meth:`step` itself; this is for
        driving a trainable by hand (a test, a notebook)."""
        start = time.monotonic()
        metrics = self.step()
        if not isinstance(metrics, Mapping):
            raise TypeError(f"{type(self).__name__}.step() must return a dict, got {metrics!r}")
        elapsed = time.monotonic() - start
        self.iteration += 1
        self._time_total += elapsed
        return {
            **metrics,
            "done": bool(metrics.get("done", False)),
            "training_iteration": self.iteration,
            "time_this_iter_s": elapsed,
            "time_total_s": self._time_total,
            "trial_id": self.trial_id,
            "timestamp": int(time.time()),
            "date": datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S"),
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
        }

    def save(self, checkpoint_dir: str | None = None) -> Checkpoint:
        """Call :meth:`save_checkpoint` into ``checkpoint_dir`` (default: a new temporary
        folder) and return the checkpoint, to pass to :meth:`restore`. (Ray returns an
        internal result object that its ``restore`` takes; here it is a ``Checkpoint``.)"""
        folder = checkpoint_dir or tempfile.mkdtemp(prefix="checkpoint_")
        os.makedirs(folder, exist_ok=True)
        store_state(folder, self.save_checkpoint(folder))
        return Checkpoint(folder)

    def restore(self, checkpoint: Checkpoint | str | os.PathLike[str]) -> None:
        """Call :meth:`load_checkpoint` with what :meth:`save` saved (a checkpoint or
        its folder): the folder, or the dict ``save_checkpoint`` returned."""
        if isinstance(checkpoint, Checkpoint):
            folder = checkpoint.path
        elif isinstance(checkpoint, str | os.PathLike):
            folder = os.fspath(checkpoint)
        else:
            raise TypeError(
                f"restore() takes a Checkpoint or a folder path, got {checkpoint!r}"
            )
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"restore(): {folder!r} is not a checkpoint folder")
        self.load_checkpoint(load_state(folder))

    def stop(self) -> None:
        """Release the trainable: calls :meth:`cleanup` (Ray's ``Trainable.stop()``)."""
        self.cleanup()

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> PlacementGroupFactory | None:
        """What a trial with ``config`` reserves; ``None`` means ``{"CPU": 1}``.

        ``tune.with_resources`` returns a subclass that overrides this.
        """
        return None
