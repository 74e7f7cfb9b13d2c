"""Connections over real Unix sockets: multiplexing, ordering, limits, flow control, loss, auth."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import stat
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import uvloop

from actorrt._wire import _auth
from actorrt._wire._codec import Codec
from actorrt._wire._connection import HEADER
from actorrt._wire._transport import (
    REQUEST,
    AuthenticationError,
    Connection,
    ConnectionLostError,
    FrameTooLargeError,
    WireServer,
    connect_unix,
    make_private_dir,
    serve_unix,
)

pytestmark = pytest.mark.timeout(30)


def exists(path: str) -> bool:
    return os.path.exists(path)


def echo(conn: Connection, request_id: int | None, payload: Any) -> None:
    if request_id is not None:
        conn.reply(request_id, payload)


@pytest.fixture
def sock_dir() -> Any:
    directory = make_private_dir(base="/tmp")
    yield directory
    for name in os.listdir(directory):
        os.unlink(os.path.join(directory, name))
    os.rmdir(directory)


@pytest.fixture
def secret() -> bytes:
    return _auth.new_secret()


class Pair:
    """A server and one client connected to it, in this process."""

    def __init__(self, server: WireServer, client: Connection) -> None:
        self.server = server
        self.client = client

    @property
    def peer(self) -> Connection:
        (conn,) = self.server.connections
        return conn

    async def close(self) -> None:
        self.client.close()
        self.server.close()
        await self.client.wait_closed()
        await self.server.wait_closed()


async def open_pair(
    sock_dir: str,
    secret: bytes,
    handler: Any = echo,
    server_options: dict[str, Any] | None = None,
    client_options: dict[str, Any] | None = None,
    client_handler: Any = None,
) -> Pair:
    path = os.path.join(sock_dir, "s")
    server = await serve_unix(path, handler, secret, **(server_options or {}))
    client = await connect_unix(path, secret, client_handler, **(client_options or {}))
    while not server.connections:  # the server side opens when the client's proof arrives
        await asyncio.sleep(0)
    return Pair(server, client)


@pytest.fixture
async def pair(sock_dir: str, secret: bytes) -> AsyncIterator[Pair]:
    p = await open_pair(sock_dir, secret)
    yield p
    await p.close()


async def test_request_reply_round_trip(pair: Pair) -> None:
    assert await pair.client.request(("m", (1, "x"), {})) == ("m", (1, "x"), {})
    value = {"a": [1, 2.5, None, b"\x00"], "t": ((),)}
    assert await pair.client.request(value) == value


async def test_the_server_can_call_the_client(sock_dir: str, secret: bytes) -> None:
    p = await open_pair(sock_dir, secret, client_handler=echo)
    assert await p.peer.request("ping") == "ping"
    await p.close()


async def test_replies_can_come_later_and_out_of_order(sock_dir: str, secret: bytes) -> None:
    held: list[tuple[Connection, int, Any]] = []
    all_in = asyncio.Event()

    def hold(conn: Connection, request_id: int | None, payload: Any) -> None:
        assert request_id is not None
        held.append((conn, request_id, payload))
        if len(held) == 100:
            all_in.set()

    p = await open_pair(sock_dir, secret, hold)
    futures = [p.client.request(i) for i in range(100)]
    await all_in.wait()
    assert p.peer.unreplied == 100
    for conn, request_id, payload in reversed(held):
        conn.reply(request_id, payload * 10)
    assert await asyncio.gather(*futures) == [i * 10 for i in range(100)]
    assert p.peer.unreplied == 0
    await p.close()


async def test_ten_thousand_notifications_arrive_in_order(sock_dir: str, secret: bytes) -> None:
    got: list[int] = []
    done = asyncio.Event()

    def collect(conn: Connection, request_id: int | None, payload: Any) -> None:
        got.append(payload)
        if len(got) == 10_000:
            done.set()

    p = await open_pair(sock_dir, secret, collect)
    for i in range(10_000):
        p.client.notify(i)
        if i % 1000 == 0:
            await p.client.drain()
    await done.wait()
    assert got == list(range(10_000))
    await p.close()


async def test_handler_errors_and_unsendable_replies_reach_the_requester(
    sock_dir: str, secret: bytes
) -> None:
    def handler(conn: Connection, request_id: int | None, payload: Any) -> None:
        assert request_id is not None
        if payload == "raise":
            raise KeyError("from the handler")
        if payload != "lock":
            conn.reply(request_id, payload)
            return
        conn.reply(request_id, threading.Lock(), context="the return value of W.m")

    p = await open_pair(sock_dir, secret, handler)
    with pytest.raises(KeyError, match="from the handler") as info:
        await p.client.request("raise")
    assert "Remote traceback" in "".join(info.value.__notes__)
    with pytest.raises(TypeError, match="the return value of W.m.*_thread.lock"):
        await p.client.request("lock")
    with pytest.raises(TypeError, match="argument 1 of W.m"):
        p.client.request(threading.Lock(), context="argument 1 of W.m")
    assert await p.client.request(["still", "fine"]) == ["still", "fine"]
    await p.close()


async def test_a_client_without_handler_refuses_requests(pair: Pair) -> None:
    with pytest.raises(RuntimeError, match="takes no requests"):
        await pair.peer.request("anyone?")


async def test_large_buffers_round_trip(pair: Pair) -> None:
    blob = os.urandom(64 << 20)
    assert await pair.client.request(blob) == blob
    array = np.random.default_rng(2).random((2048, 4096))  # 64 MiB
    out = await pair.client.request(array)
    np.testing.assert_array_equal(out, array)
    out[0, 0] = -1.0  # decoded arrays are writable views on their own frame
    small = await pair.client.request(("mixed", np.arange(5), b"x" * 100_000))
    np.testing.assert_array_equal(small[1], np.arange(5))


async def test_frames_over_the_limit_are_refused_at_the_sender(
    sock_dir: str, secret: bytes
) -> None:
    p = await open_pair(sock_dir, secret, client_options={"max_frame_size": 1 << 20})
    with pytest.raises(FrameTooLargeError, match="argument 1.*max_frame_size=1048576"):
        p.client.request(b"x" * (2 << 20), context="argument 1")
    with pytest.raises(FrameTooLargeError):
        p.client.request(np.zeros(1 << 18))
    assert await p.client.request("small") == "small"
    await p.close()


async def test_frames_over_the_limit_are_refused_at_the_receiver(
    sock_dir: str, secret: bytes
) -> None:
    reasons: asyncio.Queue[ConnectionLostError] = asyncio.Queue()
    p = await open_pair(
        sock_dir,
        secret,
        server_options={
            "max_frame_size": 1 << 20,
            "on_close": lambda conn, error: reasons.put_nowait(error),
        },
    )
    waiting = p.client.request(b"x" * (2 << 20))  # the sender allows it; the receiver does not
    error = await reasons.get()
    assert re.search(r"sent a frame of 20971\d\d bytes; max_frame_size is 1048576", str(error))
    with pytest.raises(ConnectionLostError):
        await waiting
    await p.close()


async def test_connection_loss_fails_every_pending_request(sock_dir: str, secret: bytes) -> None:
    arrived = asyncio.Event()

    def never_reply(conn: Connection, request_id: int | None, payload: Any) -> None:
        if payload == 99:
            arrived.set()

    p = await open_pair(sock_dir, secret, never_reply)
    futures = [p.client.request(i) for i in range(100)]
    await arrived.wait()
    p.peer.abort()
    results = await asyncio.gather(*futures, return_exceptions=True)
    assert all(isinstance(r, ConnectionLostError) for r in results)
    assert {r.reason for r in results} == {"the peer closed the connection"}  # type: ignore[union-attr]
    with pytest.raises(ConnectionLostError):
        p.client.request("after")
    with pytest.raises(ConnectionLostError):
        await p.client.drain()
    await p.close()


async def test_closing_fails_pending_requests_with_the_reason(sock_dir: str, secret: bytes) -> None:
    p = await open_pair(sock_dir, secret, lambda conn, request_id, payload: None)
    waiting = p.client.request("never answered")
    p.client.close()
    with pytest.raises(ConnectionLostError, match="closed by this side"):
        await waiting
    assert p.client.is_closing() and p.client.close_reason == "closed by this side"
    await p.close()


async def test_writes_of_one_tick_are_coalesced(pair: Pair) -> None:
    writes: list[int] = []
    transport: Any = pair.client._transport
    real_write = transport.write
    transport.write = lambda data: (writes.append(len(data)), real_write(data))
    futures = [pair.client.request(i) for i in range(100)]  # about 2.5 KB, one tick
    assert len(writes) == 1  # the tick's first frame leaves at once
    await asyncio.gather(*futures)
    assert len(writes) == 2  # the other 99, together, at the end of the tick


async def test_a_slow_reader_blocks_drain_and_bounds_the_buffers(
    sock_dir: str, secret: bytes
) -> None:
    total = 1_000_000
    received = 0
    producer_blocked = asyncio.Event()
    all_received = asyncio.Event()
    consumer: Connection | None = None

    def slow(conn: Connection, request_id: int | None, payload: Any) -> None:
        nonlocal received
        received += 1
        if received % 100_000 == 0 and received < total:
            # The consumer stops reading until the producer has felt it.
            conn.pause_reading()
            producer_blocked.clear()
            asyncio.get_running_loop().create_task(resume_when_blocked(conn))
        if received == total:
            all_received.set()

    async def resume_when_blocked(conn: Connection) -> None:
        await producer_blocked.wait()
        conn.resume_reading()

    high, low = 256 * 1024, 64 * 1024
    p = await open_pair(sock_dir, secret, slow, client_options={"write_limits": (high, low)})
    consumer = p.peer
    client = p.client
    largest = 0
    blocked = 0
    for i in range(total):
        client.notify(i)
        if i % 64 == 0:
            largest = max(largest, client.write_buffer_size)
            drained = asyncio.ensure_future(client.drain())
            if not drained.done():
                await asyncio.sleep(0)
            if not drained.done():
                blocked += 1
                producer_blocked.set()
            await drained
    await all_received.wait()
    assert received == total and consumer.unreplied == 0
    assert blocked >= 9  # drain blocked at each of the consumer's pauses
    # Queued frames plus the transport's buffer never exceed its high-water mark by more
    # than the one tick's worth of frames queued between two drains.
    assert largest <= 2 * high, largest
    await p.close()


async def test_the_reader_stops_above_the_incoming_watermark(sock_dir: str, secret: bytes) -> None:
    held: list[tuple[Connection, int]] = []
    most = 0
    ten_in = asyncio.Event()

    def hold(conn: Connection, request_id: int | None, payload: Any) -> None:
        nonlocal most
        assert request_id is not None
        held.append((conn, request_id))
        most = max(most, conn.unreplied)
        if len(held) == 10:
            ten_in.set()

    p = await open_pair(sock_dir, secret, hold, server_options={"incoming_limits": (10, 4)})
    futures = [p.client.request(i) for i in range(100)]
    await ten_in.wait()
    replied = 0
    while replied < 100:
        while len(held) <= replied:  # the reader resumes after replies drop to the low mark
            await asyncio.sleep(0)
        conn, request_id = held[replied]
        conn.reply(request_id, request_id)
        replied += 1
    await asyncio.gather(*futures)
    assert most == 10
    await p.close()


# -- authentication and the socket's directory ---------------------------------------------


class Marker:
    """Unpickling this creates a file: proof that a payload was unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> Any:
        return (Path.touch, (Path(self.path),))


def pickle_frame(path: str) -> bytes:
    flags, head, buffers = Codec().pack(Marker(path))
    assert not buffers
    return HEADER.pack(len(head) + 9, 1, REQUEST | flags) + head


async def test_a_pickle_from_an_authenticated_peer_is_unpickled(pair: Pair, tmp_path: Path) -> None:
    """The positive control of the refusal test below: the payload does create the file."""
    marker = tmp_path / "unpickled"
    transport: Any = pair.client._transport
    transport.write(pickle_frame(str(marker)))  # straight onto the authenticated socket
    while not marker.exists():
        await asyncio.sleep(0)


async def test_a_client_without_the_secret_is_refused_before_anything_is_unpickled(
    sock_dir: str, secret: bytes, tmp_path: Path
) -> None:
    calls: list[Any] = []
    path = os.path.join(sock_dir, "s")
    server = await serve_unix(path, lambda *args: calls.append(args), secret)
    marker = tmp_path / "unpickled"
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    await loop.sock_connect(sock, path)
    hello = await loop.sock_recv(sock, _auth.HELLO_LEN)
    assert hello.startswith(_auth.MAGIC)
    forged, _ = _auth.client_response(b"not the secret".ljust(32), hello)
    await loop.sock_sendall(sock, forged + pickle_frame(str(marker)) * 3)
    while await loop.sock_recv(sock, 1024):  # the server hangs up without a word
        pass
    sock.close()
    assert not marker.exists() and not calls and not server.connections
    with pytest.raises(AuthenticationError):
        await connect_unix(path, _auth.new_secret())
    server.close()
    await server.wait_closed()


async def test_a_server_without_the_secret_is_refused_by_the_client(
    sock_dir: str, secret: bytes, tmp_path: Path
) -> None:
    marker = tmp_path / "unpickled"
    path = os.path.join(sock_dir, "fake")

    async def fake_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hello, _ = _auth.server_hello()
        writer.write(hello)
        await reader.readexactly(_auth.RESPONSE_LEN)
        writer.write(os.urandom(_auth.PROOF_LEN) + pickle_frame(str(marker)))
        await writer.drain()
        await reader.read()
        writer.close()

    server = await asyncio.start_unix_server(fake_server, path)
    with pytest.raises(AuthenticationError, match="server failed authentication"):
        await connect_unix(path, secret, echo)
    assert not marker.exists()
    server.close()
    await server.wait_closed()


async def test_a_silent_client_is_dropped_after_the_handshake_timeout(
    sock_dir: str, secret: bytes
) -> None:
    path = os.path.join(sock_dir, "s")
    server = await serve_unix(path, echo, secret, handshake_timeout=0.2)
    reader, writer = await asyncio.open_unix_connection(path)
    assert len(await reader.read()) == _auth.HELLO_LEN  # the hello, then end of file
    writer.close()
    server.close()
    await server.wait_closed()


def test_make_private_dir_is_mode_0700() -> None:
    directory = make_private_dir()
    try:
        st = os.stat(directory)
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid()
    finally:
        os.rmdir(directory)


async def test_serve_unix_refuses_an_open_directory_and_a_long_path(
    tmp_path: Path, secret: bytes
) -> None:
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o755)
    with pytest.raises(PermissionError, match="make_private_dir"):
        await serve_unix(str(open_dir / "s"), echo, secret)
    with pytest.raises(ValueError, match="at most"):
        await serve_unix("/tmp/" + "x" * 200, echo, secret)


async def test_the_socket_file_is_private(sock_dir: str, secret: bytes) -> None:
    path = os.path.join(sock_dir, "s")
    server = await serve_unix(path, echo, secret)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    server.close()
    await server.wait_closed()
    assert not exists(path)


# -- the same under uvloop -----------------------------------------------------------------


def run_on_uvloop(scenario: Callable[[str, bytes], Awaitable[None]], sock_dir: str) -> None:
    async def main() -> None:
        await scenario(sock_dir, _auth.new_secret())

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())


def test_round_trips_under_uvloop(sock_dir: str) -> None:
    async def scenario(sock_dir: str, secret: bytes) -> None:
        p = await open_pair(sock_dir, secret)
        assert await p.client.request(("m", (1, "x"), {})) == ("m", (1, "x"), {})
        array = np.arange(1 << 22, dtype=np.float64)  # 32 MiB, out of band, zero-copy decode
        np.testing.assert_array_equal(await p.client.request(array), array)
        futures = [p.client.request(i) for i in range(5000)]
        assert await asyncio.gather(*futures) == list(range(5000))
        await p.close()

    run_on_uvloop(scenario, sock_dir)


def test_loss_and_refusal_under_uvloop(sock_dir: str) -> None:
    async def scenario(sock_dir: str, secret: bytes) -> None:
        p = await open_pair(sock_dir, secret, lambda conn, request_id, payload: None)
        waiting = p.client.request("never")
        p.peer.abort()
        with pytest.raises(ConnectionLostError):
            await waiting
        with pytest.raises(AuthenticationError):
            await connect_unix(os.path.join(sock_dir, "s"), _auth.new_secret())
        await p.close()

    run_on_uvloop(scenario, sock_dir)
