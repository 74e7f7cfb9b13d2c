"""The frame format of a connection, and the errors a connection raises.

This module knows frames only; the connection that reads and writes them
(:mod:`actorrt._wire._connection`) imports it, never the other way round.

Every frame, after the handshake, is (all integers big-endian)::

    length:u64 | request_id:u64 | kind_flags:u8 | [body_len:u64] | body | buffers

``length`` counts every byte after itself (so a frame is ``8 + length`` bytes). The low four
bits of ``kind_flags`` are the kind (:data:`REQUEST`, :data:`NOTIFY`, :data:`REPLY`,
:data:`ERROR`, :data:`BATCH`); the bits above are the codec's flags
(:data:`actorrt._wire._codec.FLAG_TUPLES`, ``FLAG_BUFFERS``, ``FLAG_TOP_TUPLE``,
``FLAG_MESSAGE``). ``body`` is msgpack; ``body_len`` and the out-of-band ``buffers`` after it
are present only when ``FLAG_BUFFERS`` is set. A notification's ``request_id`` is 0; a reply
or error carries the id of its request.

A :data:`BATCH` frame carries several messages of one loop tick (its ``request_id`` is 0):
its body is one msgpack array of ``3n`` elements, ``request_id, kind_flags, value`` for
each message in order, where ``value`` is the msgpack body that message's own frame would
have had (never one with out-of-band buffers); ``request_id`` and ``kind_flags`` are packed
as ``uint 64`` and ``uint 8`` (:data:`BATCH_ITEM`). The batch's own flags are the union of
its messages' :data:`~actorrt._wire._codec.FLAG_TUPLES`, so the receiver decodes the whole
batch in one go.
"""

from __future__ import annotations

import struct
from typing import Final

from .._errors import ConnectionLostError as ConnectionLostError
from .._errors import FrameTooLargeError as FrameTooLargeError

__all__ = [
    "BATCH",
    "BATCH_ITEM",
    "ERROR",
    "HEADER",
    "HEADER_LEN",
    "KIND_MASK",
    "NOTIFY",
    "REPLY",
    "REQUEST",
    "ConnectionLostError",
    "FrameTooLargeError",
]

REQUEST: Final = 0
NOTIFY: Final = 1
REPLY: Final = 2
ERROR: Final = 3
BATCH: Final = 4
KIND_MASK: Final = 0x0F

HEADER: Final = struct.Struct("!QQB")  # length of the rest, request id, kind | codec flags
HEADER_LEN: Final = HEADER.size
AFTER_LENGTH: Final = struct.Struct("!QB")  # the header without its length field
MIN_LENGTH: Final = HEADER_LEN - 8  # the smallest valid length field: an empty body
# One message's request id and kind_flags inside a batch: msgpack uint 64 (0xcf), uint 8 (0xcc).
BATCH_ITEM: Final = struct.Struct("!BQBB")
BATCH_ITEM_LEN: Final = BATCH_ITEM.size
BATCH_ARRAY: Final = struct.Struct("!BI")  # msgpack array 32 (0xdd): the batch's element count

