"""Heartbeats: over UDP from a thread of each peer's own, beside the ones on its TCP connection.

**Liveness is the process's, not its event loop's.** A peer's loop can be busy for seconds
while the process is fine: an import (tensorboardX imports torch), a file written, a
callback that sleeps. Beats sent from that loop would stop, and the head would drop a live
peer. So each peer (driver or node agent) sends its beats from a :class:`BeatThread` of
its own, which runs while the process runs, whatever its loop does; a dead process is
noticed at once by its closed connection, a peer cut off or stopped (SIGSTOP) by its
silence. Each ping also says how long the peer's loop has gone without running
(``lag_ms``), so the head can say in its log that a member is alive but blocked.

A beat sent on a TCP connection also waits behind any lost segment there, and TCP backs
off exponentially while a link drops packets: on a lossy or flapping link it can arrive
seconds late although the peer is fine. A datagram does not: a lost one costs one beat.
The head answers each ping with a pong, and a peer counts as heard while either path
brings its beats; where UDP is blocked, the TCP beats (sent from the loop) decide alone,
and a loop blocked for longer than the head's ``LOST_AFTER`` then loses its membership.

A datagram is the msgpack array ``[kind, peer id, sequence number, lag_ms, mac]``,
``kind`` being ``"ping"`` (peer to head) or ``"pong"`` (head to peer), ``lag_ms`` how long
the sender's loop has not run (0 in a pong), and ``mac`` the first 16 bytes of
``HMAC-SHA256(token, kind | peer id | sequence | lag_ms)``: one who does not know the
cluster's token cannot keep a dead peer alive, and an old datagram replayed is ignored
(the sequence must grow). Nothing in a datagram is unpickled.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import msgpack

__all__ = ["BeatServer", "BeatThread", "LoopWatch", "open_beat_server"]

logger = logging.getLogger("actorrt")

_MAC_LEN = 16
_READ_TURN = 0.001  # seconds: long enough to be a timer, not a ready callback
_MAX_DATAGRAM = 512


def _mac(token: bytes, kind: str, peer: str, seq: int, lag_ms: int) -> bytes:
    return hmac.digest(token, f"{kind}|{peer}|{seq}|{lag_ms}".encode(), "sha256")[:_MAC_LEN]


def _pack(token: bytes, kind: str, peer: str, seq: int, lag_ms: int = 0) -> bytes:
    packed: bytes = msgpack.packb([kind, peer, seq, lag_ms, _mac(token, kind, peer, seq, lag_ms)])
    return packed


def _unpack(token: bytes, data: bytes, kind: str) -> tuple[str, int, int] | None:
    """``(peer, seq, lag_ms)`` of a genuine datagram of ``kind``, else ``None``."""
    if len(data) > _MAX_DATAGRAM:
        return None
    try:
        fields = msgpack.unpackb(data)
    except Exception:
        return None
    if (
        type(fields) is not list
        or len(fields) != 5
        or fields[0] != kind
        or type(fields[1]) is not str
        or type(fields[2]) is not int
        or type(fields[3]) is not int
        or type(fields[4]) is not bytes
    ):
        return None
    _, peer, seq, lag_ms, mac = fields
    if not hmac.compare_digest(mac, _mac(token, kind, peer, seq, lag_ms)):
        return None
    return peer, seq, lag_ms


class LoopWatch:
    """How long a peer has been silent, counting only the time this loop could hear it.

    A loop that was itself blocked has the peer's beats still unread in its sockets when it
    wakes up; judging silence then would blame the peer for this loop's stall. So a tick
    that comes late by more than ``grace`` starts the count again from that tick, and each
    :meth:`round` lets the loop read its sockets before it ticks: uvloop runs the timers
    that end a round before it polls for I/O, so a round that ended while a callback held
    the loop (for less than ``grace``) would otherwise judge before reading the beats that
    arrived meanwhile.
    """

    def __init__(self, every: float, grace: float) -> None:
        self.every = every
        self.grace = grace
        self._tick = self.resumed = time.monotonic()

    async def round(self) -> float:
        """Wait ``every`` seconds, then for one poll of this loop's sockets; :meth:`tick`."""
        await asyncio.sleep(self.every)
        await asyncio.sleep(_READ_TURN)  # a timer set now fires after the next I/O poll
        return self.tick()

    def tick(self) -> float:
        """Call once per round (every ``every`` seconds); returns the time now."""
        now = time.monotonic()
        if now - self._tick > self.every + self.grace:
            self.resumed = now
        self._tick = now
        return now

    def silent(self, last_heard: float, now: float) -> float:
        """Seconds of silence since ``last_heard`` that this loop was there to hear."""
        return now - max(last_heard, self.resumed)


class BeatServer(asyncio.DatagramProtocol):
    """The head's side: ``heard(peer id, lag in seconds)`` for each genuine ping, answered
    with a pong when it returns true (a peer the head knows)."""

    def __init__(self, token: bytes, heard: Callable[[str, float], bool]) -> None:
        self.token = token
        self.heard = heard
        self.transport: asyncio.DatagramTransport | None = None
        self._last: dict[str, int] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: Any) -> None:
        got = _unpack(self.token, data, "ping")
        if got is None:
            return
        peer, seq, lag_ms = got
        if seq <= self._last.get(peer, -1):
            return  # a replay, or a late duplicate
        self._last[peer] = seq
        if self.heard(peer, lag_ms / 1000) and self.transport is not None:
            self.transport.sendto(_pack(self.token, "pong", peer, seq), addr)

    def forget(self, peer: str) -> None:
        self._last.pop(peer, None)

    def error_received(self, exc: Exception) -> None:
        logger.debug("heartbeat socket: %s", exc)


class BeatThread:
    """A peer's heartbeats to the head at UDP ``host:port``, sent every ``every`` seconds
    from a daemon thread (module docstring).

    The peer's loop calls :meth:`progress` each round; :attr:`heard` is the
    :func:`time.monotonic` time of the last genuine pong. :meth:`close` ends the thread
    within one beat (it closes its own socket).
    """

    def __init__(self, host: str, port: int, token: bytes, peer: str, every: float) -> None:
        self.host = host
        self.port = port
        self.token = token
        self.peer = peer
        self.every = every
        self.heard = 0.0
        self._loop_seen = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"actorrt-beats-{peer}", daemon=True
        )

    def start(self) -> BeatThread:
        self._thread.start()
        return self

    def progress(self) -> None:
        """The peer's loop runs (called from it once a round)."""
        self._loop_seen = time.monotonic()

    def close(self) -> None:
        self._stop.set()

    def _open(self) -> socket.socket | None:
        try:
            family, kind, proto, _, where = socket.getaddrinfo(
                self.host, self.port, type=socket.SOCK_DGRAM
            )[0]
            sock = socket.socket(family, kind, proto)
            sock.connect(where)
        except OSError as exc:
            logger.warning(
                "no UDP heartbeats to %s:%d (%s): TCP beats only", self.host, self.port, exc
            )
            return None
        return sock

    def _run(self) -> None:
        sock = self._open()
        if sock is None:
            return
        seq = acked = 0
        due = time.monotonic()
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if now >= due:
                    seq += 1
                    lag_ms = int(max(now - self._loop_seen, 0.0) * 1000)
                    try:
                        sock.send(_pack(self.token, "ping", self.peer, seq, lag_ms))
                    except OSError:
                        pass  # ICMP unreachable while the head is away: silence says it
                    due = now + self.every
                sock.settimeout(max(due - time.monotonic(), 0.001))
                try:
                    data = sock.recv(_MAX_DATAGRAM + 1)
                except TimeoutError:
                    continue
                except OSError:  # an ICMP error for an earlier ping: wait for the next
                    self._stop.wait(max(due - time.monotonic(), 0.0))
                    continue
                got = _unpack(self.token, data, "pong")
                if got is not None and got[0] == self.peer and acked < got[1] <= seq:
                    acked = got[1]
                    self.heard = time.monotonic()
        finally:
            sock.close()


async def open_beat_server(
    host: str, port: int, token: bytes, heard: Callable[[str, float], bool]
) -> tuple[asyncio.DatagramTransport, BeatServer] | None:
    """Listen for pings on UDP ``host:port``; ``None`` if that cannot be bound (the TCP
    beats then decide alone)."""
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.create_datagram_endpoint(
            lambda: BeatServer(token, heard), local_addr=(host, port)
        )
    except OSError as exc:
        logger.warning("no UDP heartbeats on %s:%d (%s): TCP beats only", host, port, exc)
        return None
    return transport, protocol
