"""Typed messages: their encoding, the checks on what arrives, and the dispatcher's table, over
real Unix sockets."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import msgpack
import pytest

from actorrt import ActorDiedError, DeadlockError
from actorrt._wire import _auth, _messages
from actorrt._wire._codec import FLAG_MESSAGE, Codec
from actorrt._wire._dispatcher import Dispatcher, notification, request
from actorrt._wire._messages import (
    PROTOCOL_VERSION,
    AskDeadlock,
    Call,
    Died,
    MalformedMessage,
    Ping,
    Spawn,
    Status,
    Stop,
    Tell,
    from_wire,
)
from actorrt._wire._refs import RefAddress, WireRef, decode_ref, encode_ref
from actorrt._wire._transport import Connection, connect_unix, make_private_dir, serve_unix

pytestmark = pytest.mark.timeout(30)

EXAMPLES: list[_messages.Message] = [
    Call("ab-1", "train", [1, (2, "x"), {"k": [3]}], {"lr": 0.1}),
    Tell("ab-1", "record", [], {}),
    _messages.CancelCall("ab-1", 7),
    Stop("ab-1", 2.5),
    Stop("ab-1", None),
    _messages.Kill("ab-1", None),
    _messages.Kill("ab-1", "node lost"),
    _messages.WaitStopped("ab-1"),
    Spawn("ab-2", "a class", [1], {}, 3, {"CPU": 1.0}, ("g1", [{"CPU": 1.0}], "PACK", 0)),
    Spawn("ab-2", "a class", [], {}, 0, None, None),
    _messages.SpawnProcess("a class", [1], {"a": 2}, [("w-3", "Helper(id=w-3)")], False, "t1"),
    _messages.SpawnCancel("t1"),
    _messages.GetActor("trainer"),
    _messages.Hello("123.1", 4567),
    Ping(),
    Died("ab-1", ActorDiedError("it ended", actor="A(id=ab-1)", reason="crashed")),
    _messages.Restarted("ab-1"),
    _messages.Retire("ab-1", "1 thread(s) ('Thread-1')"),
    _messages.WaitEdge("ab-1", "ab-2", True, False),
    AskDeadlock("ab-1", "ab-2", DeadlockError("a cycle")),
    _messages.ReserveGroup("w-g1", [{"CPU": 1.0}, {"GPU": 1.0}], "SPREAD", None),
    _messages.GroupReady("w-g1", "ab-1"),
    _messages.GroupRemove("w-g1"),
    Status(),
    _messages.JoinNode("n1", "10.0.0.2", 40001, {"CPU": 8.0, "GPU": 2.0}, ["0", "1"], 77),
    _messages.JoinDriver("ab", "10.0.0.9", 78),
    _messages.Beat(),
    _messages.NodeUp({"node_id": "n1", "host": "10.0.0.2", "port": 40001}),
    _messages.NodeDown("n1", "nothing heard from it for 2.1 s"),
    _messages.Claim("ab/r1", "ab/ab-1", {"CPU": 1.0}, None, "PACK", "auto", None, False),
    _messages.Claim("ab/r2", "ab/driver", None, [{"CPU": 1.0}], "SPREAD", ["ab/r1", 0],
                    "ab/ab-1", True),
    _messages.Withdraw("ab/r1"),
    _messages.ReleaseHolder("ab/ab-1"),
    _messages.SetParent("ab/ab-2", "ab/ab-1"),
    _messages.Blocked("ab/ab-1", "ab/r1", None, True, True),
    _messages.Grant("ab/r1", "ab/ab-1", [["n1", {"CPU": 1.0}, [["0", 1.0]], None, None]], None),
    _messages.Deny("ab/r1", "ab/ab-1", DeadlockError("never")),
    _messages.Revoke("ab/r1", "ab/ab-1", None, "n1"),
    _messages.Deadlocked("ab/ab-1", "ab/ab-2", DeadlockError("a cycle")),
    _messages.Stall("ab/r1", "ab/ab-1", "waits for CPU"),
    _messages.View({"CPU": 8.0}, {"CPU": 7.0}, []),
    _messages.ClusterStatus(),
    _messages.StartWorker("9.1", {"OMP_NUM_THREADS": "1"}, "/tmp", {"tcp": ["10.0.0.9", 5]}),
    _messages.KillWorker("9.1"),
    _messages.WorkerOutput("9.1", 1, "hello\n"),
    _messages.WorkerExit("9.1", -9),
    _messages.Leave("the head dropped this driver: nothing heard from it for 2.1 s"),
    _messages.Locate("a1b2c3d4-7", "unix"),
    _messages.PeerEndpoint(),
]


def test_every_message_class_has_an_example_and_a_tag_of_its_own() -> None:
    classes = set(_messages.Message.__args__)  # type: ignore[attr-defined]
    assert {type(m) for m in EXAMPLES} == classes
    tags = [_messages.tag_of(cls) for cls in classes]
    assert None not in tags and len(set(tags)) == len(tags)
    assert isinstance(PROTOCOL_VERSION, int) and 2 <= PROTOCOL_VERSION <= 255


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_a_message_round_trips_as_its_own_class(message: _messages.Message) -> None:
    codec = Codec()
    flags, head, _ = codec.pack(message)
    assert flags & FLAG_MESSAGE
    body = msgpack.unpackb(head, ext_hook=lambda code, data: None)
    assert body[0] == _messages.tag_of(type(message))  # the tag first, then the fields
    decoded = codec.unpack(flags, head)
    assert type(decoded) is type(message)
    for field, value in zip(message._fields, message, strict=True):
        got = getattr(decoded, field)
        if isinstance(value, BaseException):
            assert type(got) is type(value) and str(got) == str(value)
        else:
            assert got == value


def test_an_unknown_tag_a_wrong_count_or_a_wrong_field_type_is_refused_by_name() -> None:
    with pytest.raises(MalformedMessage, match=r"unknown message type tag 250 \(protocol"):
        from_wire([250, "x"])
    with pytest.raises(MalformedMessage, match=r"malformed Call message: 2 fields, expected 4"):
        from_wire([_messages.tag_of(Call), "ab-1", "m"])
    with pytest.raises(
        MalformedMessage, match=r"malformed Call message: field 'args' is dict \{\}, expected list"
    ):
        from_wire([_messages.tag_of(Call), "ab-1", "m", {}, {}])
    with pytest.raises(MalformedMessage, match=r"field 'grace' is str 'soon'"):
        from_wire([_messages.tag_of(Stop), "ab-1", "soon"])
    with pytest.raises(MalformedMessage, match="must be an array"):
        from_wire("call")


def test_a_ref_carries_its_address() -> None:
    ref = WireRef(RefAddress("rt1", "99.2"), "rt1-7", "Trainer", ["fit", "stop"], "t0")
    assert decode_ref(encode_ref(ref)) == ref
    owner = ref._replace(address=RefAddress("rt1", None), name=None)
    assert decode_ref(encode_ref(owner)) == owner
    old_form = msgpack.packb(("rt1-7", "Trainer", ["fit"], None))  # protocol version 1's
    with pytest.raises(MalformedMessage, match="in a form this end does not know"):
        decode_ref(old_form)


# ------------------------------------------------------------------ over a real socket


@pytest.fixture
def sock_path() -> Any:
    directory = make_private_dir(base="/tmp")
    yield os.path.join(directory, "s")
    for name in os.listdir(directory):
        os.unlink(os.path.join(directory, name))
    os.rmdir(directory)


class RawCodec(Codec):
    """Sends any array flagged as a message: what a confused or hostile peer might send."""

    def pack(self, obj: object, context: object = "value") -> tuple[int, bytes, list[Any]]:
        if isinstance(obj, list):
            return FLAG_MESSAGE, msgpack.packb(obj), []
        return super().pack(obj, context)


async def test_the_dispatcher_routes_by_type_and_refuses_what_its_table_lacks(
    sock_path: str,
) -> None:
    secret = _auth.new_secret()
    calls: list[Call] = []
    tells: asyncio.Queue[Tell] = asyncio.Queue()

    def on_call(conn: Connection, request_id: int, msg: Call) -> None:
        calls.append(msg)
        conn.reply(request_id, (msg.method, *msg.args))

    dispatcher = Dispatcher(
        "the test server",
        requests=[request(Call, on_call)],
        notifications=[notification(Tell, lambda conn, msg: tells.put_nowait(msg))],
    )
    server = await serve_unix(sock_path, dispatcher, secret)
    client = await connect_unix(sock_path, secret, codec=RawCodec())
    try:
        assert await client.request(Call("a-1", "add", [1, 2], {})) == ("add", 1, 2)
        assert type(calls[0]) is Call and calls[0].kwargs == {}
        client.notify(Tell("a-1", "log", ["x"], {}))
        assert await tells.get() == Tell("a-1", "log", ["x"], {})

        with pytest.raises(ValueError, match="answers only these requests: Call; it got a Tell"):
            await client.request(Tell("a-1", "log", [], {}))
        with pytest.raises(ValueError, match="it got a plain tuple \\('call', 'a-1'"):
            await client.request(("call", "a-1", "add", [1, 2], {}))  # the old protocol's form
        with pytest.raises(ValueError, match="unknown message type tag 200"):
            await client.request([200, "a-1"])
        with pytest.raises(ValueError, match="malformed Call message: field 'actor_id' is int"):
            await client.request([_messages.tag_of(Call), 7, "add", [], {}])
        assert len(calls) == 1  # none of the refused ones reached the handler
        # The connection is still good after every refusal.
        assert await client.request(Call("a-1", "add", [3], {})) == ("add", 3)
    finally:
        client.close()
        server.close()
        await server.wait_closed()
