"""The sending half of a connection: frames out, coalesced per loop tick, with flow control.

:class:`FrameWriter` is a mixin of :class:`~actorrt._wire._connection.Connection` (which owns
the slots and the transport). What it does:

* **Write coalescing.** The first frame of a loop tick is written at once and schedules one
  ``call_soon`` tick-end flush; the messages sent after it in the tick join one
  :data:`~actorrt._wire._frames.BATCH` frame (each message encoded when it is sent, the
  batch framed once; the peer decodes it in one go), which leaves, in one ``transport.write``,
  when the flush runs, or earlier once 4 KiB have queued (so a long burst keeps the peer
  busy) or when the frames of one read have been dispatched (their replies).
* **Flow control.** The transport's ``pause_writing``/``resume_writing`` are honoured:
  :meth:`FrameWriter.drain` blocks while the peer is not reading. A producer that sends
  without awaiting replies awaits ``drain()`` between sends, and then neither the queue nor
  the transport's buffer grows beyond its high-water mark plus one frame.
* **Size limits.** A frame above ``max_frame_size`` is refused before anything is written
  (:class:`FrameTooLargeError`); large buffers are written as they are, never joined.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from ._codec import FLAG_TUPLES, Codec
from ._frames import (
    BATCH,
    BATCH_ARRAY,
    BATCH_ITEM,
    BATCH_ITEM_LEN,
    HEADER,
    HEADER_LEN,
    MIN_LENGTH,
    ConnectionLostError,
    FrameTooLargeError,
)

__all__ = ["BIG_FRAME", "EAGER_FLUSH", "FrameWriter"]

_pack_header = HEADER.pack
_pack_item = BATCH_ITEM.pack
_pack_array = BATCH_ARRAY.pack
_BATCH_HEAD: Final = HEADER_LEN + BATCH_ARRAY.size

BIG_FRAME: Final = 1 << 16  # frames above this travel (and are read) as buffers of their own
_JOIN_LIMIT: Final = 1 << 20  # queued writes above this are not joined into one bytes
EAGER_FLUSH: Final = 1 << 12  # a burst is written at least every 4 KiB (see _send)

# The connection's states, in order (shared with _connection and _reader).
HANDSHAKE: Final = 0
OPEN: Final = 3
CLOSING: Final = 4
CLOSED: Final = 5


class FrameWriter(asyncio.BufferedProtocol):
    """Encodes, frames, queues and writes; honours the transport's flow control."""

    # __slots__ for speed: touched per frame. The first five are the connection's, shared
    # by both halves; this root class holds them.
    __slots__ = (
        "_batch_at",
        "_batch_flags",
        "_batch_start",
        "_call_soon",
        "_codec",
        "_drain_waiters",
        "_flush_at_tick_end",
        "_flush_scheduled",
        "_loop",
        "_max_frame",
        "_state",
        "_transport",
        "_wbuf",
        "_write_limits",
        "_write_paused",
        "_wsize",
    )

    _state: int
    _codec: Codec
    _transport: asyncio.Transport | None
    _loop: asyncio.AbstractEventLoop
    _max_frame: int
    _write_limits: tuple[int, int]
    _wbuf: list[Any]
    _wsize: int
    _flush_scheduled: bool
    _call_soon: Callable[..., Any]
    _flush_at_tick_end: Callable[[], None]
    _write_paused: bool
    _drain_waiters: list[asyncio.Future[None]]
    # The batch of this tick: where its header goes in _wbuf (-1: none open), the union of
    # its messages' flags, and _wsize where its messages begin.
    _batch_at: int
    _batch_flags: int
    _batch_start: int

    if TYPE_CHECKING:  # defined by the connection, which this class is a part of

        def _unusable(self) -> ConnectionLostError: ...

    def _send(
        self, kind: int, request_id: int, payload: object, context: object, tagged: bool = False
    ) -> None:
        if self._state is not OPEN:
            raise self._unusable()
        if tagged:  # a typed message already in its wire form: [tag, *fields]
            flags, head, buffers = self._codec.pack_tagged(payload, context)
        else:
            flags, head, buffers = self._codec.pack(payload, context)
        size = len(head)
        if buffers or size > BIG_FRAME:
            self._send_large(kind | flags, request_id, head, buffers, context)
            return
        wbuf = self._wbuf
        if not self._flush_scheduled:
            # The first frame of this tick leaves at once, as a frame of its own, so a lone
            # message costs no extra loop iteration; what follows in the same tick joins
            # the tick's batch, written by the tick-end flush.
            self._flush_scheduled = True
            self._call_soon(self._flush_at_tick_end)
            wbuf.append(_pack_header(size + MIN_LENGTH, request_id, kind | flags))
            wbuf.append(head)
            self._wsize += size + HEADER_LEN
            self._write_queued()
            return
        if self._batch_at < 0:
            self._batch_at = len(wbuf)
            wbuf.append(b"")  # the batch's header, once it is sealed (_seal_batch)
            self._batch_flags = 0
            self._batch_start = self._wsize = self._wsize + _BATCH_HEAD
        wbuf.append(_pack_item(0xCF, request_id, 0xCC, kind | flags))
        wbuf.append(head)
        self._batch_flags |= flags
        wsize = self._wsize = self._wsize + size + BATCH_ITEM_LEN
        if wsize >= EAGER_FLUSH:
            # A long burst: let the peer start on it rather than wait for the end of the tick.
            self._write_queued()

    def _send_run(self, items: list[Any]) -> bool:
        """Send ``items`` (``request_id, kind_flags, value`` for each message) as one batch
        frame, encoded in one go. ``False``, having sent nothing, when they
        cannot go so (a value that cannot be sent, out-of-band buffers, above 1 MiB)."""
        try:
            flags, head, buffers = self._codec.pack(items)
        except Exception:
            return False
        size = len(head)
        if buffers or flags & ~FLAG_TUPLES or size > min(_JOIN_LIMIT, self._max_frame - 64):
            return False
        if self._batch_at >= 0:
            self._seal_batch()  # what was sent before them goes first
        wbuf = self._wbuf
        wbuf.append(_pack_header(size + MIN_LENGTH, 0, BATCH | flags))
        wbuf.append(head)
        wsize = self._wsize = self._wsize + size + HEADER_LEN
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._call_soon(self._flush_at_tick_end)
            self._write_queued()
        elif wsize >= EAGER_FLUSH:
            self._write_queued()
        return True

    def _seal_batch(self) -> None:
        """Put the header of the open batch in front of its messages."""
        # The batch is the last thing queued: its messages, two chunks each, follow ``at``.
        at, self._batch_at = self._batch_at, -1
        wbuf = self._wbuf
        wbuf[at] = _pack_header(
            MIN_LENGTH + BATCH_ARRAY.size + self._wsize - self._batch_start,
            0,
            BATCH | (self._batch_flags & FLAG_TUPLES),
        ) + _pack_array(0xDD, 3 * ((len(wbuf) - at - 1) // 2))

    def _send_large(
        self, kind_flags: int, request_id: int, head: bytes, buffers: list[Any], context: object
    ) -> None:
        size = len(head) + sum(map(len, buffers))
        if size + HEADER_LEN > self._max_frame:
            raise FrameTooLargeError(
                f"cannot send {context}: its frame of {size + HEADER_LEN} bytes exceeds "
                f"max_frame_size={self._max_frame}"
            )
        if self._batch_at >= 0:
            self._seal_batch()  # what was sent before it goes first
        self._wbuf += [_pack_header(size + MIN_LENGTH, request_id, kind_flags), head, *buffers]
        self._wsize += size + HEADER_LEN
        self._write_queued()  # large: no point waiting for the end of the tick

    def _flush(self) -> None:
        """The tick-end callback: write what was queued since the tick's first frame."""
        self._flush_scheduled = False
        if self._wbuf:
            self._write_queued()

    def _write_queued(self) -> None:
        """Hand everything queued to the transport, joined into one write when small."""
        wbuf = self._wbuf
        transport = self._transport
        if not wbuf or transport is None:
            return
        if self._batch_at >= 0:
            self._seal_batch()
        self._wbuf = []
        size, self._wsize = self._wsize, 0
        if size <= _JOIN_LIMIT:
            transport.write(b"".join(wbuf))
            return
        # Large buffers are written on their own (no join copy); small frames around them
        # are still joined, so a burst of small frames stays one write.
        small: list[Any] = []
        for chunk in wbuf:
            if len(chunk) < BIG_FRAME:
                small.append(chunk)
                continue
            if small:
                transport.write(b"".join(small))
                small = []
            transport.write(chunk)
        if small:
            transport.write(b"".join(small))

    async def drain(self) -> None:
        """Wait until the peer has read enough that sending more is reasonable.

        Returns at once unless the write buffers are above their high-water mark.

        Raises:
            ConnectionLostError: the connection ended.
        """
        if self._wsize >= self._write_limits[0]:
            self._write_queued()  # may make the transport call pause_writing
        if self._state >= CLOSING:
            raise self._unusable()
        if not self._write_paused:
            return
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._drain_waiters.append(waiter)
        await waiter

    def pause_writing(self) -> None:
        """Called by the transport when its buffer is above the high-water mark."""
        self._write_paused = True

    def resume_writing(self) -> None:
        """Called by the transport when its buffer is back under the low-water mark."""
        self._write_paused = False
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    @property
    def write_buffer_size(self) -> int:
        """Bytes queued for this tick plus bytes in the transport's buffer."""
        transport = self._transport
        return self._wsize + (transport.get_write_buffer_size() if transport else 0)
