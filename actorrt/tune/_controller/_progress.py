"""Progress output: what a person watching an experiment sees.

``verbose=0`` prints nothing. ``1``: on a terminal, a live view (``rich``) redrawn every
second: trials per status, resources in use out of the total, why waiting trials wait (the
broker's own explanation), the best result so far, a table of the running and the most
recently ended trials (metric, iteration, time, config), and the errors, each with its
message (which names the fix, e.g. a ``ResourceDeadlockError``'s). Elsewhere (a pipe, a CI
log, a file) a plain status line every 10 s instead, no escape codes. Either way, a line per
trial error or retry as it happens, and a final table with the best trial. ``2`` adds a
line per trial status change; ``3`` a line per result.

In a Jupyter notebook the live view is drawn as HTML in one output area of the cell that
called ``fit()``, replaced at each redraw (Ray's ``JupyterNotebookReporter(overwrite=True)``,
its default there); ``overwrite=False`` adds a new area at each redraw instead.

Everything here runs on the controller's event loop, so it reads the trials without locks.
"""

from __future__ import annotations

import asyncio
import contextvars
import io
import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

import actorrt
from actorrt._notebook import CellView

from ..callback import importable
from ..experiment.trial import ERROR, PENDING, Trial
from ..progress_reporter import ProgressReporter as UserReporter
from ..progress_reporter import TuneReporterBase
from ._view import SHOWN, Snapshot, fmt, short

__all__ = ["ProgressReporter", "cell_view"]

LIVE_REFRESH_S = 1.0
PLAIN_INTERVAL_S = 10.0
NOTEBOOK_WIDTH = 120  # characters: the view's width in a notebook cell

# The notebook cell's output area that ``Tuner.fit()`` made on the cell's thread, seen by
# the controller's task (contextvars cross with the call onto the runtime's loop).
cell_view: contextvars.ContextVar[CellView | None] = contextvars.ContextVar(
    "actorrt_tune_cell_view", default=None
)


def _is_terminal(out: TextIO) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False


class ProgressReporter:
    """Prints an experiment's progress for a person watching it (see the module docstring).

    Args:
        verbose: ``RunConfig.verbose``.
        metric: the experiment's metric, for the best result.
        mode: ``"min"`` or ``"max"``.
        out: where to print (default ``sys.stdout``).
        live: draw the live view (default: when ``out`` is a terminal and ``rich`` is
            installed).
        reporter: ``RunConfig.progress_reporter``: a ``CLIReporter`` /
            ``JupyterNotebookReporter`` sets the view's columns, rows and frequency;
            another ``ProgressReporter`` is called instead of the periodic view.
    """

    def __init__(
        self,
        verbose: int,
        metric: str | None,
        mode: str | None,
        out: TextIO | None = None,
        live: bool | None = None,
        reporter: UserReporter | None = None,
    ) -> None:
        self.verbose = verbose
        self.settings = reporter if isinstance(reporter, TuneReporterBase) else None
        self.custom = reporter if self.settings is None else None
        if self.settings is not None:
            # The user's reporter is read, not changed: a tuner may run again with it.
            metric, mode = self.settings._resolved_search(metric, mode)
        self.metric = metric
        self.mode = mode
        self.out = out or sys.stdout
        self.cell = cell_view.get() if out is None and live is None else None
        if live is None:
            live = self.cell is not None or (_is_terminal(self.out) and importable("rich"))
        self.live = live and verbose >= 1 and self.custom is None
        if not self.live:
            self.cell = None
        self.interval = LIVE_REFRESH_S if self.live else PLAIN_INTERVAL_S
        if self.settings is not None and not self.live:
            self.interval = self.settings.max_report_frequency
        if self.custom is not None:
            self.interval = LIVE_REFRESH_S
            self.custom.setup(time.time(), None, metric, mode)
        self._started = time.monotonic()
        self._changed: dict[str, float] = {}
        self._console: Any = None
        self._live: Any = None
        self._refs: Mapping[str, Any] = {}

    # ------------------------------------------------------------------ printing

    def _print(self, line: str) -> None:
        if self._console is not None:
            from rich.text import Text

            self._console.print(Text(line), soft_wrap=True)  # the terminal wraps it
        else:
            print(line, file=self.out, flush=True)

    def note(self, text: str) -> None:
        """A line for the person watching (``verbose >= 1``)."""
        if self.verbose >= 1:
            self._print(f"[tune] {text}")

    def trial_status(self, trial: Trial, detail: str = "") -> None:
        """A trial changed status (or failed an attempt: ``detail``)."""
        self._changed[trial.trial_id] = time.monotonic()
        if self.verbose < (1 if detail or trial.status == ERROR else 2):
            return
        extra = f": {detail}" if detail else ""
        if trial.status == PENDING:
            extra = f" ({short(trial.config)})"
        self._print(f"[tune] {trial.trial_name} {trial.status}{extra}")

    def result(self, trial: Trial, result: dict[str, Any]) -> None:
        """A trial reported ``result`` (shown at ``verbose >= 3``)."""
        if self.verbose < 3:
            return
        keys = [k for k in (self.metric, *SHOWN) if k and k in result]
        shown = ", ".join(f"{k}={fmt(result[k])}" for k in keys)
        self._print(f"[tune] {trial.trial_name} result: {shown}")

    # ------------------------------------------------------------------ the view

    def snapshot(self, trials: list[Trial]) -> Snapshot:
        """The view now (reads the runtime's resource views: call it on the loop)."""
        return Snapshot(
            elapsed=time.monotonic() - self._started,
            trials=list(trials),
            total=actorrt.cluster_resources(),
            free=actorrt.available_resources(),
            pending=actorrt.pending_requests(),
            metric=self.metric,
            mode=self.mode,
            changed=dict(self._changed),
            metric_names=self.settings.metric_columns if self.settings else None,
            parameter_names=self.settings.parameter_columns if self.settings else None,
            table_rows=self.settings.max_progress_rows if self.settings else None,
            names={
                ref.actor_id: t.trial_name
                for t in trials
                if (ref := self._refs.get(t.trial_id)) is not None
            },
        )

    def status_line(self, trials: list[Trial]) -> str:
        """The plain status line now."""
        return self.snapshot(trials).status_line()

    def status(self, trials: list[Trial]) -> None:
        """Show the progress now: redraw the live view, or print a status line."""
        if self.verbose < 1:
            return
        if self.custom is not None:
            if self.custom.should_report(trials, done=False):
                self.custom.report(trials, False, self.status_line(trials))
            return
        if self.settings is not None and self.settings.print_intermediate_tables is False:
            return
        if self.cell is not None:
            self._draw_in_cell(self.snapshot(trials))
        elif self._live is not None:
            self._live.update(self.snapshot(trials).renderable(), refresh=True)
        else:
            self._print(self.status_line(trials))

    def _draw_in_cell(self, view: Snapshot, final: bool = False) -> None:
        assert self.cell is not None
        if importable("rich"):
            from rich.console import Console

            console = Console(
                file=io.StringIO(), record=True, width=NOTEBOOK_WIDTH, force_jupyter=False
            )
            console.print(view.renderable(final=final))
            markup = console.export_html(
                inline_styles=True,
                code_format="<pre style='line-height:1.25;font-family:monospace'>{code}</pre>",
            )
        else:
            markup = CellView.preformatted(
                "\n".join([view.status_line(), *view.plain_table()])
            )
        overwrite = getattr(self.settings, "overwrite", True)
        if overwrite:
            self.cell.show(markup)
        else:
            CellView().show(markup)

    async def watch(self, trials: list[Trial], refs: Mapping[str, Any] | None = None) -> None:
        """Show the progress every ``interval`` seconds until cancelled; the live view
        is taken down when this ends, however it ends.

        Args:
            trials: the experiment's trials (read at each redraw).
            refs: the refs of the running trials' actors by trial id (read at each
                redraw), to name them where the broker's reasons give actor ids.
        """
        if self.verbose < 1:
            return
        self._refs = refs if refs is not None else {}
        try:
            if self.live and self.cell is None:
                self._start_live(trials)
            while True:
                await asyncio.sleep(self.interval)
                self.status(trials)
        finally:
            self._stop_live()

    def _start_live(self, trials: list[Trial]) -> None:
        from rich.console import Console
        from rich.live import Live

        self._console = Console(file=self.out, force_terminal=True)
        # Worker output printed meanwhile goes through rich and appears above the view.
        self._live = Live(
            self.snapshot(trials).renderable(),
            console=self._console,
            auto_refresh=False,
            transient=True,
        )
        self._live.start(refresh=True)

    def _stop_live(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.stop()

    def final(self, trials: list[Trial], path: str) -> None:
        """The final table, the best trial, the errors with their tracebacks, and where
        the results are."""
        if self.verbose < 1:
            return
        self._stop_live()
        if self.custom is not None:
            self.custom.report(trials, True, self.status_line(trials))
        view = self.snapshot(trials)
        if self.cell is not None:
            self._draw_in_cell(view, final=True)
        elif self._console is not None:
            self._console.print(view.renderable(final=True))
        else:
            self._print(view.status_line())
            for line in view.plain_table():
                self._print(line)
        best = view.best()
        if best is not None:
            trial, value = best
            self._print(
                f"[tune] best {self.metric}={fmt(value)}: {trial.trial_name} "
                f"({short(trial.config, 200)})"
            )
        for t in trials:
            if t.status == ERROR:
                self._print(f"[tune] {t.trial_name} errored:\n{t.error_text.rstrip()}")
        self._print(f"[tune] results in {path}")
