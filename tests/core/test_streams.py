"""Generator methods stream their items to the caller: in order, once, with backpressure,
inside the actor's mailbox discipline, inline and across processes alike."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import actorrt


@actorrt.actor
class Producer:
    def __init__(self) -> None:
        self.produced = 0
        self.closed = False

    def items(self, n: int):  # type: ignore[no-untyped-def]
        try:
            for i in range(n):
                self.produced += 1
                yield i
        finally:
            self.closed = True

    async def async_items(self, n: int):  # type: ignore[no-untyped-def]
        for i in range(n):
            await asyncio.sleep(0)
            self.produced += 1
            yield i

    @staticmethod
    def letters(word: str):  # type: ignore[no-untyped-def]
        yield from word

    def failing(self, good: int):  # type: ignore[no-untyped-def]
        yield from range(good)
        raise KeyError("gone bad")

    def state(self) -> dict[str, Any]:
        return {"produced": self.produced, "closed": self.closed}

    async def gated(self, n: int, gate: Any):  # type: ignore[no-untyped-def]
        self.log: list[str] = []
        for i in range(n):
            self.log.append("g")
            if i == 1:
                await gate.hold()  # the step waits here, in the middle of its batch
            yield i

    def mark(self) -> None:
        self.log.append("m")

    def read_log(self) -> list[str]:
        return self.log


@pytest.mark.parametrize("process", [False, True], ids=["inline", "process"])
async def test_items_arrive_in_order(actorrt_runtime, process: bool) -> None:
    ref = await Producer.options(process=process).spawn()
    assert [x async for x in ref.items(50)] == list(range(50))
    assert [x async for x in ref.async_items(5)] == list(range(5))
    assert [x async for x in ref.letters("abc")] == ["a", "b", "c"]
    assert [x async for x in ref.items(0)] == []
    assert (await ref.state())["closed"]
    await ref.stop()


@pytest.mark.parametrize("process", [False, True], ids=["inline", "process"])
async def test_an_error_ends_the_stream_with_the_actors_exception(
    actorrt_runtime, process: bool
) -> None:
    ref = await Producer.options(process=process).spawn()
    got = []
    with pytest.raises(KeyError, match="gone bad"):
        async for x in ref.failing(3):
            got.append(x)
    assert got == [0, 1, 2]
    assert [x async for x in ref.letters("ok")] == ["o", "k"]  # the actor goes on
    await ref.stop()


@actorrt.actor(max_concurrency=2)
class Gate:
    def __init__(self) -> None:
        self.arrived, self.opened = asyncio.Event(), asyncio.Event()

    async def hold(self) -> None:
        self.arrived.set()
        await self.opened.wait()

    async def wait_arrived(self) -> None:
        await self.arrived.wait()

    def open(self) -> None:
        self.opened.set()


@pytest.mark.parametrize("process", [False, True], ids=["inline", "process"])
async def test_the_generator_runs_only_inside_its_step_messages(
    actorrt_runtime, process: bool
) -> None:
    ref, gate = await Producer.options(process=process).spawn(), await Gate.spawn()
    stream = ref.gated.options(batch_size=4)(8, gate)
    first = asyncio.ensure_future(stream.__anext__())
    await gate.wait_arrived()  # the first step waits in the middle of its batch
    mark = ref.mark()  # another message meanwhile: it waits for the step to end
    await gate.open()
    await mark
    assert await first == 0 and [x async for x in stream] == list(range(1, 8))
    # The step ran its 4 items, then the other message; the generator never ran beside it.
    assert (await ref.read_log())[:5] == ["g", "g", "g", "g", "m"]
    await ref.stop()
    await gate.stop()


async def test_10000_items_across_processes_with_a_slow_consumer(actorrt_runtime) -> None:
    ref = await Producer.options(process=True).spawn()
    stream = ref.items.options(batch_size=16)(10_000)
    consumed = 0
    most_ahead = 0
    async for x in stream:
        assert x == consumed
        consumed += 1
        if consumed % 500 == 0:
            # The consumer is slower (it stops to ask); the producer may not run away.
            ahead = (await ref.state())["produced"] - consumed
            most_ahead = max(most_ahead, ahead)
    assert consumed == 10_000
    assert most_ahead <= 2 * 16  # at most the batch being read and the one prefetched
    await ref.stop()


@pytest.mark.parametrize("process", [False, True], ids=["inline", "process"])
async def test_closing_the_stream_closes_the_generator(actorrt_runtime, process: bool) -> None:
    ref = await Producer.options(process=process).spawn()
    stream = ref.items.options(batch_size=2)(1_000_000)
    assert [await stream.__anext__() for _ in range(3)] == [0, 1, 2]
    await stream.aclose()
    state = await ref.state()
    assert state["closed"] and state["produced"] <= 6
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()
    await ref.stop()


def test_sync_code_iterates_with_for(facade) -> None:
    ref = actorrt.get(Producer.options(process=True).spawn())
    assert list(ref.items(40)) == list(range(40))
    stream = ref.items(100)
    assert next(stream) == 0
    stream.close()
    assert list(stream) == []
    assert actorrt.get(ref.state())["closed"]  # the close went before this ask


async def test_bad_uses(actorrt_runtime) -> None:
    ref = await Producer.spawn()
    with pytest.raises(TypeError, match="generator method: its items go to the caller"):
        ref.items.tell(3)
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        ref.items.options(batch_size=0)
    with pytest.raises(AttributeError, match="its methods are: async_items, failing, "
                       "gated, items, letters, mark, read_log, state$"):
        ref.nothing  # noqa: B018
    with pytest.raises(RuntimeError, match="use `async for`"):
        next(iter(ref.items(1)))
    await ref.stop()
