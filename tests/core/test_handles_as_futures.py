"""asyncio's own tools on the handles of inline asks: ``gather``, ``wait``, ``wait_for``,
``shield``, ``as_completed`` and ``ensure_future`` take an inline actor's handle as the future it
is (no task wrapped around each), with the rules of an awaited handle: its answer or its own
error, and a give-up that withdraws a message not begun. Handles that need their await (a
timeout, a worker-process actor) are wrapped by asyncio as any awaitable."""

import asyncio

import pytest

import actorrt


@actorrt.actor
class Worker:
    def __init__(self, gate: asyncio.Event | None = None) -> None:
        self.ran: list[int] = []
        self.gate = gate or asyncio.Event()  # an inline actor shares the test's loop

    def square(self, x: int) -> int:
        self.ran.append(x)
        return x * x

    def fail(self, x: int) -> int:
        raise KeyError(x)

    async def hold(self) -> str:
        await self.gate.wait()
        return "held"

    def history(self) -> list[int]:
        return list(self.ran)


@actorrt.actor(process=True)
class Remote:
    def square(self, x: int) -> int:
        return x * x


async def test_an_inline_handle_is_a_future_to_asyncio(actorrt_runtime: actorrt.Runtime) -> None:
    ref = await Worker.spawn()
    handle = ref.square(3)
    assert asyncio.isfuture(handle)
    assert asyncio.ensure_future(handle) is handle
    assert handle.get_loop() is asyncio.get_running_loop()
    assert await handle == 9
    timed = ref.square.options(timeout=5)(4)
    assert not asyncio.isfuture(timed)  # its timeout needs its await: asyncio wraps it
    assert await asyncio.gather(timed) == [16]


async def test_gather_gives_answers_in_order_and_errors_with_their_type(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    refs = [await Worker.spawn() for _ in range(20)]
    assert await asyncio.gather(*(r.square(i) for i, r in enumerate(refs))) == [
        i * i for i in range(20)
    ]
    with pytest.raises(KeyError):
        await asyncio.gather(refs[0].square(1), refs[1].fail(7))
    got = await asyncio.gather(refs[2].fail(8), refs[3].square(2), return_exceptions=True)
    assert isinstance(got[0], KeyError) and got[1] == 4
    # The same handle twice is one child, as for a future.
    handle = refs[4].square(5)
    assert await asyncio.gather(handle, handle) == [25, 25]


async def test_a_cancelled_gather_withdraws_the_asks_not_begun(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    gate = asyncio.Event()
    ref = await Worker.spawn(gate)
    held = ref.hold()
    queued = [ref.square(i) for i in range(5)]
    gathering = asyncio.gather(held, *queued)
    await asyncio.sleep(0.05)
    gathering.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gathering
    assert all(h.cancelled() for h in queued)
    gate.set()  # the running hold() runs to its end; the withdrawn never run
    assert await ref.history() == []
    results = await asyncio.gather(*queued, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) for r in results)


async def test_wait_returns_the_handles_themselves(actorrt_runtime: actorrt.Runtime) -> None:
    gate = asyncio.Event()
    ref = await Worker.spawn(gate)
    slow, fast = ref.hold(), ref.square(6)
    other = await Worker.spawn()
    quick = other.square(7)
    done, pending = await asyncio.wait([slow, quick], return_when=asyncio.FIRST_COMPLETED)
    assert done == {quick} and pending == {slow}
    assert quick.result() == 49
    gate.set()
    assert await slow == "held" and await fast == 36
    assert [await f for f in asyncio.as_completed([ref.square(2), other.square(3)])] in (
        [4, 9], [9, 4]
    )


async def test_wait_for_and_shield_follow_the_handle(actorrt_runtime: actorrt.Runtime) -> None:
    gate = asyncio.Event()
    ref = await Worker.spawn(gate)
    held = ref.hold()
    behind = ref.square(9)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(behind, 0.05)  # still queued behind hold(): withdrawn
    assert behind.cancelled()
    shielded = ref.square(10)
    outer = asyncio.ensure_future(asyncio.shield(shielded))
    await asyncio.sleep(0)
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert not shielded.cancelled()  # the shield kept the ask
    gate.set()
    assert await held == "held"
    assert await shielded == 100
    assert await ref.history() == [10]


async def test_a_worker_process_handle_is_an_awaitable_that_asyncio_wraps(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref = await Remote.spawn()
    handle = ref.square(5)
    assert not asyncio.isfuture(handle)  # a lost connection is translated by its await
    assert await asyncio.gather(handle, ref.square(6)) == [25, 36]
    await ref.stop()
