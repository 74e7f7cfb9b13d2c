"""The wire form of an actor ref: where its actor lives, and what it answers to.

A ref inside a message travels as the codec's ref extension record (code 4), whose payload
is the msgpack array ``[runtime, worker, actor id, class name, methods, name]``
(:func:`encode_ref`). ``runtime`` and ``worker`` are the ref's :class:`RefAddress`: the process
that hosts the actor. The router of the receiving process resolves it
(``actorrt._processes._router``). Part of the protocol of :mod:`actorrt._wire._messages`:
a change here takes a new ``PROTOCOL_VERSION``.
"""

from __future__ import annotations

from typing import NamedTuple

import msgpack

from ._messages import MalformedMessage

__all__ = ["RefAddress", "WireRef", "decode_ref", "encode_ref"]

_OPT_STR = (str, type(None))


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class RefAddress(NamedTuple):
    """Which process hosts an actor: its runtime's id, and the worker process inside it.

    ``worker`` is ``None`` for an actor of the owning runtime's own process (an inline actor
    of the driver, or the owner's proxy of a worker-process actor, which it supervises and
    re-homes across restarts); else the id of the worker process that hosts it, as the
    owning runtime's pool named it.
    """

    runtime: str
    worker: str | None


class WireRef(NamedTuple):
    """The wire form of an actor ref: where the actor lives and what it answers to."""

    address: RefAddress
    actor_id: str
    cls_name: str
    methods: list[str]
    name: str | None


def encode_ref(ref: WireRef) -> bytes:
    """The payload of a ref's msgpack extension record (see ``docs/wire.md``)."""
    address = ref.address
    packed: bytes = msgpack.packb(
        [address.runtime, address.worker, ref.actor_id, ref.cls_name, ref.methods, ref.name],
        use_bin_type=True,
    )
    return packed


def decode_ref(data: bytes) -> WireRef:
    """Read :func:`encode_ref`'s payload back.

    Raises:
        MalformedMessage: the payload is not a ref of this protocol version.
    """
    try:
        fields = msgpack.unpackb(data)
    except Exception as exc:
        raise MalformedMessage(f"an actor ref arrived that cannot be decoded: {exc}") from exc
    if (
        type(fields) is not list
        or len(fields) != 6
        or not all(isinstance(f, str) for f in (fields[0], fields[2], fields[3]))
        or not isinstance(fields[1], _OPT_STR)
        or not isinstance(fields[5], _OPT_STR)
        or type(fields[4]) is not list
        or not all(isinstance(m, str) for m in fields[4])
    ):
        raise MalformedMessage(
            "an actor ref arrived in a form this end does not know (expected [runtime, "
            f"worker, actor id, class name, methods, name]): {_show(fields)}"
        )
    runtime, worker, actor_id, cls_name, methods, name = fields
    return WireRef(RefAddress(runtime, worker), actor_id, cls_name, methods, name)
