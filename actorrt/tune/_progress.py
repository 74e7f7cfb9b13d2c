"""Progress output: a line per trial status change, a periodic status line, a final table.

``verbose=0`` prints nothing; ``1`` a status line every ``interval`` seconds (counts per
status, resources in use, why trials wait, the best result so far), a line per trial error or
retry, and the final table; ``2`` also a line per trial status change; ``3`` also a line per
result.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any, TextIO

import actorrt

from ._trial import ERROR, Trial

__all__ = ["ProgressReporter"]

_SHOWN = ("training_iteration", "time_total_s")
_TABLE_ROWS = 20


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _short(config: dict[str, Any], width: int = 60) -> str:
    text = ", ".join(f"{k}={_fmt(v)}" for k, v in config.items())
    return text if len(text) <= width else text[: width - 3] + "..."


class ProgressReporter:
    """Prints an experiment's progress for a person watching it."""

    def __init__(
        self,
        verbose: int,
        metric: str | None,
        mode: str | None,
        out: TextIO | None = None,
        interval: float = 10.0,
    ) -> None:
        self.verbose = verbose
        self.metric = metric
        self.mode = mode
        self.out = out or sys.stdout
        self.interval = interval
        self._started = time.monotonic()

    def _print(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def note(self, text: str) -> None:
        if self.verbose >= 1:
            self._print(f"[tune] {text}")

    def trial_status(self, trial: Trial, detail: str = "") -> None:
        if self.verbose < (1 if detail or trial.status == ERROR else 2):
            return
        extra = f": {detail}" if detail else ""
        if trial.status == "PENDING":
            extra = f" ({_short(trial.config)})"
        self._print(f"[tune] {trial.trial_name} {trial.status}{extra}")

    def result(self, trial: Trial, result: dict[str, Any]) -> None:
        if self.verbose < 3:
            return
        keys = [k for k in (self.metric, *_SHOWN) if k and k in result]
        shown = ", ".join(f"{k}={_fmt(result[k])}" for k in keys)
        self._print(f"[tune] {trial.trial_name} result: {shown}")

    def best(self, trials: Iterable[Trial]) -> tuple[Trial, float] | None:
        if self.metric is None or self.mode not in ("min", "max"):
            return None
        scored = [
            (t, float(t.last_result[self.metric]))
            for t in trials
            if isinstance(t.last_result.get(self.metric), int | float)
        ]
        if not scored:
            return None
        pick = max if self.mode == "max" else min
        return pick(scored, key=lambda pair: pair[1])

    def status_line(self, trials: list[Trial]) -> str:
        counts = Counter(t.status for t in trials)
        parts = [f"{n} {status}" for status, n in sorted(counts.items())]
        total, free = actorrt.cluster_resources(), actorrt.available_resources()
        used = ", ".join(
            f"{_fmt(total[k] - free.get(k, 0.0))}/{_fmt(total[k])} {k}"
            for k in ("CPU", "GPU")
            if k in total
        )
        line = f"[tune] {time.monotonic() - self._started:.0f}s: {' | '.join(parts)}"
        line += f" | using {used}" if used else ""
        best = self.best(trials)
        if best is not None:
            line += f" | best {self.metric}={_fmt(best[1])} ({best[0].trial_name})"
        waiting = actorrt.pending_requests()
        if waiting:
            line += f" | {len(waiting)} waiting for resources: {waiting[0].reason}"
        return line

    def status(self, trials: list[Trial]) -> None:
        if self.verbose >= 1:
            self._print(self.status_line(trials))

    def final(self, trials: list[Trial], path: str) -> None:
        if self.verbose < 1:
            return
        self._print(self.status_line(trials))
        rows = []
        for t in trials[:_TABLE_ROWS]:
            metrics = [_fmt(t.last_result.get(k, "")) for k in (self.metric, *_SHOWN) if k]
            rows.append([t.trial_name, t.status, *metrics, _short(t.config, 40)])
        header = ["trial", "status", *[k for k in (self.metric, *_SHOWN) if k], "config"]
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            self._print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
        if len(trials) > _TABLE_ROWS:
            self._print(f"... and {len(trials) - _TABLE_ROWS} more trials")
        errored = [t for t in trials if t.status == ERROR]
        for t in errored:
            self._print(f"[tune] {t.trial_name} errored:\n{t.error_text.rstrip()}")
        self._print(f"[tune] results in {path}")
