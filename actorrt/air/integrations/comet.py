"""Comet tracking for Tune (Ray's ``ray.air.integrations.comet``): one experiment per trial.

``CometLoggerCallback`` makes a ``comet_ml.Experiment`` (``OfflineExperiment`` with
``online=False``) when a trial starts: named after the trial, with the tags given, the
trial's config as parameters and ``Created from``. Each result is logged at step
``training_iteration``: its config again as parameters (a config a scheduler changed
shows), ``node_ip``, ``hostname``, ``pid`` and ``date`` as system info,
``hist_stats/episode_reward`` and ``hist_stats/episode_lengths`` as curves, its other
numbers as metrics, and ``trial_id``, ``experiment_id``, ``experiment_tag`` and every other
value that is not a number (``checkpoint_dir_name``) as "others" (``done`` and
``should_checkpoint`` left out). With ``save_checkpoints=True`` each checkpoint the trial
reports is logged as a ``model`` artifact. The experiment is ended when the trial ends
(``trial_status`` records how), which is when an offline experiment writes its archive.

Every call to comet_ml is made on one thread of the callback's own (``_background``),
never on the controller's event loop, in order: an experiment is made, logged to and
ended on that thread, and the experiment's end (``on_experiment_end``) waits for every
``end()``, so each offline archive is complete once ``Tuner.fit()`` returns.

Needs ``pip install 'actorrt[comet]'``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ...tune._controller._storage import flatten
from ...tune.logger._background import Background
from ...tune.logger.logger import LoggerCallback
from ._extras import require

if TYPE_CHECKING:
    from ...tune.experiment.trial import Trial

__all__ = ["CometLoggerCallback"]

# An offline experiment's end() writes its archive and may take up to 120 s (comet_ml).
_END_WAIT_S = 300.0
# comet_ml's auto-logging that Ray turns off unless asked for: it throttles, and here it
# would record the driver (its output, its git tree) in every trial's experiment.
_AUTOLOG_OFF = ("auto_output_logging", "log_git_metadata", "log_git_patch", "log_env_cpu",
                "log_env_gpu")
_NEVER_LOGGED = ("done", "should_checkpoint")
_SYSTEM = ("node_ip", "hostname", "pid", "date")
_OTHER = ("trial_id", "experiment_id", "experiment_tag")
_CURVES = ("hist_stats/episode_reward", "hist_stats/episode_lengths")


def _comet() -> Any:
    """comet_ml, imported with its framework auto-logging off unless the user chose
    (``COMET_DISABLE_AUTO_LOGGING``), as Ray imports it."""
    os.environ.setdefault("COMET_DISABLE_AUTO_LOGGING", "1")
    return require("comet_ml", "comet", "CometLoggerCallback (actorrt.air.integrations.comet)")


def _under(key: str, names: Iterable[str]) -> bool:
    return any(key == name or key.startswith(name + "/") for name in names)


def _sorted_result(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A result's values by where Comet logs them (the module docstring says how)."""
    kinds: dict[str, dict[str, Any]] = {"metric": {}, "other": {}, "system": {}, "curve": {}}
    for key, value in flatten({k: v for k, v in result.items() if k != "config"}).items():
        if _under(key, _NEVER_LOGGED):
            continue
        kind = ("system" if _under(key, _SYSTEM) else "curve" if _under(key, _CURVES)
                else "metric" if isinstance(value, int | float) and not _under(key, _OTHER)
                else "other")
        kinds[kind][key] = value
    return kinds


def _config(config: dict[str, Any]) -> dict[str, Any]:
    """The config as parameters: nested keys joined with ``/``, ``callbacks`` left out."""
    return flatten({k: v for k, v in config.items() if k != "callbacks"})


class CometLoggerCallback(LoggerCallback):
    """Logs each trial to Comet as one experiment (Ray's ``CometLoggerCallback``; the
    module docstring says what is logged).

    Args:
        online: log to Comet's servers (``comet_ml.Experiment``, which needs
            ``COMET_API_KEY`` or ``api_key=``); ``False``: ``comet_ml.OfflineExperiment``,
            an archive per trial in ``offline_directory`` to upload later with
            ``comet upload``.
        tags: tags added to every trial's experiment.
        save_checkpoints: log each checkpoint a trial reports as a ``model`` artifact.
        **experiment_kwargs: passed to ``Experiment`` / ``OfflineExperiment``
            (``project_name``, ``workspace``, ``api_key``, ``offline_directory``, ...);
            ``auto_output_logging``, ``log_git_metadata``, ``log_git_patch``,
            ``log_env_cpu`` and ``log_env_gpu`` are off unless given, as in Ray.

    Raises:
        ImportError: comet_ml is not installed (``pip install 'actorrt[comet]'``).
        TypeError: ``tags`` is not a list of strings.
        ValueError: ``save_checkpoints=True`` with ``online=False`` (comet_ml logs
            artifacts from online experiments only).
    """

    def __init__(
        self,
        online: bool = True,
        tags: list[str] | None = None,
        save_checkpoints: bool = False,
        **experiment_kwargs: Any,
    ) -> None:
        self._comet_ml = _comet()
        if save_checkpoints and not online:
            raise ValueError(
                "CometLoggerCallback(online=False, save_checkpoints=True): comet_ml logs "
                "artifacts only from an online Experiment (an OfflineExperiment refuses "
                "them); use online=True, or leave save_checkpoints off offline"
            )
        if tags is not None and (
            isinstance(tags, str) or not all(isinstance(t, str) for t in tags)
        ):
            raise TypeError(f"CometLoggerCallback(tags=) takes a list of strings, got {tags!r}")
        self.online = online
        self.tags = list(tags or [])
        self.save_checkpoints = save_checkpoints
        self.experiment_kwargs = dict(experiment_kwargs)
        for option in _AUTOLOG_OFF:
            if not self.experiment_kwargs.get(option):
                self.experiment_kwargs[option] = False
        self._background = Background("CometLoggerCallback")
        self._experiments: dict[str, Any] = {}  # trial id -> experiment (writer thread only)

    def log_trial_start(self, trial: Trial) -> None:
        self._background.call(self._start, trial.trial_id, str(trial), _config(trial.config))

    def log_trial_result(self, iteration: int, trial: Trial, result: dict[str, Any]) -> None:
        step = result.get("training_iteration")
        config = _config(result.get("config") or {})
        self._background.call(self._log, trial.trial_id, step, config, _sorted_result(result))

    def on_checkpoint(self, iteration: int, trials: list[Trial], trial: Trial,
                      checkpoint: Any, **info: Any) -> None:
        if self.save_checkpoints:
            self._background.call(self._artifact, trial.trial_id, str(trial), checkpoint.path)

    def log_trial_end(self, trial: Trial, failed: bool = False) -> None:
        self._background.call(self._end, trial.trial_id, "ERROR" if failed else "TERMINATED")

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        self._background.call(self._end_all)
        self._background.close(_END_WAIT_S)

    # ------------------------------------------------------------- writer thread

    def _start(self, trial_id: str, name: str, config: dict[str, Any]) -> None:
        if trial_id in self._experiments:  # restored, or restarted: the same one goes on
            return
        comet_ml = self._comet_ml
        kind = comet_ml.Experiment if self.online else comet_ml.OfflineExperiment
        experiment = kind(**self.experiment_kwargs)
        # comet_ml keeps one global experiment; several trials' live side by side here.
        comet_ml.config.set_global_experiment(None)
        self._experiments[trial_id] = experiment
        experiment.set_name(name)
        if self.tags:
            experiment.add_tags(self.tags)
        experiment.log_other("Created from", "actorrt")
        experiment.log_parameters(config)

    def _log(self, trial_id: str, step: int | None, config: dict[str, Any],
             kinds: dict[str, dict[str, Any]]) -> None:
        experiment = self._experiments.get(trial_id)
        if experiment is None:
            return
        experiment.log_parameters(config, step=step)
        experiment.log_others(kinds["other"])
        experiment.log_metrics(kinds["metric"], step=step)
        for key, value in kinds["system"].items():
            experiment.log_system_info(key, value)
        for key, values in kinds["curve"].items():
            experiment.log_curve(key, x=list(range(len(values))), y=list(values), step=step)

    def _artifact(self, trial_id: str, name: str, path: str) -> None:
        experiment = self._experiments.get(trial_id)
        if experiment is None or not os.path.isdir(path):
            return
        artifact = self._comet_ml.Artifact(name=f"checkpoint_{name}", artifact_type="model")
        for root, _, files in os.walk(path):
            for file in files:
                local = os.path.join(root, file)
                artifact.add(local, logical_path=os.path.relpath(local, path))
        experiment.log_artifact(artifact)

    def _end(self, trial_id: str, status: str) -> None:
        experiment = self._experiments.pop(trial_id, None)
        if experiment is not None:
            experiment.log_other("trial_status", status)
            experiment.end()

    def _end_all(self) -> None:
        for trial_id in list(self._experiments):  # still running when the experiment stopped
            self._end(trial_id, "TERMINATED")
