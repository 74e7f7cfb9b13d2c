"""MLflow tracking for Tune and Train (Ray's ``ray.air.integrations.mlflow``).

``MLflowLoggerCallback`` makes one MLflow run per trial: named after the trial, with its
config as parameters, every numeric result as a metric at step ``timesteps_total`` (when
reported) else ``training_iteration``, the trial's folder (its checkpoints) as artifacts
when ``save_artifact=True``, and the run ended ``FINISHED`` or ``FAILED`` by how the trial
ended (``KILLED`` for one still running when the experiment stopped). Its calls to MLflow
are made on a thread of its own (``_background``), never on the controller's event loop.

``setup_mlflow`` is called in a trial's function or a Train worker: it points the ``mlflow``
module at the tracking server, starts a run (named after the trial) with the config as
parameters, and returns the module, so ``mlflow.log_metric`` logs to that run. On ranks
other than 0 it returns a stand-in whose every call does nothing (``rank_zero_only``).

Needs ``pip install 'actorrt[mlflow]'``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...tune._controller._storage import flatten
from ...tune.logger._background import Background
from ...tune.logger.logger import LoggerCallback
from ._extras import require
from ._trial_info import NoopModule, numbers, where

if TYPE_CHECKING:
    from ...tune.experiment.trial import Trial

__all__ = ["MLflowLoggerCallback", "setup_mlflow"]

_END_WAIT_S = 60.0

_module: Any = require("mlflow", "mlflow", "actorrt.air.integrations.mlflow")


def _mlflow() -> Any:
    return _module


def _connect(
    tracking_uri: str | None, registry_uri: str | None, tracking_token: str | None
) -> Any:
    """An ``MlflowClient`` for these URIs (``None``: MLflow's own defaults)."""
    if tracking_token is not None:
        os.environ["MLFLOW_TRACKING_TOKEN"] = tracking_token
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri, registry_uri=registry_uri)


def _experiment_id(
    client: Any,
    experiment_id: str | None,
    experiment_name: str | None,
    artifact_location: str | None,
    create: bool,
) -> str | None:
    """The experiment to log to, as Ray picks it: the id given, else
    ``MLFLOW_EXPERIMENT_ID``, when that experiment exists; else the name given, else
    ``MLFLOW_EXPERIMENT_NAME`` (created when ``create``); ``None`` (MLflow's default
    experiment) when neither is set."""
    candidate = experiment_id if experiment_id is not None else os.environ.get(
        "MLFLOW_EXPERIMENT_ID")
    if candidate and _exists(client, candidate):
        return candidate
    name = experiment_name if experiment_name is not None else os.environ.get(
        "MLFLOW_EXPERIMENT_NAME")
    if not name:
        return None
    found = client.get_experiment_by_name(name)
    if found is not None:
        return str(found.experiment_id)
    if not create:
        raise ValueError(
            f"MLflow has no experiment named {name!r} at {client.tracking_uri!r}: create it "
            "first, or pass create_experiment_if_not_exists=True"
        )
    return str(client.create_experiment(name, artifact_location=artifact_location))


def _exists(client: Any, experiment_id: str) -> bool:
    from mlflow.exceptions import MlflowException

    try:
        return client.get_experiment(experiment_id) is not None
    except MlflowException:
        return False


def _params(config: Mapping[str, Any]) -> list[Any]:
    from mlflow.entities import Param

    return [Param(key, str(value)) for key, value in flatten(config).items()]


class MLflowLoggerCallback(LoggerCallback):
    """Logs each trial to MLflow as one run (Ray's ``MLflowLoggerCallback``; the module
    docstring says what is logged).

    Args:
        tracking_uri: where runs go (``file://...``, ``sqlite:///...``, ``http://...``);
            ``None``: MLflow's default (``MLFLOW_TRACKING_URI``, else ``./mlruns``). With
            a cluster, use a server every node reaches.
        registry_uri: MLflow's model registry URI.
        experiment_name: the MLflow experiment, created when missing; ``None``:
            ``MLFLOW_EXPERIMENT_NAME`` / ``MLFLOW_EXPERIMENT_ID``, else the default one.
        tags: tags put on every run (with ``trial_name``).
        tracking_token: set as ``MLFLOW_TRACKING_TOKEN`` for the server.
        save_artifact: log the trial's folder (its checkpoints, result files) as the run's
            artifacts when the trial ends.
        log_params_on_trial_end: log the config when the trial ends instead of when it
            starts (for a config that changes while the trial runs, as PBT's).

    Raises:
        ImportError: mlflow is not installed (``pip install 'actorrt[mlflow]'``).
    """

    def __init__(
        self,
        tracking_uri: str | None = None,
        *,
        registry_uri: str | None = None,
        experiment_name: str | None = None,
        tags: dict[str, Any] | None = None,
        tracking_token: str | None = None,
        save_artifact: bool = False,
        log_params_on_trial_end: bool = False,
    ) -> None:
        _mlflow()
        if tags is not None and not isinstance(tags, Mapping):
            raise TypeError(f"tags must be a dict of tag name to value, got {tags!r}")
        self.tracking_uri = tracking_uri
        self.registry_uri = registry_uri
        self.experiment_name = experiment_name
        self.tags = dict(tags or {})
        self.tracking_token = tracking_token
        self.save_artifact = save_artifact
        self.log_params_on_trial_end = log_params_on_trial_end
        self._background = Background("MLflowLoggerCallback")
        self._client: Any = None
        self._experiment: str | None = None
        self._runs: dict[str, str] = {}  # trial id -> run id (writer thread only)

    def setup(self, *args: Any, **info: Any) -> None:
        self._background.call(self._open)

    def _open(self) -> None:
        if self._client is None:
            self._client = _connect(self.tracking_uri, self.registry_uri, self.tracking_token)
            self._experiment = _experiment_id(
                self._client, None, self.experiment_name, None, create=True
            ) or "0"

    def log_trial_start(self, trial: Trial) -> None:
        self._background.call(self._start, trial.trial_id, str(trial), dict(trial.config))

    def log_trial_result(self, iteration: int, trial: Trial, result: dict[str, Any]) -> None:
        step = result.get("timesteps_total") or result.get("training_iteration") or 0
        self._background.call(self._metrics, trial.trial_id, int(step), numbers(result))

    def log_trial_end(self, trial: Trial, failed: bool = False) -> None:
        self._background.call(
            self._end, trial.trial_id, "FAILED" if failed else "FINISHED",
            dict(trial.config), trial.path,
        )

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        self._background.call(self._end_all)
        self._background.close(_END_WAIT_S)

    # ------------------------------------------------------------- writer thread

    def _start(self, trial_id: str, name: str, config: dict[str, Any]) -> None:
        self._open()
        if trial_id in self._runs:  # restored, or restarted: the same run goes on
            return
        tags = {**{k: str(v) for k, v in self.tags.items()}, "trial_name": name}
        run = self._client.create_run(self._experiment, tags=tags, run_name=name)
        self._runs[trial_id] = run.info.run_id
        if not self.log_params_on_trial_end:
            self._client.log_batch(run.info.run_id, params=_params(config))

    def _metrics(self, trial_id: str, step: int, values: dict[str, float]) -> None:
        from mlflow.entities import Metric

        run_id = self._runs.get(trial_id)
        if run_id is None:
            return
        now = int(time.time() * 1000)
        metrics = [Metric(key, value, now, step) for key, value in values.items()]
        self._client.log_batch(run_id, metrics=metrics)

    def _end(self, trial_id: str, status: str, config: dict[str, Any], path: str) -> None:
        run_id = self._runs.pop(trial_id, None)
        if run_id is None:
            return
        if self.save_artifact and os.path.isdir(path):
            self._client.log_artifacts(run_id, path)
        if self.log_params_on_trial_end:
            self._client.log_batch(run_id, params=_params(config))
        self._client.set_terminated(run_id, status)

    def _end_all(self) -> None:
        for run_id in self._runs.values():
            self._client.set_terminated(run_id, "KILLED")
        self._runs.clear()


def setup_mlflow(
    config: dict[str, Any] | None = None,
    tracking_uri: str | None = None,
    registry_uri: str | None = None,
    experiment_id: str | None = None,
    experiment_name: str | None = None,
    tracking_token: str | None = None,
    artifact_location: str | None = None,
    run_name: str | None = None,
    create_experiment_if_not_exists: bool = False,
    tags: dict[str, Any] | None = None,
    rank_zero_only: bool = True,
) -> Any:
    """Start an MLflow run for this trial or Train worker and return the ``mlflow`` module
    logging to it (Ray's ``setup_mlflow``).

    Call it in the training function. In a Tune trial, the experiment defaults to the
    trial's id, else its name (as Ray), and the run is named ``run_name``, else the
    experiment's name; ``config`` is logged as the run's parameters. In a Train worker of
    rank other than 0 it returns a stand-in that does nothing, unless
    ``rank_zero_only=False``.

    Raises:
        ImportError: mlflow is not installed (``pip install 'actorrt[mlflow]'``).
        ValueError: the experiment named does not exist and
            ``create_experiment_if_not_exists`` is false.
    """
    mlflow = _mlflow()
    here = where()
    if rank_zero_only and here.world_rank != 0:
        return NoopModule()
    experiment_id = experiment_id or here.trial_id
    experiment_name = experiment_name or here.trial_name
    client = _connect(tracking_uri, registry_uri, tracking_token)
    chosen = _experiment_id(
        client, experiment_id, experiment_name, artifact_location,
        create=create_experiment_if_not_exists,
    )
    mlflow.set_tracking_uri(client.tracking_uri)
    if registry_uri is not None:
        mlflow.set_registry_uri(registry_uri)
    if mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.start_run(
        experiment_id=chosen, run_name=run_name or experiment_name,
        tags={k: str(v) for k, v in (tags or {}).items()} or None,
    )
    if config:
        mlflow.log_params({k: str(v) for k, v in flatten(config).items()})
    return mlflow
