"""A trial's lifecycle: its states (Ray's names), the transitions between them, and how an
attempt that is still running has been asked to end.

The controller moves a trial through these states, and only through :func:`check_transition`
(``Trial.set_status``)::

    PENDING ──> RUNNING ──> PAUSED ──> PENDING      (a scheduler pauses, then resumes it)
       │           │  └───> PENDING                 (new resources; its node was lost)
       │           ├──────> TERMINATED              (ended, or stopped)
       └───────────┴──────> ERROR                   (failed past its retries)
                 PAUSED ──> TERMINATED              (stopped while paused)

========== ===========================================================================
PENDING    waiting for its resources (or for its previous actor to wind down)
RUNNING    its trial-driver actor runs an attempt
PAUSED     a scheduler paused it: its actor gave its resources back; it resumes from its
           latest checkpoint
TERMINATED ended normally or was stopped
ERROR      failed, and is not retried any more
========== ===========================================================================

A trial's state may change while the attempt it started still winds down (a paused trial's
actor saves and stops after the state is already ``PAUSED``). What that attempt's end then
leads to is its :class:`AttemptEnd`, one value rather than a flag per case.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["AttemptEnd", "TrialState", "check_transition"]


class TrialState(StrEnum):
    """Where a trial is (a ``str`` enum: equal to Ray's status strings, as files store them)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"
    ERROR = "ERROR"


class AttemptEnd(StrEnum):
    """What the end of a trial's running attempt leads to, decided before it ends."""

    PAUSE = "pause"  # a scheduler paused it: nothing more until it is resumed
    RESIZE = "resize"  # it restarts in the new placement group reserved for it
    RELAUNCH = "relaunch"  # it runs again once this actor is gone (resumed; node lost)


_NEXT: dict[TrialState, frozenset[TrialState]] = {
    TrialState.PENDING: frozenset(
        {TrialState.RUNNING, TrialState.TERMINATED, TrialState.ERROR}
    ),
    TrialState.RUNNING: frozenset(
        {TrialState.PAUSED, TrialState.PENDING, TrialState.TERMINATED, TrialState.ERROR}
    ),
    TrialState.PAUSED: frozenset({TrialState.PENDING, TrialState.TERMINATED}),
    TrialState.TERMINATED: frozenset(),
    TrialState.ERROR: frozenset(),
}


def check_transition(trial: str, old: TrialState, new: TrialState) -> None:
    """Fail (an ``AssertionError``: a bug in the controller) unless ``old -> new`` is a
    step of the lifecycle; staying in a state is always allowed."""
    assert new is old or new in _NEXT[old], (
        f"trial {trial}: no lifecycle transition from {old} to {new}"
    )
