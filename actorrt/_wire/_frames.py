"""The frame format of a connection, and the errors a connection raises.

Every frame, after the handshake, is (all integers big-endian)::

    length:u64 | request_id:u64 | kind_flags:u8 | [body_len:u64] | body | buffers

``length`` counts every byte after itself (so a frame is ``8 + length`` bytes). The low four
bits of ``kind_flags`` are the kind (:data:`REQUEST`, :data:`NOTIFY`, :data:`REPLY`,
:data:`ERROR`); the bits above are the codec's flags (:data:`actorrt._wire._codec.FLAG_TUPLES`,
``FLAG_BUFFERS``, ``FLAG_TOP_TUPLE``). ``body`` is msgpack; ``body_len`` and the out-of-band
``buffers`` after it are present only when ``FLAG_BUFFERS`` is set. A notification's
``request_id`` is 0; a reply or error carries the id of its request.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Final, Protocol

from .._errors import ConnectionLostError as ConnectionLostError
from .._errors import FrameTooLargeError as FrameTooLargeError

if TYPE_CHECKING:
    from ._connection import Connection

__all__ = [
    "ERROR",
    "HEADER",
    "HEADER_LEN",
    "KIND_MASK",
    "NOTIFY",
    "REPLY",
    "REQUEST",
    "ConnectionLostError",
    "FrameTooLargeError",
    "Handler",
]

REQUEST: Final = 0
NOTIFY: Final = 1
REPLY: Final = 2
ERROR: Final = 3
KIND_MASK: Final = 0x0F

HEADER: Final = struct.Struct("!QQB")  # length of the rest, request id, kind | codec flags
HEADER_LEN: Final = HEADER.size
AFTER_LENGTH: Final = struct.Struct("!QB")  # the header without its length field
MIN_LENGTH: Final = HEADER_LEN - 8  # the smallest valid length field: an empty body


class Handler(Protocol):
    """What a connection calls with each incoming request or notification.

    It runs on the event loop, inside the protocol callback, in the order the peer sent the
    messages; it must not block. For a request (``request_id`` is an ``int``) it must arrange
    exactly one :meth:`Connection.reply` or :meth:`Connection.reply_error`, now or later (from
    a task it owns); until then the request counts against the incoming watermark. For a
    notification ``request_id`` is ``None``. If it raises, the exception goes back to the
    requester as the reply (for a notification it is logged).
    """

    def __call__(self, conn: Connection, request_id: int | None, payload: Any) -> None: ...
