"""Generator tasks stream their items to the caller across processes: in order, once, with
backpressure; the function's exception ends the stream; closing the stream stops it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import eventually, wait_until

import actorrt


@actorrt.task
def numbers(n: int, progress: str = "") -> Iterator[int]:
    """Yields 0..n-1, writing how many it has made (and "closed" at its end) to ``progress``."""
    try:
        for i in range(n):
            if progress:
                Path(progress).write_text(str(i + 1))
            yield i
    finally:
        if progress:
            Path(progress + ".closed").write_text("closed")


@actorrt.task(num_cpus=0.5)
async def letters(word: str):  # type: ignore[no-untyped-def]
    for letter in word:
        await asyncio.sleep(0)
        yield letter


@actorrt.task
def fails_after(good: int) -> Iterator[int]:
    yield from range(good)
    raise KeyError("gone bad")


def made(progress: Path) -> int:
    return int(progress.read_text() or 0) if progress.exists() else 0


async def test_a_generator_task_streams_its_items(actorrt_runtime) -> None:
    stream = numbers(100)
    assert isinstance(stream, actorrt.TaskStream)
    assert [x async for x in stream] == list(range(100))
    assert [x async for x in letters("abc")] == ["a", "b", "c"]
    assert [x async for x in numbers(0)] == []
    # Two at once, each in its own worker.
    a, b = numbers(40), letters("xyz")
    assert [x async for x in a] == list(range(40)) and [x async for x in b] == ["x", "y", "z"]


async def test_the_functions_exception_ends_the_stream(actorrt_runtime) -> None:
    got = []
    with pytest.raises(KeyError, match="gone bad"):
        async for x in fails_after(20):
            got.append(x)
    assert got == list(range(20))  # every item made before the error, then the error
    assert [x async for x in numbers(3)] == [0, 1, 2]  # the runner is fine afterwards


@pytest.mark.actorrt(num_cpus=2)
async def test_a_slow_consumer_holds_the_producer_back_and_closing_stops_it(
    actorrt_runtime, tmp_path: Path
) -> None:
    progress = tmp_path / "made"
    stream = numbers(10_000, str(progress))
    assert await stream.__anext__() == 0
    # The first batch (16) came; the second is made while it is read; no more.
    assert await eventually(lambda: made(progress) == 32)
    assert not await eventually(lambda: made(progress) > 32, within=0.5)
    await stream.aclose()
    assert await eventually(lambda: (tmp_path / "made.closed").exists())
    assert made(progress) == 32
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()
    # Its runner went back: every grant is given back once idle runners time out.
    assert await eventually(
        lambda: actorrt.available_resources() == actorrt.cluster_resources()
    )


def test_a_generator_task_streams_to_sync_code(facade, tmp_path: Path) -> None:
    assert list(numbers(50)) == list(range(50))
    with pytest.raises(KeyError, match="gone bad"):
        list(fails_after(2))
    progress = tmp_path / "made"
    stream = numbers(1000, str(progress))
    assert next(stream) == 0
    stream.close()
    assert wait_until(lambda: (tmp_path / "made.closed").exists())
    assert made(progress) <= 32
    assert wait_until(lambda: actorrt.available_resources() == actorrt.cluster_resources())


@actorrt.actor(process=True, num_cpus=1, placement_group=[{"CPU": 1}, {"CPU": 1}])
class Consumer:
    """A worker-process actor whose generator-task calls go into its own group."""

    async def total(self, n: int) -> int:
        return sum([x async for x in numbers(n)])

    def total_sync(self, n: int) -> int:
        return sum(numbers(n))


@pytest.mark.actorrt(num_cpus=2)
async def test_an_actor_consumes_a_generator_task_inside_its_group(actorrt_runtime) -> None:
    consumer = await Consumer.spawn()
    assert await consumer.total(100) == sum(range(100))
    assert await consumer.total_sync(50) == sum(range(50))
    await consumer.stop()
    assert await eventually(
        lambda: actorrt.available_resources() == actorrt.cluster_resources()
    )
