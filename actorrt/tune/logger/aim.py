"""Aim tracking for Tune (Ray's ``ray.tune.logger.aim``): one Aim run per trial.

``AimLoggerCallback`` opens an ``aim.Run`` when a trial starts, in the repo given or, by
default, the experiment's folder, with the experiment's name as the run's experiment. The
run holds the trial's id and folder (``trial_id``, ``trial_log_dir``) and its config as
``hparams`` (nested keys joined with ``/``). Every numeric result is tracked as
``ray/tune/<name>`` at step ``timesteps_total`` when reported, else ``training_iteration``,
with the result's ``epoch`` and ``context`` when it has them. The run is closed when the
trial ends, and indexed into the repo so that ``aim.Repo(path)`` finds it (the Aim UI,
``aim up``, indexes runs itself).

Aim is called on a thread of the callback's own (``_background``), never on the
controller's event loop. Needs ``pip install 'actorrt[aim]'``.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._controller._storage import flatten
from ..search._library_search import import_library
from ._background import Background
from .logger import LoggerCallback
from .tensorboardx import scalars

if TYPE_CHECKING:
    from ..experiment.trial import Trial

__all__ = ["AimLoggerCallback"]

logger = logging.getLogger("actorrt.tune")

_END_WAIT_S = 60.0
_PREFIX = "ray/tune/"  # the names Ray tracks, so Aim queries carry over
_NOT_TRACKED = frozenset({"context", "epoch"})  # passed to Run.track instead
# Aim's own defaults would sample the driver's CPU and memory and capture its terminal into
# every trial's run: all trials' runs live in the driver here.
_RUN_DEFAULTS = {"system_tracking_interval": None, "capture_terminal_logs": False}
_HPARAM_TYPES = (str, bool, int, float, list, type(None))


def _hparams(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config as Aim stores it: ``a/b`` keys, numbers, strings, lists and ``None``
    (numpy scalars as Python's), other values left out (logged)."""
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for key, value in flatten(config).items():
        if not isinstance(value, _HPARAM_TYPES) and getattr(value, "ndim", None) == 0:
            value = value.item()  # a numpy scalar
        if isinstance(value, _HPARAM_TYPES):
            kept[key] = value
        else:
            dropped.append(key)
    if dropped:
        logger.info("tune: AimLoggerCallback leaves out config values Aim cannot store: %s",
                    ", ".join(dropped))
    return kept


def _tracked(result: Mapping[str, Any], metrics: list[str] | None) -> dict[str, float]:
    """The finite numbers of ``result`` to track (only ``metrics`` when given)."""
    values = scalars({k: v for k, v in result.items() if k not in _NOT_TRACKED})
    return {
        key: value for key, value in values.items()
        if not math.isinf(value) and (metrics is None or key in metrics)
    }


class AimLoggerCallback(LoggerCallback):
    """Logs each trial to Aim as one run (Ray's ``AimLoggerCallback``; the module
    docstring says what is logged).

    Args:
        repo: the Aim repo's folder (or an ``aim.Repo``); ``None``: the experiment's
            folder (``<storage_path>/<name>``), as in Ray.
        experiment_name: each run's ``experiment``; ``None``: the Tune experiment's name.
        metrics: the result keys to track (nested ones as ``a/b``); ``None``: every
            numeric result.
        **aim_run_kwargs: passed to ``aim.Run`` (``log_system_params``,
            ``system_tracking_interval``, ``capture_terminal_logs``, ...); the last two
            default to off here (see docs/integrations.md).

    Raises:
        ImportError: aim is not installed (``pip install 'actorrt[aim]'``).
        ValueError: ``metrics`` is empty.
        TypeError: ``metrics`` is not a list of names, or ``repo`` not a folder or Repo.
    """

    def __init__(
        self,
        repo: str | os.PathLike[str] | Any | None = None,
        experiment_name: str | None = None,
        metrics: list[str] | None = None,
        **aim_run_kwargs: Any,
    ) -> None:
        self._aim = import_library("aim", "AimLoggerCallback", "aim")
        if metrics is not None:
            if isinstance(metrics, str) or not all(isinstance(m, str) for m in metrics):
                raise TypeError(
                    f"AimLoggerCallback(metrics=) takes a list of result names, got {metrics!r}"
                )
            if not metrics:
                raise ValueError(
                    "AimLoggerCallback(metrics=[]) would track nothing: name at least one "
                    "result key, or pass None to track every numeric result"
                )
        if repo is not None and not isinstance(repo, str | os.PathLike | self._aim.Repo):
            raise TypeError(
                f"AimLoggerCallback(repo=) takes a folder or an aim.Repo, got {repo!r}"
            )
        self._repo = os.fspath(repo) if isinstance(repo, os.PathLike) else repo
        self._experiment_name = experiment_name
        self._metrics = list(metrics) if metrics is not None else None
        self._aim_run_kwargs = {**_RUN_DEFAULTS, **aim_run_kwargs}
        self._background = Background("AimLoggerCallback")
        self._runs: dict[str, Any] = {}  # trial id -> aim.Run (writer thread only)

    def log_trial_start(self, trial: Trial) -> None:
        experiment_dir = os.path.dirname(trial.path)
        kwargs = {
            "repo": self._repo or experiment_dir,
            "experiment": self._experiment_name or os.path.basename(experiment_dir),
            **self._aim_run_kwargs,
        }
        attributes = {"trial_id": trial.trial_id, "trial_log_dir": trial.path,
                      "hparams": _hparams(trial.config)}
        self._background.call(self._start, trial.trial_id, kwargs, attributes)

    def log_trial_result(self, iteration: int, trial: Trial, result: dict[str, Any]) -> None:
        step = result.get("timesteps_total") or result.get("training_iteration") or 0
        values = _tracked(result, self._metrics)
        self._background.call(
            self._track, trial.trial_id, int(step), values, result.get("epoch"),
            result.get("context"),
        )

    def log_trial_end(self, trial: Trial, failed: bool = False) -> None:
        self._background.call(self._close, trial.trial_id)

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        self._background.call(self._close_all)
        self._background.close(_END_WAIT_S)

    # ------------------------------------------------------------- writer thread

    def _start(self, trial_id: str, kwargs: dict[str, Any], attributes: dict[str, Any]) -> None:
        if trial_id in self._runs:  # restored, or restarted: the same run goes on
            return
        if isinstance(kwargs["repo"], str):
            os.makedirs(kwargs["repo"], exist_ok=True)
        run = self._aim.Run(**kwargs)
        for key, value in attributes.items():
            run[key] = value
        self._runs[trial_id] = run

    def _track(self, trial_id: str, step: int, values: dict[str, float], epoch: Any,
               context: Any) -> None:
        run = self._runs.get(trial_id)
        if run is None:
            return
        for name, value in values.items():
            run.track(value, name=_PREFIX + name, step=step, epoch=epoch, context=context)

    def _close(self, trial_id: str) -> None:
        run = self._runs.pop(trial_id, None)
        if run is None:
            return
        repo, run_hash = run.repo, run.hash
        run.close()
        try:
            from aim.sdk.index_manager import RepoIndexManager

            RepoIndexManager.get_index_manager(repo).index(run_hash)
        except Exception as exc:  # an Aim UI holding the index indexes the run itself
            logger.info("tune: AimLoggerCallback did not index run %s (%s); the Aim UI "
                        "(aim up) indexes it when it starts", run_hash, exc)

    def _close_all(self) -> None:
        for trial_id in list(self._runs):  # still running when the experiment stopped
            self._close(trial_id)
