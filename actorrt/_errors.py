"""The exceptions actorrt raises, in one tree.

::

    ActorrtError
    ├── ActorError                      something went wrong with an actor
    │   ├── ActorDiedError              the actor has ended (stop, kill, crash, parent, shutdown)
    │   ├── ActorNotFoundError          no actor has that name (also a ValueError, as in Ray)
    │   ├── MailboxFullError            a plain tell found the mailbox full
    │   └── AskTimeoutError             an ask got no answer in time (also a TimeoutError)
    ├── RemoteError                     an exception from another process that could not be
    │                                   rebuilt here (its type name, message and traceback)
    ├── RuntimeStateError               the runtime is not in a state for the call (a RuntimeError)
    │   ├── NoRuntimeError              no runtime is running in this process
    │   ├── RuntimeAlreadyRunningError  a second runtime where only one may run
    │   └── RuntimeClosedError          a ref or call whose runtime has shut down
    └── ResourceError                   the resource broker refused or failed a request
        ├── InfeasibleResourceError     can never be granted (also a ValueError)
        └── ResourceDeadlockError       waits on what only its own holder's end would free

Where each failure goes is decided in one place, ``actorrt._core._cell``; its module docstring
draws the routing.
"""

from __future__ import annotations

__all__ = [
    "ActorDiedError",
    "ActorError",
    "ActorNotFoundError",
    "ActorrtError",
    "AskTimeoutError",
    "DeadlockError",
    "InfeasibleResourceError",
    "MailboxFullError",
    "NoRuntimeError",
    "RemoteError",
    "ResourceDeadlockError",
    "ResourceError",
    "RuntimeAlreadyRunningError",
    "RuntimeClosedError",
    "RuntimeStateError",
]


class ActorrtError(Exception):
    """The root of every exception actorrt raises on its own account."""


class ActorError(ActorrtError):
    """Something went wrong with an actor."""


class ActorDiedError(ActorError):
    """The actor has ended, so the call cannot be (or was not) processed.

    Attributes:
        actor: a short description of the actor (class, id and name).
        reason: one of ``"stopped"``, ``"killed"``, ``"crashed"``, ``"parent ended"``,
            ``"runtime shut down"``, ``"process died"``.
        cause: the exception that crashed it, when it crashed.
        exitcode: the exit code of its worker process, when that process exited.
        signal: the signal that ended its worker process, when one did.
    """

    def __init__(
        self,
        message: str,
        *,
        actor: str = "",
        reason: str = "",
        cause: BaseException | None = None,
        exitcode: int | None = None,
        signal: int | None = None,
    ) -> None:
        super().__init__(message)
        self.actor = actor
        self.reason = reason
        self.cause = cause
        self.exitcode = exitcode
        self.signal = signal

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_died,
            (str(self), self.actor, self.reason, self.cause, self.exitcode, self.signal),
        )


def _rebuild_died(
    message: str,
    actor: str,
    reason: str,
    cause: BaseException | None,
    exitcode: int | None,
    signal: int | None,
) -> ActorDiedError:
    return ActorDiedError(
        message, actor=actor, reason=reason, cause=cause, exitcode=exitcode, signal=signal
    )


class ActorNotFoundError(ActorError, ValueError):
    """No live actor is registered under the name asked for."""


class MailboxFullError(ActorError):
    """A plain ``tell`` found the actor's mailbox full; ``await ref.m.tell_wait(...)`` waits."""


class AskTimeoutError(ActorError, TimeoutError):
    """An ask got no answer within its timeout. The message itself still runs."""


class RuntimeStateError(ActorrtError, RuntimeError):
    """The runtime is not in a state that allows the call."""


class NoRuntimeError(RuntimeStateError):
    """No actorrt runtime is running in this process."""


class RuntimeAlreadyRunningError(RuntimeStateError):
    """A runtime is already running where only one may run."""


class RuntimeClosedError(RuntimeStateError):
    """The runtime that a ref or call belongs to has shut down."""


class ResourceError(ActorrtError):
    """The resource broker refused or failed a request."""


class InfeasibleResourceError(ResourceError, ValueError):
    """The request can never be granted: nothing in the cluster (or group) is that large."""


class DeadlockError(ActorrtError):
    """A wait that can never end: actors that wait on each other (an ask cycle), or on
    resources only their own ends would free (:class:`ResourceDeadlockError`)."""


class ResourceDeadlockError(ResourceError, DeadlockError):
    """The request waits on resources that can only be freed once its own holder ends."""


class RemoteError(ActorrtError):
    """An exception raised on the other side that could not be rebuilt here.

    Its class could not be pickled there or unpickled here (missing module, constructor that
    refuses its pickled arguments, pickle not allowed on the connection).

    Attributes:
        type_name: the original exception's ``module.QualifiedName``.
        remote_message: ``str()`` of the original exception.
        remote_traceback: the original traceback, formatted, as text.
    """

    def __init__(self, type_name: str, remote_message: str, remote_traceback: str = "") -> None:
        super().__init__(f"{type_name}: {remote_message}")
        self.type_name = type_name
        self.remote_message = remote_message
        self.remote_traceback = remote_traceback

    def __reduce__(self) -> tuple[object, ...]:
        return (RemoteError, (self.type_name, self.remote_message, self.remote_traceback))
