"""Run routes: the requests of one message class that arrive together in a batch frame are
handed to the class's run route in one call, in order with everything else, and no further
than the incoming watermark lets them. Real Unix sockets."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest

from actorrt._wire import _auth
from actorrt._wire._codec import FLAG_TOP_TUPLE
from actorrt._wire._dispatcher import Dispatcher, notification, request, request_run
from actorrt._wire._frames import ERROR, REPLY, REQUEST
from actorrt._wire._messages import Call, Stop, Tell, tag_of
from actorrt._wire._transport import Connection, connect_unix, make_private_dir, serve_unix

pytestmark = pytest.mark.timeout(30)

CALL = tag_of(Call)


def answer(conn: Connection, request_id: int, fields: list[Any]) -> None:
    conn.reply(request_id, (fields[2], *fields[3]))  # (method, *args)


async def test_calls_of_one_batch_reach_the_run_route_in_one_call_in_order() -> None:
    directory = make_private_dir(base="/tmp")
    path = os.path.join(directory, "s")
    secret = _auth.new_secret()
    log: list[Any] = []
    runs: list[int] = []

    def on_call(conn: Connection, request_id: int, msg: Call) -> None:
        log.append(("alone", msg.method))
        conn.reply(request_id, (msg.method, *msg.args))

    def on_run(conn: Connection, items: list[Any], start: int, stop: int) -> int:
        at = start
        while at < stop:
            kind_flags, fields = items[at + 1], items[at + 2]
            if kind_flags & 0x0F != REQUEST or type(fields) is not list or fields[0] != CALL:
                break
            log.append(("run", fields[2]))
            answer(conn, items[at], fields)
            at += 3
        runs.append((at - start) // 3)
        return at

    dispatcher = Dispatcher(
        "the test server",
        requests=[request(Call, on_call)],
        notifications=[notification(Tell, lambda conn, msg: log.append(("tell", msg.method)))],
        runs=[request_run(Call, on_run)],
    )
    server = await serve_unix(path, dispatcher, secret)
    client = await connect_unix(path, secret)
    try:
        # One tick: the first call leaves alone, the rest as one batch, split by the tell.
        futures = [client.request(Call("a", "m0", [0], {}))]
        futures += [
            client.request_tagged([CALL, "a", f"m{i}", [i], {}], "the arguments")
            for i in range(1, 11)
        ]
        client.notify(Tell("a", "t", [], {}))
        futures += [client.request(Call("a", f"m{i}", [i], {})) for i in range(11, 16)]
        refused = client.request(Stop("a", None))  # no route for it: refused, in its place
        futures.append(client.request(Call("a", "m16", [16], {})))
        replies = await asyncio.gather(*futures)
        assert replies[:16] == [(f"m{i}", i) for i in range(16)]
        assert replies[16] == ("m16", 16)
        with pytest.raises(ValueError, match="answers only these requests: Call; it got a Stop"):
            await refused
        assert log == [
            ("alone", "m0"),
            *[("run", f"m{i}") for i in range(1, 11)],
            ("tell", "t"),
            *[("run", f"m{i}") for i in range(11, 16)],
            ("run", "m16"),
        ]
        assert runs == [10, 5, 1]
        # A value that cannot be sent fails at the call that sent it, as request() does.
        with pytest.raises(TypeError, match="cannot send the arguments: a value of type"):
            client.request_tagged([CALL, "a", "m", [threading.Lock()], {}], "the arguments")
        assert await client.request(Call("a", "after", [], {})) == ("after",)
    finally:
        client.close()
        server.close()
        await client.wait_closed()
        await server.wait_closed()
        os.rmdir(directory)


async def test_a_run_stops_at_the_incoming_watermark_and_resumes_after_replies() -> None:
    directory = make_private_dir(base="/tmp")
    path = os.path.join(directory, "s")
    secret = _auth.new_secret()
    held: list[tuple[Connection, int, list[Any]]] = []
    runs: list[int] = []
    most = 0
    arrived = asyncio.Event()

    def hold(conn: Connection, request_id: int, fields: list[Any]) -> None:
        nonlocal most
        held.append((conn, request_id, fields))
        most = max(most, conn.unreplied)
        arrived.set()

    def on_call(conn: Connection, request_id: int, msg: Call) -> None:
        hold(conn, request_id, [CALL, *msg])

    def on_run(conn: Connection, items: list[Any], start: int, stop: int) -> int:
        for at in range(start, stop, 3):
            hold(conn, items[at], items[at + 2])
        runs.append((stop - start) // 3)
        return stop

    dispatcher = Dispatcher(
        "the test server", requests=[request(Call, on_call)], runs=[request_run(Call, on_run)]
    )
    server = await serve_unix(path, dispatcher, secret, incoming_limits=(4, 1))
    client = await connect_unix(path, secret)
    try:
        futures = [client.request(Call("a", "m", [i], {})) for i in range(12)]
        answered = 0
        while answered < 12:
            await arrived.wait()
            arrived.clear()
            for _ in range(20):  # reading is paused: nothing more arrives meanwhile
                await asyncio.sleep(0)
            assert most <= 4
            batch, held[:] = list(held), []
            for conn, request_id, fields in batch:
                answer(conn, request_id, fields)
            answered += len(batch)
        assert await asyncio.gather(*futures) == [("m", i) for i in range(12)]
        # The first call came alone; the batch of 11 went no further than the watermark.
        assert runs[0] == 3 and sum(runs) == 11 and max(runs) <= 4
    finally:
        client.close()
        server.close()
        await client.wait_closed()
        await server.wait_closed()
        os.rmdir(directory)


def test_a_run_route_needs_the_request_route_of_its_class() -> None:
    with pytest.raises(ValueError, match="a run route for Call needs its request route"):
        Dispatcher("x", runs=[request_run(Call, lambda conn, items, start, stop: stop)])


async def test_replies_of_one_batch_resolve_in_order_tuples_and_errors_included() -> None:
    directory = make_private_dir(base="/tmp")
    path = os.path.join(directory, "s")
    secret = _auth.new_secret()
    asked: list[int] = []
    all_in = asyncio.Event()

    def handler(conn: Connection, request_id: int | None, payload: Any) -> None:
        assert request_id is not None
        if payload == "after":
            conn.reply(request_id, payload)
            return
        asked.append(request_id)  # answered below, together
        if len(asked) == 6:
            all_in.set()

    server = await serve_unix(path, handler, secret)
    client = await connect_unix(path, secret)
    try:
        futures = [client.request(i) for i in range(6)]
        await all_in.wait()
        (peer,) = server.connections
        a, b, c, d, e, f = asked
        tuple_reply = REPLY | FLAG_TOP_TUPLE
        assert peer.reply_run([
            a, tuple_reply, [1, "x"],  # a tuple, sent as its own frame would send it
            b, REPLY, [1, "x"],  # a list
            c, ERROR, KeyError("c"),
            d, tuple_reply, 5,  # malformed: no array; fails alone
            e, tuple_reply, [],
            f, REPLY, (2, (3,)),
        ])
        results = await asyncio.gather(*futures, return_exceptions=True)
        assert results[0] == (1, "x") and type(results[0]) is tuple
        assert results[1] == [1, "x"]
        assert isinstance(results[2], KeyError)
        assert isinstance(results[3], TypeError)
        assert results[4] == ()
        assert results[5] == (2, (3,))
        assert await client.request("after") == "after"
    finally:
        client.close()
        server.close()
        await client.wait_closed()
        await server.wait_closed()
        os.rmdir(directory)
