"""An actor's lifecycle: its states, the transitions between them, and the words of its end.

Every kind of actor (an inline cell, the actor inside a worker process, the owner's side of a
worker-process actor) goes through the same states::

    STARTING ──> RUNNING <──> RESTARTING
        │           │             │
        └───────────┴──> STOPPING ┴──> DEAD        (and any live state ──> DEAD)

========== ====================================================================
STARTING   the first incarnation is being constructed; messages wait for it
RUNNING    an incarnation serves its mailbox
RESTARTING a crash is being handled (and backed off) before the next incarnation;
           messages wait for it
STOPPING   a stop or a kill was asked for: nothing new is taken
DEAD       ended for good; the :class:`~actorrt.ActorDiedError` says why
========== ====================================================================

Which end was asked for (``DeathReason.STOPPED`` or ``KILLED``) is recorded with the step into
STOPPING; a stop may still become a kill (``stop(grace=)``), never the other way round. The
error an actor dies with is recorded with the step into DEAD. Its words are built in one place,
:func:`death_text`, for every reason.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from enum import Enum, StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from .._errors import DeathReason
from ._waits import WaitGraph

if TYPE_CHECKING:
    from ._turns import Turns

__all__ = [
    "ACCEPTING",
    "PARKED",
    "RESTART_BACKOFF_INITIAL",
    "RESTART_BACKOFF_MAX",
    "ActorServices",
    "Backoff",
    "Crash",
    "Parked",
    "ProcessExit",
    "State",
    "check_transition",
    "death_text",
]

# Restart backoff by default: 50 ms, doubling per restart, at most 5 s; an incarnation that
# ran for 60 s before it crashed counts as healthy and the doubling starts again.
RESTART_BACKOFF_INITIAL = 0.05
RESTART_BACKOFF_MAX = 5.0
RESTART_BACKOFF_RESET = 60.0


class State(StrEnum):
    """Where an actor is in its life (a ``str`` enum: ``actorrt status`` shows the value)."""

    STARTING = "starting"
    RUNNING = "running"
    RESTARTING = "restarting"
    STOPPING = "stopping"
    DEAD = "dead"


# The states in which an actor takes new messages (they may wait for its next incarnation).
ACCEPTING = frozenset({State.STARTING, State.RUNNING, State.RESTARTING})

_NEXT: dict[State, frozenset[State]] = {
    State.STARTING: frozenset({State.RUNNING, State.STOPPING, State.DEAD}),
    State.RUNNING: frozenset({State.RESTARTING, State.STOPPING, State.DEAD}),
    State.RESTARTING: frozenset({State.RUNNING, State.STOPPING, State.DEAD}),
    State.STOPPING: frozenset({State.STOPPING, State.DEAD}),  # a stop escalated to a kill
    State.DEAD: frozenset(),
}


def check_transition(
    describe: Callable[[], str],
    old: State,
    new: State,
    asked: DeathReason | None,
    ending: DeathReason | None,
) -> None:
    """Fail (an ``AssertionError``: a bug in actorrt) unless ``old -> new`` is a lifecycle
    transition; ``asked`` is the end already asked for, ``ending`` the one this step asks.
    ``describe`` names the actor, only when it fails."""
    assert new in _NEXT[old], f"actor {describe()}: no lifecycle transition from {old} to {new}"
    if new is State.STOPPING:
        assert ending in (DeathReason.STOPPED, DeathReason.KILLED), (
            f"actor {describe()}: {old} -> {new} must say whether it stops or is killed, "
            f"not {ending}"
        )
        assert old is not State.STOPPING or (
            asked is DeathReason.STOPPED and ending is DeathReason.KILLED
        ), f"actor {describe()}: {old} ({asked}) -> {new} ({ending}) is not a stop becoming a kill"


class Backoff:
    """The delays before an actor's restarts: ``first`` seconds, doubling with each crash up
    to ``most``; a crash after an incarnation ran ``reset_after`` seconds or more (a healthy
    period) starts again from ``first``, so an actor that crashes once a day does not wait
    the longest delay for the rest of its life."""

    __slots__ = ("first", "most", "reset_after", "step")

    def __init__(self, first: float, most: float, reset_after: float) -> None:
        self.first = first
        self.most = most
        self.reset_after = reset_after
        self.step = 0

    def next_delay(self, ran_for: float | None) -> float:
        """The delay before the next incarnation, after one that ran ``ran_for`` seconds
        (``None``: it crashed while starting)."""
        if ran_for is not None and ran_for >= self.reset_after:
            self.step = 0
        delay = min(self.first * 2.0**self.step, self.most)
        self.step += 1
        return delay


# What an actor's code raises to end its actor instead of answering: as for a program or a
# thread, these two are exits, not errors. The caller (a spawner too) gets the crash's
# ActorDiedError, naming it. Any other exception, a BaseException that is not an Exception
# too (pytest's ``fail`` and ``skip``, a library's own), reaches the caller with its own type,
# and after a method the actor goes on.
ENDS_ACTOR = (SystemExit, KeyboardInterrupt)


class Crash(Exception):
    """An incarnation ended by an error; carries it to the supervisor.

    Attributes:
        cause: the exception that crashed it.
        where: where it happened, for the log (``"its constructor"``, ``"m() (called by
            tell)"``, ``"its worker process"``).
        error: the actor's death error when the kind already knows it (a worker process
            that died says how); otherwise the supervisor builds one from ``cause``.
    """

    def __init__(self, cause: BaseException, where: str, error: Any = None) -> None:
        super().__init__(where)
        self.cause = cause
        self.where = where
        self.error = error


@dataclasses.dataclass(frozen=True)
class ProcessExit:
    """How an actor's worker process ended, for the words of a ``PROCESS_DIED`` end."""

    pid: int | None
    code: int  # the exit code, or minus the signal number
    how: str  # the exit in words ("exit code 1", "signal SIGKILL")
    asked: bool  # actorrt itself killed it

    @property
    def signal(self) -> int | None:
        return -self.code if self.code < 0 else None


_ENDED = {
    DeathReason.STOPPED: "was stopped",
    DeathReason.KILLED: "was killed",
    DeathReason.PARENT_ENDED: "ended because its parent ended",
    DeathReason.RUNTIME_SHUT_DOWN: "ended because its runtime shut down",
    DeathReason.GROUP_REMOVED: "ended because its placement group was removed",
    DeathReason.NODE_LOST: "ended because the node it ran on was lost",
}


def death_text(
    actor: str,
    reason: DeathReason,
    cause: BaseException | None = None,
    *,
    restarts: int = 0,
    max_restarts: int = 0,
    restarting: bool = False,
    process: ProcessExit | None = None,
) -> str:
    """The message of an actor's :class:`~actorrt.ActorDiedError`, for every reason.

    ``restarting``: the text for messages queued at a crash after which the actor restarts.
    ``process``: how its worker process ended (for ``PROCESS_DIED``).
    """
    if reason is DeathReason.CRASHED and cause is not None:
        limit = "unlimited" if max_restarts < 0 else str(max_restarts)
        text = (
            f"crashed with {type(cause).__name__}: {cause} "
            f"(after {restarts} restart(s), max_restarts={limit})"
        )
        if restarting:
            text += (
                "; the message was queued at the crash and is dropped, the actor restarts "
                "and takes new messages"
            )
    elif reason is DeathReason.PROCESS_DIED and process is not None:
        text = f"its worker process {process.pid or '?'} died ({process.how})"
        if process.signal == 9 and not process.asked:
            text += (
                "; a SIGKILL nobody asked for is often the kernel's out-of-memory killer "
                "(check `dmesg`, or give the actor more memory)"
            )
    else:
        text = _ENDED.get(reason, str(reason))
        if cause is not None:
            text += f" (its on_stop raised {type(cause).__name__}: {cause})"
    return f"actor {actor} {text}"



class Parked(Enum):
    """What an incarnation's serving returns when it went idle and let its task end."""

    PARKED = "parked"


PARKED = Parked.PARKED


class ActorServices(Protocol):
    """What an actor's lifecycle asks of the runtime that runs it (the core never imports
    the runtime; ``actorrt._runtime._root.Runtime`` is one of these)."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop every actor of this runtime runs on."""
        ...

    @property
    def closed(self) -> bool:
        """Whether the runtime has shut down."""
        ...

    @property
    def waits(self) -> WaitGraph:
        """Who awaits whom: the asks actors of this runtime wait on."""
        ...

    @property
    def turns(self) -> Turns:
        """The idle inline actors a message has reached, to be served in one callback."""
        ...

    def children_ending(self, parent: Any) -> None:
        """``parent``'s children are being ended: withdraw the spawns it waits for."""
        ...

    def children_may_start(self, parent: Any) -> None:
        """``parent`` restarts: its next incarnation may spawn children again."""
        ...

    def forget(self, cell: Any) -> None:
        """``cell`` has ended: drop it from the registries and release what it held."""
        ...
