"""The report bus: the inline actor trials report to.

Each ``tune.report`` in a trial process is one ask to the bus, an inline actor on the
driver's event loop; its answer is the controller's decision (``CONTINUE`` or ``STOP``). The
bus holds the controller object itself (inline actors take their constructor arguments as
they are), so a report costs one cross-process round trip and no extra hop.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

import actorrt

from .._worker._trial_actor import TrialDriver

__all__ = ["ReportBusActor", "ResultSink", "TrialDriverActor"]


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
