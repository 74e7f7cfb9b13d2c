"""Large arrays over real Unix sockets on uvloop (whose transport writes the caller's memory
as it is, without a copy): an ask's arrays are sent from their own memory, a tell's and a
reply's as they were when sent; receive buffers are reused only once nothing decoded from
them is alive."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest
import uvloop

from actorrt._wire import _auth, _buffers
from actorrt._wire._codec import FLAG_BUFFERS, Codec
from actorrt._wire._connection import Connection
from actorrt._wire._transport import connect_unix, make_private_dir, serve_unix

pytestmark = pytest.mark.timeout(60)

BIG = 32 << 20  # far more than a socket takes at once: most of it is written later


def on_uvloop(scenario: Callable[[str], Awaitable[None]]) -> None:
    folder = make_private_dir(base="/tmp")
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(scenario(os.path.join(folder, "s")))
    finally:
        shutil.rmtree(folder)


async def connected(path: str, handler: Any) -> tuple[Any, Connection]:
    secret = _auth.new_secret()
    server = await serve_unix(path, handler, secret)
    client = await connect_unix(path, secret)
    return server, client


async def closed(server: Any, client: Connection) -> None:
    client.close()
    server.close()
    await server.wait_closed()


def test_a_writable_array_is_packed_from_its_own_memory() -> None:
    array = np.arange(1 << 16, dtype=np.float64)
    flags, _, buffers = Codec().pack(array)
    assert flags & FLAG_BUFFERS and len(buffers) == 1
    assert np.shares_memory(np.frombuffer(buffers[0], np.float64), array)
    assert not buffers[0].readonly


def test_a_fortran_array_is_packed_from_its_memory_and_keeps_its_order() -> None:
    array = np.asfortranarray(np.arange(1 << 18, dtype=np.int32).reshape(512, 512))
    codec = Codec()
    flags, head, buffers = codec.pack(array)
    assert np.shares_memory(np.frombuffer(buffers[0], np.int32), array)
    out = codec.unpack(flags, b"".join([head, *buffers]))
    assert out.flags.f_contiguous and not out.flags.c_contiguous
    np.testing.assert_array_equal(out, array)


def test_a_strided_array_is_copied_once_into_a_buffer_nothing_else_can_change() -> None:
    array = np.arange(1 << 18, dtype=np.float32)[::2]
    _, _, buffers = Codec().pack(array)
    assert buffers[0].readonly and not np.shares_memory(np.frombuffer(buffers[0]), array)


def test_snapshot_copies_the_writable_buffers_and_keeps_the_read_only_ones() -> None:
    writable = np.ones(2 << 20, dtype=np.uint8)
    read_only = np.ones(1 << 16, dtype=np.uint8)
    read_only.flags.writeable = False
    kept = memoryview(read_only)
    taken = _buffers.snapshot([memoryview(writable), kept])
    writable[:] = 2
    assert taken[1] is kept
    assert taken[0].readonly and bytes(taken[0][:4]) == b"\x01" * 4
    assert _buffers.snapshot([kept]) == [kept]


def test_a_receive_buffer_is_reused_only_once_nothing_refers_to_it() -> None:
    def address(buf: Any) -> int:
        return int(np.frombuffer(buf, np.uint8).ctypes.data)

    n = 4 << 20
    first = _buffers.receive_buffer(n)
    first[:] = b"\x01" * n
    held = np.frombuffer(first, np.uint8)[: 1 << 10]  # an array decoded from it, alive
    del first
    second = _buffers.receive_buffer(n)
    at = address(second)
    assert not np.shares_memory(held, np.frombuffer(second, np.uint8))
    del second  # nothing refers to it now: the next frame of its size goes into it
    third = _buffers.receive_buffer(n)
    assert address(third) == at
    fourth = _buffers.receive_buffer(n)  # both kept ones in use: a fresh one
    third[:] = fourth[:] = b"\x02" * n
    assert held[0] == 1 and address(fourth) != at
    assert len(_buffers.receive_buffer(3 * n)) == 3 * n  # too large for a kept one
    assert len(_buffers._received) == _buffers.KEEP


def test_a_tell_goes_as_the_array_was_when_it_was_sent() -> None:
    got: asyncio.Queue[Any] = asyncio.Queue()

    def handler(conn: Connection, request_id: int | None, payload: Any) -> None:
        got.put_nowait(payload)

    async def scenario(path: str) -> None:
        server, client = await connected(path, handler)
        array = np.zeros(BIG, dtype=np.uint8)
        client.notify(array)
        array[:] = 1  # at once: the transport has written a small part of it
        received = await got.get()
        assert received.shape == (BIG,) and not received.any()
        await closed(server, client)

    on_uvloop(scenario)


def test_a_reply_goes_as_the_array_was_when_it_was_answered() -> None:
    answer = np.zeros(BIG, dtype=np.uint8)

    def handler(conn: Connection, request_id: int | None, payload: Any) -> None:
        assert request_id is not None
        conn.reply(request_id, answer)
        answer[:] = 1  # the next call changes what the last one answered

    async def scenario(path: str) -> None:
        server, client = await connected(path, handler)
        received = await client.request("give")
        assert received.shape == (BIG,) and not received.any()
        await closed(server, client)

    on_uvloop(scenario)


def keeping(kept: list[Any], limit: int, answer: Callable[[Any], Any]) -> Any:
    """A handler that keeps the first ``limit`` payloads and answers each with ``answer``."""

    def handler(conn: Connection, request_id: int | None, payload: Any) -> None:
        assert request_id is not None
        if len(kept) < limit:
            kept.append(payload)
        conn.reply(request_id, answer(payload))

    return handler


def test_an_asks_array_may_change_once_it_is_answered() -> None:
    kept: list[Any] = []

    async def scenario(path: str) -> None:
        server, client = await connected(path, keeping(kept, 2, lambda p: int(p[-1])))
        array = np.full(BIG, 3, dtype=np.uint8)
        assert await client.request(array) == 3
        array[:] = 4  # answered: the peer has every byte, in memory of its own
        assert await client.request(array) == 4
        first, second = kept
        assert (first == 3).all() and (second == 4).all()
        assert not np.shares_memory(first, array) and not np.shares_memory(first, second)
        await closed(server, client)

    on_uvloop(scenario)


def test_a_kept_array_is_not_overwritten_by_the_next_frame_of_its_size() -> None:
    kept: list[Any] = []

    async def scenario(path: str) -> None:
        server, client = await connected(path, keeping(kept, 2, lambda p: None))
        for value in range(1, 6):
            await client.request(np.full(BIG // 4, value, dtype=np.uint8))
        assert [set(np.unique(array)) for array in kept] == [{1}, {2}]
        await closed(server, client)

    on_uvloop(scenario)
