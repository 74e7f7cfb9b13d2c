"""The progress view's content: one moment of an experiment, as plain lines or as rich.

A :class:`Snapshot` is built on the controller's event loop (it reads the trials and the
runtime's resource views there) and rendered by the progress reporter: as one status line
and a plain table where the output is not a terminal, or as a ``rich`` renderable for the
live view and the final table on a terminal.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ..experiment.trial import ERROR, PAUSED, PENDING, RUNNING, TERMINATED, Trial
from ..result import AUTO_RESULT_KEYS
from ._storage import flatten

__all__ = ["SHOWN", "Snapshot", "error_summary", "fmt", "short"]

SHOWN = ("training_iteration", "time_total_s")  # shown for every trial, after the metric
_HEADINGS = {"training_iteration": "iter", "time_total_s": "total time (s)"}
_STATUS_ORDER = (RUNNING, PAUSED, PENDING, TERMINATED, ERROR)
_STYLE: dict[str, str] = {
    RUNNING: "green", PAUSED: "cyan", PENDING: "yellow", TERMINATED: "blue", ERROR: "bold red"
}
_TABLE_ROWS = 20
_LIVE_ROWS = 12
_CONFIG_COLUMNS = 6
_CELL = 24
_INFERRED_METRICS = 4  # without a metric, the table shows this many reported ones (Ray's)
_ERRORS_SHOWN = 5
_REASONS_SHOWN = 3
# An actor as the runtime names it in a reason (``Class(id=... name='...')``), or a bare word.
_ACTOR_OR_WORD = re.compile(r"\w+\(id=(?P<id>[\w.-]+)(?: name='[^']*')?\)|[\w.-]+")


def fmt(value: Any) -> str:
    """A value for a person: floats to 4 significant digits."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _cell(value: Any, width: int = _CELL) -> str:
    text = fmt(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def short(config: dict[str, Any], width: int = 60) -> str:
    """A config as ``k=v, a/b=w``, cut to ``width`` characters."""
    text = ", ".join(f"{k}={fmt(v)}" for k, v in flatten(config).items())
    return text if len(text) <= width else text[: width - 3] + "..."


def _amount(name: str, value: float) -> str:
    if name == "memory":
        return f"{value / 2**30:.3g}"
    return fmt(float(value)) if value != int(value) else str(int(value))


def _counts(trials: Iterable[Trial]) -> list[tuple[str, int]]:
    counts = Counter(str(t.status) for t in trials)
    known = [(s, counts.pop(s)) for s in _STATUS_ORDER if s in counts]
    return known + sorted(counts.items())


def error_summary(trial: Trial) -> str:
    """An errored trial's error in a line or a few: its type and message (which, for the
    resource errors, says how to fix the declaration)."""
    error = trial.error
    if error is None:
        lines = trial.error_text.strip().splitlines()
        return lines[-1] if lines else "failed"
    text = f"{type(error).__name__}: {error}".strip()
    return "\n".join(text.splitlines()[:_ERRORS_SHOWN])


@dataclasses.dataclass
class Snapshot:
    """What the progress view shows at one moment; built on the loop, rendered anywhere.

    Attributes:
        elapsed: seconds since the experiment started.
        trials: every trial so far.
        total: the cluster's resources (``actorrt.cluster_resources()``).
        free: what is free (``actorrt.available_resources()``).
        pending: the broker's waiting requests (``actorrt.pending_requests()``).
        metric: the experiment's metric, or ``None``.
        mode: ``"min"``, ``"max"`` or ``None``.
        changed: when each trial last changed status (``time.monotonic()``), by id.
        names: trial names by the actor id of their trial actor, to name the holders in
            the broker's reasons.
        metric_names, parameter_names: the columns a ``CLIReporter`` asked for, with
            their headings (``None``: the defaults).
        table_rows: the final table's rows (``None``: the default).
    """

    elapsed: float
    trials: list[Trial]
    total: dict[str, float]
    free: dict[str, float]
    pending: list[Any]
    metric: str | None = None
    mode: str | None = None
    changed: dict[str, float] = dataclasses.field(default_factory=dict)
    names: dict[str, str] = dataclasses.field(default_factory=dict)
    metric_names: dict[str, str] | None = None
    parameter_names: dict[str, str] | None = None
    table_rows: int | None = None

    def best(self) -> tuple[Trial, float] | None:
        """The trial with the best last ``metric`` so far, and that value."""
        if self.metric is None or self.mode not in ("min", "max"):
            return None
        scored = [
            (t, float(t.last_result[self.metric]))
            for t in self.trials
            if isinstance(t.last_result.get(self.metric), int | float)
        ]
        if not scored:
            return None
        pick = max if self.mode == "max" else min
        return pick(scored, key=lambda pair: pair[1])

    def resources(self) -> list[tuple[str, str, str]]:
        """(name, used, total) of the cluster's resources (memory in GiB, and only while
        some is reserved: by default nothing asks for memory)."""
        names = sorted(self.total, key=lambda k: (k not in ("CPU", "GPU", "memory"), k))
        shown = []
        for name in names:
            total = self.total[name]
            used = max(total - self.free.get(name, 0.0), 0.0)
            if total <= 0 or (name == "memory" and not used):
                continue
            label = "memory (GiB)" if name == "memory" else name
            shown.append((label, _amount(name, used), _amount(name, total)))
        return shown

    def reasons(self) -> list[str]:
        """Why requests wait, most common first: the broker's sentences, with the trials'
        actors named by their trials."""
        def named(found: re.Match[str]) -> str:
            return self.names.get(found.group("id") or found.group(), found.group())

        counts = Counter(_ACTOR_OR_WORD.sub(named, str(p.reason)) for p in self.pending)
        return [reason for reason, _ in counts.most_common(_REASONS_SHOWN)]

    def metric_columns(self) -> list[str]:
        if self.metric_names is not None:
            return list(self.metric_names)
        if self.metric is None:  # as Ray's: the first few numbers the trials report
            return [*SHOWN, *self.reported_metrics()]
        return [self.metric, *SHOWN]

    def reported_metrics(self) -> list[str]:
        """Up to four numeric metrics the trials report (Tune's own keys left out), in
        the order they first appear."""
        found: list[str] = []
        for trial in self.trials:
            for key, value in flatten(trial.last_result).items():
                numeric = isinstance(value, int | float) and not isinstance(value, bool)
                tunes_own = key in AUTO_RESULT_KEYS or key.startswith("config/")
                if numeric and not tunes_own and key not in found:
                    found.append(key)
                if len(found) == _INFERRED_METRICS:
                    return found
        return found

    def config_columns(self, trials: Iterable[Trial], final: bool = False) -> list[str]:
        """The config's keys, in the param space's order; the live view shows the first
        few, the final table all of them."""
        if self.parameter_names is not None:
            return list(self.parameter_names)
        columns: list[str] = []
        for trial in trials:
            for key in flatten(trial.config):
                if key not in columns:
                    columns.append(key)
        return columns if final else columns[:_CONFIG_COLUMNS]

    def _rows(self) -> int:
        return self.table_rows if self.table_rows is not None else _TABLE_ROWS

    def live_rows(self) -> list[Trial]:
        """Running trials, then waiting ones, then the most recently ended."""
        def recency(t: Trial) -> float:
            return -self.changed.get(t.trial_id, 0.0)

        running = [t for t in self.trials if t.status == RUNNING]
        waiting = [t for t in self.trials if t.status == PENDING]
        ended = sorted(
            (t for t in self.trials if t.status not in (RUNNING, PENDING)), key=recency
        )
        return [*running, *waiting, *ended][:_LIVE_ROWS]

    def status_line(self) -> str:
        """One plain line: counts, resources, the best result, why trials wait."""
        parts = [f"{n} {status}" for status, n in _counts(self.trials)]
        line = f"[tune] {self.elapsed:.0f}s: {' | '.join(parts) or 'no trials yet'}"
        used = ", ".join(f"{u}/{t} {name}" for name, u, t in self.resources())
        line += f" | using {used}" if used else ""
        best = self.best()
        if best is not None:
            line += f" | best {self.metric}={fmt(best[1])} ({best[0].trial_name})"
        if self.pending:
            line += f" | {len(self.pending)} waiting for resources: {self.reasons()[0]}"
        return line

    def row(self, trial: Trial, config_columns: list[str], final: bool = False) -> list[str]:
        """One trial's cells; the final table does not cut config values."""
        flat = flatten(trial.config)
        width = 1 << 30 if final else _CELL
        return [
            trial.trial_name,
            trial.status,
            *[_cell(flatten(trial.last_result).get(k, "")) for k in self.metric_columns()],
            *[_cell(flat.get(k, ""), width) for k in config_columns],
        ]

    def header(self, config_columns: list[str]) -> list[str]:
        return [
            "trial", "status",
            *[(self.metric_names or _HEADINGS).get(k, k) for k in self.metric_columns()],
            *[(self.parameter_names or {}).get(k, k) for k in config_columns],
        ]

    def renderable(self, final: bool = False) -> Any:
        """The view as a ``rich`` renderable (``rich.console.Group``)."""
        from rich.console import Group
        from rich.text import Text

        parts: list[Any] = []
        head = Text(f"Tune: {self.elapsed:.0f} s", style="bold")
        for status, n in _counts(self.trials):
            head.append(" | ")
            head.append(f"{n} {status}", style=_STYLE.get(status, ""))
        parts.append(head)
        resources = self.resources()
        if resources:
            parts.append(Text(
                "Resources in use: " + ", ".join(f"{u}/{t} {n}" for n, u, t in resources)
            ))
        best = self.best()
        if best is not None:
            trial, value = best
            parts.append(Text(
                f"Best {self.metric} ({self.mode}): {fmt(value)} in {trial.trial_name} "
                f"({short(trial.config)})",
                style="bold green",
            ))
        if self.pending:
            parts.append(Text(f"Waiting for resources: {len(self.pending)}", style="yellow"))
            parts.extend(Text(f"  {reason}") for reason in self.reasons())
        parts.append(
            self._table(self.trials[:self._rows()] if final else self.live_rows(), final)
        )
        errored = [t for t in self.trials if t.status == ERROR]
        if errored:
            parts.append(Text(f"Errors: {len(errored)}", style="bold red"))
            recent = sorted(errored, key=lambda t: -self.changed.get(t.trial_id, 0.0))
            for trial in recent[:_ERRORS_SHOWN]:
                line = Text(f"  {trial.trial_name}: ", style="red")
                line.append(error_summary(trial))
                parts.append(line)
        return Group(*parts)

    def _table(self, rows: list[Trial], final: bool = False) -> Any:
        from rich.table import Table
        from rich.text import Text

        columns = self.config_columns(rows, final)
        table = Table(show_edge=False, pad_edge=False, header_style="bold")
        for heading in self.header(columns):
            table.add_column(heading, overflow="fold")
        for trial in rows:
            # Text cells: a config value such as "[bold]" is shown, not read as markup.
            cells = [Text(cell) for cell in self.row(trial, columns, final)]
            cells[1].stylize(_STYLE.get(trial.status, ""))
            table.add_row(*cells)
        if len(self.trials) > len(rows):
            table.caption = f"{len(rows)} of {len(self.trials)} trials shown"
        return table

    def plain_table(self) -> list[str]:
        """The final table as plain lines (no escape codes)."""
        rows = self.trials[:self._rows()]
        columns = self.config_columns(rows, final=True)
        cells = [self.header(columns), *[self.row(t, columns, final=True) for t in rows]]
        widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                 for r in cells]
        if len(self.trials) > len(rows):
            lines.append(f"... and {len(self.trials) - len(rows)} more trials")
        return lines
