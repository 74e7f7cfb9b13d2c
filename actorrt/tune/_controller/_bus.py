"""The report bus: the inline actor trials report to.

Each ``tune.report`` in a trial process is one ask to the bus, an inline actor on the
driver's event loop; its answer is the controller's decision (``CONTINUE`` or ``STOP``).
Where only the experiment's end can stop a trial, the trial reads those answers up to
:data:`REPORTS_AHEAD` reports later rather than waiting at each. The
bus holds the controller object itself (inline actors take their constructor arguments as
they are), so a report costs one cross-process round trip and no extra hop.
"""

from __future__ import annotations

import os
from typing import Any, Protocol, cast

import actorrt

from .._worker._trial_actor import TrialDriver

__all__ = [
    "REPORTS_AHEAD", "ReportBusActor", "ResultSink", "TrialDriverActor", "reports_ahead_setting",
]

# How many reports a trial sends ahead of their answers where nothing decides on its results
# but the experiment's end (no scheduler, no stop criterion); 0 makes each report wait for
# its answer, as every report does in Ray. ``ACTORRT_TUNE_REPORTS_AHEAD`` sets it.
REPORTS_AHEAD = 16
REPORTS_AHEAD_ENV = "ACTORRT_TUNE_REPORTS_AHEAD"


def reports_ahead_setting() -> int:
    """:data:`REPORTS_AHEAD`, or ``$ACTORRT_TUNE_REPORTS_AHEAD`` when set.

    Raises:
        ValueError: the variable is not a whole number from 0 up.
    """
    text = os.environ.get(REPORTS_AHEAD_ENV, "").strip()
    if not text:
        return REPORTS_AHEAD
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(
            f"{REPORTS_AHEAD_ENV}={text!r}: expected a whole number from 0 up (0: each "
            "report waits for the controller's answer)"
        )
    return value


class ResultSink(Protocol):
    """What the bus hands reports to (the controller, which sits above this module)."""

    def on_result(self, trial_id: str, result: dict[str, Any], checkpoint: str | None) -> str:
        """Record a trial's report; answer the decision (``CONTINUE``, ``STOP``, ...)."""
        ...

    def on_checkpoint(self, trial_id: str, path: str) -> None:
        """Record a checkpoint a trial saved outside a report."""
        ...


@actorrt.actor
class ReportBus:
    """Inline actor in the driver: trials report to it; it answers the decision."""

    def __init__(self, controller: ResultSink) -> None:
        self.controller = controller

    def report(self, trial_id: str, result: dict[str, Any], checkpoint: str | None) -> str:
        return self.controller.on_result(trial_id, result, checkpoint)

    def checkpoint(self, trial_id: str, path: str) -> None:
        self.controller.on_checkpoint(trial_id, path)


# mypy does not apply class decorators' return types: name the actor classes as such.
TrialDriverActor = cast("actorrt.ActorClass[TrialDriver]", TrialDriver)
ReportBusActor = cast("actorrt.ActorClass[ReportBus]", ReportBus)
