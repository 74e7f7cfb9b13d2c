"""The messages processes exchange: one typed class per operation, and the protocol version.

(The wire form of a ref inside a message is in :mod:`actorrt._wire._refs`.)

Every request and notification between a runtime and its worker processes, and between
``actorrt status`` and a runtime's status socket, is one of the classes below (a
:class:`~typing.NamedTuple`: typed fields, immutable, and as cheap to build and to decode as
the plain tuples they replace). On the wire a message is a msgpack array, its type's tag
first and then its fields in order, in a frame flagged :data:`~actorrt._wire._codec.
FLAG_MESSAGE`; the values inside (actor classes, arguments, exceptions, refs) travel through
the codec as any value does. Replies are plain values, not messages.

:data:`PROTOCOL_VERSION` names this message set and its encoding. Both ends of a connection
state it in the handshake (:mod:`actorrt._wire._auth`), and a peer that states another one is
refused there, before any frame is decoded. Any change to a message (a field added, removed
or retyped, a tag reused) changes the version. ``docs/wire.md`` has the table of messages.

Decoding checks a message's tag and its number of fields (:func:`from_wire`); an unknown tag
or a wrong count is a :class:`MalformedMessage` (a ``ValueError``) naming what arrived. The
types of the fields are checked by the dispatcher (:mod:`actorrt._wire._dispatcher`) before a
handler sees them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple, TypeAlias

from .._errors import MalformedMessageError

__all__ = [
    "PROTOCOL_VERSION",
    "AskDeadlock",
    "Beat",
    "Blocked",
    "Call",
    "CancelCall",
    "Claim",
    "ClusterStatus",
    "Deadlocked",
    "Deny",
    "Died",
    "GetActor",
    "Grant",
    "GroupReady",
    "GroupRemove",
    "Hello",
    "JoinDriver",
    "JoinNode",
    "Kill",
    "KillWorker",
    "Leave",
    "Locate",
    "MalformedMessage",
    "Message",
    "NodeDown",
    "NodeUp",
    "PeerEndpoint",
    "Ping",
    "ReleaseHolder",
    "ReserveGroup",
    "Restarted",
    "Retire",
    "Revoke",
    "SetParent",
    "Spawn",
    "SpawnCancel",
    "SpawnProcess",
    "Stall",
    "StartWorker",
    "Status",
    "Stop",
    "Tell",
    "View",
    "WaitEdge",
    "WaitStopped",
    "Withdraw",
    "WorkerExit",
    "WorkerOutput",
    "check_fields",
    "from_wire",
    "tag_of",
]

#: The version of the message set and its encoding. Stated in the handshake; a peer with
#: another version is refused. Version 1 was the positional-tuple protocol of earlier
#: releases (its handshake magic was ``b"actorrt\x01"``); version 2 had no batch frames;
#: version 3 had no cluster messages; version 4 had no `CancelCall`, `Retire` nor `Leave`,
#: and heartbeat datagrams of 4 fields; version 5's `WorkerExit` had no `why`; version 6
#: had no `Locate` nor `PeerEndpoint` (workers did not call each other directly); version 7
#: sent every numpy array in C order (no Fortran layout bit in the array record); version 8's
#: `Kill` had no `reason`. At most 255.
PROTOCOL_VERSION: Final = 9


# A message that arrived with an unknown type, the wrong number of fields, or a field of the
# wrong type (one exception tree: it lives in actorrt._errors).
MalformedMessage = MalformedMessageError


# ------------------------------------------------------------------------ actor messages


class Call(NamedTuple):
    """Ask an actor (request, either side). Reply: the method's result or its exception."""

    actor_id: str
    method: str
    args: list[Any]  # a list, not a tuple: msgpack packs lists natively
    kwargs: dict[str, Any]


class Tell(NamedTuple):
    """Tell an actor (notification, either side). A full mailbox pauses reading."""

    actor_id: str
    method: str
    args: list[Any]
    kwargs: dict[str, Any]


class CancelCall(NamedTuple):
    """The caller of a ``Call`` on this connection gave up (notification, either side): if
    the message is still queued, it is dropped unrun and gets no reply."""

    actor_id: str
    request_id: int  # the Call's request id on this connection


class Stop(NamedTuple):
    """Stop an actor (request, either side). Reply: its ``ActorDiedError``."""

    actor_id: str
    grace: float | None  # seconds before a stop that has not finished becomes a kill


class Kill(NamedTuple):
    """Kill an actor (request, either side). Reply: its ``ActorDiedError``."""

    actor_id: str
    reason: str | None  # a DeathReason value the actor is ended for (its node lost, ...)


class WaitStopped(NamedTuple):
    """Wait for an actor's end (request, worker to owner). Reply: its ``ActorDiedError``."""

    actor_id: str


# ---------------------------------------------------------------------- worker lifecycle


class Spawn(NamedTuple):
    """Construct the actor this worker hosts (request, owner to worker). Reply: ``None``."""

    actor_id: str
    actor_class: object  # an ActorClass: checked by the receiver
    args: list[Any]
    kwargs: dict[str, Any]
    restart_count: int
    resources: dict[str, float] | None  # the actor's grant; None: it has none
    # Its placement group, if any: (group id, bundle specs, strategy, bundle index).
    group: tuple[str, list[dict[str, float]], str, int | None] | None


class SpawnProcess(NamedTuple):
    """Start a worker-process actor for an actor of the worker (request, worker to owner).
    Reply: the new actor's ref."""

    actor_class: object  # an ActorClass: checked by the receiver
    args: list[Any]
    kwargs: dict[str, Any]
    chain: list[tuple[str, str]]  # the spawner and its ancestors there: (id, description)
    bounded: bool  # the worker bounds its wait (asyncio.wait_for): no wait edge
    token: str  # names this spawn for SpawnCancel


class SpawnCancel(NamedTuple):
    """The worker gave that spawn up: withdraw it (notification, worker to owner)."""

    token: str


class GetActor(NamedTuple):
    """Look a name up in the owner's registry (request, worker to owner). Reply: a ref."""

    name: str


class Hello(NamedTuple):
    """A new worker introduces itself (request, worker to owner). Reply: ``None``, or an
    error when the owner did not start that worker."""

    worker_id: str
    pid: int


class Ping(NamedTuple):
    """Liveness check (request, owner to worker), answered at once. Reply: ``None``."""


class Locate(NamedTuple):
    """Where a worker may reach a process actor directly (request, worker to owner). Reply:
    ``[worker id, endpoint]`` (the endpoint as :class:`PeerEndpoint` answers it), or
    ``None``: keep calling through the owner. The owner asks the actor's worker for its
    endpoint in line behind the calls it has passed on to it, so the reply also says that
    every call sent through the owner before the ``Locate`` has reached that worker."""

    actor_id: str
    transport: str  # what the asking worker can connect over: "unix" or "tcp"


class PeerEndpoint(NamedTuple):
    """Open (once) and say where other workers of this runtime connect to this one directly
    (request, owner to worker). Reply: ``{"unix": path}`` or ``{"tcp": [host, port]}``, or
    ``None`` when this worker takes no direct connections."""


class Died(NamedTuple):
    """The hosted actor ended without being asked to (notification, worker to owner)."""

    actor_id: str
    error: BaseException  # an ActorDiedError, or what is left of one that lost its type


class Restarted(NamedTuple):
    """The hosted actor crashed and restarts in its worker (notification, worker to owner)."""

    actor_id: str


class Retire(NamedTuple):
    """The hosted actor ended and left threads or processes behind that its worker could not
    end: the owner must not reuse the worker (notification, worker to owner, sent before the
    actor's end is reported)."""

    actor_id: str
    left: str  # what was left, in words


# ------------------------------------------------------------------ waits and the broker


class WaitEdge(NamedTuple):
    """An actor in the worker began or ended awaiting another (notification, worker to
    owner), for the owner's deadlock check."""

    waiter: str
    target: str
    added: bool
    serial: bool  # the waiter runs one message at a time (max_concurrency=1)


class AskDeadlock(NamedTuple):
    """That wait can never end: fail it with ``error`` (notification, owner to worker)."""

    waiter: str
    target: str
    error: BaseException  # a DeadlockError


class ReserveGroup(NamedTuple):
    """``placement_group()`` in a worker: reserve it (request, worker to owner). Reply:
    ``None`` once submitted; an infeasible group is the error."""

    group_id: str
    bundles: list[dict[str, float]]
    strategy: str
    holder: str | None  # the actor whose end removes the group; None: the driver


class GroupReady(NamedTuple):
    """Reply ``None`` once that group is reserved (request, worker to owner)."""

    group_id: str
    requester: str | None  # the actor that waits, for the deadlock check


class GroupRemove(NamedTuple):
    """Give that group back, stopping its actors (request or notification, worker to owner).
    Reply: ``None`` once its actors have ended."""

    group_id: str


# ------------------------------------------------------------------------ status socket


class Status(NamedTuple):
    """The status socket's one operation (request, CLI to runtime). Reply: the runtime's
    status snapshot, as plain data."""


from ._cluster_messages import (  # noqa: E402  (the cluster's part of the set)
    Beat,
    Blocked,
    Claim,
    ClusterStatus,
    Deadlocked,
    Deny,
    Grant,
    JoinDriver,
    JoinNode,
    KillWorker,
    Leave,
    NodeDown,
    NodeUp,
    ReleaseHolder,
    Revoke,
    SetParent,
    Stall,
    StartWorker,
    View,
    Withdraw,
    WorkerExit,
    WorkerOutput,
)

Message: TypeAlias = (
    Call
    | CancelCall
    | Tell
    | Stop
    | Kill
    | WaitStopped
    | Spawn
    | SpawnProcess
    | SpawnCancel
    | GetActor
    | Hello
    | Ping
    | Died
    | Restarted
    | Retire
    | WaitEdge
    | AskDeadlock
    | ReserveGroup
    | GroupReady
    | GroupRemove
    | Status
    | JoinNode
    | JoinDriver
    | Beat
    | NodeUp
    | NodeDown
    | Claim
    | Withdraw
    | ReleaseHolder
    | SetParent
    | Blocked
    | Grant
    | Deny
    | Revoke
    | Deadlocked
    | Stall
    | View
    | ClusterStatus
    | StartWorker
    | KillWorker
    | WorkerOutput
    | WorkerExit
    | Leave
    | Locate
    | PeerEndpoint
)

# Tags are part of the protocol: never reuse or renumber one without a new PROTOCOL_VERSION.
_TAGS: Final[dict[type[Any], int]] = {
    Call: 1,
    Tell: 2,
    Stop: 3,
    Kill: 4,
    WaitStopped: 5,
    Spawn: 6,
    SpawnProcess: 7,
    SpawnCancel: 8,
    GetActor: 9,
    Hello: 10,
    Ping: 11,
    Died: 12,
    Restarted: 13,
    WaitEdge: 14,
    AskDeadlock: 15,
    ReserveGroup: 16,
    GroupReady: 17,
    GroupRemove: 18,
    Status: 19,
    JoinNode: 20,
    JoinDriver: 21,
    Beat: 22,
    NodeUp: 23,
    NodeDown: 24,
    Claim: 25,
    Withdraw: 26,
    ReleaseHolder: 27,
    SetParent: 28,
    Blocked: 29,
    Grant: 30,
    Deny: 31,
    Revoke: 32,
    Deadlocked: 33,
    Stall: 34,
    View: 35,
    ClusterStatus: 36,
    StartWorker: 37,
    KillWorker: 38,
    WorkerOutput: 39,
    WorkerExit: 40,
    CancelCall: 41,
    Retire: 42,
    Leave: 43,
    Locate: 44,
    PeerEndpoint: 45,
}
_BY_TAG: Final[dict[int, type[Any]]] = {tag: cls for cls, tag in _TAGS.items()}

# What decoding may produce for each field, for check_fields: a type or a tuple of types
# (exact msgpack types: a codec-decoded value of another type is malformed), or None where
# the value is for the receiving layer to check (classes, arguments, exceptions).
_NUMBER = (int, float)
_OPT_STR = (str, type(None))
_FIELD_TYPES: Final[dict[type[Any], tuple[Any, ...]]] = {
    Call: (str, str, list, dict),
    Tell: (str, str, list, dict),
    Stop: (str, (*_NUMBER, type(None))),
    Kill: (str, _OPT_STR),
    WaitStopped: (str,),
    Spawn: (str, None, list, dict, int, (dict, type(None)), (tuple, type(None))),
    SpawnProcess: (None, list, dict, list, bool, str),
    SpawnCancel: (str,),
    GetActor: (str,),
    Hello: (str, int),
    Ping: (),
    Died: (str, BaseException),
    Restarted: (str,),
    WaitEdge: (str, str, bool, bool),
    AskDeadlock: (str, str, BaseException),
    ReserveGroup: (str, list, str, _OPT_STR),
    GroupReady: (str, _OPT_STR),
    GroupRemove: (str,),
    Status: (),
    JoinNode: (str, str, int, dict, list, int),
    JoinDriver: (str, str, int),
    Beat: (),
    NodeUp: (dict,),
    NodeDown: (str, str),
    Claim: (str, str, (dict, type(None)), (list, type(None)), str, None, _OPT_STR, bool),
    Withdraw: (str,),
    ReleaseHolder: (str,),
    SetParent: (str, str),
    Blocked: (str, _OPT_STR, _OPT_STR, bool, bool),
    Grant: (str, str, list, _OPT_STR),
    Deny: (str, str, BaseException),
    Revoke: (str, str, _OPT_STR, _OPT_STR),
    Deadlocked: (str, str, BaseException),
    Stall: (str, str, str),
    View: (dict, dict, list),
    ClusterStatus: (),
    StartWorker: (str, dict, str, dict),
    KillWorker: (str,),
    WorkerOutput: (str, int, str),
    WorkerExit: (str, int, _OPT_STR),
    CancelCall: (str, int),
    Retire: (str, str),
    Leave: (str,),
    Locate: (str, str),
    PeerEndpoint: (),
}



def _quick_exact(types: tuple[type[Any], ...]) -> Callable[[Any], bool]:
    """The quick check of a message whose every field has one exact type."""

    def quick(message: Any) -> bool:
        return tuple(map(type, message)) == types

    return quick


# The quick check of each message whose fields have one exact type each (Call and Tell are
# checked inline in from_wire); the others get the thorough check (check_fields) only.
_QUICK: Final[dict[type[Any], Callable[[Any], bool]]] = {
    cls: _quick_exact(types)
    for cls, types in _FIELD_TYPES.items()
    if all(isinstance(t, type) for t in types) and cls not in (Call, Tell)
}

# Per tag: the class, the array's length (tag included), the quick check's types or None.
_SPEC: Final[dict[int, tuple[type[Any], int, Callable[[Any], bool] | None]]] = {
    tag: (cls, len(cls._fields) + 1, _QUICK.get(cls)) for tag, cls in _BY_TAG.items()
}

tag_of: Final = _TAGS.get
"""The wire tag of a message class, or ``None`` for any other type (used by the codec)."""

_new = tuple.__new__


def from_wire(items: Any) -> Message:
    """Build the message a decoded array ``[tag, *fields]`` stands for, and check it.

    Raises:
        MalformedMessage: ``items`` is not such an array, its tag is unknown, it has the
            wrong number of fields, or a field has a type the protocol does not allow there.
    """
    try:
        cls, arity, quick = _SPEC[items[0]]
        if len(items) == arity:
            del items[0]
            message: Message = _new(cls, items)
            if cls is Call or cls is Tell:  # the hot ones, checked inline: one exact type each
                actor_id, method, args, kwargs = items
                if (
                    type(actor_id) is str
                    and type(method) is str
                    and type(args) is list
                    and type(kwargs) is dict
                ):
                    return message
            elif quick is not None and quick(message):
                return message
            check_fields(message)  # the thorough check, where the quick one cannot tell
            return message
    except (KeyError, TypeError, IndexError):
        pass
    raise _malformed(items)


def _malformed(items: object) -> MalformedMessage:
    if type(items) is not list or not items:
        return MalformedMessage(f"a message must be an array [tag, *fields], got {_show(items)}")
    cls = _BY_TAG.get(items[0]) if type(items[0]) is int else None
    if cls is None:
        return MalformedMessage(
            f"unknown message type tag {items[0]!r} (protocol version {PROTOCOL_VERSION} knows "
            f"tags 1 to {len(_TAGS)}): {_show(items)}"
        )
    return MalformedMessage(
        f"malformed {cls.__name__} message: {len(items) - 1} fields, expected "
        f"{len(cls._fields)} ({', '.join(cls._fields) or 'none'})"
    )


def check_fields(message: Message) -> None:
    """Check that every field of a message has a type the protocol allows there.

    Raises:
        MalformedMessage: naming the message, the field, its type and what is allowed.
    """
    fields = zip(message._fields, message, _FIELD_TYPES[type(message)], strict=True)
    for name, value, allowed in fields:
        if allowed is not None and not isinstance(value, allowed):
            expected = (
                " or ".join(t.__name__ for t in allowed)
                if isinstance(allowed, tuple)
                else allowed.__name__
            )
            raise MalformedMessage(
                f"malformed {type(message).__name__} message: field {name!r} is "
                f"{type(value).__name__} {_show(value)}, expected {expected}"
            )


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
