"""The receiving half of a connection: frames in, decoded and handed on, with flow control.

:class:`FrameReader` is a mixin of :class:`~actorrt._wire._connection.Connection` (which owns
the slots, the handshake and the sending half). It is the one place every incoming frame goes
through:

* **Reading.** The transport reads into one shared buffer (:meth:`FrameReader.get_buffer`);
  a frame above 64 KiB gets a buffer of its own (:func:`~actorrt._wire._buffers.receive_buffer`),
  which the kernel fills directly, so arrays in it are decoded as views without a copy.
* **Handing on.** A reply or error resolves its pending future right here, from the decoding
  loop (a batch's run of replies in one tight loop); a request or notification goes to its
  route in the handler's table (or to the handler itself), in the order the peer sent them;
  the requests of a batch whose class has a run route go to that route together. Replies
  the handler sends while one read's frames are handled leave in one write at the end.
* **Flow control.** Requests handed on and not yet replied to are counted; above
  ``incoming_limits[0]`` reading stops, and it resumes at ``incoming_limits[1]``.
  :meth:`FrameReader.pause_reading` lets the owner stop reading too (a full mailbox behind
  notifications).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import msgpack

from ._buffers import receive_buffer
from ._codec import FLAG_MESSAGE, FLAG_TOP_TUPLE, FLAG_TUPLES
from ._frames import (
    AFTER_LENGTH,
    BATCH,
    ERROR,
    HEADER,
    HEADER_LEN,
    KIND_MASK,
    MIN_LENGTH,
    NOTIFY,
    REPLY,
    REQUEST,
)
from ._messages import from_wire
from ._writer import BIG_FRAME, CLOSED, OPEN, FrameWriter

__all__ = ["FrameReader", "Routes", "RunRoutes"]

logger = logging.getLogger("actorrt")

_unpack_header = HEADER.unpack_from

READ_BUFFER: Final = 1 << 18  # the shared receive buffer
# A batched value still to be made a message or a tuple.
_FINISH: Final = FLAG_MESSAGE | FLAG_TOP_TUPLE

# What a Dispatcher exposes so that the connection hands a typed message straight to its
# route (one call less per message); anything not in them goes to the handler itself.
Routes = dict[type[Any], Callable[..., None]]
# Run routes, by message tag: ``run(conn, items, start, stop) -> end`` takes the requests of a
# batch that are messages of its tag, in their wire form, from ``items[start]`` on (request
# id, kind_flags, ``[tag, *fields]`` for each), stopping at the first that is not one or at
# ``stop``, and returns where it stopped (after ``start``: the first is always one). It
# checks each message as ``from_wire`` would and must arrange one reply for each it took.
RunRoutes = dict[int, Callable[[Any, list[Any], int, int], int]]
# The kind_flags bits that make a batched value a request for a run route.
_RUN_MASK: Final = KIND_MASK | _FINISH
_RUN_KIND: Final = REQUEST | FLAG_MESSAGE
_TUPLE_REPLY: Final = REPLY | FLAG_TOP_TUPLE  # a reply that is a tuple, sent as a plain array



class FrameReader(FrameWriter):
    """Reads frames, decodes them and hands each on; counts what awaits a reply."""

    # __slots__ for speed: touched per frame.
    __slots__ = (
        "_batch",
        "_batch_next",
        "_big",
        "_big_done",
        "_big_filled",
        "_halted",
        "_handler",
        "_incoming",
        "_incoming_high",
        "_incoming_low",
        "_notification_routes",
        "_paused_by_owner",
        "_paused_by_watermark",
        "_pending",
        "_rbuf",
        "_read_paused",
        "_rend",
        "_request_routes",
        "_request_runs",
        "_rstart",
        "_rview",
    )

    _handler: Callable[[Any, int | None, Any], None]
    _request_routes: Routes
    _notification_routes: Routes
    _request_runs: RunRoutes
    _pending: dict[int, asyncio.Future[Any]]
    _rbuf: bytearray
    _rview: memoryview
    _rstart: int
    _rend: int
    _big: Any
    _big_filled: int
    _big_done: bool
    _incoming: int
    _incoming_high: int
    _incoming_low: int
    _paused_by_owner: int
    _paused_by_watermark: bool
    _read_paused: bool
    _halted: bool
    # The decoded messages of the batch being handed on (request id, kind_flags, value,
    # ...), and where the next one starts; ``None`` between batches.
    _batch: list[Any] | None
    _batch_next: int

    if TYPE_CHECKING:  # defined by the connection, which this class is a part of

        def reply_error(self, request_id: int, exc: BaseException) -> None: ...

        def _protocol_error(self, reason: str) -> None: ...

        def _handshake_step(self) -> None: ...

    # -- the owner's flow control ----------------------------------------------------

    def pause_reading(self) -> None:
        """Stop reading from the peer until a matching :meth:`resume_reading` (they nest)."""
        self._paused_by_owner += 1
        self._update_reading()

    def resume_reading(self) -> None:
        """Undo one :meth:`pause_reading`."""
        if self._paused_by_owner <= 0:
            raise RuntimeError("resume_reading() without a matching pause_reading()")
        self._paused_by_owner -= 1
        self._update_reading()

    @property
    def unreplied(self) -> int:
        """Incoming requests handed to the handler and not yet replied to."""
        return self._incoming

    def _replied(self) -> None:
        incoming = self._incoming = self._incoming - 1
        if self._paused_by_watermark and incoming <= self._incoming_low:
            self._paused_by_watermark = False
            self._update_reading()

    def _over_watermark(self) -> None:
        if not self._paused_by_watermark:
            self._paused_by_watermark = True
            self._update_reading()

    def _update_reading(self) -> None:
        pause = self._paused_by_owner > 0 or self._paused_by_watermark
        if pause == self._read_paused:
            return
        self._read_paused = pause
        self._halted = pause or self._state is not OPEN
        transport = self._transport
        if transport is None or self._state is CLOSED:
            return
        if pause:
            transport.pause_reading()
        else:
            transport.resume_reading()
            self._loop.call_soon(self._process)  # frames read before the pause

    # -- the transport's side ----------------------------------------------------------

    def get_buffer(self, sizehint: int) -> memoryview:
        """Called by the transport: where to put the next bytes read."""
        big = self._big
        if big is not None:
            return memoryview(big)[self._big_filled :]
        start, end = self._rstart, self._rend
        if start == end:
            self._rstart = self._rend = 0
            return self._rview
        size = len(self._rbuf)
        if end > size - BIG_FRAME:  # move what is left to the front
            tail = bytes(self._rview[start:end])
            end -= start
            if end > size - BIG_FRAME:
                # Only when reading was paused with frames still undispatched: grow.
                self._rbuf = bytearray(2 * size)
                self._rview = memoryview(self._rbuf)
            self._rview[:end] = tail
            self._rstart, self._rend = 0, end
        return self._rview[end:]

    def buffer_updated(self, nbytes: int) -> None:
        """Called by the transport after ``nbytes`` were written into :meth:`get_buffer`."""
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled == len(self._big):
                self._big_done = True
                self._process()
            return
        self._rend += nbytes
        if self._state is OPEN:
            self._process()
        else:
            self._handshake_step()

    # -- decoding and handing on ---------------------------------------------------------

    def _process(self) -> None:
        """Decode and hand on every complete frame received, unless reading is paused.

        A reply or error to its pending future, a request or notification to the handler.
        The messages of a batch frame, decoded in one go, come first (what is left of one
        when reading paused); then a frame above ``BIG_FRAME`` that was read into a buffer
        of its own (:meth:`_partial_frame`), then the frames in the shared buffer. Replies
        the handler sends while the frames of one read are handled leave in one write at
        the end.
        """
        buf, view = self._rbuf, self._rview
        pos, end = self._rstart, self._rend
        max_length = self._max_frame - 8
        unpack = self._codec.unpack
        pending = self._pending
        request_routes, notification_routes = self._request_routes, self._notification_routes
        request_runs = self._request_runs
        while not self._halted:
            batch = self._batch
            if batch is not None:
                at = self._batch_next
                if at >= len(batch):
                    self._batch = None
                    continue
                request_id, kind_flags, value = batch[at], batch[at + 1], batch[at + 2]
                if kind_flags & _RUN_MASK == REPLY or (
                    kind_flags & _RUN_MASK == _TUPLE_REPLY and type(value) is list
                ):
                    # A run of replies, resolved in one go: setting a future's result runs
                    # nothing now (its callbacks are scheduled), so nothing can reenter.
                    size = len(batch)
                    while True:
                        future = pending.pop(request_id, None)
                        if self._unacked and request_id in self._unacked:
                            self._acked(request_id)
                        if future is not None and not future.done():
                            future.set_result(
                                tuple(value) if kind_flags & FLAG_TOP_TUPLE else value
                            )
                        at += 3
                        if at >= size:
                            break
                        request_id, kind_flags, value = batch[at], batch[at + 1], batch[at + 2]
                        if kind_flags & _RUN_MASK != REPLY and (
                            kind_flags & _RUN_MASK != _TUPLE_REPLY or type(value) is not list
                        ):
                            break
                    self._batch_next = at
                    continue
                if (
                    kind_flags & _RUN_MASK == _RUN_KIND
                    and request_runs
                    and type(value) is list
                    and value
                    and type(value[0]) is int
                    and value[0] in request_runs
                ):
                    self._hand_on_run(request_runs[value[0]], batch, at)
                    continue
                self._batch_next = at + 3  # the handler may pause reading and reenter
                kind = kind_flags & KIND_MASK
                if kind_flags & _FINISH:
                    try:
                        value = from_wire(value) if kind_flags & FLAG_MESSAGE else tuple(value)
                    except Exception as exc:
                        self._undecodable(kind, request_id, exc)
                        continue
            else:
                if end - pos >= HEADER_LEN and not self._big_done:
                    length, request_id, kind_flags = _unpack_header(buf, pos)
                    frame_end = pos + 8 + length
                    if frame_end > end or length > max_length or length < MIN_LENGTH:
                        pos = self._partial_frame(pos, end, length)
                        break
                    body = view[pos + HEADER_LEN : frame_end]
                    self._rstart = pos = frame_end  # the handler may pause reading and reenter
                    owned = False
                elif self._big_done:
                    big, self._big, self._big_done = self._big, None, False
                    frame = memoryview(big)
                    request_id, kind_flags = AFTER_LENGTH.unpack_from(frame)
                    body = frame[9:]
                    owned = True  # a buffer of its own: decoded arrays may be views on it
                else:
                    break
                kind = kind_flags & KIND_MASK
                if kind == BATCH:
                    self._start_batch(kind_flags, body)
                    continue
                try:
                    value = unpack(kind_flags, body, owned)
                except Exception as exc:
                    self._undecodable(kind, request_id, exc)
                    continue
            if kind == REPLY:
                future = pending.pop(request_id, None)
                if self._unacked and request_id in self._unacked:
                    self._acked(request_id)
                if future is not None and not future.done():
                    future.set_result(value)
            elif kind == REQUEST:
                incoming = self._incoming = self._incoming + 1
                if incoming >= self._incoming_high:
                    self._over_watermark()
                route = request_routes.get(type(value))
                try:
                    if route is not None:
                        route(self, request_id, value)
                    else:
                        self._handler(self, request_id, value)
                except Exception as exc:
                    self.reply_error(request_id, exc)
            elif kind == NOTIFY:
                route = notification_routes.get(type(value))
                try:
                    if route is not None:
                        route(self, value)
                    else:
                        self._handler(self, None, value)
                except Exception:
                    logger.exception("the handler failed on a notification")
            elif kind == ERROR:
                future = pending.pop(request_id, None)
                if self._unacked and request_id in self._unacked:
                    self._acked(request_id)
                if future is not None and not future.done():
                    future.set_exception(value)
            else:
                self._protocol_error(f"the peer sent a frame of unknown kind {kind}")
        self._rstart = pos
        if self._wbuf:
            self._write_queued()  # the replies to this read, together

    def _hand_on_run(
        self, run: Callable[[Any, list[Any], int, int], int], batch: list[Any], at: int
    ) -> None:
        """Hand the requests of ``batch`` from ``at`` on to their run route at once, as many
        as the incoming watermark lets through: reading stops after the same request as it
        would were each handed on alone."""
        room = max(self._incoming_high - self._incoming, 1)
        stop = min(len(batch), at + 3 * room)
        self._incoming += (stop - at) // 3  # counted before: the route may reply at once
        end = run(self, batch, at, stop)  # it answers each request itself: it never raises
        assert at < end <= stop, (at, end, stop)
        self._incoming -= (stop - end) // 3  # the ones it did not take
        self._batch_next = end
        if self._incoming >= self._incoming_high:
            self._over_watermark()

    def _start_batch(self, kind_flags: int, body: Any) -> None:
        """Decode a batch frame in one go; its messages are handed on from ``_batch``."""
        try:
            items = self._codec.unpack(kind_flags & FLAG_TUPLES, body)
        except Exception:
            items = self._split_batch(kind_flags & FLAG_TUPLES, body)
        if type(items) is not list or len(items) % 3:
            self._protocol_error("the peer sent a malformed batch frame")
            return
        self._batch, self._batch_next = items, 0

    def _split_batch(self, flags: int, body: Any) -> list[Any]:
        """A batch that does not decode as a whole: decode its messages one by one, and
        answer each that does not decode (:meth:`_undecodable`) at once."""
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        unpacker.feed(body)
        items: list[Any] = []
        try:
            count = unpacker.read_array_header()
            for _ in range(count // 3):
                request_id, kind_flags = unpacker.unpack(), unpacker.unpack()
                start = unpacker.tell()
                unpacker.skip()
                value_body = body[start : unpacker.tell()]
                kind = kind_flags & KIND_MASK
                try:
                    value = self._finish(kind_flags, self._codec.unpack(flags, value_body))
                except Exception as exc:
                    self._undecodable(kind, request_id, exc)
                    continue
                items += (request_id, kind_flags & ~_FINISH, value)
        except Exception:
            return []  # not even its frame decodes: nothing to hand on
        return items

    @staticmethod
    def _finish(kind_flags: int, value: Any) -> Any:
        if kind_flags & FLAG_MESSAGE:
            return from_wire(value)
        if kind_flags & FLAG_TOP_TUPLE:
            return tuple(value)
        return value

    def _partial_frame(self, pos: int, end: int, length: int) -> int:
        """The frame at ``pos`` is incomplete or invalid; return where parsing stops."""
        if length > self._max_frame - 8 or length < MIN_LENGTH:
            self._protocol_error(
                f"the peer sent a frame of {length + 8} bytes; max_frame_size is {self._max_frame}"
                if length >= MIN_LENGTH
                else f"the peer sent a malformed frame header (length {length})"
            )
            return pos
        if length + 8 > BIG_FRAME:  # read the rest straight into a buffer of its own
            big = self._big = receive_buffer(length)
            have = end - pos - 8
            big[:have] = self._rview[pos + 8 : end]
            self._big_filled = have
            return end
        return pos

    def _undecodable(self, kind: int, request_id: int, exc: Exception) -> None:
        logger.debug("cannot decode a frame of kind %d: %r", kind, exc)
        if kind == REQUEST:
            self._incoming += 1
            self.reply_error(request_id, exc)
        elif kind in (REPLY, ERROR):
            future = self._pending.pop(request_id, None)
            if request_id in self._unacked:
                self._acked(request_id)
            if future is not None and not future.done():
                future.set_exception(exc)
        else:
            logger.error("dropped a notification that cannot be decoded: %r", exc)
