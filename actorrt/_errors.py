"""The exceptions actorrt raises, in one tree.

::

    ActorrtError
    ├── ActorError                      something went wrong with an actor
    │   ├── ActorDiedError              the actor has ended; ``.reason`` is a DeathReason
    │   ├── ActorNotFoundError          no actor has that name (also a ValueError, as in Ray)
    │   ├── MailboxFullError            a plain tell found the mailbox full
    │   └── AskTimeoutError             an ask got no answer in time (also a TimeoutError)
    ├── RemoteError                     an exception from another process that could not be
    │                                   rebuilt here (its type name, message and traceback)
    ├── RuntimeStateError               the runtime is not in a state for the call (a RuntimeError)
    │   ├── NoRuntimeError              no runtime is running in this process
    │   ├── RuntimeAlreadyRunningError  a second runtime where only one may run
    │   └── RuntimeClosedError          a ref or call whose runtime has shut down
    ├── ResourceError                   the resource broker refused or failed a request
    │   ├── InfeasibleResourceError     can never be granted (also a ValueError)
    │   ├── ResourceDeadlockError       waits on what only its own holder's end would free
    │   ├── NvmlUnavailableError        NVML cannot be loaded or started (also a RuntimeError)
    │   ├── HeadLostError               the cluster's head is gone (also a ConnectionError)
    │   └── DriverDroppedError          the head dropped this driver (also a ConnectionError)
    ├── DeadlockError                   a wait that can never end (an ask cycle; the parent of
    │                                   ResourceDeadlockError too)
    └── WireError                       a connection between processes failed
        ├── ConnectionLostError         the connection ended (also a ConnectionError)
        ├── AuthenticationError         the peer did not prove the secret (a ConnectionError)
        ├── ProtocolVersionError        the peer speaks another wire protocol version
        ├── FrameTooLargeError          a frame over the connection's limit (a ValueError)
        ├── MalformedMessageError       a message of an unknown type or shape (a ValueError)
        └── PickleRefusedError          pickled data from an unauthenticated peer (a ValueError)

The libraries add their leaves under the same root: ``actorrt.tune.TuneError`` and
``actorrt.train.TrainingFailedError`` (with ``WorkerGroupError`` and ``ControllerError``) are
``ActorrtError`` subclasses too, as are ``Checkpoint.from_directory``'s error for a path that
is no directory (also a ``FileNotFoundError`` and a ``ValueError``) and the CLI's errors, so
``except actorrt.ActorrtError`` catches everything the package raises on its own account.
Outside the tree on purpose: ``tune.report``'s stop signal, a ``BaseException`` that user code
must not catch.

Where each failure goes is decided in one place, ``actorrt._core._supervision``; its module
docstring draws the routing.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "ActorDiedError",
    "ActorError",
    "ActorNotFoundError",
    "ActorrtError",
    "AskTimeoutError",
    "AuthenticationError",
    "ConnectionLostError",
    "DeadlockError",
    "DeathReason",
    "DriverDroppedError",
    "FrameTooLargeError",
    "HeadLostError",
    "InfeasibleResourceError",
    "MailboxFullError",
    "MalformedMessageError",
    "NoRuntimeError",
    "NvmlUnavailableError",
    "PickleRefusedError",
    "ProtocolVersionError",
    "RemoteError",
    "ResourceDeadlockError",
    "ResourceError",
    "RuntimeAlreadyRunningError",
    "RuntimeClosedError",
    "RuntimeStateError",
    "WireError",
]


class ActorrtError(Exception):
    """The root of every exception actorrt raises on its own account."""


class ActorError(ActorrtError):
    """Something went wrong with an actor."""


class DeathReason(StrEnum):
    """Why an actor ended: :attr:`ActorDiedError.reason`.

    A ``str`` enum, so ``error.reason == "crashed"`` holds for ``DeathReason.CRASHED``.
    """

    STOPPED = "stopped"  # asked to stop: queued messages ran, then on_stop
    KILLED = "killed"  # killed: the current message was cancelled, queued ones failed
    CRASHED = "crashed"  # an error ended it and no restart was left
    PARENT_ENDED = "parent ended"  # a child never outlives its parent
    RUNTIME_SHUT_DOWN = "runtime shut down"  # its runtime (or the runtime owning it) ended
    PROCESS_DIED = "process died"  # its worker process exited or was killed by a signal
    GROUP_REMOVED = "placement group removed"  # the group holding its grant was removed
    NODE_LOST = "node lost"  # the node it ran on died or was cut off
    UNKNOWN = "unknown"  # an end this process did not see (the actor no longer exists)


class ActorDiedError(ActorError):
    """The actor has ended, so the call cannot be (or was not) processed.

    Attributes:
        actor: a short description of the actor (class, id and name).
        reason: a :class:`DeathReason` (a ``str`` enum: ``"stopped"``, ``"killed"``,
            ``"crashed"``, ``"parent ended"``, ``"runtime shut down"``, ``"process died"``,
            ``"placement group removed"``, ``"node lost"``, ``"unknown"``).
        cause: the exception that crashed it, when it crashed.
        exitcode: the exit code of its worker process, when that process exited.
        signal: the signal that ended its worker process, when one did.
    """

    def __init__(
        self,
        message: str,
        *,
        actor: str = "",
        reason: DeathReason | str = DeathReason.UNKNOWN,
        cause: BaseException | None = None,
        exitcode: int | None = None,
        signal: int | None = None,
    ) -> None:
        super().__init__(message)
        self.actor = actor
        # A value outside the enum is a bug here, not the user's: it fails loudly.
        self.reason = DeathReason(reason or DeathReason.UNKNOWN)
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
    """An ask got no answer within its timeout. The ask is withdrawn: a message the actor
    had not begun never runs; one already running runs to its end."""


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


class HeadLostError(ResourceError, ConnectionError):
    """The cluster's head cannot be reached any more: resource requests fail until the
    program connects to a head again (running actors keep running)."""


class DriverDroppedError(ResourceError, ConnectionError):
    """The cluster's head dropped this driver (it heard nothing from it in time) and
    released everything it held: resource requests fail from then on, and its actors on
    the cluster's nodes end. The head itself is fine; the message says why it dropped it."""


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


class WireError(ActorrtError):
    """A connection between processes failed."""


class ConnectionLostError(WireError, ConnectionError):
    """The connection ended; every request still waiting for a reply fails with this.

    Attributes:
        reason: why it ended, in words.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"connection lost: {reason}")
        self.reason = reason

    def __reduce__(self) -> tuple[object, ...]:
        return (ConnectionLostError, (self.reason,))


class AuthenticationError(WireError, ConnectionError):
    """The peer did not prove that it knows the runtime's secret (or speaks another protocol)."""


class ProtocolVersionError(WireError, ConnectionError):
    """The peer speaks another version of the wire protocol: both ends must run the same
    actorrt release."""


class FrameTooLargeError(WireError, ValueError):
    """A frame is larger than the connection's ``max_frame_size``."""


class MalformedMessageError(WireError, ValueError):
    """A message arrived with an unknown type, the wrong number of fields, or a field of the
    wrong type; the error names what arrived and what was expected."""


class PickleRefusedError(WireError, ValueError):
    """A pickled value arrived on a codec that does not allow pickle (an unauthenticated peer)."""


class NvmlUnavailableError(ResourceError, RuntimeError):
    """NVML could not be loaded or initialised (no NVIDIA driver, or a broken one)."""
