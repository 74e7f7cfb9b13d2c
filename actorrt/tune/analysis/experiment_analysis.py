"""``ExperimentAnalysis``: what the legacy ``tune.run`` returns (Ray Tune's names).

It reads an experiment's trials (those ``tune.run`` ran, or those in an experiment folder)
and their result files: best trial, config, result and checkpoint by a metric, and the
results as ``pandas`` data frames.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import warnings
from collections.abc import Iterable
from typing import Any

from ..._shared._checkpoint import Checkpoint
from ..._shared._storage_path import check_local_storage_path
from .._controller._experiment_state import HEADER_FILE, JOURNAL_FILE
from .._controller._storage import PROGRESS_FILE, RESULT_FILE, flatten, read_results
from .._worker._checkpoint_dirs import checkpoint_index
from ..error import TuneError
from ..experiment.trial import ERROR, TERMINATED, CheckpointRecord, Trial, trainable_name_of
from ..search._library_search import import_library

__all__ = ["ExperimentAnalysis", "best_checkpoint", "load_trial", "metric_values"]

logger = logging.getLogger("actorrt.tune")

SCOPES = ("all", "last", "avg", "last-5-avg", "last-10-avg")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def metric_values(results: Iterable[dict[str, Any]], metric: str) -> list[float]:
    """Every numeric value of ``metric`` (``/`` for nested keys) in ``results``, in order."""
    values = []
    for result in results:
        value = _number(flatten(result).get(metric))
        if value is not None:
            values.append(value)
    return values


def best_checkpoint(
    results: list[dict[str, Any]], trial_dir: str, metric: str, mode: str
) -> tuple[Checkpoint, dict[str, Any]] | None:
    """The checkpoint of a trial, still on disk, whose result has the best ``metric``."""
    best: tuple[float, Checkpoint, dict[str, Any]] | None = None
    for result in results:
        name = result.get("checkpoint_dir_name")
        value = _number(flatten(result).get(metric))
        if not name or value is None or math.isnan(value):
            continue
        path = os.path.join(trial_dir, str(name))
        if not os.path.isdir(path):
            continue  # deleted by num_to_keep
        key = value if mode == "max" else -value
        if best is None or key > best[0]:
            best = (key, Checkpoint(path), result)
    return None if best is None else (best[1], best[2])


def _csv_value(text: str) -> Any:
    """A ``progress.csv`` cell as the value it was written from: an int, a float, a bool,
    else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)


def trial_results(trial_dir: str) -> list[dict[str, Any]]:
    """A trial's results from its ``result.json``; where that file is gone, from its
    ``progress.csv`` (flat keys, ``config/lr``), as Ray falls back to it."""
    if os.path.exists(os.path.join(trial_dir, RESULT_FILE)):
        return read_results(trial_dir)
    try:
        with open(os.path.join(trial_dir, PROGRESS_FILE), encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        return []
    return [
        {k: v if k == "trial_id" else _csv_value(v) for k, v in row.items() if k and v != ""}
        for row in rows
    ]


def _check_mode(mode: str | None) -> str:
    if mode not in ("min", "max"):
        raise ValueError(f"If set, `mode` has to be one of [min, max] (got {mode!r})")
    return mode


def _load_trials(path: str) -> list[Trial]:
    """The trials of an experiment folder: each sub-folder with a ``params.json``."""
    return [
        load_trial(os.path.join(path, entry))
        for entry in sorted(os.listdir(path))
        if os.path.isfile(os.path.join(path, entry, "params.json"))
    ]


def load_trial(trial_dir: str) -> Trial:
    """A trial read from its folder: config, last result, status and checkpoints."""
    import json

    entry = os.path.basename(trial_dir)
    with open(os.path.join(trial_dir, "params.json"), encoding="utf-8") as f:
        config = json.load(f)
    results = trial_results(trial_dir)
    last = results[-1] if results else {}
    last.pop("config", None)
    trial_id = str(last.get("trial_id", entry))
    trial = Trial(
        trainable_name_of(entry, trial_id), config=config, trial_id=trial_id,
        trial_name=entry, path=trial_dir,
    )
    trial.last_result = last
    error_file = os.path.join(trial_dir, "error.txt")
    trial.status = TERMINATED
    if os.path.exists(error_file):
        trial.status = ERROR
        with open(error_file, encoding="utf-8") as f:
            trial.error = TuneError(f.read())  # its text, as Ray's Result.error
    names = sorted(n for n in os.listdir(trial_dir) if checkpoint_index(n) is not None)
    trial.checkpoints = [
        CheckpointRecord(os.path.join(trial_dir, n), math.nan, 0, 0.0) for n in names
    ]
    return trial


class ExperimentAnalysis:
    """An experiment's trials and results (Ray Tune's ``ExperimentAnalysis``).

    Args:
        experiment_checkpoint_path: the experiment's folder.
        storage_filesystem: must be ``None`` (local folders only).
        trials: the trials (``tune.run`` passes its own); default: read from the folder.
        default_metric, default_mode: what ``best_*`` and the ``get_best_*`` methods
            use when not given a metric and mode.
    """

    def __init__(
        self,
        experiment_checkpoint_path: str | os.PathLike[str],
        *,
        storage_filesystem: Any = None,
        trials: list[Trial] | None = None,
        default_metric: str | None = None,
        default_mode: str | None = None,
    ) -> None:
        if storage_filesystem is not None:
            raise ValueError("storage_filesystem is not supported: experiments are local folders")
        experiment_checkpoint_path = check_local_storage_path(
            experiment_checkpoint_path, "experiment_checkpoint_path"
        )
        path = os.path.abspath(os.path.expanduser(os.fspath(experiment_checkpoint_path)))
        if trials is None and not os.path.isdir(path):
            raise ValueError(f"ExperimentAnalysis: {path!r} is not an experiment folder")
        if default_mode is not None:
            _check_mode(default_mode)
        self.experiment_path = path
        self.trials: list[Trial] = trials if trials is not None else _load_trials(path)
        self.default_metric = default_metric
        self.default_mode = default_mode
        self._results: dict[str, list[dict[str, Any]]] = {}

    def _all_results(self, trial: Trial) -> list[dict[str, Any]]:
        if trial.trial_id not in self._results:
            self._results[trial.trial_id] = trial_results(trial.path)
        return self._results[trial.trial_id]

    def _metric_mode(self, metric: str | None, mode: str | None, what: str) -> tuple[str, str]:
        metric = metric or self.default_metric
        mode = mode or self.default_mode
        if metric is None:
            raise ValueError(
                "No `metric` has been passed and  `default_metric` has not been set. "
                f"Please specify the `metric` parameter (to fetch {what}: metric= here, or "
                "to tune.run() / TuneConfig)."
            )
        if mode is None:
            raise ValueError(
                "No `mode` has been passed and  `default_mode` has not been set. Please "
                f"specify the `mode` parameter (to fetch {what}: mode='min' or 'max' here, "
                "or to tune.run() / TuneConfig)."
            )
        return metric, _check_mode(mode)

    # ------------------------------------------------------------------ best

    def get_best_trial(
        self,
        metric: str | None = None,
        mode: str | None = None,
        scope: str = "last",
        filter_nan_and_inf: bool = True,
    ) -> Trial | None:
        """The trial with the best ``metric``: its last value (``scope="last"``), its
        best over all results (``"all"``), their mean (``"avg"``), or the mean of its last
        5 or 10 (``"last-5-avg"``, ``"last-10-avg"``). ``None`` (with a warning) when no
        trial reported the metric. As in Ray, an experiment of one trial returns it."""
        if len(self.trials) == 1:
            return self.trials[0]
        metric, mode = self._metric_mode(metric, mode, "the best trial")
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
        best: tuple[float, Trial] | None = None
        for trial in self.trials:
            values = (
                metric_values([trial.last_result], metric) if scope == "last"
                else metric_values(self._all_results(trial), metric)
            )
            if not values:
                continue
            if scope == "all":
                score = max(values) if mode == "max" else min(values)
            elif scope == "avg":
                score = sum(values) / len(values)
            elif scope.startswith("last-"):
                n = int(scope.split("-")[1])
                score = sum(values[-n:]) / len(values[-n:])
            else:
                score = values[-1]
            if filter_nan_and_inf and not math.isfinite(score):
                continue
            key = score if mode == "max" else -score
            if best is None or key > best[0]:
                best = (key, trial)
        if best is None:
            logger.warning(
                "tune: no trial reported a usable value of %r; is the metric name right?", metric
            )
            return None
        return best[1]

    def get_best_config(
        self, metric: str | None = None, mode: str | None = None, scope: str = "last"
    ) -> dict[str, Any] | None:
        """The config of :meth:`get_best_trial`."""
        trial = self.get_best_trial(metric, mode, scope)
        return trial.config if trial is not None else None

    def get_best_logdir(
        self, metric: str | None = None, mode: str | None = None, scope: str = "last"
    ) -> str | None:
        """The folder of :meth:`get_best_trial` (``None`` when no trial reported the
        metric). Ray 2.7 and later raise ``DeprecationWarning`` here, pointing to
        ``get_best_trial(...).local_path``; actorrt answers, with a ``FutureWarning``
        that says so (``get_best_trial(...).path`` is the lasting spelling)."""
        warnings.warn(
            "ExperimentAnalysis.get_best_logdir() is deprecated in Ray (it raises "
            "DeprecationWarning there); use get_best_trial(metric, mode, scope).path",
            FutureWarning,
            stacklevel=2,
        )
        trial = self.get_best_trial(metric, mode, scope)
        return trial.path if trial is not None else None

    def get_best_checkpoint(
        self, trial: Trial | str, metric: str | None = None, mode: str | None = None
    ) -> Checkpoint | None:
        """The checkpoint of ``trial`` (a trial, its id or its folder) whose result has
        the best ``metric`` (default: the experiment's metric, else
        ``training_iteration``), among those still on disk; ``None`` (logged) when it has
        none.

        Raises:
            ValueError: no ``mode`` here or as the default mode.
        """
        trial = self._trial(trial)
        metric = metric or self.default_metric or "training_iteration"
        if mode is None and self.default_mode is None:
            raise ValueError("get_best_checkpoint() needs mode='min' or 'max' (no default mode)")
        mode = _check_mode(mode or self.default_mode)
        found = best_checkpoint(self._all_results(trial), trial.path, metric, mode)
        if found is None:
            logger.error("tune: no checkpoint found for trial %s", trial.trial_id)
            return None
        return found[0]

    def get_last_checkpoint(
        self,
        trial: Trial | str | None = None,
        metric: str = "training_iteration",
        mode: str = "max",
    ) -> Checkpoint | None:
        """The latest checkpoint of ``trial`` (default: the best trial by ``metric`` and
        ``mode``)."""
        if trial is None:
            best = self.get_best_trial(metric, mode)
            if best is None:
                return None
            trial = best
        return self.get_best_checkpoint(trial, "training_iteration", "max")

    def _trial(self, trial: Trial | str) -> Trial:
        if isinstance(trial, Trial):
            return trial
        for candidate in self.trials:
            if trial in (candidate.path, candidate.trial_id):
                return candidate
        raise ValueError(f"{trial!r} is neither a trial of this experiment nor its folder")

    @property
    def best_trial(self) -> Trial:
        """The best trial by the default metric and mode (its last result)."""
        metric, mode = self._metric_mode(None, None, "the best trial")
        best = self.get_best_trial(metric, mode)
        if best is None:
            raise ValueError(f"no trial reported a usable value of {metric!r}")
        return best

    @property
    def best_config(self) -> dict[str, Any]:
        return self.best_trial.config

    @property
    def best_result(self) -> dict[str, Any]:
        """The best trial's last result (with its ``config``, as Ray's results have)."""
        return self._last_result(self.best_trial)

    @staticmethod
    def _last_result(trial: Trial) -> dict[str, Any]:
        return {**trial.last_result, "config": trial.config} if trial.last_result else {}

    @property
    def best_checkpoint(self) -> Checkpoint | None:
        trial = self.best_trial
        metric, mode = self._metric_mode(None, None, "the best checkpoint")
        return self.get_best_checkpoint(trial, metric, mode)

    @property
    def best_dataframe(self) -> Any:
        """Every result of the best trial."""
        return self.trial_dataframes[self.best_trial.trial_id]

    @property
    def best_result_df(self) -> Any:
        """The best trial's last result as a one-row data frame."""
        pandas = import_library("pandas", "ExperimentAnalysis.best_result_df", "tune")

        return pandas.DataFrame.from_records([flatten(self.best_result)], index="trial_id")

    # ------------------------------------------------------------------ results

    @property
    def results(self) -> dict[str, dict[str, Any]]:
        """Each trial's last result, by trial id."""
        return {t.trial_id: self._last_result(t) for t in self.trials}

    @property
    def results_df(self) -> Any:
        """One row per trial (its last result, flattened), indexed by trial id."""
        pandas = import_library("pandas", "ExperimentAnalysis.results_df", "tune")

        rows = [flatten(self._last_result(t)) | {"trial_id": t.trial_id} for t in self.trials]
        return pandas.DataFrame.from_records(rows, index="trial_id")

    def fetch_trial_dataframes(self) -> dict[str, Any]:
        """Read every trial's results from its folder again (a running experiment's new
        results too) and return them as :attr:`trial_dataframes` does: one data frame per
        trial, by trial id (Ray's ``fetch_trial_dataframes``)."""
        self._results.clear()
        return self.trial_dataframes

    @property
    def trial_dataframes(self) -> dict[str, Any]:
        """Every result of each trial, as a data frame, by trial id (read once; see
        :meth:`fetch_trial_dataframes` to read again)."""
        pandas = import_library("pandas", "ExperimentAnalysis.trial_dataframes", "tune")

        return {
            t.trial_id: pandas.DataFrame(
                [flatten({k: v for k, v in r.items() if k != "config"})
                 for r in self._all_results(t)]
            )
            for t in self.trials
        }

    def dataframe(self, metric: str | None = None, mode: str | None = None) -> Any:
        """One row per trial: its last result, or with ``metric`` and ``mode`` its best
        result; with the config as ``config/<key>`` columns and its ``logdir``. (The
        default metric and mode are not used here, as in Ray.)"""
        pandas = import_library("pandas", "ExperimentAnalysis.dataframe()", "tune")

        if mode is not None:
            _check_mode(mode)
            if metric is None:
                raise ValueError("dataframe(mode=...) needs a metric too")
        rows = []
        for trial in self.trials:
            row = trial.last_result
            if metric is not None and mode is not None:
                scored = [(v, r) for r in self._all_results(trial)
                          if (v := _number(flatten(r).get(metric))) is not None]
                if scored:
                    pick = max if mode == "max" else min
                    row = pick(scored, key=lambda pair: pair[0])[1]
            flat = flatten({**{k: v for k, v in row.items() if k != "config"},
                            "config": trial.config})
            flat["logdir"] = trial.path
            rows.append(flat)
        return pandas.DataFrame(rows)

    def stats(self) -> dict[str, Any]:
        """The experiment's statistics, as Ray's ``stats()``: ``start_time`` (when the
        experiment was created, seconds since the epoch), ``timestamp`` (when its record
        was last written) and ``total_time_s`` (its running time over every run)."""
        header = os.path.join(self.experiment_path, HEADER_FILE)
        journal = os.path.join(self.experiment_path, JOURNAL_FILE)
        if not os.path.exists(journal):
            raise ValueError(
                f"stats(): {self.experiment_path!r} holds no experiment record ({JOURNAL_FILE})"
            )
        elapsed = 0.0
        with open(journal, encoding="utf-8") as f:
            for line in f:
                try:
                    elapsed = max(elapsed, float(json.loads(line).get("t", 0.0)))
                except (ValueError, AttributeError):
                    continue  # a line torn by a crash
        return {
            "start_time": os.path.getmtime(header if os.path.exists(header) else journal),
            "timestamp": os.path.getmtime(journal),
            "total_time_s": elapsed,
        }

    def get_all_configs(self, prefix: bool = False) -> dict[str, dict[str, Any]]:
        """Each trial's config by its id (``prefix``: keys as ``config/<key>``)."""
        return {
            t.trial_id: (flatten({"config": t.config}) if prefix else t.config)
            for t in self.trials
        }

    def __repr__(self) -> str:
        return f"ExperimentAnalysis({self.experiment_path!r}, {len(self.trials)} trials)"
