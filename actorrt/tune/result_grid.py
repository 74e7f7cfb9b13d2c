"""``Result`` and ``ResultGrid``: what ``Tuner.fit()`` returns."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .._shared._checkpoint import Checkpoint
from .._shared._storage_path import check_local_storage_path
from ._controller._storage import flatten, read_results
from .analysis.experiment_analysis import SCOPES, ExperimentAnalysis, metric_values
from .result import AUTO_RESULT_KEYS
from .search._library_search import import_library

if TYPE_CHECKING:
    from .experiment.trial import Trial

__all__ = ["Result", "ResultGrid", "grid_of"]



def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclasses.dataclass
class Result:
    """One trial's outcome.

    Attributes:
        metrics: its last result (reported metrics and Tune's automatic fields, with
            ``config``); empty if it never reported.
        config: its config.
        path: its folder.
        checkpoint: its latest checkpoint, or ``None``.
        error: the exception that ended it, or ``None``. Its notes (``__notes__``) carry
            the traceback from the trial's process.
        trial_id: its id.
        status: ``TERMINATED`` or ``ERROR`` (or ``PENDING`` for a trial that never started
            because the experiment stopped).
        best_checkpoints: the trial's checkpoints still on disk (those
            ``CheckpointConfig(num_to_keep=...)`` kept), oldest first, each with the
            result it was reported with.
    """

    metrics: dict[str, Any]
    config: dict[str, Any]
    path: str
    checkpoint: Checkpoint | None = None
    error: BaseException | None = None
    trial_id: str = ""
    status: str = ""
    best_checkpoints: list[tuple[Checkpoint, dict[str, Any]]] = dataclasses.field(
        default_factory=list
    )

    def get_best_checkpoint(self, metric: str, mode: str) -> Checkpoint | None:
        """The kept checkpoint whose result has the best ``metric`` (Ray's
        ``Result.get_best_checkpoint``).

        Raises:
            RuntimeError: the trial kept no checkpoint, or none of its kept checkpoints'
                results has ``metric`` (as in Ray).
            ValueError: a bad mode.
        """
        _check_mode(mode)
        if not self.best_checkpoints:
            raise RuntimeError(f"trial {self.trial_id} has no checkpoint on disk")
        scored = [
            (float(v), checkpoint)
            for checkpoint, metrics in self.best_checkpoints
            if isinstance(v := flatten(metrics).get(metric), int | float)
            and not isinstance(v, bool)
        ]
        if not scored:  # Ray's error here is a RuntimeError ("Invalid metric name")
            known = sorted({k for _, m in self.best_checkpoints for k in flatten(m)})
            raise RuntimeError(
                f"no checkpoint of trial {self.trial_id} was reported with {metric!r}; "
                f"choose from {known}"
            )
        pick = max if mode == "max" else min
        return pick(scored, key=lambda pair: pair[0])[1]

    @classmethod
    def from_path(
        cls, path: str | os.PathLike[str], storage_filesystem: Any = None
    ) -> Result:
        """The result of the trial whose folder is ``path`` (Ray's ``Result.from_path``),
        read from its files: config, last result, kept checkpoints, and its error (as a
        ``tune.TuneError`` holding the text of ``error.txt``, as in Ray).
        ``storage_filesystem`` may be ``None`` or pyarrow's ``LocalFileSystem``.

        Raises:
            ValueError: ``path`` is a URI, or not a trial folder (no ``params.json``), or a
                filesystem other than the local one.
        """
        _local_filesystem(storage_filesystem)
        path = check_local_storage_path(path, "path")
        trial_dir = os.path.abspath(os.path.expanduser(os.fspath(path)))
        if not os.path.isfile(os.path.join(trial_dir, "params.json")):
            raise ValueError(
                f"Result.from_path: {trial_dir!r} is not a trial folder (it has no params.json)"
            )
        from .analysis.experiment_analysis import load_trial

        return grid_of([load_trial(trial_dir)], os.path.dirname(trial_dir), None, None)[0]

    @property
    def filesystem(self) -> Any:
        """Where the trial's files are, as Ray's ``Result.filesystem``: pyarrow's
        ``LocalFileSystem`` (results are local folders).

        Raises:
            ImportError: pyarrow is not installed (``path`` is a plain local folder).
        """
        try:
            from pyarrow import fs  # type: ignore[import-not-found,import-untyped,unused-ignore]
        except ImportError:
            raise ImportError(
                "Result.filesystem is a pyarrow filesystem and pyarrow is not installed "
                "(pip install 'actorrt[tune]', or pip install pyarrow); the trial's files are "
                f"in the local folder {self.path}"
            ) from None
        return fs.LocalFileSystem()

    @property
    def metrics_dataframe(self) -> Any:
        """Every result the trial reported (a ``pandas.DataFrame`` read from its
        ``progress.csv``); ``None`` when it reported none, as in Ray."""
        pandas = import_library("pandas", "Result.metrics_dataframe", "tune")
        path = os.path.join(self.path, "progress.csv")
        try:
            if os.path.getsize(path) == 0:
                return None
        except FileNotFoundError:
            return None
        return pandas.read_csv(path)

    def __repr__(self) -> str:
        return self._repr(0)

    def _repr(self, indent: int) -> str:
        # As Ray's: the reported metrics without Tune's automatic keys, one field a line,
        # ``indent`` spaces in (a ResultGrid shows its results 2 in).
        shown = {k: v for k, v in self.metrics.items() if k not in AUTO_RESULT_KEYS}
        fields = [f"metrics={shown!r}", f"path={self.path!r}", "filesystem='local'",
                  f"checkpoint={self.checkpoint!r}"]
        if self.error is not None:
            fields.insert(0, f"error={type(self.error).__name__!r}")
        pad = " " * indent
        body = ",\n".join(f"{pad}  {field}" for field in fields)
        return f"{pad}Result(\n{body}\n{pad})"


def _local_filesystem(filesystem: Any) -> None:
    """Refuse a filesystem other than the local one (results are local folders)."""
    if filesystem is not None and type(filesystem).__name__ != "LocalFileSystem":
        raise ValueError(
            f"storage_filesystem must be None or pyarrow's LocalFileSystem: results are "
            f"local folders, got {filesystem!r}"
        )


def _check_mode(mode: str | None) -> None:
    if mode not in ("min", "max"):
        raise ValueError(f"If set, `mode` has to be one of [min, max] (got {mode!r})")


class ResultGrid:
    """The results of every trial of an experiment, in the order trials were created."""

    def __init__(
        self,
        results: list[Result] | ExperimentAnalysis | None = None,
        experiment_path: str | None = None,
        metric: str | None = None,
        mode: str | None = None,
        *,
        experiment_analysis: Any = None,
    ) -> None:
        """Either ``results`` (a list of ``Result``) and ``experiment_path``, or, as in Ray,
        an ``ExperimentAnalysis`` (positional, or ``experiment_analysis=``): any object
        with ``trials``, whose ``experiment_path``, ``default_metric`` and
        ``default_mode`` are used where it has them.

        Raises:
            ValueError: both or neither of ``results`` and ``experiment_analysis``, or a
                list of results without ``experiment_path``.
        """
        if (results is None) == (experiment_analysis is None):
            raise ValueError("ResultGrid() takes results (with experiment_path) or "
                             "experiment_analysis, one of the two")
        if results is not None and not isinstance(results, list):
            experiment_analysis, results = results, None
        if experiment_analysis is not None:  # Ray's ResultGrid(experiment_analysis)
            analysis = experiment_analysis
            trials = list(analysis.trials)
            metric = metric or getattr(analysis, "default_metric", None)
            mode = mode or getattr(analysis, "default_mode", None)
            experiment_path = experiment_path or getattr(analysis, "experiment_path", None)
            if experiment_path is None:  # the trials' folder; an empty grid has none
                experiment_path = os.path.dirname(trials[0].path) if trials else ""
            results = grid_of(trials, experiment_path, metric, mode)._results
        if experiment_path is None:
            raise ValueError("ResultGrid(results) needs experiment_path (or pass an "
                             "ExperimentAnalysis)")
        assert results is not None
        self._results: list[Result] = results
        self.experiment_path = experiment_path
        self._metric = metric
        self._mode = mode

    def __len__(self) -> int:
        return len(self._results)

    def __getitem__(self, index: int) -> Result:
        return self._results[index]

    def __iter__(self) -> Iterator[Result]:
        return iter(self._results)

    @property
    def errors(self) -> list[BaseException]:
        """The exceptions of the trials that errored."""
        return [r.error for r in self._results if r.error is not None]

    @property
    def num_errors(self) -> int:
        """How many trials errored."""
        return len(self.errors)

    @property
    def num_terminated(self) -> int:
        """How many trials ended normally."""
        return sum(r.status == "TERMINATED" for r in self._results)

    def get_best_result(
        self,
        metric: str | None = None,
        mode: str | None = None,
        scope: str = "last",
        filter_nan_and_inf: bool = True,
    ) -> Result:
        """The trial whose ``metric`` is best: its last value (``scope="last"``), its best
        value (``"all"``), the mean of its values (``"avg"``) or of its last 5 or 10
        (``"last-5-avg"``, ``"last-10-avg"``). As in Ray, a grid of one trial returns that
        trial whatever ``metric``, ``mode`` and ``scope`` are (even one it never reported),
        and NaN or infinite scores are skipped unless
        ``filter_nan_and_inf=False``.

        Raises:
            ValueError: no metric or mode given here or in ``TuneConfig``, a bad mode or
                scope.
            RuntimeError: no trial reported a usable value of ``metric`` (Ray's error).
        """
        if len(self._results) == 1:  # as in Ray, whatever metric and mode say
            return self._results[0]
        metric = metric or self._metric
        mode = mode or self._mode
        if metric is None:
            raise ValueError(
                "No metric is provided. Either pass in a `metric` arg to `get_best_result` "
                "or specify a metric in the `TuneConfig` of your `Tuner`."
            )
        if mode is None:
            raise ValueError(
                "No mode is provided. Either pass in a `mode` arg to `get_best_result` or "
                f"specify a mode in the `TuneConfig` of your `Tuner` (metric {metric!r}: "
                "mode='min' or 'max')."
            )
        _check_mode(mode)
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
        best: tuple[float, Result] | None = None
        for result in self._results:
            score = self._score(result, metric, mode, scope)
            if score is None or (filter_nan_and_inf and not math.isfinite(score)):
                continue
            key = score if mode == "max" else -score
            if best is None or key > best[0] or (math.isnan(best[0]) and not math.isnan(key)):
                best = (key, result)
        if best is None:
            reported = sorted({k for r in self._results for k in flatten(r.metrics)})
            raise RuntimeError(
                f"No best trial found for the given metric: {metric}. No trial reported "
                f"it, or all its values are NaN or infinite (pass filter_nan_and_inf=False "
                f"to keep those); the trials reported: {reported}"
            )
        return best[1]

    @staticmethod
    def _score(result: Result, metric: str, mode: str | None, scope: str) -> float | None:
        if scope == "last":
            values = metric_values([result.metrics], metric)
        else:
            try:
                frame = result.metrics_dataframe
            except (OSError, ValueError):
                return None
            if metric not in frame:
                return None
            values = [float(v) for v in frame[metric] if _is_number(v)]
        if not values:
            return None
        if scope == "all":
            return max(values) if mode == "max" else min(values)
        if scope == "avg":
            return sum(values) / len(values)
        if scope.startswith("last-"):
            tail = values[-int(scope.split("-")[1]):]
            return sum(tail) / len(tail)
        return values[-1]

    def get_dataframe(
        self, filter_metric: str | None = None, filter_mode: str | None = None
    ) -> Any:
        """A ``pandas.DataFrame`` with one row per trial: its last result (or, with
        ``filter_metric``, its best) and its config as ``config/<key>`` columns.

        Raises:
            ImportError: pandas is not installed (``pip install 'actorrt[tune]'``).
        """
        pandas = import_library("pandas", "ResultGrid.get_dataframe()", "tune")

        rows = []
        for result in self._results:
            row = dict(result.metrics)
            if filter_metric is not None:
                _check_mode(filter_mode)
                try:
                    frame = result.metrics_dataframe
                    column = frame[filter_metric]
                    index = column.idxmax() if filter_mode == "max" else column.idxmin()
                    row = {**frame.loc[index].to_dict(), "config": result.config}
                except (OSError, KeyError, ValueError):
                    pass
            row.setdefault("config", result.config)
            flat = flatten(row)
            flat["trial_id"] = result.trial_id
            flat["logdir"] = result.path
            if result.error is not None:
                flat["error"] = f"{type(result.error).__name__}: {result.error}"
            rows.append(flat)
        return pandas.DataFrame(rows)

    def __repr__(self) -> str:
        # Ray's form: every result's repr, indented, in a list.
        shown = ",\n".join(result._repr(2) for result in self._results)
        return f"ResultGrid<[\n{shown}\n]>"


def grid_of(
    trials: list[Trial], path: str, metric: str | None, mode: str | None
) -> ResultGrid:
    """The results of ``trials``, in order."""
    results = [
        Result(
            metrics={**t.last_result, "config": t.config} if t.last_result else {},
            config=t.config,
            path=t.path,
            checkpoint=t.checkpoint,
            error=t.error,
            trial_id=t.trial_id,
            status=t.status,
            best_checkpoints=_kept_checkpoints(t),
        )
        for t in trials
    ]
    return ResultGrid(results, path, metric, mode)


def _kept_checkpoints(trial: Trial) -> list[tuple[Checkpoint, dict[str, Any]]]:
    """A trial's checkpoints on disk with the results they came with (read from its
    ``result.json``; a checkpoint taken at the end of a class trainable gets its last
    result)."""
    if not trial.checkpoints:
        return []
    by_name = {
        str(r["checkpoint_dir_name"]): r
        for r in read_results(trial.path)
        if r.get("checkpoint_dir_name")
    }
    kept = []
    for path, *_ in trial.checkpoints:
        if not os.path.isdir(path):
            continue
        metrics = by_name.get(os.path.basename(path), trial.last_result)
        kept.append((Checkpoint(path), {k: v for k, v in metrics.items() if k != "config"}))
    return kept
