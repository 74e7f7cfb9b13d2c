"""Bounded mailboxes: plain tells raise when full, awaitable sends wait, order holds."""

import asyncio
import weakref

import pytest
from conftest import eventually

import actorrt


@actorrt.actor(mailbox_size=3)
class Gated:
    def __init__(self, gate: asyncio.Event, started: asyncio.Event) -> None:
        self.gate = gate
        self.started = started
        self.seen: list[object] = []

    async def hold(self) -> None:
        self.started.set()
        await self.gate.wait()

    def record(self, item: object) -> int:
        self.seen.append(item)
        return len(self.seen)

    def history(self) -> list[object]:
        return list(self.seen)


async def blocked_actor() -> tuple[actorrt.ActorRef[Gated], asyncio.Event]:
    gate, started = asyncio.Event(), asyncio.Event()
    ref = await Gated.spawn(gate, started)
    ref.hold.tell()
    await started.wait()  # the actor is inside hold(); its mailbox is empty again
    return ref, gate


async def test_plain_tell_on_a_full_mailbox_raises(actorrt_runtime: actorrt.Runtime) -> None:
    ref, gate = await blocked_actor()
    for i in range(3):
        ref.record.tell(i)
    with pytest.raises(actorrt.MailboxFullError, match=r"full \(3 messages\).*tell_wait"):
        ref.record.tell(3)
    gate.set()
    assert await ref.history() == [0, 1, 2]


async def test_tell_wait_applies_backpressure_and_keeps_order(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref, gate = await blocked_actor()
    for i in range(3):
        ref.record.tell(i)
    waiting = ref.record.tell_wait(3)
    ask = ref.record(4)  # an ask on a full mailbox waits in line too
    await asyncio.sleep(0)
    assert not waiting.done()
    with pytest.raises(actorrt.MailboxFullError):
        ref.record.tell(5)  # may not overtake the senders waiting for room
    gate.set()
    await waiting
    assert await ask == 5
    assert await ref.history() == [0, 1, 2, 3, 4]


async def test_cancelled_tell_wait_is_never_delivered(actorrt_runtime: actorrt.Runtime) -> None:
    ref, gate = await blocked_actor()
    for i in range(3):
        ref.record.tell(i)
    waiting = ref.record.tell_wait("withdrawn")
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    kept = ref.record.tell_wait("kept")
    gate.set()
    await kept
    assert await ref.history() == [0, 1, 2, "kept"]


async def test_a_million_pipelined_tells_stay_bounded(actorrt_runtime: actorrt.Runtime) -> None:
    @actorrt.actor(mailbox_size=1000)
    class Sink:
        def __init__(self) -> None:
            self.count = 0

        def put(self, _item: int) -> None:
            self.count += 1

        def total(self) -> int:
            return self.count

    sink = await Sink.spawn()
    for i in range(1_000_000):
        try:
            sink.put.tell(i)
        except actorrt.MailboxFullError:
            await sink.put.tell_wait(i)
    assert await sink.total() == 1_000_000


class _Payload:
    """An argument and an answer a weak reference can watch."""


@actorrt.actor
class Keeper:
    def take(self, payload: _Payload) -> _Payload:
        return payload


async def test_an_idle_actor_holds_no_reference_to_its_last_message(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref = await Keeper.spawn()
    payload = _Payload()
    gone = weakref.ref(payload)
    assert await ref.take(payload) is payload
    del payload
    # Nothing here holds it any more: only the actor's serving loop could.
    assert await eventually(lambda: gone() is None), "the idle actor kept its last argument"
    await ref.stop()
