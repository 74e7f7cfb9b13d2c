"""The calls of one batch frame, taken by a process's host in one go (its ``Call`` run route):
each is checked, routed and answered as a call that arrived alone would be: into its
actor's mailbox in order, or answered with the error that names what was wrong.
End to end, pipelined calls to process actors go this way
(tests/processes/test_process_reply_runs.py); here the run is handed over directly, to reach
every kind of bad call."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from actorrt import ActorDiedError
from actorrt._core._mailbox import Mailbox
from actorrt._processes._dispatch import Host
from actorrt._processes._proxies import WireReply
from actorrt._wire._codec import FLAG_MESSAGE, FLAG_TUPLES
from actorrt._wire._frames import NOTIFY, REQUEST
from actorrt._wire._messages import Call, MalformedMessage, Tell, tag_of

CALL = tag_of(Call)
ASK = REQUEST | FLAG_MESSAGE


class Conn:
    """Records the answers given now (the queued calls are answered when they run)."""

    def __init__(self) -> None:
        self.errors: dict[int, BaseException] = {}

    def reply_error(self, request_id: int, exc: BaseException) -> None:
        self.errors[request_id] = exc


def cell(name: str, size: int = 100, accepting: bool = True) -> Any:
    return SimpleNamespace(
        inline=True,
        accepting=accepting,
        methods={"echo": None},
        cls_name=name,
        mailbox=Mailbox(size),
        death_error=lambda: ActorDiedError(f"actor {name} has ended", actor=name),
    )


def test_a_run_of_calls_is_routed_and_checked_as_calls_that_came_alone() -> None:
    actors = {"a": cell("A"), "b": cell("B", size=1), "gone": cell("G", accepting=False)}
    runtime = SimpleNamespace(lookup=actors.get, loop=None)
    host = Host(runtime, SimpleNamespace(resolve=lambda actor_id: None))  # type: ignore[arg-type]
    conn = Conn()
    sent = [
        (1, ASK | FLAG_TUPLES, [CALL, "a", "echo", [(1, "x")], {}]),
        (2, ASK, [CALL, "b", "echo", [2], {"k": 2}]),
        (3, ASK, [CALL, "a", "echo", [3], {}]),  # back to the first actor
        (4, ASK, [CALL, "b", "echo", [4], {}]),  # b's mailbox is full: it waits in line
        (5, ASK, [CALL, 7, "echo", [], {}]),
        (6, ASK, [CALL, "a"]),
        (7, ASK, [CALL, "a", "echo", {}, {}]),
        (8, ASK, [CALL, "nobody", "echo", [], {}]),
        (9, ASK, [CALL, "a", "nope", [], {}]),
        (10, ASK, [CALL, "gone", "echo", [], {}]),
        (11, ASK, [CALL, "a", "echo", [11], {}]),
        (0, NOTIFY | FLAG_MESSAGE, [tag_of(Tell), "a", "echo", [], {}]),  # ends the run
        (12, ASK, [CALL, "a", "echo", [12], {}]),
    ]
    items = [field for message in sent for field in message]
    assert host.dispatcher.request_runs[CALL](conn, items, 0, len(items)) == 33  # the Tell's

    queued_a = list(actors["a"].mailbox.queue)
    assert [(name, args, kwargs) for name, args, kwargs, _reply in queued_a] == [
        ("echo", [(1, "x")], {}),
        ("echo", [3], {}),
        ("echo", [11], {}),
    ]
    assert all(type(reply) is WireReply for *_, reply in queued_a)
    assert [reply._request_id for *_, reply in queued_a] == [1, 3, 11]
    b = actors["b"].mailbox
    assert [envelope[:3] for envelope in b.queue] == [("echo", [2], {"k": 2})]
    assert [envelope[:3] for envelope, _admitted in b.overflow] == [("echo", [4], {})]

    errors = conn.errors
    assert sorted(errors) == [5, 6, 7, 8, 9, 10]
    assert isinstance(errors[5], MalformedMessage)
    assert "malformed Call message: field 'actor_id' is int" in str(errors[5])
    assert "malformed Call message: 1 fields, expected 4" in str(errors[6])
    assert "field 'args' is dict" in str(errors[7])
    assert isinstance(errors[8], ActorDiedError) and "no longer exists" in str(errors[8])
    assert isinstance(errors[9], AttributeError)
    assert "actor class A has no public method 'nope'" in str(errors[9])
    assert isinstance(errors[10], ActorDiedError) and "actor G has ended" in str(errors[10])


def test_a_run_ends_where_its_caller_says() -> None:
    actors = {"a": cell("A")}
    runtime = SimpleNamespace(lookup=actors.get, loop=None)
    host = Host(runtime, SimpleNamespace(resolve=lambda actor_id: None))  # type: ignore[arg-type]
    items = [i for n in range(5) for i in (n + 1, ASK, [CALL, "a", "echo", [n], {}])]
    run = host.dispatcher.request_runs[CALL]
    assert run(Conn(), items, 0, 6) == 6  # the watermark let two through
    assert run(Conn(), items, 6, len(items)) == len(items)
    assert [envelope[1] for envelope in actors["a"].mailbox.queue] == [[n] for n in range(5)]


@pytest.mark.parametrize("bad", [None, [], ["not a tag"]])
def test_what_is_no_call_is_left_to_the_connection(bad: Any) -> None:
    host = Host(
        SimpleNamespace(lookup=lambda actor_id: None, loop=None),  # type: ignore[arg-type]
        SimpleNamespace(resolve=lambda actor_id: None),  # type: ignore[arg-type]
    )
    items = [1, ASK, [CALL, "x", "echo", [], {}], 2, ASK, bad]
    conn = Conn()
    assert host.dispatcher.request_runs[CALL](conn, items, 0, 6) == 3
    assert isinstance(conn.errors[1], ActorDiedError)
