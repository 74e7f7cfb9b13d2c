"""Weights & Biases tracking for Tune and Train (Ray's ``ray.air.integrations.wandb``).

``WandbLoggerCallback`` makes one W&B run per trial: id the trial's id, named after the
trial, grouped by the experiment, with the trial's config as the run's config, every
numeric result logged, the trial's checkpoints uploaded as ``model`` artifacts when
``upload_checkpoints=True``, and the run finished with exit code 0, or 1 for a trial that
failed. ``setup_wandb`` starts a run for the trial or Train worker it is called in (rank 0
only by default) and returns it.

Where the logging runs: Ray gives each trial a logging actor of its own (a process).
Here one thread of the callback's own (``_background``) drives every trial's run, each a
``wandb.init(reinit="create_new")`` run, so several live in one process; W&B's own service
process (``wandb-core``) does the writing and uploading. The controller's event loop only
queues calls, so a slow upload never holds a trial's report up. Files go to the trial's
folder (``<trial>/wandb/``) unless ``dir=`` says otherwise.

Needs ``pip install 'actorrt[wandb]'``.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...tune._controller._storage import flatten
from ...tune.logger._background import Background
from ...tune.logger.logger import LoggerCallback
from ._extras import require
from ._trial_info import where

if TYPE_CHECKING:
    from ...tune.experiment.trial import Trial

__all__ = ["WandbLoggerCallback", "setup_wandb"]

# Result fields that go to the run's config rather than its history (as Ray puts them).
_TO_CONFIG = ("trial_id", "experiment_tag", "node_ip", "experiment_id", "hostname", "pid",
              "date")
_NEVER_LOGGED = ("done", "should_checkpoint")
_PROJECT_ENV = ("WANDB_PROJECT_NAME", "WANDB_PROJECT")  # Ray's name, then W&B's
_GROUP_ENV = ("WANDB_GROUP_NAME", "WANDB_RUN_GROUP")


_module: Any = require("wandb", "wandb", "actorrt.air.integrations.wandb")


def _wandb() -> Any:
    return _module


def _env(names: Sequence[str]) -> str | None:
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


def _set_api_key(api_key_file: str | None, api_key: str | None) -> None:
    """Put the API key where W&B reads it (``WANDB_API_KEY``), as Ray does; refuse a run
    that could not log in (not needed in ``WANDB_MODE=offline`` or ``disabled``)."""
    if api_key_file is not None:
        if api_key is not None:
            raise ValueError("pass api_key or api_key_file, not both")
        path = os.path.expanduser(api_key_file)
        try:
            with open(path) as file:
                api_key = file.readline().strip()
        except OSError as exc:
            raise ValueError(f"api_key_file {api_key_file!r} cannot be read: {exc}") from exc
    if api_key:
        os.environ["WANDB_API_KEY"] = api_key


def _loggable(value: Any, wandb: Any) -> bool:
    if isinstance(value, bool | int | float | str):
        return True
    return isinstance(value, wandb.sdk.data_types.base_types.wb_value.WBValue)


def _split(result: dict[str, Any], excludes: set[str], wandb: Any) -> tuple[dict[str, Any],
                                                                              dict[str, Any]]:
    """(what to log, what to add to the run's config) of one result."""
    log: dict[str, Any] = {}
    config: dict[str, Any] = {}
    for key, value in flatten(result).items():
        top = key.split("/", 1)[0]
        if key in excludes or top in excludes or top in _NEVER_LOGGED:
            continue
        if key in _TO_CONFIG:
            config[key] = value
        elif _loggable(value, wandb):
            log[key] = value
    return log, config


def _artifact_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


class WandbLoggerCallback(LoggerCallback):
    """Logs each trial to Weights & Biases as one run (Ray's ``WandbLoggerCallback``; the
    module docstring says what is logged, and where the logging runs).

    Args:
        project: the W&B project; ``None``: ``WANDB_PROJECT_NAME`` (Ray's) or
            ``WANDB_PROJECT``.
        group: the runs' group; ``None``: ``WANDB_GROUP_NAME``, else the experiment's name.
        api_key_file: a file whose first line is the API key.
        api_key: the API key (else ``WANDB_API_KEY``, or ``wandb login``'s).
        excludes: result (and config) keys not to log.
        log_config: also log the config with every result (``config/...``).
        upload_checkpoints: upload each checkpoint as a ``model`` artifact.
        save_checkpoints: Ray's older name for ``upload_checkpoints`` (deprecated).
        upload_timeout: how long, in seconds, the experiment's end waits for the runs to
            finish uploading.
        **kwargs: passed to ``wandb.init`` (``entity``, ``tags``, ``mode``, ``dir``, ...).

    Raises:
        ImportError: wandb is not installed (``pip install 'actorrt[wandb]'``).
        ValueError: no project is given or set in the environment, or
            ``upload_timeout`` is not a positive number of seconds.
    """

    def __init__(
        self,
        project: str | None = None,
        group: str | None = None,
        api_key_file: str | None = None,
        api_key: str | None = None,
        excludes: list[str] | None = None,
        log_config: bool = False,
        upload_checkpoints: bool = False,
        save_checkpoints: bool = False,
        upload_timeout: float = 1800,
        **kwargs: Any,
    ) -> None:
        self._wandb = _wandb()
        if save_checkpoints:
            warnings.warn(
                "WandbLoggerCallback(save_checkpoints=) is deprecated: use "
                "upload_checkpoints=True", DeprecationWarning, stacklevel=2,
            )
            upload_checkpoints = True
        self.project = project or _env(_PROJECT_ENV)
        if not self.project:
            raise ValueError(
                "WandbLoggerCallback needs a W&B project: pass project=... or set "
                "WANDB_PROJECT_NAME (or WANDB_PROJECT)"
            )
        if excludes is not None and not isinstance(excludes, list | tuple):
            raise TypeError(f"excludes must be a list of result keys, got {excludes!r}")
        if isinstance(upload_timeout, bool) or not isinstance(upload_timeout, int | float) or (
            upload_timeout <= 0
        ):
            raise ValueError(
                f"upload_timeout must be a positive number of seconds, got {upload_timeout!r}"
            )
        _set_api_key(api_key_file, api_key)
        self.group = group or _env(_GROUP_ENV)
        self.excludes = set(excludes or ())
        self.log_config = log_config
        self.upload_checkpoints = upload_checkpoints
        self.upload_timeout = upload_timeout
        self.kwargs = kwargs
        self._background = Background("WandbLoggerCallback")
        self._runs: dict[str, Any] = {}  # trial id -> wandb Run (writer thread only)
        self._started = False

    def log_trial_start(self, trial: Trial) -> None:
        config = {k: v for k, v in trial.config.items() if k not in self.excludes}
        config.pop("callbacks", None)
        experiment = os.path.basename(os.path.dirname(trial.path))
        init = {
            "id": trial.trial_id, "name": str(trial), "group": self.group or experiment,
            "project": self.project, "config": config, "dir": trial.path,
            "allow_val_change": True, "resume": "allow", "reinit": "create_new",
            # The driver's own output is not the trial's: W&B would wrap sys.stdout here.
            "settings": self._wandb.Settings(console="off"),
            **self.kwargs,
        }
        self._background.call(self._start, trial.trial_id, init)

    def log_trial_result(self, iteration: int, trial: Trial, result: dict[str, Any]) -> None:
        excludes = self.excludes if self.log_config else self.excludes | {"config"}
        log, config = _split(result, excludes, self._wandb)
        self._background.call(self._log, trial.trial_id, log, config)

    def on_checkpoint(self, iteration: int, trials: list[Trial], trial: Trial,
                      checkpoint: Any, **info: Any) -> None:
        if self.upload_checkpoints:
            self._background.call(self._upload, trial.trial_id, str(trial), checkpoint.path)

    def log_trial_end(self, trial: Trial, failed: bool = False) -> None:
        self._background.call(self._finish, trial.trial_id, 1 if failed else 0)

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        self._background.call(self._finish_all)
        self._background.close(float(self.upload_timeout))

    # ------------------------------------------------------------- writer thread

    def _start(self, trial_id: str, init: dict[str, Any]) -> None:
        if trial_id not in self._runs:
            os.makedirs(init["dir"], exist_ok=True)
            self._runs[trial_id] = self._wandb.init(**init)
            self._started = True

    def _log(self, trial_id: str, log: dict[str, Any], config: dict[str, Any]) -> None:
        run = self._runs.get(trial_id)
        if run is not None:
            if config:
                run.config.update(config, allow_val_change=True)
            run.log(log)

    def _upload(self, trial_id: str, name: str, path: str) -> None:
        run = self._runs.get(trial_id)
        if run is not None:
            artifact = self._wandb.Artifact(name=f"checkpoint_{_artifact_name(name)}",
                                            type="model")
            artifact.add_dir(path)
            run.log_artifact(artifact)

    def _finish(self, trial_id: str, exit_code: int) -> None:
        run = self._runs.pop(trial_id, None)
        if run is not None:
            run.finish(exit_code=exit_code)

    def _finish_all(self) -> None:
        for trial_id in list(self._runs):  # still running when the experiment stopped
            self._finish(trial_id, 1)
        if self._started and self._wandb.run is None:
            # W&B's service process, started for these runs, would outlive the
            # experiment; no run of the program's own uses it (wandb.run is None).
            self._wandb.teardown()
            self._started = False


def setup_wandb(
    config: dict[str, Any] | None = None,
    api_key: str | None = None,
    api_key_file: str | None = None,
    rank_zero_only: bool = True,
    **kwargs: Any,
) -> Any:
    """Start a W&B run for this trial or Train worker and return it (Ray's
    ``setup_wandb``).

    In a Tune trial the run's id is the trial's id, its name the trial's name, its group
    the experiment's name, and its files go to the trial's folder; ``config`` is the run's
    config; ``kwargs`` go to ``wandb.init`` and win over these. On a Train worker of rank
    other than 0 it returns W&B's disabled run, whose calls do nothing, unless
    ``rank_zero_only=False``.

    Raises:
        ImportError: wandb is not installed (``pip install 'actorrt[wandb]'``).
    """
    wandb = _wandb()
    here = where()
    if rank_zero_only and here.world_rank != 0:
        return wandb.init(mode="disabled", reinit="create_new")
    _set_api_key(api_key_file, api_key)
    init: dict[str, Any] = {
        "config": dict(config or {}), "allow_val_change": True, "resume": "allow",
        "reinit": "create_new",
    }
    project, group = _env(_PROJECT_ENV), _env(_GROUP_ENV) or here.experiment_name
    for key, value in (("id", here.trial_id), ("name", here.trial_name), ("project", project),
                       ("group", group), ("dir", here.trial_dir)):
        if value is not None:
            init[key] = value
    init.update(kwargs)
    return wandb.init(**init)
