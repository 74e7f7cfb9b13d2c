"""Deadlocks through direct calls between two worker processes are reported as before: the
caller's worker still tells the broker whom it waits on, whichever path its calls take."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from conftest import until_direct

import actorrt

REPORT_BOUND_S = 5.0  # as tests/deadlock/test_deadlock_shapes.py allows on a loaded machine


@actorrt.actor
class Worker:
    def ping(self) -> str:
        return "pong"


@actorrt.actor(process=True, num_cpus=1)
class Peer:
    def __init__(self) -> None:
        self.other: Any = None

    def meet(self, other: Any) -> None:
        self.other = other

    async def ping(self) -> str:
        return "pong"

    async def warm(self, n: int) -> None:
        for _ in range(n):
            await self.other.ping()

    async def ask_other(self) -> str:
        return str(await self.other.ask_back())

    async def ask_back(self) -> str:
        return str(await self.other.ping())

    async def start_worker(self) -> str:
        worker = await Worker.options(num_cpus=1, placement="cluster").spawn()
        return str(await worker.ping())

    async def drive(self) -> str:
        return str(await self.other.start_worker())


async def direct_pair(rt: actorrt.Runtime) -> tuple[Any, Any]:
    """alpha and beta, each knowing the other, their calls to each other direct."""
    a = await Peer.options(name="alpha").spawn()
    b = await Peer.options(name="beta").spawn()
    await a.meet(b)
    await b.meet(a)

    async def both() -> None:
        await a.warm(5)
        await b.warm(5)

    await until_direct(rt, both)
    return a, b


@pytest.mark.actorrt(num_cpus=2)
async def test_an_ask_cycle_through_direct_calls_is_a_deadlock_error(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    a, b = await direct_pair(actorrt_runtime)
    start = time.monotonic()
    with pytest.raises(actorrt.DeadlockError) as caught:
        await asyncio.wait_for(a.ask_other(), 30)
    took = time.monotonic() - start
    text = str(caught.value)
    assert "ask deadlock" in text and "name='alpha'" in text and "name='beta'" in text
    assert took < REPORT_BOUND_S, f"reported after {took:.2f} s"
    assert await a.ping() == "pong" and await b.ping() == "pong"


@pytest.mark.actorrt(num_cpus=2)
async def test_a_modin_style_wait_through_a_direct_call_is_a_resource_deadlock(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    # alpha holds a CPU and waits (a direct call) on beta, which holds the other CPU and
    # waits for a third one: only alpha's wait edge shows that alpha's CPU never comes back.
    a, _beta = await direct_pair(actorrt_runtime)
    before = actorrt_runtime.relayed()["calls"]
    start = time.monotonic()
    with pytest.raises(actorrt.ResourceDeadlockError) as caught:
        await asyncio.wait_for(a.drive(), 30)
    took = time.monotonic() - start
    assert "name='beta'" in str(caught.value), caught.value
    assert took < REPORT_BOUND_S, f"reported after {took:.2f} s"
    assert actorrt_runtime.relayed()["calls"] == before  # the wait was a direct call
