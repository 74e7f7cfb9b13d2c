"""The connection: length-prefixed msgpack frames over a stream socket, multiplexed.

A :class:`Connection` is an :class:`asyncio.BufferedProtocol` that speaks the frames of
:mod:`actorrt._wire._frames` once the handshake of :mod:`actorrt._wire._auth` has succeeded.
This module is its multiplexing and its life: requests and their pending replies, the
handshake, closing and loss. Its two halves are mixins of their own:

* :mod:`actorrt._wire._writer`: encoding, framing, write coalescing per loop tick, the
  sending side's flow control (``drain``);
* :mod:`actorrt._wire._reader`: reading, decoding, handing each frame on (replies to their
  futures, requests and notifications to the handler), the receiving side's flow control.

* **Multiplexing.** :meth:`Connection.request` sends at once and returns a future for the
  reply; replies may come in any order. :meth:`Connection.notify` expects none. Incoming
  requests and notifications go, in the order they were sent, to the connection's handler,
  which replies later (:meth:`Connection.reply`, :meth:`Connection.reply_error`), from anywhere
  on the loop.
* **Loss.** When the connection ends, every pending request fails at once with a
  :class:`ConnectionLostError` that carries the reason.

Nothing is decoded before the handshake of :mod:`actorrt._wire._auth` succeeds; until then incoming
bytes are only read as handshake messages.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from collections import deque
from collections.abc import Callable
from typing import Any, Final, Protocol, cast

from .._errors import ProtocolVersionError
from . import _auth
from ._codec import Codec
from ._frames import BATCH_ITEM, BATCH_ITEM_LEN, KIND_MASK
from ._frames import ERROR as ERROR
from ._frames import HEADER as HEADER
from ._frames import NOTIFY as NOTIFY
from ._frames import REPLY as REPLY
from ._frames import REQUEST as REQUEST
from ._frames import ConnectionLostError as ConnectionLostError
from ._frames import FrameTooLargeError as FrameTooLargeError
from ._reader import READ_BUFFER, FrameReader, Routes, RunRoutes
from ._tls import tcp_channel
from ._writer import (
    BIG_FRAME,
    CLOSED,
    CLOSING,
    DEFAULT_MAX_IN_FLIGHT,
    EAGER_FLUSH,
    HANDSHAKE,
    OPEN,
    Held,
)

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

DEFAULT_MAX_FRAME_SIZE: Final = 1 << 31
DEFAULT_WRITE_LIMITS: Final = (1 << 20, 1 << 18)
DEFAULT_INCOMING_LIMITS: Final = (4096, 1024)
DEFAULT_HANDSHAKE_TIMEOUT: Final = 10.0
MAX_IN_FLIGHT_ENV: Final = "ACTORRT_MAX_BYTES_IN_FLIGHT"


def max_in_flight_bytes(value: int | None = None) -> int:
    """The bound on a connection's bytes in flight: ``value``, else
    ``$ACTORRT_MAX_BYTES_IN_FLIGHT``, else 64 MiB; a clear error for anything but a positive
    whole number of bytes."""
    where = "max_in_flight"
    if value is None:
        text = os.environ.get(MAX_IN_FLIGHT_ENV)
        if text is None:
            return DEFAULT_MAX_IN_FLIGHT
        where = f"${MAX_IN_FLIGHT_ENV}"
        try:
            value = int(text)
        except ValueError:
            raise ValueError(
                f"{where} must be a whole number of bytes (e.g. 67108864), got {text!r}"
            ) from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where} must be a whole number of bytes, got {value!r}")
    if value <= 0:
        raise ValueError(f"{where} must be a positive number of bytes, got {value}")
    return value


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


_NO_ROUTES: Final[Routes] = {}
_NO_RUNS: Final[RunRoutes] = {}
_pack_item = BATCH_ITEM.pack
_BOUND_HINT: Final = " (or a man in the middle relays the TLS connection)"


class Connection(FrameReader):
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
        max_in_flight: the bound, in bytes, on large requests sent and not answered yet
            (:mod:`~actorrt._wire._writer`, "Bytes in flight"); by default
            ``$ACTORRT_MAX_BYTES_IN_FLIGHT`` when set, else 64 MiB.
        handshake_timeout: seconds the peer has to finish the handshake.
        on_open: called once the handshake has succeeded.
        on_close: called once with the :class:`ConnectionLostError` when the connection ends.
        binding: a TLS server's channel binding, its own certificate's fingerprint
            (:func:`~actorrt._wire._tls.cert_fingerprint`); a TLS client takes the one of the
            certificate presented to it, when the connection is made.
    """

    # __slots__ for speed (the halves own theirs: _writer, _reader).
    __slots__ = (
        "_close_error",
        "_close_reason",
        "_closed",
        "_handshake",
        "_hs_expired",
        "_hs_timeout",
        "_hs_timer",
        "_next_id",
        "_on_close",
        "_on_open",
        "_own_codec",
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
        max_in_flight: int | None = None,
        handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
        on_open: Callable[[Connection], None] | None = None,
        on_close: Callable[[Connection, ConnectionLostError], None] | None = None,
        binding: bytes = b"",
    ) -> None:
        if not 0 <= incoming_limits[1] < incoming_limits[0]:
            raise ValueError(
                f"incoming_limits must be (high, low), high > low, not {incoming_limits}"
            )
        self._loop = asyncio.get_running_loop()
        self._handler: Handler = _refuse if handler is None else handler
        routes: Routes | None = getattr(handler, "request_routes", None)
        self._request_routes = _NO_ROUTES if routes is None else routes
        routes = getattr(handler, "notification_routes", None)
        self._notification_routes = _NO_ROUTES if routes is None else routes
        runs: RunRoutes | None = getattr(handler, "request_runs", None)
        self._request_runs = _NO_RUNS if runs is None else runs
        self._handshake = _auth.Handshake(secret, server, binding)
        self._own_codec = codec is None
        self._codec = Codec(allow_pickle=False) if codec is None else codec
        self._max_frame = max_frame_size
        self._write_limits = write_limits
        self._incoming_high, self._incoming_low = incoming_limits
        self._on_open = on_open
        self._on_close = on_close
        self._transport: asyncio.Transport | None = None
        self._state = HANDSHAKE
        self._hs_timeout = handshake_timeout
        self._hs_expired = False
        self._hs_timer = self._loop.call_later(handshake_timeout, self._handshake_timed_out)
        self.ready: asyncio.Future[None] = self._loop.create_future()
        self._closed: asyncio.Future[None] = self._loop.create_future()
        self._close_reason: str | None = None
        self._close_error: ConnectionLostError | None = None
        self._next_id = 1
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._wbuf: list[Any] = []
        self._wsize = 0
        self._batch_at = -1
        self._batch_flags = self._batch_start = 0
        self._flush_scheduled = False
        # Bound once: every loop tick that sends schedules this (speed).
        self._call_soon = self._loop.call_soon
        self._flush_at_tick_end = self._flush
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._max_in_flight = max_in_flight_bytes(max_in_flight)
        self._held: deque[Held] = deque()
        self._unacked: dict[int, int] = {}
        self._unacked_bytes = 0
        self._widened = False
        self._rbuf = bytearray(READ_BUFFER)
        self._rview = memoryview(self._rbuf)
        self._rstart = self._rend = 0
        self._batch: list[Any] | None = None
        self._batch_next = 0
        self._big: bytearray | None = None
        self._big_filled = 0
        self._big_done = False
        self._incoming = 0
        self._paused_by_owner = 0
        self._paused_by_watermark = False
        self._read_paused = False
        self._halted = True  # no frame is dispatched until the handshake succeeds

    def __repr__(self) -> str:
        state = {HANDSHAKE: "handshake", OPEN: "open", CLOSING: "closing"}.get(
            self._state, "closed"
        )
        return f"<actorrt Connection {state}, {len(self._pending)} pending>"

    # -- sending ------------------------------------------------------------------------

    def request(
        self,
        payload: object,
        *,
        context: object = "request",
        tagged: bool = False,
        urgent: bool = False,
    ) -> asyncio.Future[Any]:
        """Send a request now and return a future for its reply.

        Args:
            payload: the request; anything the codec can send.
            context: what the payload is, for the error message if it cannot be sent (any
                object whose ``str()`` says so: it is formatted only then).
            tagged: ``payload`` is a typed message already in its wire form, the list
                ``[tag, *fields]`` (what a sender on the hot path builds instead of the
                message object; the peer decodes it as the message).
            urgent: sent at once, never in line behind requests waiting for room in flight
                (for small control messages whose order against calls does not matter).

        Returns:
            A future that gets the peer's reply, or its exception, or a
            :class:`ConnectionLostError` if the connection ends first. Cancelling it does not
            withdraw the request by itself: :meth:`withdraw` does.

        Raises:
            TypeError: the payload cannot be sent (nothing was sent).
            FrameTooLargeError: the encoded payload exceeds ``max_frame_size``.
            ConnectionLostError: the connection is closed.
        """
        request_id = self._next_id
        self._next_id = request_id + 1
        self._send(REQUEST, request_id, payload, context, tagged, urgent)
        future: asyncio.Future[Any] = self._loop.create_future()
        self._pending[request_id] = future
        return future

    def request_tagged(self, payload: list[Any], context: object) -> asyncio.Future[Any]:
        """``request(payload, context=context, tagged=True)``, for the hot path of asks: a
        message sent in a burst joins the loop tick's open batch right here."""
        request_id = self._next_id
        self._next_id = request_id + 1
        if self._batch_at < 0 or self._held:  # as request() sends it
            self._send(REQUEST, request_id, payload, context, True)
        else:
            if self._state is not OPEN:
                raise self._unusable()
            flags, head, buffers = self._codec.pack_tagged(payload, context)
            if buffers or len(head) > BIG_FRAME:
                self._send_large(
                    REQUEST | flags, request_id, head, buffers, context, False, payload, True
                )
            else:  # into the open batch, as FrameWriter._send puts it there
                wbuf = self._wbuf
                wbuf.append(_pack_item(0xCF, request_id, 0xCC, REQUEST | flags))
                wbuf.append(head)
                self._batch_flags |= flags
                wsize = self._wsize = self._wsize + len(head) + BATCH_ITEM_LEN
                if wsize >= EAGER_FLUSH:
                    self._write_queued()
        future: asyncio.Future[Any] = self._loop.create_future()
        self._pending[request_id] = future
        return future

    def withdraw(self, future: asyncio.Future[Any]) -> int | None:
        """Stop waiting for the reply ``future`` stands for: it is forgotten here (a reply
        that still comes is dropped) and its request id returned, for the caller to tell the
        peer; ``None`` when it is not pending (answered already, or another connection's)
        or when it never left (it waited for room in flight: it is dropped here)."""
        for request_id, pending in self._pending.items():
            if pending is future:
                del self._pending[request_id]
                break
        else:
            return None
        for frame in self._held:
            if frame[1] == request_id and frame[0] & KIND_MASK == REQUEST:
                self._held.remove(frame)
                self._release()  # it may have held up the line
                return None
        if request_id in self._unacked:
            self._acked(request_id)
        return request_id

    def _unsendable(self, kind: int, request_id: int, exc: Exception) -> None:
        """A message that waited for room in flight cannot be encoded now that it leaves."""
        if kind == REQUEST:
            future = self._pending.pop(request_id, None)
            if future is not None and not future.done():
                future.set_exception(exc)
        else:
            logger.error("dropped a notification that cannot be encoded any more: %s", exc)

    def drop_reply(self) -> None:
        """An incoming request will get no reply (its requester withdrew it): it no longer
        counts towards the requests left unreplied that pause reading."""
        self._replied()

    def notify(
        self,
        payload: object,
        *,
        context: object = "notification",
        tagged: bool = False,
        urgent: bool = False,
    ) -> None:
        """Send a message that gets no reply. Takes and raises what :meth:`request` does."""
        self._send(NOTIFY, 0, payload, context, tagged, urgent)

    def reply(self, request_id: int, value: object, *, context: object = "reply") -> None:
        """Answer an incoming request with a value.

        If the value cannot be sent, the requester gets the :class:`TypeError` instead. A reply
        on a closed connection is dropped: its requester has already failed.
        """
        incoming = self._incoming = self._incoming - 1
        if self._paused_by_watermark and incoming <= self._incoming_low:
            self._paused_by_watermark = False
            self._update_reading()
        if self._state is not OPEN:
            return
        try:
            self._send(REPLY, request_id, value, context)
        except (TypeError, FrameTooLargeError) as exc:
            logger.debug("reply to request %d cannot be sent: %s", request_id, exc)
            self._send_error(request_id, exc)

    def reply_run(self, answers: list[Any]) -> bool:
        """Answer several incoming requests at once, in one frame: ``answers`` holds
        ``request_id, REPLY, value`` or ``request_id, ERROR, exception`` for each.

        Returns ``False``, having sent nothing, when they cannot go together (a value that
        cannot be sent, or one that needs a frame of its own): answer each alone then.
        """
        if self._state is OPEN and not self._send_run(answers):
            return False
        incoming = self._incoming = self._incoming - len(answers) // 3
        if self._paused_by_watermark and incoming <= self._incoming_low:
            self._paused_by_watermark = False
            self._update_reading()
        return True

    def reply_error(self, request_id: int, exc: BaseException) -> None:
        """Answer an incoming request with an exception, raised again at the requester."""
        self._replied()
        if self._state is OPEN:
            self._send_error(request_id, exc)

    def _send_error(self, request_id: int, exc: BaseException) -> None:
        try:
            self._send(ERROR, request_id, exc, "exception")
        except (TypeError, FrameTooLargeError):  # a huge message or an unencodable str()
            self._send(ERROR, request_id, RuntimeError(repr(exc)[:10000]), "exception")

    # -- handshake ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Called by the loop: start the handshake."""
        self._transport = transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        transport.set_write_buffer_limits(*self._write_limits)
        peer_binding = tcp_channel(transport)
        if peer_binding is not None:
            self._handshake.on_tcp(peer_binding)
        hello = self._handshake.start()
        if hello:
            transport.write(hello)

    def _handshake_step(self) -> None:
        data = self._rview[self._rstart : self._rend]
        try:
            consumed, reply = self._handshake.feed(data)
        except (_auth.AuthenticationError, ProtocolVersionError) as exc:
            peer = None if self._transport is None else self._transport.get_extra_info("peername")
            origin = f" from {peer[0]} port {peer[1]}" if isinstance(peer, tuple) else ""
            logger.warning("refused a connection%s: %s", origin, exc)
            if not self.ready.done():
                self.ready.set_exception(exc)
                self.ready.exception()  # retrieved: whoever awaits it still gets it
            refusal = self._handshake.refusal
            if refusal and self._transport is not None:  # the client learns why, then EOF
                self._transport.write(refusal)
                self._begin_close(str(exc))
                self._transport.close()
            else:
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
        self._state = OPEN
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
        if self._state < OPEN:
            self._hs_expired = True
            self._protocol_error(
                f"the peer did not complete the handshake within {self._hs_timeout:g} s"
            )

    # -- closing ------------------------------------------------------------------------

    def _unusable(self) -> ConnectionLostError:
        if self._close_reason is not None:
            return ConnectionLostError(self._close_reason)
        return ConnectionLostError("the connection is not open yet (handshake in progress)")

    def _begin_close(self, reason: str) -> None:
        if self._close_reason is None:
            self._close_reason = reason
        if self._state < CLOSING:
            self._state = CLOSING
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
        return self._state >= CLOSING

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
        self._state = CLOSED
        self._halted = True
        self._transport = None
        self._hs_timer.cancel()
        self._wbuf.clear()
        self._wsize = 0
        self._batch_at = -1
        self._held.clear()  # their requests are pending: they fail below
        self._unacked.clear()
        self._unacked_bytes = 0
        if not self.ready.done():
            failure: OSError = error
            if self._hs_expired:
                # Slow is not wrong: the peer accepted and never refused, it did not answer.
                failure = TimeoutError(
                    errno.ETIMEDOUT,
                    f"the handshake did not complete: {reason} (it accepted the connection "
                    "but did not answer in time: it is busy, or it is not an actorrt endpoint)",
                )
            elif self._handshake.started:  # refused mid-handshake
                failure = _auth.AuthenticationError(
                    f"the handshake did not complete ({reason}); is the runtime secret (a "
                    "cluster's token) right?" + _BOUND_HINT * bool(self._handshake.binding)
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
