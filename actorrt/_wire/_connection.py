"""The connection: length-prefixed msgpack frames over a stream socket, multiplexed.

A :class:`Connection` is an :class:`asyncio.BufferedProtocol` that speaks the frames of
:mod:`actorrt._wire._frames` once the handshake of :mod:`actorrt._wire._auth` has succeeded.

* **Multiplexing.** :meth:`Connection.request` sends at once and returns a future for the
  reply; replies may come in any order. :meth:`Connection.notify` expects none. Incoming
  requests and notifications go, in the order they were sent, to the connection's handler,
  which replies later (:meth:`Connection.reply`, :meth:`Connection.reply_error`), from anywhere
  on the loop.
* **Write coalescing.** The first frame of a loop tick is written at once and schedules one
  ``call_soon`` tick-end flush; frames queued after it in the tick leave together, in one
  ``transport.write``, when it runs, or earlier once 4 KiB have queued (so a long burst keeps
  the peer busy) or when the frames of one read have been dispatched (their replies).
* **Flow control, sending.** The transport's ``pause_writing``/``resume_writing`` are honoured:
  :meth:`Connection.drain` blocks while the peer is not reading. A producer that sends without
  awaiting replies awaits ``drain()`` between sends, and then neither the queue nor the
  transport's buffer grows beyond its high-water mark plus one frame.
* **Flow control, receiving.** Requests handed to the handler and not yet replied to are
  counted; above ``incoming_limits[0]`` the connection stops reading the socket, and it resumes
  at ``incoming_limits[1]``. :meth:`Connection.pause_reading` lets the owner stop reading too
  (a full mailbox behind notifications).
* **Loss.** When the connection ends, every pending request fails at once with a
  :class:`ConnectionLostError` that carries the reason.

Nothing is decoded before the handshake of :mod:`actorrt._wire._auth` succeeds; until then incoming
bytes are only read as handshake messages.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final, Protocol, cast

from .._errors import ProtocolVersionError
from . import _auth
from ._codec import Codec
from ._frames import AFTER_LENGTH, HEADER, HEADER_LEN, KIND_MASK, MIN_LENGTH
from ._frames import ERROR as ERROR
from ._frames import NOTIFY as NOTIFY
from ._frames import REPLY as REPLY
from ._frames import REQUEST as REQUEST
from ._frames import ConnectionLostError as ConnectionLostError
from ._frames import FrameTooLargeError as FrameTooLargeError

__all__ = [
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "DEFAULT_INCOMING_LIMITS",
    "DEFAULT_MAX_FRAME_SIZE",
    "DEFAULT_WRITE_LIMITS",
    "ERROR",
    "NOTIFY",
    "REPLY",
    "REQUEST",
    "Connection",
    "ConnectionLostError",
    "FrameTooLargeError",
    "Handler",
]

logger = logging.getLogger("actorrt")

_pack_header = HEADER.pack
_unpack_header = HEADER.unpack_from

DEFAULT_MAX_FRAME_SIZE: Final = 1 << 31
DEFAULT_WRITE_LIMITS: Final = (1 << 20, 1 << 18)
DEFAULT_INCOMING_LIMITS: Final = (4096, 1024)
DEFAULT_HANDSHAKE_TIMEOUT: Final = 10.0

_READ_BUFFER: Final = 1 << 18  # the shared receive buffer
_BIG_FRAME: Final = 1 << 16  # frames above this get a buffer of their own (zero-copy decode)
_JOIN_LIMIT: Final = 1 << 20  # queued writes above this are not joined into one bytes
_EAGER_FLUSH: Final = 1 << 12  # a burst is written at least every 4 KiB (see _send)

class Handler(Protocol):
    """What a connection calls with each incoming request or notification.

    It runs on the event loop, inside the protocol callback, in the order the peer sent the
    messages; it must not block. For a request (``request_id`` is an ``int``) it must arrange
    exactly one :meth:`Connection.reply` or :meth:`Connection.reply_error`, now or later (from
    a task it owns); until then the request counts against the incoming watermark. For a
    notification ``request_id`` is ``None``. If it raises, the exception goes back to the
    requester as the reply (for a notification it is logged). The runtime's handlers are
    :class:`~actorrt._wire._dispatcher.Dispatcher` tables of typed messages.
    """

    def __call__(self, conn: Connection, request_id: int | None, payload: Any) -> None: ...


# What a Dispatcher exposes so that the connection hands a typed message straight to its
# route (one call less per message); anything not in them goes to the handler itself.
_Routes = dict[type[Any], Callable[..., None]]
_NO_ROUTES: Final[_Routes] = {}

_HANDSHAKE: Final = 0
_OPEN: Final = 3
_CLOSING: Final = 4
_CLOSED: Final = 5


class Connection(asyncio.BufferedProtocol):
    """One authenticated, multiplexed connection. Made by ``serve_unix`` and ``connect_unix``.

    Args:
        handler: called for incoming requests and notifications (see :class:`Handler`).
        secret: the runtime's secret, for the handshake.
        server: whether this end speaks the server's part of the handshake.
        codec: the codec for payloads; by default a fresh :class:`~actorrt._wire._codec.Codec` that
            allows pickle only once the peer has authenticated.
        max_frame_size: the largest frame accepted or sent, in bytes.
        write_limits: ``(high, low)`` write-buffer watermarks, in bytes.
        incoming_limits: ``(high, low)``: stop reading with this many requests unreplied,
            resume at the low mark.
        handshake_timeout: seconds the peer has to finish the handshake.
        on_open: called once the handshake has succeeded.
        on_close: called once with the :class:`ConnectionLostError` when the connection ends.
    """

    # __slots__ for speed: every attribute here is touched per frame.
    __slots__ = (
        "_big",
        "_big_done",
        "_big_filled",
        "_call_soon",
        "_close_error",
        "_close_reason",
        "_closed",
        "_codec",
        "_drain_waiters",
        "_flush_at_tick_end",
        "_flush_scheduled",
        "_halted",
        "_handler",
        "_handshake",
        "_hs_timer",
        "_incoming",
        "_incoming_high",
        "_incoming_low",
        "_loop",
        "_max_frame",
        "_next_id",
        "_notification_routes",
        "_on_close",
        "_on_open",
        "_own_codec",
        "_paused_by_owner",
        "_paused_by_watermark",
        "_pending",
        "_rbuf",
        "_read_paused",
        "_rend",
        "_request_routes",
        "_rstart",
        "_rview",
        "_state",
        "_transport",
        "_wbuf",
        "_write_limits",
        "_write_paused",
        "_wsize",
        "ready",
    )

    def __init__(
        self,
        handler: Handler | None,
        *,
        secret: bytes,
        server: bool,
        codec: Codec | None = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        write_limits: tuple[int, int] = DEFAULT_WRITE_LIMITS,
        incoming_limits: tuple[int, int] = DEFAULT_INCOMING_LIMITS,
        handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
        on_open: Callable[[Connection], None] | None = None,
        on_close: Callable[[Connection, ConnectionLostError], None] | None = None,
    ) -> None:
        if not 0 <= incoming_limits[1] < incoming_limits[0]:
            raise ValueError(
                f"incoming_limits must be (high, low), high > low, not {incoming_limits}"
            )
        self._loop = asyncio.get_running_loop()
        self._handler: Handler = _refuse if handler is None else handler
        routes: _Routes | None = getattr(handler, "request_routes", None)
        self._request_routes = _NO_ROUTES if routes is None else routes
        routes = getattr(handler, "notification_routes", None)
        self._notification_routes = _NO_ROUTES if routes is None else routes
        self._handshake = _auth.Handshake(secret, server)
        self._own_codec = codec is None
        self._codec = Codec(allow_pickle=False) if codec is None else codec
        self._max_frame = max_frame_size
        self._write_limits = write_limits
        self._incoming_high, self._incoming_low = incoming_limits
        self._on_open = on_open
        self._on_close = on_close
        self._transport: asyncio.Transport | None = None
        self._state = _HANDSHAKE
        self._hs_timer = self._loop.call_later(handshake_timeout, self._handshake_timed_out)
        self.ready: asyncio.Future[None] = self._loop.create_future()
        self._closed: asyncio.Future[None] = self._loop.create_future()
        self._close_reason: str | None = None
        self._close_error: ConnectionLostError | None = None
        self._next_id = 1
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._wbuf: list[Any] = []
        self._wsize = 0
        self._flush_scheduled = False
        # Bound once: every loop tick that sends schedules this (speed).
        self._call_soon = self._loop.call_soon
        self._flush_at_tick_end = self._flush
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._rbuf = bytearray(_READ_BUFFER)
        self._rview = memoryview(self._rbuf)
        self._rstart = self._rend = 0
        self._big: bytearray | None = None
        self._big_filled = 0
        self._big_done = False
        self._incoming = 0
        self._paused_by_owner = 0
        self._paused_by_watermark = False
        self._read_paused = False
        self._halted = True  # no frame is dispatched until the handshake succeeds

    def __repr__(self) -> str:
        state = {_HANDSHAKE: "handshake", _OPEN: "open", _CLOSING: "closing"}.get(
            self._state, "closed"
        )
        return f"<actorrt Connection {state}, {len(self._pending)} pending>"

    # -- sending ------------------------------------------------------------------------

    def request(self, payload: object, *, context: object = "request") -> asyncio.Future[Any]:
        """Send a request now and return a future for its reply.

        Args:
            payload: the request; anything the codec can send.
            context: what the payload is, for the error message if it cannot be sent (any
                object whose ``str()`` says so: it is formatted only then).

        Returns:
            A future that gets the peer's reply, or its exception, or a
            :class:`ConnectionLostError` if the connection ends first. Cancelling it does not
            withdraw the request.

        Raises:
            TypeError: the payload cannot be sent (nothing was sent).
            FrameTooLargeError: the encoded payload exceeds ``max_frame_size``.
            ConnectionLostError: the connection is closed.
        """
        request_id = self._next_id
        self._next_id = request_id + 1
        self._send(REQUEST, request_id, payload, context)
        future: asyncio.Future[Any] = self._loop.create_future()
        self._pending[request_id] = future
        return future

    def notify(self, payload: object, *, context: object = "notification") -> None:
        """Send a message that gets no reply. Raises as :meth:`request` does."""
        self._send(NOTIFY, 0, payload, context)

    def reply(self, request_id: int, value: object, *, context: object = "reply") -> None:
        """Answer an incoming request with a value.

        If the value cannot be sent, the requester gets the :class:`TypeError` instead. A reply
        on a closed connection is dropped: its requester has already failed.
        """
        incoming = self._incoming = self._incoming - 1
        if self._paused_by_watermark and incoming <= self._incoming_low:
            self._paused_by_watermark = False
            self._update_reading()
        if self._state is not _OPEN:
            return
        try:
            self._send(REPLY, request_id, value, context)
        except (TypeError, FrameTooLargeError) as exc:
            logger.debug("reply to request %d cannot be sent: %s", request_id, exc)
            self._send_error(request_id, exc)

    def reply_error(self, request_id: int, exc: BaseException) -> None:
        """Answer an incoming request with an exception, raised again at the requester."""
        self._replied()
        if self._state is _OPEN:
            self._send_error(request_id, exc)

    def _send_error(self, request_id: int, exc: BaseException) -> None:
        try:
            self._send(ERROR, request_id, exc, "exception")
        except (TypeError, FrameTooLargeError):  # a huge message or an unencodable str()
            self._send(ERROR, request_id, RuntimeError(repr(exc)[:10000]), "exception")

    def _send(self, kind: int, request_id: int, payload: object, context: object) -> None:
        if self._state is not _OPEN:
            raise self._unusable()
        flags, head, buffers = self._codec.pack(payload, context)
        size = len(head)
        if buffers or size > _BIG_FRAME:
            self._send_large(kind | flags, request_id, head, buffers, context)
            return
        wbuf = self._wbuf
        wbuf.append(_pack_header(size + MIN_LENGTH, request_id, kind | flags))
        wbuf.append(head)
        wsize = self._wsize = self._wsize + size + HEADER_LEN
        if not self._flush_scheduled:
            # The first frame of this tick leaves at once, so a lone message costs no extra
            # loop iteration; what follows in the same tick waits for the tick-end flush.
            self._flush_scheduled = True
            self._call_soon(self._flush_at_tick_end)
            self._write_queued()
        elif wsize >= _EAGER_FLUSH:
            # A long burst: let the peer start on it rather than wait for the end of the tick.
            self._write_queued()

    def _send_large(
        self, kind_flags: int, request_id: int, head: bytes, buffers: list[Any], context: object
    ) -> None:
        size = len(head) + sum(map(len, buffers))
        if size + HEADER_LEN > self._max_frame:
            raise FrameTooLargeError(
                f"cannot send {context}: its frame of {size + HEADER_LEN} bytes exceeds "
                f"max_frame_size={self._max_frame}"
            )
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
        self._wbuf = []
        size, self._wsize = self._wsize, 0
        if size <= _JOIN_LIMIT:
            transport.write(b"".join(wbuf))
            return
        # Large buffers are written on their own (no join copy); small frames around them
        # are still joined, so a burst of small frames stays one write.
        small: list[Any] = []
        for chunk in wbuf:
            if len(chunk) < _BIG_FRAME:
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
        if self._state >= _CLOSING:
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

    # -- receiving ----------------------------------------------------------------------

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

    def _update_reading(self) -> None:
        pause = self._paused_by_owner > 0 or self._paused_by_watermark
        if pause == self._read_paused:
            return
        self._read_paused = pause
        self._halted = pause or self._state is not _OPEN
        transport = self._transport
        if transport is None or self._state is _CLOSED:
            return
        if pause:
            transport.pause_reading()
        else:
            transport.resume_reading()
            self._loop.call_soon(self._process)  # frames read before the pause

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
        if end > size - _BIG_FRAME:  # move what is left to the front
            tail = bytes(self._rview[start:end])
            end -= start
            if end > size - _BIG_FRAME:
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
        if self._state is _OPEN:
            self._process()
        else:
            self._handshake_step()

    def _process(self) -> None:
        """Decode and hand on every complete frame received, unless reading is paused.

        The one place every frame goes through: a reply or error to its pending future, a
        request or notification to the handler. A frame above ``_BIG_FRAME`` that was read
        into a buffer of its own (:meth:`_partial_frame`) comes first, then the frames in
        the shared buffer. Replies the handler sends while the frames of one read are
        handled leave in one write at the end.
        """
        buf, view = self._rbuf, self._rview
        pos, end = self._rstart, self._rend
        max_length = self._max_frame - 8
        unpack = self._codec.unpack
        pending = self._pending
        request_routes, notification_routes = self._request_routes, self._notification_routes
        while not self._halted:
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
                frame = memoryview(big)  # type: ignore[arg-type]
                request_id, kind_flags = AFTER_LENGTH.unpack_from(frame)
                body = frame[9:]
                owned = True  # a buffer of its own: decoded arrays may be views on it
            else:
                break
            kind = kind_flags & KIND_MASK
            try:
                value = unpack(kind_flags, body, owned)
            except Exception as exc:
                self._undecodable(kind, request_id, exc)
                continue
            if kind == REPLY:
                future = pending.pop(request_id, None)
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
                if future is not None and not future.done():
                    future.set_exception(value)
            else:
                self._protocol_error(f"the peer sent a frame of unknown kind {kind}")
        self._rstart = pos
        if self._wbuf:
            self._write_queued()  # the replies to this read, together

    def _partial_frame(self, pos: int, end: int, length: int) -> int:
        """The frame at ``pos`` is incomplete or invalid; return where parsing stops."""
        if length > self._max_frame - 8 or length < MIN_LENGTH:
            self._protocol_error(
                f"the peer sent a frame of {length + 8} bytes; max_frame_size is {self._max_frame}"
                if length >= MIN_LENGTH
                else f"the peer sent a malformed frame header (length {length})"
            )
            return pos
        if length + 8 > _BIG_FRAME:  # read the rest straight into a buffer of its own
            big = self._big = bytearray(length)
            have = end - pos - 8
            big[:have] = self._rview[pos + 8 : end]
            self._big_filled = have
            return end
        return pos

    def _over_watermark(self) -> None:
        if not self._paused_by_watermark:
            self._paused_by_watermark = True
            self._update_reading()

    def _undecodable(self, kind: int, request_id: int, exc: Exception) -> None:
        logger.debug("cannot decode a frame of kind %d: %r", kind, exc)
        if kind == REQUEST:
            self._incoming += 1
            self.reply_error(request_id, exc)
        elif kind in (REPLY, ERROR):
            future = self._pending.pop(request_id, None)
            if future is not None and not future.done():
                future.set_exception(exc)
        else:
            logger.error("dropped a notification that cannot be decoded: %r", exc)

    # -- handshake ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Called by the loop: start the handshake."""
        self._transport = transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        transport.set_write_buffer_limits(*self._write_limits)
        hello = self._handshake.start()
        if hello:
            transport.write(hello)

    def _handshake_step(self) -> None:
        data = self._rview[self._rstart : self._rend]
        try:
            consumed, reply = self._handshake.feed(data)
        except (_auth.AuthenticationError, ProtocolVersionError) as exc:
            logger.warning("refused a connection: %s", exc)
            if not self.ready.done():
                self.ready.set_exception(exc)
                self.ready.exception()  # retrieved: whoever awaits it still gets it
            self._protocol_error(str(exc))
            return
        finally:
            data.release()
        self._rstart += consumed
        if reply:
            assert self._transport is not None
            self._transport.write(reply)
        if self._handshake.done:
            self._open()

    def _open(self) -> None:
        self._state = _OPEN
        self._halted = self._read_paused
        self._hs_timer.cancel()
        if self._own_codec:
            self._codec.allow_pickle = True  # the peer has proven it holds the secret
        if not self.ready.done():
            self.ready.set_result(None)
        if self._on_open is not None:
            self._on_open(self)
        if self._read_paused:
            return
        self._process()  # frames the peer sent right behind the handshake

    def _handshake_timed_out(self) -> None:
        if self._state < _OPEN:
            self._protocol_error("the peer did not complete the handshake in time")

    # -- closing ------------------------------------------------------------------------

    def _unusable(self) -> ConnectionLostError:
        if self._close_reason is not None:
            return ConnectionLostError(self._close_reason)
        return ConnectionLostError("the connection is not open yet (handshake in progress)")

    def _begin_close(self, reason: str) -> None:
        if self._close_reason is None:
            self._close_reason = reason
        if self._state < _CLOSING:
            self._state = _CLOSING
        self._halted = True

    def _protocol_error(self, reason: str) -> None:
        self._begin_close(reason)
        if self._transport is not None:
            self._transport.abort()

    def close(self) -> None:
        """Flush what is queued and close. Pending requests fail with ``ConnectionLostError``."""
        transport = self._transport
        if transport is not None and not transport.is_closing():
            self._write_queued()
            transport.close()
        self._begin_close("closed by this side")

    def abort(self) -> None:
        """Close at once, dropping what is queued."""
        self._protocol_error("aborted by this side")

    def is_closing(self) -> bool:
        """Whether the connection is closed or closing."""
        return self._state >= _CLOSING

    async def wait_closed(self) -> None:
        """Wait until the connection has ended."""
        await asyncio.shield(self._closed)

    @property
    def close_reason(self) -> str | None:
        """Why the connection ended (or is ending), or ``None`` while it is open."""
        return self._close_reason

    def eof_received(self) -> bool | None:
        """Called by the loop when the peer closed its end: close ours too."""
        self._begin_close("the peer closed the connection")
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        """Called by the loop when the connection has ended: fail everything still waiting."""
        reason = self._close_reason
        if reason is None:
            reason = f"{type(exc).__name__}: {exc}" if exc else "the peer closed the connection"
            self._close_reason = reason
        error = self._close_error = ConnectionLostError(reason)
        if exc is not None:
            error.__cause__ = exc
        self._state = _CLOSED
        self._halted = True
        self._transport = None
        self._hs_timer.cancel()
        self._wbuf.clear()
        self._wsize = 0
        if not self.ready.done():
            failure: ConnectionError = error
            if self._handshake.started:  # refused mid-handshake
                failure = _auth.AuthenticationError(
                    f"the handshake did not complete ({reason}); is the runtime secret right?"
                )
            self.ready.set_exception(failure)
            self.ready.exception()  # retrieved: whoever awaits it still gets it
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(ConnectionLostError(reason))
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(ConnectionLostError(reason))
        if not self._closed.done():
            self._closed.set_result(None)
        if self._on_close is not None:
            self._on_close(self, error)


def _refuse(conn: Connection, request_id: int | None, payload: Any) -> None:
    """The handler of a connection that was given none."""
    raise RuntimeError("this end of the connection takes no requests or notifications")
