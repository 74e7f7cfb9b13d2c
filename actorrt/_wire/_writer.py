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
* **Bytes in flight.** A request that carries a large frame counts its bytes from the moment
  it is sent until its reply arrives (unsent and unacknowledged alike). When another one
  would take that count above ``max_in_flight``, or the transport's buffer is above its
  high-water mark, it waits in a line, and so does every request and notification sent
  after it, in order; a reply, or the ack of a counted request, or the transport draining,
  lets the line move. A large message is encoded when it is sent (so an unsendable one
  raises there) and, if it must wait, dropped and encoded again when it leaves: the line
  holds the caller's own objects, not copies of them. So the bytes
  a connection holds for its peer stay under the bound plus one message; a single message
  larger than the bound still goes, alone. Replies never wait (the peer bounded their
  requests), nor do requests sent ``urgent`` (a liveness ping, a cancellation).
* **Size limits.** A frame above ``max_frame_size`` is refused before anything is written
  (:class:`FrameTooLargeError`); large buffers are written as they are, never joined.
* **Whose memory.** The out-of-band buffers of a request (an ask) are the arrays' own memory,
  written while the loop runs on: the caller must not change them until the answer comes. A
  notification's or a reply's writable ones are copied first
  (:func:`~actorrt._wire._buffers.snapshot`), so they go as they were when sent. The first
  frame of 4 MiB on a Unix socket widens its send buffer (:meth:`FrameWriter._widen`).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from ._buffers import snapshot
from ._codec import FLAG_TUPLES, Codec
from ._frames import (
    BATCH,
    BATCH_ARRAY,
    BATCH_ITEM,
    BATCH_ITEM_LEN,
    HEADER,
    HEADER_LEN,
    KIND_MASK,
    MIN_LENGTH,
    NOTIFY,
    REQUEST,
    ConnectionLostError,
    FrameTooLargeError,
)

__all__ = ["BIG_FRAME", "DEFAULT_MAX_IN_FLIGHT", "EAGER_FLUSH", "FrameWriter"]

logger = logging.getLogger("actorrt")

_pack_header = HEADER.pack
_pack_item = BATCH_ITEM.pack
_pack_array = BATCH_ARRAY.pack
_BATCH_HEAD: Final = HEADER_LEN + BATCH_ARRAY.size

BIG_FRAME: Final = 1 << 16  # frames above this travel (and are read) as buffers of their own
_JOIN_LIMIT: Final = 1 << 20  # queued writes above this are not joined into one bytes
EAGER_FLUSH: Final = 1 << 12  # a burst is written at least every 4 KiB (see _send)
DEFAULT_MAX_IN_FLIGHT: Final = 64 << 20  # bytes of large requests in flight per connection
WIDEN_FOR: Final = 4 << 20  # a frame this large widens a Unix socket's send buffer (_widen)
SEND_BUFFER: Final = 4 << 20  # to this (the kernel caps it at net.core.wmem_max)

# A message waiting for room in flight: kind and flags, request id, its encoded head (None: a
# large one, encoded again from its payload when it leaves), size with its header, and the
# payload, its context and whether it is tagged (for that second encoding).
Held = tuple[int, int, bytes | None, int, object, object, bool]

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
        "_held",
        "_loop",
        "_max_frame",
        "_max_in_flight",
        "_state",
        "_transport",
        "_unacked",
        "_unacked_bytes",
        "_wbuf",
        "_widened",
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
    # Frames waiting for room in flight, in order; the sizes of the large requests sent and
    # not answered yet, by request id, and their sum; the bound.
    _held: deque[Held]
    _unacked: dict[int, int]
    _unacked_bytes: int
    _max_in_flight: int
    # The batch of this tick: where its header goes in _wbuf (-1: none open), the union of
    # its messages' flags, and _wsize where its messages begin.
    _batch_at: int
    _batch_flags: int
    _batch_start: int
    # Whether the socket's send buffer was widened for large frames (see _widen).
    _widened: bool

    if TYPE_CHECKING:  # defined by the connection, which this class is a part of

        def _unusable(self) -> ConnectionLostError: ...

        def _unsendable(self, kind: int, request_id: int, exc: Exception) -> None: ...

    def _send(
        self,
        kind: int,
        request_id: int,
        payload: object,
        context: object,
        tagged: bool = False,
        urgent: bool = False,
    ) -> None:
        if self._state is not OPEN:
            raise self._unusable()
        if tagged:  # a typed message already in its wire form: [tag, *fields]
            flags, head, buffers = self._codec.pack_tagged(payload, context)
        else:
            flags, head, buffers = self._codec.pack(payload, context)
        size = len(head)
        if buffers or size > BIG_FRAME:
            self._send_large(
                kind | flags, request_id, head, buffers, context, urgent, payload, tagged
            )
            return
        if self._held and kind <= NOTIFY and not urgent:
            held = (kind | flags, request_id, head, size + HEADER_LEN, None, None, False)
            self._held.append(held)
            return  # in line behind a request waiting for room in flight
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
        self,
        kind_flags: int,
        request_id: int,
        head: bytes,
        buffers: list[Any],
        context: object,
        urgent: bool = False,
        payload: object = None,
        tagged: bool = False,
    ) -> None:
        size = len(head) + sum(map(len, buffers)) + HEADER_LEN
        if size > self._max_frame:
            raise FrameTooLargeError(
                f"cannot send {context}: its frame of {size} bytes exceeds "
                f"max_frame_size={self._max_frame}"
            )
        kind = kind_flags & KIND_MASK
        if kind <= NOTIFY and not urgent and (self._held or not self._admits(kind, size)):
            # Waits for room in flight (see the module): the encoding is let go.
            self._held.append((kind_flags, request_id, None, size, payload, context, tagged))
            return
        if kind != REQUEST:
            buffers = snapshot(buffers)  # only an ask's go from their memory (the module)
        self._put_large(kind_flags, request_id, head, buffers, size)
        self._write_queued()  # large: no point waiting for the end of the tick

    def _admits(self, kind: int, size: int) -> bool:
        """Whether a large request or notification may go now (see the module)."""
        if self._write_paused:
            return False
        if kind != REQUEST:
            return True
        unacked = self._unacked_bytes
        return unacked == 0 or unacked + size <= self._max_in_flight

    def _put_large(
        self, kind_flags: int, request_id: int, head: bytes, buffers: list[Any], size: int
    ) -> None:
        if not self._widened and size >= WIDEN_FOR:
            self._widen()
        if self._batch_at >= 0:
            self._seal_batch()  # what was sent before it goes first
        header = _pack_header(size - HEADER_LEN + MIN_LENGTH, request_id, kind_flags)
        self._wbuf += [header, head, *buffers]
        self._wsize += size
        if kind_flags & KIND_MASK == REQUEST:
            self._unacked[request_id] = size
            self._unacked_bytes += size

    def _widen(self) -> None:
        """Give a Unix socket a send buffer of :data:`SEND_BUFFER` once the first frame of
        :data:`WIDEN_FOR` leaves: the kernel's default (about 200 KiB) wakes both loops
        every 200 KiB of a large frame, 500 times for 100 MB. The kernel caps it at
        ``net.core.wmem_max``. TCP's are left to the kernel, which sizes them itself."""
        self._widened = True
        transport = self._transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is None or sock.family != socket.AF_UNIX:
            return
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        except OSError as exc:  # the socket is closing: nothing to gain
            logger.debug("cannot widen the send buffer: %s", exc)

    def _acked(self, request_id: int) -> None:
        """A counted request was answered (or withdrawn): its bytes leave the count."""
        size = self._unacked.pop(request_id, 0)
        self._unacked_bytes -= size
        if self._held:
            self._release()

    def _release(self) -> None:
        """Send what waited in line, in order, while there is room in flight."""
        held = self._held
        if self._state is not OPEN:
            return
        moved = False
        while held:
            kind_flags, request_id, head, size, payload, context, tagged = held[0]
            if head is not None:  # a small one, in line to keep the order
                held.popleft()
                if self._batch_at >= 0:
                    self._seal_batch()
                header = _pack_header(size - HEADER_LEN + MIN_LENGTH, request_id, kind_flags)
                self._wbuf += [header, head]
                self._wsize += size
                moved = True
                continue
            if not self._admits(kind_flags & KIND_MASK, size):
                break
            held.popleft()
            self._send_again(kind_flags & KIND_MASK, request_id, payload, context, tagged)
            moved = True
        if moved:
            self._write_queued()

    def _send_again(
        self, kind: int, request_id: int, payload: object, context: object, tagged: bool
    ) -> None:
        """Encode a message that waited for room in flight, and queue it."""
        try:
            if tagged:
                flags, head, buffers = self._codec.pack_tagged(payload, context)
            else:
                flags, head, buffers = self._codec.pack(payload, context)
        except Exception as exc:  # it could be encoded at its call: something changed since
            self._unsendable(kind, request_id, exc)
            return
        if kind != REQUEST:
            buffers = snapshot(buffers)
        size = len(head) + sum(map(len, buffers)) + HEADER_LEN
        self._put_large(kind | flags, request_id, head, buffers, size)

    @property
    def bytes_in_flight(self) -> int:
        """Bytes of large requests sent and not answered yet, plus the transport's unsent
        bytes (what the bound on bytes in flight limits; see the module)."""
        transport = self._transport
        unsent = transport.get_write_buffer_size() if transport is not None else 0
        return self._unacked_bytes + unsent

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
        if self._held:
            self._release()
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    @property
    def write_buffer_size(self) -> int:
        """Bytes queued for this tick plus bytes in the transport's buffer."""
        transport = self._transport
        return self._wsize + (transport.get_write_buffer_size() if transport else 0)
