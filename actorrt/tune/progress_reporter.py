"""Ray's progress reporters: ``RunConfig(progress_reporter=CLIReporter(...))``.

``CLIReporter`` and ``JupyterNotebookReporter`` configure actorrt's own progress view (the
live view on a terminal, the status line and final table elsewhere): which metrics and
parameters are columns, under which headings, how many rows, how often a status line is
printed. A subclass of :class:`ProgressReporter` written by the user is called as Ray calls
it: ``should_report(trials, done)`` at each tick of the view and ``report(trials, done,
*sys_info)`` when it says so, and once more with ``done=True`` at the end; it then replaces
the periodic view.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence, Sized
from typing import Any

__all__ = ["CLIReporter", "JupyterNotebookReporter", "ProgressReporter", "TuneReporterBase"]

# The metric columns shown when none are given (the view also shows the experiment's
# metric first); a column added to a reporter made without metric_columns joins these.
DEFAULT_METRIC_COLUMNS = {"training_iteration": "iter", "time_total_s": "total time (s)"}


class ProgressReporter:
    """What a progress reporter implements (Ray Tune's ``ProgressReporter``).

    Subclass it and implement ``should_report`` and ``report`` to print progress your way.
    Both are called on the driver's event loop with the experiment's trials (objects with
    ``trial_id``, ``trial_name``, ``config``, ``status``, ``last_result``); keep them
    quick. An exception raised by either ends the experiment, as in Ray.
    """

    def setup(
        self,
        start_time: float | None = None,
        total_samples: int | None = None,
        metric: str | None = None,
        mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Called once before the experiment starts."""

    def should_report(self, trials: list[Any], done: bool = False) -> bool:
        """Whether to call ``report`` now."""
        raise NotImplementedError

    def report(self, trials: list[Any], done: bool, *sys_info: Any) -> None:
        """Show the progress of ``trials``; ``done`` at the end of the experiment."""
        raise NotImplementedError


def _columns(name: str, columns: Any) -> dict[str, str] | None:
    """Columns as ``{key: heading}``, from a list of keys or a dict of key to heading;
    ``None`` (the defaults) for none or an empty one, as in Ray."""
    if columns is None or (isinstance(columns, Sized) and len(columns) == 0):
        return None
    if isinstance(columns, Mapping):
        return {str(k): str(v) for k, v in columns.items()}
    if isinstance(columns, Sequence) and not isinstance(columns, str | bytes):
        return {str(k): str(k) for k in columns}
    raise ValueError(
        f"{name} must be a list of names or a dict of name to heading, got {columns!r}"
    )


def _positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")


class TuneReporterBase(ProgressReporter):
    """The settings of Ray's ``CLIReporter`` and ``JupyterNotebookReporter``.

    Args:
        metric_columns: result keys shown as columns: a list, or a dict of key to heading.
            Default: the experiment's metric, ``training_iteration`` and ``time_total_s``.
        parameter_columns: config keys (``/`` for nested ones) shown as columns: a list,
            or a dict of key to heading. Default: every config key, in the config's order.
        total_samples: accepted for Ray's signature (the view counts trials itself).
        max_progress_rows: rows of the trial table.
        max_error_rows: errored trials listed in the view.
        max_column_length: longest cell, in characters.
        max_report_frequency: seconds between two status lines where the output is not
            a terminal (the live view redraws every second).
        infer_limit: accepted for Ray's signature (columns are not inferred beyond the
            metric's).
        print_intermediate_tables: ``False``: no periodic view, only the final table.
        metric, mode: the metric whose best value the view shows, when ``TuneConfig``
            names none.
        sort_by_metric: list the trials best first in the final table.
    """

    def __init__(
        self,
        *,
        metric_columns: Sequence[str] | Mapping[str, str] | None = None,
        parameter_columns: Sequence[str] | Mapping[str, str] | None = None,
        total_samples: int | None = None,
        max_progress_rows: int = 20,
        max_error_rows: int = 20,
        max_column_length: int = 20,
        max_report_frequency: float = 5,
        infer_limit: int = 3,
        print_intermediate_tables: bool | None = None,
        metric: str | None = None,
        mode: str | None = None,
        sort_by_metric: bool = False,
    ) -> None:
        self.metric_columns = _columns("metric_columns", metric_columns)
        self.parameter_columns = _columns("parameter_columns", parameter_columns)
        self._lists = {  # given as lists: a heading cannot differ from its key (Ray's rule)
            "metric": isinstance(metric_columns, list),
            "parameter": isinstance(parameter_columns, list),
        }
        for name, value in (
            ("max_progress_rows", max_progress_rows),
            ("max_error_rows", max_error_rows),
            ("max_column_length", max_column_length),
            ("max_report_frequency", max_report_frequency),
        ):
            _positive(name, value)
        if mode not in (None, "min", "max"):
            raise ValueError(f"mode must be 'min', 'max' or None, got {mode!r}")
        self.total_samples = total_samples
        self.max_progress_rows = int(max_progress_rows)
        self.max_error_rows = int(max_error_rows)
        self.max_column_length = int(max_column_length)
        self.max_report_frequency = float(max_report_frequency)
        self.infer_limit = infer_limit
        self.print_intermediate_tables = print_intermediate_tables
        self.metric = metric
        self.mode = mode
        self.sort_by_metric = bool(sort_by_metric)
        self._last_report = 0.0

    def add_metric_column(self, metric: str, representation: str | None = None) -> None:
        """Show ``metric`` as a column too (headed ``representation``)."""
        self.metric_columns = self._add("metric", self.metric_columns, metric, representation)

    def add_parameter_column(self, parameter: str, representation: str | None = None) -> None:
        """Show config key ``parameter`` as a column too (headed ``representation``)."""
        self.parameter_columns = self._add(
            "parameter", self.parameter_columns, parameter, representation
        )

    def _add(
        self, kind: str, columns: dict[str, str] | None, key: str, heading: str | None
    ) -> dict[str, str]:
        if columns is None:  # added to the default columns, as in Ray
            columns = dict(DEFAULT_METRIC_COLUMNS) if kind == "metric" else {}
        columns = dict(columns)
        if key in columns:
            raise ValueError(f"{kind} column {key!r} already exists")
        if self._lists[kind] and heading is not None and heading != key:
            raise ValueError(
                f"this reporter's {kind}_columns were given as a list, so a column's "
                f"heading cannot differ from its name: {key!r} vs {heading!r}"
            )
        columns[key] = heading or key
        return columns

    def set_total_samples(self, total_samples: int) -> None:
        self.total_samples = total_samples

    def set_search_properties(self, metric: str | None, mode: str | None) -> bool:
        """Take the experiment's metric and mode.

        Raises:
            ValueError: this reporter has its own metric or mode, and the experiment
                gives one too (as in Ray).
        """
        self.metric, self.mode = self._resolved_search(metric, mode)
        return True

    def _resolved_search(self, metric: str | None, mode: str | None) -> tuple[Any, Any]:
        """The metric and mode the view uses with the experiment's ``metric`` and
        ``mode`` (this reporter is not changed); see :meth:`set_search_properties`."""
        if (self.metric and metric) or (self.mode and mode):
            raise ValueError(
                "TuneConfig gives a metric or mode, and the progress reporter was made with "
                "its own metric and mode; remove them from one of the two"
            )
        return self.metric or metric, self.mode or mode

    def should_report(self, trials: list[Any], done: bool = False) -> bool:
        now = time.monotonic()
        if done or now - self._last_report >= self.max_report_frequency:
            self._last_report = now
            return True
        return False

    def report(self, trials: list[Any], done: bool, *sys_info: Any) -> None:
        """Print a table of ``trials`` (for a reporter called directly)."""
        metrics = self.metric_columns or {"training_iteration": "iter"}
        params = self.parameter_columns or {}
        rows = [["trial", "status", *metrics.values(), *params.values()]]
        for trial in trials[: self.max_progress_rows]:
            result = getattr(trial, "last_result", {}) or {}
            config = _flat(getattr(trial, "config", {}) or {})
            rows.append([
                str(getattr(trial, "trial_name", trial)), str(getattr(trial, "status", "")),
                *[self._cell(result.get(k, "")) for k in metrics],
                *[self._cell(config.get(k, "")) for k in params],
            ])
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for line in sys_info:
            print(line)
        for row in rows:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())

    def _cell(self, value: Any) -> str:
        text = f"{value:.4g}" if isinstance(value, float) else str(value)
        limit = self.max_column_length
        return text if len(text) <= limit else text[: limit - 3] + "..."


def _flat(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            flat.update(_flat(value, f"{prefix}{key}/"))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


class CLIReporter(TuneReporterBase):
    """Progress in the terminal or a log (Ray's ``CLIReporter``); see
    :class:`TuneReporterBase` for the arguments."""


class JupyterNotebookReporter(TuneReporterBase):
    """Ray's ``JupyterNotebookReporter``: the same view as :class:`CLIReporter`, drawn in
    the output of the notebook cell that runs ``fit()`` (it is the default there).

    Args:
        overwrite: redraw the view in place, in one output area of the cell (default);
            ``False`` adds a new area at each redraw, as Ray does.
        **kwargs: as :class:`TuneReporterBase`.

    Raises:
        TypeError: ``overwrite`` is not a bool.
    """

    def __init__(self, *, overwrite: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(overwrite, bool):
            raise TypeError(
                f"JupyterNotebookReporter(overwrite=...) takes True or False, got {overwrite!r}"
            )
        self.overwrite = overwrite
