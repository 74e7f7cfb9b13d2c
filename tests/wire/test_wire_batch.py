"""Batch frames: the messages one loop tick sends after its first leave as one frame, which the
peer decodes in one go; order, kinds, values, undecodable messages and pauses are as with
frames of their own. Real Unix sockets."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from actorrt._wire import _auth
from actorrt._wire._frames import BATCH, HEADER, KIND_MASK, REQUEST
from actorrt._wire._messages import Call, tag_of
from actorrt._wire._transport import (
    Connection,
    WireServer,
    connect_unix,
    make_private_dir,
    serve_unix,
)

pytestmark = pytest.mark.timeout(30)


def kinds_of(data: bytes) -> list[int]:
    """The kinds of the frames in ``data`` (whole frames only)."""
    kinds, pos = [], 0
    while pos < len(data):
        length, _request_id, kind_flags = HEADER.unpack_from(data, pos)
        kinds.append(kind_flags & KIND_MASK)
        pos += 8 + length
    return kinds


class Refuses:
    """Its pickle loads only where the loading end allows it (never, here)."""

    def __reduce__(self) -> Any:
        return (_refuse_to_load, ())


def _refuse_to_load() -> None:
    raise LookupError("this value cannot be rebuilt here")


@pytest.fixture
async def ends() -> AsyncIterator[tuple[WireServer, Connection, list[Any]]]:
    directory = make_private_dir(base="/tmp")
    path = os.path.join(directory, "s")
    secret = _auth.new_secret()
    seen: list[Any] = []

    def handler(conn: Connection, request_id: int | None, payload: Any) -> None:
        seen.append(payload)
        if request_id is not None:
            conn.reply(request_id, payload)

    server = await serve_unix(path, handler, secret)
    client = await connect_unix(path, secret)
    while not server.connections:
        await asyncio.sleep(0)
    yield server, client, seen
    client.close()
    server.close()
    await client.wait_closed()
    await server.wait_closed()
    os.rmdir(directory)


async def test_a_tick_leaves_as_one_frame_and_one_batch_in_order(
    ends: tuple[WireServer, Connection, list[Any]],
) -> None:
    _server, client, seen = ends
    written: list[bytes] = []
    transport: Any = client._transport
    real_write = transport.write
    transport.write = lambda data: (written.append(bytes(data)), real_write(data))
    values: list[Any] = [
        ("top", "tuple"),
        {"nested": [(1, 2), ((3,),)], 7: "an int key"},
        [1, 2.5, None, b"\x00"],
        Call("a1", "echo", [(1, "x")], {"k": (2,)}),
        "plain",
    ]
    futures = []
    for i, value in enumerate(values * 20):
        if i % 7 == 3:
            client.notify(("note", i))
        else:
            futures.append(client.request(value))
    replies = await asyncio.gather(*futures)
    sent = [v for i, v in enumerate(values * 20) if i % 7 != 3]
    assert replies == sent  # every value and type as sent: tuples, messages, int keys
    assert seen == [("note", i) if i % 7 == 3 else v for i, v in enumerate(values * 20)]
    assert [type(r) for r in replies] == [type(v) for v in sent]  # Call stays Call
    assert kinds_of(b"".join(written)) == [REQUEST, BATCH]  # one frame, then the batch


async def test_an_undecodable_message_in_a_batch_fails_alone(
    ends: tuple[WireServer, Connection, list[Any]],
) -> None:
    _server, client, _seen = ends
    futures = [client.request(i) for i in range(5)]
    bad = client.request(Refuses())
    futures += [client.request(i) for i in range(5, 10)]
    client.notify(Refuses())  # dropped (and logged) by the peer; the rest still arrive
    last = client.request("last")
    assert await asyncio.gather(*futures) == list(range(10))
    with pytest.raises(LookupError, match="cannot be rebuilt here"):
        await bad
    assert await last == "last"


async def test_reading_paused_inside_a_batch_resumes_where_it_stopped() -> None:
    directory = make_private_dir(base="/tmp")
    path = os.path.join(directory, "s")
    secret = _auth.new_secret()
    got: list[int] = []
    paused = asyncio.Event()

    def handler(conn: Connection, request_id: int | None, payload: Any) -> None:
        assert request_id is None
        got.append(payload)
        if payload in (5, 40):
            conn.pause_reading()  # e.g. a full mailbox: nothing after it is handed on
            paused.set()

    server = await serve_unix(path, handler, secret)
    client = await connect_unix(path, secret)
    while not server.connections:
        await asyncio.sleep(0)
    (peer,) = server.connections
    for i in range(100):
        client.notify(i)  # one frame and a batch of 99
    for stop in (5, 40):
        await paused.wait()
        paused.clear()
        for _ in range(20):
            await asyncio.sleep(0)
        assert got[-1] == stop  # nothing was handed on while paused
        peer.resume_reading()
    while len(got) < 100:
        await asyncio.sleep(0.01)
    assert got == list(range(100))
    client.close()
    server.close()
    await client.wait_closed()
    await server.wait_closed()
    os.rmdir(directory)


async def test_a_large_message_inside_a_tick_keeps_its_place(
    ends: tuple[WireServer, Connection, list[Any]],
) -> None:
    _server, client, seen = ends
    big = b"x" * (1 << 17)  # above 64 KiB: a frame of its own, never batched
    client.notify("first")
    client.notify("second")
    client.notify(big)
    client.notify("after")
    assert await client.request("done") == "done"
    assert seen == ["first", "second", big, "after", "done"]


async def test_a_message_sent_in_its_wire_form_arrives_as_the_message(
    ends: tuple[WireServer, Connection, list[Any]],
) -> None:
    _server, client, seen = ends
    call = [tag_of(Call), "a1", "echo", [(1, "x")], {"k": 2}]
    assert await client.request(call, tagged=True) == Call("a1", "echo", [(1, "x")], {"k": 2})
    client.notify([tag_of(Call), "a2", "m", [], {}], tagged=True)
    assert await client.request("sync") == "sync"
    assert seen[1] == Call("a2", "m", [], {}) and type(seen[1]) is Call
    with pytest.raises(TypeError, match="cannot send the arguments: a value of type"):
        client.request(
            [tag_of(Call), "a1", "m", [threading.Lock()], {}], tagged=True, context="the arguments"
        )
