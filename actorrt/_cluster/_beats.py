"""Heartbeats over UDP, beside the ones on each peer's TCP connection.

A beat sent on a TCP connection waits behind any lost segment there, and TCP backs off
exponentially while a link drops packets: on a lossy or flapping link a beat can arrive
seconds late although the peer is fine. So every peer also sends each beat as a datagram
to the head's UDP port (the same number as its TCP port), and the head answers each with
one of its own: a lost datagram costs one beat, never more. A peer counts as heard while
either path brings its beats; where UDP is blocked, the TCP beats alone decide.

A datagram is the msgpack array ``[kind, peer id, sequence number, mac]``, ``kind`` being
``"ping"`` (peer to head) or ``"pong"`` (head to peer), and ``mac`` the first 16 bytes of
``HMAC-SHA256(token, kind | peer id | sequence)``: one who does not know the cluster's token
cannot keep a dead peer alive, and an old datagram replayed is ignored (the sequence must
grow). Nothing in a datagram is unpickled.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable
from typing import Any

import msgpack

__all__ = ["BeatClient", "BeatServer", "open_beat_client", "open_beat_server"]

logger = logging.getLogger("actorrt")

_MAC_LEN = 16
_MAX_DATAGRAM = 512


def _mac(token: bytes, kind: str, peer: str, seq: int) -> bytes:
    return hmac.digest(token, f"{kind}|{peer}|{seq}".encode(), "sha256")[:_MAC_LEN]


def _pack(token: bytes, kind: str, peer: str, seq: int) -> bytes:
    packed: bytes = msgpack.packb([kind, peer, seq, _mac(token, kind, peer, seq)])
    return packed


def _unpack(token: bytes, data: bytes, kind: str) -> tuple[str, int] | None:
    """``(peer, seq)`` of a genuine datagram of ``kind``, else ``None``."""
    if len(data) > _MAX_DATAGRAM:
        return None
    try:
        fields = msgpack.unpackb(data)
    except Exception:
        return None
    if (
        type(fields) is not list
        or len(fields) != 4
        or fields[0] != kind
        or type(fields[1]) is not str
        or type(fields[2]) is not int
        or type(fields[3]) is not bytes
    ):
        return None
    _, peer, seq, mac = fields
    if not hmac.compare_digest(mac, _mac(token, kind, peer, seq)):
        return None
    return peer, seq


class BeatServer(asyncio.DatagramProtocol):
    """The head's side: ``heard(peer id)`` for each genuine ping, answered with a pong
    when it returns true (a peer the head knows)."""

    def __init__(self, token: bytes, heard: Callable[[str], bool]) -> None:
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
        peer, seq = got
        if seq <= self._last.get(peer, -1):
            return  # a replay, or a late duplicate
        self._last[peer] = seq
        if self.heard(peer) and self.transport is not None:
            self.transport.sendto(_pack(self.token, "pong", peer, seq), addr)

    def forget(self, peer: str) -> None:
        self._last.pop(peer, None)

    def error_received(self, exc: Exception) -> None:
        logger.debug("heartbeat socket: %s", exc)


class BeatClient(asyncio.DatagramProtocol):
    """A peer's side: :meth:`beat` sends a ping; ``heard()`` is called for each pong."""

    def __init__(self, token: bytes, peer: str, heard: Callable[[], None]) -> None:
        self.token = token
        self.peer = peer
        self.heard = heard
        self.transport: asyncio.DatagramTransport | None = None
        self._seq = 0
        self._acked = -1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def beat(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self._seq += 1
            self.transport.sendto(_pack(self.token, "ping", self.peer, self._seq))

    def datagram_received(self, data: bytes, addr: Any) -> None:
        got = _unpack(self.token, data, "pong")
        if got is None or got[0] != self.peer or not self._acked < got[1] <= self._seq:
            return
        self._acked = got[1]
        self.heard()

    def error_received(self, exc: Exception) -> None:
        pass  # ICMP unreachable while the head is away: the beats say the rest

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def open_beat_server(
    host: str, port: int, token: bytes, heard: Callable[[str], bool]
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


async def open_beat_client(
    host: str, port: int, token: bytes, peer: str, heard: Callable[[], None]
) -> BeatClient | None:
    """A peer's heartbeat socket towards the head at UDP ``host:port``."""
    loop = asyncio.get_running_loop()
    try:
        _, protocol = await loop.create_datagram_endpoint(
            lambda: BeatClient(token, peer, heard), remote_addr=(host, port)
        )
    except OSError as exc:
        logger.warning("no UDP heartbeats to %s:%d (%s): TCP beats only", host, port, exc)
        return None
    return protocol
