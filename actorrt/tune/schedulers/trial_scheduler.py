"""Trial schedulers: decide, at each result, whether a trial goes on.

``on_trial_result`` returns ``CONTINUE``, ``PAUSE`` or ``STOP``; a stopped trial ends as
TERMINATED (it was not an error), a paused one is resumed later from its checkpoint. Hooks
receive the controller as their first argument, as in Ray Tune, and run on the controller's
event loop: keep them quick.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FIFOScheduler", "TrialScheduler"]


class TrialScheduler:
    """The base of every scheduler (Ray Tune's interface)."""

    CONTINUE = "CONTINUE"
    PAUSE = "PAUSE"
    STOP = "STOP"

    def __init__(self, metric: str | None = None, mode: str | None = None) -> None:
        if mode not in (None, "min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        self._metric = metric
        self._mode = mode

    @property
    def metric(self) -> str | None:
        return self._metric

    @property
    def mode(self) -> str | None:
        return self._mode

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Take the experiment's metric and mode where none was given here."""
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        return True

    def on_trial_add(self, controller: Any, trial: Any) -> None:
        """A trial was created."""

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> str:
        """A trial reported ``result``; return ``CONTINUE`` or ``STOP``."""
        return self.CONTINUE

    def on_trial_complete(self, controller: Any, trial: Any, result: dict[str, Any]) -> None:
        """A trial ended normally (finished or stopped)."""

    def on_trial_error(self, controller: Any, trial: Any) -> None:
        """A trial ended with an error."""

    def on_trial_remove(self, controller: Any, trial: Any) -> None:
        """A trial was removed."""

    def debug_string(self) -> str:
        return type(self).__name__


class FIFOScheduler(TrialScheduler):
    """Runs every trial to its end, in the order they were made (the default)."""
